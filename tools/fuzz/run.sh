#!/usr/bin/env bash
# Coverage-guided fuzzing of shardc's parsers of outside input (libFuzzer,
# under AddressSanitizer and UndefinedBehaviorSanitizer): test/fuzz/.
#
#   tools/fuzz/run.sh [--seconds N] [TARGET...]   fuzz each target N s (60)
#   tools/fuzz/run.sh --replay TARGET FILES...    run the inputs once
#   tools/fuzz/run.sh --replay --raw[=MODE] TARGET FILES...
#                     run plain files (a model, a safetensors file...) once,
#                     each as part 0 of an input with that mode byte (0)
#
# Targets: safetensors, tokens, calibration, checkpoint, config, onnx
# (default: all). The targets are built into
# build-fuzz/ with clang++-22 when needed. Each run starts from the committed
# seeds (test/fuzz/corpus/TARGET) and regressions (test/fuzz/regressions/
# TARGET) and adds what it finds to build-fuzz/corpus/TARGET; a crash is
# written to build-fuzz/crashes/ and ends the script non-zero, naming it.
# Memory is capped at -rss_limit_mb=2048. One line a target:
#   TARGET: N executions, C crashes, coverage: E edges, F features, corpus K
# (and S slow inputs, when an input took over 10 s: noted, not failed on)
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGETS=(safetensors tokens calibration checkpoint config onnx)
seconds=60
replay=""
raw=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --seconds=*) seconds=${1#--seconds=}; shift ;;
    --replay) replay=1; shift ;;
    --raw) raw=0; shift ;;
    --raw=*) raw=${1#--raw=}; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ -z "$raw" || ( -n "$replay" && "$raw" =~ ^[0-9]+$ && "$raw" -lt 256 ) ]] ||
  { echo "error: --raw needs --replay, and its mode is a byte (0 to 255)" >&2; exit 2; }
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] ||
  { echo "error: --seconds: '$seconds' is not a positive whole number" >&2; exit 2; }
known() { [[ " ${TARGETS[*]} " == *" $1 "* ]]; }

CXX=${FUZZ_CXX:-clang++-22}
command -v "$CXX" >/dev/null ||
  { echo "error: $CXX not found (Debian: apt-get install clang-22 libclang-rt-22-dev)" >&2; exit 1; }
if [ ! -f build-fuzz/build.ninja ]; then
  cmake -G Ninja -S test/fuzz -B build-fuzz -DCMAKE_CXX_COMPILER="$CXX" >/dev/null
fi
ninja -C build-fuzz >/dev/null
# Inputs become files: on tmpfs when there is one.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  export TMPDIR=/dev/shm
fi

if [ -n "$replay" ]; then
  [ ${#args[@]} -ge 2 ] || { echo "usage: $0 --replay TARGET FILES..." >&2; exit 2; }
  target=${args[0]}
  known "$target" || { echo "error: no fuzz target '$target' (${TARGETS[*]})" >&2; exit 2; }
  files=("${args[@]:1}")
  if [ -n "$raw" ]; then
    # Each file as an input: the mode byte, then the file as part 0.
    wrapped=$(mktemp -d)
    trap 'rm -rf "$wrapped"' EXIT
    k=0
    for f in "${files[@]}"; do
      [ -f "$f" ] || { echo "error: $f: no such file" >&2; exit 2; }
      { printf "\\$(printf '%03o' "$raw")"; cat "$f"; } >"$wrapped/$k-$(basename "$f")"
      k=$((k + 1))
    done
    files=("$wrapped"/*)
  fi
  log=$(mktemp)
  if build-fuzz/fuzz-"$target" -rss_limit_mb=2048 -runs=1 "${files[@]}" >"$log" 2>&1; then
    echo "$target: replayed ${#files[@]} inputs, 0 crashes"
    rm -f "$log"
    exit 0
  fi
  grep -E "ERROR|Running:|SUMMARY" "$log" | tail -6 >&2
  echo "$target: replay FAILED (log: $log)" >&2
  exit 1
fi

[ ${#args[@]} -gt 0 ] || args=("${TARGETS[@]}")
status=0
for target in "${args[@]}"; do
  known "$target" || { echo "error: no fuzz target '$target' (${TARGETS[*]})" >&2; exit 2; }
  corpus=build-fuzz/corpus/$target
  mkdir -p "$corpus" build-fuzz/crashes build-fuzz/logs
  seeds=(test/fuzz/corpus/"$target")
  [ -d test/fuzz/regressions/"$target" ] && seeds+=(test/fuzz/regressions/"$target")
  log=build-fuzz/logs/$target.log
  rc=0
  build-fuzz/fuzz-"$target" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -dict=test/fuzz/"$target".dict -print_final_stats=1 \
    -artifact_prefix=build-fuzz/crashes/"$target"- \
    "$corpus" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+) .*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.* ft: ([0-9]+) .*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.* corp: ([0-9]+)\/.*/\1/p' <<<"$last")
  # libFuzzer's artifacts: crash-, leak-, timeout- and oom- inputs are
  # findings; slow-unit- ones (an input slower than -report_slow_units, 10 s
  # by default) are noted, not failed on.
  units=$(grep -oE "Test unit written to [^ ]+" "$log" | awk '{print $5}' || true)
  crash=$(grep -vE -- '-slow-unit-' <<<"$units" | grep . | tail -1 || true)
  crashes=$(grep -vE -- '-slow-unit-' <<<"$units" | grep -c . || true)
  slow=$(grep -cE -- '-slow-unit-' <<<"$units" || true)
  echo "$target: ${runs:-0} executions, $crashes crashes, coverage: ${cov:-?} edges, ${ft:-?} features, corpus ${corp:-?}$([ "$slow" -gt 0 ] && echo ", $slow slow inputs (build-fuzz/crashes/$target-slow-unit-*)")"
  if [ "$rc" -ne 0 ]; then
    status=1
    grep -E "ERROR|SUMMARY" "$log" | head -3 >&2
    echo "$target: reproduce with tools/fuzz/run.sh --replay $target ${crash:-(see $log)}" >&2
  fi
done
exit $status
