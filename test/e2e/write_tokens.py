"""Writes an llm.c token file, optionally with a wrong header (for tests).

usage: write_tokens.py OUT [--magic M] [--version V] [--declared N] TOKEN...
"""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--magic", type=int, default=20240520)
ap.add_argument("--version", type=int, default=1)
ap.add_argument("--declared", type=int)
ap.add_argument("--count", type=int, help="write COUNT tokens 0, 1, 2, ... mod 50")
ap.add_argument("tokens", type=int, nargs="*")
args = ap.parse_intermixed_args()
tokens = args.tokens if args.count is None else [k % 50 for k in range(args.count)]
header = np.zeros(256, dtype=np.int32)
header[0], header[1] = args.magic, args.version
header[2] = len(tokens) if args.declared is None else args.declared
with open(args.out, "wb") as f:
    f.write(header.tobytes())
    f.write(np.asarray(tokens, dtype=np.uint16).tobytes())
