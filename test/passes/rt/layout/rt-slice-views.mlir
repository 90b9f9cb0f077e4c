// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-slice-views))' | FileCheck %s

// The parameters' parts of a reduced flat buffer [1, 136] (64, 8 and 64
// f32 elements): views of it, read in place.
// CHECK-LABEL: func.func @parts
// CHECK: %[[R:.*]] = rt.alloc 544
// CHECK-NEXT: rt.kernel %{{.*}}, "fill"(%[[R]])
// CHECK-NEXT: %[[A:.*]] = rt.view %[[R]][0] size 256
// CHECK-NEXT: %[[B:.*]] = rt.view %[[R]][256] size 32
// CHECK-NEXT: %[[C:.*]] = rt.view %[[R]][288] size 256
// CHECK-NEXT: rt.kernel %{{.*}}, "silu"(%[[A]], %[[C]])
// CHECK-NEXT: return %[[A]], %[[B]]
// CHECK-NOT: "slice"
func.func @parts(%ctx: !rt.context) -> (!rt.buffer, !rt.buffer) {
  %r = rt.alloc 544 : !rt.buffer
  rt.kernel %ctx, "fill"(%r) {floats = array<f64: 1.0>, ints = array<i64: 136, 0>}
  %a = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "slice"(%r, %a) {floats = array<f64>, ints = array<i64: 1, 136, 0, 64, 1, 0>}
  %b = rt.alloc 32 : !rt.buffer
  rt.kernel %ctx, "slice"(%r, %b) {floats = array<f64>, ints = array<i64: 1, 136, 64, 8, 1, 0>}
  %c = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "slice"(%r, %c) {floats = array<f64>, ints = array<i64: 1, 136, 72, 64, 1, 0>}
  rt.kernel %ctx, "silu"(%a, %c) {floats = array<f64>, ints = array<i64: 64, 0>}
  return %a, %b : !rt.buffer, !rt.buffer
}

// -----

// Kept: a strided slice (outer 8: columns of [8, 24]); a slice of a
// parameter (a region, not a transient); a slice whose output is used
// before it.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: "slice"
// CHECK-NOT: rt.view
func.func @kept(%ctx: !rt.context, %params: !rt.buffer) {
  %x = rt.alloc 768 : !rt.buffer
  rt.kernel %ctx, "fill"(%x) {floats = array<f64: 1.0>, ints = array<i64: 192, 0>}
  %y = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "slice"(%x, %y) {floats = array<f64>, ints = array<i64: 8, 24, 8, 8, 1, 0>}
  %z = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "slice"(%params, %z) {floats = array<f64>, ints = array<i64: 1, 192, 0, 64, 1, 0>}
  %w = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "fill"(%w) {floats = array<f64: 1.0>, ints = array<i64: 64, 0>}
  rt.kernel %ctx, "slice"(%x, %w) {floats = array<f64>, ints = array<i64: 1, 192, 0, 64, 1, 0>}
  return
}
