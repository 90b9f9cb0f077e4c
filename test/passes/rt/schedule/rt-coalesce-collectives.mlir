// RUN: shardc-opt %S/../../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 wrap=^(h\.[0-9]+)\.' --nn-autodiff --fsdp-reshard --fsdp-prefetch --convert-nn-to-rt | shardc-opt --pass-pipeline='builtin.module(func.func(rt-coalesce-collectives))' | FileCheck %s
// RUN: shardc-opt %s --pass-pipeline='builtin.module(func.func(rt-coalesce-collectives))' | FileCheck %s --check-prefix=HAND

// The root group's two parameters (table 3x6, norm 2) are gathered by one
// kernel: packed (18 + 2 elements), one exchange over 4 ranks, unpacked.
// Both completion events follow it.
// CHECK-LABEL: func.func @shardc_micro_step
// CHECK: %[[PACK:.*]] = rt.alloc 80 : !rt.buffer
// CHECK-NEXT: %[[ALL:.*]] = rt.alloc 320 : !rt.buffer
// CHECK-NEXT: rt.all_gather %{{.*}}(%{{.*}}, %{{.*}}) -> (%[[OUT1:.*]], %[[OUT2:.*]]) scratch(%[[PACK]], %[[ALL]]) {axis = 0 : i64, counts = array<i64: 18, 2>, dtype = f32, group = -1 : i64}
// CHECK-NEXT: rt.event_record %{{.*}} {event = 1 : i64, stream = 1 : i64}
// CHECK-NEXT: rt.event_record %{{.*}} {event = 3 : i64, stream = 1 : i64}
// Single-parameter groups keep their plain all-gather.
// CHECK: rt.all_gather %{{.*}}(%{{.*}}) -> (%{{.*}}) {axis = 0 : i64, counts = array<i64: {{[0-9]+}}>, dtype = f32, group = 0 : i64}

