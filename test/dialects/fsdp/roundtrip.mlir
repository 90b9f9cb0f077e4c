// RUN: shardc-opt %s | shardc-opt | FileCheck %s

shard.grid @mesh(shape = 2x4)

// CHECK-LABEL: func.func @sync
func.func @sync(%x: tensor<3x6xf32>) -> tensor<3x6xf32> {
  // CHECK: fsdp.sync_grad %{{.*}} on @mesh grid_axes = [0] : tensor<3x6xf32>
  %y = fsdp.sync_grad %x on @mesh grid_axes = [0] : tensor<3x6xf32>
  return %y : tensor<3x6xf32>
}

// CHECK-LABEL: func.func @reshard
func.func @reshard(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // CHECK: fsdp.reshard %{{.*}} on @mesh grid_axes = [1] group_size = 2 : tensor<8x6xf32> -> tensor<4x6xf32>
  %k = fsdp.reshard %x on @mesh grid_axes = [1] group_size = 2 : tensor<8x6xf32> -> tensor<4x6xf32>
  // CHECK: fsdp.gather_group %{{.*}} on @mesh grid_axes = [1] group_size = 2 : tensor<4x6xf32> -> tensor<8x6xf32>
  %f = fsdp.gather_group %k on @mesh grid_axes = [1] group_size = 2 : tensor<4x6xf32> -> tensor<8x6xf32>
  return %f : tensor<8x6xf32>
}
