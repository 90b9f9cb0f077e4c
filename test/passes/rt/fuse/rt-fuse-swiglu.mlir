// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-swiglu{target=cpu}))' | FileCheck %s
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-swiglu{target=cuda}))' | FileCheck %s

// Both targets have the fused kernels (runtime/cpu, runtime/cuda): the
// same rewrite on each.

// Llama's MLP product on bf16 [8, 32] (256 elements), as convert-nn-to-rt
// lowers it: silu(g) -> s, mul(s, u) -> y; in backward mul(dy, u) -> t,
// silu_grad(g, t) -> dg, mul(dy, s) -> du. Afterwards one swiglu and one
// swiglu_grad where silu_grad was (the last of the three; dg and du read
// only after it); s and t are gone.
// CHECK-LABEL: func.func @mlp
// CHECK: %[[Y:.*]] = rt.alloc 512
// CHECK-NEXT: rt.kernel %{{.*}}, "swiglu"(%arg1, %arg2, %[[Y]]) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 0>}
// CHECK: rt.kernel %{{.*}}, "swiglu_grad"(%arg1, %arg2, %arg3, %[[DG:[0-9]+]], %[[DU:[0-9]+]]) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 0>}
// CHECK-NEXT: rt.kernel %{{.*}}, "fill"(%[[DG]])
// CHECK-NEXT: rt.kernel %{{.*}}, "fill"(%[[DU]])
// CHECK-NOT: "silu
// CHECK-NOT: "mul"
func.func @mlp(%ctx: !rt.context, %g: !rt.buffer, %u: !rt.buffer, %dy: !rt.buffer) {
  %s = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "silu"(%g, %s) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1>}
  %y = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "mul"(%s, %u, %y) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 1, 8, 32, 32, 1, 32, 1>}
  // backward
  %t = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "mul"(%dy, %u, %t) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 1, 8, 32, 32, 1, 32, 1>}
  %du = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "mul"(%dy, %s, %du) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 1, 8, 32, 32, 1, 32, 1>}
  %dg = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "silu_grad"(%g, %t, %dg) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1>}
  rt.kernel %ctx, "fill"(%dg) {dtype = bf16, floats = array<f64: 0.0>, ints = array<i64: 256, 1>}
  rt.kernel %ctx, "fill"(%du) {dtype = bf16, floats = array<f64: 0.0>, ints = array<i64: 256, 1>}
  return
}

// -----

// --recompute=selective (f32): the backward recomputes silu(g) -> s2 and
// the product (for the down projection's weight gradient), and reads s2
// for du. Each silu-and-product pair is one swiglu, the gradient one
// swiglu_grad; no silu is left.
// CHECK-LABEL: func.func @recomputed
// CHECK: "swiglu"(%arg1, %arg2, %{{.*}}) {floats = array<f64>, ints = array<i64: 256, 0, 0>}
// CHECK: "swiglu"(%arg1, %arg2, %{{.*}}) {floats = array<f64>, ints = array<i64: 256, 0, 0>}
// CHECK: "swiglu_grad"(%arg1, %arg2, %arg3, %{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 256, 0, 0>}
// CHECK-NOT: "silu
// CHECK-NOT: "mul"
func.func @recomputed(%ctx: !rt.context, %g: !rt.buffer, %u: !rt.buffer, %dy: !rt.buffer) {
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "silu"(%g, %s) {floats = array<f64>, ints = array<i64: 256, 0>}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "mul"(%s, %u, %y) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  // backward: the recomputed forward, then the gradient
  %s2 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "silu"(%g, %s2) {floats = array<f64>, ints = array<i64: 256, 0>}
  %y2 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "mul"(%u, %s2, %y2) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  %t = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "mul"(%u, %dy, %t) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  %dg = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "silu_grad"(%g, %t, %dg) {floats = array<f64>, ints = array<i64: 256, 0>}
  %du = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "mul"(%dy, %s2, %du) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  rt.kernel %ctx, "fill"(%y2) {floats = array<f64: 0.0>, ints = array<i64: 256, 0>}
  return
}

// -----

// Not fused: a product that broadcasts (u of [32]), and a silu whose output
// something else reads too (here a fill), with no gradient.
// CHECK-LABEL: func.func @unfused
// CHECK: "silu"
// CHECK-NEXT: rt.alloc
// CHECK-NEXT: "mul"
// CHECK: "silu"
// CHECK-NEXT: rt.alloc
// CHECK-NEXT: "mul"
// CHECK-NOT: "swiglu
func.func @unfused(%ctx: !rt.context, %g: !rt.buffer, %u: !rt.buffer, %bias: !rt.buffer) {
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "silu"(%g, %s) {floats = array<f64>, ints = array<i64: 256, 0>}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "mul"(%s, %bias, %y) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 0, 1>}
  %s2 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "silu"(%g, %s2) {floats = array<f64>, ints = array<i64: 256, 0>}
  %y2 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "mul"(%s2, %u, %y2) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  rt.kernel %ctx, "fill"(%s2) {floats = array<f64: 0.0>, ints = array<i64: 256, 0>}
  return
}

// -----

// A micro-batch of 1: the tensors are [1, 8, 32], and convert-nn-to-rt
// gives the size-1 dimension stride 0, as it gives a broadcast one. Still
// no broadcast: fused as @mlp is.
// CHECK-LABEL: func.func @batch_of_one
// CHECK: "swiglu"(%arg1, %arg2, %{{.*}}) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 0>}
// CHECK: "swiglu_grad"(%arg1, %arg2, %arg3, %{{.*}}, %{{.*}}) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 0>}
// CHECK-NOT: "silu
// CHECK-NOT: "mul"
func.func @batch_of_one(%ctx: !rt.context, %g: !rt.buffer, %u: !rt.buffer, %dy: !rt.buffer) {
  %s = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "silu"(%g, %s) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1>}
  %y = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "mul"(%s, %u, %y) {dtype = bf16, floats = array<f64>, ints = array<i64: 3, 1, 1, 8, 32, 0, 32, 1, 0, 32, 1>}
  %t = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "mul"(%dy, %u, %t) {dtype = bf16, floats = array<f64>, ints = array<i64: 3, 1, 1, 8, 32, 0, 32, 1, 0, 32, 1>}
  %du = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "mul"(%dy, %s, %du) {dtype = bf16, floats = array<f64>, ints = array<i64: 3, 1, 1, 8, 32, 0, 32, 1, 0, 32, 1>}
  %dg = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "silu_grad"(%g, %t, %dg) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1>}
  rt.kernel %ctx, "fill"(%dg) {dtype = bf16, floats = array<f64: 0.0>, ints = array<i64: 256, 1>}
  rt.kernel %ctx, "fill"(%du) {dtype = bf16, floats = array<f64: 0.0>, ints = array<i64: 256, 1>}
  return
}
