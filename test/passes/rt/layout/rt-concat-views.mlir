// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-concat-views))' | FileCheck %s

// A flat buffer of three f32 parts (64, 8 and 64 elements), as
// fsdp-bucket-gradients' gradient buffer on one rank: each part's producer
// writes into the flat buffer at its byte offset, the flat buffer is
// allocated first, and the copies are gone.
// CHECK-LABEL: func.func @flat
// CHECK: %[[Y:.*]] = rt.alloc 544
// CHECK-NEXT: %[[A:.*]] = rt.view %[[Y]][0] size 256
// CHECK-NEXT: rt.kernel %{{.*}}, "fill"(%[[A]])
// CHECK-NEXT: %[[B:.*]] = rt.view %[[Y]][256] size 32
// CHECK-NEXT: rt.kernel %{{.*}}, "fill"(%[[B]])
// CHECK-NEXT: %[[C:.*]] = rt.view %[[Y]][288] size 256
// CHECK-NEXT: rt.kernel %{{.*}}, "silu"(%[[A]], %[[C]])
// CHECK-NOT: concat_part
// CHECK: rt.kernel %{{.*}}, "squared_norm"(%[[Y]],
func.func @flat(%ctx: !rt.context, %out: !rt.buffer) {
  %a = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "fill"(%a) {floats = array<f64: 1.0>, ints = array<i64: 64, 0>}
  %b = rt.alloc 32 : !rt.buffer
  rt.kernel %ctx, "fill"(%b) {floats = array<f64: 2.0>, ints = array<i64: 8, 0>}
  %c = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "silu"(%a, %c) {floats = array<f64>, ints = array<i64: 64, 0>}
  %y = rt.alloc 544 : !rt.buffer
  rt.kernel %ctx, "concat_part"(%a, %y) {floats = array<f64>, ints = array<i64: 1, 64, 136, 0, 1, 0>}
  rt.kernel %ctx, "concat_part"(%b, %y) {floats = array<f64>, ints = array<i64: 1, 8, 136, 64, 1, 0>}
  rt.kernel %ctx, "concat_part"(%c, %y) {floats = array<f64>, ints = array<i64: 1, 64, 136, 72, 1, 0>}
  rt.kernel %ctx, "squared_norm"(%y, %out) {floats = array<f64>, ints = array<i64: 136>}
  return
}

// -----

// Kept: parts not contiguous in the result (outer 2: a concatenation along
// the inner dimension, as a 2-rank flat buffer [2, n]); bf16 parts are
// views at 2-byte offsets; a part concatenated twice stays a copy for the
// second result.
// CHECK-LABEL: func.func @kept
// CHECK: "concat_part"(%{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 2, 8, 16, 0, 1, 0>}
// CHECK: rt.view %{{.*}}[32] size 32
// CHECK: "concat_part"(%[[P:.*]], %{{.*}}) {dtype = bf16, floats = array<f64>, ints = array<i64: 1, 16, 32, 0, 1, 1>}
// CHECK: "concat_part"(%[[P]], %{{.*}}) {dtype = bf16, floats = array<f64>, ints = array<i64: 1, 16, 32, 16, 1, 1>}
func.func @kept(%ctx: !rt.context) {
  %a = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "fill"(%a) {floats = array<f64: 1.0>, ints = array<i64: 16, 0>}
  %y = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "concat_part"(%a, %y) {floats = array<f64>, ints = array<i64: 2, 8, 16, 0, 1, 0>}
  %h = rt.alloc 32 : !rt.buffer
  rt.kernel %ctx, "fill"(%h) {dtype = bf16, floats = array<f64: 1.0>, ints = array<i64: 16, 1>}
  %p = rt.alloc 32 : !rt.buffer
  rt.kernel %ctx, "fill"(%p) {dtype = bf16, floats = array<f64: 1.0>, ints = array<i64: 16, 1>}
  %z = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "concat_part"(%p, %z) {dtype = bf16, floats = array<f64>, ints = array<i64: 1, 16, 32, 0, 1, 1>}
  rt.kernel %ctx, "concat_part"(%h, %z) {dtype = bf16, floats = array<f64>, ints = array<i64: 1, 16, 32, 16, 1, 1>}
  %u = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "concat_part"(%p, %u) {dtype = bf16, floats = array<f64>, ints = array<i64: 1, 16, 32, 16, 1, 1>}
  return
}
