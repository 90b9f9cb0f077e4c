#!/usr/bin/env python3
"""The GPU benchmark kit: build here, run on the lent GPU machine.

The GPU machine has no MLIR, so the work is split in two:

    tools/bench/bench_gpu.py build --shardc build/bin/shardc --out .gpu
    tar cf - .gpu | xz -T2 -9 > .gpu.tar.xz   # 260 MB -> 17 MB: carry this
    # then, on the GPU machine, from the repository root (.gpu.tar.xz carried):
    mkdir -p /tmp/k && tar xJf .gpu.tar.xz -C /tmp/k
    tools/bench/bench_gpu.py run --out /tmp/k/.gpu [--parts kernels,curves,...]

The device tool carries at most 64 MiB with the working tree; the kit's
executables share most of their bytes, which xz's 64 MiB window finds.

`build` compiles each model for --target cuda, packs the executables and
shardc-cuda-tests with their libraries (one shared lib/), writes each
curve's token file and trains the CPU build on it here: the CPU curve is
the reference the GPU's is compared with there (manifest.json).

`run` does, in this order (each part prints its table; --parts picks):
- env:       the GPU, driver, and where CUDA's libraries were found;
- kernels:   shardc-cuda-tests, every CUDA kernel against its CPU twin;
- membench:  the memory-bound kernels' rates at the speed model's shapes
             (shardc-cuda-kernel-bench: microseconds, least bytes, GB/s),
             and --float8's FP8 GEMMs and casts at Llama-3-8B's shapes beside
             torch._scaled_mm (fp8_gemm_peer.py);
- calibrate: shardc-calibrate-cuda (`shardc --calibrate FILE --target
             cuda`'s tool): cuBLASLt GEMMs by dtype and shape, cuDNN's SDPA,
             bandwidth and launches, saved as <gpu>-<date>-calibration.json
             in the log directory for `shardc --predict FILE` (commit it
             beside the log); --dry checks that the file predicts;
- curves:    each small model's GPU curve against the CPU's (worst relative
             difference; f32 within 1e-5), and --cuda-graphs=false bit
             for bit against the replayed graphs; the meshes run their
             ranks on the one GPU (host-staged) under mpirun;
             bf16 curves (bf16 compute on both targets) are held to the
             CPU's bf16 curve, and the f32 CPU curve's distance is shown;
- sanitizer: compute-sanitizer memcheck and racecheck over a few steps;
- speed:     the speed model (default gpt2-124m, micro-batch 4 x 1024)
             under shardc (f32, f32 with --allow-tf32, bf16) and under
             PyTorch (eager and torch.compile; f32 without TF32, and bf16
             autocast):
             the same batch, AdamW, median tok/s over the steps after the
             warm-up, peak memory and MFU side by side;
- llama:     the second speed model (a Llama-3.2-1B shape, tools/bench/
             llama-1b.json) in bf16 and --float8=tensorwise beside Hugging
             Face's LlamaForCausalLM under torch.compile (bf16 autocast,
             fused AdamW), the same micro-batch and tokens;
- offload:   the speed model with --offload=cpu;
- trace:     the speed model's step, kernel by kernel (--trace).

A run with the speed part writes its results file (--results; by default
<gpu>-<date>.json in the log directory, to commit under tools/bench/results/
beside the log): the commit the kit was built from, the GPU, and each
speed run's tok/s, ms a step, peak MiB and shardc's own --predict for that
GPU from the same build.

`--dry` runs the whole kit here on the emulated CUDA device with the tiny
model (build and run in one go, PyTorch on the CPU): it is what CI runs,
so the kit works the day a GPU is lent.
"""
import argparse
import glob
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

