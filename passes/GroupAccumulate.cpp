//===- GroupAccumulate.cpp - one accumulate over adjacent gradients ------===//
//
// After the reduce-scatter of an FSDP group (fsdp-bucket-gradients orders
// its flat buffer as the gradient state is ordered) and rt-slice-views,
// the group's accumulations into the gradient state are
//
//   accumulate(%acc_1, %g_1, %ctl, %acc_1) {n_1}
//   accumulate(%acc_2, %g_2, %ctl, %acc_2) {n_2}   ...
//
// with acc_j consecutive views of one region (each n_j f32 after the last)
// and g_j consecutive views of one buffer. They become one launch,
//
//   accumulate(%acc, %g, %ctl, %acc) {n_1 + n_2 + ...}
//
// over views spanning them all: the same sums, element by element. The
// accumulations must follow one another on one stream (nothing but
// allocations and views between) and share their control buffer.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTGROUPACCUMULATE
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// An accumulation in place: acc (= out) at accOffset of accBase, g at
/// gOffset of gBase, n f32 elements.
struct InPlace {
  mutable rt::KernelOp k;
  Value accBase, gBase;
  int64_t accOffset, gOffset, n;
};

std::optional<InPlace> inPlace(Operation *op) {
  if (!isKernel(op, abi::KernelId::accumulate))
    return std::nullopt;
  auto k = cast<rt::KernelOp>(op);
  ValueRange b = k.getBuffers();
  if (b[0] != b[3])
    return std::nullopt;
  // A view's base and offset; any other buffer is its own base.
  auto place = [](Value v) -> std::pair<Value, int64_t> {
    if (auto view = v.getDefiningOp<rt::ViewOp>())
      return {view.getBase(), view.getOffset()};
    return {v, 0};
  };
  auto [accBase, accOffset] = place(b[0]);
  auto [gBase, gOffset] = place(b[1]);
  return InPlace{k, accBase, gBase, accOffset, gOffset,
                 k.getInts()[abi::accumulate::n]};
}

/// Whether `next` continues the run that ends with `last`.
bool continues(const InPlace &last, const InPlace &next) {
  return next.accBase == last.accBase && next.gBase == last.gBase &&
         next.accOffset == last.accOffset + 4 * last.n &&
         next.gOffset == last.gOffset + 4 * last.n &&
         next.k.getBuffers()[2] == last.k.getBuffers()[2] &&
         next.k.getStream() == last.k.getStream();
}

/// The run of accumulations as one, at the last one's place.
void merge(ArrayRef<InPlace> run) {
  const InPlace &first = run.front();
  int64_t n = 0;
  for (const InPlace &a : run)
    n += a.n;
  rt::KernelOp last = run.back().k;
  OpBuilder b(last);
  Location loc = first.k.getLoc();
  Value acc = rt::ViewOp::create(b, loc, first.accBase, first.accOffset, 4 * n);
  Value g = rt::ViewOp::create(b, loc, first.gBase, first.gOffset, 4 * n);
  rt::KernelOp::create(b, loc, last.getCtx(), last.getName(),
                       ValueRange{acc, g, last.getBuffers()[2], acc},
                       ArrayRef<int64_t>{n}, last.getFloats(),
                       last.getStream());
  for (const InPlace &a : run) {
    SmallVector<Value> views = {a.k.getBuffers()[0], a.k.getBuffers()[1]};
    a.k.erase();
    for (Value v : views)
      if (v.use_empty() && v.getDefiningOp<rt::ViewOp>())
        v.getDefiningOp()->erase();
  }
}

struct RtGroupAccumulatePass
    : public shardc::impl::RtGroupAccumulateBase<RtGroupAccumulatePass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      SmallVector<SmallVector<InPlace>> runs;
      SmallVector<InPlace> run;
      for (Operation &op : block) {
        if (isa<rt::AllocOp, rt::ViewOp>(op))
          continue;
        std::optional<InPlace> a = inPlace(&op);
        if (a && !run.empty() && continues(run.back(), *a)) {
          run.push_back(*a);
          continue;
        }
        if (run.size() > 1)
          runs.push_back(run);
        run.clear();
        if (a)
          run.push_back(*a);
      }
      if (run.size() > 1)
        runs.push_back(run);
      for (ArrayRef<InPlace> r : runs)
        merge(r);
    }
  }
};

} // namespace
