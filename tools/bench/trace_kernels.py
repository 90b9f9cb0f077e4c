#!/usr/bin/env python3
"""Per-kernel time per step from a trainer's --trace, and the non-GEMM share.

Reads the Chrome trace `./train --trace FILE` writes and prints, for every
kernel, its milliseconds and launches per step (the first traced step, a
warm-up, is left out), then the GEMM time and the time of everything else
against it. Two accountings of the fused GEMM kernels (linear_gelu,
linear_dgelu: a GEMM and its epilogue in one launch), since a trace cannot
split one launch:
  - as GEMMs;
  - as non-GEMM work entirely (their GEMMs' time then counts against).
Attention (its own GEMMs inside) counts as non-GEMM in both.

    ./train --steps 4 --trace t.json && python3 tools/bench/trace_kernels.py t.json
"""
import collections
import json
import sys

# linear_cross_entropy (the LM head's three GEMMs, the loss between them)
# counts as GEMMs in both accountings; its loss pass is what
# cross_entropy_with_grad takes where the head is not chunked
# (shardc --loss-chunk-rows at least the micro-step's tokens).
GEMMS = {"linear", "matmul", "batch_matmul", "linear_cross_entropy"}
# A GEMM and its epilogue.
FUSED_GEMMS = {"linear_gelu", "linear_dgelu"}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        d = json.load(f)
    events = d["traceEvents"] if isinstance(d, dict) else d
    per = collections.defaultdict(lambda: [0.0, 0])
    steps = set()
    for e in events:
        if e.get("ph") != "X":
            continue
        step = e.get("args", {}).get("step")
        if step is None:
            continue
        steps.add(step)
        if step == min(steps):
            continue
        per[e["name"]][0] += e["dur"] / 1000.0
        per[e["name"]][1] += 1
    first = min(steps)
    n = len(steps) - 1
    if n < 1:
        sys.exit("the trace has one step; trace two or more (the first is a warm-up)")
    print(f"{'kernel':28s} {'ms/step':>9s} {'launches':>9s}   (steps {first + 1}..{max(steps)})")
    for name, (ms, calls) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        print(f"{name:28s} {ms / n:9.1f} {calls // n:9d}")
    ms = {k: v[0] / n for k, v in per.items()}
    gemm = sum(v for k, v in ms.items() if k in GEMMS)
    fused = sum(v for k, v in ms.items() if k in FUSED_GEMMS)
    other = sum(v for k, v in ms.items() if k not in GEMMS | FUSED_GEMMS)
    print(f"GEMMs {gemm + fused:.1f} ms, other kernels {other:.1f} ms: "
          f"{100 * other / (gemm + fused):.1f}% of the GEMM time (fused GEMM kernels as GEMMs)")
    print(f"GEMMs {gemm:.1f} ms, other kernels {other + fused:.1f} ms: "
          f"{100 * (other + fused) / gemm:.1f}% of the GEMM time (linear_gelu and "
          f"linear_dgelu as non-GEMM)")


if __name__ == "__main__":
    main()
