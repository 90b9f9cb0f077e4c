// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-norm-grad-add{target=cuda}))' | FileCheck %s
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-norm-grad-add{target=cpu}))' | FileCheck %s

// Both targets have the fused kernels (runtime/cpu, runtime/cuda): the
// same rewrite on each.

// The layer norm's gradient dx added to the residual gradient r (either
// operand order), on f32 and on bf16: the norm gradient writes the add's
// output s itself, reading r as its last buffer (add_dr = 1), and dx's
// allocation goes. The output allocated after the norm moves up before it.
// CHECK-LABEL: func.func @fused
// CHECK-SAME: %[[RB:[a-z0-9]+]]: !rt.buffer) {
// CHECK: %[[S:.*]] = rt.alloc 1024
// CHECK-NEXT: rt.kernel %{{.*}}, "layer_norm_grad"(%[[X:.*]], %[[W:.*]], %[[DY:.*]], %[[S]], %[[DW:.*]], %[[DB:.*]], %[[R:.*]]) {floats = array<f64: 1.000000e-05>, ints = array<i64: 8, 32, 0, 0, 1>}
// CHECK-NOT: "add"
// CHECK: %[[T:.*]] = rt.alloc 512
// CHECK-NEXT: rt.kernel %{{.*}}, "rms_norm_grad"(%{{.*}}, %{{.*}}, %{{.*}}, %[[T]], %{{.*}}, %[[RB]]) {dtype = bf16, floats = array<f64: 9.9999999999999995E-7>, ints = array<i64: 8, 32, 1, 1>}
// CHECK-NOT: "add"
// CHECK: return
func.func @fused(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer, %dy: !rt.buffer, %dw: !rt.buffer, %db: !rt.buffer, %r: !rt.buffer, %xb: !rt.buffer, %wb: !rt.buffer, %dyb: !rt.buffer, %dwb: !rt.buffer, %rb: !rt.buffer) {
  %dx = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "layer_norm_grad"(%x, %w, %dy, %dx, %dw, %db) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 0, 0, 0>}
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%dx, %r, %s) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  %dx2 = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "rms_norm_grad"(%xb, %wb, %dyb, %dx2, %dwb) {dtype = bf16, floats = array<f64: 1.0e-06>, ints = array<i64: 8, 32, 1, 0>}
  %t = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "add"(%rb, %dx2, %t) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 1, 8, 32, 32, 1, 32, 1>}
  return
}

// -----

// Kept apart: dx read by another kernel too; a broadcast add; an add on
// another dtype; r written between the norm and the add; a wait on the
// compute stream between where r is written on another stream (the wait
// may be what r waits for); dx added to itself.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-6: "add"(
// CHECK-NOT: ints = array<i64: 8, 32, 0, 0, 1>
// CHECK: return
func.func @kept(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer, %dy: !rt.buffer, %dw: !rt.buffer, %db: !rt.buffer, %r: !rt.buffer) {
  %dx = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "layer_norm_grad"(%x, %w, %dy, %dx, %dw, %db) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 0, 0, 0>}
  %u = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "silu"(%dx, %u) {floats = array<f64>, ints = array<i64: 256, 0>}
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%dx, %r, %s) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}

  %dx2 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "layer_norm_grad"(%x, %w, %dy, %dx2, %dw, %db) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 0, 0, 0>}
  %s2 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%dx2, %w, %s2) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 0, 1>}

  %dx3 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "layer_norm_grad"(%x, %w, %dy, %dx3, %dw, %db) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 0, 0, 0>}
  %s3 = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "add"(%dx3, %r, %s3) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 1, 8, 32, 32, 1, 32, 1>}

  %dx4 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "layer_norm_grad"(%x, %w, %dy, %dx4, %dw, %db) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 0, 0, 0>}
  rt.kernel %ctx, "fill"(%r) {floats = array<f64: 0.0>, ints = array<i64: 256, 0>}
  %s4 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%dx4, %r, %s4) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}

  %r5 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "fill"(%r5) {floats = array<f64: 0.0>, ints = array<i64: 256, 0>, stream = 1 : i64}
  rt.event_record %ctx {event = 3 : i64, stream = 1 : i64}
  %dx5 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "layer_norm_grad"(%x, %w, %dy, %dx5, %dw, %db) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 0, 0, 0>}
  rt.event_wait %ctx {event = 3 : i64, stream = 0 : i64}
  %s5 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%dx5, %r5, %s5) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}

  %dx6 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "layer_norm_grad"(%x, %w, %dy, %dx6, %dw, %db) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 0, 0, 0>}
  %s6 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%dx6, %dx6, %s6) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  return
}

// -----

// CHECK-LABEL: func.func @view_output
// The add's output is a view of a buffer defined before the norm: the view
// moves up with it.
// CHECK: %[[V:.*]] = rt.view %{{.*}}[256] size 1024
// CHECK-NEXT: rt.kernel %{{.*}}, "layer_norm_grad"(%{{.*}}, %{{.*}}, %{{.*}}, %[[V]], %{{.*}}, %{{.*}}, %{{.*}}) {floats = array<f64: 1.000000e-05>, ints = array<i64: 8, 32, 0, 0, 1>}
func.func @view_output(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer, %dy: !rt.buffer, %dw: !rt.buffer, %db: !rt.buffer, %r: !rt.buffer, %big: !rt.buffer) {
  %dx = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "layer_norm_grad"(%x, %w, %dy, %dx, %dw, %db) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 0, 0, 0>}
  %v = rt.view %big[256] size 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%r, %dx, %v) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  return
}

// -----

// FSDP's backward: between the input norm's gradient and the residual
// add, the layer's gradient bucket waits on the compute stream for the
// previous reduce-scatter (stream 1) before it is filled. r and s are only
// ever touched on the compute stream, so that wait orders neither: fused.
// CHECK-LABEL: func.func @bucket_wait
// CHECK: rt.kernel %{{.*}}, "rms_norm_grad"(%arg1, %arg2, %arg3, %[[S:.*]], %arg4, %[[R:.*]]) {{.*}}ints = array<i64: 8, 32, 0, 1>}
// CHECK: rt.event_wait %{{.*}} {event = 7 : i64, stream = 0 : i64}
// CHECK-NOT: "add"
func.func @bucket_wait(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer, %dy: !rt.buffer, %dw: !rt.buffer, %bucket: !rt.buffer, %out: !rt.buffer) {
  %r = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "fill"(%r) {floats = array<f64: 1.0>, ints = array<i64: 256, 0>}
  %scratch = rt.alloc 1024 : !rt.buffer
  rt.reduce_scatter %ctx %bucket -> %out scratch %scratch {axis = 0 : i64, count = 256 : i64, dtype = f32, group = 0 : i64, stream = 1 : i64}
  rt.event_record %ctx {event = 7 : i64, stream = 1 : i64}
  %dx = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rms_norm_grad"(%x, %w, %dy, %dx, %dw) {floats = array<f64: 1.0e-05>, ints = array<i64: 8, 32, 0, 0>}
  rt.event_wait %ctx {event = 7 : i64, stream = 0 : i64}
  rt.kernel %ctx, "fill"(%bucket) {floats = array<f64: 0.0>, ints = array<i64: 256, 0>}
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "add"(%dx, %r, %s) {floats = array<f64>, ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>}
  return
}
