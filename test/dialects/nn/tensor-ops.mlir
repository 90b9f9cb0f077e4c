// RUN: shardc-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// The generic tensor ops of imported models round-trip.
// CHECK-LABEL: func.func @ops
// CHECK: nn.constant dense<2.000000e+00> : tensor<f32> -> tensor<f32>
// CHECK: nn.sub
// CHECK: nn.div
// CHECK: nn.pow
// CHECK: nn.erf
// CHECK: nn.relu
// CHECK: nn.softplus
// CHECK: nn.nan_to_zero
// CHECK: nn.leaky_relu {{.*}} {alpha = 1.000000e-01 : f64}
// CHECK: nn.leaky_relu_grad {{.*}} {alpha = 1.000000e-01 : f64}
// CHECK: nn.round_f16
// CHECK: nn.round_bf16
// CHECK: nn.unary_grad {{.*}} {fn = "relu"}
// CHECK: nn.unary_grad {{.*}} {fn = "tanh"}
// CHECK: nn.where
// CHECK: nn.equal
// CHECK: nn.broadcast_to
// CHECK: nn.batch_matmul {{.*}} {transpose_b}
// CHECK: nn.concat {{.*}} {dim = 1 : i64}
// CHECK: nn.trilu {{.*}} {k = 1 : i64, upper}
func.func @ops(%x: tensor<2x8xf32>, %c: tensor<2x8xi1>, %q: tensor<3x4x5xf32>) -> tensor<2x16xf32> {
  %two = nn.constant dense<2.0> : tensor<f32> -> tensor<f32>
  %a = nn.sub %x, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %b = nn.div %a, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %p = nn.pow %b, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e0 = nn.erf %p : tensor<2x8xf32>
  %r0 = nn.relu %e0 : tensor<2x8xf32>
  %e1 = nn.softplus %r0 : tensor<2x8xf32>
  %e2 = nn.nan_to_zero %e1 : tensor<2x8xf32>
  %e3 = nn.leaky_relu %e2 {alpha = 0.1 : f64} : tensor<2x8xf32>
  %e4 = nn.leaky_relu_grad %e3, %e2 {alpha = 0.1 : f64} : tensor<2x8xf32>
  %e5 = nn.round_f16 %e4 : tensor<2x8xf32>
  %e = nn.round_bf16 %e5 : tensor<2x8xf32>
  %g0 = nn.unary_grad %x, %e, %p {fn = "relu"} : tensor<2x8xf32>
  %g = nn.unary_grad %g0, %e, %p {fn = "tanh"} : tensor<2x8xf32>
  %w = nn.where %c, %g, %two : (tensor<2x8xi1>, tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %eq = nn.equal %w, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xi1>
  %r = nn.broadcast_to %two : (tensor<f32>) -> tensor<2x8xf32>
  %s = nn.batch_matmul %q, %q {transpose_b} : (tensor<3x4x5xf32>, tensor<3x4x5xf32>) -> tensor<3x4x4xf32>
  %cat = nn.concat %w, %r {dim = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x16xf32>
  %t = nn.trilu %cat {upper, k = 1 : i64} : tensor<2x16xf32>
  return %t : tensor<2x16xf32>
}

// -----

func.func @bad_matmul(%a: tensor<3x4x5xf32>) {
  // expected-error @+1 {{contraction sizes differ: 5 (lhs) and 4 (rhs)}}
  %s = nn.batch_matmul %a, %a : (tensor<3x4x5xf32>, tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
  return
}

// -----

func.func @bad_concat(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{input #1 has size 3 on dim 0, input #0 2}}
  %c = nn.concat %a, %b {dim = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @bad_fn(%a: tensor<2xf32>) {
  // expected-error @+1 {{unknown function 'cosh'}}
  %c = nn.unary_grad %a, %a, %a {fn = "cosh"} : tensor<2xf32>
  return
}

// -----

func.func @bad_broadcast_to(%a: tensor<3x2xf32>) {
  // expected-error @+1 {{input 'tensor<3x2xf32>' does not broadcast to the result 'tensor<3x4xf32>'}}
  %c = nn.broadcast_to %a : (tensor<3x2xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @bad_sum_to(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result 'tensor<2x2x3xf32>' does not broadcast to the input 'tensor<2x3xf32>'}}
  %c = nn.sum_to %a : (tensor<2x3xf32>) -> tensor<2x2x3xf32>
  return
}
