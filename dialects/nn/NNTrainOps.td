//===- NNTrainOps.td - gradient, reduction and optimizer ops -*- tablegen -*-===//
//
// The ops the training passes emit: backward kernels of the forward ops,
// reductions, gradient accumulation and optimizer updates. Included by
// NNOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_NN_TRAIN_OPS
#define SHARDC_NN_TRAIN_OPS

//===----------------------------------------------------------------------===//
// Generic tensor ops
//===----------------------------------------------------------------------===//

def NN_FillOp : NN_Op<"fill", [Pure]> {
  let summary = "a tensor filled with one value";
  let description = [{
    Example:
    ```mlir
    %one = nn.fill {value = 1.0 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def NN_MatmulOp : NN_Op<"matmul", [Pure]> {
  let summary = "2-D matrix product with optional transposes";
  let description = [{
    `op(a) @ op(b)` where `op` transposes when `transpose_a` / `transpose_b`
    is set: [M, K] x [K, N] -> [M, N]. Emitted for weight gradients.
    `float8` and `float8_grad` ("lhs" or "rhs": the operand that is an
    output gradient) as nn.linear's: the weight gradient of a float8
    linear.

    Example:
    ```mlir
    %dw = nn.matmul %dy, %x {transpose_a} : (tensor<16x48xf32>, tensor<16x32xf32>) -> tensor<48x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                   UnitAttr:$transpose_a, UnitAttr:$transpose_b,
                   OptionalAttr<StrAttr>:$float8,
                   OptionalAttr<StrAttr>:$float8_grad);
  let results = (outs NN_FloatTensor:$result);
  let builders = [
    OpBuilder<(ins "::mlir::Type":$type, "::mlir::Value":$lhs,
                   "::mlir::Value":$rhs, "bool":$transpose_a,
                   "bool":$transpose_b), [{
      build($_builder, $_state, type, lhs, rhs, transpose_a, transpose_b,
            ::mlir::StringAttr(), ::mlir::StringAttr());
    }]>];
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_SumToOp : NN_Op<"sum_to", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "sum over broadcast dimensions down to a shape";
  let description = [{
    The adjoint of NumPy broadcasting: sums `input` over the dimensions in
    which the result's shape broadcasts to the input's shape (leading
    dimensions the result lacks, and dimensions of size 1 in the result). A
    rank-0 result sums everything.

    Example:
    ```mlir
    %db = nn.sum_to %dy : (tensor<2x8x48xf32>) -> tensor<48xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

def NN_EmbeddingGradOp : NN_Op<"embedding_grad", [Pure]> {
  let summary = "gradient of an embedding table (scatter-add of rows)";
  let description = [{
    `result[v] = sum over positions n with ids[n] = v of grad[n]`: ids
    [d0..dn], grad [d0..dn, C], result [V, C].

    Example:
    ```mlir
    %dwte = nn.embedding_grad %ids, %dx : (tensor<2x8xi32>, tensor<2x8x16xf32>) -> tensor<50x16xf32>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$ids, NN_FloatTensor:$grad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_LayerNormGradOp : NN_Op<"layer_norm_grad", [Pure]> {
  let summary = "gradients of layer normalization";
  let description = [{
    Given `x` [..., C], `weight` [C] and the output gradient `grad`, returns
    the gradients of the input, the weight and the bias (the statistics are
    recomputed from `x`).

    Example:
    ```mlir
    %dx, %dw, %db = nn.layer_norm_grad %x, %w, %dy {eps = 1.0e-05 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                   NN_FloatTensor:$grad, DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad,
                 NN_FloatTensor:$bias_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_RMSNormGradOp : NN_Op<"rms_norm_grad", [Pure]> {
  let summary = "gradients of RMS normalization";
  let description = [{
    Given `x` [..., C], `weight` [C] and the output gradient, returns the
    gradients of the input and the weight.

    Example:
    ```mlir
    %dx, %dw = nn.rms_norm_grad %x, %w, %dy : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                   NN_FloatTensor:$grad, DefaultValuedAttr<F64Attr, "1.0e-6">:$eps);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class NN_ActivationGradOp<string mnemonic, string what>
    : NN_Op<mnemonic, [Pure, AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "gradient of " # what;
  let description = [{
    `result = grad * f'(input)` elementwise, for f the }] # what # [{.

    Example:
    ```mlir
    %dx = nn.}] # mnemonic # [{ %x, %dy : tensor<2x8x64xf32>
    ```
  }];
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def NN_GeluGradOp : NN_ActivationGradOp<"gelu_grad", "GELU"> {
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$grad,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let hasVerifier = 1;
}

def NN_SiluGradOp : NN_ActivationGradOp<"silu_grad", "SiLU"> {
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$grad);
}

def NN_LeakyReluGradOp : NN_ActivationGradOp<"leaky_relu_grad",
                                             "leaky ReLU (alpha where x <= 0)"> {
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$grad,
                   DefaultValuedAttr<F64Attr, "0.01">:$alpha);
}

def NN_SoftmaxGradOp : NN_Op<"softmax_grad",
    [Pure, AllTypesMatch<["output", "grad", "result"]>]> {
  let summary = "gradient of softmax from its output";
  let description = [{
    `result = y * (grad - sum(grad * y, axis))` for the softmax output `y`.

    Example:
    ```mlir
    %dx = nn.softmax_grad %y, %dy {axis = -1 : i64} : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$output, NN_FloatTensor:$grad,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad attr-dict `:` type($result)";
}

def NN_AttentionGradOp : NN_Op<"attention_grad", [Pure]> {
  let summary = "gradients of scaled dot-product attention";
  let description = [{
    Given the attention's query, key and value and the output gradient,
    returns the gradients of query, key and value (the probabilities are
    recomputed). For grouped-query attention the key/value gradients sum
    over the query heads sharing each key/value head.

    Example:
    ```mlir
    %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %do {causal, scale = 0.35 : f64} : (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x8x16x8xf32>) -> (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                   NN_FloatTensor:$value, NN_FloatTensor:$grad,
                   UnitAttr:$causal, F64Attr:$scale);
  let results = (outs NN_FloatTensor:$query_grad, NN_FloatTensor:$key_grad,
                 NN_FloatTensor:$value_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_SliceGradOp : NN_Op<"slice_grad", [Pure]> {
  let summary = "gradient of a slice: the slice placed in zeros";
  let description = [{
    The result has the sliced tensor's full shape: `grad` at
    `start .. start + size - 1` of dimension `dim`, zeros elsewhere.

    Example:
    ```mlir
    %d = nn.slice_grad %dq {dim = 2 : i64, start = 16 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x48xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, I64Attr:$dim, I64Attr:$start);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_CrossEntropyGradOp : NN_Op<"cross_entropy_grad", [Pure]> {
  let summary = "gradient of the mean cross-entropy loss w.r.t. the logits";
  let description = [{
    `result[n] = grad * (softmax(logits[n]) - onehot(targets[n])) / count`
    for tokens whose target is not `ignore_index` (zero rows otherwise),
    where `count` is the number of such tokens and `grad` the scalar loss
    gradient.

    Example:
    ```mlir
    %dl = nn.cross_entropy_grad %logits, %y, %one : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x50xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                   NN_ScalarTensor:$grad,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_CrossEntropyWithGradOp : NN_Op<"cross_entropy_with_grad", [Pure]> {
  let summary = "mean cross-entropy loss and its gradient in one pass";
  let description = [{
    `nn.cross_entropy` and `nn.cross_entropy_grad` for a loss gradient of 1
    (the loss is the function's result), computed together: one pass over
    the logits instead of two. Created by `nn-fuse-loss-grad`.

    Example:
    ```mlir
    %loss, %dl = nn.cross_entropy_with_grad %logits, %y : (tensor<2x8x50xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8x50xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs NN_ScalarTensor:$loss, NN_FloatTensor:$logits_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The vocabulary-parallel embedding and loss (tp-partition)
//===----------------------------------------------------------------------===//

def NN_VocabPartOp : NN_Op<"vocab_part", [Pure]> {
  let summary = "ids as rows of this tensor-parallel rank's part of a table";
  let description = [{
    A tp rank `r` (`tp_index`, i32[1]) holds rows `[r rows, (r + 1) rows)`
    of a table split by rows. For each id, `local` is `id - r rows` and
    `mask` 1 where that falls in `[0, rows)`; elsewhere `local` is 0 and
    `mask` 0 (so an embedding lookup of `local`, times `mask`, is this
    rank's part of the whole lookup, and its gradient adds zeros to row 0).
    `mask` has a trailing dim of 1, to broadcast over the rows' width.

    Example:
    ```mlir
    %l, %m = nn.vocab_part %ids, %r {rows = 50 : i64} : (tensor<2x8xi32>, tensor<1xi32>) -> (tensor<2x8xi32>, tensor<2x8x1xf32>)
    ```
  }];
  let arguments = (ins NN_IndexTensor:$ids, NN_IndexTensor:$tp_index,
                   I64Attr:$rows);
  let results = (outs NN_IndexTensor:$local, NN_FloatTensor:$mask);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_VocabStatsOp : NN_Op<"vocab_stats", [Pure]> {
  let summary = "a tp rank's part of each row's cross-entropy statistics";
  let description = [{
    `logits` [d0, ..., dn, V] are the logits of this tp rank's vocabulary
    part, columns `[r V, (r + 1) V)` of the whole. `stats` [d0, ..., dn, 2]
    holds for each row the logsumexp of its V logits and the logit of the
    row's target where the target falls in this rank's columns (else 0).
    All-gathered over the tp ranks, they give `nn.vocab_cross_entropy` the
    whole rows' loss. Not differentiable: the loss's gradient reaches the
    logits through `nn.vocab_cross_entropy`.

    Example:
    ```mlir
    %s = nn.vocab_stats %logits, %y, %r : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<1xi32>) -> tensor<2x8x2xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                   NN_IndexTensor:$tp_index);
  let results = (outs F32Tensor:$stats);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_VocabCrossEntropyOp : NN_Op<"vocab_cross_entropy", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "cross-entropy on vocabulary-sharded logits (loss parallel)";
  let description = [{
    `logits` [d0, ..., dn, V] are this tp rank's columns of the whole
    sequence's logits, `targets` [d0, ..., dn] the whole sequence's, and
    `stats` [tp d0, d1, ..., dn, 2] every rank's `nn.vocab_stats`, rank by
    rank (an all-gather on dim 0). The result is the mean, over this rank's
    tokens (position along dn in `[r dn/tp, (r + 1) dn/tp)`) whose target is
    not `ignore_index`, of the whole row's logsumexp less its target logit:
    the loss `nn.cross_entropy` gives on this rank's tokens of the whole
    logits. Its gradient (`nn.vocab_cross_entropy_grad`) is every token's,
    on this rank's columns, as every rank's loss (each seeded alike) sends
    it: the ranks' columns together are the whole gradient.

    Example:
    ```mlir
    %loss = nn.vocab_cross_entropy %logits, %y, %stats, %r {ignore_index = -100 : i64} : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<4x8x2xf32>, tensor<1xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                   F32Tensor:$stats, NN_IndexTensor:$tp_index,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs NN_ScalarTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_VocabCrossEntropyGradOp : NN_Op<"vocab_cross_entropy_grad", [Pure]> {
  let summary = "gradient of nn.vocab_cross_entropy w.r.t. this rank's logits";
  let description = [{
    `result[n] = grad * (exp(logits[n] - lse[n]) - onehot(targets[n])) /
    count(owner(n))` on this rank's columns, where `lse[n]` is the whole
    row's logsumexp (from `stats`), `owner(n)` the tp rank whose tokens hold
    row n, and `count` the number of that rank's targets that are not
    `ignore_index` (zero rows for ignored targets).

    Example:
    ```mlir
    %dl = nn.vocab_cross_entropy_grad %logits, %y, %stats, %r, %g : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<4x8x2xf32>, tensor<1xi32>, tensor<f32>) -> tensor<2x8x50xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                   F32Tensor:$stats, NN_IndexTensor:$tp_index,
                   NN_ScalarTensor:$grad,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradient accumulation, clipping and optimizers
//===----------------------------------------------------------------------===//

def NN_AccumulateOp : NN_Op<"accumulate",
    [Pure, AllTypesMatch<["acc", "grad", "result"]>]> {
  let summary = "accumulate a scaled gradient";
  let description = [{
    `control` is [keep, scale]: the result is `acc + scale * grad` when keep
    is non-zero, and `scale * grad` otherwise (the first micro-batch of a
    step overwrites, so stale or non-finite values never leak in).

    Example:
    ```mlir
    %acc2 = nn.accumulate %acc, %g, %ctl : tensor<16xf32>, tensor<2xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$acc, NN_FloatTensor:$grad,
                   1DTensorOf<[F32]>:$control);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` type($result) `,` type($control)";
}

def NN_SquaredNormOp : NN_Op<"squared_norm", [Pure]> {
  let summary = "sum of squares of all elements";
  let description = [{
    Example:
    ```mlir
    %s = nn.squared_norm %g : (tensor<16x4xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_ScalarTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def NN_ClipCoefOp : NN_Op<"clip_coef",
    [Pure, AllTypesMatch<["squared_norm", "max_norm", "result"]>]> {
  let summary = "the gradient scale of clipping by global norm";
  let description = [{
    With `squared_norm` the sum of squares of all gradients and `max_norm`
    a scalar: `min(1, max_norm / (sqrt(squared_norm) + 1e-6))` when
    `max_norm > 0`, and 1 otherwise, as
    `torch.nn.utils.clip_grad_norm_`.

    Example:
    ```mlir
    %c = nn.clip_coef %s, %max : tensor<f32>
    ```
  }];
  let arguments = (ins NN_ScalarTensor:$squared_norm, NN_ScalarTensor:$max_norm);
  let results = (outs NN_ScalarTensor:$result);
  let assemblyFormat = "operands attr-dict `:` type($result)";
}

def NN_AdamWOp : NN_Op<"adamw", [Pure,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq", "new_param",
                   "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "one torch.optim.AdamW update of a parameter";
  let description = [{
    `hyper` is [lr, beta1, beta2, eps, weight_decay, weight_decay_1d, step]
    (step counts from 1); the gradient is first multiplied by the scalar
    `grad_scale` (the clipping coefficient). 1-D parameters use
    weight_decay_1d. Then, as torch.optim.AdamW:
    `p *= 1 - lr * wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`.

    Example:
    ```mlir
    %p2, %m2, %v2 = nn.adamw %p, %g, %m, %v, %hyper, %c : tensor<16xf32>, tensor<7xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$param, NN_FloatTensor:$grad,
                   NN_FloatTensor:$exp_avg, NN_FloatTensor:$exp_avg_sq,
                   1DTensorOf<[F32]>:$hyper, NN_ScalarTensor:$grad_scale);
  let results = (outs NN_FloatTensor:$new_param, NN_FloatTensor:$new_exp_avg,
                 NN_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    operands attr-dict `:` type($param) `,` type($hyper) `,` type($grad_scale)
  }];
}

def NN_SGDOp : NN_Op<"sgd", [Pure,
    AllTypesMatch<["param", "grad", "momentum_buffer", "new_param",
                   "new_momentum_buffer"]>]> {
  let summary = "one torch.optim.SGD update with momentum";
  let description = [{
    `hyper` is [lr, momentum, unused, unused, weight_decay,
    weight_decay_1d, step]; the gradient is multiplied by `grad_scale`.
    As torch.optim.SGD (dampening 0, not Nesterov):
    `g += wd p; buf = momentum buf + g (buf = g at step 1); p -= lr buf`.

    Example:
    ```mlir
    %p2, %b2 = nn.sgd %p, %g, %b, %hyper, %c : tensor<16xf32>, tensor<7xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$param, NN_FloatTensor:$grad,
                   NN_FloatTensor:$momentum_buffer, 1DTensorOf<[F32]>:$hyper,
                   NN_ScalarTensor:$grad_scale);
  let results = (outs NN_FloatTensor:$new_param,
                 NN_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    operands attr-dict `:` type($param) `,` type($hyper) `,` type($grad_scale)
  }];
}

#endif // SHARDC_NN_TRAIN_OPS
