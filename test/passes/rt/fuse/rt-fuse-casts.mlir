// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-casts))' | FileCheck %s

// The bf16 weight gradients of a linear and a layer norm, each cast to f32
// for its reduce-scatter: the matmul (y_f32, its last integer), the bias's
// sum_to (y_f32, after out_n) and layer_norm_grad (wb_f32) write the f32
// buffers themselves; the casts and the bf16 buffers are gone. The cast's
// output, allocated after the producer, moves before it.
// CHECK-LABEL: func.func @grads
// CHECK: %[[DW:.*]] = rt.alloc 256
// CHECK-NEXT: rt.kernel %{{.*}}, "matmul"(%{{.*}}, %{{.*}}, %[[DW]]) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 16, 8, 1, 0, 1, 1>}
// CHECK: rt.kernel %{{.*}}, "sum_to"(%{{.*}}, %[[DB:.*]]) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 8, 1, 1, 16, 8, 0, 1>}
// CHECK: rt.kernel %{{.*}}, "layer_norm_grad"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LW:.*]], %[[LB:.*]]) {dtype = bf16, floats = array<f64: 1.000000e-05>, ints = array<i64: 16, 8, 1, 1, 0>}
// CHECK-NOT: "cast"
// CHECK: return %[[DW]], %[[DB]], %[[LW]], %[[LB]]
func.func @grads(%ctx: !rt.context, %x: !rt.buffer, %dy: !rt.buffer, %w: !rt.buffer) -> (!rt.buffer, !rt.buffer, !rt.buffer, !rt.buffer) {
  %dw16 = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "matmul"(%dy, %x, %dw16) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 16, 8, 1, 0, 1, 0>}
  %dw = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "cast"(%dw16, %dw) {floats = array<f64>, ints = array<i64: 64, 1, 0>}
  %db16 = rt.alloc 16 : !rt.buffer
  rt.kernel %ctx, "sum_to"(%dy, %db16) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 8, 1, 0, 16, 8, 0, 1>}
  %db = rt.alloc 32 : !rt.buffer
  rt.kernel %ctx, "cast"(%db16, %db) {floats = array<f64>, ints = array<i64: 8, 1, 0>}
  %dx = rt.alloc 256 : !rt.buffer
  %lw16 = rt.alloc 16 : !rt.buffer
  %lb16 = rt.alloc 16 : !rt.buffer
  rt.kernel %ctx, "layer_norm_grad"(%x, %w, %dy, %dx, %lw16, %lb16) {dtype = bf16, floats = array<f64: 1.0e-05>, ints = array<i64: 16, 8, 1, 0, 0>}
  %lw = rt.alloc 32 : !rt.buffer
  rt.kernel %ctx, "cast"(%lw16, %lw) {floats = array<f64>, ints = array<i64: 8, 1, 0>}
  %lb = rt.alloc 32 : !rt.buffer
  rt.kernel %ctx, "cast"(%lb16, %lb) {floats = array<f64>, ints = array<i64: 8, 1, 0>}
  return %dw, %db, %lw, %lb : !rt.buffer, !rt.buffer, !rt.buffer, !rt.buffer
}

// -----

// Kept: a bf16 output that something else reads too; an f32 -> bf16 cast;
// an f32 matmul; a layer norm whose db is not cast (dw stays too).
// CHECK-LABEL: func.func @kept
// CHECK: "matmul"({{.*}}) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 16, 8, 1, 0, 1, 0>}
// CHECK-NEXT: rt.alloc
// CHECK-NEXT: "cast"
// CHECK: "matmul"({{.*}}) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 16, 8, 1, 0, 1, 0>}
// CHECK-NEXT: rt.alloc
// CHECK-NEXT: "cast"
// CHECK: "matmul"({{.*}}) {floats = array<f64>, ints = array<i64: 8, 16, 8, 1, 0, 0, 0>}
// CHECK-NEXT: rt.alloc
// CHECK-NEXT: "cast"
// CHECK: "layer_norm_grad"({{.*}}) {dtype = bf16, floats = array<f64: 1.000000e-05>, ints = array<i64: 16, 8, 1, 0, 0>}
// CHECK-NEXT: rt.alloc
// CHECK-NEXT: "cast"
func.func @kept(%ctx: !rt.context, %x: !rt.buffer, %dy: !rt.buffer, %w: !rt.buffer, %o: !rt.buffer) {
  %a = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "matmul"(%dy, %x, %a) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 16, 8, 1, 0, 1, 0>}
  %a32 = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "cast"(%a, %a32) {floats = array<f64>, ints = array<i64: 64, 1, 0>}
  rt.kernel %ctx, "silu"(%a, %o) {dtype = bf16, floats = array<f64>, ints = array<i64: 64, 1>}
  %b = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "matmul"(%dy, %x, %b) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 16, 8, 1, 0, 1, 0>}
  %b16 = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "cast"(%b, %b16) {floats = array<f64>, ints = array<i64: 64, 1, 1>}
  %c = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "matmul"(%dy, %x, %c) {floats = array<f64>, ints = array<i64: 8, 16, 8, 1, 0, 0, 0>}
  %c32 = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "cast"(%c, %c32) {floats = array<f64>, ints = array<i64: 64, 0, 0>}
  %dx = rt.alloc 256 : !rt.buffer
  %lw16 = rt.alloc 16 : !rt.buffer
  %lb16 = rt.alloc 16 : !rt.buffer
  rt.kernel %ctx, "layer_norm_grad"(%x, %w, %dy, %dx, %lw16, %lb16) {dtype = bf16, floats = array<f64: 1.0e-05>, ints = array<i64: 16, 8, 1, 0, 0>}
  %lw = rt.alloc 32 : !rt.buffer
  rt.kernel %ctx, "cast"(%lw16, %lw) {floats = array<f64>, ints = array<i64: 8, 1, 0>}
  return
}