# The small models whose GPU curves are compared with the CPU's: name ->
# (model, shardc flags of both builds, flags of the CUDA build only, mesh).
# The odd ones: widths, vocabularies, heads and sequences that are not
# multiples of 8. A mesh runs its ranks on the one GPU (host-staged).
CURVES = {
    "tiny": ("tiny", "--micro-batch 4 --seq-len 64", "", 1),
    "gpt2-tiny": ("test/e2e/Inputs/gpt2-tiny.json", "--micro-batch 4 --seq-len 16", "", 1),
    "llama-tiny": ("test/e2e/Inputs/llama-tiny.json", "--micro-batch 4 --seq-len 16", "", 1),
    "gpt2-odd": ("test/e2e/Inputs/gpt2-odd.json", "--micro-batch 3 --seq-len 13", "", 1),
    "llama-odd": ("test/e2e/Inputs/llama-odd.json", "--micro-batch 3 --seq-len 13", "", 1),
    "gpt2-odd-chunk5": ("test/e2e/Inputs/gpt2-odd.json",
                        "--micro-batch 3 --seq-len 13 --loss-chunk-rows 5", "", 1),
    "tiny-mesh2": ("tiny", "--micro-batch 4 --seq-len 64 --mesh 2", "", 2),
    "gpt2-odd-mesh4-raf2": ("test/e2e/Inputs/gpt2-odd.json",
                            "--micro-batch 3 --seq-len 13 --mesh 4 --reshard-after-forward=2",
                            "", 4),
    # Tensor parallelism (--tp, the mesh's innermost axis): its sequence
    # all-gathers and reduce-scatters on the tp axis, host-staged here.
    "llama-tiny-tp2": ("test/e2e/Inputs/llama-tiny.json",
                       "--micro-batch 4 --seq-len 16 --tp 2", "", 2),
    "gpt2-tiny-mesh2-tp2": ("test/e2e/Inputs/gpt2-tiny.json",
                            "--micro-batch 4 --seq-len 16 --mesh 2 --tp 2", "", 4),
    # bf16 compute on both targets: the GPU's curve against the CPU's bf16
    # one (BF16_RTOL), and, for contrast, how far the f32 CPU curve is.
    "gpt2-tiny-bf16": ("test/e2e/Inputs/gpt2-tiny.json",
                       "--micro-batch 4 --seq-len 16 --param-dtype bf16", "", 1),
    "llama-tiny-bf16": ("test/e2e/Inputs/llama-tiny.json",
                        "--micro-batch 4 --seq-len 16 --param-dtype bf16", "", 1),
    "llama-odd-bf16": ("test/e2e/Inputs/llama-odd.json",
                       "--micro-batch 3 --seq-len 13 --param-dtype bf16", "", 1),
    "gpt2-odd-chunk5-bf16": ("test/e2e/Inputs/gpt2-odd.json",
                             "--micro-batch 3 --seq-len 13 --loss-chunk-rows 5 "
                             "--param-dtype bf16", "", 1),
    "gpt2-tiny-bf16-mesh2": ("test/e2e/Inputs/gpt2-tiny.json",
                             "--micro-batch 4 --seq-len 16 --param-dtype bf16 --mesh 2", "", 2),
    "llama-tiny-bf16-mesh2-tp2": ("test/e2e/Inputs/llama-tiny.json",
                                  "--micro-batch 4 --seq-len 16 --param-dtype bf16 "
                                  "--mesh 2 --tp 2", "", 4),
    # f32 with --allow-tf32 on the GPU only: TF32 against the f32 CPU.
    "gpt2-tiny-tf32": ("test/e2e/Inputs/gpt2-tiny.json", "--micro-batch 4 --seq-len 16",
                       "--allow-tf32", 1),
}
F32_RTOL = 1e-5
# bf16 curves part after a few steps wherever one rounding falls the other
# way (cuBLASLt's GEMMs sum in another order than oneDNN's); the emulated
# device, which sums as the CPU does, holds them within 2e-4.
BF16_RTOL = 1e-2
# The speed model's builds: mode -> (the speed table's name, shardc flags).
SPEED_MODES = {
    "speed": ("shardc f32", []),
    "speed-tf32": ("shardc f32 --allow-tf32", ["--allow-tf32"]),
    "speed-bf16": ("shardc bf16", ["--param-dtype", "bf16"]),
    "speed-offload": ("shardc f32 --offload=cpu", ["--offload=cpu"]),
}
# The second speed model (issue 64's Llama-3.2-1B shape, bf16 on one GPU):
# mode -> (the table's name, shardc flags), beside Hugging Face's
# LlamaForCausalLM under torch.compile (hf_llama_torch).
LLAMA_MODES = {
    "llama-bf16": ("shardc bf16", ["--param-dtype", "bf16"]),
    "llama-float8": ("shardc float8", ["--param-dtype", "bf16", "--float8=tensorwise"]),
}
CURVE_STEPS = 20
CURVE_TRAIN = ["--seed", "5", "--lr", "3e-3"]


def mpirun(ranks):
    """The launcher of `ranks` ranks: none for one, else mpirun (as root
    too, more ranks than cores), passing the library path on."""
    if ranks == 1:
        return []
    exe = shutil.which("mpirun")
    if exe is None:
        return None
    return [exe, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
            "-x", "LD_LIBRARY_PATH"]


def sh(cmd, timeout=1800, env=None, check=True):
    """Runs cmd, returns (rc, stdout+stderr); exits with the output on
    failure when `check`."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout, env=env)
    if check and r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}")
    return r.returncode, r.stdout


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def write_tokens(path, vocab, count, seed=0):
    import numpy as np
    import torch_models as tm
    tm.write_tokens(path, np.random.default_rng(seed).integers(0, vocab, size=count))


def vocab_of(model):
    if model.endswith(".json"):
        with open(os.path.join(ROOT, model)) as f:
            return json.load(f)["vocab_size"]
    return 50257


# --- build (here) -----------------------------------------------------------

def pack(exe, out):
    """Copies exe into out/bin and its libraries into out/lib (shared by
    every executable of the kit)."""
    sh([os.path.join(ROOT, "tools", "pack_gpu.sh"), exe, os.path.join(out, "bin")])


def model_path(model):
    """A preset's name as it is; a config.json or ONNX file under ROOT."""
    return model if not model.endswith((".json", ".onnx")) else os.path.join(ROOT, model)


def compile_model(shardc, model, flags, exe):
    sh([shardc, model_path(model), *flags, "-o", exe])


def cpu_curve(args, model, flags, ranks, tokens, name):
    """Trains the CPU build of model on tokens here: its losses."""
    exe = os.path.join(args.tmp, name)
    compile_model(args.shardc, model, flags, exe)
    log = os.path.join(args.tmp, f"{name}.jsonl")
    sh([*mpirun(ranks), exe, "--data", tokens, "--steps", str(CURVE_STEPS),
        *CURVE_TRAIN, "--log", log])
    return [e["loss"] for e in read_log(log)]


# The bundled machines --predict knows, by the GPU name nvidia-smi gives.
PREDICT_MACHINES = {"H100": "h100-sxm", "H200": "h200", "B200": "b200"}


def predictions(shardc, model, flags):
    """shardc's --predict step time (ms) of this build on each bundled GPU
    machine, by machine name; None where it refuses one (--offload=cpu)."""
    out = {}
    for machine in PREDICT_MACHINES.values():
        rc, text = sh([shardc, model_path(model), *flags, "--report", "--predict", machine,
                       "--emit", "rt", "-o", os.devnull], check=False)
        got = [l for l in text.splitlines() if l.startswith("predicted step time:")]
        out[machine] = float(got[-1].split()[3]) if rc == 0 and got else None
    return out


def source_commit():
    """The commit the kit is built from (with '+dirty' when the working tree
    differs from it), or 'unknown' outside a git checkout."""
    rc, head = sh(["git", "-C", ROOT, "rev-parse", "HEAD"], check=False)
    if rc != 0:
        return "unknown"
    rc, status = sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                    check=False)
    return head.strip() + ("+dirty" if status.strip() else "")


