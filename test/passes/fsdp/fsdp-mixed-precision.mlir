// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 param-dtype=bf16 reduce-dtype=bf16' --nn-autodiff | FileCheck %s --check-prefix=BF16
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 param-dtype=bf16' --nn-autodiff | FileCheck %s --check-prefix=CPU
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 param-dtype=bf16 target=cuda' --nn-autodiff | FileCheck %s --check-prefix=CPU
// RUN: not shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 param-dtype=f8' 2>&1 | FileCheck %s --check-prefix=BAD

// bf16 reduction: the bf16 gradient is reduce-scattered as it is, and the
// shard widened.
// BF16-LABEL: func.func @micro_step
// BF16: %[[R:.*]] = shard.reduce_scatter %{{.*}} on @mesh grid_axes = [0] scatter_axis = 0 {{.*}}: tensor<12x6xbf16> -> tensor<3x6xbf16>
// BF16-NEXT: nn.cast %[[R]] : tensor<3x6xbf16> to tensor<3x6xf32>

// BAD: error: param-dtype and reduce-dtype must be f32 or bf16, got 'f8' and 'f32'

// On a target that computes in bf16 (both: cpu and cuda), the gathered
// bf16 parameter is used as it is: a no-op cast carries the reduce dtype,
// the model computes in bf16 (nn-propagate-dtype), its bf16 gradient is
// cast to f32 and reduce-scattered in f32.
// CPU-LABEL: func.func @micro_step
// CPU: %[[G:.*]] = shard.all_gather %{{.*}} : tensor<3x6xbf16> -> tensor<12x6xbf16>
// CPU: nn.cast %[[G]] {fsdp.group = -1 : i64, grad_type = f32} : tensor<12x6xbf16> to tensor<12x6xbf16>
// CPU: nn.linear {{.*}} -> tensor<{{.*}}xbf16>
// CPU: %[[D:.*]] = nn.cast %{{.*}} : tensor<12x6xbf16> to tensor<12x6xf32>
// CPU: shard.reduce_scatter %[[D]] on @mesh grid_axes = [0] scatter_axis = 0 {{.*}}: tensor<12x6xf32> -> tensor<3x6xf32>
