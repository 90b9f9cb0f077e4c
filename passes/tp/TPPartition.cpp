//===- TPPartition.cpp - tensor parallelism on the forward graph ----------===//
//
// torchtitan's tensor-parallel plan with sequence parallelism, applied at
// compile time to the model function before FSDP shards it (GPT-2, Llama,
// Mistral, Qwen2, by their Hugging Face parameter names):
//
//   residual stream and norms: on the tokens of this tp rank ([B, T/tp,
//     C], "sequence-sharded");
//   embedding and LM head: vocabulary-parallel (each rank's rows of the
//     table and the head) where tp divides the vocabulary: a masked lookup
//     of the whole sequence's tokens, reduce-scattered over the sequence;
//     the head column-parallel by vocabulary, and the loss on those
//     vocab-sharded logits (loss parallel: each rank's row statistics
//     all-gathered, nn.vocab_cross_entropy). A vocabulary tp does not
//     divide keeps both whole on every rank, on this rank's tokens;
//   q, k, v, MLP gate and up projections: column-parallel (their weights'
//     output features split by tp rank, heads for q/k/v; GPT-2's fused
//     c_attn by thirds), the input all-gathered over the sequence first
//     (one gather for q, k and v);
//   output and MLP down projections: row-parallel (input features split),
//     their partial sums reduce-scattered back over the sequence;
//   attention: H/tp heads and KV/tp kv heads per rank;
//   a whole tensor added along the sequence (GPT-2's learned positions):
//     this rank's rows of it, picked by the `tp_index` input.
//
// Parameters that every tp rank holds whole (norm weights, and the
// embedding and LM head when not vocabulary-parallel) are marked `tp.dim = -1`: fsdp-shard-parameters sums their
// gradients, computed on each rank's tokens, over the tp axis (on the f32
// shard, after the reduce-scatter: 1/S of the bytes, in the master dtype).
// Autodiff mirrors the collectives (an all-gather's gradient is a
// reduce-scatter and the other way round).
//
// The sequence is split on dim 1 by collectives on dim 0: the tokens are
// moved to dim 0 first (a reshape when the micro-batch is 1, else a
// transpose) and back after.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/tp/TPPartition.h"

#include "target/Sharding.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_TPPARTITION
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;
using namespace shardc::tp_partition;

/// torchtitan's plan for the Hugging Face names: Llama, Mistral and Qwen2
/// (q/k/v, gate/up; o, down), GPT-2 (c_attn by thirds, c_fc; the c_projs).
Plan shardc::tp_partition::planOf(StringRef name) {
  if (name.contains(".attn.c_attn."))
    return {Role::Column, 3};
  for (StringRef col : {".q_proj.", ".k_proj.", ".v_proj.", ".gate_proj.",
                        ".up_proj.", ".mlp.c_fc."})
    if (name.contains(col))
      return {Role::Column, 1};
  // A row-parallel projection's bias is added once, after the sum: whole.
  for (StringRef row : {".o_proj.weight", ".down_proj.weight", ".c_proj.weight"})
    if (name.ends_with(row))
      return {Role::Row, 1};
  return {};
}

Plan TPPartitioner::planOfParameter(Value param, StringRef name) const {
  if (!byStructure)
    return planOf(name);
  auto it = structural.find(param);
  return it == structural.end() ? Plan{} : it->second;
}

/// The embedding table and LM head of the families the plan knows.
bool shardc::tp_partition::isVocabName(StringRef name) {
  return name.ends_with("embed_tokens.weight") || name.ends_with("wte.weight") ||
         name == "lm_head.weight" || name.ends_with(".lm_head.weight");
}

/// The families the plan's names fit; heads cannot be padded without
/// changing the model: refused.
LogicalResult TPPartitioner::checkHeads(ModuleOp module) {
  auto model = module->getAttrOfType<DictionaryAttr>(attrs::kModel);
  if (!model)
    return success();
  if (byStructure)
    return success(); // ONNX: attention checks its heads
  auto family = model.getAs<StringAttr>("family");
  if (family && !llvm::is_contained({"llama", "mistral", "qwen2", "gpt2"},
                                    family.getValue()))
    return module.emitError("--tp: the ")
           << family.getValue()
           << " family has no tensor-parallel plan (GPT-2, Llama, Mistral "
              "and Qwen2 have)";
  for (auto [key, what] : {std::pair<StringRef, StringRef>{"num_heads",
                                                           "attention heads"},
                           {"num_kv_heads", "key/value heads"}})
    if (auto n = model.getAs<IntegerAttr>(key); n && n.getInt() % T)
      return module.emitError("--tp ")
             << T << ": the model's " << n.getInt() << " " << what
             << " are not divisible by " << T
             << " (tensor parallelism splits them by rank)";
  return success();
}

