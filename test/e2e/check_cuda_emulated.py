"""End-to-end: the CUDA backend, on the emulated CUDA device, trains as the
CPU backend does.

Compiles MODEL (a preset, a config.json, an ONNX file or a Hugging Face
directory) twice: for the CPU target and for the CUDA target linked with
the emulated CUDA device (--target cuda --cuda-emulation). Both train
--steps AdamW steps from the same seed and token file; every step's loss on
the emulated device must equal the CPU's within --rtol. With --no-graphs the
emulated executable trains again with --cuda-graphs=false, and its losses
must equal the graph-replayed ones bit for bit. --cuda-flags are compiled
into the CUDA run only (--param-dtype bf16: compared with the f32 CPU curve
at a looser --rtol). With --mesh both are compiled for that mesh and run
under mpirun (the CUDA one's collectives through the emulated NCCL).
With --offload the CUDA build is compiled a third time with --offload=cpu
(FSDP2's CPUOffloadPolicy: parameters, gradients and optimizer state in
host memory, the optimizer step on the host with the CPU kernels), and its
curve must equal the CUDA curve without offload within --offload-rtol.
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402
from harness import MPIRUN, read_log, run, run_full  # noqa: E402


def losses(path):
    return [e["loss"] for e in read_log(path)]


def worst_relative(reference, curve):
    """The largest relative difference of `curve` from `reference`, and its
    step."""
    worst, at = 0.0, 0
    for s, (a, b) in enumerate(zip(reference, curve)):
        rel = abs(a - b) / abs(a)
        if rel > worst:
            worst, at = rel, s
    return worst, at


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--shape-flags", default="--micro-batch 4 --seq-len 16",
                    help="shardc flags fixing the input shape (both targets)")
    ap.add_argument("--data", default=None,
                    help="token file (default: random tokens of the config's "
                         "vocabulary, or of --vocab)")
    ap.add_argument("--vocab", type=int, default=None,
                    help="vocabulary of the random tokens (presets)")
    ap.add_argument("--mesh", default="1",
                    help="the mesh of both builds, run under mpirun")
    ap.add_argument("--gpus", type=int, default=0,
                    help="GPUs of the emulated node (SHARDC_EMU_DEVICES): "
                         "fewer than the ranks, and ranks share one")
    ap.add_argument("--compile-flags", default="",
                    help="extra shardc flags of both builds")
    ap.add_argument("--cuda-flags", default="",
                    help="extra shardc flags of the CUDA build only")
    ap.add_argument("--train-flags", default="--lr 3e-3")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--no-graphs", action="store_true",
                    help="also train with --cuda-graphs=false and require the "
                         "same losses, bit for bit")
    ap.add_argument("--repeat", action="store_true",
                    help="train the CUDA build a second time, the same way, "
                         "and require the same losses, bit for bit")
    ap.add_argument("--offload", action="store_true",
                    help="also train the CUDA build with --offload=cpu and "
                         "compare its curve with the one without")
    ap.add_argument("--offload-rtol", type=float, default=1e-6)
    ap.add_argument("--stream-order",
                    default=os.environ.get("SHARDC_EMU_STREAM_ORDER", "last"),
                    help="which ready stream the emulated device runs first: "
                         "the one created last (default), or first (the "
                         "compute stream runs ahead of the others as far as "
                         "its events let it), or seed:N (one drawn at random "
                         "before every op, graph replays included); default: "
                         "SHARDC_EMU_STREAM_ORDER, else last")
    args = ap.parse_args()
    if args.stream_order not in ("last", "first") and not (
            args.stream_order.startswith("seed:") and args.stream_order[5:].isdigit()):
        ap.error(f"--stream-order {args.stream_order}: not last, first or seed:N")
    os.environ["SHARDC_EMU_STREAM_ORDER"] = args.stream_order
    if args.gpus:
        # The emulated node's GPUs: ranks beyond them share one.
        os.environ["SHARDC_EMU_DEVICES"] = str(args.gpus)
    os.makedirs(args.workdir, exist_ok=True)
    data = args.data
    if data is None:
        vocab = args.vocab or tm.load_config(args.model)["vocab_size"]
        rng = np.random.default_rng(0)
        data = os.path.join(args.workdir, "tokens.bin")
        tm.write_tokens(data, rng.integers(0, vocab,
                                           size=64 * 64 * args.steps + 1))
    train = ["--data", data, "--steps", str(args.steps), "--seed", "5",
             *args.train_flags.split()]
    shape = args.shape_flags.split() + args.compile_flags.split()
    ranks = math.prod(int(d) for d in args.mesh.split("x"))
    launch = MPIRUN + ["-np", str(ranks)] if ranks > 1 else []
    if ranks > 1:
        shape += ["--mesh", args.mesh]

    def compile_and_train(name, flags, extra_train=()):
        exe = os.path.join(args.workdir, f"train-{name}")
        log = os.path.join(args.workdir, f"log-{name}.jsonl")
        if not os.path.exists(exe):
            run([args.shardc, args.model, *shape, *flags, "-o", exe])
        done = run_full(launch + [exe, *train, *extra_train, "--log", log],
                        timeout=1800)
        # The CUDA run's notes (the attention path each shape takes), once.
        for line in (done.stdout + done.stderr).splitlines():
            if line.startswith("note:") and name == "cuda" and not extra_train:
                print(line)
        got = losses(log)
        if len(got) != args.steps:
            sys.exit(f"FAIL: {name} logged {len(got)} steps, not {args.steps}")
        return got

    cpu = compile_and_train("cpu", [])
    cuda_flags = ["--target", "cuda", "--cuda-emulation", *args.cuda_flags.split()]
    emu = compile_and_train("cuda", cuda_flags)
    worst, at = worst_relative(cpu, emu)
    print(f"cpu:  loss {cpu[0]:.6f} -> {cpu[-1]:.6f}")
    print(f"cuda (emulated): loss {emu[0]:.6f} -> {emu[-1]:.6f}")
    print(f"worst relative difference {worst:.2e} at step {at}")
    if not worst <= args.rtol:
        sys.exit(f"FAIL: the emulated CUDA curve differs from the CPU's by "
                 f"{worst:.2e} > {args.rtol:g}")
    if args.no_graphs:
        direct = compile_and_train("cuda", cuda_flags, ["--cuda-graphs=false"])
        if direct != emu:
            sys.exit("FAIL: --cuda-graphs=false changed the losses: "
                     f"{direct} vs {emu}")
        print("--cuda-graphs=false: the same losses, bit for bit")
    if args.repeat:
        again = compile_and_train("cuda", cuda_flags, ["--seed", "5"])
        if again != emu:
            sys.exit(f"FAIL: a second run changed the losses: {again} vs {emu}")
        print("a second run: the same losses, bit for bit")
    if args.offload:
        off = compile_and_train("cuda-offload", cuda_flags + ["--offload=cpu"])
        worst, at = worst_relative(emu, off)
        print(f"cuda (emulated) --offload=cpu: loss {off[0]:.6f} -> {off[-1]:.6f}")
        print(f"--offload=cpu: worst relative difference from the curve without "
              f"{worst:.2e} at step {at}")
        if not worst <= args.offload_rtol:
            sys.exit(f"FAIL: --offload=cpu changed the curve by {worst:.2e} > "
                     f"{args.offload_rtol:g}")
    print(f"PASS: {args.steps} steps")


if __name__ == "__main__":
    main()
