#!/usr/bin/env python3
"""CPU training throughput: the shardc executable against PyTorch.

Trains the same model (same config, batch, sequence length, AdamW, f32) with
the executable shardc compiles and with PyTorch's eager autograd on the CPU,
using the same number of threads, and prints both tokens/s and their ratio.
Timed steps exclude warm-up steps. Run with Debian's /usr/bin/python3 (it
has PyTorch):

    /usr/bin/python3 tools/bench/bench_cpu.py --model tiny
    /usr/bin/python3 tools/bench/bench_cpu.py --model gpt2-6l-384 --seq-len 256
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

import torch  # noqa: E402
import torch_models as tm  # noqa: E402

MODELS = {
    # The shardc presets, as config.json for the PyTorch side.
    "tiny": {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 64, "n_layer": 2,
             "n_head": 4, "n_positions": 64, "layer_norm_epsilon": 1e-5,
             "activation_function": "gelu_new"},
    "gpt2-6l-384": {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 384,
                    "n_layer": 6, "n_head": 6, "n_positions": 256,
                    "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"},
}


def torch_tokens_per_s(c, B, T, steps, warmup, threads):
    torch.set_num_threads(threads)
    W = {n: (torch.randn(s) * 0.02).requires_grad_(True) for n, s in tm.param_shapes(c).items()}
    opt = torch.optim.AdamW(W.values(), lr=1e-4)
    x = torch.randint(0, c["vocab_size"], (B, T))
    y = torch.randint(0, c["vocab_size"], (B, T))
    times = []
    for s in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        tm.loss(c, W, x, y).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return B * T * steps / sum(times[warmup:])


def shardc_tokens_per_s(shardc, c, B, T, steps, warmup, threads, workdir):
    cfg = os.path.join(workdir, "config.json")
    with open(cfg, "w") as f:
        json.dump(c, f)
    exe = os.path.join(workdir, "train")
    subprocess.run([shardc, cfg, "--micro-batch", str(B), "--seq-len", str(T), "-o", exe],
                   check=True, capture_output=True)
    log = os.path.join(workdir, "log.jsonl")
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    subprocess.run([exe, "--steps", str(warmup + steps), "--lr", "1e-4", "--log", log],
                   check=True, capture_output=True, env=env)
    with open(log) as f:
        ms = [json.loads(line)["ms"] for line in f][warmup:]
    return B * T * steps / (sum(ms) / 1000.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="tiny")
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    args = ap.parse_args()
    c = MODELS[args.model]
    B, T = args.micro_batch, args.seq_len
    with tempfile.TemporaryDirectory() as work:
        ours = shardc_tokens_per_s(args.shardc, c, B, T, args.steps, args.warmup,
                                   args.threads, work)
    peer = torch_tokens_per_s(c, B, T, args.steps, args.warmup, args.threads)
    print(f"model {args.model}: batch {B} x {T}, AdamW f32, {args.threads} threads, "
          f"{args.steps} timed steps")
    print(f"  shardc  {ours:10.0f} tok/s")
    print(f"  pytorch {peer:10.0f} tok/s (torch {torch.__version__})")
    print(f"  ratio   {ours / peer:10.2f} x")


if __name__ == "__main__":
    main()
