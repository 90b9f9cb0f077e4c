// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-residual-norm{target=cuda}))' | FileCheck %s
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-residual-norm{target=cpu}))' | FileCheck %s
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-residual-norm{target=cuda bf16=false}))' | FileCheck %s --check-prefix=F32ONLY

// Both targets have the fused kernels (runtime/cpu, runtime/cuda): the
// same rewrite on each.

// A residual add of [2,4,32] tensors, then the layer norm (with bias) and
// the RMS norm of its sum: one kernel each, the sum still written.
// CHECK-LABEL: func.func @residual
// CHECK: %[[S:.*]] = rt.alloc 1024
// CHECK-NEXT: %[[Y:.*]] = rt.alloc 1024
// CHECK-NEXT: rt.kernel %{{.*}}, "add_layer_norm"(%[[A:.*]], %[[B:.*]], %[[W:.*]], %[[BIAS:.*]], %[[S]], %[[Y]]) {floats = array<f64: 1.000000e-05>, ints = array<i64: 8, 32, 1, 0>}
// CHECK: rt.kernel %{{.*}}, "add_rms_norm"(%[[S]], %[[Y]], %[[W]], %{{.*}}, %{{.*}}) {floats = array<f64: 9.9999999999999995E-7>, ints = array<i64: 8, 32, 0, 0>}
func.func @residual(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %w: !rt.buffer, %bias: !rt.buffer) {
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %s) {floats = array<f64>, ints = array<i64: 3, 0, 2, 4, 32, 128, 32, 1, 128, 32, 1>}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "layer_norm"(%s, %w, %bias, %y) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 1, 0>}
  %t = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%s, %y, %t) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  %z = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%t, %w, %z) {floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 0>}
  return
}

// -----

// Not fused: a broadcast add (a bias of [32]); a kernel between the add and
// the norm; a norm on another stream.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: add_layer_norm
// CHECK-NOT: add_rms_norm
// CHECK: return
func.func @kept(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %w: !rt.buffer) {
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %s) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 0, 1>}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%s, %w, %y) {floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 0>}
  %t = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %t) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  %u = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "silu"(%a, %u) {floats = array<f64>, ints = array<i64: 256, 0>}
  %z = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%t, %w, %z) {floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 0>}
  %v = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %v) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  %q = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%v, %w, %q) {floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 0>, stream = 1 : i64}
  return
}

// -----

// bf16: the fused kernel computes on bf16 (its dtype code 1, and the
// attribute), the sum rounded before the norm reads it. An add and a norm
// on different dtypes stay apart. With bf16=false, bf16 stays unfused.
// CHECK-LABEL: func.func @bf16
// CHECK: rt.kernel %{{.*}}, "add_layer_norm"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {dtype = bf16, floats = array<f64: 1.000000e-05>, ints = array<i64: 8, 32, 1, 1>}
// CHECK: "add"(
// CHECK-NEXT: rt.alloc
// CHECK-NEXT: "layer_norm"(
// F32ONLY-LABEL: func.func @bf16
// F32ONLY-NOT: add_layer_norm
func.func @bf16(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %w: !rt.buffer, %bias: !rt.buffer) {
  %s = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %s) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 1, 8, 32, 32, 1, 32, 1>}
  %y = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "layer_norm"(%s, %w, %bias, %y) {dtype = bf16, floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 1, 1>}
  %t = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %t) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 1, 8, 32, 32, 1, 32, 1>}
  %z = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "layer_norm"(%t, %w, %bias, %z) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 1, 0>}
  return
}

// -----

// The add that ends an FSDP group and the norm that begins the next: the
// add's stream records events between (the group is done) and casts the
// next group's shard for its all-gather; the norm waits for its weights,
// gathered on stream 1 before the add. The fused kernel takes the add's
// place, the norm's wait and weight views hoisted before it; the records
// and the cast follow it.
// CHECK-LABEL: func.func @across_groups
// CHECK: rt.event_record %{{.*}} {event = 0 : i64, stream = 1 : i64}
// CHECK-NEXT: %[[S:.*]] = rt.alloc 1024
// CHECK-NEXT: rt.event_wait %{{.*}} {event = 0 : i64, stream = 0 : i64}
// CHECK-NEXT: %[[W:.*]] = rt.view %{{.*}}[4096]
// CHECK-NEXT: %[[Y:.*]] = rt.alloc 1024
// CHECK-NEXT: rt.kernel %{{.*}}, "add_rms_norm"(%{{.*}}, %{{.*}}, %[[W]], %[[S]], %[[Y]])
// CHECK-NEXT: rt.event_record %{{.*}} {event = 1 : i64, stream = 0 : i64}
// CHECK-NEXT: rt.event_wait %{{.*}} {event = 1 : i64, stream = 1 : i64}
// CHECK: rt.kernel %{{.*}}, "cast"
// CHECK-NOT: rms_norm
// CHECK: return
func.func @across_groups(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %p: !rt.buffer, %shard: !rt.buffer) {
  rt.event_record %ctx {event = 0 : i64, stream = 1 : i64}
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %s) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  rt.event_record %ctx {event = 1 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 1 : i64, stream = 1 : i64}
  %c = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "cast"(%shard, %c) {floats = array<f64>, ints = array<i64: 16, 0, 1>}
  %w = rt.view %p[4096] : !rt.buffer
  rt.event_wait %ctx {event = 0 : i64, stream = 0 : i64}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%s, %w, %y) {floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 0>}
  return
}

// -----

// Not fused: the norm waits on an event recorded after the add (stream 1
// gathers its weights only once the add's group is done), so it cannot
// move up to the add; a kernel between on the add's stream writes the
// buffer the norm's weights view.
// CHECK-LABEL: func.func @waits_after
// CHECK-NOT: add_rms_norm
// CHECK-LABEL: func.func @touches
// CHECK-NOT: add_rms_norm
// CHECK: return
func.func @waits_after(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %w: !rt.buffer) {
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %s) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  rt.event_record %ctx {event = 1 : i64, stream = 0 : i64}
  rt.event_wait %ctx {event = 1 : i64, stream = 1 : i64}
  rt.event_record %ctx {event = 2 : i64, stream = 1 : i64}
  rt.event_wait %ctx {event = 2 : i64, stream = 0 : i64}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%s, %w, %y) {floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 0>}
  return
}
func.func @touches(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %p: !rt.buffer, %shard: !rt.buffer) {
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%a, %b, %s) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  rt.event_record %ctx {event = 1 : i64, stream = 0 : i64}
  %c = rt.view %p[4096] : !rt.buffer
  rt.kernel %ctx, "cast"(%shard, %c) {floats = array<f64>, ints = array<i64: 32, 0, 1>}
  %w = rt.view %p[4096] : !rt.buffer
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%s, %w, %y) {floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 0>}
  return
}
