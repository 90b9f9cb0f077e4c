"""End-to-end: ./train --trace on a mesh.

Compiles CONFIG for --mesh, trains --steps steps under mpirun with --trace,
and checks each rank's file: it loads as Chrome trace JSON; every launch of
both compiled entries of every step is there; on each stream, events are
in time order and do not overlap; every collective sits on the
communication stream (tid 1) with its bytes, and the all-gathers of a
micro-step move at least this rank's shard of every parameter (counted
from the config, independently of the compiler). The trainer prints the
exposed-communication line. --compile-flags builds for another target
(--target cuda --cuda-emulation: CUDA events around each launch, here the
emulated device's, which keep host time).
"""
import argparse
import json
import math
import os
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402
from harness import MPIRUN, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--compile-flags", default="")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    exe = os.path.join(args.workdir, "train")
    run([args.shardc, args.config, "--mesh", str(args.ranks), "--micro-batch", "2",
         "--seq-len", "16", "-o", exe] + shlex.split(args.compile_flags))
    trace = os.path.join(args.workdir, "trace.json")
    out = run(MPIRUN + ["-np", str(args.ranks), exe, "--steps", str(args.steps),
                        "--trace", trace])
    line = next((l for l in out.splitlines() if l.startswith("communication:")), None)
    if not line:
        sys.exit("no exposed-communication line:\n" + out)
    print(line.split(" on rank")[0] + " ... exposed: printed")
    c = tm.load_config(args.config)
    shard_bytes = sum(4 * math.ceil(s[0] / args.ranks) * math.prod(s[1:])
                      for s in tm.param_shapes(c).values())
    for r in range(args.ranks):
        path = trace if r == 0 else f"{trace}.rank{r}"
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        xs = [e for e in events if e["ph"] == "X"]
        by_lane = {}
        for e in xs:
            by_lane.setdefault((e["pid"], e["tid"]), []).append(e)
        for lane, es in by_lane.items():
            for a, b in zip(es, es[1:]):
                # Times come from cudaEventElapsedTime, a float of ms: a
                # few of its ulps (0.03 us at 268 ms, when the machine is
                # loaded) are rounding, not overlap.
                tol = max(1e-3, 4 * 2.0**-24 * (a["ts"] + a["dur"]))
                if b["ts"] < a["ts"] - tol or b["ts"] < a["ts"] + a["dur"] - tol:
                    sys.exit(f"rank {r} lane {lane}: {a['name']} and {b['name']} overlap "
                             f"or are out of order")
        colls = [e for e in xs if e["cat"] == "collective"]
        bad = [e for e in colls if e["tid"] != 1 or e["args"].get("bytes", 0) <= 0]
        if not colls or bad:
            sys.exit(f"rank {r}: collectives off the communication stream or without "
                     f"bytes: {bad[:3]}")
        runs = {(e["args"]["step"], e["args"]["entry"]) for e in xs}
        want = {(s, n) for s in range(args.steps) for n in ("micro_step", "opt_step")}
        if not want <= runs:
            sys.exit(f"rank {r}: runs traced {sorted(runs)}, expected {sorted(want)}")
        gathered = sum(e["args"]["bytes"] for e in colls
                       if e["args"]["step"] == 0 and e["args"]["entry"] == "micro_step"
                       and e["name"].startswith("all_gather"))
        if gathered < shard_bytes:
            sys.exit(f"rank {r}: all-gathers of step 0 move {gathered} bytes, less than "
                     f"the {shard_bytes} bytes of this rank's shards")
        kinds = sorted({e["name"] for e in colls})
        print(f"rank {r}: {len(xs)} launches on {len(by_lane)} streams, ordered and "
              f"disjoint; {len(colls)} collectives on stream 1 ({', '.join(kinds)}); "
              f"step 0 gathers {gathered} >= {shard_bytes} bytes")
    print("PASS")


if __name__ == "__main__":
    main()
