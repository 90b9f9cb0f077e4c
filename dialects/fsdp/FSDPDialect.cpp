//===- FSDPDialect.cpp - the fsdp dialect ---------------------------------===//
#include "dialects/fsdp/FSDPDialect.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace shardc::fsdp;

#include "dialects/fsdp/FSDPDialect.cpp.inc"

void FSDPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/fsdp/FSDPOps.cpp.inc"
      >();
}

SmallVector<Value> SyncGradOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {shard::AllReduceOp::create(b, getLoc(), grads[0].getType(),
                                     getGridAttr(), getGridAxesAttr(), grads[0],
                                     shard::ReductionKindAttr::get(
                                         b.getContext(), shard::ReductionKind::Sum))};
}

/// `chunk` is `full` with dim 0 divided by `n`.
static LogicalResult verifyChunk(Operation *op, Type fullType, Type chunkType,
                                 int64_t n) {
  auto full = cast<RankedTensorType>(fullType);
  auto chunk = cast<RankedTensorType>(chunkType);
  if (n < 1 || full.getRank() < 1 || full.getDimSize(0) % n != 0)
    return op->emitOpError("group_size ")
           << n << " does not divide dim 0 of " << full;
  SmallVector<int64_t> shape(full.getShape());
  shape[0] /= n;
  if (chunk.getShape() != ArrayRef<int64_t>(shape) ||
      chunk.getElementType() != full.getElementType())
    return op->emitOpError("expects a chunk of ")
           << RankedTensorType::get(shape, full.getElementType()) << ", got "
           << chunk;
  return success();
}

LogicalResult ReshardOp::verify() {
  return verifyChunk(*this, getInput().getType(), getResult().getType(),
                     getGroupSize());
}

LogicalResult GatherGroupOp::verify() {
  return verifyChunk(*this, getResult().getType(), getInput().getType(),
                     getGroupSize());
}

#define GET_OP_CLASSES
#include "dialects/fsdp/FSDPOps.cpp.inc"