/// Vocabulary-parallel when tp divides the rows of every embedding and
/// LM head parameter (the vocabulary): torchtitan's plan. Otherwise they
/// stay whole on every rank (a padded vocabulary would change the
/// checkpoints' and the optimizer's shapes).
void TPPartitioner::decideVocab(func::FuncOp fwd) {
  vocabParallel = false;
  if (vocab == "whole")
    return;
  for (BlockArgument arg : fwd.getBody().front().getArguments()) {
    auto name = fwd.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                 attrs::kParam);
    if (!name || !isVocabParameter(arg, name.getValue()))
      continue;
    if (tensorType(arg).getRank() != 2 || tensorType(arg).getDimSize(0) % T) {
      vocabParallel = false;
      return;
    }
    vocabParallel = true;
  }
}

/// Parameters to their tp-local shapes; tokens and targets to this rank's
/// part of the sequence (whole with a vocabulary-parallel embedding and
/// loss, which read every token).
LogicalResult TPPartitioner::partitionArguments(func::FuncOp fwd) {
  for (BlockArgument arg : fwd.getBody().front().getArguments()) {
    unsigned i = arg.getArgNumber();
    if (auto name = fwd.getArgAttrOfType<StringAttr>(i, attrs::kParam)) {
      if (failed(partitionParameter(fwd, arg, name.getValue())))
        return failure();
      continue;
    }
    auto input = fwd.getArgAttrOfType<StringAttr>(i, attrs::kInput);
    if (!input || (input.getValue() != abi::kIoTokens &&
                   input.getValue() != abi::kIoTargets))
      return fwd.emitError("--tp: argument #")
             << i << " is neither a parameter nor the tokens or targets";
    RankedTensorType t = tensorType(arg);
    if (t.getRank() == 2 && t.getDimSize(1) % T == 0 && vocabParallel)
      continue;
    if (t.getRank() != 2 || t.getDimSize(1) % T)
      return fwd.emitError("--tp ")
             << T << ": the sequence length " << t.getDimSize(1)
             << " is not divisible by " << T
             << " (sequence parallelism splits it by rank)";
    retype(arg, {t.getDimSize(0), t.getDimSize(1) / T}, Layout::Sequence);
  }
  return success();
}

/// The dim a linear's weight or bias `param` splits in `role`.
FailureOr<int64_t> TPPartitioner::splitDim(func::FuncOp fwd, Value param, StringRef name,
                                           Role role) {
  for (Operation *user : param.getUsers()) {
    // A bias the exporter adds after the projection (MatMul, then Add).
    if (isa<nn::AddOp>(user) && tensorType(param).getRank() == 1)
      return FailureOr<int64_t>(0);
    auto lin = dyn_cast<nn::LinearOp>(user);
    if (!lin)
      continue;
    if (lin.getBias() == param)
      return FailureOr<int64_t>(0); // a column-parallel projection's
    if (lin.getWeight() == param) {
      // [N, K] (PyTorch's Linear), or [K, N] with weight_in_out.
      bool columnDim0 = !lin.getWeightInOut();
      return role == Role::Column ? (columnDim0 ? 0 : 1)
                                  : (columnDim0 ? 1 : 0);
    }
  }
  return fwd.emitError("--tp: parameter '")
         << name << "' is planned as a projection but no nn.linear uses it";
}

