#!/usr/bin/env bash
# Snapshot the training curves and final weights of the bundled checks, to
# compare two builds bit for bit:
#   tools/curves_snapshot.sh build/bin/shardc /tmp/before
#   (change, rebuild)
#   tools/curves_snapshot.sh build/bin/shardc /tmp/after
#   diff -r /tmp/before/out /tmp/after/out && echo identical
# Models: the tiny preset, the GPT-2 and Llama test configs, and the ONNX
# TransformerEncoder and hand-written GPT of test/e2e/check_onnx_train.py;
# each on 1 rank and on a 2x2 mesh (mpirun), 6 steps. out/ holds each run's
# log without the timing fields and its saved weights (safetensors).
set -euo pipefail
shardc=$(realpath "$1"); dir=$2
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir/models" "$dir/out" "$dir/exe"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 4)
if [ ! -f "$dir/models/encoder.onnx" ]; then
  (cd "$root/test/e2e" && /usr/bin/python3 - "$dir/models" <<'PY'
import sys, torch
import check_onnx_train as c
for name in ["encoder", "gpt"]:
    torch.manual_seed(0)
    m = c.MODELS[name](); m.eval()
    torch.onnx.export(m, (torch.zeros(2, c.T, dtype=torch.long),), f"{sys.argv[1]}/{name}.onnx",
                      opset_version=17, input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}},
                      do_constant_folding=False)
PY
  )
fi
models=(tiny "$root/test/e2e/Inputs/gpt2-tiny.json" "$root/test/e2e/Inputs/llama-tiny.json"
        "$dir/models/encoder.onnx" "$dir/models/gpt.onnx")
for model in "${models[@]}"; do
  name=$(basename "$model"); name=${name%.*}
  for mesh in 1 2x2; do
    exe="$dir/exe/$name-$mesh"
    "$shardc" "$model" --mesh "$mesh" --micro-batch 2 -o "$exe" >/dev/null
    run=("$exe" --steps 6 --lr 3e-3 --log "$dir/out/$name-$mesh.jsonl"
         --save-weights "$dir/out/$name-$mesh.safetensors")
    if [ "$mesh" = 1 ]; then "${run[@]}" >/dev/null; else "${MPIRUN[@]}" "${run[@]}" >/dev/null; fi
    sed -i -E 's/, "ms": [0-9.]+, "tok_per_s": [0-9.]+//' "$dir/out/$name-$mesh.jsonl"
  done
done
echo "snapshot in $dir/out: $(ls "$dir/out" | wc -l) files"
