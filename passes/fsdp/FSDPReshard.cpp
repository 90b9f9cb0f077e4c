//===- FSDPReshard.cpp - free gathered parameters after forward -----------===//
#include "passes/Passes.h"

#include "target/Sharding.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace shardc {
#define GEN_PASS_DEF_FSDPRESHARD
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

struct FSDPReshardPass : public shardc::impl::FSDPReshardBase<FSDPReshardPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    auto meshAttr = module->getAttrOfType<DenseI64ArrayAttr>(attrs::kMesh);
    MeshShape mesh;
    if (meshAttr)
      mesh = {meshAttr[0], meshAttr[1]};
    ReshardPolicy policy;
    std::string error;
    if (!parseReshard(reshardAfterForward, &mesh, policy, error)) {
      module.emitError(error);
      return signalPassFailure();
    }
    if (!step || policy.kind == ReshardPolicy::kKeep)
      return;
    // N of reshard-after-forward=N; 0: true.
    int64_t groupSize = policy.kind == ReshardPolicy::kGroups ? policy.groupSize : 0;
    Block &body = step.getBody().front();
    Operation *loss = lossOp(step);
    if (!loss)
      return;

    // The gather chains of forward (sync_grad, all_gather, slice), by the
    // value their users read.
    SmallVector<Operation *> chainEnds;
    for (Operation &op : body) {
      if (&op == loss)
        break;
      auto group = op.getAttrOfType<IntegerAttr>(attrs::kGroup);
      if (!group || group.getInt() < 0)
        continue;
      bool feedsChain = llvm::any_of(op.getUsers(), [](Operation *u) {
        return u->hasAttr(attrs::kGroup);
      });
      if (!feedsChain)
        chainEnds.push_back(&op);
    }

    for (Operation *end : chainEnds) {
      Value gathered = end->getResult(0);
      SmallVector<OpOperand *> late;
      for (OpOperand &use : gathered.getUses())
        if (loss->isBeforeInBlock(use.getOwner()))
          late.push_back(&use);
      if (late.empty())
        continue;
      Operation *first = late.front()->getOwner();
      for (OpOperand *use : late)
        if (use->getOwner()->isBeforeInBlock(first))
          first = use->getOwner();
      // Re-emit the chain from the shard up to `end` before the first
      // backward use.
      SmallVector<Operation *> chain;
      for (Operation *op = end; op && op->hasAttr(attrs::kGroup);
           op = op->getOperand(0).getDefiningOp())
        chain.push_back(op);
      OpBuilder b(first);
      IRMapping map;
      Operation *clone = nullptr;
      bool pastGather = false;
      for (Operation *op : llvm::reverse(chain)) {
        auto gather = dyn_cast<shard::AllGatherOp>(op);
        if (gather && groupSize > 0) {
          // Keep 1/N of the gathered parameter from forward, and gather it
          // back within the group of N ranks.
          OpBuilder after(gather);
          after.setInsertionPointAfter(gather);
          auto full = cast<RankedTensorType>(gather.getType());
          SmallVector<int64_t> shape(full.getShape());
          shape[0] /= groupSize;
          auto kept = fsdp::ReshardOp::create(
              after, gather.getLoc(), full.clone(shape), gather.getResult(),
              gather.getGridAttr(), gather.getGridAxesAttr(),
              after.getI64IntegerAttr(groupSize));
          kept->setAttr(attrs::kGroup, gather->getAttr(attrs::kGroup));
          clone = fsdp::GatherGroupOp::create(b, gather.getLoc(), full, kept,
                                              gather.getGridAttr(),
                                              gather.getGridAxesAttr(),
                                              b.getI64IntegerAttr(groupSize));
          clone->setAttr(attrs::kGroup, gather->getAttr(attrs::kGroup));
          map.map(gather.getResult(), clone->getResult(0));
          pastGather = true;
        } else if (pastGather || groupSize == 0) {
          clone = b.clone(*op, map);
        } else {
          continue; // before the gather: nothing to redo from a kept chunk
        }
        clone->setAttr("fsdp.regather", b.getUnitAttr());
      }
      for (OpOperand *use : late)
        use->set(clone->getResult(0));
    }
  }
};

} // namespace