def build_llama(args, out, cuda):
    """The second speed model's builds (LLAMA_MODES) and their predictions:
    its manifest entry."""
    config = os.path.relpath(os.path.abspath(args.llama_model), ROOT)
    entry = {"name": args.llama_name, "config": config, "B": args.llama_batch,
             "T": args.llama_seq, "speed": {}, "predicted_ms": {}}
    for mode, (_, flags) in LLAMA_MODES.items():
        exe = os.path.join(args.tmp, f"train-{mode}")
        shape = ["--micro-batch", str(args.llama_batch), "--seq-len", str(args.llama_seq),
                 *cuda, *flags]
        compile_model(args.shardc, config, shape, exe)
        pack(exe, out)
        entry["speed"][mode] = f"train-{mode}"
        entry["predicted_ms"][mode] = predictions(args.shardc, config, shape)
    return entry


def build(args):
    out = os.path.abspath(args.out)
    os.makedirs(os.path.join(out, "bin"), exist_ok=True)
    os.makedirs(os.path.join(out, "curves"), exist_ok=True)
    cuda = ["--target", "cuda"] + (["--cuda-emulation"] if args.dry else [])
    manifest = {"curves": {}, "speed": {}, "emulated": args.dry}
    tests = os.path.join(os.path.dirname(args.shardc), "..", "test", "unit", "shardc-cuda-tests")
    if not args.dry and os.path.exists(tests):
        pack(tests, out)
        manifest["kernels"] = "shardc-cuda-tests"
    # The memory-bound kernels' rates (`membench`): the emulated device's
    # build of the same program for --dry.
    bindir = os.path.dirname(os.path.realpath(shutil.which(args.shardc) or args.shardc))
    bench = os.path.join(bindir,
                         "shardc-cuda-emu-kernel-bench" if args.dry else "shardc-cuda-kernel-bench")
    if os.path.exists(bench):
        pack(bench, out)
        manifest["membench"] = os.path.basename(bench)
    # The GPU's calibration for --predict (`calibrate`): the emulated
    # device's build for --dry.
    calibrate = os.path.join(bindir,
                             "shardc-calibrate-cuda-emu" if args.dry else "shardc-calibrate-cuda")
    if os.path.exists(calibrate):
        pack(calibrate, out)
        manifest["calibrate"] = os.path.basename(calibrate)
    curves = {k: v for k, v in CURVES.items() if not args.dry or k in ("tiny", "tiny-mesh2")}
    for name, (model, shape, cuda_only, ranks) in curves.items():
        tokens = os.path.join(out, "curves", f"{name}.bin")
        write_tokens(tokens, vocab_of(model), 64 * 64 * CURVE_STEPS + 1)
        entry = {"exe": f"train-{name}", "tokens": f"curves/{name}.bin", "ranks": ranks,
                 "cpu": cpu_curve(args, model, shape.split(), ranks, tokens, f"cpu-{name}"),
                 "rtol": F32_RTOL if not cuda_only and "bf16" not in shape else BF16_RTOL}
        if "bf16" in shape:  # the f32 CPU curve, for contrast
            f32 = shape.replace("--param-dtype bf16", "").split()
            entry["cpu_f32"] = cpu_curve(args, model, f32, ranks, tokens, f"cpu-f32-{name}")
        exe = os.path.join(args.tmp, f"train-{name}")
        compile_model(args.shardc, model, shape.split() + cuda + cuda_only.split(), exe)
        pack(exe, out)
        manifest["curves"][name] = entry
        print(f"built {name}: CPU curve {entry['cpu'][0]:.6f} -> {entry['cpu'][-1]:.6f}",
              flush=True)
    speed_model, B, T = args.speed_model, args.batch, args.seq
    manifest["predicted_ms"] = {}
    for mode, (_, flags) in SPEED_MODES.items():
        exe = os.path.join(args.tmp, f"train-{mode}")
        shape = ["--micro-batch", str(B), "--seq-len", str(T), *cuda, *flags]
        compile_model(args.shardc, speed_model, shape, exe)
        pack(exe, out)
        manifest["speed"][mode] = f"train-{mode}"
        manifest["predicted_ms"][mode] = predictions(args.shardc, speed_model, shape)
    manifest["speed_shape"] = {"model": speed_model, "B": B, "T": T}
    manifest["llama"] = build_llama(args, out, cuda)
    manifest["commit"] = source_commit()
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"kit in {out} ({sh(['du', '-sh', out])[1].split()[0]})")


# --- run (on the GPU machine) -----------------------------------------------

def library_path(out):
    """out/lib first, then the first folder holding each CUDA library."""
    dirs = [os.path.join(out, "bin", "lib")]
    roots = ["/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib"]
    roots += glob.glob("/usr/local/lib/python3*/dist-packages/nvidia/*/lib")
    roots += glob.glob("/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib")
    roots += glob.glob("/usr/lib/python3*/site-packages/nvidia/*/lib")
    for lib in ("libcudart.so.13", "libcublasLt.so.13", "libnccl.so.2"):
        for d in roots:
            if os.path.exists(os.path.join(d, lib)):
                if d not in dirs:
                    dirs.append(d)
                break
        else:
            print(f"note: {lib} not found in {', '.join(roots)}")
    return ":".join(dirs + [os.environ.get("LD_LIBRARY_PATH", "")])


def exe_env(out):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = library_path(out)
    return env


def part_env(args, m):
    if m["emulated"]:
        print("env: the emulated CUDA device (--dry)")
        return
    print(sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
              "--format=csv"], check=False)[1].strip())
    print("LD_LIBRARY_PATH=" + exe_env(args.out)["LD_LIBRARY_PATH"])


def part_kernels(args, m):
    if "kernels" not in m:
        print("kernels: skipped (not built)")
        return
    rc, text = sh([os.path.join(args.out, "bin", m["kernels"])], env=exe_env(args.out),
                  check=False, timeout=600)
    with open(os.path.join(args.log_dir, "kernels.log"), "w") as f:
        f.write(text)
    lines = [l for l in text.splitlines() if l.startswith(("[  PASSED", "[  FAILED", "[  SKIPPED"))
             or "Failure" in l or "error" in l.lower()]
    print("\n".join(lines[-40:]))
    print(f"kernels: exit {rc}")
    if rc != 0:
        args.failures.append("kernels")


