// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4' --nn-autodiff --fsdp-sync-once | FileCheck %s

// The last micro-batch: the unsharded gradient is added to its full-size
// accumulator, reduce-scattered once, and overwrites the sharded gradient.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[FULL:[^:]*]]: tensor<12x6xf32> {nn.state = "grad_full.wte"}
// CHECK: %[[T:.*]] = nn.accumulate %[[FULL]], %{{.*}}, %{{.*}} : tensor<12x6xf32>, tensor<2xf32>
// CHECK: %[[RS:.*]] = shard.reduce_scatter %[[T]] on @mesh grid_axes = [0] scatter_axis = 0 {{.*}}: tensor<12x6xf32> -> tensor<3x6xf32>
// CHECK: return %{{.*}}, %[[RS]],

// Other micro-batches: accumulate the unsharded gradients, reduce nothing.
// CHECK-LABEL: func.func @micro_step_nosync
// CHECK-SAME: -> (tensor<f32> {nn.output = "loss"}, tensor<12x6xf32> {nn.updates =
// CHECK-NOT: shard.reduce_scatter
// CHECK: %[[N:.*]] = nn.accumulate %{{.*}} : tensor<12x6xf32>, tensor<2xf32>
// CHECK: return %{{.*}}, %[[N]],
