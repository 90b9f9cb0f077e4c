// RUN: shardc-opt %s | shardc-opt | FileCheck %s

shard.grid @mesh(shape = 2x4)

// CHECK-LABEL: func.func @sync
func.func @sync(%x: tensor<3x6xf32>) -> tensor<3x6xf32> {
  // CHECK: fsdp.sync_grad %{{.*}} on @mesh grid_axes = [0] : tensor<3x6xf32>
  %y = fsdp.sync_grad %x on @mesh grid_axes = [0] : tensor<3x6xf32>
  return %y : tensor<3x6xf32>
}