def part_membench(args, m):
    """The memory-bound kernels at the speed model's shapes: microseconds,
    the least bytes each must move, and the rate (shardc-cuda-kernel-bench;
    --small on the emulated device, where the times mean nothing)."""
    if "membench" not in m:
        print("membench: skipped (not built)")
        args.failures.append("membench: not built")
        return
    cmd = [os.path.join(args.out, "bin", m["membench"])] + (["--small"] if m["emulated"] else [])
    rc, text = sh(cmd, env=exe_env(args.out), check=False, timeout=600)
    print(text.rstrip())
    if rc != 0:
        args.failures.append(f"membench: exit {rc}")
    # PyTorch's FP8 GEMM (torch._scaled_mm) at the kernel bench's float8
    # shapes, in the same run: the peer of its matmul_fp8 rows.
    peer = [sys.executable, os.path.join(HERE, "fp8_gemm_peer.py")] + (
        ["--small"] if m["emulated"] else [])
    rc, text = sh(peer, check=False, timeout=600)
    print(text.rstrip())
    if rc != 0:
        args.failures.append(f"membench: fp8_gemm_peer.py exit {rc}")


def part_calibrate(args, m):
    """The GPU measured for --predict (shardc-calibrate-cuda, quick sizes on
    the emulated device): <gpu>-<date>-calibration.json in the log
    directory. Where shardc is at hand (--dry), the file is checked to
    predict the speed model's step; on the GPU machine, which has no
    shardc, that is for here: shardc MODEL --target cuda --report
    --predict FILE."""
    if "calibrate" not in m:
        print("calibrate: skipped (not built)")
        args.failures.append("calibrate: not built")
        return
    path = os.path.join(args.log_dir, f"{gpu_tag(m)}-{time.strftime('%Y-%m-%d')}-calibration.json")
    cmd = [os.path.join(args.out, "bin", m["calibrate"]), path]
    rc, text = sh(cmd, env=exe_env(args.out), check=False, timeout=1800)
    print(text.rstrip())
    if rc != 0 or not os.path.exists(path):
        args.failures.append(f"calibrate: exit {rc}")
        return
    with open(path) as f:
        cal = json.load(f)
    print(f"calibrate: wrote {path} ({cal['name']}, {len(cal['gemm'])} GEMMs, "
          f"{len(cal['sdpa'])} SDPA shapes)")
    args.calibration = path
    shardc = shutil.which(args.shardc) or args.shardc
    if not os.access(shardc, os.X_OK):
        print(f"calibrate: predict with it where shardc is built: shardc MODEL --target cuda "
              f"--report --predict {os.path.basename(path)}")
        return
    model = m.get("speed_shape", {}).get("model", "tiny")
    flags = ["--target", "cuda"] + (["--cuda-emulation"] if m["emulated"] else [])
    rc, text = sh([shardc, model_path(model), *flags, "--report", "--predict", path,
                   "--emit", "rt", "-o", os.devnull], check=False)
    lines = [l for l in text.splitlines()
             if l.startswith(("prediction on", "predicted step time:"))]
    print("\n".join(lines))
    if rc != 0 or not any(l.startswith("predicted step time:") for l in lines):
        print(text.rstrip()[-2000:])
        args.failures.append("calibrate: --predict with the file failed")


def train(args, exe, tokens, steps, extra=(), prefix=(), timeout=900, env=None):
    log = os.path.join(args.log_dir, f"{os.path.basename(exe)}-{int(time.time()*1e6)}.jsonl")
    cmd = [*prefix, os.path.join(args.out, "bin", exe), "--data", tokens,
           "--steps", str(steps), "--log", log, *extra]
    rc, text = sh(cmd, env={**exe_env(args.out), **(env or {})}, check=False,
                  timeout=timeout)
    entries = read_log(log) if os.path.exists(log) else []
    return rc, text, entries


def part_curves(args, m):
    print(f"{'model':<20} {'CPU loss':>20} {'GPU loss':>20} {'worst rel':>10} "
          f"{'rtol':>7} {'no graphs':>10} {'f32 CPU':>9}")
    failed = 0
    for name, c in m["curves"].items():
        tokens = os.path.join(args.out, c["tokens"])
        launch = mpirun(c["ranks"])
        if launch is None:
            print(f"{name:<20} skipped: no mpirun for {c['ranks']} ranks")
            continue
        rc, text, got = train(args, c["exe"], tokens, CURVE_STEPS, CURVE_TRAIN, prefix=launch)
        if rc != 0 or len(got) != CURVE_STEPS:
            print(f"{name:<20} FAILED (exit {rc}):\n{text[-3000:]}")
            args.failures.append(f"curves: {name} (exit {rc})")
            failed += 1
            continue
        gpu = [e["loss"] for e in got]
        worst = max(abs(a - b) / abs(a) for a, b in zip(c["cpu"], gpu))
        rc2, text2, direct = train(args, c["exe"], tokens, CURVE_STEPS,
                                   CURVE_TRAIN + ["--cuda-graphs=false"], prefix=launch)
        same = "same" if [e["loss"] for e in direct] == gpu else (
            f"exit {rc2}" if rc2 else "DIFFER")
        ok = worst <= c["rtol"] and same == "same"
        contrast = (f"{max(abs(a - b) / abs(a) for a, b in zip(c['cpu_f32'], gpu)):.2e}"
                    if "cpu_f32" in c else "")
        failed += not ok
        if not ok:
            args.failures.append(f"curves: {name}")
        print(f"{name:<20} {c['cpu'][0]:>9.6f}->{c['cpu'][-1]:<9.6f} "
              f"{gpu[0]:>9.6f}->{gpu[-1]:<9.6f} {worst:>10.2e} {c['rtol']:>7.0e} "
              f"{same:>10} {contrast:>9}{'' if ok else '  FAIL'}")
    print(f"curves: {len(m['curves']) - failed} of {len(m['curves'])} hold")