// Hand-written: adjacent gathers of one group, axis and dtype merge (bf16:
// 2 bytes an element, 2 ranks from the output sizes); another group, a
// subgroup gather and an op in between each end a run.
// HAND-LABEL: func.func @shardc_hand
// HAND: %[[P:.*]] = rt.alloc 24 : !rt.buffer
// HAND-NEXT: %[[G:.*]] = rt.alloc 48 : !rt.buffer
// HAND-NEXT: rt.all_gather %{{.*}}(%{{.*}}, %{{.*}}) -> (%{{.*}}, %{{.*}}) scratch(%[[P]], %[[G]]) {axis = 0 : i64, counts = array<i64: 4, 8>, dtype = bf16, group = 5 : i64}
// HAND-NEXT: rt.event_record %{{.*}} {event = 0 : i64, stream = 1 : i64}
// HAND-NEXT: rt.event_record %{{.*}} {event = 1 : i64, stream = 1 : i64}
// HAND-NEXT: rt.alloc
// HAND-NEXT: rt.all_gather %{{.*}}(%{{.*}}) -> (%{{.*}}) {axis = 0 : i64, counts = array<i64: 4>, dtype = bf16, group = 6 : i64}
// HAND-NEXT: rt.alloc
// HAND-NEXT: rt.all_gather %{{.*}}(%{{.*}}) -> (%{{.*}}) {axis = 0 : i64, counts = array<i64: 4>, dtype = bf16, group = 6 : i64, subgroup = 2 : i64}
// HAND-NEXT: rt.kernel
// HAND-NEXT: rt.alloc
// HAND-NEXT: rt.all_gather %{{.*}}(%{{.*}}) -> (%{{.*}}) {axis = 0 : i64, counts = array<i64: 4>, dtype = bf16, group = 6 : i64}
// A run of one group in two dtypes (the float8 all-gather's bytes and the
// norms): one gather a dtype, each where its part's last one was, followed
// by its parts' completion events (one byte an element: 2 ranks).
// HAND: %[[P8:.*]] = rt.alloc 24 : !rt.buffer
// HAND-NEXT: %[[G8:.*]] = rt.alloc 48 : !rt.buffer
// HAND-NEXT: rt.all_gather %{{.*}}(%{{.*}}, %{{.*}}) -> (%{{.*}}, %{{.*}}) scratch(%[[P8]], %[[G8]]) {axis = 0 : i64, counts = array<i64: 16, 8>, dtype = f8E4M3FN, group = 7 : i64}
// HAND-NEXT: rt.event_record %{{.*}} {event = 2 : i64, stream = 1 : i64}
// HAND-NEXT: rt.event_record %{{.*}} {event = 4 : i64, stream = 1 : i64}
// HAND: rt.all_gather %{{.*}}(%{{.*}}, %{{.*}}) -> (%{{.*}}, %{{.*}}) scratch(%{{.*}}, %{{.*}}) {axis = 0 : i64, counts = array<i64: 4, 4>, dtype = f32, group = 7 : i64}
// HAND-NEXT: rt.event_record %{{.*}} {event = 3 : i64, stream = 1 : i64}
// HAND-NEXT: rt.event_record %{{.*}} {event = 5 : i64, stream = 1 : i64}
func.func @shardc_hand(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %a = rt.view %p[0] : !rt.buffer
  %b = rt.view %p[64] : !rt.buffer
  %x = rt.alloc 16 : !rt.buffer
  rt.all_gather %ctx (%a) -> (%x) {axis = 0 : i64, counts = array<i64: 4>, dtype = bf16, group = 5 : i64}
  rt.event_record %ctx {event = 0 : i64, stream = 1 : i64}
  %y = rt.alloc 32 : !rt.buffer
  rt.all_gather %ctx (%b) -> (%y) {axis = 0 : i64, counts = array<i64: 8>, dtype = bf16, group = 5 : i64}
  rt.event_record %ctx {event = 1 : i64, stream = 1 : i64}
  %z = rt.alloc 16 : !rt.buffer
  rt.all_gather %ctx (%a) -> (%z) {axis = 0 : i64, counts = array<i64: 4>, dtype = bf16, group = 6 : i64}
  %w = rt.alloc 16 : !rt.buffer
  rt.all_gather %ctx (%a) -> (%w) {axis = 0 : i64, counts = array<i64: 4>, dtype = bf16, group = 6 : i64, subgroup = 2 : i64}
  rt.kernel %ctx, "silu"(%x, %y) {ints = array<i64: 8, 0>, floats = array<f64>}
  %v = rt.alloc 16 : !rt.buffer
  rt.all_gather %ctx (%b) -> (%v) {axis = 0 : i64, counts = array<i64: 4>, dtype = bf16, group = 6 : i64}
  rt.kernel %ctx, "silu"(%x, %y) {ints = array<i64: 8, 0>, floats = array<f64>}
  %f1 = rt.alloc 32 : !rt.buffer
  rt.all_gather %ctx (%a) -> (%f1) {axis = 0 : i64, counts = array<i64: 16>, dtype = f8E4M3FN, group = 7 : i64}
  rt.event_record %ctx {event = 2 : i64, stream = 1 : i64}
  %n1 = rt.alloc 32 : !rt.buffer
  rt.all_gather %ctx (%b) -> (%n1) {axis = 0 : i64, counts = array<i64: 4>, dtype = f32, group = 7 : i64}
  rt.event_record %ctx {event = 3 : i64, stream = 1 : i64}
  %f2 = rt.alloc 16 : !rt.buffer
  rt.all_gather %ctx (%b) -> (%f2) {axis = 0 : i64, counts = array<i64: 8>, dtype = f8E4M3FN, group = 7 : i64}
  rt.event_record %ctx {event = 4 : i64, stream = 1 : i64}
  %n2 = rt.alloc 32 : !rt.buffer
  rt.all_gather %ctx (%a) -> (%n2) {axis = 0 : i64, counts = array<i64: 4>, dtype = f32, group = 7 : i64}
  rt.event_record %ctx {event = 5 : i64, stream = 1 : i64}
  return
}
