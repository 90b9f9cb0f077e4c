//===- TPPartition.h - tp-partition's state and rules -----------*- C++ -*-===//
//
// tp-partition (TPPartition.cpp: the pass, the plan and the parameters)
// keeps its state in a TPPartitioner: each value's layout over the tp
// ranks, its type before the pass, the gathered sequences. The rules that
// rewrite the forward's ops are in TPOps.cpp; the sequence's collectives
// (all-gather, reduce-scatter, this rank's part of a whole tensor) in
// TPSequence.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_TP_TPPARTITION_H
#define SHARDC_PASSES_TP_TPPARTITION_H

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace shardc::tp_partition {

using namespace mlir;

/// How a value is laid out over the tp ranks.
enum class Layout {
  Whole,    ///< every rank holds all of it (or it is not a tensor of tokens)
  Sequence, ///< dim 1 (the sequence) split by tp rank
  Split,    ///< a feature dim split by tp rank (heads, the MLP's width)
};

/// A parameter's role in the plan (Vocab: the embedding table and the LM
/// head, split by vocabulary rows).
enum class Role { Replicated, Column, Row, Vocab };

/// A parameter's place in the plan: its role, and for a column-parallel
/// one the blocks its output features form (GPT-2's fused c_attn: q, k and
/// v, each split by heads).
struct Plan {
  Role role = Role::Replicated;
  int64_t blocks = 1;
};

/// torchtitan's plan for the Hugging Face names: Llama, Mistral and Qwen2
/// (q/k/v, gate/up; o, down), GPT-2 (c_attn by thirds, c_fc; the c_projs).
Plan planOf(llvm::StringRef name);

/// The embedding table and LM head of the families the plan knows.
bool isVocabName(llvm::StringRef name);

inline RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

inline RankedTensorType withShape(RankedTensorType t, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, t.getElementType());
}

/// The partitioning of one forward function for a tp degree.
class TPPartitioner {
public:
  /// The --tp-vocab option: "parallel" or "whole".
  std::string vocab;

  int64_t T = 1;
  FlatSymbolRefAttr grid;
  int16_t tpAxis = 0;
  DenseMap<Value, Layout> layouts;
  /// Values' types before this pass retyped them.
  DenseMap<Value, RankedTensorType> oldTypes;
  /// Each parameter argument's role in the plan.
  DenseMap<Value, Role> roles;
  /// A sequence-sharded value's all-gathered whole (q, k and v share one).
  DenseMap<Value, Value> gathered;
  /// A whole value's part for this rank's sequence (localSequence).
  DenseMap<Value, Value> localParts;
  func::FuncOp forward;
  /// The forward's abi::kIoTpIndex input, once added.
  Value tpIndex;
  /// Whether the embedding and LM head split by vocabulary (decideVocab).
  bool vocabParallel = false;
  /// A model with no Hugging Face names (ONNX): the plan read off its ops
  /// (planByStructure), and its embedding tables and LM head weights.
  bool byStructure = false;
  DenseMap<Value, Plan> structural;
  llvm::SetVector<Value> vocabParams;

  Layout layoutOf(Value v) const {
    auto it = layouts.find(v);
    return it == layouts.end() ? Layout::Whole : it->second;
  }
  RankedTensorType oldType(Value v) const {
    auto it = oldTypes.find(v);
    return it == oldTypes.end() ? tensorType(v) : it->second;
  }
  void retype(Value v, ArrayRef<int64_t> shape, Layout layout) {
    oldTypes.try_emplace(v, tensorType(v));
    v.setType(withShape(tensorType(v), shape));
    layouts[v] = layout;
  }

  /// The plan of a model without Hugging Face names, read off its ops
  /// (TPStructure.cpp): `structural` and `vocabParams`.
  void planByStructure(func::FuncOp fwd);
  void columnBiases(nn::LinearOp lin, int64_t blocks);

  /// A parameter's place in the plan, by its name or (byStructure) its use.
  Plan planOfParameter(Value param, StringRef name) const;
  bool isVocabParameter(Value param, StringRef name) const {
    return byStructure ? vocabParams.contains(param) : isVocabName(name);
  }

  /// The families the plan's names fit; heads cannot be padded without
  /// changing the model: refused.
  LogicalResult checkHeads(ModuleOp module);

