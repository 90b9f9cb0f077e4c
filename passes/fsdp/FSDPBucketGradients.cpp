//===- FSDPBucketGradients.cpp - one reduce-scatter per FSDP group --------===//
//
// Before: per parameter i of a group, after its gradient g_i [P*r_i, ...]
// is final,
//   s_i = shard.reduce_scatter g_i          -> [r_i, ...]
//   a_i = shard.all_reduce s_i (HSDP only)  -> [r_i, ...]
// After: where the group's last gradient is final,
//   v_i = nn.reshape g_i                    -> [P, n_i]   (n_i = r_i * ...)
//   c   = nn.concat v_1 .. v_k {dim = 1}    -> [P, N]     (N = sum n_i)
//   s   = shard.reduce_scatter c            -> [1, N]
//   a   = shard.all_reduce s (HSDP only)    -> [1, N]
//   a_i = nn.reshape (nn.slice a {dim 1, start sum_{j<i} n_j}) -> [r_i, ...]
// Row p of c is the concatenation of every gradient's block p, so rank p's
// row of s holds each parameter's block p summed over the ranks: the same
// sums as before, element by element. The gradients are concatenated in the
// order of the gradient state they accumulate into (where each does), so
// that a group's shards lie in s as its gradients lie in the state: the
// accumulations are then one launch (rt-slice-views, rt-group-elementwise).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

#include <map>
#include <tuple>

namespace shardc {
#define GEN_PASS_DEF_FSDPBUCKETGRADIENTS
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// A gradient this large is reduced alone: a bucket would copy it, holding
/// its bytes twice at the end of backward (llama3-8b's two vocabulary-sized
/// f32 gradients: 4 GiB more at the peak), for a collective it fills alone
/// anyway.
constexpr int64_t kAloneBytes = int64_t(1) << 30;

/// One gradient's reduction: its reduce-scatter and, under HSDP, the
/// all-reduce of the result.
struct Reduction {
  mutable shard::ReduceScatterOp scatter;
  mutable shard::AllReduceOp allReduce; // null without replication
  Value result() const {
    return allReduce ? allReduce.getResult() : scatter.getResult();
  }
  Operation *last() const {
    return allReduce ? allReduce.getOperation() : scatter.getOperation();
  }
};

/// What reductions must share to be bucketed.
using BucketKey = std::tuple<int64_t, std::string, std::string, const void *>;

std::string axesKey(ArrayRef<int16_t> axes) {
  std::string s;
  for (int16_t a : axes)
    s += std::to_string(a) + ",";
  return s;
}

/// The argument number of the gradient state that `r`'s result accumulates
/// into (the nn.accumulate reading it), or -1.
int64_t stateSlot(const Reduction &r) {
  for (Operation *user : r.result().getUsers())
    if (auto acc = dyn_cast<nn::AccumulateOp>(user))
      if (acc.getGrad() == r.result())
        if (auto arg = dyn_cast<BlockArgument>(acc.getAcc()))
          return arg.getArgNumber();
  return -1;
}

/// `group` in the order of its gradient state, if every one has a slot.
void orderByState(SmallVector<Reduction> &group) {
  SmallVector<std::pair<int64_t, size_t>> slots;
  for (auto [n, r] : llvm::enumerate(group)) {
    int64_t slot = stateSlot(r);
    if (slot < 0)
      return;
    slots.push_back({slot, n});
  }
  llvm::stable_sort(slots);
  SmallVector<Reduction> ordered;
  for (auto [slot, n] : slots)
    ordered.push_back(group[n]);
  group = std::move(ordered);
}

void bucket(ArrayRef<Reduction> group, int64_t ranks) {
  // The last reduction of the group in program order follows every
  // gradient of the group (each follows its own gradient).
  Operation *anchor = group.front().last();
  for (const Reduction &r : group)
    if (anchor->isBeforeInBlock(r.last()))
      anchor = r.last();
  shard::ReduceScatterOp first = group.front().scatter;
  Location loc = first.getLoc();
  OpBuilder b(anchor->getContext());
  b.setInsertionPointAfter(anchor);
  Type elt = cast<RankedTensorType>(first.getInput().getType()).getElementType();

  SmallVector<Value> views;
  SmallVector<int64_t> sizes;
  int64_t total = 0;
  for (const Reduction &r : group) {
    auto in = cast<RankedTensorType>(r.scatter.getInput().getType());
    int64_t n = in.getNumElements() / ranks;
    sizes.push_back(n);
    total += n;
    views.push_back(nn::ReshapeOp::create(
        b, loc, RankedTensorType::get({ranks, n}, elt), r.scatter.getInput()));
  }
  Value packed = nn::ConcatOp::create(
      b, loc, RankedTensorType::get({ranks, total}, elt), views,
      b.getI64IntegerAttr(1));
  auto scattered = shard::ReduceScatterOp::create(
      b, loc, RankedTensorType::get({1, total}, elt), first.getGridAttr(),
      first.getGridAxesAttr(), packed, first.getReductionAttr(),
      b.getIndexAttr(0));
  scattered->setAttr(attrs::kGroup, first->getAttr(attrs::kGroup));
  Value reduced = scattered.getResult();
  if (shard::AllReduceOp ar = group.front().allReduce) {
    auto all = shard::AllReduceOp::create(
        b, loc, reduced.getType(), ar.getGridAttr(), ar.getGridAxesAttr(),
        reduced, ar.getReductionAttr());
    all->setAttr(attrs::kGroup, first->getAttr(attrs::kGroup));
    reduced = all.getResult();
  }
  int64_t start = 0;
  SmallVector<Operation *> created;
  for (auto [r, n] : llvm::zip(group, sizes)) {
    Value part = nn::SliceOp::create(b, loc, RankedTensorType::get({1, n}, elt),
                                     reduced, b.getI64IntegerAttr(1),
                                     b.getI64IntegerAttr(start));
    start += n;
    Value shardValue =
        nn::ReshapeOp::create(b, loc, r.result().getType(), part);
    r.result().replaceAllUsesWith(shardValue);
  }
  Operation *end = b.getInsertionPoint() == b.getBlock()->end()
                       ? &b.getBlock()->back()
                       : &*std::prev(b.getInsertionPoint());

  for (const Reduction &r : group) {
    if (r.allReduce)
      r.allReduce.erase();
    r.scatter.erase();
  }

  // Users of an earlier gradient's shard (and what they feed) that sit
  // before the bucket move after it, in their order.
  Block *block = end->getBlock();
  SmallVector<Operation *> sink;
  llvm::SmallPtrSet<Operation *, 16> inSink;
  Operation *bucketStart = views.front().getDefiningOp();
  for (Operation &op : *block) {
    if (&op == bucketStart)
      break;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      bool fromBucket = def && def->getBlock() == block &&
                        !def->isBeforeInBlock(bucketStart) &&
                        !inSink.count(def);
      if ((fromBucket || (def && inSink.count(def))) && inSink.insert(&op).second) {
        sink.push_back(&op);
        break;
      }
    }
  }
  for (Operation *op : sink) {
    op->moveAfter(end);
    end = op;
  }
}

