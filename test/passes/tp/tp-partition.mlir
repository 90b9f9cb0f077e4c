// RUN: shardc-opt %S/../Inputs/tp-block-odd-vocab.mlir '--tp-partition=tp=2' | FileCheck %s
// RUN: shardc-opt %S/../Inputs/tp-block.mlir '--tp-partition=tp=2' | FileCheck %s --check-prefix=VOCAB
// RUN: shardc-opt %S/../Inputs/tp-block.mlir '--tp-partition=tp=2' '--nn-autodiff' | FileCheck %s --check-prefix=VOCABGRAD
// RUN: shardc-opt %S/../Inputs/tp-block.mlir '--tp-partition=mesh=2 tp=2' '--fsdp-shard-parameters=mesh=2 tp=2' | FileCheck %s --check-prefix=VFSDP
// RUN: shardc-opt %S/../Inputs/tp-block.mlir '--tp-partition=mesh=2x2 tp=2' | FileCheck %s --check-prefix=HSDP
// RUN: not shardc-opt %S/../Inputs/tp-block.mlir '--tp-partition=tp=4' 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not shardc-opt %S/../Inputs/tp-block.mlir '--tp-partition=tp=0' 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: shardc-opt %S/../Inputs/tp-block.mlir '--tp-partition=tp=1' | FileCheck %s --check-prefix=NONE
// RUN: shardc-opt %S/../Inputs/tp-block-odd-vocab.mlir '--tp-partition=mesh=2 tp=2' '--fsdp-shard-parameters=mesh=2 tp=2' | FileCheck %s --check-prefix=FSDP
// RUN: shardc-opt %S/../Inputs/tp-gpt2-block.mlir '--tp-partition=tp=2' | FileCheck %s --check-prefix=GPT2
// RUN: shardc-opt %S/../Inputs/tp-block.mlir '--tp-partition=mesh=2 tp=2' '--fsdp-shard-parameters=mesh=2 tp=2 param-dtype=bf16' | FileCheck %s --check-prefix=BF16
// RUN: shardc-opt %S/../Inputs/tp-block.mlir '--tp-partition=mesh=2 tp=2' '--fsdp-shard-parameters=mesh=2 tp=2 param-dtype=bf16 reduce-dtype=bf16' | FileCheck %s --check-prefix=BF16R
// RUN: shardc-opt %S/../Inputs/tp-marked-block.mlir '--tp-partition=tp=2' | FileCheck %s --check-prefix=BLOCK
// RUN: shardc-opt %S/../Inputs/tp-marked-block.mlir '--tp-partition=tp=2' '--nn-autodiff=recompute=selective' | FileCheck %s --check-prefix=REGATHER

// The collectives (and the moves of the tokens to dim 0 around them) join
// the layer block of the value they gather or scatter; ops outside blocks
// (the LM head) stay outside.
// BLOCK: nn.rms_norm {{.*}} {nn.block = 0 : i64}
// BLOCK-NEXT: nn.transpose {{.*}} {nn.block = 0 : i64, permutation
// BLOCK-NEXT: shard.all_gather {{.*}} gather_axis = 0 {nn.block = 0 : i64}
// BLOCK-NEXT: nn.transpose {{.*}} {nn.block = 0 : i64, permutation
// BLOCK: nn.silu
// BLOCK-NEXT: nn.linear {{.*}} {nn.block = 0 : i64}
// BLOCK-NEXT: nn.transpose {{.*}} {nn.block = 0 : i64, permutation
// BLOCK-NEXT: shard.reduce_scatter {{.*}} scatter_axis = 0 {nn.block = 0 : i64}
// BLOCK-NEXT: nn.transpose {{.*}} {nn.block = 0 : i64, permutation
// BLOCK: nn.linear %{{[0-9]+}}, %{{[^ ]*}} : (tensor<2x2x8xf32>, tensor<11x8xf32>)

