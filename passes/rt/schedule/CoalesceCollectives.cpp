//===- CoalesceCollectives.cpp - one all-gather per FSDP group ------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTCOALESCECOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// A single all-gather of a parameter of an FSDP group, into a transient
/// buffer.
bool isGroupGather(Operation *op) {
  auto g = dyn_cast<rt::AllGatherOp>(op);
  return g && g.getGroup() && g.getInputs().size() == 1 &&
         g.getSubgroup() == 0 && g.getOutputs()[0].getDefiningOp<rt::AllocOp>();
}

/// Same group, axis and stream (a run's gathers of each dtype are merged
/// apart: the float8 all-gather's fp8 bytes and a group's other
/// parameters).
bool compatible(rt::AllGatherOp a, rt::AllGatherOp b) {
  return a.getGroup() == b.getGroup() && a.getAxis() == b.getAxis() &&
         a.getStream() == b.getStream();
}

void merge(ArrayRef<rt::AllGatherOp> run) {
  rt::AllGatherOp first = run.front();
  int64_t eb = abi::dtypeBytes(rt::dtypeCode(first.getDtype()));
  SmallVector<int64_t> counts;
  SmallVector<Value> ins, outs;
  int64_t local = 0, ranks = 0;
  for (rt::AllGatherOp g : run) {
    int64_t n = g.getCounts()[0];
    counts.push_back(n);
    ins.push_back(g.getInputs()[0]);
    outs.push_back(g.getOutputs()[0]);
    local += n;
    ranks = g.getOutputs()[0].getDefiningOp<rt::AllocOp>().getSize() / (n * eb);
  }
  // Each gather is followed by the event recording its completion: keep
  // those after the merged gather, which takes the last one's place.
  SmallVector<Operation *> done;
  for (rt::AllGatherOp g : run)
    if (auto record = dyn_cast_or_null<rt::EventRecordOp>(g->getNextNode()))
      done.push_back(record);
  Operation *last = run.back();
  for (Operation *record : llvm::reverse(done))
    if (record != last->getNextNode())
      record->moveAfter(last);
  OpBuilder b(last);
  Location loc = first.getLoc();
  Value pack = rt::AllocOp::create(b, loc, local * eb);
  Value gathered = rt::AllocOp::create(b, loc, ranks * local * eb);
  rt::AllGatherOp::create(
      b, loc, first.getCtx(), ins, outs, ValueRange{pack, gathered},
      first.getAxis(), first.getDtype(), counts, /*subgroup=*/0,
      first.getGroupAttr(), first.getStream());
  for (rt::AllGatherOp g : run)
    g.erase();
}

struct RtCoalesceCollectivesPass
    : public shardc::impl::RtCoalesceCollectivesBase<RtCoalesceCollectivesPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal() || !fn.getBody().hasOneBlock())
      return;
    SmallVector<SmallVector<rt::AllGatherOp>> runs(1);
    for (Operation &op : fn.getBody().front()) {
      if (isGroupGather(&op)) {
        auto k = cast<rt::AllGatherOp>(op);
        if (!runs.back().empty() && !compatible(runs.back().front(), k))
          runs.emplace_back();
        runs.back().push_back(k);
      } else if (!isa<rt::EventRecordOp, rt::EventWaitOp, rt::AllocOp>(op) &&
                 !runs.back().empty()) {
        runs.emplace_back();
      }
    }
    for (ArrayRef<rt::AllGatherOp> run : runs) {
      SmallVector<SmallVector<rt::AllGatherOp>> byDtype;
      for (rt::AllGatherOp g : run) {
        auto same = llvm::find_if(byDtype, [&](auto &part) {
          return part.front().getDtype() == g.getDtype();
        });
        if (same == byDtype.end())
          byDtype.push_back({g});
        else
          same->push_back(g);
      }
      for (ArrayRef<rt::AllGatherOp> part : byDtype)
        if (part.size() > 1)
          merge(part);
    }
  }
};

} // namespace
