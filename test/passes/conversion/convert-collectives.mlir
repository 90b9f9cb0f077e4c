// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=2x4' --nn-autodiff --convert-nn-to-rt | FileCheck %s
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=2x1' --nn-autodiff --convert-nn-to-rt | FileCheck --check-prefix=ONE %s

// Collectives run on stream 1, after an event from the compute stream, and
// compute waits for their result.
// CHECK: rt.manifest = {
// CHECK-SAME: mesh = array<i64: 2, 4>
// CHECK-SAME: {bytes = 72 : i64, dtype = "f32", global_shape = array<i64: 10, 6>, group = -1 : i64, init = "normal", name = "wte", offset = 0 : i64, shape = [3, 6]}
// CHECK-NOT: shard.grid
// CHECK-LABEL: func.func @shardc_micro_step
// CHECK: rt.event_record %{{.*}} {event = [[E0:[0-9]+]] : i64, stream = 0 : i64}
// CHECK-NEXT: rt.event_wait %{{.*}} {event = [[E0]] : i64, stream = 1 : i64}
// CHECK-NEXT: rt.all_gather %{{.*}}(%{{.*}}) -> (%[[G:.*]]) {axis = 1 : i64, counts = array<i64: 18>, dtype = f32, group = -1 : i64}
// CHECK-NEXT: rt.event_record %{{.*}} {event = [[E1:[0-9]+]] : i64, stream = 1 : i64}
// The padded table's leading rows (its unpadding) are the gathered buffer
// itself: no slice kernel, no copy.
// CHECK: rt.event_wait %{{.*}} {event = [[E1]] : i64, stream = 0 : i64}
// CHECK-NEXT: rt.kernel %{{.*}}, "embedding"(%{{.*}}, %[[G]],
// CHECK: rt.reduce_scatter %{{.*}} %{{.*}} -> %{{.*}} scratch %{{.*}} {axis = 1 : i64, count = 12 : i64, dtype = f32, group = -1 : i64}
// CHECK: rt.all_reduce %{{.*}} %{{.*}} -> %{{.*}} {axis = 0 : i64, count = 12 : i64, dtype = f32}

// A shard axis of one rank (2x1: replication only): its reduce-scatters
// are the identity and lowered to nothing (the all-reduces read the
// gradients in place); the replicas' all-reduces remain. (Its all-gathers
// stay: on one rank rt-working-copy turns a bf16 one into state.)
// ONE-LABEL: func.func @shardc_micro_step
// ONE-NOT: rt.reduce_scatter
// ONE: rt.all_reduce %{{.*}} %{{.*}} -> %{{.*}} {axis = 0 : i64, count = 6 : i64, dtype = f32}
// ONE-NOT: rt.reduce_scatter
// ONE: rt.all_reduce %{{.*}} {axis = 0 : i64, count = 60 : i64, dtype = f32}
// ONE-NOT: rt.reduce_scatter
// ONE: return
