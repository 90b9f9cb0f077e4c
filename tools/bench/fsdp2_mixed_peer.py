#!/usr/bin/env python3
"""FSDP2 itself as the peer of shardc's mixed precision (outside CI).

test/e2e/check_train.py --mixed bf16 checks shardc --param-dtype bf16
against torch_models.py's bf16 reference: one process that casts the f32
masters in the graph and sums the ranks' gradients by hand. This script
puts PyTorch's FSDP2 in that reference's place: fully_shard with
MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
on --ranks gloo processes (torch.multiprocessing), so that the bf16 casts
of the parameters, the f32 reduce-scatter of the bf16 gradients and the
division by the world size are FSDP2's own.

The model is a module whose parameters are nn.Parameters under the Hugging
Face state-dict names (transformer.h.0.attn.c_attn.weight, ...), sharded by
one fully_shard on the root (torch_models' loss is one function, so there
are no block modules whose forward FSDP2 could hook). Its forward takes the
parameters as FSDP2 hands them over, unsharded and already cast to bf16
(checked), and calls torch_models.loss(c, W, x, y, torch.bfloat16) on them:
that function's own cast of the masters is then a no-op (.to of a bf16
tensor returns it), and it only supplies the op-by-op precision (f32 math
inside each op, its output rounded to bf16, the logits upcast for the loss).

As check_train.py: the same random weights (torch_models.random_params,
seed 1, --init-std), the same token file (a successor rule with 20% noise,
numpy seed 0), the global batch --batch split over the ranks in row order,
AdamW (betas 0.9/0.999, eps 1e-8, --weight-decay on every parameter,
constant --lr), shardc compiled for --mesh RANKS --param-dtype bf16 (reduce
dtype f32, shardc's default) --fuse-epilogues=false (FSDP2 rounds each
GEMM's output before the GELU; shardc's GELU epilogues do not) with
micro-batch --batch/RANKS and run under mpirun. Compared:
  * the first step's gradients, shardc's --dump-grads against FSDP2's
    (each sharded .grad gathered with DTensor.full_tensor()), relative L2
    per tensor < --grad-rtol;
  * the loss at each of --steps steps (FSDP2: the ranks' mean), relative
    < --rtol.
Also printed, not bounded: FSDP2's and shardc's first-step gradients and
losses against torch_models' bf16 reference (check_train's: one process,
torch.optim.AdamW on plain tensors), and shardc's gradients against the
f32 reference, which
must be at least 2 x --grad-rtol away (as in check_train, or the check could
not tell bf16 from f32).

Needs PyTorch 2.x (FSDP2) and numpy, e.g. a virtual environment:

    /work/venv-torch/bin/python tools/bench/fsdp2_mixed_peer.py \\
        --config test/e2e/Inputs/llama-tiny.json
"""
import argparse
import json
import os
import socket
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

import torch_models as tm  # noqa: E402
from harness import MPIRUN, read_log, run  # noqa: E402

torch.set_default_dtype(torch.float32)


class HFParams(nn.Module):
    """The model's parameters as nn.Parameters under their Hugging Face
    names (nested modules, so state_dict() has exactly those names); its
    forward is torch_models' bf16 loss on them as they are."""

    def __init__(self, c, W0):
        super().__init__()
        self.c = c
        for name, t in W0.items():
            *path, leaf = name.split(".")
            m = self
            for part in path:
                if not hasattr(m, part):
                    m.add_module(part, nn.Module())
                m = getattr(m, part)
            m.register_parameter(leaf, nn.Parameter(t.detach().clone()))

    def forward(self, x, y):
        W = dict(self.named_parameters())
        wrong = [f"{n} {w.dtype}" for n, w in W.items() if w.dtype != torch.bfloat16]
        assert not wrong, f"FSDP2 did not hand over bf16 parameters: {wrong[:3]}"
        return tm.loss(self.c, W, x, y, torch.bfloat16)


