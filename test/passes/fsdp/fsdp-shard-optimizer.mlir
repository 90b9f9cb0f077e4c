// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=2x4' --nn-autodiff --nn-build-optimizer --fsdp-shard-optimizer | FileCheck %s

// Clipping uses the global norm: local squared norms summed over the shard
// axis (replicas hold the same shards).
// CHECK-LABEL: func.func @opt_step
// CHECK: %[[SQ:.*]] = nn.add
// CHECK: %[[G:.*]] = shard.all_reduce %{{.*}} on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: nn.clip_coef %[[G]], %{{.*}}
// CHECK: nn.adamw {{.*}} : tensor<3x6xf32>
// CHECK: return %[[G]],
