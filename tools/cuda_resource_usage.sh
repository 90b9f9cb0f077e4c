#!/usr/bin/env bash
# Registers, spills and shared memory of every CUDA kernel of runtime/cuda,
# as ptxas reports them (the figures cuobjdump --dump-resource-usage gives;
# this toolkit ships no cuobjdump). Needs nvcc, not a GPU.
#   tools/cuda_resource_usage.sh [--check] [sm_90]
# --check (ctest's cuda-resources): exits 1 if a kernel spills, or if a
# kernel launched with 1024 threads (kOneBlockThreads: lossScaleKernel,
# meanRowLossKernel) uses more than the 64 registers a thread such a block
# can have.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
arch=${1:-sm_90}
mpi_inc=$(mpicxx --showme:incdirs 2>/dev/null | awk '{print "-I"$1}')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
table() {
printf "%-44s %5s %12s %11s %8s\n" kernel regs spill-stores spill-loads smem
for f in runtime/cuda/*.cu; do
  nvcc -std=c++17 -O3 --expt-relaxed-constexpr -arch="$arch" -I. $mpi_inc \
    -Xptxas -v -c "$f" -o "$out/k.o" 2>&1 |
    awk '
      /Compiling entry function/ { split($0, q, "\047"); fn = q[2] }
      /spill stores/ && fn != "" {
        for (k = 1; k <= NF; ++k) {
          if ($(k + 1) == "bytes" && $(k + 2) == "stack") stack = $k
          if ($(k + 1) == "bytes" && $(k + 2) == "spill" && $(k + 3) == "stores,") st = $k
          if ($(k + 1) == "bytes" && $(k + 2) == "spill" && $(k + 3) == "loads") ld = $k
        }
      }
      /Used [0-9]+ registers/ && fn != "" {
        regs = $0; sub(/.*Used /, "", regs); sub(/ registers.*/, "", regs)
        smem = 0
        if (match($0, /[0-9]+ bytes smem/)) { smem = substr($0, RSTART, RLENGTH); sub(/ bytes smem/, "", smem) }
        cmd = "c++filt \047" fn "\047"; cmd | getline name; close(cmd)
        gsub(/\(anonymous namespace\)::/, "", name); sub(/^void /, "", name); sub(/\(.*/, "", name)
        printf "%-44s %5s %12s %11s %8s\n", substr(name, 1, 44), regs, st, ld, smem
        fn = ""
      }'
done
}
rows=$(table)
echo "$rows"
[ $check -eq 1 ] || exit 0
echo "$rows" | awk '
  NR > 1 && ($(NF - 2) != 0 || $(NF - 1) != 0) { print "error: " $0 ": spills"; bad = 1 }
  NR > 1 && /lossScaleKernel|meanRowLossKernel/ && $(NF - 3) > 64 {
    print "error: " $0 ": over 64 registers at 1024 threads"; bad = 1 }
  END { if (bad) exit 1; print "no spills; the 1024-thread kernels within 64 registers" }'
