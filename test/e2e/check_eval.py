"""End-to-end: --val-data's val_loss is the loss of those weights on those tokens.

Trains CONFIG for --steps AdamW steps with --val-data VAL --eval-every N
--eval-steps K (on --mesh P ranks under mpirun when P > 1) from known
weights, and checks against PyTorch (torch_models, torch.optim.AdamW):
  * every logged val_loss (before the update of steps 0, N, 2N, ...) equals
    the PyTorch loss, on the first K global batches of VAL, of the weights
    PyTorch's own training reaches at that step;
  * the val_loss after the last step equals the PyTorch loss of the weights
    the run saved (--save-weights) on those batches;
  * the training losses are those of the same run without --val-data, bit
    for bit (evaluating does not disturb training).
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402
from harness import MPIRUN, read_log, run  # noqa: E402


def learnable_tokens(n, V, seed):
    rng = np.random.default_rng(seed)
    t = np.empty(n, dtype=np.int64)
    t[0] = 1
    for i in range(1, n):
        t[i] = (t[i - 1] * 7 + 3) % V if rng.random() < 0.8 else rng.integers(0, V)
    return t


def val_loss(c, W, val, K, G, T):
    with torch.no_grad():
        return float(np.mean([tm.loss(c, W, *tm.batch(val, k, G, T)).item()
                              for k in range(K)]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mesh", type=int, default=1)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--eval-every", type=int, default=2)
    ap.add_argument("--eval-steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    c = tm.load_config(args.config)
    P, B, T, S, K = args.mesh, args.batch, args.seq, args.steps, args.eval_steps
    G = P * B
    tokens = learnable_tokens(G * T * S + 1, c["vocab_size"], 0)
    val = learnable_tokens(G * T * K + 1, c["vocab_size"], 1)
    tok_path = os.path.join(args.workdir, "tokens.bin")
    val_path = os.path.join(args.workdir, "val.bin")
    tm.write_tokens(tok_path, tokens)
    tm.write_tokens(val_path, val)
    W0 = tm.random_params(c, seed=1, std=0.1)
    w_path = os.path.join(args.workdir, "weights.safetensors")
    tm.write_safetensors(w_path, W0)

    exe = os.path.join(args.workdir, "train")
    mesh = ["--mesh", str(P)] if P > 1 else []
    run([args.shardc, args.config, "--micro-batch", str(B), "--seq-len", str(T),
         *mesh, "-o", exe])
    launch = MPIRUN + ["-np", str(P)] if P > 1 else []
    flags = ["--init-from", w_path, "--data", tok_path, "--lr", str(args.lr),
             "--steps", str(S)]
    log = os.path.join(args.workdir, "log.jsonl")
    saved = os.path.join(args.workdir, "trained.safetensors")
    out = run(launch + [exe, *flags, "--val-data", val_path, "--eval-every",
                        str(args.eval_every), "--eval-steps", str(K), "--log", log,
                        "--save-weights", saved])
    plain = os.path.join(args.workdir, "plain.jsonl")
    run(launch + [exe, *flags, "--log", plain])
    entries, base = read_log(log), read_log(plain)

    # PyTorch's training on the same global batches, its weights before
    # each step's update.
    W = {n: t.clone().requires_grad_(True) for n, t in W0.items()}
    opt = torch.optim.AdamW(W.values(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01)
    ref = {}
    for s in range(S):
        if s % args.eval_every == 0:
            ref[s] = val_loss(c, W, val, K, G, T)
        opt.zero_grad()
        tm.loss(c, W, *tm.batch(tokens, s, G, T)).backward()
        opt.step()

    worst = 0.0
    evaluated = [e for e in entries if "val_loss" in e and "loss" in e]
    if [e["step"] for e in evaluated] != sorted(ref):
        sys.exit(f"FAIL: val_loss at steps {[e['step'] for e in evaluated]}, "
                 f"expected {sorted(ref)}")
    for e in evaluated:
        rel = abs(e["val_loss"] - ref[e["step"]]) / abs(ref[e["step"]])
        worst = max(worst, rel)
        print(f"step {e['step']}: val_loss {e['val_loss']:.7f} torch {ref[e['step']]:.7f} "
              f"rel {rel:.2e}")
        if not rel < args.rtol:
            sys.exit(f"FAIL: step {e['step']}: val_loss differs by {rel:.3e}")
    final = [e for e in entries if "loss" not in e]
    if len(final) != 1 or final[0]["step"] != S:
        sys.exit(f"FAIL: expected one line after the last step (step {S}), got {final}")
    trained = tm.read_safetensors(saved)
    want = val_loss(c, trained, val, K, G, T)
    rel = abs(final[0]["val_loss"] - want) / abs(want)
    worst = max(worst, rel)
    print(f"after step {S - 1}: val_loss {final[0]['val_loss']:.7f}, the saved weights "
          f"in torch {want:.7f} rel {rel:.2e}")
    if not rel < args.rtol:
        sys.exit(f"FAIL: the final val_loss differs by {rel:.3e}")
    if f"val_loss {final[0]['val_loss']:.6f} (after the last step)" not in out:
        sys.exit("FAIL: the final val_loss is not in the output")
    if [e["loss"] for e in entries if "loss" in e] != [e["loss"] for e in base]:
        sys.exit("FAIL: training losses differ from the run without --val-data")
    if ref[0] <= want:
        sys.exit("FAIL: the validation loss did not fall; the check would not be telling")
    print(f"training losses identical to the run without --val-data")
    print(f"PASS: {len(evaluated) + 1} evaluations, worst relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
