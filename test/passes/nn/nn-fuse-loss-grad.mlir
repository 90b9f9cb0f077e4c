// RUN: shardc-opt %s --split-input-file --nn-fuse-loss-grad | FileCheck %s

// CHECK-LABEL: func.func @fused
// CHECK: %[[L:.*]], %[[G:.*]] = nn.cross_entropy_with_grad %arg0, %arg1 : (tensor<4x8xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<4x8xf32>)
// CHECK-NOT: nn.cross_entropy
// CHECK: return %[[L]], %[[G]]
func.func @fused(%x: tensor<4x8xf32>, %t: tensor<4xi32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %l = nn.cross_entropy %x, %t : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %one = nn.fill {value = 1.0 : f64} : tensor<f32>
  %g = nn.cross_entropy_grad %x, %t, %one : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  return %l, %g : tensor<f32>, tensor<4x8xf32>
}

// -----

// A loss gradient other than 1, or another ignore index: left alone.
// CHECK-LABEL: func.func @not_fused
// CHECK: nn.cross_entropy %
// CHECK: nn.cross_entropy_grad
// CHECK: nn.cross_entropy_grad
func.func @not_fused(%x: tensor<4x8xf32>, %t: tensor<4xi32>) -> (tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %l = nn.cross_entropy %x, %t : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %two = nn.fill {value = 2.0 : f64} : tensor<f32>
  %g = nn.cross_entropy_grad %x, %t, %two : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  %one = nn.fill {value = 1.0 : f64} : tensor<f32>
  %h = nn.cross_entropy_grad %x, %t, %one {ignore_index = 0 : i64} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  return %l, %g, %h : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>
}