/// A vocabulary-parallel parameter splits its vocabulary: an embedding's
/// table's rows, an LM head's stored [V, C] rows or (an ONNX export's
/// MatMul weight) [C, V] columns.
FailureOr<int64_t> TPPartitioner::vocabDim(func::FuncOp fwd, Value param, StringRef name) {
  int64_t dim = 0;
  for (Operation *user : param.getUsers()) {
    if (auto emb = dyn_cast<nn::EmbeddingOp>(user);
        emb && emb.getTable() == param)
      continue;
    if (auto lin = dyn_cast<nn::LinearOp>(user);
        lin && lin.getWeight() == param) {
      if (lin.getWeightInOut() && !byStructure)
        return fwd.emitError("--tp: parameter '")
               << name << "' is an LM head stored [hidden, vocab]";
      dim = lin.getWeightInOut() ? 1 : 0;
      continue;
    }
    return fwd.emitError("--tp: parameter '")
           << name << "' is planned vocabulary-parallel, but '"
           << user->getName() << "' reads it as neither an embedding table "
           << "nor an LM head";
  }
  return FailureOr<int64_t>(dim);
}

LogicalResult TPPartitioner::partitionParameter(func::FuncOp fwd, BlockArgument arg,
                                                StringRef name) {
  Plan plan = vocabParallel && isVocabParameter(arg, name)
                  ? Plan{Role::Vocab, 1}
                  : planOfParameter(arg, name);
  Role role = plan.role;
  roles[arg] = role;
  OpBuilder b(fwd);
  unsigned i = arg.getArgNumber();
  if (role == Role::Replicated) {
    fwd.setArgAttr(i, attrs::kTpDim, b.getI64IntegerAttr(-1));
    return success();
  }
  FailureOr<int64_t> dim = role == Role::Vocab
                               ? vocabDim(fwd, arg, name)
                               : splitDim(fwd, arg, name, role);
  if (failed(dim))
    return failure();
  SmallVector<int64_t> shape(tensorType(arg).getShape());
  if (shape[*dim] % (plan.blocks * T))
    return fwd.emitError("--tp ")
           << T << ": parameter '" << name << "' has size " << shape[*dim]
           << " on dim " << *dim << " (its features, which tensor "
           << "parallelism splits over " << T << " ranks): not divisible by "
           << plan.blocks * T;
  shape[*dim] /= T;
  fwd.setArgAttr(i, attrs::kTpDim, b.getI64IntegerAttr(*dim));
  if (plan.blocks > 1)
    fwd.setArgAttr(i, attrs::kTpBlocks, b.getI64IntegerAttr(plan.blocks));
  retype(arg, shape, Layout::Whole);
  return success();
}

namespace {

struct TPPartitionPass
    : public shardc::impl::TPPartitionBase<TPPartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshShape shape;
    std::string error;
    if (!parseMesh(mesh, shape, error) || !checkTp(tp, error)) {
      module.emitError(error);
      return signalPassFailure();
    }
    TPPartitioner p;
    shape.tp = p.T = tp;
    if (vocab != "parallel" && vocab != "whole") {
      module.emitError("--tp-vocab must be 'parallel' or 'whole', not '")
          << vocab << "'";
      return signalPassFailure();
    }
    if (p.T == 1)
      return;
    p.vocab = vocab;
    FailureOr<FlatSymbolRefAttr> g = getOrCreateGrid(module, shape);
    if (failed(g))
      return signalPassFailure();
    p.grid = *g;
    p.tpAxis = int16_t(shape.tpAxis());
    auto fwd = module.lookupSymbol<func::FuncOp>("forward");
    if (!fwd) {
      module.emitError("no model function named 'forward'");
      return signalPassFailure();
    }
    p.forward = fwd;
    auto model = module->getAttrOfType<DictionaryAttr>(attrs::kModel);
    auto family = model ? model.getAs<StringAttr>("family") : StringAttr();
    p.byStructure = family && family.getValue() == "onnx";
    if (p.byStructure)
      p.planByStructure(fwd);
    p.decideVocab(fwd);
    if (failed(p.checkHeads(module)) || failed(p.partitionArguments(fwd)))
      return signalPassFailure();
    for (Operation &op :
         llvm::make_early_inc_range(fwd.getBody().front().without_terminator()))
      if (failed(p.partitionOp(&op)))
        return signalPassFailure();
    SmallVector<Type> argTypes(fwd.getBody().front().getArgumentTypes());
    fwd.setFunctionType(FunctionType::get(&getContext(), argTypes,
                                          fwd.getFunctionType().getResults()));
    // partitionArguments left the tokens whole exactly when the embedding
    // and loss split by vocabulary.
    if (p.vocabParallel)
      module->setAttr(attrs::kTpWholeTokens, UnitAttr::get(&getContext()));
  }
};

} // namespace
