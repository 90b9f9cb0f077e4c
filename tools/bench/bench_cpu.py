#!/usr/bin/env python3
"""CPU training throughput: shardc against PyTorch eager, torch.compile and FSDP2.

Trains one GPT-2 config (AdamW, the same batch and sequence length) five
ways in one run and prints tokens/s with the ratios:

  - the shardc executable in one process (--threads threads);
  - PyTorch eager and torch.compile in one process, same threads (a module
    GPT-2 with F.scaled_dot_product_attention, PyTorch's fastest CPU path);
  - the shardc executable at --mesh 2 under mpirun, 1 thread a rank;
  - PyTorch FSDP2 (fully_shard per block and the root) over gloo, 2
    processes, 1 thread each.

Two-rank figures are global: both ranks' tokens over the step time. Timed
steps exclude warm-up steps (and torch.compile's compilation). PyTorch 2.x
is needed for torch.compile and FSDP2 (PyPI's, in a virtual environment:
--python); Debian's 1.13 runs eager only and the rest print "n/a".

--dtype f32 (the default): everything in f32. --dtype bf16: mixed precision
with f32 master weights and f32 AdamW on every side:
  - shardc compiled with --param-dtype bf16 (reduce dtype f32: FSDP2's
    MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=f32)), on one rank
    and on --mesh 2;
  - PyTorch eager and torch.compile as users run bf16 on the CPU: the
    module's parameters stay f32 and the forward (loss included) runs under
    torch.autocast("cpu", dtype=torch.bfloat16), so GEMMs and attention
    take bf16 copies of their inputs while the embeddings, the residual
    stream and the norms stay f32 (autocast's CPU op lists); the backward
    runs outside autocast, as autocast's documentation says;
  - FSDP2 with fully_shard(..., mp_policy=MixedPrecisionPolicy(
    param_dtype=torch.bfloat16, reduce_dtype=torch.float32)) on each block
    and the root: bf16 parameters and activations throughout, gradients
    reduce-scattered in f32.
The logits are upcast to f32 for the loss on every side. The output says
whether the cores have bf16 instructions (avx512_bf16, amx_bf16 in
/proc/cpuinfo's flags): without them bf16 GEMMs convert their operands to
f32 to multiply, and bf16 saves memory traffic only.

    python3 tools/bench/bench_cpu.py --python /work/venv-torch/bin/python \\
        --model gpt2-6l-384 --seq-len 256 [--dtype bf16]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

from harness import MPIRUN  # noqa: E402

MODELS = {
    # The shardc presets, as config.json for both sides.
    "tiny": {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 64, "n_layer": 2,
             "n_head": 4, "n_positions": 64, "layer_norm_epsilon": 1e-5,
             "activation_function": "gelu_new"},
    "gpt2-6l-384": {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 384,
                    "n_layer": 6, "n_head": 6, "n_positions": 256,
                    "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"},
}

# The PyTorch side, run by --python in its own process: prints one JSON line
# {"tok_s": ..., "torch": version}. argv: config.json mode B T steps warmup
# threads dtype, mode one of eager, compile, fsdp2; dtype f32 or bf16 (the
# module docstring says how each mode runs bf16).
TORCH_SIDE = r'''
import contextlib, json, os, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

cfg, mode = json.load(open(sys.argv[1])), sys.argv[2]
B, T, steps, warmup, threads = map(int, sys.argv[3:8])
bf16 = sys.argv[8] == "bf16"
torch.set_num_threads(threads)
C, H, V, L = cfg["n_embd"], cfg["n_head"], cfg["vocab_size"], cfg["n_layer"]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, h):
        q, k, v = self.c_attn(self.ln_1(h)).split(C, dim=-1)
        heads = lambda t: t.view(B, T, H, C // H).transpose(1, 2)
        a = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        h = h + self.c_proj(a.transpose(1, 2).reshape(B, T, C))
        return h + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(h)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, x, y):
        h = self.wte(x) + self.wpe.weight[:T]
        for block in self.h:
            h = block(h)
        logits = self.ln_f(h) @ self.wte.weight.t()  # tied head
        # The loss in f32 (a no-op under f32).
        return F.cross_entropy(logits.float().view(-1, V), y.view(-1))


rank, world = 0, 1
torch.manual_seed(0)
model = GPT()
if mode == "fsdp2":
    import torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mp = {}
    if bf16:
        mp["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                               reduce_dtype=torch.float32)
    for block in model.h:
        fully_shard(block, **mp)
    fully_shard(model, **mp)
step_fn = model
if mode == "compile":
    step_fn = torch.compile(model)
# eager and compile under bf16: autocast around the forward only.
autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) \
    if bf16 and mode != "fsdp2" else contextlib.nullcontext
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
g = torch.Generator().manual_seed(rank)
times = []
for s in range(warmup + steps):
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, V, (B, T), generator=g)
    t0 = time.perf_counter()
    opt.zero_grad()
    with autocast():
        loss = step_fn(x, y)
    loss.backward()
    opt.step()
    times.append(time.perf_counter() - t0)
if rank == 0:
    print(json.dumps({"tok_s": world * B * T * steps / sum(times[warmup:]),
                      "torch": torch.__version__ + ", " +
                      torch.backends.cpu.get_cpu_capability()
                      if hasattr(torch.backends, "cpu") else torch.__version__}))
if mode == "fsdp2":
    dist.barrier()  # both ranks tear gloo down together
    dist.destroy_process_group()
'''


def shardc_tokens_per_s(args, cfg, B, T, work, ranks):
    exe = os.path.join(work, f"train{ranks}")
    flags = ["--mesh", str(ranks)] if ranks > 1 else []
    if args.dtype == "bf16":
        flags += ["--param-dtype", "bf16"]
    flags += args.shardc_flags.split()
    subprocess.run([args.shardc, cfg, "--micro-batch", str(B), "--seq-len", str(T),
                    "-o", exe] + flags, check=True, capture_output=True)
    log = os.path.join(work, f"log{ranks}.jsonl")
    threads = args.threads if ranks == 1 else 1
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [exe, "--steps", str(args.warmup + args.steps), "--lr", "1e-4", "--log", log]
    if ranks > 1:
        cmd = MPIRUN + ["-np", str(ranks)] + cmd
    out = subprocess.run(cmd, check=True, capture_output=True, env=env, text=True).stdout
    with open(log) as f:
        ms = [json.loads(line)["ms"] for line in f][args.warmup:]
    # The trainer's header names what computed its GEMMs.
    gemms = re.search(r"; GEMMs: ([^;\n]+)", out)
    return ranks * B * T * len(ms) / (sum(ms) / 1000.0), gemms.group(1) if gemms else "?"


def cpu_model():
    """The cores' model name and CPUID family/model, as lscpu shows them."""
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    return (f"{info.get('model name', '?')} (family {info.get('cpu family', '?')}, "
            f"model {info.get('model', '?')}), {os.cpu_count()} cores")


