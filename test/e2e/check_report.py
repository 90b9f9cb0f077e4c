"""--report: per-rank state falls as 1/S, and the planned peak matches the
peak the runtime measures (resident set growth, within --tolerance)."""
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
    def field(name):
        m = re.search(rf"{name}\s+([0-9.]+) MiB", out)
        return float(m.group(1)) * 1024 * 1024
    peak = int(re.search(r"planned peak .*\((\d+) bytes\)", out).group(1))
    return {"params": field(r"parameters \(sharded\)"), "grads": field(r"gradients \(sharded\)"),
            "optimizer": field("optimizer state"), "peak": peak}, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--flags", default="--micro-batch 8 --seq-len 64")
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--measure", default="1,2", help="meshes whose peak is measured")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    flags = args.flags.split()

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
