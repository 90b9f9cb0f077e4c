//===- Passes.td - shardc passes -----------------------------*- tablegen -*-===//
#ifndef SHARDC_PASSES
#define SHARDC_PASSES

include "mlir/Pass/PassBase.td"

def NNFusePatterns : Pass<"nn-fuse-patterns", "mlir::ModuleOp"> {
  let summary = "Recognise decomposed GELU, layer norm and attention";
  let description = [{
    Rewrites the op chains that exporters write for the fused nn ops into
    those ops, where the chain computes exactly the fused op's function
    (constants equal to the fused op's up to the element type's rounding):

    - `x * (1 + erf(x / sqrt(2))) * 0.5`, in any association and operand
      order (or `erf(x * (1/sqrt(2)))`) -> `nn.gelu` (exact form);
    - `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)` over the last
      dimension (mean as `sum_to` then a division by its size; the square
      as `pow 2` or a self-product) -> `nn.layer_norm`, absorbing a
      following per-channel multiplication (weight) and addition (bias);
    - `softmax(q k^T * c + mask) v` on [B, H, T, D] or [N, T, D] operands
      with equal batch dimensions, where `c` is the product of the
      compile-time scalar multiplications and divisions of q, k^T and the
      scores, and the additive mask, if any, is zero (no mask) or the causal
      0 / -inf pattern -> `nn.attention` (with `causal`, scale `c`); rank-3
      operands become [N, 1, T, D].

    A chain whose intermediate values have other uses is left alone, as is
    any variant (another constant, another mask, broadcast batch
    dimensions).
  }];
  let dependentDialects = ["::shardc::nn::NNDialect"];
}

def NNAutodiff : Pass<"nn-autodiff", "mlir::ModuleOp"> {
  let summary = "Build the training micro-step by reverse-mode differentiation";
  let description = [{
    From the model function `forward(tokens, targets, params...) -> loss`,
    builds `micro_step(tokens, targets, params..., grad accumulators...,
    accumulate) -> (loss, accumulators...)`: the forward ops, then the
    vector-Jacobian product of every op in reverse order (each op's
    DifferentiableOpInterface), gradients of values with several uses
    summed, and each parameter's gradient folded into its accumulator by
    `nn.accumulate` (in place). The forward function is replaced.

    With `recompute=block`, the forward ops of each transformer block
    (tagged `nn.block`) are re-emitted in backward just before the block's
    gradient, so only block inputs stay live from forward to backward
    (activation checkpointing); the numbers do not change. With
    `recompute=selective` (torchtitan's per-op policy) only the cheap ops
    are re-emitted: the GEMMs (`nn.linear`, `nn.batch_matmul`) and
    `nn.attention` keep their forward results, and their gradients read
    their forward operands; the element-wise, norm and layout ops are
    recomputed from them. The numbers do not change either.
  }];
  let dependentDialects = ["::shardc::nn::NNDialect"];
  let options = [
    Option<"entryName", "entry", "std::string", "\"forward\"",
           "name of the model function">,
    Option<"recompute", "recompute", "std::string", "\"none\"",
           "activations to recompute in backward: none, block or "
           "selective">,
  ];
}

def NNBuildOptimizer : Pass<"nn-build-optimizer", "mlir::ModuleOp"> {
  let summary = "Build the optimizer step: global-norm clipping and updates";
  let description = [{
    Adds `opt_step(params..., grads..., optimizer states..., optimizer,
    max_grad_norm) -> (grad_sq_norm, params..., states...)` for the
    parameters and gradient accumulators of `micro_step`: the squared global
    gradient norm, the clipping coefficient, and one `nn.adamw` (states
    exp_avg, exp_avg_sq) or `nn.sgd` (state momentum) per parameter, all
    updated in place. Hyper-parameters are runtime inputs, so one compiled
    step serves every learning-rate schedule.
  }];
  let dependentDialects = ["::shardc::nn::NNDialect"];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"",
           "adamw or sgd">,
  ];
}

def NNFuseLossGrad : Pass<"nn-fuse-loss-grad", "mlir::ModuleOp"> {
  let summary = "Compute the loss and its gradient in one pass over the logits";
  let description = [{
    Where a function computes `nn.cross_entropy` of some logits and
    `nn.cross_entropy_grad` of the same logits and targets with a loss
    gradient of exactly 1 (the loss is the result being differentiated),
    both become one `nn.cross_entropy_with_grad` placed at the loss. The
    numbers are unchanged; the logits are read once instead of twice.
  }];
}

def TPPartition : Pass<"tp-partition", "mlir::ModuleOp"> {
  let summary = "Tensor parallelism: torchtitan's plan with sequence "
                "parallelism on the forward graph";
  let description = [{
    With `tp` > 1, creates `shard.grid @mesh` with a tp axis innermost
    (abi::MeshGrid) and partitions the model function `forward` over it:
    q, k, v and MLP gate and up projections column-parallel (weights'
    output features split by tp rank), output and MLP down projections
    row-parallel (input features split); attention on H/tp heads; tokens,
    targets, norms, residuals, embedding lookup, LM head and loss on this
    rank's T/tp tokens. A `shard.all_gather` over the sequence feeds the
    column-parallel projections (one for q, k and v), a
    `shard.reduce_scatter` over the sequence follows each row-parallel
    one; autodiff mirrors them. Split parameters take their tp-local
    shapes and a `tp.dim` attribute naming the split dim (-1 for the
    ones every tp rank holds whole, whose gradients fsdp-shard-parameters
    sums over the tp axis). Heads or features tp does not divide are
    refused, naming them.
    Runs before fsdp-shard-parameters, which shards the tp-local
    parameters on dim 0.
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect",
                           "::shardc::fsdp::FSDPDialect",
                           "::shardc::nn::NNDialect"];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"1\"", "N or RxS (--mesh)">,
    Option<"tp", "tp", "int64_t", "1", "Tensor-parallel ranks (--tp)">,
    Option<"vocab", "vocab", "std::string", "\"parallel\"",
           "The embedding and LM head: 'parallel' (split by vocabulary rows "
           "where tp divides the vocabulary) or 'whole' (--tp-vocab)">,
  ];
}