# cuBLASLt's bf16 GEMMs on Hopper write their output by bulk (TMA) copies,
# which initcheck does not see without this: it then reports each read of
# a GEMM's output as uninitialized.
# racecheck leaves out cuDNN's own kernels: on the H200 it reported shared
# memory hazards inside cuDNN 9.14's sm90 flash SDPA kernels
# (cudnn_generated_fort_native_sdpa_sm90_flash_{fprop,bprop}_wgmma_*,
# tools/bench/results/h200-2026-11-26-sdpa-run2.log), NVIDIA's code, none
# in shardc's (0 hazards with SHARDC_ATTENTION=kernels); shardc's kernels
# stay checked.
BULK_COPY = {"initcheck": ["--check-bulk-copy", "yes"],
             "memcheck": ["--check-bulk-copy", "yes"],
             "racecheck": ["--kernel-name-exclude", "kns=cudnn_generated"]}


def part_sanitizer(args, m):
    tool = shutil.which("compute-sanitizer") or next(iter(glob.glob(
        "/usr/local/cuda*/bin/compute-sanitizer")), None)
    if m["emulated"] or not tool:
        print("sanitizer: skipped (" + ("emulated device" if m["emulated"] else
                                        "no compute-sanitizer") + ")")
        return
    runs = [("tiny", ("memcheck", "racecheck", "synccheck", "initcheck")),
            ("gpt2-odd-chunk5", ("memcheck", "initcheck")),
            ("llama-odd", ("memcheck", "initcheck")),
            ("llama-odd-bf16", ("memcheck", "racecheck", "initcheck")),
            ("gpt2-odd-chunk5-bf16", ("memcheck", "initcheck"))]
    for name, checks in runs:
        c = m["curves"].get(name)
        if c is None:
            continue
        for check in checks:
            rc, text, got = train(args, c["exe"], os.path.join(args.out, c["tokens"]), 2,
                                  CURVE_TRAIN, prefix=[tool, "--tool", check, *BULK_COPY.get(check, []),
                                                       "--error-exitcode", "9"])
            summary = [l for l in text.splitlines()
                       if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l]
            with open(os.path.join(args.log_dir, f"sanitizer-{name}-{check}.log"), "w") as f:
                f.write(text)
            known = ""
            if rc != 0 and check == "initcheck" and name in INITCHECK_BLIND:
                known = initcheck_control(args, m, tool)
            if rc != 0 and not known:
                args.failures.append(f"sanitizer {check} {name} (exit {rc})")
            print(f"sanitizer {check} {name}: exit {rc}, {len(got)} steps; "
                  f"{summary[-1].strip() if summary else text[-400:]}{known}")


# initcheck does not see the stores of the cuBLASLt kernel that Hopper runs
# for llama-odd's bf16 projections (GEMMs without a bias): it reports every
# read of their outputs. CudaKernels.Bf16ProjectionThenTranspose is the
# control: its poisoned run proves the GEMM writes all of y[39,40], and
# under initcheck its transpose's reads of that y are all reported (1560 of
# 1560 on the H100, 2026-11-27). A bf16 program listed here has its
# initcheck reports put down to that only while the control still shows
# them, so the day initcheck sees those stores, its reports count again.
INITCHECK_BLIND = {"llama-odd-bf16"}
INITCHECK_CONTROL = ("CudaKernels.Bf16ProjectionThenTranspose", 39 * 40)


def initcheck_control(args, m, tool):
    """Runs the control under initcheck: a note that the reports are
    initcheck's blindness when every element of the GEMM's output is
    reported, else empty."""
    if "kernels" not in m:
        return ""
    test, elements = INITCHECK_CONTROL
    rc, text = sh([tool, "--tool", "initcheck", "--check-bulk-copy", "yes",
                   "--print-limit", "1", os.path.join(args.out, "bin", m["kernels"]),
                   f"--gtest_filter={test}"], env=exe_env(args.out), check=False)
    with open(os.path.join(args.log_dir, "sanitizer-initcheck-control.log"), "w") as f:
        f.write(text)
    errors = [int(w) for l in text.splitlines() if "ERROR SUMMARY:" in l
              for w in l.split("ERROR SUMMARY:")[1].split()[:1] if w.isdigit()]
    passed = "[  PASSED  ] 1 test" in text
    if not passed or not errors or errors[0] != elements:
        return ""
    return (f" (known: initcheck misses cuBLASLt's stores; its control {test} "
            f"passes poisoned and is reported on {errors[0]} of {elements} elements)")


def speed_tokens(args, m):
    """The speed model's token file (random GPT-2 ids, --steps + 2 batches),
    written by the first part of this run that asks for it."""
    if getattr(args, "speed_tokens", None) is None:
        args.speed_tokens = os.path.join(args.log_dir, "speed-tokens.bin")
        s = m["speed_shape"]
        write_tokens(args.speed_tokens, 50257, s["B"] * s["T"] * (args.steps + 2) + 1)
    return args.speed_tokens