// So --recompute re-gathers the column-parallel input in backward, from the
// recomputed norm, as Megatron does, instead of keeping the gathered
// sequence: the forward's gather, the recomputed one, then the gradients'
// collectives (the reduce-scatter's VJP gathers, the all-gather's scatters).
// REGATHER: func.func @micro_step
// REGATHER: shard.all_gather {{.*}} {nn.block = 0 : i64}
// REGATHER: shard.reduce_scatter {{.*}} {nn.block = 0 : i64}
// REGATHER: %[[NORM:.*]] = nn.rms_norm {{.*}} {nn.block = 0 : i64}
// REGATHER: %[[T:.*]] = nn.transpose %[[NORM]] {nn.block = 0 : i64
// REGATHER-NEXT: shard.all_gather %[[T]] {{.*}} {nn.block = 0 : i64}
// REGATHER: shard.all_gather
// REGATHER: shard.reduce_scatter
// REGATHER-NOT: shard.

// bf16 compute (fsdp-shard-parameters' nn-propagate-dtype): the sequence
// all-gather moves bf16 and is marked to sum its gradient in the reduce
// dtype; the row-parallel partial outputs are cast up and reduce-scattered
// in f32.
// BF16: shard.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 0 {tp.sum_dtype = f32} : tensor<2x2x8xbf16> -> tensor<4x2x8xbf16>
// BF16: %[[UP:.*]] = nn.cast %{{.*}} : tensor<4x2x8xbf16> to tensor<4x2x8xf32>
// BF16-NEXT: shard.reduce_scatter %[[UP]] on @mesh grid_axes = [1] scatter_axis = 0 {tp.sum_dtype = f32} : tensor<4x2x8xf32> -> tensor<2x2x8xf32>

// With a bf16 reduce dtype the tp sums run in bf16 too: the row-parallel
// partial outputs are reduce-scattered as computed, with no cast up.
// BF16R: shard.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 0 {tp.sum_dtype = bf16} : tensor<2x2x8xbf16> -> tensor<4x2x8xbf16>
// BF16R-NOT: nn.cast %{{.*}} : tensor<4x2x8xbf16> to tensor<4x2x8xf32>
// BF16R: shard.reduce_scatter %{{.*}} on @mesh grid_axes = [1] scatter_axis = 0 {tp.sum_dtype = bf16} : tensor<4x2x8xbf16> -> tensor<2x2x8xbf16>

// A vocabulary tp divides (tp-block.mlir's 10): the embedding table and
// the LM head split by rows (tp.dim 0), the tokens and targets whole. The
// lookup takes this rank's rows (zero elsewhere), reduce-scattered over the
// sequence; the head is column-parallel by vocabulary on the gathered
// sequence; the loss all-gathers each rank's row statistics (loss
// parallel). The module says the tokens are whole (tp.whole_tokens, the
// manifest's tp_whole_tokens: the trainer gives each tp rank them all).
// VOCAB: module attributes {{{.*}}tp.whole_tokens
// VOCAB: %[[TOK:[^:]*]]: tensor<2x4xi32> {nn.input = "tokens"}
// VOCAB-SAME: %[[TGT:[^:]*]]: tensor<2x4xi32> {nn.input = "targets"}
// VOCAB-SAME: %[[EMB:[^:]*]]: tensor<5x8xf32> {nn.param = "model.embed_tokens.weight", tp.dim = 0 : i64}
// VOCAB-SAME: %[[HEAD:[^:]*]]: tensor<5x8xf32> {nn.param = "lm_head.weight", tp.dim = 0 : i64}
// VOCAB-SAME: %[[TPI:[^:]*]]: tensor<1xi32> {nn.input = "tp_index"}
// VOCAB: %[[LOCAL:[^,]*]], %[[MASK:[^ ]*]] = nn.vocab_part %[[TOK]], %[[TPI]] {rows = 5 : i64} : (tensor<2x4xi32>, tensor<1xi32>) -> (tensor<2x4xi32>, tensor<2x4x1xf32>)
// VOCAB-NEXT: %[[E:.*]] = nn.embedding %[[LOCAL]], %[[EMB]] : (tensor<2x4xi32>, tensor<5x8xf32>) -> tensor<2x4x8xf32>
// VOCAB-NEXT: %[[MINE:.*]] = nn.mul %[[E]], %[[MASK]] : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
// VOCAB-NEXT: %[[ET:.*]] = nn.transpose %[[MINE]] {{.*}} -> tensor<4x2x8xf32>
// VOCAB-NEXT: %[[ES:.*]] = shard.reduce_scatter %[[ET]] on @mesh grid_axes = [1] scatter_axis = 0 : tensor<4x2x8xf32> -> tensor<2x2x8xf32>
// VOCAB-NEXT: %[[X:.*]] = nn.transpose %[[ES]] {{.*}} -> tensor<2x2x8xf32>
// VOCAB-NEXT: nn.rms_norm %[[X]]
// VOCAB: %[[L:.*]] = nn.linear %{{.*}}, %[[HEAD]] : (tensor<2x4x8xf32>, tensor<5x8xf32>) -> tensor<2x4x5xf32>
// VOCAB-NEXT: %[[ST:.*]] = nn.vocab_stats %[[L]], %[[TGT]], %[[TPI]] : (tensor<2x4x5xf32>, tensor<2x4xi32>, tensor<1xi32>) -> tensor<2x4x2xf32>
// VOCAB-NEXT: %[[ALL:.*]] = shard.all_gather %[[ST]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<2x4x2xf32> -> tensor<4x4x2xf32>
// VOCAB-NEXT: %[[LOSS:.*]] = nn.vocab_cross_entropy %[[L]], %[[TGT]], %[[ALL]], %[[TPI]] : (tensor<2x4x5xf32>, tensor<2x4xi32>, tensor<4x4x2xf32>, tensor<1xi32>) -> tensor<f32>
// VOCAB-NEXT: return %[[LOSS]]

