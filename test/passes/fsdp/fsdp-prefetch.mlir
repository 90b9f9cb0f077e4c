// The order of all-gathers for each prefetch depth.
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 wrap=^(h\.[0-9]+)\.' --nn-autodiff --fsdp-reshard '--fsdp-prefetch=prefetch-forward=1 prefetch-backward=1' | FileCheck %s --check-prefix=ONE
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 wrap=^(h\.[0-9]+)\.' --nn-autodiff --fsdp-reshard '--fsdp-prefetch=prefetch-forward=0 prefetch-backward=0' | FileCheck %s --check-prefix=ZERO
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 wrap=^(h\.[0-9]+)\.' --nn-autodiff --fsdp-reshard '--fsdp-prefetch=prefetch-forward=2 prefetch-backward=2' | FileCheck %s --check-prefix=TWO
// RUN: shardc-opt %S/../Inputs/three-groups.mlir '--fsdp-shard-parameters=mesh=4 wrap=^(h\.[0-9]+)\. param-dtype=bf16' --nn-autodiff --fsdp-reshard '--fsdp-prefetch=prefetch-forward=1 prefetch-backward=1' | FileCheck %s --check-prefix=BF16

// bf16 compute (the CPU target): each bf16 weight gradient is padded, cast
// to the f32 reduce dtype and reduce-scattered right where it is final, not
// where autodiff left its cast (at the end of backward, the mirror of the
// gather's), so that no unsharded gradient outlives its layer's backward.
// BF16-LABEL: func.func @micro_step
// BF16: %[[W:.*]] = nn.matmul {{.*}} -> tensor<6x6xbf16>
// BF16-NEXT: %[[P:.*]] = nn.slice_grad %[[W]] {{.*}} -> tensor<8x6xbf16>
// BF16-NEXT: %[[F:.*]] = nn.cast %[[P]] : tensor<8x6xbf16> to tensor<8x6xf32>
// BF16-NEXT: shard.reduce_scatter %[[F]] {{.*}}fsdp.group = 1

// Forward group order: root (embedding), h.0, h.1.
// Depth 1: the root group's gathers first (as early as possible), then
// h.0's before the root's first compute, h.1's before h.0's. What reads a
// gathered parameter (here the padding's slice) stays just in time, before
// its group's first compute, so that the gather has compute to overlap.
// ONE-LABEL: func.func @micro_step
// ONE: shard.all_gather {{.*}}fsdp.group = -1
// ONE: shard.all_gather {{.*}}fsdp.group = 0
// ONE-NEXT: nn.embedding
// ONE-NEXT: nn.slice
// ONE-NEXT: shard.all_gather {{.*}}fsdp.group = 1
// ONE-NEXT: nn.linear
// ONE-NEXT: nn.slice
// ONE-NEXT: nn.linear
// Backward: h.1 gathered right after the loss, h.0 before h.1's backward.
// ONE: nn.cross_entropy
// ONE-NEXT: shard.all_gather {{.*}}fsdp.group = 1 : i64, fsdp.regather
// ONE-NEXT: nn.fill
// ONE: nn.rms_norm_grad
// ONE: shard.all_gather {{.*}}fsdp.group = 0 : i64, fsdp.regather
// ONE: nn.linear {{.*}} {weight_in_out} : (tensor<1x4x6xf32>, tensor<6x6xf32>)
// ONE: nn.linear {{.*}} {weight_in_out} : (tensor<1x4x6xf32>, tensor<6x6xf32>)

// Depth 0: each group just before its first compute.
// ZERO-LABEL: func.func @micro_step
// ZERO: shard.all_gather {{.*}}fsdp.group = -1
// ZERO: nn.embedding
// ZERO-NEXT: shard.all_gather {{.*}}fsdp.group = 0
// ZERO-NEXT: nn.slice
// ZERO-NEXT: nn.linear
// ZERO-NEXT: shard.all_gather {{.*}}fsdp.group = 1
// ZERO-NEXT: nn.slice
// ZERO-NEXT: nn.linear
// ZERO: nn.cross_entropy
// ZERO-NEXT: nn.fill

// Depth 2: root and h.0 up front, h.1 before the root's compute.
// TWO-LABEL: func.func @micro_step
// TWO: shard.all_gather {{.*}}fsdp.group = 0
// TWO-NEXT: shard.all_gather {{.*}}fsdp.group = 1
// TWO-NEXT: nn.embedding
// TWO-NEXT: nn.slice
// TWO: nn.cross_entropy
// TWO-NEXT: shard.all_gather {{.*}}fsdp.group = 1 : i64, fsdp.regather
// TWO-NEXT: shard.all_gather {{.*}}fsdp.group = 0 : i64, fsdp.regather
// TWO-NEXT: nn.fill

// Reduce-scatters follow the gradient they reduce: h.1's weight gradient is
// reduce-scattered before h.0's backward starts.
// ZERO: %[[DW1:.*]] = nn.matmul %{{.*}}, %{{.*}} {transpose_a} : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<6x6xf32>
// ZERO-NEXT: %[[PAD:.*]] = nn.slice_grad %[[DW1]]
// ZERO-NEXT: shard.reduce_scatter %[[PAD]]
// ZERO: shard.all_gather {{.*}}fsdp.group = 0 : i64, fsdp.regather
