// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-amax))' | FileCheck %s

// --float8=tensorwise on bf16 [8, 32] (256 elements): the down projection's
// input (swiglu's y) cast into both layouts. swiglu writes y's amax into a
// new 4-byte buffer; fp8_scales (P 1, k 1, e4m3 = 7, amax rounded to bf16
// = 1) turns it into the cast's scale, and cast_fp8_scaled reads y once.
// CHECK-LABEL: func.func @forward
// CHECK: %[[A:.*]] = rt.alloc 4
// CHECK-NEXT: rt.kernel %{{.*}}, "swiglu"(%arg1, %arg2, %[[Y:.*]], %[[A]]) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 1>}
// CHECK-NEXT: rt.alloc 256
// CHECK-NEXT: %[[S:.*]] = rt.alloc 8
// CHECK-NEXT: %[[QT:.*]] = rt.alloc 256
// CHECK-NEXT: rt.kernel %{{.*}}, "fp8_scales"(%[[A]], %[[S]]) {floats = array<f64>, ints = array<i64: 1, 1, 7, 1>}
// CHECK-NEXT: rt.kernel %{{.*}}, "cast_fp8_scaled"(%[[Y]], %[[S]], %{{.*}}, %[[QT]]) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 32, 1, 7, 0, 1>}
// CHECK-NOT: "cast_fp8"
func.func @forward(%ctx: !rt.context, %g: !rt.buffer, %u: !rt.buffer) {
  %y = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "swiglu"(%g, %u, %y) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 0>}
  %q = rt.alloc 256 : !rt.buffer
  %s = rt.alloc 8 : !rt.buffer
  %qt = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%y, %q, %s, %qt) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 32, 1, 7, 0, 0, 1>}
  return
}

// -----

// The backward: swiglu_grad's dg and du, each an output gradient cast to
// e5m2 (8). The first cast sets swiglu_grad's amax, with a buffer for each
// output; the second reads du's. A kernel between them that reads neither
// leaves them fusable.
// CHECK-LABEL: func.func @backward
// CHECK: %[[ADG:.*]] = rt.alloc 4
// CHECK-NEXT: %[[ADU:.*]] = rt.alloc 4
// CHECK-NEXT: rt.kernel %{{.*}}, "swiglu_grad"(%arg1, %arg2, %arg3, %[[DG:.*]], %[[DU:.*]], %[[ADG]], %[[ADU]]) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 1>}
// CHECK: "fp8_scales"(%[[ADG]],
// CHECK-NEXT: "cast_fp8_scaled"(%[[DG]],
// CHECK: "fill"(%arg4)
// CHECK: "fp8_scales"(%[[ADU]],
// CHECK-NEXT: "cast_fp8_scaled"(%[[DU]],
// CHECK-NOT: "cast_fp8"
func.func @backward(%ctx: !rt.context, %g: !rt.buffer, %u: !rt.buffer, %dy: !rt.buffer, %other: !rt.buffer) {
  %dg = rt.alloc 512 : !rt.buffer
  %du = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "swiglu_grad"(%g, %u, %dy, %dg, %du) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 0>}
  %q1 = rt.alloc 256 : !rt.buffer
  %s1 = rt.alloc 8 : !rt.buffer
  %t1 = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%dg, %q1, %s1, %t1) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 32, 1, 8, 0, 0, 1>}
  rt.kernel %ctx, "fill"(%other) {floats = array<f64: 0.0>, ints = array<i64: 256, 0>}
  %q2 = rt.alloc 256 : !rt.buffer
  %s2 = rt.alloc 8 : !rt.buffer
  %t2 = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%du, %q2, %s2, %t2) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 32, 1, 8, 0, 0, 1>}
  return
}

// -----

// The residual norm's y (f32 [8, 32]) cast once, as q, k and v's input.
// CHECK-LABEL: func.func @norm
// CHECK: "add_rms_norm"(%arg1, %arg2, %arg3, %{{.*}}, %[[Y:[0-9]+]], %[[A:[0-9]+]]) {floats = array<f64: 1.000000e-05>, ints = array<i64: 8, 32, 0, 1>}
// CHECK: "fp8_scales"(%[[A]], %{{.*}}) {floats = array<f64>, ints = array<i64: 1, 1, 7, 0>}
// CHECK-NEXT: "cast_fp8_scaled"(%[[Y]],
func.func @norm(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %w: !rt.buffer) {
  %s = rt.alloc 1024 : !rt.buffer
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add_rms_norm"(%a, %b, %w, %s, %y) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 0, 0>}
  %q = rt.alloc 256 : !rt.buffer
  %sc = rt.alloc 8 : !rt.buffer
  %qt = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%y, %q, %sc, %qt) {floats = array<f64>, ints = array<i64: 8, 32, 0, 7, 0, 0, 1>}
  return
}

// -----

