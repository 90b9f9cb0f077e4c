// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-group-optimizer{target=cuda}))' | FileCheck %s
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-group-optimizer{target=cpu}))' | FileCheck %s

// Both targets have the fused kernels (runtime/cpu, runtime/cuda): the
// same rewrite on each.

// The norm's chain over three gradients becomes one kernel writing the
// chain's result (here the io slot of the norm); the three updates one
// launch.
// CHECK-LABEL: func.func @opt_step
// CHECK: %[[SQ:.*]] = rt.view %{{.*}}[128]
// CHECK-NOT: rt.kernel
// CHECK: rt.kernel %{{.*}}, "squared_norm_group"(%[[G1:.*]], %[[G2:.*]], %[[G3:.*]], %[[SQ]]) {floats = array<f64>, ints = array<i64: 3, 64, 8, 16>}
// CHECK-NEXT: %[[C:.*]] = rt.alloc 4
// CHECK-NEXT: rt.kernel %{{.*}}, "clip_coef"(%[[SQ]], %{{.*}}, %[[C]])
// CHECK-NEXT: rt.kernel %{{.*}}, "adamw_group"(%[[H:.*]], %[[C]], %[[P1:.*]], %[[G1]], %[[M1:.*]], %[[V1:.*]], %[[P1]], %[[M1]], %[[V1]], %{{.*}}) {floats = array<f64>, ints = array<i64: 3, 64, 0, 8, 1, 16, 0>}
// CHECK-NEXT: return
func.func @opt_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer) {
  %p1 = rt.view %p[0] : !rt.buffer
  %p2 = rt.view %p[256] : !rt.buffer
  %p3 = rt.view %p[320] : !rt.buffer
  %g1 = rt.view %s[0] : !rt.buffer
  %g2 = rt.view %s[256] : !rt.buffer
  %g3 = rt.view %s[320] : !rt.buffer
  %m1 = rt.view %s[384] : !rt.buffer
  %m2 = rt.view %s[640] : !rt.buffer
  %m3 = rt.view %s[704] : !rt.buffer
  %v1 = rt.view %s[768] : !rt.buffer
  %v2 = rt.view %s[1024] : !rt.buffer
  %v3 = rt.view %s[1088] : !rt.buffer
  %h = rt.view %io[0] : !rt.buffer
  %max = rt.view %io[64] : !rt.buffer
  %s1 = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "squared_norm"(%g1, %s1) {floats = array<f64>, ints = array<i64: 64>}
  %s2 = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "squared_norm"(%g2, %s2) {floats = array<f64>, ints = array<i64: 8>}
  %t2 = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "add"(%s1, %s2, %t2) {floats = array<f64>, ints = array<i64: 0, 0>}
  %s3 = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "squared_norm"(%g3, %s3) {floats = array<f64>, ints = array<i64: 16>}
  %sq = rt.view %io[128] : !rt.buffer
  rt.kernel %ctx, "add"(%t2, %s3, %sq) {floats = array<f64>, ints = array<i64: 0, 0>}
  %c = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "clip_coef"(%sq, %max, %c) {floats = array<f64>, ints = array<i64>}
  rt.kernel %ctx, "adamw"(%p1, %g1, %m1, %v1, %h, %c, %p1, %m1, %v1) {floats = array<f64>, ints = array<i64: 64, 0>}
  rt.kernel %ctx, "adamw"(%p2, %g2, %m2, %v2, %h, %c, %p2, %m2, %v2) {floats = array<f64>, ints = array<i64: 8, 1>}
  rt.kernel %ctx, "adamw"(%p3, %g3, %m3, %v3, %h, %c, %p3, %m3, %v3) {floats = array<f64>, ints = array<i64: 16, 0>}
  return
}

// -----

// Not grouped: a lone update; updates separated by an event; a norm whose
// sum another kernel also reads.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: _group
// CHECK: return
func.func @kept(%ctx: !rt.context, %p1: !rt.buffer, %g1: !rt.buffer, %p2: !rt.buffer, %g2: !rt.buffer, %h: !rt.buffer, %c: !rt.buffer) {
  rt.kernel %ctx, "adamw"(%p1, %g1, %g1, %g1, %h, %c, %p1, %g1, %g1) {floats = array<f64>, ints = array<i64: 64, 0>}
  rt.event_record %ctx {event = 0 : i64, stream = 0 : i64}
  rt.kernel %ctx, "adamw"(%p2, %g2, %g2, %g2, %h, %c, %p2, %g2, %g2) {floats = array<f64>, ints = array<i64: 8, 0>}
  %s1 = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "squared_norm"(%g1, %s1) {floats = array<f64>, ints = array<i64: 64>}
  %s2 = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "squared_norm"(%g2, %s2) {floats = array<f64>, ints = array<i64: 8>}
  %t = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "add"(%s1, %s2, %t) {floats = array<f64>, ints = array<i64: 0, 0>}
  %u = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "silu"(%s1, %u) {floats = array<f64>, ints = array<i64: 1, 0>}
  return
}
