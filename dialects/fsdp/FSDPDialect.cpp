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

#define GET_OP_CLASSES
#include "dialects/fsdp/FSDPOps.cpp.inc"
