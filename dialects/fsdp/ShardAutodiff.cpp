//===- ShardAutodiff.cpp - VJPs of upstream shard collectives -------------===//
#include "dialects/fsdp/FSDPDialect.h"
#include "target/Attrs.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace {

/// all_gather along an axis: its adjoint sums every device's gradient and
/// hands each device its own slice, a reduce-scatter.
struct AllGatherVJP
    : public shardc::nn::DifferentiableOpInterface::ExternalModel<
          AllGatherVJP, shard::AllGatherOp> {
  SmallVector<Value> buildVJP(Operation *op, OpBuilder &b,
                              ArrayRef<Value> grads) const {
    auto gather = cast<shard::AllGatherOp>(op);
    // Reduced in the gradient's element type (mixed precision decides it),
    // or in the gather's sum dtype (an activation's: the gradient cast to
    // it and the sum cast back).
    auto shardType = cast<RankedTensorType>(gather.getInput().getType());
    auto gradType = cast<RankedTensorType>(grads[0].getType());
    Type sumType = gradType.getElementType();
    if (auto sum = op->getAttrOfType<TypeAttr>(shardc::attrs::kSumDtype))
      sumType = sum.getValue();
    Value grad = grads[0];
    if (sumType != gradType.getElementType())
      grad = shardc::nn::CastOp::create(b, op->getLoc(),
                                        gradType.clone(sumType), grad,
                                        TypeAttr());
    Value scattered = shard::ReduceScatterOp::create(
        b, op->getLoc(), shardType.clone(sumType), gather.getGridAttr(),
        gather.getGridAxesAttr(), grad,
        shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum),
        gather.getGatherAxisAttr());
    if (sumType != gradType.getElementType())
      scattered = shardc::nn::CastOp::create(
          b, op->getLoc(), shardType.clone(gradType.getElementType()),
          scattered, TypeAttr());
    // The FSDP group of the gathered parameter, for bucketing.
    if (Attribute group = op->getAttr(shardc::attrs::kGroup))
      scattered.getDefiningOp()->setAttr(shardc::attrs::kGroup, group);
    return {scattered};
  }
};

/// reduce_scatter (sum) along an axis: each device's slice of the sum
/// depends on every device's input equally, so its adjoint gathers the
/// slices' gradients back, an all-gather.
struct ReduceScatterVJP
    : public shardc::nn::DifferentiableOpInterface::ExternalModel<
          ReduceScatterVJP, shard::ReduceScatterOp> {
  SmallVector<Value> buildVJP(Operation *op, OpBuilder &b,
                              ArrayRef<Value> grads) const {
    auto scatter = cast<shard::ReduceScatterOp>(op);
    auto inType = cast<RankedTensorType>(scatter.getInput().getType());
    auto gradType = cast<RankedTensorType>(grads[0].getType());
    Value all = shard::AllGatherOp::create(
        b, op->getLoc(), inType.clone(gradType.getElementType()),
        scatter.getGridAttr(), scatter.getGridAxesAttr(), grads[0],
        scatter.getScatterAxisAttr());
    return {all};
  }
};

} // namespace

void shardc::fsdp::registerShardAutodiffModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllGatherOp::attachInterface<AllGatherVJP>(*ctx);
    shard::ReduceScatterOp::attachInterface<ReduceScatterVJP>(*ctx);
  });
}
