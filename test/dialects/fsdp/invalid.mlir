// RUN: shardc-opt %s --split-input-file --verify-diagnostics

shard.grid @mesh(shape = 4)
func.func @chunk(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{group_size 3 does not divide dim 0 of 'tensor<8x6xf32>'}}
  %k = fsdp.reshard %x on @mesh grid_axes = [0] group_size = 3 : tensor<8x6xf32> -> tensor<2x6xf32>
  return
}

// -----

shard.grid @mesh(shape = 4)
func.func @shape(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{expects a chunk of 'tensor<4x6xf32>', got 'tensor<2x6xf32>'}}
  %f = fsdp.gather_group %x on @mesh grid_axes = [0] group_size = 2 : tensor<2x6xf32> -> tensor<8x6xf32>
  return
}
