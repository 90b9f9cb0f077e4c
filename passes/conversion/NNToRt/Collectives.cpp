//===- Collectives.cpp
//-------------------------------------------------------===//
//
// convert-nn-to-rt: the shard and fsdp collectives, as typed rt collectives.
//
// One lowering function per op (passes/conversion/NNToRt/StepBuilder.h): each reads the
// op's operand shapes and writes rt.kernel calls whose arguments follow
// runtime/abi/kernels.def.
//
//===----------------------------------------------------------------------===//
#include "passes/conversion/NNToRt/StepBuilder.h"

using namespace mlir;
using namespace shardc;

namespace shardc::lower {
namespace {

LogicalResult lowerAllGather(StepBuilder &s, shard::AllGatherOp g) {
  FailureOr<int64_t> axis = StepBuilder::axisOf(g, g.getGridAxes());
  if (failed(axis))
    return failure();
  if (g.getGatherAxis().getZExtValue() != 0)
    return g.emitOpError("gathers on dim 0 only on this backend");
  s.gather(g, g.getInput(), g.getResult(), *axis, /*subgroup=*/0);
  return success();
}

LogicalResult lowerReduceScatter(StepBuilder &s, shard::ReduceScatterOp r) {
  Location loc = r.getLoc();
  FailureOr<int64_t> axis = StepBuilder::axisOf(r, r.getGridAxes());
  if (failed(axis))
    return failure();
  if (r.getReduction() != shard::ReductionKind::Sum ||
      r.getScatterAxis().getZExtValue() != 0)
    return r.emitOpError("sums and scatters on dim 0 only on this backend");
  Value in = s.buf(r.getInput());
  // Over an axis of one rank it is the identity: the result reads the
  // input's bytes (a gradient on one GPU is not copied).
  if (r.getInput().getType() == r.getResult().getType() &&
      !s.output(r.getResult())) {
    s.alias(r.getResult(), in);
    return success();
  }
  // A block of scratch for the ring's partial sums, live only here.
  Value scratch = rt::AllocOp::create(s.b, loc, byteSize(r.getResult()));
  Value out = s.define(r.getResult());
  s.beforeCollective(loc);
  rt::ReduceScatterOp::create(s.b, loc, s.ctx, in, out, scratch, *axis,
                              tensorType(r.getResult()).getElementType(),
                              tensorType(r.getResult()).getNumElements(),
                              StepBuilder::groupOf(r), abi::kCommStream);
  s.afterCollective(loc, out);
  return success();
}

LogicalResult lowerAllReduce(StepBuilder &s, shard::AllReduceOp r) {
  Location loc = r.getLoc();
  FailureOr<int64_t> axis = StepBuilder::axisOf(r, r.getGridAxes());
  if (failed(axis))
    return failure();
  if (r.getReduction() != shard::ReductionKind::Sum)
    return r.emitOpError("sums only on this backend");
  Value in = s.buf(r.getInput());
  Value out = s.define(r.getResult());
  s.beforeCollective(loc);
  rt::AllReduceOp::create(s.b, loc, s.ctx, in, out, *axis,
                          tensorType(r.getResult()).getElementType(),
                          tensorType(r.getResult()).getNumElements(),
                          StepBuilder::groupOf(r), abi::kCommStream);
  s.afterCollective(loc, out);
  return success();
}

LogicalResult lowerReshard(StepBuilder &s, fsdp::ReshardOp r) {
  Location loc = r.getLoc();
  FailureOr<int64_t> axis = StepBuilder::axisOf(r, r.getGridAxes());
  if (failed(axis))
    return failure();
  Value in = s.buf(r.getInput());
  s.kernel(loc, K::reshard_chunk, {in, s.define(r.getResult())},
           {byteSize(r.getResult()), int64_t(r.getGroupSize()), *axis});
  return success();
}

LogicalResult lowerGatherGroup(StepBuilder &s, fsdp::GatherGroupOp g) {
  FailureOr<int64_t> axis = StepBuilder::axisOf(g, g.getGridAxes());
  if (failed(axis))
    return failure();
  s.gather(g, g.getInput(), g.getResult(), *axis, g.getGroupSize());
  return success();
}

LogicalResult lowerSyncGrad(StepBuilder &s, fsdp::SyncGradOp op) {
  // Identity in forward: the result aliases the input.
  s.alias(op.getResult(), s.buf(op.getInput()));
  return success();
}

} // namespace

void addCollectiveLowerings(LoweringTable &table) {
  table.add(lowerAllGather);
  table.add(lowerReduceScatter);
  table.add(lowerAllReduce);
  table.add(lowerReshard);
  table.add(lowerGatherGroup);
  table.addTyped(lowerSyncGrad);
}

} // namespace shardc::lower
