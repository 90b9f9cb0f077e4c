//===- NNDialect.td - the nn dialect -------------------------*- tablegen -*-===//
//
// The nn dialect: differentiable transformer ops on statically shaped tensors.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_NN_DIALECT
#define SHARDC_NN_DIALECT

include "mlir/IR/OpBase.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let summary = "Transformer forward-graph ops on statically shaped tensors";
  let description = [{
    The `nn` dialect holds the forward graph of a transformer (GPT-2 and Llama
    families) with value semantics on statically shaped tensors of f32, bf16
    and f16. Frontends (meta config, ONNX) produce it; the training passes
    differentiate it; the lowering to the `rt` dialect turns it into kernel
    calls on planned buffers.
  }];
  let cppNamespace = "::shardc::nn";
}

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic, traits>;

// Floating-point tensors the dialect computes on.
def NN_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
// Integer tensors of token ids and targets.
def NN_IndexTensor : RankedTensorOf<[I32, I64]>;
// Boolean tensors (conditions, comparisons): one byte per element at runtime.
def NN_BoolTensor : RankedTensorOf<[I1]>;
// Any tensor the runtime stores.
def NN_AnyTensor : RankedTensorOf<[F32, BF16, F16, I32, I64, I1]>;
// The scalar loss.
def NN_ScalarTensor : 0DTensorOf<[F32]>;

#endif // SHARDC_NN_DIALECT
