#!/bin/bash
# usage: tools/trainer_phases.sh TRAIN1 TRAIN2 OUT
#
# Runs a trainer through every phase of a run, on 1 rank (TRAIN1, e.g.
# `shardc tiny -o TRAIN1`) and on a mesh of 2 (TRAIN2, `--mesh 2`), and
# keeps under OUT what the runs write: their console output (timings and
# the racing lines of mpirun's aborts masked), the JSON logs (timings
# masked), the checkpoints, saved weights, gradients and HF exports. Runs
# of two builds compare with `diff -r OUT1 OUT2`: a change that moves code
# and changes no behaviour leaves no difference.
#
# The phases: a run stopped by --run-steps with evaluation, checkpoints and
# a log; its resume with --grad-accum 2 to the end with every export; a
# resume refused (another data order), a missing checkpoint, missing data,
# --init-from the saved weights, an unknown flag.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T1=$(realpath "$1"); T2=$(realpath "$2"); O=$3
rm -rf "$O"; mkdir -p "$O"
"${PYTHON:-/usr/bin/python3}" "$ROOT/test/e2e/write_tokens.py" "$O/train.bin" --count 20000
"${PYTHON:-/usr/bin/python3}" "$ROOT/test/e2e/write_tokens.py" "$O/val.bin" --count 5000
strip_ms() { grep -v '^\[vm:' | sed -E 's/in [0-9.]+ s \([0-9.]+ MB\/s/in X s (X MB\/s/; s/measured peak [0-9]+/measured peak X/; s/exposed.*of the step time/exposed X/; s/"(ms|tok_per_s|tflops|mfu)": ?[^,}]*/"\1":X/g; s/[0-9.]+ ms/X ms/g; s/[0-9.]+ tok\/s/X tok\/s/g; s/[0-9.]+ TFLOP\/s/X TFLOP\/s/g; s/tflops [0-9.]+/tflops X/g; s/mfu [0-9.%a-z]+/mfu X/g; s/ +/ /g'; }
run() { # name cmd...
  local n=$1; shift
  ( cd "$O" && "$@" ) > "$O/$n.out" 2>&1; echo "rc $?" >> "$O/$n.out"
  strip_ms < "$O/$n.out" > "$O/$n.stdout"; rm "$O/$n.out"
  # mpirun: a rank's error line races the other's abort; keep the run's own lines
  case $n in *2) grep -vE 'error: rank [0-9]+:|^-+$|MPI_ABORT|with errorcode|^NOTE:|You may or may not|exactly when|^$|^\[vm' "$O/$n.stdout" > "$O/$n.s"; mv "$O/$n.s" "$O/$n.stdout";; esac
}
for m in 1 2; do
  if [ $m = 1 ]; then L=""; T=$T1; else L="mpirun --allow-run-as-root --oversubscribe -np 2"; T=$T2; fi
  run a$m $L $T --data train.bin --val-data val.bin --eval-every 2 --eval-steps 2 --steps 6 --run-steps 3 \
      --log log$m.json --checkpoint-dir ck$m --checkpoint-every 2 --keep 2 --lr-schedule cosine --warmup-steps 2 --clip-grad-norm 1 --shuffle
  run b$m $L $T --data train.bin --val-data val.bin --eval-every 2 --eval-steps 2 --steps 6 \
      --log log$m.json --checkpoint-dir ck$m --checkpoint-every 2 --keep 2 --lr-schedule cosine --warmup-steps 2 --clip-grad-norm 1 --shuffle --resume \
      --save-weights w$m.safetensors --export-hf hf$m --dump-grads g$m.safetensors --grad-accum 2
  run c$m $L $T --steps 2 --resume=auto --checkpoint-dir ck$m
  run d$m $L $T --steps 2 --resume=nonexistent
  run e$m $L $T --steps 2 --data missing.bin
  run f$m $L $T --steps 2 --init-from w$m.safetensors --log logf$m.json
  run g$m $L $T --bogus-flag
  strip_ms < "$O/log$m.json" > "$O/log$m.json.s"; mv "$O/log$m.json.s" "$O/log$m.json"
  strip_ms < "$O/logf$m.json" > "$O/logf$m.json.s"; mv "$O/logf$m.json.s" "$O/logf$m.json"
done
rm -f "$O/train.bin" "$O/val.bin"
