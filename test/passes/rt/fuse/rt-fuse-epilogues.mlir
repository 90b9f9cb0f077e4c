// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-epilogues{target=cuda}))' | FileCheck %s
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fuse-epilogues{target=cpu}))' | FileCheck %s

// Both targets have the fused kernels (runtime/cpu, runtime/cuda): the
// same rewrite on each.

// Forward: the GELU of a linear's output becomes its epilogue; the linear's
// output stays as the aux (pre-activation) buffer, and y is allocated
// above the fused kernel.
// CHECK-LABEL: func.func @forward
// CHECK: %[[PRE:.*]] = rt.alloc 3072
// CHECK-NEXT: %[[Y:.*]] = rt.alloc 3072
// CHECK-NEXT: rt.kernel %{{.*}}, "linear_gelu"(%{{.*}}, %{{.*}}, %{{.*}}, %[[PRE]], %[[Y]]) {floats = array<f64>, ints = array<i64: 16, 8, 48, 0, 1, 0>}
// CHECK-NOT: "gelu"
// CHECK: rt.kernel %{{.*}}, "gelu_grad"(%[[PRE]]
func.func @forward(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer, %b: !rt.buffer, %d: !rt.buffer) {
  %pre = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "linear"(%x, %w, %b, %pre) {floats = array<f64>, ints = array<i64: 16, 8, 48, 0, 1, 0>}
  %y = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "gelu"(%pre, %y) {floats = array<f64>, ints = array<i64: 768, 1, 0>}
  %g = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "gelu_grad"(%pre, %y, %g) {floats = array<f64>, ints = array<i64: 768, 1, 0>}
  return
}

// -----

// Backward: the gradient through a linear, then the GELU's gradient, then
// the bias gradient (sum_to over the rows) become one GEMM; the matmul in
// between reads dy only. t, no longer written, is gone.
// CHECK-LABEL: func.func @backward
// CHECK: %[[DPRE:.*]] = rt.alloc 3072
// CHECK-NEXT: %[[DB:.*]] = rt.alloc 192
// CHECK-NEXT: rt.kernel %{{.*}}, "linear_dgelu"(%[[DY:.*]], %[[W:.*]], %[[PRE:.*]], %[[DPRE]], %[[DB]]) {floats = array<f64>, ints = array<i64: 16, 8, 48, 1, 1, 0>}
// CHECK-NEXT: %[[DW:.*]] = rt.alloc
// CHECK-NEXT: rt.kernel %{{.*}}, "matmul"(%{{.*}}, %[[DY]], %[[DW]])
// CHECK-NOT: rt.kernel
// CHECK: return
func.func @backward(%ctx: !rt.context, %dy: !rt.buffer, %w: !rt.buffer, %pre: !rt.buffer, %h: !rt.buffer) {
  %t = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "linear"(%dy, %w, %t) {floats = array<f64>, ints = array<i64: 16, 8, 48, 1, 0, 0>}
  %dw = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "matmul"(%h, %dy, %dw) {floats = array<f64>, ints = array<i64: 8, 16, 8, 1, 0, 0, 0>}
  %dpre = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "gelu_grad"(%pre, %t, %dpre) {floats = array<f64>, ints = array<i64: 768, 1, 0>}
  %db = rt.alloc 192 : !rt.buffer
  rt.kernel %ctx, "sum_to"(%dpre, %db) {floats = array<f64>, ints = array<i64: 3, 48, 0, 0, 4, 4, 48, 0, 0, 1>}
  return
}

// -----

// Not fused: the erf GELU (cuBLASLt's is the tanh form); a linear output
// another kernel also reads.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: linear_gelu
// CHECK-NOT: linear_dgelu
// CHECK: return
func.func @kept(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer, %pre: !rt.buffer) {
  %a = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "linear"(%x, %w, %a) {floats = array<f64>, ints = array<i64: 16, 8, 48, 0, 0, 0>}
  %b = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "gelu"(%a, %b) {floats = array<f64>, ints = array<i64: 768, 0, 0>}
  %t = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "linear"(%x, %w, %t) {floats = array<f64>, ints = array<i64: 16, 8, 48, 0, 0, 0>}
  %d = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "gelu_grad"(%pre, %t, %d) {floats = array<f64>, ints = array<i64: 768, 1, 0>}
  %e = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "silu"(%t, %e) {floats = array<f64>, ints = array<i64: 768, 0>}
  return
}

