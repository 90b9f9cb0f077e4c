// The parameter lifecycle in the micro-step, for each reshard setting.
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 wrap=^(h\.[0-9]+)\.' --nn-autodiff --fsdp-reshard=reshard-after-forward=true | FileCheck %s --check-prefix=TRUE
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 wrap=^(h\.[0-9]+)\.' --nn-autodiff --fsdp-reshard=reshard-after-forward=false | FileCheck %s --check-prefix=FALSE
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=2x4 wrap=^(h\.[0-9]+)\.' --nn-autodiff | FileCheck %s --check-prefix=HSDP

// reshard-after-forward=true: block groups are gathered again in backward,
// the root group (embedding, final norm) stays gathered as in FSDP2;
// gradients are reduce-scattered on the shard axis.
// TRUE-LABEL: func.func @micro_step
// TRUE: %[[G0:.*]] = shard.all_gather %{{.*}} {fsdp.group = 0 : i64}
// TRUE: %[[S0:.*]] = nn.slice %[[G0]]
// TRUE: nn.linear %{{.*}}, %[[S0]]
// TRUE: nn.cross_entropy
// TRUE-NOT: fsdp.group = -1 : i64, fsdp.regather
// TRUE: %[[R1:.*]] = shard.all_gather %{{.*}} {fsdp.group = 1 : i64, fsdp.regather}
// TRUE: %[[RS1:.*]] = nn.slice %[[R1]]
// TRUE: nn.linear %{{.*}}, %[[RS1]] {weight_in_out}
// TRUE: %[[R0:.*]] = shard.all_gather %{{.*}} {fsdp.group = 0 : i64, fsdp.regather}
// TRUE: %[[RS0:.*]] = nn.slice %[[R0]]
// TRUE: nn.linear %{{.*}}, %[[RS0]] {weight_in_out}
// TRUE: shard.reduce_scatter %{{.*}} on @mesh grid_axes = [0] scatter_axis = 0 {{.*}}: tensor<8x6xf32> -> tensor<2x6xf32>
// The padded table's gradient: zero rows appended, then reduce-scattered.
// TRUE: nn.slice_grad %{{.*}} {dim = 0 : i64, start = 0 : i64} : (tensor<10x6xf32>) -> tensor<12x6xf32>
// TRUE: shard.reduce_scatter %{{.*}} on @mesh grid_axes = [0] scatter_axis = 0 {{.*}}: tensor<12x6xf32> -> tensor<3x6xf32>
// TRUE: nn.accumulate

// reshard-after-forward=false: no gathers after the loss.
// FALSE-LABEL: func.func @micro_step
// FALSE: nn.cross_entropy
// FALSE-NOT: shard.all_gather
// FALSE: return

// Under HSDP, reduce-scatter on the shard axis, then all-reduce on the
// replicate axis.
// HSDP-LABEL: func.func @micro_step
// HSDP: %[[RS:.*]] = shard.reduce_scatter %{{.*}} on @mesh grid_axes = [1] scatter_axis = 0 {{.*}}: tensor<8x6xf32> -> tensor<2x6xf32>
// HSDP-NEXT: shard.all_reduce %[[RS]] on @mesh grid_axes = [0] : tensor<2x6xf32> -> tensor<2x6xf32>

// reshard-after-forward=2: each rank keeps its half of a block's gathered
// parameter after forward and gathers it back within its pair of ranks.
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 wrap=^(h\.[0-9]+)\.' --nn-autodiff --fsdp-reshard=reshard-after-forward=2 | FileCheck %s --check-prefix=TWO
// RUN: not shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4' --nn-autodiff --fsdp-reshard=reshard-after-forward=3 2>&1 | FileCheck %s --check-prefix=BADN
// TWO-LABEL: func.func @micro_step
// TWO: %[[G:.*]] = shard.all_gather %{{.*}} {fsdp.group = 0 : i64} : tensor<2x6xf32> -> tensor<8x6xf32>
// TWO: %[[K:.*]] = fsdp.reshard %[[G]] on @mesh grid_axes = [0] group_size = 2 {fsdp.group = 0 : i64} : tensor<8x6xf32> -> tensor<4x6xf32>
// TWO: nn.cross_entropy
// TWO-NOT: fsdp.group = -1 : i64, fsdp.regather
// TWO: %[[R:.*]] = fsdp.gather_group %[[K]] on @mesh grid_axes = [0] group_size = 2 {fsdp.group = 0 : i64, fsdp.regather} : tensor<4x6xf32> -> tensor<8x6xf32>
// TWO-NEXT: nn.slice %[[R]] {{.*}}fsdp.regather
// BADN: error: --reshard-after-forward=3 must divide the 4 ranks of the shard axis
