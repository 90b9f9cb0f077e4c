// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-float8-tp-scales))' | FileCheck %s

// Mesh 1 x tp 2 (the tp axis is axis 1): a tensorwise cast takes the max
// of both tp ranks' amaxes into its own scale buffer, then casts with it
// (the transposed layout kept); the rowwise cast is left as it was.
// CHECK-LABEL: func.func @shardc_micro_step
// CHECK: rt.kernel %{{.*}}, "amax_group"(%[[X:.*]], %[[A:.*]]) {dtype = bf16, {{.*}}ints = array<i64: 1, 1, 384>}
// CHECK-NEXT: %[[ALL:.*]] = rt.alloc 8 : !rt.buffer
// CHECK-NEXT: rt.all_gather %{{.*}}(%[[A]]) -> (%[[ALL]]) {axis = 1 : i64, counts = array<i64: 1>, dtype = f32, stream = 0 : i64}
// CHECK-NEXT: rt.kernel %{{.*}}, "fp8_scales"(%[[ALL]], %[[S:.*]]) {{.*}}ints = array<i64: 2, 1, 8, 1>}
// CHECK-NEXT: rt.kernel %{{.*}}, "cast_fp8_scaled"(%[[X]], %[[S]], %[[Q:.*]]) {dtype = bf16, {{.*}}ints = array<i64: 16, 24, 1, 8, 1, 0>}
// CHECK-NOT: "cast_fp8"(%[[X]]
// CHECK: rt.kernel %{{.*}}, "cast_fp8"(%{{.*}}) {{.*}}ints = array<i64: 16, 24, 0, 7, 1, 0, 0>}
module attributes {fsdp.mesh = array<i64: 1, 1, 2>} {
func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %x = rt.alloc 768 : !rt.buffer
  %q = rt.alloc 384 : !rt.buffer
  %sc = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%x, %q, %sc) {dtype = bf16, ints = array<i64: 16, 24, 1, 8, 0, 1, 0>, floats = array<f64>}
  %y = rt.alloc 1536 : !rt.buffer
  %qy = rt.alloc 384 : !rt.buffer
  %sy = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%y, %qy, %sy) {ints = array<i64: 16, 24, 0, 7, 1, 0, 0>, floats = array<f64>}
  return
}
}

// -----

// No tp axis: nothing to do.
// CHECK-LABEL: func.func @shardc_micro_step
// CHECK-NOT: amax_group
// CHECK: rt.kernel %{{.*}}, "cast_fp8"
module attributes {fsdp.mesh = array<i64: 1, 2>} {
func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %x = rt.alloc 1536 : !rt.buffer
  %q = rt.alloc 384 : !rt.buffer
  %sc = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%x, %q, %sc) {ints = array<i64: 16, 24, 0, 7, 0, 0, 0>, floats = array<f64>}
  return
}
}

// -----

// A cast into both layouts (an activation the forward and the weight
// gradient read): the scaled cast writes both too.
// CHECK-LABEL: func.func @shardc_micro_step
// CHECK: rt.kernel %{{.*}}, "amax_group"(%[[X:.*]], %{{.*}}) {{.*}}ints = array<i64: 1, 0, 384>}
// CHECK: rt.kernel %{{.*}}, "cast_fp8_scaled"(%[[X]], %{{.*}}, %[[Q:.*]], %[[QT:.*]]) {{.*}}ints = array<i64: 16, 24, 0, 7, 0, 1>}
// CHECK-NOT: "cast_fp8"(
module attributes {fsdp.mesh = array<i64: 1, 1, 2>} {
func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %x = rt.alloc 1536 : !rt.buffer
  %q = rt.alloc 384 : !rt.buffer
  %sc = rt.alloc 8 : !rt.buffer
  %qt = rt.alloc 384 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%x, %q, %sc, %qt) {ints = array<i64: 16, 24, 0, 7, 0, 0, 1>, floats = array<f64>}
  return
}
}