def fsdp2_rank(rank, args, c, W0, tokens, port, out):
    """One FSDP2 rank: trains --steps steps; rank 0 writes the first step's
    full gradients and the per-step losses (the ranks' mean) to out."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.set_num_threads(1)
    P, B, T = args.ranks, args.batch, args.seq
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=P)
    model = HFParams(c, W0)
    fully_shard(model, mesh=init_device_mesh("cpu", (P,)),
                mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                               reduce_dtype=torch.float32))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=args.weight_decay)
    rows = slice(rank * B // P, (rank + 1) * B // P)
    losses, grads = [], None
    for s in range(args.steps):
        opt.zero_grad()
        x, y = tm.batch(tokens, s, B, T)
        loss = model(x[rows], y[rows])
        loss.backward()
        if s == 0:
            grads = {n: p.grad.full_tensor().detach().clone()
                     for n, p in model.named_parameters()}
        opt.step()
        total = torch.tensor([loss.item()], dtype=torch.float64)
        dist.all_reduce(total)
        losses.append(total.item() / P)
    if rank == 0:
        tm.write_safetensors(os.path.join(out, "fsdp2_grads.safetensors"), grads)
        with open(os.path.join(out, "fsdp2_losses.json"), "w") as f:
            json.dump(losses, f)
    # Both ranks tear gloo down together (a rank that left first aborted
    # now and then: "terminate called without an active exception").
    dist.barrier()
    dist.destroy_process_group()


def reference(args, c, W0, tokens, dtype, steps):
    """check_train.py's reference: one process, each rank's rows a backward
    pass of its own, the gradients summed in f32, torch.optim.AdamW on the
    f32 masters. Returns the first step's gradients and the losses."""
    P, B, T = args.ranks, args.batch, args.seq
    W = {n: t.clone().requires_grad_(True) for n, t in W0.items()}
    opt = torch.optim.AdamW(list(W.values()), lr=args.lr, betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=args.weight_decay)
    grads, losses = None, []
    for s in range(steps):
        opt.zero_grad()
        x, y = tm.batch(tokens, s, B, T)
        total = 0.0
        for r in range(P):
            rows = slice(r * B // P, (r + 1) * B // P)
            loss = tm.loss(c, W, x[rows], y[rows], dtype) / P
            loss.backward()
            total += loss.item()
        if s == 0:
            grads = {n: t.grad.clone() for n, t in W.items()}
        opt.step()
        losses.append(total)
    return grads, losses


def worst_loss(got, ref):
    """(worst relative difference, its step) of two loss curves."""
    return max((abs(a - b) / abs(b), s) for s, (a, b) in enumerate(zip(got, ref)))


def relative(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def worst(got, ref):
    """(worst relative difference, its tensor's name) over ref's tensors."""
    return max((relative(got[n], g), n) for n, g in ref.items())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=os.path.join(ROOT, "test", "e2e", "Inputs",
                                                     "gpt2-tiny.json"))
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--workdir", help="where to keep the files (default: a temporary folder)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4, help="the global batch")
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--init-std", type=float, default=0.3)
    ap.add_argument("--rtol", type=float, default=1e-2)
    ap.add_argument("--grad-rtol", type=float, default=4e-3)
    args = ap.parse_args()
    P, B, T, S = args.ranks, args.batch, args.seq, args.steps
    if B % P:
        ap.error(f"--batch {B} does not split over {P} ranks")

    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or tmp
        os.makedirs(work, exist_ok=True)
        c = tm.load_config(args.config)
        # check_train.py's tokens (--grad-accum 1).
        V = c["vocab_size"]
        rng = np.random.default_rng(0)
        tokens = np.empty(B * T * S + 1, dtype=np.int64)
        tokens[0] = 1
        for i in range(1, len(tokens)):
            tokens[i] = (tokens[i - 1] * 7 + 3) % V if rng.random() < 0.8 else rng.integers(0, V)
        tok_path = os.path.join(work, "tokens.bin")
        tm.write_tokens(tok_path, tokens)
        W0 = tm.random_params(c, seed=1, std=args.init_std)
        w_path = os.path.join(work, "weights.safetensors")
        tm.write_safetensors(w_path, W0)

        # FSDP2.
        t0 = time.perf_counter()
        mp.spawn(fsdp2_rank, args=(args, c, W0, tokens, free_port(), work), nprocs=P)
        fsdp_grads = tm.read_safetensors(os.path.join(work, "fsdp2_grads.safetensors"))
        with open(os.path.join(work, "fsdp2_losses.json")) as f:
            fsdp_losses = json.load(f)
        t_fsdp = time.perf_counter() - t0

        # shardc, as check_train.py runs it.
        t0 = time.perf_counter()
        exe = os.path.join(work, "train")
        run([args.shardc, args.config, "--micro-batch", str(B // P), "--seq-len", str(T),
             "--optimizer", "adamw", "--recompute", "none", "--mesh", str(P),
             "--param-dtype", "bf16", "--fuse-epilogues=false", "-o", exe])
        launch = MPIRUN + ["-np", str(P)] if P > 1 else []
        flags = ["--init-from", w_path, "--data", tok_path, "--grad-accum", "1",
                 "--lr", str(args.lr), "--weight-decay", str(args.weight_decay),
                 "--clip-grad-norm", "0", "--lr-schedule", "constant",
                 "--warmup-steps", "0", "--momentum", "0.9"]
        grads_path = os.path.join(work, "grads.safetensors")
        run(launch + [exe, *flags, "--steps", "1", "--dump-grads", grads_path], timeout=1800)
        got = tm.read_safetensors(grads_path)
        log = os.path.join(work, "log.jsonl")
        run(launch + [exe, *flags, "--steps", str(S), "--log", log], timeout=1800)
        entries = read_log(log)
        t_shardc = time.perf_counter() - t0

    print(f"{os.path.basename(args.config)}: FSDP2 (torch {torch.__version__}, gloo, "
          f"{P} ranks, MixedPrecisionPolicy bf16/f32) against shardc --mesh {P} "
          f"--param-dtype bf16; global batch {B} x {T}, AdamW lr {args.lr:g} "
          f"wd {args.weight_decay:g}, init std {args.init_std:g}")
    failures = []
    if set(got) != set(fsdp_grads):
        failures.append(f"gradient names differ: {sorted(set(got) ^ set(fsdp_grads))[:4]}")
    g_worst, g_name = worst(got, fsdp_grads)
    print(f"gradients: {len(fsdp_grads)} tensors, worst relative difference "
          f"{g_worst:.2e} ({g_name})")
    if not g_worst < args.grad_rtol:
        failures.append(f"gradient of {g_name}: {g_worst:.3e} >= {args.grad_rtol}")
    ref16, ref_losses = reference(args, c, W0, tokens, torch.bfloat16, S)
    ref32, _ = reference(args, c, W0, tokens, None, 1)
    r_worst, r_name = worst(fsdp_grads, ref16)
    r_loss, r_step = worst_loss(fsdp_losses, ref_losses)
    print(f"  FSDP2 against torch_models' bf16 reference: worst {r_worst:.2e} ({r_name}); "
          f"losses: worst {r_loss:.2e} (step {r_step})")
    s_worst, s_name = worst(got, ref16)
    s_loss, s_step = worst_loss([e["loss"] for e in entries], ref_losses)
    print(f"  shardc against torch_models' bf16 reference: worst {s_worst:.2e} ({s_name}); "
          f"losses: worst {s_loss:.2e} (step {s_step})")
    f_worst, f_name = worst(got, ref32)
    print(f"  shardc against the f32 reference: worst {f_worst:.2e} ({f_name})")
    if not f_worst >= 2 * args.grad_rtol:
        failures.append(f"{f_worst:.2e} from the f32 gradients, under 2 x --grad-rtol: "
                        "the check would not tell bf16 from f32")

    if len(entries) != S:
        failures.append(f"{len(entries)} log lines, expected {S}")
    l_worst, l_step = 0.0, None
    for e, r in zip(entries, fsdp_losses):
        rel = abs(e["loss"] - r) / abs(r)
        if rel >= l_worst:
            l_worst, l_step = rel, e["step"]
        print(f"step {e['step']:2d}: shardc {e['loss']:.7f} FSDP2 {r:.7f} rel {rel:.2e}")
    if not l_worst < args.rtol:
        failures.append(f"loss at step {l_step}: {l_worst:.3e} >= {args.rtol}")
    if np.mean(fsdp_losses[-3:]) >= np.mean(fsdp_losses[:3]):
        failures.append("the loss did not decrease; the check would not be telling")
    print(f"time: FSDP2 {t_fsdp:.1f} s (spawn and import included), shardc {t_shardc:.1f} s "
          "(compile included)")
    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        sys.exit(1)
    print(f"PASS: worst gradient {g_worst:.2e} (bound {args.grad_rtol:g}), worst loss "
          f"{l_worst:.2e} at step {l_step} (bound {args.rtol:g}), loss "
          f"{fsdp_losses[0]:.4f} -> {fsdp_losses[-1]:.4f}")


if __name__ == "__main__":
    main()
