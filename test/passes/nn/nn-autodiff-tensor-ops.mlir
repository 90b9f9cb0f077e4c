// RUN: shardc-opt %s --split-input-file --nn-autodiff | FileCheck %s

// The VJPs of the generic tensor ops of imported models. Gradients of
// broadcast operands are summed back to their shapes; values that do not
// depend on a parameter (constants, masks) get no gradient.

// y = (x - p) / p: dx = dy / p; dp = sum(-(dy y / p)) + sum(-(dy / p)).
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[Y:.*]] = nn.div %[[D:.*]], %arg1
// CHECK: %[[DY:.*]] = nn.cross_entropy_grad %[[Y]]
// CHECK: %[[DX:.*]] = nn.div %[[DY]], %arg1
// CHECK: %[[DYY:.*]] = nn.mul %[[DY]], %[[Y]]
// CHECK: %[[Q:.*]] = nn.div %[[DYY]], %arg1
// CHECK: %[[NQ:.*]] = nn.neg %[[Q]]
// CHECK: %[[S1:.*]] = nn.sum_to %[[NQ]] : (tensor<2x6xf32>) -> tensor<6xf32>
// CHECK: %[[NDX:.*]] = nn.neg %[[DX]]
// CHECK: %[[S2:.*]] = nn.sum_to %[[NDX]] : (tensor<2x6xf32>) -> tensor<6xf32>
// CHECK: %[[DP:.*]] = nn.add %[[S1]], %[[S2]]
// CHECK: nn.accumulate %arg3, %[[DX]]
// CHECK: nn.accumulate %arg4, %[[DP]]
func.func @forward(%x: tensor<2x6xf32> {nn.param = "x"}, %p: tensor<6xf32> {nn.param = "p"},
                   %t: tensor<2xi32> {nn.input = "targets"}) -> tensor<f32> {
  %d = nn.sub %x, %p : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  %y = nn.div %d, %p : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x6xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// z = erf(x^p): dy = erf'(y) dz (unary_grad); dx = dy p x^(p-1);
// dp = sum(dy y log x).
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[Y:.*]] = nn.pow %arg0, %arg1
// CHECK: %[[Z:.*]] = nn.erf %[[Y]]
// CHECK: %[[DZ:.*]] = nn.cross_entropy_grad %[[Z]]
// CHECK: %[[DY:.*]] = nn.unary_grad %[[Y]], %[[Z]], %[[DZ]] {fn = "erf"}
// CHECK: %[[ONE:.*]] = nn.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK: %[[PM1:.*]] = nn.sub %arg1, %[[ONE]]
// CHECK: %[[XP:.*]] = nn.pow %arg0, %[[PM1]]
// CHECK: %[[DYP:.*]] = nn.mul %[[DY]], %arg1
// CHECK: %[[DX:.*]] = nn.mul %[[DYP]], %[[XP]]
// CHECK: %[[LOG:.*]] = nn.log %arg0
// CHECK: %[[DYY:.*]] = nn.mul %[[DY]], %[[Y]]
// CHECK: %[[G:.*]] = nn.mul %[[DYY]], %[[LOG]]
// CHECK: %[[DP:.*]] = nn.sum_to %[[G]] : (tensor<2x6xf32>) -> tensor<6xf32>
// CHECK: nn.accumulate %arg3, %[[DX]]
// CHECK: nn.accumulate %arg4, %[[DP]]
func.func @forward(%x: tensor<2x6xf32> {nn.param = "x"}, %p: tensor<6xf32> {nn.param = "p"},
                   %t: tensor<2xi32> {nn.input = "targets"}) -> tensor<f32> {
  %y = nn.pow %x, %p : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  %e = nn.erf %y : tensor<2x6xf32>
  %l = nn.cross_entropy %e, %t : (tensor<2x6xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// where: the gradient goes to the selected operand, zero to the other; the
// condition has none.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[C:.*]] = nn.constant dense<[true, false, true, false, true, false]>
// CHECK: %[[DY:.*]] = nn.cross_entropy_grad
// CHECK: %[[ZERO:.*]] = nn.fill {value = 0.000000e+00 : f64} : tensor<f32>
// CHECK: %[[DX:.*]] = nn.where %[[C]], %[[DY]], %[[ZERO]]
// CHECK: %[[DPF:.*]] = nn.where %[[C]], %[[ZERO]], %[[DY]]
// CHECK: %[[DP:.*]] = nn.sum_to %[[DPF]] : (tensor<2x6xf32>) -> tensor<6xf32>
// CHECK: nn.accumulate %arg3, %[[DX]]
// CHECK: nn.accumulate %arg4, %[[DP]]
func.func @forward(%x: tensor<2x6xf32> {nn.param = "x"}, %p: tensor<6xf32> {nn.param = "p"},
                   %t: tensor<2xi32> {nn.input = "targets"}) -> tensor<f32> {
  %c = nn.constant dense<[true, false, true, false, true, false]> : tensor<6xi1> -> tensor<6xi1>
  %y = nn.where %c, %x, %p : (tensor<6xi1>, tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x6xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// C = A^T B^T with A stored [K, M] and B stored [N, K], B broadcast over
// the batch: dA = B^T dC^T; dB = sum over the batch of dC^T A^T.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[DC:.*]] = nn.cross_entropy_grad
// CHECK: %[[DA:.*]] = nn.batch_matmul %arg1, %[[DC]] {transpose_a, transpose_b} : (tensor<5x4xf32>, tensor<2x3x5xf32>) -> tensor<2x4x3xf32>
// CHECK: %[[DBF:.*]] = nn.batch_matmul %[[DC]], %arg0 {transpose_a, transpose_b} : (tensor<2x3x5xf32>, tensor<2x4x3xf32>) -> tensor<2x5x4xf32>
// CHECK: %[[DB:.*]] = nn.sum_to %[[DBF]] : (tensor<2x5x4xf32>) -> tensor<5x4xf32>
// CHECK: nn.accumulate %arg3, %[[DA]]
// CHECK: nn.accumulate %arg4, %[[DB]]
func.func @forward(%a: tensor<2x4x3xf32> {nn.param = "a"}, %b: tensor<5x4xf32> {nn.param = "b"},
                   %t: tensor<2x3xi32> {nn.input = "targets"}) -> tensor<f32> {
  %y = nn.batch_matmul %a, %b {transpose_a, transpose_b} : (tensor<2x4x3xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// trilu keeps the gradient where it kept the input; concat splits the
// gradient into slices. The mask (a constant's trilu) is not differentiated.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[M:.*]] = nn.trilu %{{.*}} {upper} : tensor<2x2xf32>
// CHECK: %[[DZ:.*]] = nn.cross_entropy_grad
// CHECK: %[[DY:.*]] = nn.trilu %[[DZ]] {k = 1 : i64} : tensor<2x5xf32>
// CHECK: %[[DA:.*]] = nn.slice %[[DY]] {dim = 1 : i64, start = 0 : i64} : (tensor<2x5xf32>) -> tensor<2x3xf32>
// CHECK: %[[DBM:.*]] = nn.slice %[[DY]] {dim = 1 : i64, start = 3 : i64} : (tensor<2x5xf32>) -> tensor<2x2xf32>
// CHECK: %[[DB:.*]] = nn.mul %[[DBM]], %[[M]]
// CHECK-NOT: nn.trilu
// CHECK: nn.accumulate %arg3, %[[DA]]
// CHECK: nn.accumulate %arg4, %[[DB]]
func.func @forward(%a: tensor<2x3xf32> {nn.param = "a"}, %b: tensor<2x2xf32> {nn.param = "b"},
                   %t: tensor<2xi32> {nn.input = "targets"}) -> tensor<f32> {
  %mask = nn.constant dense<1.0> : tensor<2x2xf32> -> tensor<2x2xf32>
  %m = nn.trilu %mask {upper} : tensor<2x2xf32>
  %bm = nn.mul %b, %m : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %y = nn.concat %a, %bm {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<2x5xf32>
  %z = nn.trilu %y {k = 1 : i64} : tensor<2x5xf32>
  %l = nn.cross_entropy %z, %t : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// broadcast_to and sum_to are each other's VJP.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[DY:.*]] = nn.cross_entropy_grad
// CHECK: %[[DS:.*]] = nn.sum_to %[[DY]] : (tensor<2x6xf32>) -> tensor<6xf32>
// CHECK: %[[DX:.*]] = nn.broadcast_to %[[DS]] : (tensor<6xf32>) -> tensor<2x6xf32>
// CHECK: %[[DP:.*]] = nn.sum_to %[[DY]] : (tensor<2x6xf32>) -> tensor<1x6xf32>
// CHECK: nn.accumulate %arg3, %[[DX]]
// CHECK: nn.accumulate %arg4, %[[DP]]
func.func @forward(%x: tensor<2x6xf32> {nn.param = "x"}, %p: tensor<1x6xf32> {nn.param = "p"},
                   %t: tensor<2xi32> {nn.input = "targets"}) -> tensor<f32> {
  %b = nn.broadcast_to %p : (tensor<1x6xf32>) -> tensor<2x6xf32>
  %s = nn.sum_to %x : (tensor<2x6xf32>) -> tensor<6xf32>
  %y = nn.add %b, %s : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x6xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
