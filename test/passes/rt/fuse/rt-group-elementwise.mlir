// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-group-elementwise))' | FileCheck %s

// Three gradients laid out in the state region as in the reduced flat
// buffer (64, 8 and 64 f32 elements at consecutive offsets): one
// accumulate over 136 elements, at views spanning them.
// CHECK-LABEL: func.func @group
// CHECK: %[[A:.*]] = rt.view %[[STATE:.*]][1024] size 544
// CHECK-NEXT: %[[G:.*]] = rt.view %[[R:.*]][0] size 544
// CHECK-NEXT: rt.kernel %{{.*}}, "accumulate"(%[[A]], %[[G]], %[[CTL:.*]], %[[A]]) {floats = array<f64>, ints = array<i64: 136>}
// CHECK-NOT: "accumulate"
func.func @group(%ctx: !rt.context, %state: !rt.buffer, %ctl: !rt.buffer) {
  %r = rt.alloc 544 : !rt.buffer
  rt.kernel %ctx, "fill"(%r) {floats = array<f64: 1.0>, ints = array<i64: 136, 0>}
  %a1 = rt.view %state[1024] : !rt.buffer
  %a2 = rt.view %state[1280] : !rt.buffer
  %a3 = rt.view %state[1312] : !rt.buffer
  %g1 = rt.view %r[0] size 256 : !rt.buffer
  %g2 = rt.view %r[256] size 32 : !rt.buffer
  %g3 = rt.view %r[288] size 256 : !rt.buffer
  rt.kernel %ctx, "accumulate"(%a1, %g1, %ctl, %a1) {floats = array<f64>, ints = array<i64: 64>}
  rt.kernel %ctx, "accumulate"(%a2, %g2, %ctl, %a2) {floats = array<f64>, ints = array<i64: 8>}
  rt.kernel %ctx, "accumulate"(%a3, %g3, %ctl, %a3) {floats = array<f64>, ints = array<i64: 64>}
  return
}

// -----

// Kept apart: a gap in the state (the second gradient 64 bytes further);
// another control buffer; a kernel between.
// CHECK-LABEL: func.func @apart
// CHECK-COUNT-4: "accumulate"
func.func @apart(%ctx: !rt.context, %state: !rt.buffer, %ctl: !rt.buffer, %ctl2: !rt.buffer) {
  %r = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "fill"(%r) {floats = array<f64: 1.0>, ints = array<i64: 256, 0>}
  %a1 = rt.view %state[0] : !rt.buffer
  %a2 = rt.view %state[320] : !rt.buffer
  %a3 = rt.view %state[576] : !rt.buffer
  %a4 = rt.view %state[832] : !rt.buffer
  %g1 = rt.view %r[0] size 256 : !rt.buffer
  %g2 = rt.view %r[256] size 256 : !rt.buffer
  %g3 = rt.view %r[512] size 256 : !rt.buffer
  %g4 = rt.view %r[768] size 256 : !rt.buffer
  rt.kernel %ctx, "accumulate"(%a1, %g1, %ctl, %a1) {floats = array<f64>, ints = array<i64: 64>}
  rt.kernel %ctx, "accumulate"(%a2, %g2, %ctl, %a2) {floats = array<f64>, ints = array<i64: 64>}
  rt.kernel %ctx, "accumulate"(%a3, %g3, %ctl2, %a3) {floats = array<f64>, ints = array<i64: 64>}
  rt.kernel %ctx, "fill"(%r) {floats = array<f64: 1.0>, ints = array<i64: 1, 0>}
  rt.kernel %ctx, "accumulate"(%a4, %g4, %ctl2, %a4) {floats = array<f64>, ints = array<i64: 64>}
  return
}

// -----

// The optimizer step's casts of three f32 parameters (64, 8 and 64
// elements, consecutive in the parameters) to their bf16 working copies
// (consecutive in the state): one cast of 136 elements.
// CHECK-LABEL: func.func @casts
// CHECK: %[[P:.*]] = rt.view %{{.*}}[512] size 544
// CHECK-NEXT: %[[W:.*]] = rt.view %{{.*}}[2048] size 272
// CHECK-NEXT: rt.kernel %{{.*}}, "cast"(%[[P]], %[[W]]) {floats = array<f64>, ints = array<i64: 136, 0, 1>}
// CHECK-NOT: "cast"
func.func @casts(%ctx: !rt.context, %params: !rt.buffer, %state: !rt.buffer) {
  %p1 = rt.view %params[512] : !rt.buffer
  %p2 = rt.view %params[768] : !rt.buffer
  %p3 = rt.view %params[800] : !rt.buffer
  %w1 = rt.view %state[2048] : !rt.buffer
  %w2 = rt.view %state[2176] : !rt.buffer
  %w3 = rt.view %state[2192] : !rt.buffer
  rt.kernel %ctx, "cast"(%p1, %w1) {floats = array<f64>, ints = array<i64: 64, 0, 1>}
  rt.kernel %ctx, "cast"(%p2, %w2) {floats = array<f64>, ints = array<i64: 8, 0, 1>}
  rt.kernel %ctx, "cast"(%p3, %w3) {floats = array<f64>, ints = array<i64: 64, 0, 1>}
  return
}

// -----

// Kept apart: casts of other dtypes, and a gap in the destination.
// CHECK-LABEL: func.func @casts_apart
// CHECK-COUNT-3: "cast"
func.func @casts_apart(%ctx: !rt.context, %params: !rt.buffer, %state: !rt.buffer) {
  %p1 = rt.view %params[0] : !rt.buffer
  %p2 = rt.view %params[256] : !rt.buffer
  %p3 = rt.view %params[512] : !rt.buffer
  %w1 = rt.view %state[0] : !rt.buffer
  %w2 = rt.view %state[128] : !rt.buffer
  %w3 = rt.view %state[320] : !rt.buffer
  rt.kernel %ctx, "cast"(%p1, %w1) {floats = array<f64>, ints = array<i64: 64, 0, 1>}
  rt.kernel %ctx, "cast"(%p2, %w2) {floats = array<f64>, ints = array<i64: 64, 1, 0>}
  rt.kernel %ctx, "cast"(%p3, %w3) {floats = array<f64>, ints = array<i64: 64, 0, 1>}
  return
}
