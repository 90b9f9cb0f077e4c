// RUN: shardc-opt %s --split-input-file --nn-autodiff --verify-diagnostics

// expected-error @+1 {{the model function must return one scalar f32 loss}}
func.func @forward(%x: tensor<4xf32> {nn.param = "x"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{no model function named 'forward'}}
module {
}

// -----

func.func @forward(%x: tensor<4x8xf32> {nn.param = "x"}, %t: tensor<4xi32> {nn.input = "targets"}) -> tensor<f32> {
  // expected-error @+1 {{'nn.squared_norm' op is not differentiable (it has no DifferentiableOpInterface)}}
  %s = nn.squared_norm %x : (tensor<4x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