/// What reads each gradient reduce-scatter's result (the slices of a bucket, the
/// accumulation into the gradient state, transitively) moves
/// just before the next reduce-scatter: on the compute stream, a reader
/// right after the collective would wait for it at once; one group's
/// backward later it has had that compute to overlap. Readers whose results
/// something before the next reduce-scatter needs stay.
void deferReductionReaders(Block &block) {
  // Gradient reductions only (an FSDP group's): a tp reduce-scatter of
  // activations is compute's own input.
  SmallVector<shard::ReduceScatterOp> scatters;
  for (auto rs : block.getOps<shard::ReduceScatterOp>())
    if (rs->hasAttr(attrs::kGroup))
      scatters.push_back(rs);
  for (size_t k = 0; k + 1 < scatters.size(); ++k) {
    Operation *next = scatters[k + 1];
    // The readers between this reduce-scatter and the next, in order.
    SmallVector<Operation *> readers;
    llvm::SmallPtrSet<Operation *, 16> closure;
    closure.insert(scatters[k]);
    for (Operation *op = scatters[k]->getNextNode(); op && op != next;
         op = op->getNextNode())
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp(); def && closure.count(def)) {
          closure.insert(op);
          // HSDP's all-reduce stays with its reduce-scatter (both on the
          // communication stream); what reads it moves.
          if (!isa<shard::AllReduceOp>(op))
            readers.push_back(op);
          break;
        }
    // Every use of a reader must be another reader or after `next`.
    bool movable = !readers.empty();
    for (Operation *op : readers)
      for (Operation *user : op->getUsers())
        if (!closure.count(user) && user->getBlock() == &block &&
            user->isBeforeInBlock(next))
          movable = false;
    if (!movable)
      continue;
    for (Operation *op : readers)
      op->moveBefore(next);
  }
}

struct FSDPBucketGradientsPass
    : public shardc::impl::FSDPBucketGradientsBase<FSDPBucketGradientsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    module.walk([&](func::FuncOp fn) {
      if (fn.isExternal() || !fn.getBody().hasOneBlock())
        return;
      std::map<BucketKey, SmallVector<Reduction>> buckets;
      std::vector<BucketKey> order;
      for (auto rs : fn.getBody().front().getOps<shard::ReduceScatterOp>()) {
        auto group = rs->getAttrOfType<IntegerAttr>(attrs::kGroup);
        auto in = dyn_cast<RankedTensorType>(rs.getInput().getType());
        if (!group || !in || !in.getElementType().isF32() ||
            rs.getScatterAxis().getSExtValue() != 0 || in.getRank() < 1 ||
            in.getNumElements() * 4 >= kAloneBytes)
          continue;
        Reduction r{rs, nullptr};
        std::string arAxes = "-";
        if (rs->hasOneUse())
          if (auto ar = dyn_cast<shard::AllReduceOp>(*rs->getUsers().begin())) {
            r.allReduce = ar;
            arAxes = axesKey(ar.getGridAxes());
          }
        BucketKey key{group.getInt(), axesKey(rs.getGridAxes()), arAxes,
                      in.getElementType().getAsOpaquePointer()};
        if (!buckets.count(key))
          order.push_back(key);
        buckets[key].push_back(r);
      }
      for (const BucketKey &key : order) {
        SmallVector<Reduction> &group = buckets[key];
        if (group.size() < 2)
          continue;
        // Blocks of the scatter: its input's dim 0 over the result's.
        auto in = cast<RankedTensorType>(group.front().scatter.getInput().getType());
        auto out = cast<RankedTensorType>(group.front().scatter.getResult().getType());
        int64_t ranks = in.getDimSize(0) / out.getDimSize(0);
        bool uniform = true;
        for (const Reduction &r : group) {
          auto i = cast<RankedTensorType>(r.scatter.getInput().getType());
          auto o = cast<RankedTensorType>(r.scatter.getResult().getType());
          uniform &= i.getDimSize(0) == ranks * o.getDimSize(0);
        }
        if (uniform) {
          orderByState(group);
          bucket(group, ranks);
        }
      }
      deferReductionReaders(fn.getBody().front());
    });
  }
};

} // namespace
