// RUN: shardc-opt %s | shardc-opt | FileCheck %s

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[CTX:.*]]: !rt.context, %[[P:.*]]: !rt.buffer, %{{.*}}: !rt.buffer, %[[A:.*]]: !rt.buffer)
func.func @step(%ctx: !rt.context, %params: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  // CHECK: %[[X:.*]] = rt.view %[[P]][128] : !rt.buffer
  %x = rt.view %params[128] : !rt.buffer
  // CHECK: %[[Y:.*]] = rt.alloc 4096 : !rt.buffer
  %y = rt.alloc 4096 : !rt.buffer
  // CHECK: rt.event_wait %[[CTX]] {event = 3 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 3 : i64, stream = 0 : i64}
  // CHECK: rt.kernel %[[CTX]], "silu"(%[[X]], %[[Y]]) {floats = array<f64>, ints = array<i64: 1024>}
  rt.kernel %ctx, "silu"(%x, %y) {ints = array<i64: 1024>, floats = array<f64>}
  // CHECK: rt.kernel %[[CTX]], "copy"(%[[Y]], %[[X]]) {floats = array<f64: 5.000000e-01>, ints = array<i64>, stream = 1 : i64}
  rt.kernel %ctx, "copy"(%y, %x) {ints = array<i64>, floats = array<f64: 0.5>, stream = 1 : i64}
  // CHECK: rt.event_record %[[CTX]] {event = 3 : i64, stream = 1 : i64}
  rt.event_record %ctx {event = 3 : i64, stream = 1 : i64}
  return
}
