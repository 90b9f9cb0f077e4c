//===- TPSequence.cpp - the sequence over the tp ranks --------------------===//
//
// The collectives that move a [B, T, ...] value between the whole
// sequence and this tp rank's part of it (all-gather, reduce-scatter over
// the tokens moved to dim 0), and this rank's part of a whole tensor read
// along the sequence (GPT-2's positions, by the tp_index input).
//
//===----------------------------------------------------------------------===//
#include "passes/tp/TPPartition.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::tp_partition;

/// Sequence-sharded [B, T/tp, ...] -> whole [B, T, ...] (all-gather).
Value TPPartitioner::gatherSequence(Value seq) {
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
Value TPPartitioner::scatterSequence(OpBuilder &b, Location loc, Value partial) {
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
void TPPartitioner::inBlockOf(Value from, ArrayRef<Value> made) {
  Operation *producer = from.getDefiningOp();
  Attribute block = producer ? producer->getAttr(attrs::kBlock) : nullptr;
  if (!block)
    return;
  for (Value v : made)
    if (Operation *op = v.getDefiningOp(); op && op != producer)
      op->setAttr(attrs::kBlock, block);
}

/// [B, S, ...] -> [S, B, ...]: a reshape for B = 1, else a transpose.
Value TPPartitioner::tokensToDim0(OpBuilder &b, Location loc, Value v) {
  RankedTensorType t = tensorType(v);
  SmallVector<int64_t> shape(t.getShape());
  std::swap(shape[0], shape[1]);
  if (t.getDimSize(0) == 1)
    return nn::ReshapeOp::create(b, loc, withShape(t, shape), v);
  return nn::TransposeOp::create(b, loc, withShape(t, shape), v,
                                 b.getDenseI64ArrayAttr(swap01(t.getRank())));
}

Value TPPartitioner::tokensFromDim0(OpBuilder &b, Location loc, Value v,
                                           RankedTensorType result) {
  if (result.getDimSize(0) == 1)
    return nn::ReshapeOp::create(b, loc, result, v);
  return nn::TransposeOp::create(b, loc, result, v,
                                 b.getDenseI64ArrayAttr(swap01(result.getRank())));
}

SmallVector<int64_t> TPPartitioner::swap01(int64_t rank) {
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[0], perm[1]);
  return perm;
}

/// This rank's part of the sequence dim `dim` of a whole tensor (GPT-2's
/// positions): its row `tp_index` when viewed as [tp, the rest] (an
/// embedding lookup, whose gradient lands in that row). The dims before
/// `dim` must be 1.
FailureOr<Value> TPPartitioner::localSequence(Operation *user, Value whole, int64_t dim) {
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
Value TPPartitioner::tpIndexArgument() {
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
LogicalResult TPPartitioner::localWholeOperands(Operation *op) {
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
