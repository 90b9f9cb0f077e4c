// RUN: shardc-opt %S/Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 wrap=^(h\.[0-9]+)\.' --nn-autodiff --fsdp-reshard --fsdp-prefetch --convert-nn-to-rt | shardc-opt --pass-pipeline='builtin.module(func.func(rt-coalesce-collectives))' | FileCheck %s

// The root group's two parameters (table 3x6, norm 2) are gathered by one
// kernel: packed (18 + 2 elements), one exchange over 4 ranks, unpacked.
// Both completion events follow it.
// CHECK-LABEL: func.func @shardc_micro_step
// CHECK: %[[PACK:.*]] = rt.alloc 80 : !rt.buffer
// CHECK-NEXT: %[[ALL:.*]] = rt.alloc 320 : !rt.buffer
// CHECK-NEXT: rt.kernel %{{.*}}, "all_gather_group"(%{{.*}}, %{{.*}}, %[[OUT1:.*]], %[[OUT2:.*]], %[[PACK]], %[[ALL]]) {floats = array<f64>, fsdp.group = -1 : i64, ints = array<i64: 2, 0, 0, 18, 2>, stream = 1 : i64}
// CHECK-NEXT: rt.event_record %{{.*}} {event = 1 : i64, stream = 1 : i64}
// CHECK-NEXT: rt.event_record %{{.*}} {event = 3 : i64, stream = 1 : i64}
// Single-parameter groups keep their plain all-gather.
// CHECK: rt.kernel %{{.*}}, "all_gather"({{.*}}) {floats = array<f64>, fsdp.group = 0 : i64
