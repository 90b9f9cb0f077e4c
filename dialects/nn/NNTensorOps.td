//===- NNTensorOps.td - generic tensor ops (ONNX imports) ----*- tablegen -*-===//
//
// The elementwise, reduction and data-movement ops that models imported from
// ONNX are made of when no fused op expresses them. Each is differentiable;
// the pattern pass nn-fuse-patterns turns the exact compositions of them
// that the fused ops compute (GELU, layer norm, attention) into those ops.
// Included by NNOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_NN_TENSOR_OPS
#define SHARDC_NN_TENSOR_OPS

def NN_ConstantOp : NN_Op<"constant", [Pure, ConstantLike,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "a constant tensor";
  let description = [{
    A tensor known at compile time (an ONNX Constant or a frozen initializer
    that feeds computation). Its bytes are embedded in the executable.

    Example:
    ```mlir
    %mask = nn.constant dense<[[0.0, -1.0], [0.0, 0.0]]> : tensor<2x2xf32> -> tensor<2x2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict `->` type($result)";
  let hasVerifier = 1;
  // ConstantLike ops fold to their value (the canonicalizer keys and
  // deduplicates constants by it).
  let hasFolder = 1;
}

def NN_SubOp : NN_BinaryOp<"sub", "subtraction">;
def NN_DivOp : NN_BinaryOp<"div", "division">;
def NN_PowOp : NN_BinaryOp<"pow", "power (lhs raised to rhs)">;

class NN_MathOp<string mnemonic, string formula>
    : NN_UnaryOp<mnemonic> {
  let summary = "elementwise " # formula;
  let description = [{
    `y = }] # formula # [{`, elementwise, as the ONNX operator of that name.

    Example:
    ```mlir
    %y = nn.}] # mnemonic # [{ %x : tensor<2x8xf32>
    ```
  }];
  let hasVerifier = 1;
}

def NN_SqrtOp : NN_MathOp<"sqrt", "sqrt(x)">;
def NN_ErfOp : NN_MathOp<"erf", "erf(x)">;
def NN_TanhOp : NN_MathOp<"tanh", "tanh(x)">;
def NN_SigmoidOp : NN_MathOp<"sigmoid", "1 / (1 + exp(-x))">;
def NN_NegOp : NN_MathOp<"neg", "-x">;
def NN_ReciprocalOp : NN_MathOp<"reciprocal", "1 / x">;
def NN_ExpOp : NN_MathOp<"exp", "exp(x)">;
def NN_LogOp : NN_MathOp<"log", "log(x)">;
def NN_ReluOp : NN_MathOp<"relu", "max(x, 0)">;
def NN_SoftplusOp : NN_MathOp<"softplus", "log(1 + exp(x)) (x above 20: x)">;
// ONNX Where(IsNaN(x), 0, x), which the dynamo exporter writes after the
// softmax of scaled_dot_product_attention.
def NN_NanToZeroOp : NN_MathOp<"nan_to_zero", "x, or 0 where x is NaN">;
// ONNX Cast to FLOAT16 / BFLOAT16 in a graph computed in f32: the value
// the cast keeps, held in f32. The derivative is 1 (PyTorch's cast passes
// the gradient through).
def NN_RoundF16Op : NN_MathOp<"round_f16", "x rounded to the nearest f16 (ties to even)">;
def NN_RoundBf16Op : NN_MathOp<"round_bf16", "x rounded to the nearest bf16 (ties to even)">;