class DeviceMemory:
    """The GPU's used memory over a run, sampled by nvidia-smi every 50 ms:
    the peak above what was used before it started (so the CUDA context
    counts, as it does not in PyTorch's max_memory_allocated)."""

    def __init__(self, emulated):
        self.on = not emulated and shutil.which("nvidia-smi") is not None

    def used(self):
        return int(sh(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                      check=False)[1].split()[0])

    def __enter__(self):
        if self.on:
            import threading
            self.base, self.peak, self.stop = self.used(), 0, threading.Event()

            def sample():
                while not self.stop.wait(0.05):
                    self.peak = max(self.peak, self.used())
            self.thread = threading.Thread(target=sample, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.on:
            self.stop.set()
            self.thread.join()

    def text(self):
        return f"device {self.peak - self.base} MiB" if self.on else ""


def shardc_speed(args, m, mode, steps, env=None, exe=None, tokens=None):
    """A speed build's run (mode's of the speed model, or `exe` on
    `tokens`): median tok/s and ms after 3 warm-up steps, peak memory."""
    with DeviceMemory(m["emulated"]) as mem:
        rc, text, got = train(args, exe or m["speed"][mode],
                              tokens or speed_tokens(args, m), steps, env=env)
    if rc != 0 or len(got) != steps:
        print(f"shardc {mode}: FAILED (exit {rc}):\n{text[-3000:]}")
        args.failures.append(f"shardc {mode} (exit {rc})")
        return None
    warm = got[min(3, steps - 1):]
    peak = [l for l in text.splitlines() if l.startswith("memory:")]
    planned = int(peak[-1].split()[3]) if peak else None
    return {"tok_s": statistics.median(e["tok_per_s"] for e in warm),
            "ms": statistics.median(e["ms"] for e in warm),
            "mfu": statistics.median(e["mfu"] or 0 for e in warm),
            "loss": f"{got[0]['loss']:.4f}->{got[-1]['loss']:.4f}",
            "peak": mem.text() + " plan " + (str(planned) if peak else "?") + " B",
            # The device's peak where nvidia-smi samples it, else the plan's.
            "peak_mib": (mem.peak - mem.base) if mem.on else
                        (round(planned / 2**20, 1) if planned is not None else None)}


def gpt2_124m_torch(device, dtype_mode, compile_, B, T, steps, tokens):
    """PyTorch's GPT-2 124M (nanoGPT's layout: SDPA attention, fused QKV),
    AdamW, the same token stream: median tok/s after 3 warm-up steps."""
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    C, H, L, V = 768, 12, 12, 50257
    if device == "cpu":
        C, H, L = 64, 4, 2

    def attention(q, k, v):
        if hasattr(F, "scaled_dot_product_attention"):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        # PyTorch before 2.0 (Debian's, in --dry): the same, unfused.
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        return att.masked_fill(~mask, float("-inf")).softmax(-1) @ v

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln_1, s.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            s.c_attn, s.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            s.c_fc, s.m_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(s, x):
            q, k, v = s.c_attn(s.ln_1(x)).split(C, dim=2)
            hd = lambda t: t.view(B, T, H, C // H).transpose(1, 2)
            a = attention(hd(q), hd(k), hd(v))
            x = x + s.c_proj(a.transpose(1, 2).reshape(B, T, C))
            return x + s.m_proj(F.gelu(s.c_fc(s.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(s):
            super().__init__()
            s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(1024, C)
            s.h = nn.ModuleList(Block() for _ in range(L))
            s.ln_f = nn.LayerNorm(C)

        def forward(s, x, y):
            h = s.wte(x) + s.wpe(torch.arange(T, device=x.device))
            for b in s.h:
                h = b(h)
            logits = s.ln_f(h) @ s.wte.weight.t()
            return F.cross_entropy(logits.float().view(-1, V), y.view(-1))

    torch.manual_seed(0)
    model = GPT().to(device)
    for name, p in model.named_parameters():  # nanoGPT's initialization
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif p.dim() == 2:
            nn.init.normal_(p, std=0.02)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4,
                            **({"fused": True} if device == "cuda" else {}))
    fwd = torch.compile(model) if compile_ else model
    data = np.fromfile(tokens, dtype=np.uint16, offset=1024).astype(np.int64)
    times = []
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for step in range(steps):
        chunk = torch.from_numpy(data[step * B * T:(step + 1) * B * T + 1]).to(device)
        x, y = chunk[:-1].view(B, T), chunk[1:].view(B, T)
        sync()
        t0 = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=dtype_mode == "bf16"):
            loss = fwd(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times[3:]) * 1e3
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else float("nan")
    return {"tok_s": B * T / ms * 1e3, "ms": ms, "peak_mib": peak, "loss": loss.item()}


def part_speed(args, m):
    s = m["speed_shape"]
    B, T = s["B"], s["T"]
    steps = args.steps
    rows = []
    # The bf16 program twice: attention through cuDNN's SDPA, then declined
    # to the f32-math kernels (SHARDC_ATTENTION=kernels): cuDNN's share.
    runs = [("speed", None, None), ("speed-tf32", None, None),
            ("speed-bf16", None, None),
            ("speed-bf16", {"SHARDC_ATTENTION": "kernels"},
             "shardc bf16, attention on its kernels")]
    machine = predict_machine(m)
    for mode, env, label in runs:
        r = shardc_speed(args, m, mode, steps, env=env)
        if r:
            rows.append((label or SPEED_MODES[mode][0], r["tok_s"], r["ms"],
                         r["peak"], r["loss"]))
            # --predict costs attention on cuDNN: the SDPA builds only.
            predicted = None if env else m.get("predicted_ms", {}).get(mode, {}).get(machine)
            args.results.append({"run": label or SPEED_MODES[mode][0], "model": s["model"],
                                 "tok_s": r["tok_s"], "ms": r["ms"],
                                 "peak_mib": r["peak_mib"], "predicted_ms": predicted})
    device = "cpu" if m["emulated"] else "cuda"
    for dtype_mode, compile_ in (("f32", False), ("bf16", False), ("bf16", True)):
        if m["emulated"] and compile_:
            continue
        try:
            r = gpt2_124m_torch(device, dtype_mode, compile_, B, T, steps,
                                speed_tokens(args, m))
            name = f"{'torch.compile' if compile_ else 'PyTorch eager'} {dtype_mode}"
            rows.append((f"PyTorch {'compile' if compile_ else 'eager'} {dtype_mode}",
                         r["tok_s"], r["ms"], f"max_memory_allocated {r['peak_mib']:.0f} MiB",
                         f"{r['loss']:.4f}"))
            args.results.append({"run": name, "model": s["model"], "tok_s": r["tok_s"],
                                 "ms": r["ms"], "peak_mib": None if math.isnan(r["peak_mib"])
                                 else round(r["peak_mib"], 1),
                                 "predicted_ms": None})
        except Exception as e:  # a peer that fails is a row, not the end
            rows.append((f"PyTorch {'compile' if compile_ else 'eager'} {dtype_mode}",
                         float("nan"), float("nan"), f"failed: {e}"[:120], ""))
            args.failures.append(f"speed: PyTorch {dtype_mode}: {e}")
    print(f"{s['model']}, micro-batch {B} x {T}, AdamW, one GPU, {steps} steps "
          f"(median after 3)")
    print(f"{'run':<22} {'tok/s':>10} {'ms/step':>9}  peak / loss")
    for name, tok, ms, peak, loss in rows:
        print(f"{name:<22} {tok:>10.0f} {ms:>9.2f}  {peak} {loss}")


def hf_llama_torch(config, device, compile_, B, T, steps, tokens):
    """Hugging Face's LlamaForCausalLM from `config` (random weights), bf16
    autocast over f32 parameters, fused AdamW, optionally torch.compile'd,
    on the same token stream: median tok/s after 3 warm-up steps."""
    import numpy as np
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    with open(config) as f:
        c = LlamaConfig(**json.load(f))
    c._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = LlamaForCausalLM(c).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4,
                            **({"fused": True} if device == "cuda" else {}))
    fwd = torch.compile(model) if compile_ else model
    header = np.fromfile(tokens, dtype=np.int32, count=2)
    wide = header[0] == 20240801
    data = np.fromfile(tokens, dtype=np.uint32 if wide else np.uint16,
                       offset=1024).astype(np.int64)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for step in range(steps):
        chunk = torch.from_numpy(data[step * B * T:(step + 1) * B * T + 1]).to(device)
        x, y = chunk[:-1].view(B, T), chunk[1:].view(B, T)
        sync()
        t0 = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16):
            logits = fwd(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, c.vocab_size),
                                                 y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times[min(3, steps - 1):]) * 1e3
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None
    return {"tok_s": B * T / ms * 1e3, "ms": ms, "peak_mib": peak, "loss": loss.item()}


