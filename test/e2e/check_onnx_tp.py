#!/usr/bin/env python3
"""ONNX exports of transformers' GPT-2 and Llama (test/e2e/Inputs/onnx-hf,
made by make_hf_onnx.py with PyPI's torch and transformers) trained by
shardc on a layout, against PyTorch's AdamW curve for the same weights and
tokens (committed beside them: CI has no transformers).

usage: check_onnx_tp.py --shardc S --workdir D --model gpt2-dynamo
                        [--mesh M] [--tp N] [--micro-batch B]

Compiles MODEL.onnx with --micro-batch B --mesh M --tp N, trains 20 steps
at the curves' learning rate on mesh x tp ranks (mpirun), and compares each
step's loss with PyTorch's at the same global batch (B x the mesh's data
ranks): the worst relative difference must be below 1e-4.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs", "onnx-hf")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--mesh", default="1")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--micro-batch", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    curves = json.load(open(os.path.join(INPUTS, a.model.split("-")[0] + "-curves.json")))
    data_ranks = math.prod(int(x) for x in a.mesh.split("x"))
    ranks = data_ranks * a.tp
    G = a.micro_batch * data_ranks
    ref = curves["global_batch"].get(str(G))
    if ref is None:
        sys.exit(f"FAIL: no PyTorch curve at global batch {G}")
    exe = os.path.join(a.workdir, f"train-{a.model}-{a.mesh}-tp{a.tp}")
    harness.run([a.shardc, os.path.join(INPUTS, a.model + ".onnx"),
                 "--micro-batch", str(a.micro_batch), "--seq-len", str(curves["seq_len"]),
                 "--mesh", a.mesh, "--tp", str(a.tp),
                 "-o", exe])
    log = exe + ".jsonl"
    cmd = [exe, "--data", os.path.join(INPUTS, "tokens.bin"), "--steps", str(curves["steps"]),
           "--lr", str(curves["lr"]), "--log", log]
    harness.run(harness.MPIRUN + ["-np", str(ranks)] + cmd if ranks > 1 else cmd)
    got = [r["loss"] for r in harness.read_log(log) if "loss" in r]
    worst = max(abs(x - y) / abs(y) for x, y in zip(got, ref))
    print(f"{a.model} --mesh {a.mesh} --tp {a.tp}: {len(got)} steps, loss {got[0]:.5f} -> "
          f"{got[-1]:.5f} (PyTorch {ref[0]:.5f} -> {ref[-1]:.5f}), worst relative "
          f"difference {worst:.2e}")
    if len(got) != len(ref) or not worst < 1e-4:
        sys.exit("FAIL")
    print("PASS")


if __name__ == "__main__":
    main()
