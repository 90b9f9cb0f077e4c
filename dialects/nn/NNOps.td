//===- NNOps.td - nn dialect operations ----------------------*- tablegen -*-===//
//
// Every op states its shapes in the description; the verifier of each names
// the operand, dimension or attribute at fault.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_NN_OPS
#define SHARDC_NN_OPS

include "dialects/nn/NNDialect.td"
include "dialects/nn/NNInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Embeddings and projections
//===----------------------------------------------------------------------===//

def NN_EmbeddingOp : NN_Op<"embedding", [Pure, DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "token embedding lookup";
  let description = [{
    Gathers rows of `table` [V, C] by the integer `ids` [d0, ..., dn]; the
    result is [d0, ..., dn, C] of the table's element type.

    Example:
    ```mlir
    %x = nn.embedding %ids, %wte : (tensor<2x8xi32>, tensor<50x16xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$ids, NN_FloatTensor:$table);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_LinearOp : NN_Op<"linear", [Pure, DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "matrix multiplication by a weight, with an optional bias";
  let description = [{
    `y = x @ W^T + b` for a weight stored as [N, K] (PyTorch `nn.Linear`), or
    `y = x @ W + b` when `weight_in_out` is set and the weight is stored as
    [K, N] (the Conv1D layout of GPT-2 checkpoints). `x` is [..., K], the
    optional `bias` is [N], the result is [..., N].

    `float8` (a torchao recipe: "tensorwise" or "rowwise", set by
    nn-float8-linears) computes the product in float8: both operands cast
    to fp8 with the recipe's scales, the products accumulated in f32.
    `float8_grad` ("lhs") says the input is an output gradient (the
    backward's dx), which tensorwise casts to e5m2 instead of e4m3.

    Example:
    ```mlir
    %y = nn.linear %x, %w, %b {weight_in_out} : (tensor<2x8x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                   Optional<NN_FloatTensor>:$bias, UnitAttr:$weight_in_out,
                   OptionalAttr<StrAttr>:$float8,
                   OptionalAttr<StrAttr>:$float8_grad);
  let results = (outs NN_FloatTensor:$result);
  let builders = [
    OpBuilder<(ins "::mlir::Type":$type, "::mlir::Value":$input,
                   "::mlir::Value":$weight, "::mlir::Value":$bias,
                   "bool":$weight_in_out), [{
      build($_builder, $_state, type, input, weight, bias, weight_in_out,
            ::mlir::StringAttr(), ::mlir::StringAttr());
    }]>];
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class NN_BinaryOp<string mnemonic, string what>
    : NN_Op<mnemonic, [Pure, DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "elementwise " # what # " with NumPy broadcasting";
  let description = [{
    Elementwise }] # what # [{ of two tensors of one element type. Shapes
    broadcast as in NumPy: aligned from the trailing dimension, each pair of
    sizes equal or one of them 1. The result has the broadcast shape.

    Example:
    ```mlir
    %z = nn.}] # mnemonic # [{ %x, %pos : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_AddOp : NN_BinaryOp<"add", "addition">;
def NN_MulOp : NN_BinaryOp<"mul", "multiplication">;

class NN_UnaryOp<string mnemonic, list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType,
                                DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>], traits)> {
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def NN_GeluOp : NN_Op<"gelu", [Pure, SameOperandsAndResultType,
                                DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "Gaussian error linear unit, exact (erf) or tanh form";
  let description = [{
    `approximate = "none"`: `0.5 x (1 + erf(x / sqrt(2)))`;
    `approximate = "tanh"`: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`
    (GPT-2's `gelu_new`). Same semantics as `torch.nn.functional.gelu`.

    Example:
    ```mlir
    %y = nn.gelu %x {approximate = "tanh"} : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def NN_SiluOp : NN_UnaryOp<"silu"> {
  let summary = "sigmoid linear unit";
  let description = [{
    `y = x * sigmoid(x)`, elementwise.

    Example:
    ```mlir
    %y = nn.silu %x : tensor<2x8x64xf32>
    ```
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

def NN_LayerNormOp : NN_Op<"layer_norm", [Pure, DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `y = (x - mean) / sqrt(var + eps) * weight + bias` over the last dimension
    C of `x` (biased variance, as `torch.nn.LayerNorm`). `weight` and the
    optional `bias` are [C].

    Example:
    ```mlir
    %y = nn.layer_norm %x, %g, %b {eps = 1.0e-05 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                   Optional<NN_FloatTensor>:$bias,
                   DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_RMSNormOp : NN_Op<"rms_norm", [Pure, DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "root-mean-square normalization over the last dimension";
  let description = [{
    `y = x / sqrt(mean(x^2) + eps) * weight` over the last dimension C of `x`
    (Llama's `LlamaRMSNorm`). `weight` is [C].

    Example:
    ```mlir
    %y = nn.rms_norm %x, %g {eps = 1.0e-06 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                   DefaultValuedAttr<F64Attr, "1.0e-6">:$eps);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_SoftmaxOp : NN_Op<"softmax", [Pure, SameOperandsAndResultType,
                                  DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "softmax along one axis";
  let description = [{
    `y = exp(x - max) / sum(exp(x - max))` along `axis` (negative counts from
    the end, default the last dimension).

    Example:
    ```mlir
    %y = nn.softmax %x {axis = -1 : i64} : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def NN_RotaryOp : NN_Op<"rotary", [Pure, SameOperandsAndResultType,
                                 DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "rotary position embedding (rotate-half form)";
  let description = [{
    Applies rotary position embedding to `x` [B, H, T, D] at positions
    `0..T-1`, as Hugging Face Llama does: with `f_i = theta^(-2i/D)` for
    `i < D/2`, `y = x * cos + rotate_half(x) * sin`, where
    `rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2])` and both cos and
    sin are repeated over the two halves. D must be even. With `inverse`,
    the rotation is by the negative angles (the transpose, used for the
    gradient).

    Example:
    ```mlir
    %y = nn.rotary %q {theta = 10000.0 : f64} : tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                   DefaultValuedAttr<F64Attr, "10000.0">:$theta,
                   UnitAttr:$inverse);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def NN_RotaryTableOp : NN_Op<"rotary_table", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "rotary position embedding with given cos and sin tables";
  let description = [{
    The rotate-half rotation of `x` [B, H, T, D] by the angles whose cos and
    sin tables [T, D/2] are given (an exporter's constants, or scaled
    frequencies): for `k < D/2`,
    `y[k] = x[k] cos[t, k] - x[k + D/2] sin[t, k]` and
    `y[k + D/2] = x[k + D/2] cos[t, k] + x[k] sin[t, k]`, which is
    `x * cat(cos, cos) + rotate_half(x) * cat(sin, sin)`. With `inverse`, the
    rotation by the opposite angles (sin negated: the transpose, used for
    the gradient). The tables get no gradient.

    Example:
    ```mlir
    %y = nn.rotary_table %q, %cos, %sin : (tensor<2x4x16x8xf32>, tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$cos,
                   NN_FloatTensor:$sin, UnitAttr:$inverse);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_AttentionOp : NN_Op<"attention", [Pure, DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "scaled dot-product attention, multi-head or grouped-query";
  let description = [{
    `softmax(q k^T * scale + mask) v` per head. `query` is [B, H, T, D];
    `key` and `value` are [B, Hkv, S, D] with H a multiple of Hkv: query head
    h reads key/value head `h / (H / Hkv)` (grouped-query attention; Hkv = H
    is multi-head attention). With `causal`, query t attends to keys
    `0..t` (T = S). `scale` defaults to `1/sqrt(D)`. The result is
    [B, H, T, D].

    Example:
    ```mlir
    %o = nn.attention %q, %k, %v {causal} : (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x8x16x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                   NN_FloatTensor:$value, UnitAttr:$causal,
                   OptionalAttr<F64Attr>:$scale);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scale applied to q k^T: the attribute, or 1/sqrt(D).
    double getScaleOrDefault();
  }];
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def NN_ReshapeOp : NN_Op<"reshape", [Pure, DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "reshape to a static shape with the same element count";
  let description = [{
    Reinterprets the row-major elements of `input` with the result's shape.

    Example:
    ```mlir
    %y = nn.reshape %x : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_TransposeOp : NN_Op<"transpose", [Pure, DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "permutation of dimensions";
  let description = [{
    Result dimension i is input dimension `permutation[i]`.

    Example:
    ```mlir
    %y = nn.transpose %x {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x4xf32>) -> tensor<2x4x8x4xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_SliceOp : NN_Op<"slice", [Pure, DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "contiguous slice along one dimension";
  let description = [{
    Takes elements `start .. start + size - 1` of dimension `dim`, where size
    is the result's size on that dimension; other dimensions are kept. Used
    to split a fused QKV projection and to take the first T rows of a
    position table.

    Example:
    ```mlir
    %q = nn.slice %qkv {dim = 2 : i64, start = 16 : i64} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$dim, I64Attr:$start);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_CastOp : NN_Op<"cast", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "element type conversion (f32, bf16, f16, i32, i1)";
  let description = [{
    Converts each element: floats round to nearest even, floats to integers
    truncate toward zero, anything to i1 is `!= 0`. Only casts between float
    types are differentiable. The gradient is cast
    back to the input's element type, or to `grad_type` when set (mixed
    precision: the element type gradients are reduced in).

    Example:
    ```mlir
    %h = nn.cast %p : tensor<16x4xf32> to tensor<16x4xbf16>
    %f = nn.cast %h {grad_type = f32} : tensor<16x4xbf16> to tensor<16x4xf32>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input, OptionalAttr<TypeAttr>:$grad_type);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def NN_CrossEntropyOp : NN_Op<"cross_entropy", [Pure, DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "mean cross-entropy loss over tokens, with an ignore index";
  let description = [{
    `logits` is [d0, ..., dn, V] and `targets` is [d0, ..., dn]. The result is
    the mean over the tokens whose target is not `ignore_index` of
    `logsumexp(logits) - logits[target]`, as
    `torch.nn.functional.cross_entropy(reduction="mean")`; it is NaN when
    every target is ignored, as in PyTorch.

    Example:
    ```mlir
    %loss = nn.cross_entropy %logits, %y {ignore_index = -100 : i64} : (tensor<2x8x50xf32>, tensor<2x8xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs NN_ScalarTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

include "dialects/nn/NNTrainOps.td"
include "dialects/nn/NNTensorOps.td"

#endif // SHARDC_NN_OPS
