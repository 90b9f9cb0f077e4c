#!/usr/bin/env bash
# Packs a shardc executable with the shared libraries it needs, so that it
# runs on a GPU machine that has only the NVIDIA driver and CUDA:
#
#   tools/pack_gpu.sh train dist/        # then, there: dist/run --steps 10
#
# Copies the executable, its companions (train.weights.safetensors,
# train.graph.onnx) and every library `ldd` resolves except the C library's
# own (libc, libm, libdl, libpthread, librt, the dynamic loader), the
# driver's (libcuda, libnvidia-*) and CUDA's (libcudart, libcublas*,
# libcudnn*, libnvrtc*, libnccl*), which the target machine provides (a
# bf16 program's attention runs on cuDNN: libcudnn.so.9 must be there); --with-cuda packs
# CUDA's too (hundreds of MB). `run` starts the executable with
# LD_LIBRARY_PATH on the packed libraries first.
set -euo pipefail
withCuda=0
if [ "${1:-}" = "--with-cuda" ]; then
  withCuda=1
  shift
fi
if [ $# -ne 2 ]; then
  echo "usage: $0 [--with-cuda] EXECUTABLE DIR" >&2
  exit 2
fi
exe=$1 dir=$2
[ -x "$exe" ] || { echo "error: $exe: not an executable" >&2; exit 1; }
mkdir -p "$dir/lib"
cp "$exe" "$dir/"
for companion in "$exe".weights.safetensors "$exe".graph.onnx; do
  [ -f "$companion" ] && cp "$companion" "$dir/"
done
skip='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|linux-vdso|libcuda|libnvidia-.*)\.so'
[ $withCuda -eq 1 ] || skip='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|linux-vdso|libcuda|libnvidia-.*|libcudart|libcublas|libcublasLt|libcudnn.*|libnvrtc.*|libnccl)\.so'
missing=0
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  if [ "$path" = "not" ]; then
    echo "error: $name is not found here" >&2
    missing=1
    continue
  fi
  [[ "$name" =~ $skip ]] && continue
  cp -L "$path" "$dir/lib/$name"
done < <(ldd "$exe")
[ $missing -eq 0 ] || exit 1
name=$(basename "$exe")
cat > "$dir/run" <<RUN
#!/bin/sh
here=\$(cd "\$(dirname "\$0")" && pwd)
LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/$name" "\$@"
RUN
chmod +x "$dir/run"
echo "packed $exe with $(ls "$dir/lib" | wc -l) libraries into $dir ($(du -sh "$dir" | cut -f1))"
