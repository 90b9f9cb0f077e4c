//===- FSDPShardOptimizer.cpp - a global norm over sharded gradients ------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_FSDPSHARDOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

struct FSDPShardOptimizerPass
    : public shardc::impl::FSDPShardOptimizerBase<FSDPShardOptimizerPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module->getAttrOfType<DenseI64ArrayAttr>(attrs::kMesh);
    auto opt = module.lookupSymbol<func::FuncOp>("opt_step");
    if (!mesh || !opt)
      return;
    int16_t shardAxis = mesh[0] > 1 ? 1 : 0;
    auto gridRef = FlatSymbolRefAttr::get(&getContext(), attrs::kGridName);
    // Replicas hold equal shards: summing over the shard axis is the norm.
    opt.walk([&](nn::ClipCoefOp clip) {
      OpBuilder b(clip);
      Value local = clip.getSquaredNorm();
      Value global = shard::AllReduceOp::create(
          b, clip.getLoc(), local.getType(), gridRef,
          b.getDenseI16ArrayAttr({shardAxis}), local,
          shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum));
      local.replaceAllUsesExcept(global, global.getDefiningOp());
    });
  }
};

} // namespace
