//===- FSDPPrefetch.cpp - place all-gathers N groups ahead ----------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

#include <map>

namespace shardc {
#define GEN_PASS_DEF_FSDPPREFETCH
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

struct Group {
  SmallVector<Operation *> chain; // gather ops, in program order
  Operation *firstUse = nullptr;  // the group's first compute op
};

/// The position of a gather-chain op: narrowing before the all-gather (0),
/// the all-gather (1), widening after it (2), slicing off padding (3),
/// keeping a chunk for backward (4).
int stage(Operation *op) {
  if (isa<shard::AllGatherOp, fsdp::GatherGroupOp>(op))
    return 1;
  if (isa<fsdp::ReshardOp>(op))
    return 4; // keeps a chunk of the gathered parameter
  if (isa<nn::SliceOp>(op))
    return 3;
  if (isa<nn::CastOp>(op) &&
      (op->getOperand(0).getDefiningOp<shard::AllGatherOp>() ||
       op->getOperand(0).getDefiningOp<fsdp::GatherGroupOp>()))
    return 2;
  return 0;
}

/// Moves each group's all-gathers (with the ops that feed them) `ahead`
/// groups early: before the first compute of the group `ahead` positions
/// earlier in use order, or before `start` (a compute op) for the first
/// `ahead` groups. ahead = 0: just in time. The ops that read the gathered
/// parameters go just before the group's own first compute.
void schedule(std::map<int64_t, Group> &groups, int64_t ahead,
              Operation *start) {
  SmallVector<Group *> order;
  for (auto &[id, g] : groups)
    if (g.firstUse)
      order.push_back(&g);
  llvm::sort(order, [](Group *a, Group *b) {
    return a->firstUse->isBeforeInBlock(b->firstUse);
  });
  for (size_t k = 0; k < order.size(); ++k) {
    Operation *target =
        int64_t(k) < ahead ? start : order[k - ahead]->firstUse;
    // Stage by stage across the group's parameters, so that the group's
    // all-gathers are adjacent and lower to one collective.
    SmallVector<Operation *> chain(order[k]->chain);
    llvm::stable_sort(chain, [](Operation *a, Operation *b) {
      return stage(a) < stage(b);
    });
    // The gather and what feeds it go ahead; what reads the gathered
    // buffer (the widening cast of mixed precision, the padding's slice,
    // the chunk kept for backward) stays just in time, before the group's
    // own compute: on the compute stream, it would wait for the gather at
    // once and leave nothing to overlap it.
    for (Operation *op : chain)
      op->moveBefore(stage(op) <= 1 ? target : order[k]->firstUse);
  }
}

struct FSDPPrefetchPass : public shardc::impl::FSDPPrefetchBase<FSDPPrefetchPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (prefetchForward < 0 || prefetchBackward < 0) {
      module.emitError("prefetch depths must be non-negative");
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!step)
      return;
    Block &body = step.getBody().front();
    Operation *loss = lossOp(step);
    if (!loss)
      return;

    std::map<int64_t, Group> forward, backward;
    for (Operation &op : body) {
      auto group = op.getAttrOfType<IntegerAttr>(attrs::kGroup);
      if (!group)
        continue;
      Group &g = (op.hasAttr("fsdp.regather") ? backward : forward)[group.getInt()];
      g.chain.push_back(&op);
      for (Operation *user : op.getUsers())
        if (!user->hasAttr(attrs::kGroup) &&
            (!g.firstUse || user->isBeforeInBlock(g.firstUse)))
          g.firstUse = user;
    }
    // Forward: the first `prefetchForward` groups before any compute (as
    // early as possible), then each group before the compute of the group
    // `prefetchForward` earlier. Backward likewise from the loss on.
    Operation *firstCompute = &body.front();
    while (firstCompute->hasAttr(attrs::kGroup))
      firstCompute = firstCompute->getNextNode();
    schedule(forward, prefetchForward, firstCompute);
    schedule(backward, prefetchBackward, loss->getNextNode());

    // Reduce-scatter each gradient as soon as it is final (with its zero
    // padding and, under HSDP, its all-reduce), so that it overlaps the rest
    // of backward and the unsharded gradient dies early.
    for (auto rs : llvm::to_vector(step.getOps<shard::ReduceScatterOp>())) {
      // The ops between the gradient and its reduce-scatter (the padding's
      // slice_grad, the cast to the reduce dtype) follow the gradient.
      SmallVector<Operation *> chain;
      Value grad = rs.getInput();
      while (Operation *op = grad.getDefiningOp()) {
        if (!isa<nn::SliceGradOp, nn::CastOp>(op) || !op->hasOneUse())
          break;
        chain.push_back(op);
        grad = op->getOperand(0);
      }
      Operation *producer = grad.getDefiningOp();
      for (Operation *op : llvm::reverse(chain)) {
        if (producer)
          op->moveAfter(producer);
        producer = op;
      }
      if (!producer)
        continue;
      rs->moveAfter(producer);
      Operation *last = rs;
      for (Operation *user : llvm::to_vector(rs->getUsers()))
        if (isa<shard::AllReduceOp>(user)) {
          user->moveAfter(last);
          last = user;
        }
    }
  }
};

} // namespace