def NNFloat8Linears : Pass<"nn-float8-linears", "mlir::ModuleOp"> {
  let summary = "Mark the transformer blocks' linears float8 (--float8)";
  let description = [{
    torchao's `convert_to_float8_training` with torchtitan's filter, at
    compile time: every `nn.linear` of the model function `forward` whose
    weight is a parameter gets `float8 = <recipe>` (dialects/nn/Float8.h),
    except the LM head (the linear whose result is the loss's logits, or
    whose weight is also an embedding table) and linears whose in or out
    features, or whose rows (tokens), are not multiples of 16: the FP8
    GEMMs take no others. Each of those stays in its dtype, with one
    remark naming its parameter. nn-autodiff gives the recipe to the
    linear's two backward GEMMs. A model with no eligible linear is an
    error naming --float8. Runs after tp-partition, so the shapes checked
    are the tp-local ones the GEMMs get.
  }];
  let options = [
    Option<"recipe", "recipe", "std::string", "\"tensorwise\"",
           "The torchao recipe: tensorwise or rowwise (--float8)">,
  ];
}

def FSDPShardParameters : Pass<"fsdp-shard-parameters", "mlir::ModuleOp"> {
  let summary = "Group parameters, shard them on a grid, gather them for use";
  let description = [{
    FSDP2's `fully_shard`, applied at compile time to the model function:
    creates `shard.grid @mesh` (`mesh=N`: shard over N devices; `mesh=RxS`:
    HSDP, replicate over R, shard over S), assigns every parameter to a
    group by the wrap policy (the first capture of `wrap` in its name; the
    rest form the root group), and replaces each parameter [d0, ...] by its
    local shard [ceil(d0/S), ...] (dim 0, padded as FSDP2 pads) followed by a
    `shard.all_gather` on the shard axis and, when padded, an `nn.slice` back
    to [d0, ...]. Under HSDP the shard first passes `fsdp.sync_grad` on the
    replicate axis, so that its gradient is all-reduced there; a parameter
    every tp rank holds whole (`tp.dim = -1`, from tp-partition) passes
    one on the tp axis. Autodiff then
    turns each all-gather into a reduce-scatter of the gradient.

    Mixed precision (`param-dtype=bf16`, FSDP2's MixedPrecisionPolicy): the
    f32 shard is cast to bf16 before the all-gather (half the bytes), the
    gathered bf16 parameter is used as it is where the target computes in
    bf16 (nn-propagate-dtype then carries bf16 through the model) and is
    widened for the f32 kernels of a target that does not, and its
    gradient is cast to `reduce-dtype` before the reduce-scatter; master
    weights and optimizer state stay f32.
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect",
                           "::shardc::fsdp::FSDPDialect",
                           "::shardc::nn::NNDialect"];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"1\"", "N or RxS">,
    Option<"tp", "tp", "int64_t", "1",
           "Tensor-parallel degree (the grid's innermost axis; tp-partition "
           "ran first)">,
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target: gathered parameters are widened to the dtype it "
           "computes in">,
    Option<"paramDtype", "param-dtype", "std::string", "\"f32\"",
           "element type parameters are gathered and used in: f32 or bf16">,
    Option<"reduceDtype", "reduce-dtype", "std::string", "\"f32\"",
           "element type gradients are reduce-scattered in: f32 or bf16">,
    Option<"wrap", "wrap", "std::string",
           "\"^(transformer\\\\.h\\\\.[0-9]+|model\\\\.layers\\\\.[0-9]+)\\\\.\"",
           "regex whose first capture names a parameter's group">,
  ];
}

def NNPropagateDtype : Pass<"nn-propagate-dtype", "mlir::ModuleOp"> {
  let summary = "Compute in bf16 from the bf16 parameters on, as FSDP2 does";
  let description = [{
    Run by fsdp-shard-parameters once it has gathered parameters in bf16
    (MixedPrecisionPolicy(param_dtype=bf16)), the model function computes
    in bf16, as a module of bf16 parameters does in PyTorch: every op with
    a bf16 operand whose lowering has typed kernels on the target (the
    GEMMs, norms, activations, attention, layout ops; passes/conversion/NNToRt/) gets
    bf16 results, its other float operands cast to bf16 (f32 constants
    become bf16 constants); an op that has only f32 kernels (the loss, the
    generic ops of imported models) gets its bf16 operands cast to f32, so
    the logits are upcast for the loss as transformers does. Function
    results keep their types (a cast back where needed). Gradients then
    follow the same types through nn-autodiff.

    Example (the target computes in bf16):
    ```mlir
    %w = shard.all_gather ... -> tensor<8x4xbf16>
    %y = nn.linear %x, %w : (tensor<2x4xf32>, tensor<8x4xbf16>) -> tensor<2x8xf32>
    %l = nn.cross_entropy %y, %t : ...
    // becomes
    %xb = nn.cast %x : tensor<2x4xf32> to tensor<2x4xbf16>
    %y = nn.linear %xb, %w : (...) -> tensor<2x8xbf16>
    %yf = nn.cast %y : tensor<2x8xbf16> to tensor<2x8xf32>
    %l = nn.cross_entropy %yf, %t : ...
    ```
  }];
  let dependentDialects = ["::shardc::nn::NNDialect"];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target: ops compute in bf16 where it has typed kernels">,
  ];
}