def NN_LeakyReluOp : NN_Op<"leaky_relu", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "leaky rectified linear unit";
  let description = [{
    `y = x` where `x > 0`, else `alpha * x` (`torch.nn.functional.leaky_relu`,
    ONNX LeakyRelu), elementwise; its gradient at 0 is `alpha`, as PyTorch's.

    Example:
    ```mlir
    %y = nn.leaky_relu %x {alpha = 1.0e-01 : f64} : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                   DefaultValuedAttr<F64Attr, "0.01">:$alpha);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def NN_UnaryGradOp : NN_Op<"unary_grad", [Pure,
    AllTypesMatch<["input", "output", "grad", "result"]>]> {
  let summary = "gradient of an elementwise math op";
  let description = [{
    `result = grad * f'(input)` for `f` the op named by `fn` (sqrt, erf,
    tanh, sigmoid, neg, reciprocal, exp, log, relu, softplus, nan_to_zero,
    round_f16, round_bf16);
    `output` is
    `f(input)`, which
    several derivatives are cheapest in.

    Example:
    ```mlir
    %dx = nn.unary_grad %x, %y, %dy {fn = "tanh"} : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$output,
                   NN_FloatTensor:$grad, StrAttr:$fn);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $output `,` $grad attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def NN_WhereOp : NN_Op<"where", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "elementwise select with NumPy broadcasting";
  let description = [{
    `result = condition ? lhs : rhs`; the three operands broadcast.

    Example:
    ```mlir
    %y = nn.where %c, %x, %z : (tensor<8x8xi1>, tensor<2x8x8xf32>, tensor<f32>) -> tensor<2x8x8xf32>
    ```
  }];
  let arguments = (ins NN_BoolTensor:$condition, NN_FloatTensor:$lhs,
                   NN_FloatTensor:$rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_EqualOp : NN_Op<"equal", [Pure]> {
  let summary = "elementwise equality with NumPy broadcasting";
  let description = [{
    A boolean tensor: `lhs == rhs` elementwise (f32 or i32 operands of one
    type). Not differentiable: nothing flows back through a comparison.

    Example:
    ```mlir
    %c = nn.equal %a, %b : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$lhs, NN_AnyTensor:$rhs);
  let results = (outs NN_BoolTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_BroadcastToOp : NN_Op<"broadcast_to", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "broadcast to a larger shape (ONNX Expand)";
  let description = [{
    The result's shape is the NumPy broadcast of the input's shape and the
    result shape; each element repeats the input element it broadcasts from.
    Its gradient is `nn.sum_to`.

    Example:
    ```mlir
    %y = nn.broadcast_to %b : (tensor<1x16xf32>) -> tensor<8x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_BatchMatmulOp : NN_Op<"batch_matmul", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "batched matrix product with broadcast batch dimensions";
  let description = [{
    `op(a) @ op(b)` over the last two dimensions, as ONNX MatMul and
    `torch.matmul` for operands of rank >= 2: `a` is [..., M, K] (or
    [..., K, M] with `transpose_a`), `b` is [..., K, N] (or [..., N, K] with
    `transpose_b`); the batch dimensions broadcast as in NumPy.

    Example:
    ```mlir
    %s = nn.batch_matmul %q, %k {transpose_b} : (tensor<8x16x4xf32>, tensor<8x16x4xf32>) -> tensor<8x16x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                   UnitAttr:$transpose_a, UnitAttr:$transpose_b);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_ConcatOp : NN_Op<"concat", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "concatenation along one dimension";
  let description = [{
    The inputs agree on every dimension but `dim`; the result's size on
    `dim` is the sum of theirs.

    Example:
    ```mlir
    %y = nn.concat %a, %b {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<NN_FloatTensor>:$inputs, I64Attr:$dim);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_TriluOp : NN_Op<"trilu", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "upper or lower triangle of the last two dimensions";
  let description = [{
    Keeps the elements on or above (`upper`) or on or below the `k`-th
    diagonal of each matrix [..., rows, cols] and zeroes the others, as ONNX
    Trilu.

    Example:
    ```mlir
    %y = nn.trilu %x {upper, k = 1 : i64} : tensor<8x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, UnitAttr:$upper,
                   DefaultValuedAttr<I64Attr, "0">:$k);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

#endif // SHARDC_NN_TENSOR_OPS