def part_llama(args, m):
    """The second speed model (issue 64: a Llama-3.2-1B shape, bf16 on one
    GPU) under shardc (bf16, float8) and Hugging Face's LlamaForCausalLM
    under torch.compile, the same micro-batch and tokens."""
    e = m.get("llama")
    if not e:
        print("llama: skipped (not built)")
        return
    B, T, steps = e["B"], e["T"], args.steps
    config = os.path.join(ROOT, e["config"])
    tokens = os.path.join(args.log_dir, "llama-tokens.bin")
    write_tokens(tokens, vocab_of(e["config"]), B * T * (steps + 2) + 1)
    machine = predict_machine(m)
    rows = []
    for mode, exe in e["speed"].items():
        r = shardc_speed(args, m, mode, steps, exe=exe, tokens=tokens)
        if r:
            name = LLAMA_MODES[mode][0]
            rows.append((name, r["tok_s"], r["ms"], r["peak"], r["loss"]))
            args.results.append({"run": name, "model": e["name"], "tok_s": r["tok_s"],
                                 "ms": r["ms"], "peak_mib": r["peak_mib"],
                                 "predicted_ms": e["predicted_ms"][mode].get(machine)})
    device = "cpu" if m["emulated"] else "cuda"
    try:
        import transformers  # noqa: F401
        have_hf = True
    except ImportError:
        have_hf = False
    if have_hf:
        name = f"{'eager' if m['emulated'] else 'torch.compile'} bf16"
        try:
            r = hf_llama_torch(config, device, not m["emulated"], B, T, steps, tokens)
            rows.append((f"HF Llama {name}", r["tok_s"], r["ms"],
                         f"max_memory_allocated {r['peak_mib'] or float('nan'):.0f} MiB",
                         f"{r['loss']:.4f}"))
            args.results.append({"run": name if m["emulated"] else "torch.compile bf16",
                                 "model": e["name"], "tok_s": r["tok_s"], "ms": r["ms"],
                                 "peak_mib": r["peak_mib"] and round(r["peak_mib"], 1),
                                 "predicted_ms": None})
        except Exception as ex:  # a peer that fails is a row, not the end
            rows.append((f"HF Llama {name}", float("nan"), float("nan"),
                         f"failed: {ex}"[:120], ""))
            args.failures.append(f"llama: Hugging Face peer: {ex}")
    else:
        rows.append(("HF Llama", float("nan"), float("nan"),
                     "skipped: no transformers in this python", ""))
    print(f"{e['name']} ({e['config']}), micro-batch {B} x {T}, AdamW, one GPU, "
          f"{steps} steps (median after 3)")
    print(f"{'run':<22} {'tok/s':>10} {'ms/step':>9}  peak / loss")
    for name, tok, ms, peak, loss in rows:
        print(f"{name:<22} {tok:>10.0f} {ms:>9.2f}  {peak} {loss}")


def part_offload(args, m):
    for mode in ("speed", "speed-offload"):
        r = shardc_speed(args, m, mode, min(args.steps, 12))
        if r:
            print(f"shardc {mode:<14} {r['tok_s']:>10.0f} tok/s {r['ms']:>9.2f} ms  {r['peak']}")


def part_trace(args, m):
    """Where the speed model's step goes, kernel by kernel (--trace)."""
    tokens = speed_tokens(args, m)
    for mode in ("speed-bf16", "speed"):
        trace = os.path.join(args.log_dir, f"trace-{mode}.json")
        rc, text, got = train(args, m["speed"][mode], tokens, 4, ["--trace", trace])
        if rc != 0:
            print(f"trace {mode}: FAILED (exit {rc}):\n{text[-3000:]}")
            continue
        print(f"-- {mode}")
        print(sh([sys.executable, os.path.join(HERE, "trace_kernels.py"), trace],
                 check=False)[1])


