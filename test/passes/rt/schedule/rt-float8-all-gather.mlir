// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-float8-all-gather))' | FileCheck %s

// Mesh 2. %w's gathered weight is read by tensorwise e4m3 casts only (the
// forward's and the backward's transposed one): its shard is cast with the
// global scale and gathered as fp8 bytes. The scale is made first, before
// the run of events and allocations the gathers begin, for every such
// weight (one here): the shard's amax, the amaxes of both ranks, the scale.
// The norm %n (read by silu) and %v (read in f32 too) keep their gathers.
// CHECK-LABEL: func.func @shardc_micro_step
// CHECK: rt.kernel %{{.*}}, "silu"
// CHECK-NEXT: %[[AMAX:.*]] = rt.alloc 4 : !rt.buffer
// CHECK-NEXT: %[[SCALES:.*]] = rt.alloc 8 : !rt.buffer
// CHECK-NEXT: rt.kernel %{{.*}}, "amax_group"(%[[W:.*]], %[[AMAX]]) {{.*}}ints = array<i64: 1, 0, 128>}
// CHECK-NEXT: %[[AMAXES:.*]] = rt.alloc 8 : !rt.buffer
// CHECK-NEXT: rt.all_gather %{{.*}}(%[[AMAX]]) -> (%[[AMAXES]]) {axis = 0 : i64, counts = array<i64: 1>, dtype = f32, stream = 0 : i64}
// CHECK-NEXT: rt.kernel %{{.*}}, "fp8_scales"(%[[AMAXES]], %[[SCALES]]) {{.*}}ints = array<i64: 2, 1, 7, 0>}
// CHECK-NEXT: %[[S:.*]] = rt.view %[[SCALES]][0] size 8
// CHECK-NEXT: %[[QX:.*]] = rt.alloc 128 : !rt.buffer
// CHECK-NEXT: rt.kernel %{{.*}}, "cast_fp8_scaled"(%[[W]], %[[S]], %[[QX]]) {{.*}}ints = array<i64: 1, 128, 0, 7, 0, 0>}
// CHECK-NEXT: rt.event_record %{{.*}} {event = 0 : i64, stream = 0 : i64}
// CHECK-NEXT: rt.event_wait %{{.*}} {event = 0 : i64, stream = 1 : i64}
// CHECK-NEXT: %[[WQ:.*]] = rt.alloc 256 : !rt.buffer
// CHECK: rt.all_gather %{{.*}}(%[[QX]]) -> (%[[WQ]]) {axis = 0 : i64, counts = array<i64: 128>, dtype = f8E4M3FN, group = 0 : i64}
// CHECK-NEXT: rt.event_record %{{.*}} {event = 1 : i64, stream = 1 : i64}
// CHECK-NEXT: rt.all_gather %{{.*}} {axis = 0 : i64, counts = array<i64: 8>, dtype = f32, group = 0 : i64}
// CHECK: rt.all_gather %{{.*}} {axis = 0 : i64, counts = array<i64: 128>, dtype = f32, group = 0 : i64}
// The forward GEMM reads the gathered bytes and the global scale; the
// transposed cast is a transpose of the bytes.
// CHECK: rt.kernel %{{.*}}, "cast_fp8"
// CHECK-NOT: "cast_fp8"(
// CHECK: rt.kernel %{{.*}}, "matmul_fp8"(%{{.*}}, %[[WQ]], %{{.*}}, %[[S]], %{{.*}})
// CHECK-NEXT: %[[T:.*]] = rt.alloc 256 : !rt.buffer
// CHECK-NEXT: rt.kernel %{{.*}}, "transpose_fp8"(%[[WQ]], %[[T]]) {{.*}}ints = array<i64: 16, 16>}
// CHECK-NEXT: rt.kernel %{{.*}}, "matmul_fp8"(%{{.*}}, %[[T]], %{{.*}}, %[[S]], %{{.*}})
// CHECK: rt.kernel %{{.*}}, "cast_fp8"(%{{.*}}) {{.*}}ints = array<i64: 16, 16, 0, 7, 0, 0, 0>}

