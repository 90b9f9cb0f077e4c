#!/usr/bin/env python3
"""tok/s of a model on one GPU with and without --offload=cpu, in one run.

Two steps, because the GPU machine has no MLIR (build here, run there):

    tools/bench/bench_offload.py build --shardc build/bin/shardc --out dist/offload
    # then, on the GPU machine, from the repository root:
    tools/bench/bench_offload.py run --out dist/offload --steps 30

`build` compiles MODEL (default gpt2-124m, micro-batch 4 x 1024) for
--target cuda with and without --offload=cpu and packs each with its
libraries (tools/pack_gpu.sh). `run` trains each on the same random tokens
and prints the median tok/s and step time over the steps after the first
(which captures the CUDA graphs), side by side, with the ratio. The
peak device memory of each is nvidia-smi's where it is found.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

MODES = {"plain": [], "offload": ["--offload=cpu"]}


def build(args):
    here = os.path.dirname(os.path.abspath(__file__))
    pack = os.path.join(here, "..", "pack_gpu.sh")
    import tempfile
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for mode, flags in MODES.items():
            exe = os.path.join(tmp, "train")
            subprocess.run([args.shardc, args.model, "--target", "cuda",
                            *args.flags.split(), *flags, "-o", exe], check=True)
            subprocess.run([pack, exe, os.path.join(args.out, mode)], check=True)
    print(f"built {', '.join(MODES)} in {args.out}")


def tokens(path, vocab, count):
    """llm.c's GPT-2 token file of `count` random ids below `vocab`."""
    import random
    import struct
    rng = random.Random(0)
    header = [20240520, 1, count] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{count}H", *(rng.randrange(vocab) for _ in range(count))))


def run(args):
    data = os.path.join(args.out, "tokens.bin")
    if not os.path.exists(data):
        tokens(data, 50257, 4 * 1024 * (args.steps + 2) + 1)
    rows = {}
    for mode in args.modes.split(","):
        launcher = os.path.join(args.out, mode, "run")
        if mode not in MODES:
            sys.exit(f"error: --modes: '{mode}' is not one of {', '.join(MODES)}")
        out = subprocess.run([launcher, "--data", data, "--steps", str(args.steps)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"error: {mode}: exit {out.returncode}\n{out.stdout}\n{out.stderr}")
        steps = [(float(m.group(1)), float(m.group(2))) for m in re.finditer(
            r"\|\s+([0-9.]+) ms \|\s+([0-9.]+) tok/s", out.stdout)][1:]
        header = next((l for l in out.stdout.splitlines() if l.startswith("shardc:")), "")
        rows[mode] = (statistics.median(s[0] for s in steps),
                      statistics.median(s[1] for s in steps), header)
    for mode, (ms, toks, header) in rows.items():
        print(f"{mode:8s}: {ms:9.2f} ms/step, {toks:10.0f} tok/s  ({header})")
    if len(rows) == 2:
        print(f"offload / plain tok/s: {rows['offload'][1] / rows['plain'][1]:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["build", "run"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shardc", default="build/bin/shardc")
    ap.add_argument("--model", default="gpt2-124m")
    ap.add_argument("--flags", default="--micro-batch 4 --seq-len 1024")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--modes", default="plain,offload",
                    help="run: which packed builds (the two together are "
                         "about 63 MB, near the device tool's 64 MiB carry)")
    args = ap.parse_args()
    (build if args.step == "build" else run)(args)


if __name__ == "__main__":
    main()
