//===- TPOps.cpp - tp-partition's rule for each op ------------------------===//
//
// Each op of the forward, in order, takes its operands' layouts over the
// tp ranks: projections column- or row-parallel by their weights' roles,
// the vocabulary-parallel embedding and loss, attention on its heads,
// reshapes and slices of split dims, element-wise ops and norms.
//
//===----------------------------------------------------------------------===//
#include "passes/tp/TPPartition.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::tp_partition;

LogicalResult TPPartitioner::partitionOp(Operation *op) {
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
    const char *names[] = {"query", "key", "value"};
    Value qkv[] = {att.getQuery(), att.getKey(), att.getValue()};
    for (int i = 0; i < 3; ++i) {
      if (layoutOf(qkv[i]) == Layout::Split)
        continue;
      InFlightDiagnostic diag =
          op->emitOpError("--tp: attention's ")
          << names[i] << " must come from a column-parallel projection "
          << "(split by heads) through reshapes, transposes, slices and "
          << "rotary embeddings; this model's is not in the plan";
      if (Operation *def = qkv[i].getDefiningOp())
        diag << " (the " << names[i] << " is made by '" << def->getName()
             << "' at " << def->getLoc() << ")";
      return diag;
    }
    retype(att.getResult(), tensorType(att.getQuery()).getShape(),
           layoutOf(att.getQuery()));
    return success();
  }
  return partitionElementwise(op);
}

LogicalResult TPPartitioner::partitionLinear(nn::LinearOp lin) {
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

LogicalResult TPPartitioner::partitionEmbedding(nn::EmbeddingOp emb) {
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
LogicalResult TPPartitioner::partitionVocabEmbedding(nn::EmbeddingOp emb) {
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
LogicalResult TPPartitioner::partitionVocabLoss(nn::CrossEntropyOp ce) {
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
LogicalResult TPPartitioner::partitionReshape(nn::ReshapeOp r) {
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
LogicalResult TPPartitioner::partitionSlice(nn::SliceOp sl) {
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

/// Element-wise ops, norms, rotary embedding, projections that every
/// rank holds whole: each result that had the shape of a split operand
/// takes that operand's new shape.
LogicalResult TPPartitioner::partitionElementwise(Operation *op) {
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
