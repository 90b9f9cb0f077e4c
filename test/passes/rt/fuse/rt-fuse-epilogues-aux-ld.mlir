// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-epilogues{target=cuda}))' | FileCheck %s --check-prefix=CUDA
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-epilogues{target=cpu}))' | FileCheck %s --check-prefix=CPU

// cuBLASLt refuses a GELU epilogue's aux matrix (the pre-activation, N wide)
// whose leading dimension is not a multiple of 8 (cublasLt.h), so the CUDA
// target keeps a linear 45 wide and its GELU apart; the CPU fuses it.
// CUDA-LABEL: func.func @forward_odd
// CUDA: rt.kernel %{{.*}}, "linear"
// CUDA-NEXT: %{{.*}} = rt.alloc
// CUDA-NEXT: rt.kernel %{{.*}}, "gelu"
// CPU-LABEL: func.func @forward_odd
// CPU: rt.kernel %{{.*}}, "linear_gelu"
func.func @forward_odd(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer, %b: !rt.buffer) {
  %pre = rt.alloc 2880 : !rt.buffer
  rt.kernel %ctx, "linear"(%x, %w, %b, %pre) {floats = array<f64>, ints = array<i64: 16, 8, 45, 0, 1, 0>}
  %y = rt.alloc 2880 : !rt.buffer
  rt.kernel %ctx, "gelu"(%pre, %y) {floats = array<f64>, ints = array<i64: 720, 1, 0>}
  return
}

// -----

// The gradient, likewise: the aux matrix is read there.
// CUDA-LABEL: func.func @backward_odd
// CUDA: rt.kernel %{{.*}}, "linear"
// CUDA-NEXT: %{{.*}} = rt.alloc
// CUDA-NEXT: rt.kernel %{{.*}}, "gelu_grad"
// CPU-LABEL: func.func @backward_odd
// CPU: rt.kernel %{{.*}}, "linear_dgelu"
func.func @backward_odd(%ctx: !rt.context, %dy: !rt.buffer, %w: !rt.buffer, %pre: !rt.buffer) {
  %t = rt.alloc 2880 : !rt.buffer
  rt.kernel %ctx, "linear"(%dy, %w, %t) {floats = array<f64>, ints = array<i64: 16, 8, 45, 1, 0, 0>}
  %dpre = rt.alloc 2880 : !rt.buffer
  rt.kernel %ctx, "gelu_grad"(%pre, %t, %dpre) {floats = array<f64>, ints = array<i64: 720, 1, 0>}
  return
}
