// RUN: shardc-opt %s --rt-offload-to-host --split-input-file --verify-diagnostics | FileCheck %s

// Hand-written, in the shape convert-nn-to-rt gives: params %p (region 0),
// state %s (1), io %io (2), arena last. A gather of two parameters (w: 64
// bytes at 0, g: 32 at 64), a kernel reading w directly (one rank's
// weight), an accumulate into a state slot, and a loss all-reduced into io.
module attributes {rt.manifest = {format = 5 : i64,
    params = [{name = "w", offset = 0 : i64, bytes = 64 : i64},
              {name = "g", offset = 64 : i64, bytes = 32 : i64}],
    state = [{name = "grad.w", offset = 0 : i64, bytes = 64 : i64}],
    io = [{name = "loss", offset = 0 : i64, bytes = 4 : i64},
          {name = "accumulate", offset = 64 : i64, bytes = 8 : i64}]}} {

// The manifest records the offload.
// CHECK: module attributes {rt.manifest = {{{.*}}offload = "cpu"

// CHECK-LABEL: func.func @shardc_micro_step
func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %w = rt.view %p[0] : !rt.buffer
  %g = rt.view %p[64] : !rt.buffer
  %gw = rt.alloc 128 : !rt.buffer
  %gg = rt.alloc 64 : !rt.buffer
  %pack = rt.alloc 96 : !rt.buffer
  %all = rt.alloc 192 : !rt.buffer
  // Both shards are copied on stream 2, once it has caught up with the
  // compute stream, into planned buffers; the gather waits for the copies
  // and sends the copies. Fresh events follow the program's own.
  // CHECK: rt.event_record %{{.*}} {event = 0 : i64, stream = 0 : i64}
  // CHECK-NEXT: rt.event_wait %{{.*}} {event = 0 : i64, stream = 1 : i64}
  // CHECK-NEXT: rt.event_record %{{.*}} {event = 2 : i64, stream = 0 : i64}
  // CHECK-NEXT: rt.event_wait %{{.*}} {event = 2 : i64, stream = 2 : i64}
  // CHECK-NEXT: %[[SW:.*]] = rt.alloc 64 : !rt.buffer
  // CHECK-NEXT: rt.kernel %{{.*}}, "copy"(%[[W:.*]], %[[SW]]) {floats = array<f64>, ints = array<i64: 64>, stream = 2 : i64}
  // CHECK-NEXT: %[[SG:.*]] = rt.alloc 32 : !rt.buffer
  // CHECK-NEXT: rt.kernel %{{.*}}, "copy"(%[[G:.*]], %[[SG]]) {floats = array<f64>, ints = array<i64: 32>, stream = 2 : i64}
  // CHECK-NEXT: rt.event_record %{{.*}} {event = 3 : i64, stream = 2 : i64}
  // CHECK-NEXT: rt.event_wait %{{.*}} {event = 3 : i64, stream = 1 : i64}
  // CHECK-NEXT: rt.all_gather %{{.*}}(%[[SW]], %[[SG]]) -> (
  rt.event_record %ctx {event = 0 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 0 : i64, stream = 1 : i64}
  rt.all_gather %ctx (%w, %g) -> (%gw, %gg) scratch(%pack, %all) {axis = 0 : i64, counts = array<i64: 16, 8>, dtype = f32, group = 0 : i64}
  rt.event_record %ctx {event = 1 : i64, stream = 1 : i64}
  rt.event_wait %ctx {event = 1 : i64, stream = 0 : i64}
  // A compute kernel's parameter is copied in too (the compute stream
  // waits for it); the gathered buffer, in the arena, is not. Its copy is
  // issued at the kernel (the first run of parameter reads: no run before).
  // CHECK: rt.event_record %{{.*}} {event = 7 : i64, stream = 0 : i64}
  // CHECK-NEXT: rt.event_wait %{{.*}} {event = 7 : i64, stream = 2 : i64}
  // CHECK-NEXT: %[[SW2:.*]] = rt.alloc 64 : !rt.buffer
  // CHECK-NEXT: rt.kernel %{{.*}}, "copy"(%[[W]], %[[SW2]]) {{.*}}stream = 2 : i64}
  // CHECK-NEXT: rt.event_record %{{.*}} {event = 8 : i64, stream = 2 : i64}
  // CHECK-NEXT: rt.event_wait %{{.*}} {event = 8 : i64, stream = 0 : i64}
  // CHECK-NEXT: rt.kernel %{{.*}}, "add"(%[[SW2]], %{{.*}}, %{{.*}})
  %sum = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "add"(%w, %gw, %sum) {ints = array<i64: 1, 0, 16, 1, 1>, floats = array<f64>}
  // Kernels address the state and io regions in place (mapped memory):
  // the accumulate into grad.w is left as it is.
  // CHECK-NEXT: rt.view
  // CHECK-NEXT: rt.view
  // CHECK-NEXT: rt.kernel %{{.*}}, "accumulate"({{[^)]*}}) {floats = array<f64>, ints = array<i64: 16>}
  %gradw = rt.view %s[0] : !rt.buffer
  %acc = rt.view %io[64] : !rt.buffer
  rt.kernel %ctx, "accumulate"(%gradw, %sum, %acc, %gradw) {ints = array<i64: 16>, floats = array<f64>}
  // A collective's host output is a planned buffer, copied to the host
  // after it; the compute stream waits for the copy.
  // CHECK: rt.event_wait %{{.*}} {event = 4 : i64, stream = 2 : i64}
  // CHECK-NEXT: %[[SL:.*]] = rt.alloc 4 : !rt.buffer
  // CHECK-NEXT: rt.all_reduce %{{.*}} %{{.*}} -> %[[SL]]
  // CHECK-NEXT: rt.event_record %{{.*}} {event = 5 : i64, stream = 1 : i64}
  // CHECK-NEXT: rt.event_wait %{{.*}} {event = 5 : i64, stream = 2 : i64}
  // CHECK-NEXT: rt.kernel %{{.*}}, "copy"(%[[SL]], %[[LOSS:.*]]) {floats = array<f64>, ints = array<i64: 4>, stream = 2 : i64}
  // CHECK-NEXT: rt.event_record %{{.*}} {event = 6 : i64, stream = 2 : i64}
  // CHECK-NEXT: rt.event_wait %{{.*}} {event = 6 : i64, stream = 0 : i64}
  %loss = rt.view %io[0] : !rt.buffer
  %partial = rt.alloc 4 : !rt.buffer
  rt.all_reduce %ctx %partial -> %loss {axis = 0 : i64, count = 1 : i64, dtype = f32}
  return
}

