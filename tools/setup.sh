#!/usr/bin/env bash
# Installs shardc's dependencies (Debian 12 packages) and builds it in build/.
# Safe to re-run: apt-get and ninja do only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake ninja-build ccache g++ python3 python3-numpy python3-torch python3-matplotlib
  libonnx-dev libprotobuf-dev protobuf-compiler python3-onnx libonnx-testdata
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libopenblas-dev libopenblas-openmp-dev libdnnl-dev nlohmann-json3-dev libgtest-dev
  libopenmpi-dev openmpi-bin libxxhash-dev libboost-context-dev
  clang-22 libclang-rt-22-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# cudnn-frontend's headers (not in Debian): a pinned PyPI wheel's include/.
python3 tools/fetch_cudnn_frontend.py build/third_party/cudnn-frontend

if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR="$(llvm-config-22 --cmakedir)/../mlir"
fi
ninja -C build