def bf16_instructions():
    """The cores' bf16 instruction sets among /proc/cpuinfo's flags."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = line.partition(":")[2].split()
                return [x for x in ("avx512_bf16", "amx_bf16") if x in flags]
    return []


def torch_tokens_per_s(args, cfg, B, T, work, mode):
    script = os.path.join(work, "torch_side.py")
    with open(script, "w") as f:
        f.write(TORCH_SIDE)
    threads = 1 if mode == "fsdp2" else args.threads
    cmd = [args.python, script, cfg, mode, str(B), str(T), str(args.steps),
           str(args.warmup + (2 if mode == "compile" else 0)), str(threads), args.dtype]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if mode == "fsdp2":
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
        procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), WORLD_SIZE="2",
                                                 LOCAL_RANK=str(r)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in range(2)]
        outs = [p.communicate() for p in procs]
        if any(p.returncode for p in procs):
            return None, outs[0][1].strip().splitlines()[-1:] or ["failed"]
        out = outs[0][0]
    else:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode:
            return None, r.stderr.strip().splitlines()[-1:] or ["failed"]
        out = r.stdout
    d = json.loads(out.strip().splitlines()[-1])
    return d["tok_s"], d["torch"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="tiny")
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--shardc-flags", default="",
                    help="more flags for shardc's compile, e.g. --fuse-layout=false "
                         "(the program before the layout passes)")
    ap.add_argument("--python", default=sys.executable,
                    help="the Python whose PyTorch is measured (2.x for compile, FSDP2)")
    ap.add_argument("--skip-mesh", action="store_true", help="one process only")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                    help="f32, or bf16 mixed precision with f32 masters and AdamW "
                         "(shardc --param-dtype bf16, autocast, FSDP2's MixedPrecisionPolicy)")
    args = ap.parse_args()
    c = dict(MODELS[args.model], n_positions=max(MODELS[args.model]["n_positions"],
                                                  args.seq_len))
    B, T = args.micro_batch, args.seq_len
    with tempfile.TemporaryDirectory() as work:
        cfg = os.path.join(work, "config.json")
        with open(cfg, "w") as f:
            json.dump(c, f)
        tok, gemms = shardc_tokens_per_s(args, cfg, B, T, work, 1)
        rows = [("shardc", tok, f"GEMMs: {gemms}")]
        for mode, name in (("eager", "pytorch eager"), ("compile", "torch.compile")):
            tok, info = torch_tokens_per_s(args, cfg, B, T, work, mode)
            rows.append((name, tok, info))
        if not args.skip_mesh and shutil.which("mpirun"):
            tok, gemms = shardc_tokens_per_s(args, cfg, B, T, work, 2)
            rows.append(("shardc --mesh 2", tok, f"GEMMs: {gemms}"))
            tok, info = torch_tokens_per_s(args, cfg, B, T, work, "fsdp2")
            rows.append(("FSDP2 gloo 2 ranks", tok, info))
    precision = ("AdamW f32" if args.dtype == "f32" else
                 "bf16 compute, f32 masters and AdamW (shardc --param-dtype bf16; "
                 "torch autocast; FSDP2 MixedPrecisionPolicy bf16/f32)")
    print(f"model {args.model}: micro-batch {B} x {T}, {precision}; one process "
          f"{args.threads} threads, two ranks 1 thread each; {args.steps} timed steps")
    print(f"cores: {cpu_model()}" + "".join(
        f"; {v}={os.environ[v]}" for v in ("OPENBLAS_CORETYPE",) if v in os.environ))
    isa = bf16_instructions()
    print("bf16 instructions: " + (", ".join(isa) if isa else
                                    "none (the cores lack bf16 instructions)"))
    by = {name: tok for name, tok, _ in rows}
    for name, tok, info in rows:
        what = info if isinstance(info, str) else "; ".join(info)
        if tok is None:
            print(f"  {name:20s} {'n/a':>10s}        ({what})")
        else:
            if what and not what.startswith("GEMMs"):
                what = "torch " + what
            print(f"  {name:20s} {tok:10.0f} tok/s" + (f"  ({what})" if what else ""))
    for ours, peer in (("shardc", "pytorch eager"), ("shardc", "torch.compile"),
                       ("shardc --mesh 2", "FSDP2 gloo 2 ranks")):
        if by.get(ours) and by.get(peer):
            print(f"  {ours} / {peer}: {by[ours] / by[peer]:.2f}x")


if __name__ == "__main__":
    main()
