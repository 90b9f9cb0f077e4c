// RUN: shardc-opt %s | shardc-opt | FileCheck %s

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[CTX:.*]]: !rt.context, %[[P:.*]]: !rt.buffer, %{{.*}}: !rt.buffer, %[[A:.*]]: !rt.buffer)
func.func @step(%ctx: !rt.context, %params: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  // CHECK: %[[X:.*]] = rt.view %[[P]][128] : !rt.buffer
  %x = rt.view %params[128] : !rt.buffer
  // CHECK: %[[Y:.*]] = rt.alloc 4096 : !rt.buffer
  %y = rt.alloc 4096 : !rt.buffer
  // A part of an allocation, with the bytes it spans.
  // CHECK: rt.view %[[Y]][1024] size 2048 : !rt.buffer
  %part = rt.view %y[1024] size 2048 : !rt.buffer
  // CHECK: rt.event_wait %[[CTX]] {event = 3 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 3 : i64, stream = 0 : i64}
  // CHECK: rt.kernel %[[CTX]], "silu"(%[[X]], %[[Y]]) {floats = array<f64>, ints = array<i64: 1024, 0>}
  rt.kernel %ctx, "silu"(%x, %y) {ints = array<i64: 1024, 0>, floats = array<f64>}
  // CHECK: rt.kernel %[[CTX]], "fill"(%[[X]]) {floats = array<f64: 5.000000e-01>, ints = array<i64: 32, 0>, stream = 1 : i64}
  rt.kernel %ctx, "fill"(%x) {ints = array<i64: 32, 0>, floats = array<f64: 0.5>, stream = 1 : i64}
  // CHECK: rt.event_record %[[CTX]] {event = 3 : i64, stream = 1 : i64}
  rt.event_record %ctx {event = 3 : i64, stream = 1 : i64}
  return
}

// The typed collectives.
// CHECK-LABEL: func.func @collectives
func.func @collectives(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %x: !rt.buffer, %y: !rt.buffer, %p: !rt.buffer, %g: !rt.buffer) {
  // CHECK: rt.all_gather %{{.*}}(%{{.*}}) -> (%{{.*}}) {axis = 1 : i64, counts = array<i64: 16>, dtype = bf16, group = 0 : i64}
  rt.all_gather %ctx (%a) -> (%x) {axis = 1 : i64, counts = array<i64: 16>, dtype = bf16, group = 0 : i64}
  // The float8 all-gather's bytes.
  // CHECK: rt.all_gather %{{.*}}(%{{.*}}) -> (%{{.*}}) {axis = 0 : i64, counts = array<i64: 16>, dtype = f8E4M3FN, group = 0 : i64}
  rt.all_gather %ctx (%a) -> (%x) {axis = 0 : i64, counts = array<i64: 16>, dtype = f8E4M3FN, group = 0 : i64}
  // CHECK: rt.all_gather %{{.*}}(%{{.*}}, %{{.*}}) -> (%{{.*}}, %{{.*}}) scratch(%{{.*}}, %{{.*}}) {axis = 0 : i64, counts = array<i64: 16, 8>, dtype = f32, group = -1 : i64}
  rt.all_gather %ctx (%a, %b) -> (%x, %y) scratch(%p, %g) {axis = 0 : i64, counts = array<i64: 16, 8>, dtype = f32, group = -1 : i64}
  // CHECK: rt.all_gather %{{.*}}(%{{.*}}) -> (%{{.*}}) {axis = 0 : i64, counts = array<i64: 16>, dtype = f32, subgroup = 2 : i64}
  rt.all_gather %ctx (%a) -> (%x) {axis = 0 : i64, counts = array<i64: 16>, dtype = f32, subgroup = 2 : i64}
  // CHECK: rt.reduce_scatter %{{.*}} %{{.*}} -> %{{.*}} scratch %{{.*}} {axis = 1 : i64, count = 16 : i64, dtype = f32}
  rt.reduce_scatter %ctx %a -> %x scratch %p {axis = 1 : i64, count = 16 : i64, dtype = f32}
  // CHECK: rt.all_reduce %{{.*}} %{{.*}} -> %{{.*}} {axis = 0 : i64, count = 16 : i64, dtype = f32, stream = 0 : i64}
  rt.all_reduce %ctx %a -> %a {axis = 0 : i64, count = 16 : i64, dtype = f32, stream = 0 : i64}
  return
}
