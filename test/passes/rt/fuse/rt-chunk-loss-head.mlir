// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-chunk-loss-head{target=cpu rows=3}))' | FileCheck %s
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-chunk-loss-head{target=cpu rows=8}))' | FileCheck %s --check-prefix=WHOLE
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-chunk-loss-head{target=cuda rows=3}))' | FileCheck %s

// The head (8 tokens, 4 wide, vocabulary 100), its loss with the gradient in
// place, and the two gradient GEMMs become one kernel over chunks of 3 rows:
// the logits' allocation is gone, a 3 x 128 scratch (rows padded to
// abi::lossHeadRowStride(100) floats) takes its place, and
// dh's and dw's allocations move above the fused kernel, on both targets.
// With 8 rows a chunk (all of them), nothing changes.
// CHECK-LABEL: func.func @head
// CHECK-NOT: rt.alloc 3200
// CHECK: "fill"
// CHECK-NEXT: %[[DH:.*]] = rt.alloc 128
// CHECK-NEXT: %[[DW:.*]] = rt.alloc 1600
// CHECK-NEXT: %[[S:.*]] = rt.alloc 1536
// CHECK-NEXT: rt.kernel %{{.*}}, "linear_cross_entropy"(%[[H:.*]], %[[W:.*]], %[[T:.*]], %[[LOSS:.*]], %[[DH]], %[[DW]], %[[S]]) {floats = array<f64>, ints = array<i64: 8, 4, 100, 3, -100, 0>}
// CHECK-NOT: "linear"
// CHECK-NOT: "matmul"
// CHECK: rt.kernel %{{.*}}, "accumulate"(%{{.*}}, %[[DW]],
// WHOLE-LABEL: func.func @head
// WHOLE: "cross_entropy_with_grad"
// WHOLE-NOT: linear_cross_entropy
func.func @head(%ctx: !rt.context, %p: !rt.buffer, %io: !rt.buffer) {
  %w = rt.view %p[0] : !rt.buffer
  %t = rt.view %io[0] : !rt.buffer
  %loss = rt.view %io[32] : !rt.buffer
  %acc = rt.view %p[1600] : !rt.buffer
  %ctl = rt.view %io[64] : !rt.buffer
  %h = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "fill"(%h) {floats = array<f64: 1.0>, ints = array<i64: 32, 0>}
  %L = rt.alloc 3200 : !rt.buffer
  rt.kernel %ctx, "linear"(%h, %w, %L) {floats = array<f64>, ints = array<i64: 8, 4, 100, 0, 0, 0>}
  rt.kernel %ctx, "cross_entropy_with_grad"(%L, %t, %loss, %L) {floats = array<f64>, ints = array<i64: 8, 100, -100>}
  %dh = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "linear"(%L, %w, %dh) {floats = array<f64>, ints = array<i64: 8, 100, 4, 1, 0, 0>}
  %dw = rt.alloc 1600 : !rt.buffer
  rt.kernel %ctx, "matmul"(%L, %h, %dw) {floats = array<f64>, ints = array<i64: 100, 8, 4, 1, 0, 0, 0>}
  rt.kernel %ctx, "accumulate"(%acc, %dw, %ctl, %acc) {floats = array<f64>, ints = array<i64: 400>}
  rt.kernel %ctx, "fill"(%dh) {floats = array<f64: 0.0>, ints = array<i64: 32, 0>}
  return
}

// -----

// The logits are read by another kernel after the loss: no rewrite.
// CHECK-LABEL: func.func @logits_read_after
// CHECK: "cross_entropy_with_grad"
// CHECK-NOT: linear_cross_entropy
// WHOLE-LABEL: func.func @logits_read_after
func.func @logits_read_after(%ctx: !rt.context, %p: !rt.buffer, %io: !rt.buffer) {
  %w = rt.view %p[0] : !rt.buffer
  %t = rt.view %io[0] : !rt.buffer
  %loss = rt.view %io[32] : !rt.buffer
  %h = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "fill"(%h) {floats = array<f64: 1.0>, ints = array<i64: 32, 0>}
  %L = rt.alloc 3200 : !rt.buffer
  rt.kernel %ctx, "linear"(%h, %w, %L) {floats = array<f64>, ints = array<i64: 8, 4, 100, 0, 0, 0>}
  rt.kernel %ctx, "cross_entropy_with_grad"(%L, %t, %loss, %L) {floats = array<f64>, ints = array<i64: 8, 100, -100>}
  %dh = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "linear"(%L, %w, %dh) {floats = array<f64>, ints = array<i64: 8, 100, 4, 1, 0, 0>}
  %dw = rt.alloc 1600 : !rt.buffer
  rt.kernel %ctx, "matmul"(%L, %h, %dw) {floats = array<f64>, ints = array<i64: 100, 8, 4, 1, 0, 0, 0>}
  %s = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "squared_norm"(%L, %s) {floats = array<f64>, ints = array<i64: 800>}
  return
}
