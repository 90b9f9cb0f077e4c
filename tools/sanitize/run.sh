#!/usr/bin/env bash
# The runtime, its tests and the trainers under AddressSanitizer and
# UndefinedBehaviorSanitizer (-DSHARDC_SANITIZE=ON, in build-asan/):
#
#   tools/sanitize/run.sh [--unit] [LIT_TEST...]
#
# builds the sanitized runtime libraries (and, with --unit, runs the unit
# tests and the emulated device's tests under the sanitizers), then runs the
# given lit tests (paths under test/, e.g. test/e2e/train_gpt2.test) with
# build/'s shardc linking every trainer they compile against the sanitized
# runtime (SHARDC_RUNTIME_DIR, and SHARDC_CXX=tools/sanitize/c++, which
# adds the sanitizers to the link). The compiler itself is not sanitized.
# A sanitizer report aborts the trainer, and so fails its test.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
unit=""
tests=()
for a in "$@"; do
  case "$a" in
    --unit) unit=1 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: unknown flag $a (see --help)" >&2; exit 2 ;;
    *) tests+=("$a") ;;
  esac
done
[ -x build/bin/shardc ] || { echo "error: build/bin/shardc is missing: build shardc first (tools/setup.sh)" >&2; exit 1; }
if [ ! -f build-asan/build.ninja ]; then
  cmake -G Ninja -S . -B build-asan -DSHARDC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
libs=(shardc_rt shardc_rt_main shardc_mesh_local shardc_mesh_mpi)
grep -q '^build runtime/libshardc_rt_cuda_emu.a' build-asan/build.ninja &&
  libs+=(shardc_rt_cuda_emu shardc_cuda_emu shardc_nccl_emu)
if [ -n "$unit" ]; then
  libs+=(shardc-unit-tests)
  grep -q 'shardc-cuda-emu-tests:' build-asan/build.ninja && libs+=(shardc-cuda-emu-tests)
fi
ninja -C build-asan "${libs[@]}" >/dev/null
# Open MPI's own allocations at exit are not the runtime's: leaks are
# checked by the unit tests (one process, no MPI), not under mpirun.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [ -n "$unit" ]; then
  for t in build-asan/test/unit/shardc-unit-tests build-asan/test/unit/shardc-cuda-emu-tests; do
    [ -x "$t" ] || continue
    "$t" --gtest_brief=1 2>&1 | tail -3
  done
fi
[ ${#tests[@]} -gt 0 ] || exit 0
export SHARDC_RUNTIME_DIR=$root/build-asan/runtime SHARDC_CXX=$root/tools/sanitize/c++
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
paths=()
for t in "${tests[@]}"; do paths+=("$root/build/${t#./}"); done
/usr/lib/llvm-22/bin/lit -sv "${paths[@]}"
