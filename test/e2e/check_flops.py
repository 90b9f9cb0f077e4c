"""The compiler's FLOP count (GEMMs and attention, per rank and micro-step:
--report, the manifest, the trainer's tflops) against a count made from the
config alone.

Forward, per layer of N = B*T tokens: GPT-2's c_attn, c_proj, c_fc and
mlp c_proj GEMMs; Llama's q, k, v, o, gate, up and down; then the LM head.
Training does each GEMM three times (forward, the input's gradient, the
weight's); causal attention over T positions keeps T(T+1)/2 pairs per
sequence and head and costs 4 FLOPs per pair and head dimension forward,
10 backward. Then the executable trains two steps, and its log's tflops
times its ms must give back the count.
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402
from harness import read_log, run  # noqa: E402


def expected(cfg, B, T):
    N = B * T
    pairs = T * (T + 1) // 2
    if cfg["model_type"] == "gpt2":
        C, V, L, H = cfg["n_embd"], cfg["vocab_size"], cfg["n_layer"], cfg["n_head"]
        inner = cfg.get("n_inner") or 4 * C
        layer = 2 * N * C * (3 * C) + 2 * N * C * C + 2 * N * C * inner + 2 * N * inner * C
    else:
        C, V, L, H = (cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"],
                      cfg["num_attention_heads"])
        kv = C * cfg.get("num_key_value_heads", H) // H
        I = cfg["intermediate_size"]
        layer = (2 * N * C * C * 2 + 2 * N * C * kv * 2 + 2 * N * C * I * 2
                 + 2 * N * I * C)
    gemm = 3 * (L * layer + 2 * N * C * V)
    D = C // H
    attention = L * (4 + 10) * B * H * D * pairs
    return gemm + attention


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--flags", default="", help="more shardc flags")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    cfg = tm.load_config(args.config)
    shape = ["--micro-batch", str(args.batch), "--seq-len", str(args.seq),
             *args.flags.split()]
    out = subprocess.run([args.shardc, args.config, *shape, "--report", "--emit", "rt",
                          "-o", os.devnull], capture_output=True, text=True,
                         check=True).stdout
    got = int(re.search(r"FLOPs per micro-step\s+(\d+)", out).group(1))
    want = expected(cfg, args.batch, args.seq)
    print(f"FLOPs per micro-step: report {got}, independent count {want}")
    if got != want:
        sys.exit(f"FAIL: the report counts {got} FLOPs, the config {want}")

    exe = os.path.join(args.workdir, "train")
    run([args.shardc, args.config, *shape, "-o", exe])
    tokens = os.path.join(args.workdir, "tokens.bin")
    tm.write_tokens(tokens, [k % cfg["vocab_size"] for k in range(4096)])
    log = os.path.join(args.workdir, "log.jsonl")
    run([exe, "--data", tokens, "--steps", "2", "--log", log])
    for e in read_log(log):
        flops = e["tflops"] * 1e12 * e["ms"] / 1e3
        rel = abs(flops - want) / want
        print(f"step {e['step']}: tflops {e['tflops']:.6g} x {e['ms']:.3f} ms = "
              f"{flops:.6g} FLOPs ({rel:.1e} from the count)")
        if rel > 1e-3:
            sys.exit(f"FAIL: the log's tflops give {flops:.6g} FLOPs, not {want}")
    print("PASS")


if __name__ == "__main__":
    main()
