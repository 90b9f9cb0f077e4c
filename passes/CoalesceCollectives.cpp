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

int64_t elementBytes(int64_t dtypeCode) { return dtypeCode == 0 ? 4 : 2; }

bool isGroupGather(Operation *op) {
  auto k = dyn_cast<rt::KernelOp>(op);
  return k && k.getName() == "all_gather" && k->hasAttr(attrs::kGroup) &&
         k.getBuffers().size() == 2 &&
         k.getBuffers()[1].getDefiningOp<rt::AllocOp>();
}

/// Same group, axis and dtype.
bool compatible(rt::KernelOp a, rt::KernelOp b) {
  return a->getAttr(attrs::kGroup) == b->getAttr(attrs::kGroup) &&
         a.getInts()[1] == b.getInts()[1] && a.getInts()[2] == b.getInts()[2];
}

void merge(ArrayRef<rt::KernelOp> run) {
  rt::KernelOp first = run.front();
  int64_t axis = first.getInts()[1], dtype = first.getInts()[2];
  int64_t eb = elementBytes(dtype);
  SmallVector<int64_t> ints = {int64_t(run.size()), axis, dtype};
  SmallVector<Value> ins, outs;
  int64_t local = 0, ranks = 0;
  for (rt::KernelOp k : run) {
    int64_t n = k.getInts()[0];
    ints.push_back(n);
    ins.push_back(k.getBuffers()[0]);
    outs.push_back(k.getBuffers()[1]);
    local += n;
    ranks = k.getBuffers()[1].getDefiningOp<rt::AllocOp>().getSize() / (n * eb);
  }
  // Each kernel is followed by the event recording its completion: keep
  // those after the merged kernel, which takes the last kernel's place.
  SmallVector<Operation *> done;
  for (rt::KernelOp k : run)
    if (auto record = dyn_cast_or_null<rt::EventRecordOp>(k->getNextNode()))
      done.push_back(record);
  Operation *last = run.back();
  for (Operation *record : llvm::reverse(done))
    if (record != last->getNextNode())
      record->moveAfter(last);
  OpBuilder b(last);
  Location loc = first.getLoc();
  Value pack = rt::AllocOp::create(b, loc, local * eb);
  Value gathered = rt::AllocOp::create(b, loc, ranks * local * eb);
  SmallVector<Value> bufs(ins);
  bufs.append(outs.begin(), outs.end());
  bufs.push_back(pack);
  bufs.push_back(gathered);
  auto merged = rt::KernelOp::create(b, loc, first.getCtx(), "all_gather_group",
                                     bufs, ints, ArrayRef<double>{},
                                     first.getStream());
  merged->setAttr(attrs::kGroup, first->getAttr(attrs::kGroup));
  for (rt::KernelOp k : run)
    k.erase();
}

struct RtCoalesceCollectivesPass
    : public shardc::impl::RtCoalesceCollectivesBase<RtCoalesceCollectivesPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal() || !fn.getBody().hasOneBlock())
      return;
    SmallVector<SmallVector<rt::KernelOp>> runs(1);
    for (Operation &op : fn.getBody().front()) {
      if (isGroupGather(&op)) {
        auto k = cast<rt::KernelOp>(op);
        if (!runs.back().empty() && !compatible(runs.back().front(), k))
          runs.emplace_back();
        runs.back().push_back(k);
      } else if (!isa<rt::EventRecordOp, rt::EventWaitOp, rt::AllocOp>(op) &&
                 !runs.back().empty()) {
        runs.emplace_back();
      }
    }
    for (ArrayRef<rt::KernelOp> run : runs)
      if (run.size() > 1)
        merge(run);
  }
};

} // namespace
