"""End-to-end: the compiler's report counts the NCCL calls a step makes.

Compiles --model for the emulated CUDA target on --mesh with --report, and
runs it under mpirun twice (--steps A and B) with SHARDC_NCCL_EMU_LOG set:
the emulated NCCL appends a line per collective that runs (graph replays
included) naming the call, its communicator's world ranks and the bytes
of its full buffer. Rank 0's lines of the last B - A steps, divided by
B - A, must equal the report's calls and bytes per (collective, axis),
summed over the entry points one step runs (one micro-step, one optimizer
step: --grad-accum 1). The axis of a communicator is read from its ranks:
the one coordinate (replica, shard, tp index; rank = (replica * S + shard)
* T + tp) that varies among them.
"""
import argparse
import collections
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import MPIRUN, run  # noqa: E402
import numpy as np  # noqa: E402
import torch_models as tm  # noqa: E402

KIND = {"ncclAllGather": "all_gather", "ncclReduceScatter": "reduce_scatter",
        "ncclAllReduce": "all_reduce", "ncclBroadcast": "broadcast"}


def report_counts(text):
    """(kind, axis) -> [calls, bytes] per step, from the report."""
    out = collections.defaultdict(lambda: [0, 0])
    for m in re.finditer(r"^\s+(\w+): (\w+) on the (shard|replicate|tp) axis: (\d+) calls,"
                         r"\s+[0-9.]+ MiB\s+(\d+) bytes", text, re.M):
        cell = out[(m.group(2), m.group(3))]
        cell[0] += int(m.group(4))
        cell[1] += int(m.group(5))
    return dict(out)


def axis_of(ranks, shards, tp):
    """The grid axis along which `ranks` (world ranks) differ."""
    coords = [(r // (shards * tp), (r // tp) % shards, r % tp) for r in ranks]
    varies = [len({c[k] for c in coords}) > 1 for k in range(3)]
    if varies.count(True) != 1:
        sys.exit(f"a communicator of ranks {ranks} is not one grid axis")
    return ("replicate", "shard", "tp")[varies.index(True)]


def logged(path, shards, tp):
    """(kind, axis) -> [calls, bytes] of rank 0's log."""
    out = collections.defaultdict(lambda: [0, 0])
    with open(path) as f:
        for line in f:
            m = re.match(r"(\w+) ranks=([\d,]+) bytes=(\d+)", line)
            ranks = [int(r) for r in m.group(2).split(",")]
            axis = axis_of(ranks, shards, tp)
            cell = out[(KIND[m.group(1)], axis)]
            cell[0] += 1
            cell[1] += int(m.group(3))
    return dict(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--mesh", required=True)
    ap.add_argument("--compile-flags", default="")
    ap.add_argument("--tp", type=int, default=1, help="compile with --tp N")
    ap.add_argument("--steps", default="2,4", help="A,B: the runs whose difference is counted")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    exe = os.path.join(args.workdir, "train")
    dims = [int(d) for d in args.mesh.split("x")]
    shards = dims[-1]
    ranks = dims[0] * (dims[1] if len(dims) > 1 else 1) * args.tp
    tp_flags = ["--tp", str(args.tp)] if args.tp > 1 else []
    text = run([args.shardc, args.model, "--target", "cuda", "--cuda-emulation",
                "--mesh", args.mesh, *tp_flags, "--micro-batch", "1", "--seq-len", "16",
                "--report", "-o", exe] + shlex.split(args.compile_flags))
    expected = report_counts(text)
    if not expected:
        sys.exit("the report lists no collectives:\n" + text)
    data = os.path.join(args.workdir, "tokens.bin")
    vocab = tm.load_config(args.model)["vocab_size"]
    tm.write_tokens(data, np.random.default_rng(0).integers(0, vocab, size=8192))
    a, b = (int(s) for s in args.steps.split(","))
    counts = {}
    for steps in (a, b):
        log = os.path.join(args.workdir, f"nccl-{steps}")
        env_log = f"SHARDC_NCCL_EMU_LOG={log}"
        run(MPIRUN + ["-np", str(ranks), "-x", env_log, exe, "--data", data,
                      "--steps", str(steps)])
        counts[steps] = logged(log + ".0", shards, args.tp)
    per_step = {}
    for key in set(counts[a]) | set(counts[b]):
        ca, cb = counts[a].get(key, [0, 0]), counts[b].get(key, [0, 0])
        per_step[key] = [(cb[0] - ca[0]) / (b - a), (cb[1] - ca[1]) / (b - a)]
    bad = False
    for key in sorted(set(expected) | set(per_step)):
        want = expected.get(key, [0, 0])
        got = per_step.get(key, [0, 0])
        ok = want[0] == got[0] and want[1] == got[1]
        bad |= not ok
        print(f"{key[0]} on the {key[1]} axis: report {want[0]} calls {want[1]} bytes, "
              f"NCCL {got[0]:g} calls {got[1]:g} bytes per step {'ok' if ok else 'MISMATCH'}")
    if bad:
        sys.exit("FAIL: the report's collectives differ from the NCCL calls made")
    print(f"PASS: the report's collectives are the NCCL calls of a step ({args.mesh})")


if __name__ == "__main__":
    main()
