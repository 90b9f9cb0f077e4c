// One reduce-scatter (and HSDP all-reduce) per FSDP group, on hand-written
// gradients: group 0 has two parameters (a [4, 3] weight and a [4] bias,
// 2 shards), group 1 one; a user of the first shard that sat between the
// two gradients moves after the bucket. What reads the bucket's result (its
// slices, the add) then moves just before the next reduce-scatter, past
// group 1's gradient: the compute they wait behind is group 1's. HSDP's
// all-reduce stays with its reduce-scatter.
// RUN: shardc-opt %s --split-input-file --fsdp-bucket-gradients | FileCheck %s

module attributes {fsdp.mesh = array<i64: 2, 2>} {
  shard.grid @mesh(shape = 2x2)
  // CHECK-LABEL: func.func @micro_step
  func.func @micro_step(%x: tensor<4x3xf32>, %b: tensor<4xf32>, %c: tensor<2xf32>, %acc: tensor<2x3xf32>)
      -> (tensor<2x3xf32>, tensor<2xf32>, tensor<1xf32>) {
    // CHECK: %[[DW:.*]] = nn.mul
    %dw = nn.mul %x, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    // CHECK-NOT: shard.reduce_scatter
    %s0 = shard.reduce_scatter %dw on @mesh grid_axes = [1] scatter_axis = 0 {fsdp.group = 0 : i64} : tensor<4x3xf32> -> tensor<2x3xf32>
    %a0 = shard.all_reduce %s0 on @mesh grid_axes = [0] : tensor<2x3xf32> -> tensor<2x3xf32>
    %u = nn.add %a0, %acc : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    // CHECK: %[[DB:.*]] = nn.mul
    %db = nn.mul %b, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %s1 = shard.reduce_scatter %db on @mesh grid_axes = [1] scatter_axis = 0 {fsdp.group = 0 : i64} : tensor<4xf32> -> tensor<2xf32>
    %a1 = shard.all_reduce %s1 on @mesh grid_axes = [0] : tensor<2xf32> -> tensor<2xf32>
    // CHECK: %[[V0:.*]] = nn.reshape %[[DW]] : (tensor<4x3xf32>) -> tensor<2x6xf32>
    // CHECK: %[[V1:.*]] = nn.reshape %[[DB]] : (tensor<4xf32>) -> tensor<2x2xf32>
    // CHECK: %[[P:.*]] = nn.concat %[[V0]], %[[V1]] {dim = 1 : i64} : (tensor<2x6xf32>, tensor<2x2xf32>) -> tensor<2x8xf32>
    // CHECK: %[[S:.*]] = shard.reduce_scatter %[[P]] on @mesh grid_axes = [1] scatter_axis = 0 {fsdp.group = 0 : i64} : tensor<2x8xf32> -> tensor<1x8xf32>
    // CHECK-NEXT: %[[A:.*]] = shard.all_reduce %[[S]] on @mesh grid_axes = [0] {fsdp.group = 0 : i64} : tensor<1x8xf32> -> tensor<1x8xf32>
    // CHECK-NEXT: %[[DC:.*]] = nn.mul
    // CHECK-NEXT: %[[W0:.*]] = nn.slice %[[A]] {dim = 1 : i64, start = 0 : i64} : (tensor<1x8xf32>) -> tensor<1x6xf32>
    // CHECK: %[[R0:.*]] = nn.reshape %[[W0]] : (tensor<1x6xf32>) -> tensor<2x3xf32>
    // CHECK: %[[W1:.*]] = nn.slice %[[A]] {dim = 1 : i64, start = 6 : i64} : (tensor<1x8xf32>) -> tensor<1x2xf32>
    // CHECK: %[[R1:.*]] = nn.reshape %[[W1]] : (tensor<1x2xf32>) -> tensor<2xf32>
    // CHECK: %[[U:.*]] = nn.add %[[R0]], %{{.*}}
    // A group of one parameter is left as it is.
    // CHECK-NEXT: shard.reduce_scatter %[[DC]] on @mesh grid_axes = [1] scatter_axis = 0 {fsdp.group = 1 : i64} : tensor<2xf32> -> tensor<1xf32>
    %dc = nn.mul %c, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %s2 = shard.reduce_scatter %dc on @mesh grid_axes = [1] scatter_axis = 0 {fsdp.group = 1 : i64} : tensor<2xf32> -> tensor<1xf32>
    // CHECK: return %[[U]], %[[R1]]
    return %u, %a1, %s2 : tensor<2x3xf32>, tensor<2xf32>, tensor<1xf32>
  }
}

// -----

// A gradient of 1 GiB or more (here 2^28 f32) is reduced alone: the others
// of its group are bucketed without it.
// RUN: shardc-opt %s --split-input-file --fsdp-bucket-gradients | FileCheck %s --check-prefix=ALONE
module attributes {fsdp.mesh = array<i64: 1, 2>} {
  shard.grid @mesh(shape = 2)
  // ALONE-LABEL: func.func @micro_step
  func.func @micro_step(%e: tensor<268435456xf32>, %x: tensor<4xf32>, %y: tensor<6xf32>)
      -> (tensor<134217728xf32>, tensor<2xf32>, tensor<3xf32>) {
    // ALONE: %[[DE:.*]] = nn.mul
    // ALONE: shard.reduce_scatter %[[DE]] on @mesh grid_axes = [0] scatter_axis = 0 {fsdp.group = -1 : i64} : tensor<268435456xf32> -> tensor<134217728xf32>
    // ALONE: nn.concat
    // ALONE: shard.reduce_scatter %{{.*}} : tensor<2x5xf32> -> tensor<1x5xf32>
    %de = nn.mul %e, %e : (tensor<268435456xf32>, tensor<268435456xf32>) -> tensor<268435456xf32>
    %s0 = shard.reduce_scatter %de on @mesh grid_axes = [0] scatter_axis = 0 {fsdp.group = -1 : i64} : tensor<268435456xf32> -> tensor<134217728xf32>
    %dx = nn.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %s1 = shard.reduce_scatter %dx on @mesh grid_axes = [0] scatter_axis = 0 {fsdp.group = -1 : i64} : tensor<4xf32> -> tensor<2xf32>
    %dy = nn.mul %y, %y : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    %s2 = shard.reduce_scatter %dy on @mesh grid_axes = [0] scatter_axis = 0 {fsdp.group = -1 : i64} : tensor<6xf32> -> tensor<3xf32>
    return %s0, %s1, %s2 : tensor<134217728xf32>, tensor<2xf32>, tensor<3xf32>
  }
}
