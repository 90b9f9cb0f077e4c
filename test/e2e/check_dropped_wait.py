"""End-to-end: the emulated device's seeded stream order finds the race a
missing wait makes.

Compiles MODEL for the CUDA target on the emulated device on --mesh, trains
--steps steps in the default stream order (the reference curve), then
drops one wait of the collectives' stream on the compute stream
(SHARDC_EMU_DROP_WAIT=1:0:K, the K-th such wait of the process) and trains
again under --seed-order. K is searched from --hint (the first K tried),
then from 1, until a curve differs from the reference. Prints that K's
curves in the fixed orders (last, first) and under three seeds: the seeded
order must show the race; whether a fixed order shows it is printed.
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402
from harness import MPIRUN, read_log, run, run_full  # noqa: E402

COMPUTE, COMM = 0, 1  # the backend's streams, by creation order (abi.h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mesh", default="2")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--hint", type=int, default=1)
    ap.add_argument("--max-k", type=int, default=200)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    ranks = math.prod(int(d) for d in args.mesh.split("x"))
    data = os.path.join(args.workdir, "tokens.bin")
    vocab = tm.load_config(args.model)["vocab_size"]
    tm.write_tokens(data, np.random.default_rng(0).integers(0, vocab, size=64 * 64 + 1))
    exe = os.path.join(args.workdir, "train")
    run([args.shardc, args.model, "--micro-batch", "4", "--seq-len", "16",
         "--mesh", args.mesh, "--target", "cuda", "--cuda-emulation", "-o", exe])
    log = os.path.join(args.workdir, "log.jsonl")

    def curve(order, drop=None):
        """The losses under `order` with wait `drop` dropped; None if no
        such wait was made (K past the last)."""
        env = ["-x", "SHARDC_EMU_STREAM_ORDER=" + order]
        if drop is not None:
            env += ["-x", f"SHARDC_EMU_DROP_WAIT={COMM}:{COMPUTE}:{drop}"]
        r = run_full(MPIRUN + ["-np", str(ranks), *env, exe, "--data", data,
                               "--steps", str(args.steps), "--seed", "5",
                               "--lr", "3e-3", "--log", log])
        if drop is not None and "dropped wait" not in r.stderr:
            return None
        return [e["loss"] for e in read_log(log)]

    reference = curve("last")
    print(f"reference (stream order last): {' '.join(f'{x:.7f}' for x in reference)}")
    found = None
    for k in [args.hint] + [k for k in range(1, args.max_k + 1) if k != args.hint]:
        got = curve("seed:1", k)
        if got is None:
            if k != args.hint:
                break
            continue
        if got != reference:
            found = k
            break
    if found is None:
        sys.exit("FAIL: dropping no single wait of the collectives' stream on "
                 "the compute stream changed the seeded curve")
    print(f"dropped: wait {found} of the collectives' stream on the compute stream")
    shown = 0
    for order in ("last", "first", "seed:1", "seed:2", "seed:3"):
        got = curve(order, found)
        differs = got != reference
        shown += differs and order.startswith("seed:")
        print(f"{order:<7} {' '.join(f'{x:.7f}' for x in got)} "
              f"{'RACE' if differs else 'same as the reference'}")
    if shown == 0:
        sys.exit("FAIL: no seed shows the race")
    print(f"the seeded order shows the race under {shown} of 3 seeds")


if __name__ == "__main__":
    main()
