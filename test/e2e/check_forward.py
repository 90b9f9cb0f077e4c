"""End-to-end: the compiled executable's forward loss equals PyTorch's.

Compiles CONFIG with shardc, runs it on random weights (--init-from) and a
random token file (--data) for a few steps, and compares every logged loss
with torch_models.loss on the same weights and batches. Then checks the
executable's own seeded initialization through --save-weights: the saved
weights reproduce the logged loss in PyTorch and have the GPT-2 init
statistics.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402
from harness import read_log, run  # noqa: E402

torch.set_default_dtype(torch.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--batch", type=int, default=3)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--strip-prefix", action="store_true",
                    help="write the checkpoint without the transformer./model. prefix")
    args = ap.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    c = tm.load_config(args.config)
    B, T, S = args.batch, args.seq, args.steps
    V = c["vocab_size"]
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, V, size=B * T * S + 1)
    tok_path = os.path.join(args.workdir, "tokens.bin")
    tm.write_tokens(tok_path, tokens)
    W = tm.random_params(c, seed=1)
    w_path = os.path.join(args.workdir, "weights.safetensors")
    on_disk = W
    if args.strip_prefix:
        on_disk = {n.split(".", 1)[1] if n.startswith(("transformer.", "model.")) else n: t
                   for n, t in W.items()}
    tm.write_safetensors(w_path, on_disk)

    exe = os.path.join(args.workdir, "train")
    run([args.shardc, args.config, "--micro-batch", str(B), "--seq-len", str(T), "-o", exe])

    # 1. Given weights: every step's loss matches PyTorch.
    log = os.path.join(args.workdir, "log.jsonl")
    # --lr 0: every step sees the same weights.
    run([exe, "--lr", "0", "--init-from", w_path, "--data", tok_path, "--steps", str(S), "--log", log])
    worst = 0.0
    with torch.no_grad():
        for entry in read_log(log):
            x, y = tm.batch(tokens, entry["step"], B, T)
            ref = tm.loss(c, W, x, y).item()
            rel = abs(entry["loss"] - ref) / abs(ref)
            worst = max(worst, rel)
            print(f"step {entry['step']}: shardc {entry['loss']:.7f} torch {ref:.7f} rel {rel:.2e}")
            if not rel < args.rtol:
                sys.exit(f"FAIL: relative difference {rel:.3e} >= {args.rtol}")
    if len(read_log(log)) != S:
        sys.exit(f"FAIL: expected {S} log lines")

    # 2. The executable's own init, saved and reloaded by PyTorch.
    saved = os.path.join(args.workdir, "init.safetensors")
    log2 = os.path.join(args.workdir, "log2.jsonl")
    run([exe, "--lr", "0", "--seed", "7", "--data", tok_path, "--steps", "1", "--log", log2,
         "--save-weights", saved])
    W2 = tm.read_safetensors(saved)
    expected = tm.param_shapes(c)
    if set(W2) != set(expected):
        sys.exit(f"FAIL: saved names differ: {sorted(set(W2) ^ set(expected))}")
    for name, shape in expected.items():
        if tuple(W2[name].shape) != tuple(shape):
            sys.exit(f"FAIL: {name} saved as {tuple(W2[name].shape)}, expected {shape}")
    with torch.no_grad():
        x, y = tm.batch(tokens, 0, B, T)
        ref = tm.loss(c, W2, x, y).item()
    got = read_log(log2)[0]["loss"]
    rel = abs(got - ref) / abs(ref)
    print(f"own init: shardc {got:.7f} torch {ref:.7f} rel {rel:.2e}")
    if not rel < args.rtol:
        sys.exit(f"FAIL: own-init loss differs by {rel:.3e}")
    # GPT-2 style init: N(0, 0.02) for weights, residual projections scaled
    # by 1/sqrt(2 * layers), norms ones, biases zeros.
    layers = c.get("n_layer", c.get("num_hidden_layers"))
    for name, t in W2.items():
        if t.dim() == 1:
            want = 0.0 if name.endswith("bias") else 1.0
            if not torch.all(t == want):
                sys.exit(f"FAIL: {name} should be all {want}")
            continue
        std = 0.02
        if name.endswith(("c_proj.weight", "o_proj.weight", "down_proj.weight")):
            std = 0.02 / (2 * layers) ** 0.5
        got_std = t.std().item()
        if t.numel() >= 1000 and abs(got_std - std) > 0.1 * std:
            sys.exit(f"FAIL: {name} has std {got_std:.4f}, expected {std:.4f}")
        if abs(t.mean().item()) > 4 * std / t.numel() ** 0.5 + 1e-6:
            sys.exit(f"FAIL: {name} has mean {t.mean().item():.5f}")
    print(f"PASS: worst relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
