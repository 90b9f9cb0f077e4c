// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-residual-norm{target=cuda}))' | FileCheck %s
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-residual-norm{target=cpu}))' | FileCheck %s

// Both targets have the fused kernels (runtime/cpu, runtime/cuda): the
// same rewrite on each.

// A residual add of [2,4,32] tensors, then the layer norm (with bias) and
// the RMS norm of its sum: one kernel each, the sum still written.
// CHECK-LABEL: func.func @residual
// CHECK: %[[S:.*]] = rt.alloc 1024
// CHECK-NEXT: %[[Y:.*]] = rt.alloc 1024
// CHECK-NEXT: rt.kernel %{{.*}}, "add_layer_norm"(%[[A:.*]], %[[B:.*]], %[[W:.*]], %[[BIAS:.*]], %[[S]], %[[Y]]) {floats = array<f64: 1.000000e-05>, ints = array<i64: 8, 32, 1>}
// CHECK: rt.kernel %{{.*}}, "add_rms_norm"(%[[S]], %[[Y]], %[[W]], %{{.*}}, %{{.*}}) {floats = array<f64: 9.9999999999999995E-7>, ints = array<i64: 8, 32>}
func.func @residual(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %w: !rt.buffer, %bias: !rt.buffer) {
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %s) {floats = array<f64>, ints = array<i64: 3, 0, 2, 4, 32, 128, 32, 1, 128, 32, 1>}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "layer_norm"(%s, %w, %bias, %y) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 1, 0>}
  %t = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%s, %y, %t) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  %z = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%t, %w, %z) {floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 0>}
  return
}

// -----

// Not fused: a broadcast add (a bias of [32]); a kernel between the add and
// the norm; a norm on another stream.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: add_layer_norm
// CHECK-NOT: add_rms_norm
// CHECK: return
func.func @kept(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %w: !rt.buffer) {
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %s) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 0, 1>}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%s, %w, %y) {floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 0>}
  %t = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %t) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  %u = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "silu"(%a, %u) {floats = array<f64>, ints = array<i64: 256, 0>}
  %z = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%t, %w, %z) {floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 0>}
  %v = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %v) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  %q = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%v, %w, %q) {floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 0>, stream = 1 : i64}
  return
}
