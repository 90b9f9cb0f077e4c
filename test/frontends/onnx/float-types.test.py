"""Checks float-types.test's outputs against numpy (f16) and torch (bf16)."""
import sys

import numpy as np
import torch

d = sys.argv[1]
x = np.fromfile(f"{d}/x.bin", np.float64).reshape(2, 3)
h = x.astype(np.float16)
with np.errstate(over="ignore"):
    want_sq = h * h  # numpy computes f16 products rounded to f16
got_sq = np.fromfile(f"{d}/sq.bin", np.float16).reshape(2, 3)
want_b = torch.from_numpy(h.astype(np.float32)).bfloat16().view(torch.int16).numpy().view(np.uint16)
got_b = np.fromfile(f"{d}/b.bin", np.uint16).reshape(2, 3)
ok = np.array_equal(got_sq.view(np.uint16), want_sq.view(np.uint16)) and np.array_equal(got_b, want_b)
print("sq", got_sq.tolist(), "want", want_sq.tolist())
print("b bits", got_b.tolist(), "want", want_b.tolist())
sys.exit(0 if ok else 1)
