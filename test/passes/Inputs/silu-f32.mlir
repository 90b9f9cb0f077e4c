// A model function of one parameter and one op, for option errors.
func.func @forward(%x: tensor<4xf32> {nn.param = "x"}) -> tensor<4xf32> {
  %y = nn.silu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