// Attention's backward in bf16 [2, 4 heads, 16, 8] (1024 elements): q's
// output gradient from the inverse rotary, cast as [32, 32]; and the
// residual stream's gradient, the norm's plus the residual's
// (rms_norm_grad with add_dr 1, rt-fuse-norm-grad-add), the o projection's
// output gradient: add_dr 2 adds its amax after dr. The final norm's
// gradient (add_dr 0) is left alone.
// CHECK-LABEL: func.func @attention_backward
// CHECK: %[[A:.*]] = rt.alloc 4
// CHECK-NEXT: rt.kernel %{{.*}}, "rotary"(%arg1, %[[DQ:.*]], %[[A]]) {{.*}}ints = array<i64: 2, 4, 16, 8, 1, 1, 0, 1>}
// CHECK: "fp8_scales"(%[[A]],
// CHECK-NEXT: "cast_fp8_scaled"(%[[DQ]],
// CHECK: %[[B:.*]] = rt.alloc 4
// CHECK-NEXT: rt.kernel %{{.*}}, "rms_norm_grad"(%arg2, %arg3, %arg4, %[[DX:.*]], %arg5, %arg6, %[[B]]) {{.*}}ints = array<i64: 32, 32, 1, 2>}
// CHECK: "fp8_scales"(%[[B]],
// CHECK-NEXT: "cast_fp8_scaled"(%[[DX]],
// CHECK: "rms_norm_grad"(%arg2, %arg3, %arg4, %{{[0-9]+}}, %arg5) {{.*}}ints = array<i64: 32, 32, 1, 0>}
// CHECK: "cast_fp8"(
func.func @attention_backward(%ctx: !rt.context, %g: !rt.buffer, %x: !rt.buffer, %w: !rt.buffer, %dy: !rt.buffer, %dw: !rt.buffer, %r: !rt.buffer) {
  %dq = rt.alloc 2048 : !rt.buffer
  rt.kernel %ctx, "rotary"(%g, %dq) {dtype = bf16, floats = array<f64: 1.0e+04>, ints = array<i64: 2, 4, 16, 8, 1, 1, 0, 0>}
  %q1 = rt.alloc 1024 : !rt.buffer
  %s1 = rt.alloc 8 : !rt.buffer
  %t1 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%dq, %q1, %s1, %t1) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 32, 1, 8, 0, 0, 1>}
  %dx = rt.alloc 2048 : !rt.buffer
  rt.kernel %ctx, "rms_norm_grad"(%x, %w, %dy, %dx, %dw, %r) {dtype = bf16, floats = array<f64: 1.0e-05>, ints = array<i64: 32, 32, 1, 1>}
  %q2 = rt.alloc 1024 : !rt.buffer
  %s2 = rt.alloc 8 : !rt.buffer
  %t2 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%dx, %q2, %s2, %t2) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 32, 1, 8, 0, 0, 1>}
  %dx0 = rt.alloc 2048 : !rt.buffer
  rt.kernel %ctx, "rms_norm_grad"(%x, %w, %dy, %dx0, %dw) {dtype = bf16, floats = array<f64: 1.0e-05>, ints = array<i64: 32, 32, 1, 0>}
  %q3 = rt.alloc 1024 : !rt.buffer
  %s3 = rt.alloc 8 : !rt.buffer
  %t3 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%dx0, %q3, %s3, %t3) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 32, 1, 8, 0, 0, 1>}
  return
}

// -----

// Under --tp (rt-float8-tp-scales): the amax_group of swiglu's y is
// dropped, the tp all-gather reading the amax swiglu writes.
// CHECK-LABEL: func.func @tp
// CHECK: %[[A:.*]] = rt.alloc 4
// CHECK-NEXT: rt.kernel %{{.*}}, "swiglu"(%arg1, %arg2, %{{.*}}, %[[A]]) {{.*}}ints = array<i64: 256, 1, 1>}
// CHECK-NOT: "amax_group"
// CHECK: rt.all_gather %{{.*}}(%[[A]]) -> (%{{.*}})
func.func @tp(%ctx: !rt.context, %g: !rt.buffer, %u: !rt.buffer) {
  %y = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "swiglu"(%g, %u, %y) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 0>}
  %a = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "amax_group"(%y, %a) {dtype = bf16, floats = array<f64>, ints = array<i64: 1, 1, 256>}
  %all = rt.alloc 8 : !rt.buffer
  rt.all_gather %ctx(%a) -> (%all) {axis = 1 : i64, dtype = f32, counts = array<i64: 1>}
  return
}

// -----

// Left alone: a rowwise cast (its scales are per row); a cast of a
// tensor something else writes between its producer and it; a cast on
// another stream than its producer's; a cast of part of the output; an
// input no fusable kernel writes.
// CHECK-LABEL: func.func @unfused
// CHECK-NOT: "fp8_scales"
// CHECK-NOT: "cast_fp8_scaled"
// CHECK-NOT: ints = array<i64: 256, 1, 1>
// CHECK: return
func.func @unfused(%ctx: !rt.context, %g: !rt.buffer, %u: !rt.buffer, %x: !rt.buffer) {
  %y1 = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "swiglu"(%g, %u, %y1) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 0>}
  %q1 = rt.alloc 256 : !rt.buffer
  %s1 = rt.alloc 32 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%y1, %q1, %s1) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 32, 1, 7, 1, 0, 0>}
  %y2 = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "swiglu"(%g, %u, %y2) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 0>}
  rt.kernel %ctx, "fill"(%y2) {dtype = bf16, floats = array<f64: 0.0>, ints = array<i64: 256, 1>}
  %q2 = rt.alloc 256 : !rt.buffer
  %s2 = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%y2, %q2, %s2) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 32, 1, 7, 0, 0, 0>}
  %y3 = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "swiglu"(%g, %u, %y3) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 0>}
  %q3 = rt.alloc 256 : !rt.buffer
  %s3 = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%y3, %q3, %s3) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 32, 1, 7, 0, 0, 0>, stream = 1 : i64}
  %y4 = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "swiglu"(%g, %u, %y4) {dtype = bf16, floats = array<f64>, ints = array<i64: 256, 1, 0>}
  %q4 = rt.alloc 128 : !rt.buffer
  %s4 = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%y4, %q4, %s4) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 32, 1, 7, 0, 0, 0>}
  %q5 = rt.alloc 256 : !rt.buffer
  %s5 = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%x, %q5, %s5) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 32, 1, 7, 0, 0, 0>}
  return
}
