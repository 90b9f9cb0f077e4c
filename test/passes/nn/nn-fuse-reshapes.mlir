// RUN: shardc-opt %s --split-input-file --nn-fuse-patterns | FileCheck %s

// GPT-2's Conv1D as exporters write it: the tokens merged to [B*T, C]
// around a layer norm, a projection with its bias and an activation, then
// split again. The row-wise ops move before the merge and the reshape
// chains fold: every op runs on [B, T, .], no reshape is left.
// CHECK-LABEL: func.func @conv1d
// CHECK-NEXT: %[[N:.*]] = nn.layer_norm %arg0, %arg1, %arg2 {{.*}} -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[L:.*]] = nn.linear %[[N]], %arg3 {weight_in_out} : (tensor<2x4x8xf32>, tensor<8x12xf32>) -> tensor<2x4x12xf32>
// CHECK-NEXT: %[[B:.*]] = nn.add %[[L]], %arg4 : (tensor<2x4x12xf32>, tensor<12xf32>) -> tensor<2x4x12xf32>
// CHECK-NEXT: %[[T:.*]] = nn.tanh %[[B]] : tensor<2x4x12xf32>
// CHECK-NEXT: return %[[T]]
func.func @conv1d(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>,
                  %w: tensor<8x12xf32>, %bias: tensor<12xf32>) -> tensor<2x4x12xf32> {
  %m = nn.reshape %x : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %n = nn.layer_norm %m, %g, %b {eps = 1.0e-05 : f64} : (tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  %n3 = nn.reshape %n : (tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %n2 = nn.reshape %n3 : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %l = nn.linear %n2, %w {weight_in_out} : (tensor<8x8xf32>, tensor<8x12xf32>) -> tensor<8x12xf32>
  %lb = nn.add %l, %bias : (tensor<8x12xf32>, tensor<12xf32>) -> tensor<8x12xf32>
  %t = nn.tanh %lb : tensor<8x12xf32>
  %y = nn.reshape %t : (tensor<8x12xf32>) -> tensor<2x4x12xf32>
  return %y : tensor<2x4x12xf32>
}

// -----

// Attention's heads merged with the tokens ([B, T, H, D] -> [B*T, H*D])
// before the output projection: the projection reads [B, T, H*D].
// CHECK-LABEL: func.func @heads_merged
// CHECK-NEXT: %[[R:.*]] = nn.reshape %arg0 : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[L:.*]] = nn.linear %[[R]], %arg1 {weight_in_out} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[L]]
func.func @heads_merged(%a: tensor<2x4x2x4xf32>, %w: tensor<8x8xf32>) -> tensor<2x4x8xf32> {
  %m = nn.reshape %a : (tensor<2x4x2x4xf32>) -> tensor<8x8xf32>
  %l = nn.linear %m, %w {weight_in_out} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %y = nn.reshape %l : (tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Not row-wise: a softmax over the merged dim 0 (axis 0 of [B*T, C]) and an
// add of a [B*T, C] tensor that is not a merge stay where they are.
// CHECK-LABEL: func.func @not_rows
// CHECK: %[[M:.*]] = nn.reshape %arg0 : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: nn.softmax %[[M]] {axis = 0 : i64} : tensor<8x8xf32>
// CHECK-NEXT: nn.add %[[M]], %arg1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
func.func @not_rows(%x: tensor<2x4x8xf32>, %z: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %m = nn.reshape %x : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %s = nn.softmax %m {axis = 0 : i64} : tensor<8x8xf32>
  %a = nn.add %m, %z : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %s, %a : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A graph that returns its argument through a reshape to the same type (an
// ONNX Identity model) keeps the reshape: a function result is never an
// argument itself.
// CHECK-LABEL: func.func @identity
// CHECK-NEXT: %[[R:.*]] = nn.reshape %arg0 : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @identity(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %r = nn.reshape %x : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}
