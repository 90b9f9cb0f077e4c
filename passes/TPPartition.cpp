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

#include "target/Sharding.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_TPPARTITION
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

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
Plan planOf(StringRef name) {
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

/// The embedding table and LM head of the families the plan knows.
bool isVocabName(StringRef name) {
  return name.ends_with("embed_tokens.weight") || name.ends_with("wte.weight") ||
         name == "lm_head.weight" || name.ends_with(".lm_head.weight");
}

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

RankedTensorType withShape(RankedTensorType t, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, t.getElementType());
}

struct TPPartitionPass
    : public shardc::impl::TPPartitionBase<TPPartitionPass> {
  using Base::Base;

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

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshShape shape;
    std::string error;
    if (!parseMesh(mesh, shape, error) || !checkTp(tp, error)) {
      module.emitError(error);
      return signalPassFailure();
    }
    shape.tp = T = tp;
    if (vocab != "parallel" && vocab != "whole") {
      module.emitError("--tp-vocab must be 'parallel' or 'whole', not '")
          << vocab << "'";
      return signalPassFailure();
    }
    if (T == 1)
      return;
    FailureOr<FlatSymbolRefAttr> g = getOrCreateGrid(module, shape);
    if (failed(g))
      return signalPassFailure();
    grid = *g;
    tpAxis = int16_t(shape.tpAxis());
    auto fwd = module.lookupSymbol<func::FuncOp>("forward");
    if (!fwd) {
      module.emitError("no model function named 'forward'");
      return signalPassFailure();
    }
    forward = fwd;
    decideVocab(fwd);
    if (failed(checkHeads(module)) || failed(partitionArguments(fwd)))
      return signalPassFailure();
    for (Operation &op :
         llvm::make_early_inc_range(fwd.getBody().front().without_terminator()))
      if (failed(partitionOp(&op)))
        return signalPassFailure();
    SmallVector<Type> argTypes(fwd.getBody().front().getArgumentTypes());
    fwd.setFunctionType(FunctionType::get(&getContext(), argTypes,
                                          fwd.getFunctionType().getResults()));
    // partitionArguments left the tokens whole exactly when the embedding
    // and loss split by vocabulary.
    if (vocabParallel)
      module->setAttr(attrs::kTpWholeTokens, UnitAttr::get(&getContext()));
  }

  /// The families the plan's names fit; heads cannot be padded without
  /// changing the model: refused.
  LogicalResult checkHeads(ModuleOp module) {
    auto model = module->getAttrOfType<DictionaryAttr>(attrs::kModel);
    if (!model)
      return success();
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
  void decideVocab(func::FuncOp fwd) {
    vocabParallel = false;
    if (vocab == "whole")
      return;
    for (BlockArgument arg : fwd.getBody().front().getArguments()) {
      auto name = fwd.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   attrs::kParam);
      if (!name || !isVocabName(name.getValue()))
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
  LogicalResult partitionArguments(func::FuncOp fwd) {
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
  FailureOr<int64_t> splitDim(func::FuncOp fwd, Value param, StringRef name,
                              Role role) {
    for (Operation *user : param.getUsers()) {
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

  /// A vocabulary-parallel parameter splits its rows: an embedding's table,
  /// or an LM head stored [V, C].
  FailureOr<int64_t> vocabDim(func::FuncOp fwd, Value param, StringRef name) {
    for (Operation *user : param.getUsers()) {
      if (auto emb = dyn_cast<nn::EmbeddingOp>(user);
          emb && emb.getTable() == param)
        continue;
      if (auto lin = dyn_cast<nn::LinearOp>(user);
          lin && lin.getWeight() == param && !lin.getWeightInOut())
        continue;
      return fwd.emitError("--tp: parameter '")
             << name << "' is planned vocabulary-parallel, but '"
             << user->getName() << "' reads it as neither an embedding table "
             << "nor an LM head stored [vocab, hidden]";
    }
    return FailureOr<int64_t>(0);
  }

  LogicalResult partitionParameter(func::FuncOp fwd, BlockArgument arg,
                                   StringRef name) {
    Plan plan = vocabParallel && isVocabName(name) ? Plan{Role::Vocab, 1}
                                                   : planOf(name);
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

  /// Sequence-sharded [B, T/tp, ...] -> whole [B, T, ...] (all-gather).
  Value gatherSequence(Value seq) {
    if (Value whole = gathered.lookup(seq))
      return whole;
    OpBuilder b(seq.getContext());
    b.setInsertionPointAfterValue(seq);
    Location loc = seq.getLoc();
    RankedTensorType t = tensorType(seq);
    SmallVector<int64_t> full(t.getShape());
    full[1] *= T;
    Value tokensFirst = tokensToDim0(b, loc, seq);
    SmallVector<int64_t> gatheredShape(tensorType(tokensFirst).getShape());
    gatheredShape[0] *= T;
    Value all = shard::AllGatherOp::create(
        b, loc, withShape(t, gatheredShape), grid,
        b.getDenseI16ArrayAttr({tpAxis}), tokensFirst, b.getIndexAttr(0));
    Value whole = tokensFromDim0(b, loc, all, withShape(t, full));
    inBlockOf(seq, {tokensFirst, all, whole});
    gathered[seq] = whole;
    return whole;
  }

  /// A partial sum [B, T, ...] -> its sequence-sharded sum [B, T/tp, ...].
  Value scatterSequence(OpBuilder &b, Location loc, Value partial) {
    RankedTensorType t = tensorType(partial);
    SmallVector<int64_t> localShape(t.getShape());
    localShape[1] /= T;
    Value tokensFirst = tokensToDim0(b, loc, partial);
    SmallVector<int64_t> scattered(tensorType(tokensFirst).getShape());
    scattered[0] /= T;
    Value sum = shard::ReduceScatterOp::create(
        b, loc, withShape(t, scattered), grid, b.getDenseI16ArrayAttr({tpAxis}),
        tokensFirst,
        shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum),
        b.getIndexAttr(0));
    Value local = tokensFromDim0(b, loc, sum, withShape(t, localShape));
    inBlockOf(partial, {tokensFirst, sum, local});
    return local;
  }

  /// Puts the ops that define `made` in the layer block (nn.block) of
  /// `from`'s producer, so that --recompute re-runs a block's collectives
  /// with it: the backward re-gathers a column-parallel input instead of
  /// keeping the gathered sequence, as Megatron does.
  static void inBlockOf(Value from, ArrayRef<Value> made) {
    Operation *producer = from.getDefiningOp();
    Attribute block = producer ? producer->getAttr(attrs::kBlock) : nullptr;
    if (!block)
      return;
    for (Value v : made)
      if (Operation *op = v.getDefiningOp(); op && op != producer)
        op->setAttr(attrs::kBlock, block);
  }

  /// [B, S, ...] -> [S, B, ...]: a reshape for B = 1, else a transpose.
  static Value tokensToDim0(OpBuilder &b, Location loc, Value v) {
    RankedTensorType t = tensorType(v);
    SmallVector<int64_t> shape(t.getShape());
    std::swap(shape[0], shape[1]);
    if (t.getDimSize(0) == 1)
      return nn::ReshapeOp::create(b, loc, withShape(t, shape), v);
    return nn::TransposeOp::create(b, loc, withShape(t, shape), v,
                                   b.getDenseI64ArrayAttr(swap01(t.getRank())));
  }
  static Value tokensFromDim0(OpBuilder &b, Location loc, Value v,
                              RankedTensorType result) {
    if (result.getDimSize(0) == 1)
      return nn::ReshapeOp::create(b, loc, result, v);
    return nn::TransposeOp::create(b, loc, result, v,
                                   b.getDenseI64ArrayAttr(swap01(result.getRank())));
  }
  static SmallVector<int64_t> swap01(int64_t rank) {
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(perm[0], perm[1]);
    return perm;
  }

  LogicalResult partitionOp(Operation *op) {
    bool touched = llvm::any_of(op->getOperands(), [&](Value v) {
      return layoutOf(v) != Layout::Whole || oldTypes.count(v);
    });
    if (!touched)
      return success();
    if (auto lin = dyn_cast<nn::LinearOp>(op))
      return partitionLinear(lin);
    if (auto emb = dyn_cast<nn::EmbeddingOp>(op))
      return partitionEmbedding(emb);
    if (auto ce = dyn_cast<nn::CrossEntropyOp>(op)) {
      if (layoutOf(ce.getLogits()) == Layout::Split)
        return partitionVocabLoss(ce);
      if (layoutOf(ce.getLogits()) != Layout::Sequence ||
          layoutOf(ce.getTargets()) != Layout::Sequence)
        return op->emitOpError("--tp: the loss reads logits and targets of "
                               "this rank's tokens only");
      return success(); // the mean over this rank's tokens
    }
    if (auto r = dyn_cast<nn::ReshapeOp>(op))
      return partitionReshape(r);
    if (auto sl = dyn_cast<nn::SliceOp>(op))
      return partitionSlice(sl);
    if (auto tr = dyn_cast<nn::TransposeOp>(op)) {
      SmallVector<int64_t> shape;
      for (int64_t p : tr.getPermutation())
        shape.push_back(tensorType(tr.getInput()).getDimSize(p));
      retype(tr.getResult(), shape, layoutOf(tr.getInput()));
      return success();
    }
    if (auto att = dyn_cast<nn::AttentionOp>(op)) {
      // Attention over this rank's tokens only would be another model.
      for (Value v : {att.getQuery(), att.getKey(), att.getValue()})
        if (layoutOf(v) != Layout::Split)
          return op->emitOpError("--tp: attention's q, k and v must come from "
                                 "column-parallel projections (split by "
                                 "heads); this model's are not in the plan");
      retype(att.getResult(), tensorType(att.getQuery()).getShape(),
             layoutOf(att.getQuery()));
      return success();
    }
    return partitionElementwise(op);
  }

  LogicalResult partitionLinear(nn::LinearOp lin) {
    Role role = roles.lookup(lin.getWeight());
    Value x = lin.getInput();
    Layout in = layoutOf(x);
    if (role == Role::Column || role == Role::Vocab) {
      if (in == Layout::Sequence)
        lin.getInputMutable().assign(gatherSequence(x));
      else if (in != Layout::Whole)
        return lin.emitOpError("--tp: a column-parallel projection reads a "
                               "value already split over the tp ranks");
      SmallVector<int64_t> shape(tensorType(lin.getResult()).getShape());
      shape.back() /= T;
      retype(lin.getResult(), shape, Layout::Split);
      return success();
    }
    if (role == Role::Row) {
      if (in != Layout::Split)
        return lin.emitOpError("--tp: a row-parallel projection must read the "
                               "heads or features split over the tp ranks");
      OpBuilder b(lin);
      b.setInsertionPointAfter(lin);
      Value bias = lin.getBias();
      if (bias) // added once, to the sum
        lin.getBiasMutable().clear();
      Value partial = lin.getResult();
      Value sum = scatterSequence(b, lin.getLoc(), partial);
      if (bias)
        sum = nn::AddOp::create(b, lin.getLoc(), sum.getType(), sum, bias);
      SmallPtrSet<Operation *, 4> chain;
      for (Operation *o = sum.getDefiningOp(); o && o != lin;
           o = o->getOperand(0).getDefiningOp())
        chain.insert(o);
      oldTypes.try_emplace(sum, tensorType(partial));
      layouts[sum] = Layout::Sequence;
      partial.replaceAllUsesExcept(sum, chain);
      return success();
    }
    if (in == Layout::Split)
      return lin.emitOpError("--tp: a replicated projection reads a value "
                             "split over the tp ranks");
    return partitionElementwise(lin);
  }

  LogicalResult partitionEmbedding(nn::EmbeddingOp emb) {
    if (roles.lookup(emb.getTable()) == Role::Vocab)
      return partitionVocabEmbedding(emb);
    if (layoutOf(emb.getTable()) != Layout::Whole ||
        oldTypes.count(emb.getTable()))
      return emb.emitOpError("--tp: an embedding of a table split over the "
                             "tp ranks that is not the vocabulary's");
    SmallVector<int64_t> shape(tensorType(emb.getIds()).getShape());
    shape.push_back(tensorType(emb.getTable()).getDimSize(1));
    retype(emb.getResult(), shape, layoutOf(emb.getIds()));
    return success();
  }

  /// The vocabulary-parallel embedding (torchtitan's RowwiseParallel
  /// embedding): this rank's rows looked up for every token of the whole
  /// sequence (zero rows for the tokens it does not hold), then summed and
  /// split over the sequence by a reduce-scatter.
  LogicalResult partitionVocabEmbedding(nn::EmbeddingOp emb) {
    Value ids = emb.getIds();
    if (layoutOf(ids) != Layout::Whole || tensorType(ids).getRank() != 2)
      return emb.emitOpError("--tp: a vocabulary-parallel embedding reads the "
                             "whole sequence's tokens [batch, seq]");
    OpBuilder b(emb);
    Location loc = emb.getLoc();
    RankedTensorType idType = tensorType(ids);
    SmallVector<int64_t> maskShape(idType.getShape());
    maskShape.push_back(1);
    int64_t rows = tensorType(emb.getTable()).getDimSize(0);
    auto part = nn::VocabPartOp::create(
        b, loc, idType, RankedTensorType::get(maskShape, b.getF32Type()), ids,
        tpIndexArgument(), b.getI64IntegerAttr(rows));
    emb.getIdsMutable().assign(part.getLocal());
    b.setInsertionPointAfter(emb);
    Value mine = nn::MulOp::create(b, loc, emb.getType(), emb.getResult(),
                                   part.getMask());
    Value local = scatterSequence(b, loc, mine);
    oldTypes.try_emplace(local, tensorType(mine));
    layouts[local] = Layout::Sequence;
    emb.getResult().replaceAllUsesExcept(local, mine.getDefiningOp());
    return success();
  }

  /// The loss on vocab-sharded logits (loss parallel): each rank's row
  /// statistics (logsumexp and the target's logit where it holds it),
  /// all-gathered over tp, give every rank the whole rows' loss; the loss is
  /// this rank's tokens', as with whole logits, and the gradient stays on
  /// this rank's columns.
  LogicalResult partitionVocabLoss(nn::CrossEntropyOp ce) {
    Value logits = ce.getLogits(), targets = ce.getTargets();
    if (layoutOf(targets) != Layout::Whole || tensorType(logits).getRank() != 3)
      return ce.emitOpError("--tp: the vocabulary-parallel loss reads the "
                            "whole sequence's logits [batch, seq, vocab/tp] "
                            "and targets");
    OpBuilder b(ce);
    Location loc = ce.getLoc();
    SmallVector<int64_t> shape(tensorType(targets).getShape());
    shape.push_back(2);
    Value stats = nn::VocabStatsOp::create(
        b, loc, RankedTensorType::get(shape, b.getF32Type()), logits, targets,
        tpIndexArgument());
    shape[0] *= T;
    Value all = shard::AllGatherOp::create(
        b, loc, RankedTensorType::get(shape, b.getF32Type()), grid,
        b.getDenseI16ArrayAttr({tpAxis}), stats, b.getIndexAttr(0));
    Value loss = nn::VocabCrossEntropyOp::create(
        b, loc, ce.getType(), logits, targets, all, tpIndexArgument(),
        ce.getIgnoreIndexAttr());
    ce.getResult().replaceAllUsesWith(loss);
    ce.erase();
    return success();
  }

  /// A reshape of heads or features split over tp ranks divides the result
  /// dim that starts where the input's divided dim starts.
  LogicalResult partitionReshape(nn::ReshapeOp r) {
    ArrayRef<int64_t> before = oldType(r.getInput()).getShape();
    ArrayRef<int64_t> now = tensorType(r.getInput()).getShape();
    ArrayRef<int64_t> out = tensorType(r.getResult()).getShape();
    int64_t changed = -1;
    for (size_t d = 0; d < before.size(); ++d)
      if (before[d] != now[d])
        changed = d;
    int64_t prefix = 1;
    for (int64_t d = 0; d < changed; ++d)
      prefix *= before[d];
    int64_t outPrefix = 1;
    for (size_t d = 0; d < out.size(); ++d) {
      if (outPrefix == prefix && out[d] % T == 0 && changed >= 0) {
        SmallVector<int64_t> shape(out);
        shape[d] /= T;
        retype(r.getResult(), shape, layoutOf(r.getInput()));
        return success();
      }
      outPrefix *= out[d];
    }
    return r.emitOpError("--tp: cannot split this reshape of a value split "
                         "over the tp ranks");
  }

  /// A slice of a split value: along the split dim (GPT-2's q, k, v out of
  /// c_attn's blocks), this rank's part of the slice; along another, the
  /// split dim follows the input's.
  LogicalResult partitionSlice(nn::SliceOp sl) {
    ArrayRef<int64_t> before = oldType(sl.getInput()).getShape();
    ArrayRef<int64_t> now = tensorType(sl.getInput()).getShape();
    SmallVector<int64_t> shape(tensorType(sl.getResult()).getShape());
    for (size_t d = 0; d < before.size(); ++d) {
      if (before[d] == now[d])
        continue;
      if (int64_t(d) != int64_t(sl.getDim())) {
        shape[d] = now[d];
        continue;
      }
      if (int64_t(sl.getStart()) % T || shape[d] % T)
        return sl.emitOpError("--tp: a slice of a split dim that does not "
                              "fall on the tp ranks' parts");
      sl->setAttr("start", IntegerAttr::get(sl.getStartAttr().getType(),
                                            int64_t(sl.getStart()) / T));
      shape[d] /= T;
    }
    retype(sl.getResult(), shape, layoutOf(sl.getInput()));
    return success();
  }

  /// This rank's part of the sequence dim `dim` of a whole tensor (GPT-2's
  /// positions): its row `tp_index` when viewed as [tp, the rest] (an
  /// embedding lookup, whose gradient lands in that row). The dims before
  /// `dim` must be 1.
  FailureOr<Value> localSequence(Operation *user, Value whole, int64_t dim) {
    if (Value part = localParts.lookup(whole))
      return part;
    RankedTensorType t = tensorType(whole);
    int64_t before = 1, after = 1;
    for (int64_t d = 0; d < t.getRank(); ++d) {
      if (d < dim)
        before *= t.getDimSize(d);
      else if (d > dim)
        after *= t.getDimSize(d);
    }
    if (before != 1)
      return user->emitOpError("--tp: cannot take this rank's part of the "
                               "sequence of an operand with leading dims");
    int64_t n = t.getDimSize(dim) / T;
    OpBuilder b(user);
    Location loc = user->getLoc();
    Value table = nn::ReshapeOp::create(b, loc, withShape(t, {T, n * after}), whole);
    Value row = nn::EmbeddingOp::create(b, loc, withShape(t, {1, n * after}),
                                        tpIndexArgument(), table);
    SmallVector<int64_t> shape(t.getShape());
    shape[dim] = n;
    Value part = nn::ReshapeOp::create(b, loc, withShape(t, shape), row);
    localParts[whole] = part;
    return part;
  }

  /// The forward's i32[1] input abi::kIoTpIndex, added on first use.
  Value tpIndexArgument() {
    if (tpIndex)
      return tpIndex;
    func::FuncOp fwd = forward;
    OpBuilder b(fwd);
    unsigned at = fwd.getNumArguments();
    auto type = RankedTensorType::get({1}, b.getI32Type());
    (void)fwd.insertArgument(
        at, type,
        b.getDictionaryAttr(b.getNamedAttr(attrs::kInput,
                                           b.getStringAttr(abi::kIoTpIndex))),
        fwd.getLoc());
    tpIndex = fwd.getArgument(at);
    return tpIndex;
  }

  /// A whole operand broadcast along the sequence of a sequence-sharded op
  /// (GPT-2's position embeddings added to the token embeddings): this
  /// rank's part of it.
  LogicalResult localWholeOperands(Operation *op) {
    auto result = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!result || result.getRank() < 2)
      return success();
    int64_t seq = result.getDimSize(1); // the result's old, whole shape
    for (OpOperand &use : op->getOpOperands()) {
      Value v = use.get();
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t || layoutOf(v) != Layout::Whole || oldTypes.count(v) ||
          !isa<FloatType>(t.getElementType()))
        continue;
      int64_t dim = 1 - (result.getRank() - t.getRank());
      if (dim < 0 || t.getDimSize(dim) != seq || seq == 1)
        continue;
      FailureOr<Value> part = localSequence(op, v, dim);
      if (failed(part))
        return failure();
      use.set(*part);
    }
    return success();
  }

  /// Element-wise ops, norms, rotary embedding, projections that every
  /// rank holds whole: each result that had the shape of a split operand
  /// takes that operand's new shape.
  LogicalResult partitionElementwise(Operation *op) {
    Layout layout = Layout::Whole;
    for (Value v : op->getOperands()) {
      Layout l = layoutOf(v);
      if (l == Layout::Whole)
        continue;
      if (layout != Layout::Whole && layout != l)
        return op->emitOpError("--tp: mixes a sequence-sharded value with one "
                               "split by heads or features");
      layout = l;
    }
    if (layout == Layout::Sequence && failed(localWholeOperands(op)))
      return failure();
    for (Value res : op->getResults()) {
      auto t = dyn_cast<RankedTensorType>(res.getType());
      if (!t)
        continue;
      bool done = false;
      for (Value v : op->getOperands())
        if (layoutOf(v) == layout && layout != Layout::Whole &&
            oldType(v).getShape() == t.getShape()) {
          retype(res, tensorType(v).getShape(), layout);
          done = true;
          break;
        }
      // A sequence-sharded projection through a replicated weight (the LM
      // head): the tokens dim follows the input's.
      if (!done && isa<nn::LinearOp>(op) && layout == Layout::Sequence) {
        SmallVector<int64_t> shape(t.getShape());
        shape[1] /= T;
        retype(res, shape, layout);
        done = true;
      }
      if (!done && layout != Layout::Whole && t.getRank() > 0)
        return op->emitOpError("--tp: no tensor-parallel rule for this op on "
                               "a value split over the tp ranks");
    }
    return success();
  }

};

} // namespace