// Its gradient: this rank's columns of the logits' gradient (the
// statistics carry none), the head's input gradient reduce-scattered back
// over the sequence (the gather's VJP), and the embedding's through the
// mask to this rank's rows.
// VOCABGRAD: func.func @micro_step
// VOCABGRAD: %[[DL:.*]] = nn.vocab_cross_entropy_grad %{{.*}} -> tensor<2x4x5xf32>
// VOCABGRAD-NOT: nn.vocab_stats
// VOCABGRAD: shard.reduce_scatter
// VOCABGRAD: nn.embedding_grad {{.*}} -> tensor<5x8xf32>

// Sharded over the shard axis, the vocabulary parts are as any split parameter,
// with no sum over tp (their gradients are whole on each rank).
// VFSDP: shard.grid @mesh(shape = 2x2)
// VFSDP-NOT: fsdp.sync_grad {{.*}} tensor<3x8xf32>
// VFSDP: shard.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 {fsdp.group = -1 : i64} : tensor<3x8xf32> -> tensor<6x8xf32>
// VFSDP: fsdp.sync_grad %{{.*}} on @mesh grid_axes = [1] {fsdp.group = 0 : i64} : tensor<4xf32>
// VFSDP-NOT: fsdp.sync_grad {{.*}} tensor<3x8xf32>

