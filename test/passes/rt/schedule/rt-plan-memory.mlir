// RUN: shardc-opt %s --split-input-file --rt-plan-memory --verify-diagnostics | FileCheck %s

// Buffers whose live ranges do not overlap share bytes; overlapping ones do
// not. The arena size is the planned peak.

// CHECK-LABEL: func.func @chain
// CHECK-SAME: arena_bytes = 384 : i64
func.func @chain(%ctx: !rt.context, %p: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) attributes {rt.manifest = {format = 1 : i64}} {
  // a [0,3], b [2,5], c [4,6] (op indices): a and c can share; b, the
  // largest, is placed first.
  // CHECK: %[[A:.*]] = rt.view %[[ARENA:.*]][256]
  %a = rt.alloc 100 : !rt.buffer
  rt.kernel %ctx, "silu"(%p, %a) {ints = array<i64: 25, 0>, floats = array<f64>}
  // CHECK: %[[B:.*]] = rt.view %[[ARENA]][0]
  %b = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "silu"(%a, %b) {ints = array<i64: 25, 0>, floats = array<f64>}
  // CHECK: %[[C:.*]] = rt.view %[[ARENA]][256]
  %c = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "silu"(%b, %c) {ints = array<i64: 16, 0>, floats = array<f64>}
  rt.kernel %ctx, "copy"(%c, %io) {ints = array<i64: 64>, floats = array<f64>}
  // CHECK-NOT: rt.alloc
  return
}

// -----

// Three buffers all live at once: no overlap, largest first.
// CHECK-LABEL: func.func @all_live
// CHECK-SAME: arena_bytes = 448 : i64
func.func @all_live(%ctx: !rt.context, %p: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) attributes {rt.manifest = {format = 1 : i64}} {
  // CHECK: rt.view %{{.*}}[384]
  %a = rt.alloc 64 : !rt.buffer
  // CHECK: rt.view %{{.*}}[0]
  %b = rt.alloc 256 : !rt.buffer
  // CHECK: rt.view %{{.*}}[256]
  %c = rt.alloc 65 : !rt.buffer
  rt.kernel %ctx, "accumulate"(%a, %b, %c, %io) {ints = array<i64: 16>, floats = array<f64>}
  return
}

// -----

// The peak of gathered parameters counts the outputs of every all-gather,
// single or coalesced (not their pack and gathered scratch), while live:
// x (128) and y (64) of the group gather and z (256) overlap at z's gather,
// 448 bytes; w (256) is gathered after x, y and z died. Each gather is
// joined by the compute stream (an event) before its outputs are read, as
// convert-nn-to-rt orders them.
// CHECK-LABEL: func.func @gathered
// CHECK-SAME: rt.peak_gathered_bytes = 448 : i64
func.func @gathered(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %a = rt.view %p[0] : !rt.buffer
  %b = rt.view %p[64] : !rt.buffer
  %x = rt.alloc 128 : !rt.buffer
  %y = rt.alloc 64 : !rt.buffer
  %pack = rt.alloc 48 : !rt.buffer
  %all = rt.alloc 1024 : !rt.buffer
  rt.all_gather %ctx (%a, %b) -> (%x, %y) scratch(%pack, %all) {axis = 0 : i64, counts = array<i64: 8, 4>, dtype = f32, group = 0 : i64}
  rt.event_record %ctx {event = 0 : i64, stream = 1 : i64}
  %z = rt.alloc 256 : !rt.buffer
  rt.all_gather %ctx (%a) -> (%z) {axis = 0 : i64, counts = array<i64: 16>, dtype = f32, group = 1 : i64}
  rt.event_record %ctx {event = 1 : i64, stream = 1 : i64}
  rt.event_wait %ctx {event = 0 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 1 : i64, stream = 0 : i64}
  rt.kernel %ctx, "accumulate"(%x, %y, %z, %io) {ints = array<i64: 16>, floats = array<f64>}
  %w = rt.alloc 256 : !rt.buffer
  rt.all_gather %ctx (%b) -> (%w) {axis = 0 : i64, counts = array<i64: 16>, dtype = f32, group = 2 : i64}
  rt.event_record %ctx {event = 2 : i64, stream = 1 : i64}
  rt.event_wait %ctx {event = 2 : i64, stream = 0 : i64}
  rt.kernel %ctx, "copy"(%w, %io) {ints = array<i64: 256>, floats = array<f64>}
  return
}

// -----

// A buffer another stream uses stays live until the compute stream waits
// for that use, across streams: %staged is copied on the copy stream
// (stream 2) and gathered on stream 1; the compute stream joins stream 1
// (event 1) only after %t is written. So %t, allocated after the gather,
// must not take %staged's bytes (it would overwrite them while the gather
// may still read them); %u, allocated after the join, may.
// (Largest first: %g at 0, %staged at 128; %t beside them at 192, where
// without the join it would reuse 128; %u, after %g died, at 0.)
// CHECK-LABEL: func.func @other_streams
// CHECK: rt.view %{{.*}}[128]
// CHECK-NEXT: rt.kernel %{{.*}}, "copy"
// CHECK: rt.all_gather
// CHECK: rt.view %{{.*}}[192]
// CHECK-NEXT: rt.kernel %{{.*}}, "fill"
// CHECK: rt.event_wait %{{.*}} {event = 1 : i64, stream = 0 : i64}
// CHECK: rt.view %{{.*}}[0]
// CHECK-NEXT: rt.kernel %{{.*}}, "fill"
func.func @other_streams(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %a = rt.view %p[0] : !rt.buffer
  %staged = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "copy"(%a, %staged) {ints = array<i64: 64>, floats = array<f64>, stream = 2 : i64}
  rt.event_record %ctx {event = 0 : i64, stream = 2 : i64}
  rt.event_wait %ctx {event = 0 : i64, stream = 1 : i64}
  %g = rt.alloc 128 : !rt.buffer
  rt.all_gather %ctx (%staged) -> (%g) {axis = 0 : i64, counts = array<i64: 16>, dtype = f32, group = 0 : i64}
  rt.event_record %ctx {event = 1 : i64, stream = 1 : i64}
  %t = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "fill"(%t) {ints = array<i64: 16, 0>, floats = array<f64: 1.0>}
  rt.event_wait %ctx {event = 1 : i64, stream = 0 : i64}
  rt.kernel %ctx, "copy"(%g, %io) {ints = array<i64: 128>, floats = array<f64>}
  %u = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "fill"(%u) {ints = array<i64: 16, 0>, floats = array<f64: 2.0>}
  rt.kernel %ctx, "copy"(%t, %u) {ints = array<i64: 64>, floats = array<f64>}
  return
}

// -----

// Sizes are bounded before offsets are summed: a buffer over 2^40 bytes,
// or buffers over 2^60 bytes in all, are errors rather than wrapped offsets.
func.func @huge(%ctx: !rt.context, %p: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) attributes {rt.manifest = {format = 1 : i64}} {
  // expected-error @+1 {{a buffer of 1099511627777 bytes is over the limit of 2^40 bytes (1 TiB)}}
  %a = rt.alloc 1099511627777 : !rt.buffer
  rt.kernel %ctx, "copy"(%p, %a) {ints = array<i64: 64>, floats = array<f64>}
  return
}
