module {
func.func @forward(%tok: tensor<1x4xi32> {nn.input = "tokens"}, %t: tensor<1x4xi32> {nn.input = "targets"},
                   %e: tensor<10x6xf32> {nn.param = "wte"},
                   %w0: tensor<6x6xf32> {nn.param = "h.0.w"},
                   %w1: tensor<6x6xf32> {nn.param = "h.1.w"},
                   %g: tensor<6xf32> {nn.param = "ln_f.weight", nn.init = "ones"}) -> tensor<f32> {
  %x = nn.embedding %tok, %e : (tensor<1x4xi32>, tensor<10x6xf32>) -> tensor<1x4x6xf32>
  %a = nn.linear %x, %w0 : (tensor<1x4x6xf32>, tensor<6x6xf32>) -> tensor<1x4x6xf32>
  %b = nn.linear %a, %w1 : (tensor<1x4x6xf32>, tensor<6x6xf32>) -> tensor<1x4x6xf32>
  %n = nn.rms_norm %b, %g : (tensor<1x4x6xf32>, tensor<6xf32>) -> tensor<1x4x6xf32>
  %y = nn.linear %n, %e : (tensor<1x4x6xf32>, tensor<10x6xf32>) -> tensor<1x4x10xf32>
  %l = nn.cross_entropy %y, %t : (tensor<1x4x10xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
}
