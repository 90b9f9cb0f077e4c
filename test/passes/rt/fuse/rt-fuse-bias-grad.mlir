// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-bias-grad{target=cuda}))' | FileCheck %s
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-bias-grad{target=cpu}))' | FileCheck %s

// Both targets have the fused kernel (runtime/cpu, runtime/cuda): the same
// rewrite on each.

// w stored [in, out] (GPT-2's Conv1D): dw = x^T dy, and the bias gradient
// sums dy's [4, 16] rows: side 1 (b). db's view is hoisted above the GEMM.
// CHECK-LABEL: func.func @in_out
// CHECK: %[[DB:.*]] = rt.view %{{.*}}[4096] size 64
// CHECK-NEXT: rt.kernel %{{.*}}, "matmul_bgrad"(%[[X:.*]], %[[DY:.*]], %[[DW:.*]], %[[DB]]) {floats = array<f64>, ints = array<i64: 32, 64, 16, 1, 0, 0, 0, 1>}
// CHECK-NOT: sum_to
// CHECK: return
func.func @in_out(%ctx: !rt.context, %x: !rt.buffer, %dy: !rt.buffer, %bucket: !rt.buffer) {
  %dw = rt.view %bucket[0] size 2048 : !rt.buffer
  rt.kernel %ctx, "matmul"(%x, %dy, %dw) {floats = array<f64>, ints = array<i64: 32, 64, 16, 1, 0, 0, 0>}
  %db = rt.view %bucket[4096] size 64 : !rt.buffer
  rt.kernel %ctx, "sum_to"(%dy, %db) {floats = array<f64>, ints = array<i64: 3, 16, 0, 0, 4, 16, 16, 0, 0, 1>}
  return
}

// -----

// w stored [out, in] (torch's Linear): dw = dy^T x, the summed operand is
// a: side 0. On bf16 with both outputs in f32 (y_f32, after rt-fuse-casts),
// across an event record (db is written earlier, before the record, as dw
// is), on stream 1.
// CHECK-LABEL: func.func @out_in_bf16
// CHECK: %[[DB:.*]] = rt.alloc 64
// CHECK-NEXT: rt.kernel %{{.*}}, "matmul_bgrad"(%[[DY:.*]], %[[X:.*]], %[[DW:.*]], %[[DB]]) {dtype = bf16, floats = array<f64>, ints = array<i64: 16, 64, 32, 1, 0, 1, 1, 0>, stream = 1 : i64}
// CHECK-NEXT: rt.event_record
// CHECK-NOT: sum_to
// CHECK: return
func.func @out_in_bf16(%ctx: !rt.context, %x: !rt.buffer, %dy: !rt.buffer) {
  %dw = rt.alloc 2048 : !rt.buffer
  rt.kernel %ctx, "matmul"(%dy, %x, %dw) {dtype = bf16, floats = array<f64>, ints = array<i64: 16, 64, 32, 1, 0, 1, 1>, stream = 1 : i64}
  rt.event_record %ctx {event = 3 : i64, stream = 1 : i64}
  %db = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "sum_to"(%dy, %db) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 16, 1, 1, 64, 16, 0, 1>, stream = 1 : i64}
  return
}

// -----

// Not fused: a kernel between (it could read db's memory before the
// GEMM's earlier write), a bias gradient in another output type than the
// weight gradient's (y_f32 0 and 1), one over part of the rows, one on
// another stream, and one of an operand the GEMM reads transposed.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: matmul_bgrad
// CHECK: return
func.func @kept(%ctx: !rt.context, %x: !rt.buffer, %dy: !rt.buffer, %y: !rt.buffer) {
  %dw = rt.alloc 2048 : !rt.buffer
  rt.kernel %ctx, "matmul"(%x, %dy, %dw) {floats = array<f64>, ints = array<i64: 32, 64, 16, 1, 0, 0, 0>}
  rt.kernel %ctx, "fill"(%y) {floats = array<f64: 0.0>, ints = array<i64: 4, 0>}
  %db = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "sum_to"(%dy, %db) {floats = array<f64>, ints = array<i64: 2, 16, 0, 0, 64, 16, 0, 1>}
  %dw2 = rt.alloc 2048 : !rt.buffer
  rt.kernel %ctx, "matmul"(%x, %dy, %dw2) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 64, 16, 1, 0, 1, 1>}
  %db2 = rt.alloc 32 : !rt.buffer
  rt.kernel %ctx, "sum_to"(%dy, %db2) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 16, 1, 0, 64, 16, 0, 1>}
  %dw3 = rt.alloc 2048 : !rt.buffer
  rt.kernel %ctx, "matmul"(%x, %dy, %dw3) {floats = array<f64>, ints = array<i64: 32, 64, 16, 1, 0, 0, 0>}
  %db3 = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "sum_to"(%dy, %db3) {floats = array<f64>, ints = array<i64: 3, 16, 0, 0, 2, 16, 16, 0, 0, 1>}
  %dw4 = rt.alloc 2048 : !rt.buffer
  rt.kernel %ctx, "matmul"(%x, %dy, %dw4) {floats = array<f64>, ints = array<i64: 32, 64, 16, 1, 0, 0, 0>}
  %db4 = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "sum_to"(%dy, %db4) {floats = array<f64>, ints = array<i64: 2, 16, 0, 0, 64, 16, 0, 1>, stream = 1 : i64}
  %dw5 = rt.alloc 2048 : !rt.buffer
  rt.kernel %ctx, "matmul"(%x, %dy, %dw5) {floats = array<f64>, ints = array<i64: 32, 64, 16, 1, 1, 0, 0>}
  %db5 = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "sum_to"(%dy, %db5) {floats = array<f64>, ints = array<i64: 2, 16, 0, 0, 64, 16, 0, 1>}
  return
}
