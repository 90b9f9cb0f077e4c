#!/bin/sh
# Writes test/e2e/Inputs/safetensors/base.safetensors, the real weights file
# the safetensors campaign mutates (check_safetensors.py): the GPT-2 test
# config trained one step by ./train and saved with --save-weights.
#   sh test/e2e/make_safetensors_base.sh build/bin/shardc
set -e
shardc=${1:-shardc}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
"$shardc" "$here/Inputs/gpt2-tiny.json" --micro-batch 1 --seq-len 16 -o "$work/train"
python3 -c "
import sys; sys.path.insert(0, '$here'); import numpy as np, torch_models as tm
tm.write_tokens('$work/tokens.bin', np.random.default_rng(0).integers(0, 97, size=4096))"
"$work/train" --data "$work/tokens.bin" --steps 1 \
  --save-weights "$here/Inputs/safetensors/base.safetensors"
rm -rf "$work"