// -----

// An event between the two: the fused kernel writes y earlier, at the
// linear's place, so the event still follows every write it followed.
// A bias gradient over part of the rows only stays a sum_to.
// CHECK-LABEL: func.func @across_event
// CHECK: rt.kernel %{{.*}}, "linear_gelu"
// CHECK-NEXT: rt.event_record
// CHECK: rt.kernel %{{.*}}, "linear_dgelu"(%{{.*}}, %{{.*}}, %{{.*}}, %[[D:.*]]) {floats = array<f64>, ints = array<i64: 16, 8, 48, 0, 0, 0>}
// CHECK: rt.kernel %{{.*}}, "sum_to"(%[[D]]
func.func @across_event(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer, %pre: !rt.buffer) {
  %c = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "linear"(%x, %w, %c) {floats = array<f64>, ints = array<i64: 16, 8, 48, 0, 0, 0>}
  rt.event_record %ctx {event = 0 : i64, stream = 0 : i64}
  %y = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "gelu"(%c, %y) {floats = array<f64>, ints = array<i64: 768, 1, 0>}
  %t = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "linear"(%x, %w, %t) {floats = array<f64>, ints = array<i64: 16, 8, 48, 0, 0, 0>}
  %d = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "gelu_grad"(%pre, %t, %d) {floats = array<f64>, ints = array<i64: 768, 1, 0>}
  %db = rt.alloc 768 : !rt.buffer
  rt.kernel %ctx, "sum_to"(%d, %db) {floats = array<f64>, ints = array<i64: 3, 192, 0, 0, 4, 4, 48, 0, 48, 1>}
  return
}

// -----

// On bf16 (the kernels' dtype attribute and integer, code 1): the same
// rewrite, the fused kernels on bf16 (they round pre and y, dpre and db,
// once from the GEMM's f32 result). A linear and GELU of different dtypes
// are not fused.
// CHECK-LABEL: func.func @bf16
// CHECK: rt.kernel %{{.*}}, "linear_gelu"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {dtype = bf16, floats = array<f64>, ints = array<i64: 16, 8, 48, 0, 1, 1>}
// CHECK: rt.kernel %{{.*}}, "linear_dgelu"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {dtype = bf16, floats = array<f64>, ints = array<i64: 16, 8, 48, 1, 1, 1>}
// CHECK: rt.kernel %{{.*}}, "linear"(%{{.*}}, %{{.*}}, %[[M:.*]]) {floats
// CHECK-NEXT: rt.alloc
// CHECK-NEXT: rt.kernel %{{.*}}, "gelu"(%[[M]]
func.func @bf16(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer, %b: !rt.buffer, %dy: !rt.buffer) {
  %pre = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "linear"(%x, %w, %b, %pre) {dtype = bf16, floats = array<f64>, ints = array<i64: 16, 8, 48, 0, 1, 1>}
  %y = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "gelu"(%pre, %y) {dtype = bf16, floats = array<f64>, ints = array<i64: 768, 1, 1>}
  %t = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "linear"(%dy, %w, %t) {dtype = bf16, floats = array<f64>, ints = array<i64: 16, 8, 48, 1, 0, 1>}
  %dpre = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "gelu_grad"(%pre, %t, %dpre) {dtype = bf16, floats = array<f64>, ints = array<i64: 768, 1, 1>}
  %db = rt.alloc 96 : !rt.buffer
  rt.kernel %ctx, "sum_to"(%dpre, %db) {dtype = bf16, floats = array<f64>, ints = array<i64: 3, 48, 1, 0, 4, 4, 48, 0, 0, 1>}
  %m = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "linear"(%x, %w, %m) {floats = array<f64>, ints = array<i64: 16, 8, 48, 0, 0, 0>}
  %n = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "gelu"(%m, %n) {dtype = bf16, floats = array<f64>, ints = array<i64: 768, 1, 1>}
  return
}