module attributes {fsdp.mesh = array<i64: 1, 2>} {
func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %w = rt.view %p[0] : !rt.buffer
  %n = rt.view %p[512] : !rt.buffer
  %v = rt.view %p[576] : !rt.buffer
  %x = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "silu"(%x, %x) {ints = array<i64: 256, 0>, floats = array<f64>}
  rt.event_record %ctx {event = 0 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 0 : i64, stream = 1 : i64}
  %gw = rt.alloc 1024 : !rt.buffer
  rt.event_record %ctx {event = 2 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 2 : i64, stream = 1 : i64}
  %gn = rt.alloc 64 : !rt.buffer
  rt.event_record %ctx {event = 4 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 4 : i64, stream = 1 : i64}
  %gv = rt.alloc 1024 : !rt.buffer
  rt.all_gather %ctx (%w) -> (%gw) {axis = 0 : i64, counts = array<i64: 128>, dtype = f32, group = 0 : i64}
  rt.event_record %ctx {event = 1 : i64, stream = 1 : i64}
  rt.all_gather %ctx (%n) -> (%gn) {axis = 0 : i64, counts = array<i64: 8>, dtype = f32, group = 0 : i64}
  rt.event_record %ctx {event = 3 : i64, stream = 1 : i64}
  rt.all_gather %ctx (%v) -> (%gv) {axis = 0 : i64, counts = array<i64: 128>, dtype = f32, group = 0 : i64}
  rt.event_record %ctx {event = 5 : i64, stream = 1 : i64}
  rt.event_wait %ctx {event = 1 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 3 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 5 : i64, stream = 0 : i64}
  %qx = rt.alloc 256 : !rt.buffer
  %sx = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%x, %qx, %sx) {ints = array<i64: 16, 16, 0, 7, 0, 0, 0>, floats = array<f64>}
  %qw = rt.alloc 256 : !rt.buffer
  %sw = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%gw, %qw, %sw) {ints = array<i64: 16, 16, 0, 7, 0, 0, 0>, floats = array<f64>}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "matmul_fp8"(%qx, %qw, %sx, %sw, %y) {ints = array<i64: 16, 16, 16, 7, 7, 0, 0, 0, 0>, floats = array<f64>}
  %qt = rt.alloc 256 : !rt.buffer
  %st = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%gw, %qt, %st) {ints = array<i64: 16, 16, 0, 7, 0, 1, 0>, floats = array<f64>}
  rt.kernel %ctx, "matmul_fp8"(%qx, %qt, %sx, %st, %y) {ints = array<i64: 16, 16, 16, 7, 7, 0, 0, 0, 0>, floats = array<f64>}
  %gn2 = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "silu"(%gn, %gn2) {ints = array<i64: 16, 0>, floats = array<f64>}
  %qv = rt.alloc 256 : !rt.buffer
  %sv = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%gv, %qv, %sv) {ints = array<i64: 16, 16, 0, 7, 0, 0, 0>, floats = array<f64>}
  rt.kernel %ctx, "silu"(%gv, %y) {ints = array<i64: 256, 0>, floats = array<f64>}
  return
}
}

// -----

