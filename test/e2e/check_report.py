"""--report: per-rank state falls as 1/S, and the planned peak matches the
peak the runtime measures (resident set growth, within --tolerance); with
--independent, every figure equals a count made from the config alone."""
import argparse
import math
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import MPIRUN  # noqa: E402


def report(shardc, config, mesh, flags):
    out = subprocess.run([shardc, config, "--mesh", mesh, "--report", "--emit", "rt",
                          "-o", os.devnull, *flags], capture_output=True, text=True,
                         check=True).stdout
    rows = device_and_host(out)
    return {key: rows[key][0]
            for key in ["params", "grads", "optimizer", "gathered", "peak"]}, out


def align(n):
    return (n + 63) // 64 * 64


def gpt2_shapes(cfg):
    """The parameter shapes of a Hugging Face GPT-2 config (Conv1D weights
    [in, out]; lm_head tied to wte), by group: "root" and one per block."""
    C, V, P = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
    inner = cfg.get("n_inner") or 4 * C
    block = [[C], [C], [C, 3 * C], [3 * C], [C, C], [C], [C], [C], [C, inner], [inner],
             [inner, C], [C]]
    groups = {"root": {"wte": [V, C], "wpe": [P, C], "ln_f.weight": [C], "ln_f.bias": [C]}}
    for i in range(cfg["n_layer"]):
        groups[i] = {f"h.{i}.{k}": s for k, s in enumerate(block)}
    return groups


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def sharded_bytes(shape, S):
    """Bytes of one rank's shard: dim 0 padded to a multiple of S (FSDP2)."""
    return align(-(-shape[0] // S) * numel(shape[1:]) * 4)


def gathered_bytes(shape, S):
    return align(-(-shape[0] // S) * S * numel(shape[1:]) * 4)


def micro_batch(flags):
    """The --micro-batch of `flags`; None if absent (a config.json's default
    is 4 sequences)."""
    for i, f in enumerate(flags):
        if f == "--micro-batch":
            return int(flags[i + 1])
        if f.startswith("--micro-batch="):
            return int(f.split("=", 1)[1])
    return None


def check_independent(args, flags):
    """Every figure of the report against a count from the config alone:
    parameter, gradient and optimizer bytes per rank, and the gathered peak
    under reshard-after-forward and prefetch 1: two blocks (the one
    computing and the one prefetched) and wte (also the tied head), plus in
    the forward ln_f (the root group's; wpe is dead after the embedding).
    With one sequence a micro-step the embedding's position add is no
    broadcast, so block 0's ln_1 fuses with it (rt-fuse-residual-norm) and
    is dead before block 1's prefetch: then the forward holds ln_f in ln_1's
    place, and the backward (ln_f's gradient its first kernel) neither."""
    import json
    with open(args.config) as f:
        cfg = json.load(f)
    groups = gpt2_shapes(cfg)
    for mesh in args.independent.split(","):
        S = int(mesh.split("x")[-1])
        got, _ = report(args.shardc, args.config, mesh, flags)
        params = sum(sharded_bytes(s, S) for g in groups.values() for s in g.values())
        block = sum(gathered_bytes(s, S) for s in groups[0].values())
        root = groups["root"]
        ln_f = gathered_bytes(root["ln_f.weight"], S) + gathered_bytes(root["ln_f.bias"], S)
        one_sequence = micro_batch(flags) == 1
        gathered = gathered_bytes(root["wte"], S) + 2 * block + (0 if one_sequence else ln_f)
        want = {"params": params, "grads": params, "optimizer": 2 * params,
                "gathered": gathered}
        for key, value in want.items():
            print(f"mesh {mesh}: {key} {got[key]} bytes, independent count {value}")
            if got[key] != value:
                sys.exit(f"FAIL: {key} on mesh {mesh}: report {got[key]}, count {value}")


ROWS = {"params": r"parameters \(sharded\)", "grads": r"gradients \(sharded\)",
        "optimizer": "optimizer state", "gathered": "peak gathered parameters",
        "activations": "activations", "io": "inputs and outputs",
        "host_arena": "host optimizer arena", "peak": "planned peak"}


def device_and_host(text):
    """Per row of a report: (device bytes, host bytes); without --offload
    every byte is the device's."""
    rows = {}
    for key, name in ROWS.items():
        m = re.search(rf"^  {name}\s+[0-9.]+ MiB\s+(\d+) bytes"
                      rf"(?:\s+\| host\s+[0-9.]+ MiB\s+(\d+) bytes)?", text, re.M)
        if m:
            rows[key] = (int(m.group(1)), int(m.group(2) or 0))
    return rows


def check_offload(args, flags):
    """--offload=cpu against the same build without: the parameters,
    gradients, optimizer state and io go from the device to the host, byte
    for byte; the device's planned peak drops by what moved, less the arena
    the shards' copies take."""
    base = ["--target", "cuda", "--cuda-emulation"]
    for mesh in args.offload.split(","):
        _, plain = report(args.shardc, args.config, mesh, flags + base)
        _, off = report(args.shardc, args.config, mesh, flags + base + ["--offload=cpu"])
        a, b = device_and_host(plain), device_and_host(off)
        moved = 0
        for key in ["params", "grads", "optimizer", "io"]:
            print(f"mesh {mesh}: {key}: device {a[key][0]} bytes -> device {b[key][0]}, "
                  f"host {b[key][1]}")
            if b[key] != (0, a[key][0]) or a[key][1] != 0:
                sys.exit(f"FAIL: {key} on mesh {mesh}: {a[key]} without offload, {b[key]} with")
            moved += a[key][0]
        arena = lambda r: r["gathered"][0] + r["activations"][0]
        staging = arena(b) - arena(a)
        drop = a["peak"][0] - b["peak"][0]
        print(f"mesh {mesh}: device planned peak {a['peak'][0] / 2**20:.1f} MiB -> "
              f"{b['peak'][0] / 2**20:.1f} MiB (-{drop / 2**20:.1f} MiB: "
              f"{moved / 2**20:.1f} MiB moved to the host, the copies' buffers "
              f"{staging / 2**20:+.1f} MiB); pinned host {b['peak'][1] / 2**20:.1f} MiB")
        if drop != moved - staging:
            sys.exit(f"FAIL: the device peak dropped by {drop}, not {moved} - {staging}")
        host = moved + b["host_arena"][1]
        if b["peak"][1] != host:
            sys.exit(f"FAIL: the host peak is {b['peak'][1]}, not {host}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="")
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--flags", default="--micro-batch 8 --seq-len 64")
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--measure", default="1,2", help="meshes whose peak is measured")
    ap.add_argument("--independent", default="",
                    help="meshes whose figures are checked against counts from the config")
    ap.add_argument("--model", default="", help="a preset to compile instead of --config")
    ap.add_argument("--offload", default="",
                    help="meshes whose --offload=cpu report (cuda target) is "
                         "checked against the one without")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    flags = args.flags.split()

    if args.offload:
        if args.model:
            args.config = args.model
        check_offload(args, flags)
        print("PASS")
        return
    if args.independent:
        check_independent(args, flags)
        print("PASS")
        return
    if args.model:
        args.config = args.model
    one, text = report(args.shardc, args.config, "1", flags)
    print(text)
    for mesh in ["2", "4"]:
        s = int(mesh)
        got, _ = report(args.shardc, args.config, mesh, flags)
        for key in ["params", "grads", "optimizer"]:
            ratio = got[key] / one[key]
            print(f"mesh {mesh}: {key} {got[key] / 2**20:.3f} MiB, {ratio:.3f} of one rank")
            # 1/S, plus at most one padding row per parameter and alignment.
            if not (1.0 / s - 1e-3 <= ratio <= 1.0 / s * 1.05):
                sys.exit(f"FAIL: {key} on mesh {mesh} is {ratio:.3f} of one rank, not 1/{s}")

    for mesh in args.measure.split(","):
        n = math.prod(int(x) for x in mesh.split("x"))
        exe = os.path.join(args.workdir, f"train-{mesh}")
        planned, _ = report(args.shardc, args.config, mesh, flags)
        subprocess.run([args.shardc, args.config, "--mesh", mesh, *flags, "-o", exe],
                       check=True, capture_output=True)
        out = subprocess.run(MPIRUN + ["-np", str(n), exe, "--steps", "3"],
                             capture_output=True, text=True, check=True).stdout
        m = re.search(r"memory: planned peak (\d+) bytes, measured peak (\d+) bytes", out)
        plan, measured = int(m.group(1)), int(m.group(2))
        if plan != planned["peak"]:
            sys.exit(f"FAIL: the executable plans {plan} bytes, the report {planned['peak']}")
        rel = (measured - plan) / plan
        print(f"mesh {mesh}: planned peak {plan / 2**20:.1f} MiB, measured {measured / 2**20:.1f} MiB ({rel:+.1%})")
        if abs(rel) > args.tolerance:
            sys.exit(f"FAIL: measured peak differs from the plan by {rel:+.1%}")
    print("PASS")


if __name__ == "__main__":
    main()