def part_rates(args, m):
    """The rates --predict's H100 entry stands on, measured through PyTorch
    on this GPU: f32 (no TF32) and bf16 GEMMs at GPT-2 124M's shapes, and
    SDPA (cuDNN's, flash, and f32) forward and backward at its and
    Llama-3-8B's attention shapes."""
    if m["emulated"]:
        print("rates: skipped (emulated device)")
        return
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False

    def median_ms(fn, reps=20):
        for _ in range(3):
            fn()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return statistics.median(times)

    print(f"{'op':<44} {'ms':>8} {'TFLOP/s':>8}")
    for M, K, N in ((4096, 768, 2304), (4096, 768, 3072), (4096, 3072, 768),
                    (4096, 768, 50257)):
        for dt in (torch.float32, torch.bfloat16):
            x = torch.randn(M, K, device="cuda", dtype=dt)
            w = torch.randn(K, N, device="cuda", dtype=dt)
            ms = median_ms(lambda: x @ w)
            print(f"{f'GEMM {M}x{K}x{N} {str(dt)[6:]}':<44} {ms:>8.3f} "
                  f"{2 * M * K * N / ms / 1e9:>8.1f}")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    # GPT-2 124M's attention at 4 x 1024, and Llama-3-8B's at seq 8192
    # (32 heads of 128; its 8 K/V heads repeated, which costs the same).
    for B, H, T, D in ((4, 12, 1024, 64), (1, 32, 8192, 128)):
        flop = 4 * B * H * T * T * D / 2  # causal: half of QK^T and PV
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("flash", SDPBackend.FLASH_ATTENTION),
                              ("efficient f32", SDPBackend.EFFICIENT_ATTENTION)):
            dt = torch.float32 if "f32" in name else torch.bfloat16
            q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=dt, requires_grad=True)
                       for _ in range(3))
            try:
                with sdpa_kernel(backend):
                    fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v,
                                                                           is_causal=True))
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    g = torch.randn_like(o)
                    bwd = median_ms(lambda: torch.autograd.grad(o, (q, k, v), g,
                                                                retain_graph=True))
                shape = f"SDPA {name} B{B} H{H} T{T} D{D}"
                print(f"{shape + ' fwd':<44} {fwd:>8.3f} {flop / fwd / 1e9:>8.1f}")
                print(f"{shape + ' bwd':<44} {bwd:>8.3f} {2.5 * flop / bwd / 1e9:>8.1f}")
            except Exception as e:
                print(f"SDPA {name}: {str(e)[:100]}")


PARTS = {"env": part_env, "rates": part_rates, "kernels": part_kernels,
         "membench": part_membench, "calibrate": part_calibrate, "curves": part_curves,
         "sanitizer": part_sanitizer, "speed": part_speed, "llama": part_llama,
         "offload": part_offload,
         "trace": part_trace}


def gpu_name(m):
    """The GPU's name (nvidia-smi's), or 'emulated' for --dry."""
    if m["emulated"]:
        return "emulated"
    rc, text = sh(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], check=False)
    return text.strip().splitlines()[0] if rc == 0 and text.strip() else "unknown"


def predict_machine(m):
    """The bundled --predict machine of this GPU (h100-sxm for --dry, whose
    predictions the build made for it too), or None."""
    if m["emulated"]:
        return "h100-sxm"
    name = gpu_name(m)
    return next((v for k, v in PREDICT_MACHINES.items() if k in name), None)


def gpu_tag(m):
    """The GPU's short name for file names: the last word of its name (h100,
    h200, ...), or 'emulated' / 'unknown'."""
    gpu = gpu_name(m)
    return gpu.split()[-1].lower() if gpu not in ("emulated", "unknown") else gpu


def write_results(args, m):
    """The run's results file: {commit, gpu, date, runs}, each run {run,
    model, tok_s, ms, peak_mib, predicted_ms} (predicted_ms: this build's
    --predict for this GPU; null for PyTorch). Written to --results, by
    default <gpu>-<date>.json in the log directory; commit it under
    tools/bench/results/ with the run's log."""
    gpu = gpu_name(m)
    date = time.strftime("%Y-%m-%d")
    tag = gpu_tag(m)
    path = args.results_file or os.path.join(args.log_dir, f"{tag}-{date}.json")
    with open(path, "w") as f:
        json.dump({"commit": m.get("commit", "unknown"), "gpu": gpu, "date": date,
                   "runs": args.results}, f, indent=1)
    print(f"results: {len(args.results)} runs in {path}")
    for r in args.results:
        pred = r["predicted_ms"]
        off = f", predicted {pred:.2f} ms ({pred / r['ms'] - 1:+.1%})" if pred else ""
        print(f"  {r['run']:<24} {r['model']}: {r['tok_s']:.0f} tok/s, {r['ms']:.2f} ms{off}")


def run(args):
    args.out = os.path.abspath(args.out)
    with open(os.path.join(args.out, "manifest.json")) as f:
        m = json.load(f)
    args.log_dir = os.path.abspath(args.log_dir or os.path.join(args.out, "logs"))
    os.makedirs(args.log_dir, exist_ok=True)
    args.failures, args.results = [], []
    for part in args.parts.split(","):
        if part not in PARTS:
            sys.exit(f"error: --parts: '{part}' is not one of {', '.join(PARTS)}")
        print(f"== {part}", flush=True)
        t0 = time.time()
        PARTS[part](args, m)
        print(f"({part}: {time.time() - t0:.0f} s)", flush=True)
    if args.results:
        write_results(args, m)
    if args.failures:
        sys.exit("FAIL: " + "; ".join(args.failures))
    print("kit: every part ran")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["build", "run"], nargs="?")
    ap.add_argument("--dry", action="store_true",
                    help="build and run here on the emulated CUDA device, tiny model")
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--out", default=os.path.join(ROOT, ".gpu"))
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--log-dir", default=None)
    ap.add_argument("--results", dest="results_file", default=None,
                    help="the results file (default: <gpu>-<date>.json in the log directory)")
    ap.add_argument("--speed-model", default="gpt2-124m")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--llama-model", default=os.path.join(HERE, "llama-1b.json"),
                    help="the second speed model's config.json (a Llama)")
    ap.add_argument("--llama-name", default="llama-1b")
    ap.add_argument("--llama-batch", type=int, default=4,
                    help="its micro-batch: the largest that fits both shardc and PyTorch")
    ap.add_argument("--llama-seq", type=int, default=2048)
    args = ap.parse_args()
    if args.dry:
        import tempfile
        args.speed_model, args.batch, args.seq, args.steps = "tiny", 2, 64, 5
        args.llama_model = os.path.join(ROOT, "test", "e2e", "Inputs", "llama-tiny.json")
        args.llama_name, args.llama_batch, args.llama_seq = "llama-tiny", 2, 16
        with tempfile.TemporaryDirectory() as tmp:
            args.tmp, args.out = tmp, os.path.join(tmp, "kit")
            build(args)
            run(args)
        return
    if args.command is None:
        ap.error("build or run (or --dry)")
    if args.command == "build":
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            args.tmp = tmp
            build(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
