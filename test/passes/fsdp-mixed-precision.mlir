// RUN: shardc-opt %S/Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 param-dtype=bf16 target=cuda' --nn-autodiff | FileCheck %s
// RUN: shardc-opt %S/Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 param-dtype=bf16 reduce-dtype=bf16 target=cuda' --nn-autodiff | FileCheck %s --check-prefix=BF16
// RUN: shardc-opt %S/Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 param-dtype=bf16' --nn-autodiff | FileCheck %s --check-prefix=CPU
// RUN: not shardc-opt %S/Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 param-dtype=f8' 2>&1 | FileCheck %s --check-prefix=BAD

// bf16 params, f32 reduction, on a target that computes in f32 (cuda, for
// now): the f32 shard is cast to bf16 before the all-gather (half the
// bytes), widened after it, and its gradient is reduce-scattered in f32;
// the accumulator stays f32.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[H:.*]] = nn.cast %{{.*}} {fsdp.group = -1 : i64} : tensor<3x6xf32> to tensor<3x6xbf16>
// CHECK: %[[G:.*]] = shard.all_gather %[[H]] on @mesh grid_axes = [0] gather_axis = 0 {fsdp.group = -1 : i64} : tensor<3x6xbf16> -> tensor<12x6xbf16>
// CHECK: nn.cast %[[G]] {fsdp.group = -1 : i64, grad_type = f32} : tensor<12x6xbf16> to tensor<12x6xf32>
// CHECK: shard.reduce_scatter %{{.*}} on @mesh grid_axes = [0] scatter_axis = 0 {{.*}}: tensor<12x6xf32> -> tensor<3x6xf32>
// CHECK: nn.accumulate {{.*}} : tensor<3x6xf32>, tensor<2xf32>

// bf16 reduction: the gradient is cast to bf16, reduce-scattered, widened.
// BF16-LABEL: func.func @micro_step
// BF16: %[[D:.*]] = nn.cast %{{.*}} : tensor<12x6xf32> to tensor<12x6xbf16>
// BF16-NEXT: %[[R:.*]] = shard.reduce_scatter %[[D]] on @mesh grid_axes = [0] scatter_axis = 0 {{.*}}: tensor<12x6xbf16> -> tensor<3x6xbf16>
// BF16-NEXT: nn.cast %[[R]] : tensor<3x6xbf16> to tensor<3x6xf32>

// BAD: error: param-dtype and reduce-dtype must be f32 or bf16, got 'f8' and 'f32'

// On a target that computes in bf16 (cpu), the gathered bf16 parameter is
// used as it is: a no-op cast carries the reduce dtype, the model computes
// in bf16 (nn-propagate-dtype), its bf16 gradient is cast to f32 and
// reduce-scattered in f32.
// CPU-LABEL: func.func @micro_step
// CPU: %[[G:.*]] = shard.all_gather %{{.*}} : tensor<3x6xbf16> -> tensor<12x6xbf16>
// CPU: nn.cast %[[G]] {fsdp.group = -1 : i64, grad_type = f32} : tensor<12x6xbf16> to tensor<12x6xbf16>
// CPU: nn.linear {{.*}} -> tensor<{{.*}}xbf16>
// CPU: %[[D:.*]] = nn.cast %{{.*}} : tensor<12x6xbf16> to tensor<12x6xf32>
// CPU: shard.reduce_scatter %[[D]] on @mesh grid_axes = [0] scatter_axis = 0 {{.*}}: tensor<12x6xf32> -> tensor<3x6xf32>
