// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 wrap=^(h\.[0-9]+)\.' | FileCheck %s --check-prefix=FSDP
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=2x4 wrap=^(h\.[0-9]+)\.' | FileCheck %s --check-prefix=HSDP
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=2 wrap=^(h\.[0-9]+)\.' | FileCheck %s --check-prefix=EVEN
// RUN: not shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=2x0' 2>&1 | FileCheck %s --check-prefix=BAD

// Grouping: h.0 and h.1 by the wrap policy, the rest the root group (-1).
// Sharding on dim 0, padded: 10 rows over 4 ranks are 3 rows each.
// FSDP: module attributes {fsdp.mesh = array<i64: 1, 4>}
// FSDP: shard.grid @mesh(shape = 4)
// FSDP: %[[E:[^:]*]]: tensor<3x6xf32> {fsdp.group = -1 : i64, fsdp.shape = array<i64: 10, 6>, nn.param = "wte"}
// FSDP-SAME: %[[W0:[^:]*]]: tensor<2x6xf32> {fsdp.group = 0 : i64, fsdp.shape = array<i64: 6, 6>, nn.param = "h.0.w"}
// FSDP-SAME: tensor<2x6xf32> {fsdp.group = 1 : i64, fsdp.shape = array<i64: 6, 6>, nn.param = "h.1.w"}
// FSDP-SAME: tensor<2xf32> {fsdp.group = -1 : i64, fsdp.shape = array<i64: 6>, nn.init = "ones", nn.param = "ln_f.weight"}
// FSDP-NOT: fsdp.sync_grad
// FSDP: %[[G:.*]] = shard.all_gather %[[E]] on @mesh grid_axes = [0] gather_axis = 0 {fsdp.group = -1 : i64} : tensor<3x6xf32> -> tensor<12x6xf32>
// FSDP: %[[EF:.*]] = nn.slice %[[G]] {dim = 0 : i64, fsdp.group = -1 : i64, start = 0 : i64} : (tensor<12x6xf32>) -> tensor<10x6xf32>
// FSDP: shard.all_gather %[[W0]] on @mesh grid_axes = [0] gather_axis = 0 {fsdp.group = 0 : i64} : tensor<2x6xf32> -> tensor<8x6xf32>
// FSDP: nn.embedding %{{.*}}, %[[EF]]
// The tied head reads the same gathered table.
// FSDP: nn.linear %{{.*}}, %[[EF]]

// Under HSDP the shard passes sync_grad on the replicate axis, then is
// gathered on the shard axis.
// HSDP: shard.grid @mesh(shape = 2x4)
// HSDP: %[[S:.*]] = fsdp.sync_grad %{{.*}} on @mesh grid_axes = [0] {fsdp.group = -1 : i64} : tensor<3x6xf32>
// HSDP: shard.all_gather %[[S]] on @mesh grid_axes = [1] gather_axis = 0

// No padding, no slice: 10 rows over 2 ranks.
// EVEN: %[[G:.*]] = shard.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 {fsdp.group = -1 : i64} : tensor<5x6xf32> -> tensor<10x6xf32>
// EVEN-NOT: nn.slice %[[G]]
// EVEN: nn.embedding %{{.*}}, %[[G]]

// BAD: error: --mesh must be N or RxS with positive sizes, got '2x0'
