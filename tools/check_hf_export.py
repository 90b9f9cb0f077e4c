#!/usr/bin/env python3
"""Loads --export-hf directories with transformers (not in CI: needs PyPI's
transformers; Debian's torch 1.13 works with transformers 4.40):

    python3 -m venv --system-site-packages /tmp/hf && /tmp/hf/bin/pip install transformers==4.40.2
    /tmp/hf/bin/python tools/check_hf_export.py DIR [DIR ...]

Prints, for each, the model class from_pretrained built, its missing,
unexpected and mismatched keys, and the largest difference between its
state_dict and the exported tensors.
"""
import sys, torch, transformers, json
from safetensors.torch import load_file
import os, glob
for d in sys.argv[1:]:
    m, info = transformers.AutoModelForCausalLM.from_pretrained(d, output_loading_info=True)
    sd = m.state_dict()
    files = glob.glob(os.path.join(d, "*.safetensors"))
    want = {}
    for f in files:
        want.update(load_file(f))
    worst = max((sd[k] - v).abs().max().item() for k, v in want.items())
    print(f"{d}: {type(m).__name__}, missing {info['missing_keys']}, unexpected {info['unexpected_keys']}, "
          f"mismatched {info['mismatched_keys']}; {len(want)} tensors, max |state_dict - file| = {worst}")
