// RUN: shardc-opt %s --rt-working-copy --split-input-file | FileCheck %s

// Hand-written, in the shape convert-nn-to-rt and rt-coalesce-collectives
// give on one rank with bf16 parameters: params %p (region 0), state %s
// (1), io %io (2), arena last. w (16 f32 at 0) and g (8 f32 at 64) are cast
// to bf16 and gathered (a copy on one rank) before a kernel reads them; a
// second gather's input is not a parameter's cast and stays.
module attributes {rt.manifest = {format = 14 : i64, mesh = array<i64: 1, 1>,
    entries = ["micro_step", "opt_step"],
    params = [{name = "w", dtype = "f32", offset = 0 : i64, bytes = 64 : i64, shape = [4, 4]},
              {name = "g", dtype = "f32", offset = 64 : i64, bytes = 32 : i64, shape = [8]}],
    state = [{name = "grad.w", dtype = "f32", offset = 0 : i64, bytes = 64 : i64, shape = [4, 4]},
             {name = "grad.g", dtype = "f32", offset = 64 : i64, bytes = 32 : i64, shape = [8]}],
    state_bytes = 128 : i64}} {

// The working copies follow the state there was (w's 32 bytes at 128, g's
// 16 at 192), and the new entry is listed.
// CHECK: module attributes {rt.manifest = {entries = ["micro_step", "opt_step", "refresh"]
// CHECK-SAME: state = [{{.*}}{bytes = 32 : i64, dtype = "bf16", name = "work.w", offset = 128 : i64, shape = [4, 4]}, {bytes = 16 : i64, dtype = "bf16", name = "work.g", offset = 192 : i64, shape = [8]}]
// CHECK-SAME: state_bytes = 256 : i64

// CHECK-LABEL: func.func @shardc_micro_step
func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %w = rt.view %p[0] : !rt.buffer
  %g = rt.view %p[64] : !rt.buffer
  %xw = rt.alloc 32 : !rt.buffer
  %xg = rt.alloc 16 : !rt.buffer
  %gw = rt.alloc 32 : !rt.buffer
  %gg = rt.alloc 16 : !rt.buffer
  %pack = rt.alloc 48 : !rt.buffer
  %all = rt.alloc 48 : !rt.buffer
  // The casts and the gather go; the kernel reads the working copies.
  // CHECK-NOT: "cast"
  // CHECK-NOT: rt.all_gather %{{.*}}(%{{.*}}, %{{.*}})
  // CHECK: %[[WW:.*]] = rt.view %{{.*}}[128]
  // CHECK: %[[WG:.*]] = rt.view %{{.*}}[192]
  // CHECK-NOT: "cast"
  // CHECK: rt.kernel %{{.*}}, "add"(%[[WW]], %[[WG]], %{{.*}}) {dtype = bf16
  rt.kernel %ctx, "cast"(%w, %xw) {ints = array<i64: 16, 0, 1>, floats = array<f64>}
  rt.kernel %ctx, "cast"(%g, %xg) {ints = array<i64: 8, 0, 1>, floats = array<f64>}
  rt.event_record %ctx {event = 0 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 0 : i64, stream = 1 : i64}
  rt.all_gather %ctx (%xw, %xg) -> (%gw, %gg) scratch(%pack, %all) {axis = 0 : i64, counts = array<i64: 16, 8>, dtype = bf16, group = 0 : i64}
  rt.event_record %ctx {event = 1 : i64, stream = 1 : i64}
  rt.event_wait %ctx {event = 1 : i64, stream = 0 : i64}
  %sum = rt.alloc 16 : !rt.buffer
  rt.kernel %ctx, "add"(%gw, %gg, %sum) {dtype = bf16, ints = array<i64: 1, 1, 8, 1, 1>, floats = array<f64>}
  // An input that is no parameter's cast: the gather stays.
  // CHECK: rt.all_gather %{{.*}}(%{{.*}}) -> (%[[Y:.*]])
  // CHECK: rt.kernel %{{.*}}, "add"(%[[Y]], %[[Y]]
  %y = rt.alloc 16 : !rt.buffer
  rt.all_gather %ctx (%sum) -> (%y) {axis = 0 : i64, counts = array<i64: 8>, dtype = bf16}
  %z = rt.alloc 16 : !rt.buffer
  rt.kernel %ctx, "add"(%y, %y, %z) {dtype = bf16, ints = array<i64: 1, 1, 8, 1, 1>, floats = array<f64>}
  return
}

// The optimizer step casts each parameter into its working copy last.
// CHECK-LABEL: func.func @shardc_opt_step
// CHECK: "sgd"
// CHECK: %[[PW:.*]] = rt.view %arg1[0]
// CHECK-NEXT: %[[SW:.*]] = rt.view %arg2[128]
// CHECK-NEXT: rt.kernel %arg0, "cast"(%[[PW]], %[[SW]]) {floats = array<f64>, ints = array<i64: 16, 0, 1>}
// CHECK: %[[PG:.*]] = rt.view %arg1[64]
// CHECK-NEXT: %[[SG:.*]] = rt.view %arg2[192]
// CHECK-NEXT: rt.kernel %arg0, "cast"(%[[PG]], %[[SG]]) {floats = array<f64>, ints = array<i64: 8, 0, 1>}
// CHECK-NEXT: return
func.func @shardc_opt_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %w = rt.view %p[0] : !rt.buffer
  %gw = rt.view %s[0] : !rt.buffer
  %buf = rt.alloc 64 : !rt.buffer
  %h = rt.view %io[0] : !rt.buffer
  %c = rt.alloc 4 : !rt.buffer
  rt.kernel %ctx, "sgd"(%w, %gw, %buf, %h, %c, %w, %buf) {ints = array<i64: 16, 0>, floats = array<f64>}
  return
}

// The refresh entry: the same casts alone.
// CHECK-LABEL: func.func @shardc_refresh(%arg0: !rt.context, %arg1: !rt.buffer, %arg2: !rt.buffer, %arg3: !rt.buffer, %arg4: !rt.buffer)
// CHECK-NEXT: %[[RW:.*]] = rt.view %arg1[0]
// CHECK-NEXT: %[[RS:.*]] = rt.view %arg2[128]
// CHECK-NEXT: rt.kernel %arg0, "cast"(%[[RW]], %[[RS]])
// CHECK: rt.kernel %arg0, "cast"
// CHECK-NEXT: return
}

// -----

// Two ranks gather shards: nothing changes.
module attributes {rt.manifest = {format = 14 : i64, mesh = array<i64: 1, 2>,
    entries = ["micro_step", "opt_step"],
    params = [{name = "g", dtype = "f32", offset = 0 : i64, bytes = 16 : i64, shape = [4]}],
    state = [], state_bytes = 0 : i64}} {
// CHECK-LABEL: func.func @shardc_micro_step
// CHECK: "cast"
// CHECK: rt.all_gather
func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %g = rt.view %p[0] : !rt.buffer
  %x = rt.alloc 8 : !rt.buffer
  %y = rt.alloc 16 : !rt.buffer
  rt.kernel %ctx, "cast"(%g, %x) {ints = array<i64: 4, 0, 1>, floats = array<f64>}
  rt.all_gather %ctx (%x) -> (%y) {axis = 0 : i64, counts = array<i64: 4>, dtype = bf16}
  return
}
// CHECK-NOT: shardc_refresh
func.func @shardc_opt_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  return
}
}