// A bf16 param dtype: the gather reads the bf16 cast of the f32 master.
// The amax is the master's (rounded to bf16 by fp8_scales: amax_dtype 1),
// the shard cast reads the bf16 copy. A rowwise cast's weight (%v) keeps
// its gather.
// CHECK-LABEL: func.func @shardc_micro_step
// CHECK: rt.kernel %{{.*}}, "amax_group"(%[[W:.*]], %{{.*}}) {{.*}}ints = array<i64: 1, 0, 128>}
// CHECK: rt.kernel %{{.*}}, "fp8_scales"(%{{.*}}) {{.*}}ints = array<i64: 2, 1, 7, 1>}
// CHECK: rt.kernel %{{.*}}, "cast_fp8_scaled"(%[[C:.*]], %{{.*}}, %{{.*}}) {dtype = bf16, {{.*}}ints = array<i64: 1, 128, 1, 7, 0, 0>}
// CHECK: rt.all_gather %{{.*}}(%{{.*}}) -> (%{{.*}}) {axis = 0 : i64, counts = array<i64: 128>, dtype = f8E4M3FN, group = 0 : i64}
// CHECK: rt.all_gather %{{.*}} {axis = 0 : i64, counts = array<i64: 128>, dtype = bf16, group = 0 : i64}
// CHECK: "cast_fp8"(%{{.*}}) {dtype = bf16, {{.*}}ints = array<i64: 16, 16, 1, 7, 1, 0, 0>}
module attributes {fsdp.mesh = array<i64: 1, 2>} {
func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %w = rt.view %p[0] : !rt.buffer
  %v = rt.view %p[512] : !rt.buffer
  %cw = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "cast"(%w, %cw) {ints = array<i64: 128, 0, 1>, floats = array<f64>}
  %cv = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "cast"(%v, %cv) {ints = array<i64: 128, 0, 1>, floats = array<f64>}
  rt.event_record %ctx {event = 0 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 0 : i64, stream = 1 : i64}
  %gw = rt.alloc 512 : !rt.buffer
  rt.event_record %ctx {event = 2 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 2 : i64, stream = 1 : i64}
  %gv = rt.alloc 512 : !rt.buffer
  rt.all_gather %ctx (%cw) -> (%gw) {axis = 0 : i64, counts = array<i64: 128>, dtype = bf16, group = 0 : i64}
  rt.event_record %ctx {event = 1 : i64, stream = 1 : i64}
  rt.all_gather %ctx (%cv) -> (%gv) {axis = 0 : i64, counts = array<i64: 128>, dtype = bf16, group = 0 : i64}
  rt.event_record %ctx {event = 3 : i64, stream = 1 : i64}
  rt.event_wait %ctx {event = 1 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 3 : i64, stream = 0 : i64}
  %qw = rt.alloc 256 : !rt.buffer
  %sw = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%gw, %qw, %sw) {dtype = bf16, ints = array<i64: 16, 16, 1, 7, 0, 0, 0>, floats = array<f64>}
  %qv = rt.alloc 256 : !rt.buffer
  %sv = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%gv, %qv, %sv) {dtype = bf16, ints = array<i64: 16, 16, 1, 7, 1, 0, 0>, floats = array<f64>}
  %y = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "matmul_fp8"(%qv, %qw, %sv, %sw, %y) {dtype = bf16, ints = array<i64: 16, 16, 16, 7, 7, 0, 0, 1, 0>, floats = array<f64>}
  return
}
}

// -----

// One rank: the gather is a copy; nothing to halve.
// CHECK-LABEL: func.func @shardc_micro_step
// CHECK-NOT: amax_group
// CHECK: rt.all_gather %{{.*}} dtype = f32
module attributes {fsdp.mesh = array<i64: 1, 1>} {
func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %w = rt.view %p[0] : !rt.buffer
  rt.event_record %ctx {event = 0 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 0 : i64, stream = 1 : i64}
  %gw = rt.alloc 1024 : !rt.buffer
  rt.all_gather %ctx (%w) -> (%gw) {axis = 0 : i64, counts = array<i64: 256>, dtype = f32, group = 0 : i64}
  rt.event_record %ctx {event = 1 : i64, stream = 1 : i64}
  rt.event_wait %ctx {event = 1 : i64, stream = 0 : i64}
  %qw = rt.alloc 256 : !rt.buffer
  %sw = rt.alloc 8 : !rt.buffer
  rt.kernel %ctx, "cast_fp8"(%gw, %qw, %sw) {ints = array<i64: 16, 16, 0, 7, 0, 0, 0>, floats = array<f64>}
  return
}
}