// The grid: shard axis 0 (size 1), tp axis 1; the tokens split by
// sequence (no tp.whole_tokens).
// CHECK: module attributes {fsdp.mesh = array<i64: 1, 1, 2>
// CHECK-NOT: tp.whole_tokens
// CHECK: shard.grid @mesh(shape = 1x2)
// Tokens and targets: this rank's half of the sequence. Column-parallel
// weights split on dim 0 (q/k/v by heads, up by features), row-parallel
// on dim 1; the rest whole (tp.dim -1).
// CHECK: %[[TOK:[^:]*]]: tensor<2x2xi32> {nn.input = "tokens"}
// CHECK-SAME: %[[TGT:[^:]*]]: tensor<2x2xi32> {nn.input = "targets"}
// CHECK-SAME: %[[EMB:[^:]*]]: tensor<11x8xf32> {nn.param = "model.embed_tokens.weight", tp.dim = -1 : i64}
// CHECK-SAME: %[[LN:[^:]*]]: tensor<8xf32> {nn.param = "model.layers.0.input_layernorm.weight", tp.dim = -1 : i64}
// CHECK-SAME: %[[WQ:[^:]*]]: tensor<4x8xf32> {nn.param = "model.layers.0.self_attn.q_proj.weight", tp.dim = 0 : i64}
// CHECK-SAME: tensor<4x8xf32> {nn.param = "model.layers.0.self_attn.k_proj.weight", tp.dim = 0 : i64}
// CHECK-SAME: tensor<4x8xf32> {nn.param = "model.layers.0.self_attn.v_proj.weight", tp.dim = 0 : i64}
// CHECK-SAME: %[[WO:[^:]*]]: tensor<8x4xf32> {nn.param = "model.layers.0.self_attn.o_proj.weight", tp.dim = 1 : i64}
// CHECK-SAME: tensor<6x8xf32> {nn.param = "model.layers.0.mlp.up_proj.weight", tp.dim = 0 : i64}
// CHECK-SAME: tensor<8x6xf32> {nn.param = "model.layers.0.mlp.down_proj.weight", tp.dim = 1 : i64}
// CHECK-SAME: %[[HEAD:[^:]*]]: tensor<11x8xf32> {nn.param = "lm_head.weight", tp.dim = -1 : i64}
// The residual stream on this rank's tokens.
// CHECK-NOT: fsdp.sync_grad
// CHECK: %[[X:.*]] = nn.embedding %[[TOK]], %[[EMB]] : (tensor<2x2xi32>, tensor<11x8xf32>) -> tensor<2x2x8xf32>
// CHECK: %[[N:.*]] = nn.rms_norm %[[X]], %[[LN]]
// One all-gather of the sequence (tokens moved to dim 0 and back) feeds q, k, v.
// CHECK: %[[T0:.*]] = nn.transpose %[[N]] {permutation = array<i64: 1, 0, 2>} : (tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
// CHECK: %[[G:.*]] = shard.all_gather %[[T0]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<2x2x8xf32> -> tensor<4x2x8xf32>
// CHECK: %[[FULL:.*]] = nn.transpose %[[G]] {permutation = array<i64: 1, 0, 2>} : (tensor<4x2x8xf32>) -> tensor<2x4x8xf32>
// CHECK: nn.linear %[[FULL]], %[[WQ]] : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x4xf32>
// CHECK: nn.reshape {{.*}} -> tensor<2x4x1x4xf32>
// CHECK: nn.linear %[[FULL]]
// CHECK: nn.linear %[[FULL]]
// One head per rank.
// CHECK: nn.attention {{.*}} -> tensor<2x1x4x4xf32>
// CHECK: %[[A:.*]] = nn.reshape {{.*}} -> tensor<2x4x4xf32>
// The row-parallel output's partial sums reduce-scattered over the sequence.
// CHECK: %[[P:.*]] = nn.linear %[[A]], %[[WO]] : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[PT:.*]] = nn.transpose %[[P]] {permutation = array<i64: 1, 0, 2>} : (tensor<2x4x8xf32>) -> tensor<4x2x8xf32>
// CHECK: %[[RS:.*]] = shard.reduce_scatter %[[PT]] on @mesh grid_axes = [1] scatter_axis = 0 : tensor<4x2x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[O:.*]] = nn.transpose %[[RS]] {{.*}} -> tensor<2x2x8xf32>
// CHECK: %[[R:.*]] = nn.add %[[X]], %[[O]] : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
// CHECK: shard.all_gather
// CHECK: nn.silu {{.*}} : tensor<2x4x6xf32>
// CHECK: shard.reduce_scatter
// The LM head and the loss on this rank's tokens.
// CHECK: %[[L:.*]] = nn.linear %{{.*}}, %[[HEAD]] : (tensor<2x2x8xf32>, tensor<11x8xf32>) -> tensor<2x2x11xf32>
// CHECK: nn.cross_entropy %[[L]], %[[TGT]] : (tensor<2x2x11xf32>, tensor<2x2xi32>) -> tensor<f32>

// HSDP and tp: the tp axis is the innermost, 2.
// HSDP: module attributes {fsdp.mesh = array<i64: 2, 2, 2>
// HSDP: shard.grid @mesh(shape = 2x2x2)
// HSDP: shard.all_gather %{{.*}} on @mesh grid_axes = [2] gather_axis = 0

// HEADS: error: --tp 4: the model's 2 attention heads are not divisible by 4
// ZERO: error: --tp must be between 1 and 64
// NONE-NOT: shard.grid
// NONE-NOT: tp.dim

// Then FSDP on the shard axis (0): a whole parameter's shard passes
// sync_grad on the tp axis (1), its gradient summed there after the
// reduce-scatter; a split one's does not.
// FSDP: shard.grid @mesh(shape = 2x2)
// FSDP: %[[S:.*]] = fsdp.sync_grad %{{.*}} on @mesh grid_axes = [1] {fsdp.group = -1 : i64} : tensor<6x8xf32>
// FSDP: shard.all_gather %[[S]] on @mesh grid_axes = [0] gather_axis = 0 {fsdp.group = -1 : i64} : tensor<6x8xf32> -> tensor<12x8xf32>
// FSDP-NOT: fsdp.sync_grad {{.*}} tensor<2x8xf32>

