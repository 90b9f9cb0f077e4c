#!/usr/bin/env python3
"""Predicted against measured step time on this machine (issue 26).

Calibrates this machine twice with `shardc --calibrate` (2 threads, and 1
thread for the two-rank run), then for each program: compiles it with
`--report --predict CALIBRATION`, reads the predicted step time, runs the
executable and takes the median of its step times (after warm-up steps).
Prints each pair, the ratio, and whether it is within the bound (25% at 2
threads, 30% for mesh 2 on 2 ranks with 1 thread each), then whether every
pair of programs is predicted in the measured order.

    python3 tools/bench/predict_cpu.py --shardc build/bin/shardc

This is a benchmark, not a test: the figures depend on the machine.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]

GPT2 = {"model_type": "gpt2", "layer_norm_epsilon": 1e-5,
        "activation_function": "gelu_new"}
LLAMA = {"model_type": "llama", "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
         "hidden_act": "silu", "tie_word_embeddings": False}

# name -> (config, micro-batch, seq-len, extra compile flags, ranks)
PROGRAMS = [
    ("gpt2 6x384 vocab 50257, 4 x 256",
     dict(GPT2, vocab_size=50257, n_embd=384, n_layer=6, n_head=6, n_positions=256),
     4, 256, [], 1),
    ("gpt2 6x384 vocab 50257, 4 x 256, --recompute=block",
     dict(GPT2, vocab_size=50257, n_embd=384, n_layer=6, n_head=6, n_positions=256),
     4, 256, ["--recompute=block"], 1),
    ("gpt2 4x256 vocab 8192, 8 x 128",
     dict(GPT2, vocab_size=8192, n_embd=256, n_layer=4, n_head=4, n_positions=128),
     8, 128, [], 1),
    ("llama 4x512 (8 heads, 4 kv) vocab 32000, 2 x 256",
     dict(LLAMA, vocab_size=32000, hidden_size=512, intermediate_size=1376,
          num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
          max_position_embeddings=256),
     2, 256, [], 1),
    ("llama 2x256 vocab 4096, 2 x 512",
     dict(LLAMA, vocab_size=4096, hidden_size=256, intermediate_size=688,
          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
          max_position_embeddings=512),
     2, 512, [], 1),
    ("gpt2 6x384 vocab 50257, 4 x 256, --mesh 2",
     dict(GPT2, vocab_size=50257, n_embd=384, n_layer=6, n_head=6, n_positions=256),
     4, 256, ["--mesh", "2"], 2),
]


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"predict_cpu: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def threads_env(n):
    return dict(os.environ, OMP_NUM_THREADS=str(n))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shardc", default="shardc")
    ap.add_argument("--steps", type=int, default=6, help="timed steps a program")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--no-plan-auto", dest="plan_auto", action="store_false",
                    help="skip measuring --plan=auto's candidates")
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="predict_cpu.")
    os.makedirs(work, exist_ok=True)

    cal = {}
    for n in sorted({args.threads, 1}):
        cal[n] = os.path.join(work, f"calibration-{n}.json")
        print(f"calibrating at {n} thread(s) ...", flush=True)
        run([args.shardc, "--calibrate", cal[n]], env=threads_env(n))

    rows = []
    for name, cfg, B, T, flags, ranks in PROGRAMS:
        threads = args.threads if ranks == 1 else 1
        tag = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        cfg_path = os.path.join(work, tag + ".json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        exe = os.path.join(work, tag)
        out = run([args.shardc, cfg_path, "--micro-batch", str(B), "--seq-len", str(T),
                   "--report", "--predict", cal[threads], "-o", exe] + flags)
        m = re.search(r"predicted step time: ([0-9.]+) ms", out)
        if not m:
            sys.exit(f"predict_cpu: no prediction in:\n{out}")
        predicted = float(m.group(1))
        log = os.path.join(work, tag + ".jsonl")
        cmd = [exe, "--steps", str(args.warmup + args.steps), "--lr", "1e-4", "--log", log]
        if ranks > 1:
            cmd = MPIRUN + ["-np", str(ranks)] + cmd
        run(cmd, env=threads_env(threads))
        with open(log) as f:
            ms = [json.loads(line)["ms"] for line in f if '"ms"' in line][args.warmup:]
        measured = statistics.median(ms)
        bound = 0.30 if ranks > 1 else 0.25
        rows.append((name, threads, ranks, predicted, measured, bound))
        print(f"  {name}: predicted {predicted:.1f} ms, measured median "
              f"{measured:.1f} ms ({ranks} rank(s) x {threads} thread(s)), "
              f"ratio {predicted / measured:.3f}", flush=True)

    print()
    print(f"{'program':<52} {'ranks x threads':>15} {'predicted ms':>13} "
          f"{'measured ms':>12} {'ratio':>6}  within")
    within = 0
    for name, threads, ranks, p, meas, bound in rows:
        ok = abs(p / meas - 1) <= bound
        within += ok
        print(f"{name:<52} {f'{ranks} x {threads}':>15} {p:13.1f} {meas:12.1f} "
              f"{p / meas:6.3f}  {'yes' if ok else 'NO'} ({bound:.0%})")
    print(f"{within} of {len(rows)} within their bound")
    # Ordering: every pair of programs of clearly different cost (measured
    # more than 20% apart), predicted in the measured order.
    pairs = right = 0
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            a, b = rows[i], rows[j]
            if max(a[4], b[4]) / min(a[4], b[4]) < 1.2:
                continue
            pairs += 1
            right += (a[3] < b[3]) == (a[4] < b[4])
    print(f"order: {right} of {pairs} pairs of clearly different cost "
          f"(measured > 20% apart) predicted in the measured order")
    if args.plan_auto:
        plan_auto(args, work, cal[args.threads])


def plan_auto(args, work, calibration):
    """--plan=auto on the first program: its candidates measured one by one,
    and the measured time of its choice against the best measured."""
    name, cfg, B, T, flags, ranks = PROGRAMS[0]
    cfg_path = os.path.join(work, "plan-auto.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    exe = os.path.join(work, "plan-auto")
    out = run([args.shardc, cfg_path, "--micro-batch", str(B), "--seq-len", str(T),
               "--plan=auto", "--predict", calibration, "-o", exe])
    print()
    print(f"--plan=auto on {name}:")
    print(out.rstrip())
    cands = []
    for line in out.splitlines():
        m = re.match(r"\s+(none|block)\s+(true|false)\s+(\d+)\s+(\d+)\s+(\d+)\s+"
                     r"([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)(.*)", line)
        if m:
            cands.append(dict(recompute=m.group(1), mb=int(m.group(4)),
                              accum=int(m.group(5)), predicted=float(m.group(6)),
                              chosen="chosen" in m.group(9)))
    env = threads_env(args.threads)
    for c in cands:
        exe_c = os.path.join(work, f"plan-{c['recompute']}-{c['mb']}")
        run([args.shardc, cfg_path, "--micro-batch", str(c["mb"]), "--seq-len", str(T),
             "--recompute=" + c["recompute"], "-o", exe_c])
        log = exe_c + ".jsonl"
        run([exe_c, "--steps", str(args.warmup + args.steps), "--lr", "1e-4",
             "--grad-accum", str(c["accum"]), "--log", log], env=env)
        with open(log) as f:
            ms = [json.loads(line)["ms"] for line in f if '"ms"' in line][args.warmup:]
        c["measured"] = statistics.median(ms)
        print(f"  recompute {c['recompute']:5} micro-batch {c['mb']} grad-accum "
              f"{c['accum']}: predicted {c['predicted']:.1f} ms, measured "
              f"{c['measured']:.1f} ms{'  <- chosen' if c['chosen'] else ''}",
              flush=True)
    best = min(cands, key=lambda c: c["measured"])
    chosen = [c for c in cands if c["chosen"]][0]
    print(f"chosen measured {chosen['measured']:.1f} ms, best measured "
          f"{best['measured']:.1f} ms: {chosen['measured'] / best['measured'] - 1:+.1%} "
          f"({'within' if chosen['measured'] <= 1.1 * best['measured'] else 'NOT within'} 10%)")


if __name__ == "__main__":
    main()
