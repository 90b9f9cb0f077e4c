#!/usr/bin/env python3
"""PyTorch's FP8 GEMM at the shapes shardc-cuda-kernel-bench times
(benchFloat8: Llama-3-8B's block linears, 2 x 8192 tokens a rank), for the
same run on the lent GPU: torch._scaled_mm (e4m3 x e4m3, tensorwise scales,
bf16 out: what torchao's tensorwise Float8Linear calls) beside torch's bf16
matmul. Median of 20 timed calls after 3 warm-ups, CUDA events.

    python3 tools/bench/fp8_gemm_peer.py [--small]

Prints one row a GEMM: shape, microseconds, TFLOP/s. Without a GPU it says
so and exits 0.
"""
import argparse
import statistics

import torch


def timed(fn):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for rep in range(23):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if rep >= 3:
            ms.append(start.elapsed_time(stop))
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true",
                    help="the kernel bench's --small shapes (M / 64, K and N / 16)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing timed")
        return
    M, div = (16384 // 64, 16) if args.small else (16384, 1)
    print(f"{'gemm':<44} {'us':>9} {'TFLOP/s':>8}")
    for k, n in [(4096, 4096), (4096, 1024), (4096, 14336), (14336, 4096)]:
        K, N = k // div, n // div
        shape = f"{M}x{K}x{N}"
        a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
        # _scaled_mm wants b column-major: b = w.t() of a row-major w [N, K].
        b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        flops = 2.0 * M * K * N
        ms = timed(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                            out_dtype=torch.bfloat16))
        print(f"{'torch._scaled_mm ' + shape + ' e4m3 -> bf16':<44} {ms * 1e3:9.1f} "
              f"{flops / (ms * 1e-3) / 1e12:8.1f}")
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        ms = timed(lambda: x @ w.t())
        print(f"{'torch matmul ' + shape + ' bf16':<44} {ms * 1e3:9.1f} "
              f"{flops / (ms * 1e-3) / 1e12:8.1f}")


if __name__ == "__main__":
    main()