  /// Vocabulary-parallel when tp divides the rows of every embedding and
  /// LM head parameter (the vocabulary): torchtitan's plan. Otherwise they
  /// stay whole on every rank (a padded vocabulary would change the
  /// checkpoints' and the optimizer's shapes).
  void decideVocab(func::FuncOp fwd);

  /// Parameters to their tp-local shapes; tokens and targets to this rank's
  /// part of the sequence (whole with a vocabulary-parallel embedding and
  /// loss, which read every token).
  LogicalResult partitionArguments(func::FuncOp fwd);

  /// The dim a linear's weight or bias `param` splits in `role`.
  FailureOr<int64_t> splitDim(func::FuncOp fwd, Value param, StringRef name,
                              Role role);

  /// A vocabulary-parallel parameter splits its rows: an embedding's table,
  /// or an LM head stored [V, C].
  FailureOr<int64_t> vocabDim(func::FuncOp fwd, Value param, StringRef name);

  LogicalResult partitionParameter(func::FuncOp fwd, BlockArgument arg,
                                   StringRef name);

  /// Sequence-sharded [B, T/tp, ...] -> whole [B, T, ...] (all-gather).
  Value gatherSequence(Value seq);

  /// A partial sum [B, T, ...] -> its sequence-sharded sum [B, T/tp, ...].
  Value scatterSequence(OpBuilder &b, Location loc, Value partial);

  /// Puts the ops that define `made` in the layer block (nn.block) of
  /// `from`'s producer, so that --recompute re-runs a block's collectives
  /// with it: the backward re-gathers a column-parallel input instead of
  /// keeping the gathered sequence, as Megatron does.
  static void inBlockOf(Value from, ArrayRef<Value> made);

  /// [B, S, ...] -> [S, B, ...]: a reshape for B = 1, else a transpose.
  static Value tokensToDim0(OpBuilder &b, Location loc, Value v);
  static Value tokensFromDim0(OpBuilder &b, Location loc, Value v,
                              RankedTensorType result);
  static SmallVector<int64_t> swap01(int64_t rank);

  LogicalResult partitionOp(Operation *op);

  LogicalResult partitionLinear(nn::LinearOp lin);

  LogicalResult partitionEmbedding(nn::EmbeddingOp emb);

  /// The vocabulary-parallel embedding (torchtitan's RowwiseParallel
  /// embedding): this rank's rows looked up for every token of the whole
  /// sequence (zero rows for the tokens it does not hold), then summed and
  /// split over the sequence by a reduce-scatter.
  LogicalResult partitionVocabEmbedding(nn::EmbeddingOp emb);

  /// The loss on vocab-sharded logits (loss parallel): each rank's row
  /// statistics (logsumexp and the target's logit where it holds it),
  /// all-gathered over tp, give every rank the whole rows' loss; the loss is
  /// this rank's tokens', as with whole logits, and the gradient stays on
  /// this rank's columns.
  LogicalResult partitionVocabLoss(nn::CrossEntropyOp ce);

  /// A reshape of heads or features split over tp ranks divides the result
  /// dim that starts where the input's divided dim starts.
  LogicalResult partitionReshape(nn::ReshapeOp r);

  /// A slice of a split value: along the split dim (GPT-2's q, k, v out of
  /// c_attn's blocks), this rank's part of the slice; along another, the
  /// split dim follows the input's.
  LogicalResult partitionSlice(nn::SliceOp sl);

  /// This rank's part of the sequence dim `dim` of a whole tensor (GPT-2's
  /// positions): its row `tp_index` when viewed as [tp, the rest] (an
  /// embedding lookup, whose gradient lands in that row). The dims before
  /// `dim` must be 1.
  FailureOr<Value> localSequence(Operation *user, Value whole, int64_t dim);

  /// The forward's i32[1] input abi::kIoTpIndex, added on first use.
  Value tpIndexArgument();

  /// A whole operand broadcast along the sequence of a sequence-sharded op
  /// (GPT-2's position embeddings added to the token embeddings): this
  /// rank's part of it.
  LogicalResult localWholeOperands(Operation *op);

  /// Element-wise ops, norms, rotary embedding, projections that every
  /// rank holds whole: each result that had the shape of a split operand
  /// takes that operand's new shape.
  LogicalResult partitionElementwise(Operation *op);
};

} // namespace shardc::tp_partition

#endif // SHARDC_PASSES_TP_TPPARTITION_H
