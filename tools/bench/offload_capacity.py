#!/usr/bin/env python3
"""The largest Llama-style model one GPU trains, with and without
--offload=cpu, by the compiler's memory report (no GPU needed).

The family is Llama 3 8B's block (hidden 4096, 32 heads, 8 KV heads,
intermediate 14336, vocabulary 128256) with N layers. For each N the report
of `shardc CONFIG --target cuda --report` gives the planned device peak and
the pinned host bytes; N is the largest whose device peak fits the GPU's
memory less a reserve (the CUDA context, cuBLASLt's workspace) and, with
offload, whose pinned host bytes fit the host's memory less a reserve. The
defaults are the lent H100 machine: 85,029,158,912 bytes of HBM (what an
H100 SXM reports), 128 GiB of host memory.

    tools/bench/offload_capacity.py --shardc build/bin/shardc

A run on the GPU (tools/pack_gpu.sh) confirms the largest N of each mode:
its step must fit, N + 1 layers must not.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

BLOCK = {"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
         "num_attention_heads": 32, "num_key_value_heads": 8,
         "intermediate_size": 14336, "max_position_embeddings": 8192,
         "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
         "tie_word_embeddings": False, "hidden_act": "silu"}
GiB = 2**30


def params(layers):
    """Parameters of the family's model of `layers` layers."""
    C, I, V = BLOCK["hidden_size"], BLOCK["intermediate_size"], BLOCK["vocab_size"]
    kv = C * BLOCK["num_key_value_heads"] // BLOCK["num_attention_heads"]
    block = C * C * 2 + C * kv * 2 + 3 * C * I + 2 * C
    return layers * block + 2 * V * C + C


def report(args, workdir, layers, offload):
    cfg = dict(BLOCK, num_hidden_layers=layers)
    path = os.path.join(workdir, f"llama-{layers}.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    cmd = [args.shardc, path, "--report", "--emit", "rt", "-o", os.devnull,
           *args.target.split(), *args.flags.split()]
    if offload:
        cmd.append("--offload=cpu")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)}:\n{out.stderr}")
    m = re.search(r"^  planned peak\s+[0-9.]+ MiB\s+(\d+) bytes"
                  r"(?:\s+\| host\s+[0-9.]+ MiB\s+(\d+) bytes)?", out.stdout, re.M)
    return int(m.group(1)), int(m.group(2) or 0)


def largest(args, workdir, offload):
    device_budget = args.device_bytes - args.device_reserve_gib * GiB
    host_budget = args.host_gib * GiB - args.host_reserve_gib * GiB

    def fits(n):
        device, host = report(args, workdir, n, offload)
        return device <= device_budget and host <= host_budget, device, host

    lo, hi = 0, 1
    while fits(hi)[0]:
        lo, hi = hi, hi * 2
        if hi > 4096:
            sys.exit("error: over 4096 layers fit: the budget is not binding")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid)[0]:
            lo = mid
        else:
            hi = mid
    return lo, fits(lo), fits(lo + 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--target", default="--target cuda",
                    help="the target flags (add --cuda-emulation where shardc "
                         "has no nvcc)")
    ap.add_argument("--flags", default="--micro-batch 1 --seq-len 2048 "
                    "--param-dtype bf16 --recompute block",
                    help="shardc flags of every build")
    ap.add_argument("--device-bytes", type=int, default=85029158912)
    ap.add_argument("--device-reserve-gib", type=float, default=2.0)
    ap.add_argument("--host-gib", type=float, default=128.0)
    ap.add_argument("--host-reserve-gib", type=float, default=16.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        print(f"Llama 3 8B blocks, {args.flags}; device budget "
              f"{(args.device_bytes - args.device_reserve_gib * GiB) / GiB:.1f} GiB, "
              f"host budget {args.host_gib - args.host_reserve_gib:.1f} GiB")
        for offload in (False, True):
            n, (_, device, host), (_, device1, host1) = largest(args, workdir, offload)
            name = "--offload=cpu" if offload else "no offload  "
            print(f"{name}: {n} layers, {params(n) / 1e9:.2f}B parameters: device "
                  f"{device / GiB:.1f} GiB, pinned host {host / GiB:.1f} GiB "
                  f"({n + 1} layers: device {device1 / GiB:.1f} GiB, host "
                  f"{host1 / GiB:.1f} GiB)")


if __name__ == "__main__":
    main()
