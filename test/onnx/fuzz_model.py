"""Truncated and bit-flipped ONNX files never crash shardc.

Builds a small transformer-like ONNX model (Gather, MatMul, Add,
LayerNormalization, Softmax, Reshape with a folded shape subgraph), then
feeds shardc every truncation at a stride and random bit flips. Each run
must end with status 0 or 1 (never a signal), and a failure must print one
'error:' line naming the file.
"""
import argparse
import os
import random
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build_model(path):
    rng = np.random.default_rng(0)
    V, C = 11, 8
    inits = [numpy_helper.from_array(rng.standard_normal((V, C)).astype(np.float32), "wte"),
             numpy_helper.from_array(rng.standard_normal((C, V)).astype(np.float32), "head"),
             numpy_helper.from_array(np.ones(C, np.float32) * 1.1, "ln_w"),
             numpy_helper.from_array(np.zeros(C, np.float32) + 0.1, "ln_b")]
    nodes = [
        helper.make_node("Gather", ["wte", "ids"], ["x"], name="embed"),
        helper.make_node("LayerNormalization", ["x", "ln_w", "ln_b"], ["h"], axis=-1),
        helper.make_node("Shape", ["h"], ["shape"]),
        helper.make_node("Reshape", ["h", "shape"], ["h2"]),
        helper.make_node("MatMul", ["h2", "head"], ["logits"], name="lm_head"),
    ]
    graph = helper.make_graph(
        nodes, "fuzz", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 4, V])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--flips", type=int, default=150)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    good = os.path.join(args.workdir, "model.onnx")
    build_model(good)
    data = open(good, "rb").read()
    r = subprocess.run([args.shardc, good, "--emit", "mlir"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"the intact model does not import: {r.stderr}")
    variants = [("truncated at %d" % n, data[:n]) for n in range(0, len(data), max(1, len(data) // 120))]
    rnd = random.Random(1)
    for k in range(args.flips):
        b = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(b))
            b[i] ^= 1 << rnd.randrange(8)
        variants.append(("bit flips #%d" % k, bytes(b)))
    bad = os.path.join(args.workdir, "bad.onnx")
    counts = {0: 0, 1: 0}
    for what, blob in variants:
        with open(bad, "wb") as f:
            f.write(blob)
        r = subprocess.run([args.shardc, bad, "--emit", "mlir", "-o", os.devnull],
                           capture_output=True, text=True, errors="replace", timeout=60)
        if r.returncode not in (0, 1):
            print(f"CRASH ({what}): status {r.returncode}\n{r.stderr[-2000:]}")
            sys.exit(1)
        if r.returncode == 1 and (r.stderr.count("error:") != 1 or bad not in r.stderr):
            print(f"UNCLEAR ERROR ({what}): {r.stderr!r}")
            sys.exit(1)
        counts[r.returncode] += 1
    print(f"{len(variants)} corrupted models: {counts[1]} rejected with an error, "
          f"{counts[0]} still valid, 0 crashes")
    print("PASS")


if __name__ == "__main__":
    main()
