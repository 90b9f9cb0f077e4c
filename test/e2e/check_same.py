#!/usr/bin/env python3
"""Two compilations of one model that must train alike, bit for bit.

Compiles --config with --flags and again with --flags plus --variant,
trains both on the same tokens and seed (under mpirun on a mesh), and
requires every step's loss and gradient norm to be equal, and the trained
weights to be byte-identical: for a rewrite that changes how a program
runs (what a collective moves, where a cast happens) but not what it
computes. --report-grep prints both builds' --report lines that show the
rewrite took place (or not).
"""
import argparse
import filecmp
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models as tm  # noqa: E402
from harness import MPIRUN, read_log, run  # noqa: E402


def ranks(mesh, tp):
    n = 1
    for part in mesh.split("x"):
        n *= int(part)
    return n * tp


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", required=True)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mesh", default="1")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--flags", default="", help="shardc flags of both builds")
    ap.add_argument("--variant", required=True,
                    help="shardc flags of the second build only")
    ap.add_argument("--train-flags", default="",
                    help="trainer flags of both runs (--grad-accum 2, ...)")
    ap.add_argument("--report-grep", default=None,
                    help="print the --report lines of both builds holding this")
    args = ap.parse_args()

    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    with open(args.config) as f:
        vocab = json.load(f)["vocab_size"]
    rng = np.random.default_rng(3)
    tokens = os.path.join(args.workdir, "tokens.bin")
    n = ranks(args.mesh, args.tp)
    G = args.micro_batch * n // args.tp
    tm.write_tokens(tokens, rng.integers(0, vocab, size=4 * G * args.seq * (args.steps + 1) + 1))
    logs, weights = [], []
    for name, extra in (("base", []), ("variant", args.variant.split())):
        exe = os.path.join(args.workdir, name)
        build = [args.shardc, args.config, "--mesh", args.mesh, "--micro-batch",
                 str(args.micro_batch), "--seq-len", str(args.seq),
                 *(["--tp", str(args.tp)] if args.tp > 1 else []),
                 *args.flags.split(), *extra]
        if args.report_grep:
            report = run(build + ["--report", "--emit", "rt", "-o", os.devnull])
            for line in report.splitlines():
                if args.report_grep in line:
                    print(f"{name}: {line.strip()}")
        run(build + ["-o", exe])
        log = os.path.join(args.workdir, name + ".jsonl")
        w = os.path.join(args.workdir, name + ".safetensors")
        cmd = [exe, "--data", tokens, "--seed", "5", "--lr", "3e-3",
               "--steps", str(args.steps), "--log", log, "--save-weights", w,
               *args.train_flags.split()]
        run((MPIRUN + ["-np", str(n)] if n > 1 else []) + cmd)
        logs.append(read_log(log))
        weights.append(w)
    keys = ("loss", "grad_norm")
    a = [[r[k] for k in keys] for r in logs[0]]
    b = [[r[k] for k in keys] for r in logs[1]]
    if len(a) != args.steps or a != b:
        sys.exit(f"FAIL: the losses and gradient norms differ:\n{a}\n{b}")
    if not filecmp.cmp(weights[0], weights[1], shallow=False):
        sys.exit("FAIL: the trained weights differ")
    print(f"same: {args.steps} steps of losses and gradient norms, and the "
          f"trained weights, with and without '{args.variant}' "
          f"(loss {a[0][0]:.4f} -> {a[-1][0]:.4f})")
    print("PASS")


if __name__ == "__main__":
    main()
