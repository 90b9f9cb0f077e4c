//===- FSDPReshard.cpp - free gathered parameters after forward -----------===//
#include "passes/Passes.h"

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
    if (reshardAfterForward != "true" && reshardAfterForward != "false") {
      module.emitError("reshard-after-forward must be true or false, got '")
          << reshardAfterForward << "'";
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!step || reshardAfterForward == "false")
      return;
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
      for (Operation *op : llvm::reverse(chain)) {
        clone = b.clone(*op, map);
        clone->setAttr("fsdp.regather", b.getUnitAttr());
      }
      for (OpOperand *use : late)
        use->set(clone->getResult(0));
    }
  }
};

} // namespace