// The optimizer step runs on the host, as it is.
// CHECK-LABEL: func.func @shardc_opt_step
// CHECK-SAME: rt.on_host
// CHECK-NOT: stream = 2
// CHECK: return
func.func @shardc_opt_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %w = rt.view %p[0] : !rt.buffer
  %gradw = rt.view %s[0] : !rt.buffer
  rt.kernel %ctx, "copy"(%gradw, %w) {ints = array<i64: 64>, floats = array<f64>}
  return
}
}

// -----

// One rank: kernels read the parameters directly, in runs of one FSDP group
// (group 0: w twice; group 1: v; group 0 again, as backward does). Each
// run's parameters are copied once, issued where the run before it starts
// (one group ahead); each run waits for its own copies only.
module attributes {rt.manifest = {format = 5 : i64,
    params = [{name = "w", offset = 0 : i64, bytes = 64 : i64, group = 0 : i64},
              {name = "v", offset = 64 : i64, bytes = 64 : i64, group = 1 : i64}]}} {
// CHECK-LABEL: func.func @shardc_micro_step
// Run 0 (w), issued at itself; then run 1 (v) issued before run 0's first
// kernel, after run 0's wait.
// CHECK: rt.event_record %{{.*}} {event = 0 : i64, stream = 0 : i64}
// CHECK-NEXT: rt.event_wait %{{.*}} {event = 0 : i64, stream = 2 : i64}
// CHECK-NEXT: %[[W0:.*]] = rt.alloc 64
// CHECK-NEXT: rt.kernel %{{.*}}, "copy"(%[[W:.*]], %[[W0]]) {{.*}}stream = 2
// CHECK-NEXT: rt.event_record %{{.*}} {event = 1 : i64, stream = 2 : i64}
// CHECK-NEXT: rt.event_wait %{{.*}} {event = 1 : i64, stream = 0 : i64}
// CHECK-NEXT: rt.event_record %{{.*}} {event = 2 : i64, stream = 0 : i64}
// CHECK-NEXT: rt.event_wait %{{.*}} {event = 2 : i64, stream = 2 : i64}
// CHECK-NEXT: %[[V1:.*]] = rt.alloc 64
// CHECK-NEXT: rt.kernel %{{.*}}, "copy"(%[[V:.*]], %[[V1]]) {{.*}}stream = 2
// CHECK-NEXT: rt.event_record %{{.*}} {event = 3 : i64, stream = 2 : i64}
// CHECK-NEXT: rt.kernel %{{.*}}, "silu"(%[[W0]],
// CHECK-NEXT: rt.kernel %{{.*}}, "silu"(%[[W0]],
// Run 2 (w again) is issued before run 1's first kernel, after run 1's
// wait.
// CHECK-NEXT: rt.event_wait %{{.*}} {event = 3 : i64, stream = 0 : i64}
// CHECK-NEXT: rt.event_record %{{.*}} {event = 4 : i64, stream = 0 : i64}
// CHECK-NEXT: rt.event_wait %{{.*}} {event = 4 : i64, stream = 2 : i64}
// CHECK-NEXT: %[[W2:.*]] = rt.alloc 64
// CHECK-NEXT: rt.kernel %{{.*}}, "copy"(%[[W]], %[[W2]]) {{.*}}stream = 2
// CHECK-NEXT: rt.event_record %{{.*}} {event = 5 : i64, stream = 2 : i64}
// CHECK-NEXT: rt.kernel %{{.*}}, "silu"(%[[V1]],
// CHECK-NEXT: rt.event_wait %{{.*}} {event = 5 : i64, stream = 0 : i64}
// CHECK-NEXT: rt.kernel %{{.*}}, "silu"(%[[W2]],
func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %w = rt.view %p[0] : !rt.buffer
  %v = rt.view %p[64] : !rt.buffer
  %a = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "silu"(%w, %a) {ints = array<i64: 16, 0>, floats = array<f64>}
  rt.kernel %ctx, "silu"(%w, %a) {ints = array<i64: 16, 0>, floats = array<f64>}
  rt.kernel %ctx, "silu"(%v, %a) {ints = array<i64: 16, 0>, floats = array<f64>}
  rt.kernel %ctx, "silu"(%w, %a) {ints = array<i64: 16, 0>, floats = array<f64>}
  return
}
}

// -----

// A read of parameter memory no manifest slot holds is an error naming it.
module attributes {rt.manifest = {format = 5 : i64,
    params = [{name = "w", offset = 0 : i64, bytes = 64 : i64}]}} {
func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %x = rt.view %p[128] : !rt.buffer
  %y = rt.alloc 64 : !rt.buffer
  // expected-error @+1 {{reads host memory at offset 128 of region 0, which no manifest slot holds}}
  rt.kernel %ctx, "copy"(%x, %y) {ints = array<i64: 64>, floats = array<f64>}
  return
}
}

// -----

// expected-error @+1 {{--offload=cpu needs the module's manifest}}
module {
}
