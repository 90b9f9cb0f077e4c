//===- FuseLossGrad.cpp - the loss and its gradient in one pass -----------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_NNFUSELOSSGRAD
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// Whether `v` is an nn.fill of exactly 1.
bool isOne(Value v) {
  auto fill = v.getDefiningOp<nn::FillOp>();
  return fill && fill.getValue().convertToDouble() == 1.0;
}

struct NNFuseLossGradPass
    : public shardc::impl::NNFuseLossGradBase<NNFuseLossGradPass> {
  void runOnOperation() override {
    getOperation().walk([](nn::CrossEntropyGradOp grad) {
      if (!isOne(grad.getGrad()))
        return;
      for (Operation *user : grad.getLogits().getUsers()) {
        auto loss = dyn_cast<nn::CrossEntropyOp>(user);
        if (!loss || loss->getBlock() != grad->getBlock() ||
            loss.getTargets() != grad.getTargets() ||
            loss.getIgnoreIndex() != grad.getIgnoreIndex() ||
            !loss->isBeforeInBlock(grad))
          continue;
        OpBuilder b(loss);
        auto fused = nn::CrossEntropyWithGradOp::create(
            b, loss.getLoc(),
            TypeRange{loss.getType(), grad.getType()}, loss.getLogits(),
            loss.getTargets(), loss.getIgnoreIndexAttr());
        loss.getResult().replaceAllUsesWith(fused.getLoss());
        grad.getResult().replaceAllUsesWith(fused.getLogitsGrad());
        loss.erase();
        grad.erase();
        return;
      }
    });
  }
};

} // namespace