// GPT-2: c_attn's output features are three blocks (q, k, v), each split
// by heads (tp.blocks = 3), and its slices take this rank's part of each;
// a micro-batch of 1 moves the tokens to dim 0 by reshapes. The learned
// positions added to the tokens are this rank's rows of them: row tp_index
// (a new i32[1] input) of the [tp, T/tp x C] view, by an embedding lookup.
// The tied wte is vocabulary-parallel, as the embedding and as the head.
// GPT2: %[[WTE:[^:]*]]: tensor<5x8xf32> {nn.param = "transformer.wte.weight", tp.dim = 0 : i64}
// GPT2: tensor<8x12xf32> {nn.param = "transformer.h.0.attn.c_attn.weight", tp.blocks = 3 : i64, tp.dim = 1 : i64}
// GPT2-SAME: tensor<12xf32> {nn.param = "transformer.h.0.attn.c_attn.bias", tp.blocks = 3 : i64, tp.dim = 0 : i64}
// GPT2-SAME: tensor<4x8xf32> {nn.param = "transformer.h.0.attn.c_proj.weight", tp.dim = 0 : i64}
// GPT2-SAME: tensor<8xf32> {nn.param = "transformer.h.0.attn.c_proj.bias", tp.dim = -1 : i64}
// GPT2-SAME: %[[TPI:[^:]*]]: tensor<1xi32> {nn.input = "tp_index"}
// GPT2: nn.vocab_part
// GPT2-NEXT: nn.embedding %{{.*}}, %[[WTE]]
// GPT2: shard.reduce_scatter
// GPT2-NEXT: %[[E:.*]] = nn.reshape %reduce_scatter : (tensor<2x1x8xf32>) -> tensor<1x2x8xf32>
// GPT2: %[[P:.*]] = nn.slice
// GPT2: %[[PT:.*]] = nn.reshape %[[P]] : (tensor<4x8xf32>) -> tensor<2x16xf32>
// GPT2: %[[ROW:.*]] = nn.embedding %[[TPI]], %[[PT]] : (tensor<1xi32>, tensor<2x16xf32>) -> tensor<1x16xf32>
// GPT2: %[[PL:.*]] = nn.reshape %[[ROW]] : (tensor<1x16xf32>) -> tensor<2x8xf32>
// GPT2: nn.add %[[E]], %[[PL]] : (tensor<1x2x8xf32>, tensor<2x8xf32>) -> tensor<1x2x8xf32>
// GPT2: nn.reshape %{{.*}} : (tensor<1x2x8xf32>) -> tensor<2x1x8xf32>
// GPT2: shard.all_gather {{.*}} : tensor<2x1x8xf32> -> tensor<4x1x8xf32>
// GPT2: %[[QKV:.*]] = nn.linear {{.*}} -> tensor<1x4x12xf32>
// GPT2: nn.slice %[[QKV]] {dim = 2 : i64, start = 0 : i64} : (tensor<1x4x12xf32>) -> tensor<1x4x4xf32>
// GPT2: nn.slice %[[QKV]] {dim = 2 : i64, start = 4 : i64}
// GPT2: nn.slice %[[QKV]] {dim = 2 : i64, start = 8 : i64}
// GPT2: %[[O:.*]] = nn.linear %{{.*}}, %{{[^ ]*}} {weight_in_out} : (tensor<1x4x4xf32>, tensor<4x8xf32>) -> tensor<1x4x8xf32>
// GPT2: shard.reduce_scatter
// The row-parallel bias, once, after the sum.
// GPT2: %[[S:.*]] = nn.reshape %reduce_scatter_0 : (tensor<2x1x8xf32>) -> tensor<1x2x8xf32>
// GPT2: nn.add %[[S]], %{{.*}} : (tensor<1x2x8xf32>, tensor<8xf32>) -> tensor<1x2x8xf32>
// The tied head reads the same vocabulary part of wte.
// GPT2: %[[L:.*]] = nn.linear %{{.*}}, %[[WTE]] : (tensor<1x4x8xf32>, tensor<5x8xf32>) -> tensor<1x4x5xf32>
// GPT2: nn.vocab_cross_entropy %[[L]]