def FSDPReshard : Pass<"fsdp-reshard", "mlir::ModuleOp"> {
  let summary = "Free gathered parameters after forward and gather again";
  let description = [{
    `reshard-after-forward=true` (FSDP2's default): in `micro_step`, every
    use of a gathered parameter of a non-root group after the loss is
    computed reads a new all-gather placed before the first such use, so the
    forward copy dies after forward; the root group stays gathered, as in
    FSDP2. `false` keeps every group gathered until its last use. An integer
    N (dividing the shard axis) keeps each rank's 1/N of the gathered
    parameter (`fsdp.reshard`) and gathers it back in backward within groups
    of N consecutive ranks (`fsdp.gather_group`), as FSDP2's
    `reshard_after_forward=N`.
  }];
  let options = [
    Option<"reshardAfterForward", "reshard-after-forward", "std::string",
           "\"true\"", "true, false or N">,
  ];
}

def FSDPPrefetch : Pass<"fsdp-prefetch", "mlir::ModuleOp"> {
  let summary = "Order all-gathers N groups ahead of the compute that uses them";
  let description = [{
    Places the forward all-gathers of each group just before the first
    compute of the group `prefetch-forward` groups earlier (the first
    group's at the start: as early as possible), and the backward
    all-gathers `prefetch-backward` groups ahead in backward order.
    Reduce-scatters (and HSDP all-reduces) move up to just after the
    gradient they reduce is final, with the ops between (the padding's
    slice_grad, the cast to the reduce dtype of a bf16 gradient), so that
    the unsharded gradient dies early.
  }];
  let options = [
    Option<"prefetchForward", "prefetch-forward", "int64_t", "1",
           "groups gathered ahead in forward">,
    Option<"prefetchBackward", "prefetch-backward", "int64_t", "1",
           "groups gathered ahead in backward">,
  ];
}

def FSDPBucketGradients : Pass<"fsdp-bucket-gradients", "mlir::ModuleOp"> {
  let summary = "One reduce-scatter (and HSDP all-reduce) per FSDP group";
  let description = [{
    FSDP2's per-group gradient reduction, compiled: the reduce-scatters of
    one FSDP group (`fsdp.group`, same grid axes and element type), with the
    HSDP all-reduce that follows each, become one. Each gradient, padded to
    P blocks on dim 0, is viewed as [P, n_i]; the views are concatenated on
    dim 1 into [P, sum n_i], reduce-scattered once into [1, sum n_i]
    (all-reduced once under HSDP), and sliced back into each parameter's
    shard. The bucket goes where the group's last gradient is final; users
    of an earlier gradient's shard move after it. The sums are the same
    element by element, so the curves are unchanged. f32 groups only (the
    pack and unpack kernels are f32). A gradient of 1 GiB or more is
    reduced alone: a bucket would hold it twice (llama3-8b's two
    vocabulary-sized gradients: 4 GiB at the end of backward) for a
    collective it fills alone anyway.
  }];
}

def FSDPSyncOnce : Pass<"fsdp-sync-once", "mlir::ModuleOp"> {
  let summary = "Reduce gradients once per step under gradient accumulation";
  let description = [{
    FSDP2's `set_requires_gradient_sync(False)` pattern, compiled: adds
    `micro_step_nosync`, which accumulates each parameter's unsharded
    gradient into a full-size accumulator (`grad_full.<param>`) and runs no
    reduction, and makes `micro_step` (the last micro-batch) add that
    accumulator before the reduce-scatter, whose result becomes the sharded
    gradient. The runtime calls the no-sync step for every micro-batch but
    the last.
  }];
}

def FSDPShardOptimizer : Pass<"fsdp-shard-optimizer", "mlir::ModuleOp"> {
  let summary = "Global gradient norm across the shards of every parameter";
  let description = [{
    The optimizer step updates each rank's shards only; the squared
    gradient norm it clips by is summed over the shard axis
    (`shard.all_reduce`) so that every rank clips by the global norm.
  }];
}

def ConvertNNToRt : Pass<"convert-nn-to-rt", "mlir::ModuleOp"> {
  let summary = "Lower nn model functions to rt step functions";
  let description = [{
    Turns every public model function into `shardc_<name>(ctx, params,
    state, io, arena)`. Arguments are views of the region their role names
    (`nn.param`: parameters, `nn.state`: persistent training state,
    `nn.input`: inputs); results go to a named io slot (`nn.output`) or in
    place over the argument they update (`nn.updates`, checked to be safe);
    every other tensor is an `rt.alloc`, every nn op `rt.kernel` calls of
    the runtime ABI (runtime/abi/kernels.def), and every collective a typed
    `rt.all_gather`, `rt.reduce_scatter` or `rt.all_reduce` on the
    communication stream. Reshapes alias their input. An op on an element
    type the target does not compute in is an error naming the target.
    Slots are shared by name across functions; the layout of the regions is
    recorded in the module's `rt.manifest`, which the runtime reads.
  }];
  let dependentDialects = ["::shardc::rt::RtDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target whose element types the kernels compute in">,
    Option<"allowTf32", "allow-tf32", "bool", "false",
           "Record in the manifest (abi::kManifestAllowTf32) that the f32 "
           "GEMMs may run on TF32 tensor cores">,
  ];
}

def RtFloat8AllGather : Pass<"rt-float8-all-gather", "mlir::func::FuncOp"> {
  let summary = "FSDP2's float8 all-gather: the shard axis moves fp8 bytes";
  let description = [{
    Under `--float8=tensorwise` (torchao's `enable_fsdp_float8_all_gather`):
    an FSDP `rt.all_gather` of a parameter (no subgroup, over an axis of
    several ranks) whose every reader is a tensorwise e4m3 `cast_fp8`
    gathers the shard cast to fp8 with the weight's global scale instead
    (`cast_fp8_scaled`, then an `rt.all_gather` of `f8E4M3FN` bytes): the
    forward cast reads the gathered bytes, a transposed cast becomes
    `transpose_fp8`, and both read the global scale. The scales are made
    once, before the first such gather, for every such weight: each shard's
    amax (`amax_group`), one all-gather of those amaxes and `fp8_scales`
    (torchao's `precompute_float8_dynamic_scale_for_fsdp`). The fp8 weight
    is the gather-then-cast's bit for bit. A shard must be a view of the
    parameters or the one `cast` of one (a bf16 param dtype). Runs before
    `rt-coalesce-collectives`.
  }];
}

def RtFloat8TpScales : Pass<"rt-float8-tp-scales", "mlir::func::FuncOp"> {
  let summary = "Tensorwise float8 scales of the whole tensor under --tp";
  let description = [{
    On a mesh with a tp axis, each tensorwise `cast_fp8` (rowwise 0) takes
    its scale from the max of the tp ranks' amaxes, as torchao's casts of a
    DTensor do: `amax_group` of its operand, an `rt.all_gather` of that
    amax over the tp axis, `fp8_scales` into the cast's scale buffer, then
    `cast_fp8_scaled` into its fp8 buffer. An operand every tp rank holds
    alike keeps its own scale; one split over the tp ranks (a parallel
    weight, a feature-split activation or gradient) is cast as the whole
    tensor would be. Runs after `rt-float8-all-gather`.
  }];
}

def RtFuseAmax : Pass<"rt-fuse-amax", "mlir::func::FuncOp"> {
  let summary = "A float8 cast's amax written by the kernel that writes its input";
  let description = [{
    --float8=tensorwise: a tensorwise `cast_fp8` (rowwise 0) whose input is
    the whole output of a kernel that can write that output's amax as well
    (kernels.def's `amax`: `add_rms_norm`'s y, `swiglu`'s y,
    `swiglu_grad`'s dg and du, `rotary`'s y, and `rms_norm_grad`'s dx
    where it adds the residual gradient: its `add_dr` 1 becomes 2), on the
    same stream with nothing between
    them touching the input, becomes `fp8_scales` of that amax and
    `cast_fp8_scaled`: the input is read once instead of twice, as
    torch.compile fuses torchao's amax into the op before it. An
    `amax_group` of one such tensor (rt-float8-tp-scales) is dropped, its
    amax being the producer's. The same bytes and scales, bit for bit.
    Runs after `rt-float8-tp-scales`, before memory planning.

    Example:
    ```mlir
    rt.kernel %ctx, "swiglu"(%g, %u, %y) {dtype = bf16, ints = array<i64: 256, 1, 0>, floats = array<f64>}
    rt.kernel %ctx, "cast_fp8"(%y, %q, %s, %qt) {dtype = bf16, ints = array<i64: 8, 32, 1, 7, 0, 0, 1>, floats = array<f64>}
    // becomes
    rt.kernel %ctx, "swiglu"(%g, %u, %y, %a) {dtype = bf16, ints = array<i64: 256, 1, 1>, floats = array<f64>}
    rt.kernel %ctx, "fp8_scales"(%a, %s) {ints = array<i64: 1, 1, 7, 1>, floats = array<f64>}
    rt.kernel %ctx, "cast_fp8_scaled"(%y, %s, %q, %qt) {dtype = bf16, ints = array<i64: 8, 32, 1, 7, 0, 1>, floats = array<f64>}
    ```
  }];
}

def RtCoalesceCollectives : Pass<"rt-coalesce-collectives", "mlir::func::FuncOp"> {
  let summary = "One all-gather per FSDP group";
  let description = [{
    Merges adjacent `rt.all_gather`s of one FSDP group (same axis and
    stream, separated only by events and allocations) into one
    `rt.all_gather` of several inputs a dtype (the `all_gather_group`
    kernel; under the float8 all-gather a group's fp8 bytes and its other
    parameters are two),
    as FSDP2 gathers a group's parameters in one collective: the local
    shards are copied into a planned contiguous buffer, gathered in one
    exchange into a planned buffer, and copied out to each parameter. Runs
    before memory planning; the events of the merged kernels are kept.
  }];
}

def RtWorkingCopy : Pass<"rt-working-copy", "mlir::ModuleOp"> {
  let summary = "One rank's bf16 weights as state, written by the optimizer step";
  let description = [{
    On a mesh of one rank, a bf16 param dtype gathers each parameter as a
    cast of its f32 master weights and a one-rank `rt.all_gather` (a copy),
    before each use in every micro-step. FSDP2 on one rank keeps the bf16
    parameters between steps instead; so does this pass:

    - in `shardc_micro_step` and `shardc_micro_step_nosync`, an
      `rt.all_gather` whose every input is an allocation written only by an
      f32-to-bf16 `cast` of a whole parameter is removed with its casts;
      its outputs' readers read the parameter's working copy, a new state
      slot `work.<name>` (bf16, the parameter's shape; abi::kStateWork);
    - `shardc_opt_step` ends with a cast of each such parameter into its
      working copy, after the updates;
    - a new entry, `shardc_refresh`, does those casts alone: the runtime
      runs it after the parameters are initialized or loaded;
    - the manifest gains the slots (state_bytes grows) and the entry.

    Checkpoints skip the working copies. Meshes of several ranks gather
    shards and are left as they are, as is a module with no optimizer step;
    `--offload=cpu` does not run this pass. Runs after
    `rt-coalesce-collectives`, before memory planning.
  }];
}

def RtFuseEpilogues : Pass<"rt-fuse-epilogues", "mlir::func::FuncOp"> {
  let summary = "GELU and its gradient as GEMM epilogues, where the target has them";
  let description = [{
    On a target whose GEMMs have epilogues (the CUDA target: cuBLASLt's
    GELU_AUX_BIAS and DGELU_BGRAD; the CPU target: one threaded pass over
    the GEMM's output), fuses a `linear` whose output only a
    tanh `gelu` reads into `linear_gelu` (the pre-activation kept for the
    backward pass as the epilogue's aux output), and a `linear` whose
    output only a tanh `gelu_grad` reads into `linear_dgelu`, with the
    `sum_to` of the result over its leading dimensions (the bias gradient)
    as its BGRAD output. The fused kernel takes the GEMM's place; the
    buffers it writes early are allocated above it. Other targets: no
    change. Runs after convert-nn-to-rt, before memory planning.

    Example:
    ```mlir
    rt.kernel %ctx, "linear"(%x, %w, %b, %pre) {ints = array<i64: 8, 4, 16, 1, 1>, floats = array<f64>}
    %y = rt.alloc 512 : !rt.buffer
    rt.kernel %ctx, "gelu"(%pre, %y) {ints = array<i64: 128, 1>, floats = array<f64>}
    // becomes
    %y = rt.alloc 512 : !rt.buffer
    rt.kernel %ctx, "linear_gelu"(%x, %w, %b, %pre, %y) {ints = array<i64: 8, 4, 16, 1, 1>, floats = array<f64>}
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target whose GEMM epilogues are used">,
  ];
}

def RtFuseBiasGrad : Pass<"rt-fuse-bias-grad", "mlir::func::FuncOp"> {
  let summary = "A bias gradient as its weight-gradient GEMM's epilogue";
  let description = [{
    On a target whose GEMMs have epilogues (CUDA: cuBLASLt's BGRADA and
    BGRADB; the CPU: the column sums in the GEMM's kernel), a `sum_to` of
    dy over its leading dimensions (a bias gradient) right after the
    `matmul` that sums dy's rows into the weight gradient (only views,
    allocations and event records between; one stream, dtype and output
    type) becomes one `matmul_bgrad` in the matmul's place, writing both;
    db is defined above it. dy is then read once. Other targets: no change.
    Runs after rt-fuse-casts, before memory planning.

    Example:
    ```mlir
    rt.kernel %ctx, "matmul"(%x, %dy, %dw) {ints = array<i64: 32, 64, 16, 1, 0, 0, 0>, floats = array<f64>}
    %db = rt.alloc 64 : !rt.buffer
    rt.kernel %ctx, "sum_to"(%dy, %db) {ints = array<i64: 2, 16, 0, 0, 64, 16, 0, 1>, floats = array<f64>}
    // becomes
    %db = rt.alloc 64 : !rt.buffer
    rt.kernel %ctx, "matmul_bgrad"(%x, %dy, %dw, %db) {ints = array<i64: 32, 64, 16, 1, 0, 0, 0, 1>, floats = array<f64>}
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target whose GEMM epilogues are used">,
  ];
}

def RtFuseSwiglu : Pass<"rt-fuse-swiglu", "mlir::func::FuncOp"> {
  let summary = "SwiGLU's silu and product, and their gradient, one kernel each";
  let description = [{
    On a target with the fused kernels (the CPU and CUDA targets), Llama's
    MLP product silu(g) u becomes one `swiglu` kernel, and its gradient
    (`mul` of dy and u, `silu_grad`, `mul` of dy and silu(g)) one
    `swiglu_grad`: a pass over [tokens, intermediate] elements instead of
    two forward and three backward, and no silu(g) kept for backward. The
    muls are of two contiguous tensors of one shape, in either order; all
    on one dtype and stream. On bf16 the fused kernels round where the
    unfused ones did: the same bits. The silu a recomputed forward writes
    (--recompute=selective) is matched as the forward's is. Other targets:
    no change. Runs after convert-nn-to-rt, before memory planning.

    Example:
    ```mlir
    rt.kernel %ctx, "silu"(%g, %s) {ints = array<i64: 256, 0>, floats = array<f64>}
    rt.kernel %ctx, "mul"(%s, %u, %y) {ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>, floats = array<f64>}
    // becomes
    rt.kernel %ctx, "swiglu"(%g, %u, %y) {ints = array<i64: 256, 0>, floats = array<f64>}
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target whose fused kernels are used">,
  ];
}

def RtFuseResidualNorm : Pass<"rt-fuse-residual-norm", "mlir::func::FuncOp"> {
  let summary = "A residual add fused with the layer or RMS norm after it";
  let description = [{
    On a target with the fused kernels (the CPU and CUDA targets), an `add`
    of two
    tensors of one shape [M, C] followed by the `layer_norm` or `rms_norm`
    of its sum (the next kernel on the stream, on the same dtype: f32 or
    bf16) becomes `add_layer_norm` or `add_rms_norm`: one kernel writing
    the sum (the residual stream, which the next block and the norm's
    gradient read) and the normalized rows; on bf16 the norm reads the sum
    rounded, as the add wrote it.
    The norm is the next norm of the sum on the add's stream; what lies
    between must not touch the pair's buffers. Where the add's stream
    records events or runs kernels between (the add that ends an FSDP group
    and the norm that begins the next), the fused kernel takes the add's
    place and the norm's waits move before it, if each waits on an event
    recorded before the add.
    Other targets: no change. Runs after convert-nn-to-rt, before memory
    planning.

    Example:
    ```mlir
    rt.kernel %ctx, "add"(%x, %h, %s) {ints = array<i64: 2, 8, 32, 32, 1, 32, 1>, floats = array<f64>}
    rt.kernel %ctx, "rms_norm"(%s, %w, %y) {ints = array<i64: 8, 32>, floats = array<f64: 1.0e-06>}
    // becomes
    rt.kernel %ctx, "add_rms_norm"(%x, %h, %w, %s, %y) {ints = array<i64: 8, 32>, floats = array<f64: 1.0e-06>}
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target whose fused kernels are used">,
    Option<"bf16", "bf16", "bool", "true",
           "Fuse bf16 adds and norms too (else f32 ones only)">,
  ];
}

def RtFuseNormGradAdd : Pass<"rt-fuse-norm-grad-add", "mlir::func::FuncOp"> {
  let summary = "The residual gradient's add fused into the norm gradient";
  let description = [{
    On a target with the fused residual-norm kernels (the CPU and CUDA
    targets), a `layer_norm_grad` or `rms_norm_grad` whose dx only an
    `add` of the norm's shape [M, C] reads (the residual stream's gradient
    plus the norm's) writes the add's output itself: its `add_dr` integer
    set and the other operand of the add its last buffer `dr`. The fused
    kernel rounds the norm's gradient to the dtype before adding and rounds
    the sum, as the two kernels did: the same bits, one launch and one
    [M, C] write and read fewer. llm.c's layernorm_backward adds into the
    residual gradient the same way. Other targets: no change. Runs after
    convert-nn-to-rt, before memory planning.

    Example:
    ```mlir
    rt.kernel %ctx, "rms_norm_grad"(%x, %w, %dy, %dx, %dw) {ints = array<i64: 8, 32, 0, 0>, floats = array<f64: 1.0e-06>}
    rt.kernel %ctx, "add"(%r, %dx, %s) {ints = array<i64: 2, 0, 8, 32, 32, 1, 32, 1>, floats = array<f64>}
    // becomes
    rt.kernel %ctx, "rms_norm_grad"(%x, %w, %dy, %s, %dw, %r) {ints = array<i64: 8, 32, 0, 1>, floats = array<f64: 1.0e-06>}
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target whose fused kernels are used">,
  ];
}

def RtFusedAttention : Pass<"rt-fused-attention", "mlir::func::FuncOp"> {
  let summary = "bf16 attention and its gradient through the fused library";
  let description = [{
    On a target with a fused-attention library (CUDA: cuDNN's SDPA), a bf16
    `attention` and the `attention_grad` on its q, k and v become `sdpa`,
    which also writes each query row's log-sum-exp (a new f32 [B,H,T]
    buffer), and `sdpa_grad`, which reads the forward's output and that
    instead of recomputing the forward. Each gets a workspace buffer of
    `abi::sdpaWorkspaceBytes`; sdpa_grad's last int is `deterministic`
    (--deterministic-attention), which also sizes its workspace. Every
    other bf16 `attention` (a forward
    recomputed for the backward, inference) becomes `sdpa` as well. f32
    attention stays on the target's kernels; other targets: no change. Runs after convert-nn-to-rt, before memory
    planning.

    Example (B=1 H=2 G=2 T=S=16 D=8, causal):
    ```mlir
    rt.kernel %ctx, "attention"(%q, %k, %v, %o) {dtype = bf16, ints = array<i64: 1, 2, 2, 16, 16, 8, 1, 1>, floats = array<f64: 0.35>}
    rt.kernel %ctx, "attention_grad"(%q, %k, %v, %do, %dq, %dk, %dv) {dtype = bf16, ints = array<i64: 1, 2, 2, 16, 16, 8, 1, 1>, floats = array<f64: 0.35>}
    // becomes
    %lse = rt.alloc 128 : !rt.buffer
    rt.kernel %ctx, "sdpa"(%q, %k, %v, %o, %lse, %ws) {dtype = bf16, ints = array<i64: 1, 2, 2, 16, 16, 8, 1, 1, 4194304>, floats = array<f64: 0.35>}
    rt.kernel %ctx, "sdpa_grad"(%q, %k, %v, %o, %lse, %do, %dq, %dk, %dv, %ws2) {dtype = bf16, ...}
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target whose fused attention is used">,
    Option<"deterministic", "deterministic", "bool", "true",
           "sdpa_grad's last int: 1, the deterministic backward (workspace "
           "with an O(T S) dP buffer); 0, the non-deterministic one (dQ "
           "accumulated in f32 in any order, O(T D) workspace)">,
  ];
}

def RtChunkLossHead : Pass<"rt-chunk-loss-head", "mlir::func::FuncOp"> {
  let summary = "The LM head and its loss over row chunks: no whole logits";
  let description = [{
    On a target with the kernel (the CPU and CUDA targets), the LM head's
    `linear`,
    the fused `cross_entropy_with_grad` (its gradient in place of the
    logits) and the head's two gradient GEMMs (`linear` for dh, `matmul`
    for dw) become one `linear_cross_entropy`, which computes R rows of
    logits at a time in a scratch buffer: the [tokens, vocab] logits are
    never all in memory. The scratch's rows are `abi::lossHeadRowStride`
    elements of the head's dtype (f32, or bf16 on a bf16 head; the
    vocabulary rounded up to 64, so that each row is aligned for cuBLASLt).
    R is `rows`, or as many rows as fit 256 MiB of logits; where R covers
    every row nothing changes. Runs after
    convert-nn-to-rt, before memory planning.

    Example:
    ```mlir
    rt.kernel %ctx, "linear"(%h, %w, %L) {ints = array<i64: 8, 4, 100, 0, 0>, floats = array<f64>}
    rt.kernel %ctx, "cross_entropy_with_grad"(%L, %t, %loss, %L) {ints = array<i64: 8, 100, -100>, floats = array<f64>}
    rt.kernel %ctx, "linear"(%L, %w, %dh) {ints = array<i64: 8, 100, 4, 1, 0>, floats = array<f64>}
    rt.kernel %ctx, "matmul"(%L, %h, %dw) {ints = array<i64: 100, 8, 4, 1, 0>, floats = array<f64>}
    // with rows = 3 becomes
    rt.kernel %ctx, "linear_cross_entropy"(%h, %w, %t, %loss, %dh, %dw, %scratch) {ints = array<i64: 8, 4, 100, 3, -100>, floats = array<f64>}
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target whose kernels are used">,
    Option<"rows", "rows", "int64_t", "0",
           "Rows of logits per chunk (0: as many as fit 256 MiB)">,
  ];
}

def RtAttentionLayout : Pass<"rt-attention-layout", "mlir::func::FuncOp"> {
  let summary = "Attention reads q, k, v and writes o and the gradients in place";
  let description = [{
    An `attention` or `sdpa` (and the gradient kernel reading its q, k and
    v) whose q, k and v are [B,T,heads,D] -> [B,heads,T,D] transposes of
    rows (of a dense buffer, or columns sliced out of a fused QKV
    projection's output), whose o is only transposed back, and whose
    gradients are transposed back (and padded into the columns of one
    [B*T, W] gradient and summed), reads and writes those rows in place:
    layout `abi::kAttentionRows` with each operand's row stride. The
    transposes, slices, pads and adds are gone. A rotary embedding
    (`rotary`, `rotary_table`) between a transpose and the attention (q and
    k of Llama), or between a gradient and its transpose back, takes the
    same layout: it reads the projection's rows and writes rows, and the
    transposes around it are gone too. Any target; runs after
    convert-nn-to-rt and rt-fused-attention, before memory planning.

    Example:
    ```mlir
    rt.kernel %ctx, "slice"(%qkv, %x) {ints = array<i64: 32, 24, 0, 8, 1, 0>, floats = array<f64>}
    rt.kernel %ctx, "transpose"(%x, %q) {ints = array<i64: 4, 0, 2, 16, 2, 4, 0, 2, 1, 3>, floats = array<f64>}
    // ... k and v likewise at columns 8 and 16
    rt.kernel %ctx, "attention"(%q, %k, %v, %o) {ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 0, 0, 0, 0, 0, 0>, floats = array<f64: 0.5>}
    rt.kernel %ctx, "transpose"(%o, %z) {ints = array<i64: 4, 0, 2, 2, 16, 4, 0, 2, 1, 3>, floats = array<f64>}
    // becomes
    %q = rt.view %qkv[0] size 1504 : !rt.buffer
    rt.kernel %ctx, "attention"(%q, %k, %v, %z) {ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 0, 1, 24, 24, 24, 8>, floats = array<f64: 0.5>}
    ```
  }];
}

def RtFuseCasts : Pass<"rt-fuse-casts", "mlir::func::FuncOp"> {
  let summary = "A gradient's bf16 -> f32 cast fused into the kernel writing it";
  let description = [{
    A bf16 `matmul` or `sum_to` whose output only a bf16 -> f32 `cast`
    reads, or a bf16 `layer_norm_grad` whose dw and db only such casts
    read, writes the cast's f32 output itself (`y_f32`, `wb_f32`), without
    rounding it to bf16 first. Any target; runs after convert-nn-to-rt,
    before the view passes and memory planning.

    Example:
    ```mlir
    rt.kernel %ctx, "matmul"(%a, %b, %x) {dtype = bf16, ints = array<i64: 8, 4, 8, 1, 0, 1, 0>, floats = array<f64>}
    rt.kernel %ctx, "cast"(%x, %y) {ints = array<i64: 64, 1, 0>, floats = array<f64>}
    // becomes
    rt.kernel %ctx, "matmul"(%a, %b, %y) {dtype = bf16, ints = array<i64: 8, 4, 8, 1, 0, 1, 1>, floats = array<f64>}
    ```
  }];
}

def RtConcatViews : Pass<"rt-concat-views", "mlir::func::FuncOp"> {
  let summary = "A concatenation's contiguous parts written in place";
  let description = [{
    A `concat_part` whose part is contiguous in the result (outer 1) and is
    an allocation no other concatenation takes becomes a view of the
    result: the part's producer writes there, and the copy is gone. The
    result's allocation moves before the part's. Any target; runs before
    memory planning (which keeps an allocation live while its views are).

    Example:
    ```mlir
    %x = rt.alloc 256 : !rt.buffer
    rt.kernel %ctx, "fill"(%x) {ints = array<i64: 64, 0>, floats = array<f64: 1.0>}
    rt.kernel %ctx, "concat_part"(%x, %y) {ints = array<i64: 1, 64, 128, 64, 1, 0>, floats = array<f64>}
    // becomes
    %x = rt.view %y[256] size 256 : !rt.buffer
    rt.kernel %ctx, "fill"(%x) {ints = array<i64: 64, 0>, floats = array<f64: 1.0>}
    ```
  }];
}

def RtSliceViews : Pass<"rt-slice-views", "mlir::func::FuncOp"> {
  let summary = "Contiguous slices read in place";
  let description = [{
    A `slice` that is contiguous in its source (outer 1), of a transient
    buffer, into an allocation only it writes, becomes a view of the
    source. Any target; runs before memory planning.

    Example:
    ```mlir
    %y = rt.alloc 256 : !rt.buffer
    rt.kernel %ctx, "slice"(%x, %y) {ints = array<i64: 1, 128, 64, 64, 1, 0>, floats = array<f64>}
    // becomes
    %y = rt.view %x[256] size 256 : !rt.buffer
    ```
  }];
}

def RtGroupElementwise : Pass<"rt-group-elementwise", "mlir::func::FuncOp"> {
  let summary = "One launch for element-wise kernels over adjacent views";
  let description = [{
    A run of in-place `accumulate`s (acc = out) over consecutive views of one
    region, each reading consecutive views of one buffer with the same
    control buffer and stream (a group's gradients after its
    reduce-scatter), or of `cast`s between consecutive views of two buffers
    with the same dtypes (the optimizer step's bf16 working copies), becomes
    one launch over views spanning them. The same values. Any target; runs
    after rt-slice-views and rt-working-copy.

    Example:
    ```mlir
    rt.kernel %ctx, "accumulate"(%a1, %g1, %c, %a1) {ints = array<i64: 64>, floats = array<f64>}
    rt.kernel %ctx, "accumulate"(%a2, %g2, %c, %a2) {ints = array<i64: 8>, floats = array<f64>}
    // becomes
    rt.kernel %ctx, "accumulate"(%a, %g, %c, %a) {ints = array<i64: 72>, floats = array<f64>}
    ```
  }];
}

def RtGroupOptimizer : Pass<"rt-group-optimizer", "mlir::func::FuncOp"> {
  let summary = "One launch for the updates and the norm of many parameters";
  let description = [{
    On a target with grouped kernels (the CPU and CUDA targets), replaces the
    gradient norm's chain of per-parameter `squared_norm` and scalar `add`
    kernels by one `squared_norm_group`, and a run of `adamw` kernels with
    the same hyper-parameters, clipping coefficient and stream by one
    `adamw_group`, at most 32 tensors a launch. The grouped kernels compute
    the same values in the same order. Other targets: no change. Runs
    after convert-nn-to-rt, before memory planning.

    Example:
    ```mlir
    rt.kernel %ctx, "adamw"(%p1, %g1, %m1, %v1, %h, %c, %p1, %m1, %v1) {ints = array<i64: 64, 0>, floats = array<f64>}
    rt.kernel %ctx, "adamw"(%p2, %g2, %m2, %v2, %h, %c, %p2, %m2, %v2) {ints = array<i64: 8, 1>, floats = array<f64>}
    // becomes
    rt.kernel %ctx, "adamw_group"(%h, %c, %p1, %g1, %m1, %v1, %p1, %m1, %v1, %p2, %g2, %m2, %v2, %p2, %m2, %v2) {ints = array<i64: 2, 64, 0, 8, 1>, floats = array<f64>}
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target whose grouped kernels are used">,
  ];
}

def RtOffloadToHost : Pass<"rt-offload-to-host", "mlir::ModuleOp"> {
  let summary = "FSDP2's CPU offload: host regions, host copies, the optimizer on the host";
  let description = [{
    `--offload=cpu` (FSDP2's CPUOffloadPolicy). The parameters, state and
    io regions live in pinned host memory that device kernels may address
    (mapped); this pass makes the device's bulk traffic to them explicit
    copies on the copy stream (stream 2), and the optimizer step a host
    entry:

    - before a device op that reads a parameter (the shard an all-gather
      sends, a kernel's weight on one rank, the cast of a bf16 gather) the
      parameter is copied into a fresh arena buffer on the copy stream,
      which first waits for the compute stream at that point (so that the
      planned buffer is free); the op's stream waits for the copy. The copy
      is issued where the op is, so an all-gather prefetched N groups ahead
      has its copy prefetched as far;
    - a collective's host operands (io, state) are copied in before it and
      out after it (the copy stream waits for the collective; the compute
      stream for the copy out), since NCCL reads and writes device memory;
    - other kernels address host memory in place (a gradient is
      accumulated into its host slot by the kernel that reduces it, so
      each group's gradient goes to the host as soon as it is final);
    - `shardc_opt_step` is marked `rt.on_host`: the runtime runs it with
      the CPU backend's kernels over the host regions and a host arena.

    The manifest records `offload = "cpu"`. Runs after the rt rewrites,
    before memory planning (the copies' buffers are planned with the rest).
  }];
}

def RtPredict : Pass<"rt-predict", "mlir::ModuleOp"> {
  let summary = "Predict each step function's time on a machine";
  let description = [{
    Plays each step function out on `machine` (a bundled GPU or a
    calibration file, target/Machine.h), in program order, with a clock per
    stream:
    - a kernel costs the larger of its FLOPs over the attained FLOP/s (a
      GEMM by its shape, attention at its own rate) and the bytes of its
      buffers over the attained bandwidth, plus the launch overhead;
    - a collective costs a ring over its axis: P - 1 steps (twice for an
      all-reduce) of latency plus a P-th of the full buffer over the link's
      bandwidth, NVLink within a node, the node's network shared by its
      GPUs across nodes (`gpus-per-node` GPUs a node, ranks in mesh order);
    - an event wait moves its stream's clock to the recording's. On a
      machine whose streams run in order (the CPU backend) one clock serves
      every stream.
    The function's time is its last clock; the exposed communication is
    that time less the compute stream's busy time. GEMMs run in bf16 when
    parameters are gathered in bf16, else in f32. Records the result as the
    function's `rt.predict` and the machine as the module's
    `rt.predict_machine`; the report prints them. Runs before memory
    planning, while every transient buffer still has its size.

    Example (one kernel and a collective beside it on h100-sxm):
    ```mlir
    func.func @shardc_micro_step(...) attributes {rt.predict = {communication = 1.2e-05 : f64, compute = 4.1e-06 : f64, costs = [...], exposed = 8.0e-06 : f64, seconds = 1.2e-05 : f64}}
    ```
  }];
  let options = [
    Option<"machine", "machine", "std::string", "\"h100-sxm\"",
           "A bundled machine name or a calibration file">,
    Option<"gpusPerNode", "gpus-per-node", "int64_t", "0",
           "GPUs a node (0: the machine's)">,
  ];
}

def RtPlanMemory : Pass<"rt-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Place transient buffers in one arena by liveness";
  let description = [{
    Replaces every `rt.alloc` of a step function by an `rt.view` of its
    arena argument (the last argument) at an offset chosen so that buffers
    whose live ranges overlap never share bytes (greedy, largest first,
    lowest fitting offset, 64-byte aligned). Records the arena size, the
    planned peak of transient memory, as the function's `rt.arena_bytes`.
  }];
}

def ConvertRtToLLVM : Pass<"convert-rt-to-llvm", "mlir::ModuleOp"> {
  let summary = "Lower rt step functions to launch tables (LLVM globals)";
  let description = [{
    Each step function `shardc_<entry>` becomes the constant int64 array
    `shardc_program_<entry>`, the launch table of runtime/abi/abi.h that
    the runtime's backend walks: kernel launches (kernel id, stream,
    buffers as region and byte offset, ints, floats), event records and
    waits; typed collectives become the ABI's collective kernels.
    rt.constant values go to the 64-byte aligned `shardc_constants`. The
    module's manifest, completed with each entry's arena size, their
    maximum `arena_bytes` and `constants_bytes`, becomes the NUL-terminated
    JSON global `shardc_manifest`. The module then holds only globals, so
    LLVM code generation costs time linear in the launches.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // SHARDC_PASSES
