"""End-to-end: --report's launches a step equal the launching ops of the
emitted rt program, counted here independently (rt.kernel and the
collectives, per entry function)."""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("model")
    args, flags = ap.parse_known_args()
    os.makedirs(args.workdir, exist_ok=True)
    rt = os.path.join(args.workdir, "program.rt")
    out = run([args.shardc, args.model, *flags, "--report", "--emit", "rt", "-o", rt])
    line = next((l for l in out.splitlines() if l.startswith("launches")), None)
    if line is None:
        sys.exit("FAIL: --report printed no launches line:\n" + out)
    reported = dict(re.findall(r" (\w+) (\d+)", line.split(":", 1)[1]))
    text = open(rt).read()
    counted = {}
    for fn in re.finditer(r"func\.func @shardc_(\w+)\(.*?\n  \}", text, re.S):
        counted[fn.group(1)] = len(re.findall(
            r"^\s+rt\.(kernel|all_gather|reduce_scatter|all_reduce)\b",
            fn.group(0), re.M))
    bad = False
    for entry in sorted(set(reported) | set(counted)):
        r, c = int(reported.get(entry, -1)), counted.get(entry, -1)
        print(f"{entry}: report {r}, counted {c}")
        bad |= r != c
    print(next(l for l in out.splitlines() if l.strip().startswith("micro-step:")).strip())
    if bad:
        sys.exit("FAIL: the report's launches differ from the program's")
    print("PASS")


if __name__ == "__main__":
    main()
