#!/usr/bin/env python3
"""Whether the --log files given have the same loss at every step, bit for
bit: the trainer writes losses with 9 significant digits, which give back a
float's exact value."""
import json
import sys


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def main():
    runs = [losses(p) for p in sys.argv[1:]]
    if len(runs) < 2 or not runs[0]:
        sys.exit("FAIL: give two or more non-empty --log files")
    for path, run in zip(sys.argv[2:], runs[1:]):
        if run != runs[0]:
            diff = next(i for i, (a, b) in enumerate(zip(runs[0], run)) if a != b) \
                if len(run) == len(runs[0]) else "length"
            sys.exit(f"FAIL: {path} differs from {sys.argv[1]} at step {diff}")
    print(f"{len(runs[0])} steps, losses bit-identical in {len(runs)} runs")


if __name__ == "__main__":
    main()
