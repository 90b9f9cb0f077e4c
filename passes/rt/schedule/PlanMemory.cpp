//===- PlanMemory.cpp - place transient buffers in one arena --------------===//
//
// Static memory planning: the step function is one block executed in order,
// so a buffer is live from its rt.alloc to the last op that uses it or a
// view of it (rt-slice-views, rt-concat-views, rt-attention-layout). An op
// on another stream than the compute stream may still run after that: its
// buffers stay live until the compute stream waits for it (through events,
// across streams), or to the end of the step if it never does. Buffers are
// placed largest first at the lowest aligned offset that does not overlap
// any already placed buffer whose live range intersects its own.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

#include <array>
#include <limits>

namespace shardc {
#define GEN_PASS_DEF_RTPLANMEMORY
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

struct Interval {
  rt::AllocOp alloc;
  int64_t begin, end; // op indices, inclusive
  int64_t size;       // aligned bytes
  int64_t offset = -1;
};

/// Whether `alloc` is the output of an all-gather of an FSDP group (of one
/// parameter or of a coalesced group's): a gathered parameter. The scratch
/// of a coalesced gather is not, nor is an activation gathered over the tp
/// axis (no group).
bool isGathered(rt::AllocOp alloc) {
  for (Operation *user : alloc->getUsers())
    if (auto gather = dyn_cast<rt::AllGatherOp>(user))
      if (gather.getGroup() &&
          llvm::is_contained(gather.getOutputs(), alloc.getResult()))
        return true;
  return false;
}

/// The most bytes of gathered parameters live at any one time.
int64_t peakGathered(ArrayRef<Interval> intervals, size_t numOps) {
  std::vector<int64_t> live(numOps + 1, 0);
  for (const Interval &iv : intervals)
    if (isGathered(iv.alloc)) {
      live[iv.begin] += iv.size;
      live[iv.end + 1] -= iv.size;
    }
  int64_t current = 0, peak = 0;
  for (int64_t delta : live)
    peak = std::max(peak, current += delta);
  return peak;
}

/// Per stream s and op index i: the index of the first point where the
/// compute stream is ordered after everything launched on s up to i (an
/// event recorded on s after i, waited on by the compute stream, or by a
/// stream that the compute stream then waits for); `kNever` if none.
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
std::vector<std::array<int64_t, abi::kNumStreams>> joins(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  int64_t n = ops.size();
  DenseMap<int64_t, SmallVector<std::pair<int64_t, int64_t>>> waits;
  for (int64_t i = 0; i < n; ++i)
    if (auto w = dyn_cast<rt::EventWaitOp>(ops[i]))
      waits[w.getEvent()].push_back({i, int64_t(w.getStream())});
  std::vector<std::array<int64_t, abi::kNumStreams>> join(n);
  std::array<int64_t, abi::kNumStreams> best;
  best.fill(kNever);
  for (int64_t i = n - 1; i >= 0; --i) {
    join[i] = best;
    auto r = dyn_cast<rt::EventRecordOp>(ops[i]);
    if (!r || r.getStream() < 0 || r.getStream() >= abi::kNumStreams)
      continue;
    int64_t at = kNever;
    for (auto [w, t] : waits.lookup(r.getEvent())) {
      if (w <= i || t < 0 || t >= abi::kNumStreams)
        continue;
      at = std::min(at, t == abi::kComputeStream ? w : join[w][t]);
    }
    best[r.getStream()] = std::min(best[r.getStream()], at);
  }
  return join;
}

/// The users of `alloc` and, transitively, of the views of it.
SmallVector<Operation *> usersThroughViews(rt::AllocOp alloc) {
  SmallVector<Operation *> users;
  SmallVector<Value> work = {alloc.getResult()};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      users.push_back(user);
      if (auto view = dyn_cast<rt::ViewOp>(user))
        work.push_back(view.getResult());
    }
  }
  return users;
}

struct RtPlanMemoryPass
    : public shardc::impl::RtPlanMemoryBase<RtPlanMemoryPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    auto allocs = llvm::to_vector(fn.getOps<rt::AllocOp>());
    if (allocs.empty() && !fn.getName().starts_with(attrs::kEntryPrefix))
      return;
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError("memory planning expects a single-block step function");
      return signalPassFailure();
    }
    Block &block = fn.getBody().front();
    if (block.getNumArguments() == 0 ||
        !isa<rt::BufferType>(block.getArguments().back().getType())) {
      fn.emitError("memory planning expects the arena as the last argument");
      return signalPassFailure();
    }

    DenseMap<Operation *, int64_t> index;
    for (auto [i, op] : llvm::enumerate(block))
      index[&op] = i;
    auto join = joins(block);
    int64_t last = int64_t(block.getOperations().size()) - 1;

    // Every offset is below the sum of the buffers' sizes: that sum, and
    // so every offset + size below, must not overflow.
    SmallVector<Interval> intervals;
    int64_t total = 0;
    for (rt::AllocOp alloc : allocs) {
      int64_t end = index[alloc];
      for (Operation *user : usersThroughViews(alloc)) {
        Operation *op = block.findAncestorOpInBlock(*user);
        int64_t at = index[op], stream = streamOf(op);
        if (stream > abi::kComputeStream && stream < abi::kNumStreams)
          at = std::min(join[at][stream], last);
        end = std::max(end, at);
      }
      if (alloc.getSize() > abi::kMaxTensorBytes) {
        alloc.emitError("a buffer of ")
            << alloc.getSize() << " bytes is over the limit of 2^40 bytes (1 TiB)";
        return signalPassFailure();
      }
      intervals.push_back({alloc, index[alloc], end, alignTo(alloc.getSize())});
      if (__builtin_add_overflow(total, intervals.back().size, &total) ||
          total > abi::kMaxRegionBytes) {
        fn.emitError("the step's buffers exceed 2^60 bytes in all");
        return signalPassFailure();
      }
    }

    // Largest first; ties broken by program order so the plan is stable.
    SmallVector<Interval *> order;
    for (Interval &iv : intervals)
      order.push_back(&iv);
    llvm::stable_sort(order, [](Interval *a, Interval *b) {
      return a->size > b->size;
    });

    int64_t arenaBytes = 0;
    // Placed buffers by offset: the first gap among those live at the same
    // time is found in one pass, without sorting them per buffer.
    SmallVector<Interval *> placed;
    for (Interval *iv : order) {
      int64_t offset = 0;
      for (Interval *other : placed) {
        if (other->begin > iv->end || iv->begin > other->end)
          continue; // not live at the same time
        if (offset + iv->size <= other->offset)
          break;
        offset = std::max(offset, other->offset + other->size);
      }
      iv->offset = offset;
      arenaBytes = std::max(arenaBytes, offset + iv->size);
      auto at = llvm::upper_bound(placed, offset, [](int64_t off, Interval *p) {
        return off < p->offset;
      });
      placed.insert(at, iv);
    }

    int64_t gatheredBytes = peakGathered(intervals, block.getOperations().size());
    Value arena = block.getArguments().back();
    for (Interval &iv : intervals) {
      OpBuilder b(iv.alloc);
      Value view = rt::ViewOp::create(b, iv.alloc.getLoc(), arena, iv.offset);
      iv.alloc.getResult().replaceAllUsesWith(view);
      iv.alloc.erase();
    }

    auto i64 = IntegerType::get(&getContext(), 64);
    fn->setAttr(attrs::kArenaBytes, IntegerAttr::get(i64, arenaBytes));
    fn->setAttr(attrs::kPeakGatheredBytes,
                IntegerAttr::get(i64, gatheredBytes));
  }
};

} // namespace
