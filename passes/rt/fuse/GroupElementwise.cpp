//===- GroupElementwise.cpp - one launch over adjacent views --------------===//
//
// Element-wise kernels over consecutive views become one launch over views
// spanning them: the same values, element by element.
//
//  - After the reduce-scatter of an FSDP group (fsdp-bucket-gradients orders
//    its flat buffer as the gradient state is ordered) and rt-slice-views,
//    the group's accumulations into the gradient state,
//      accumulate(%acc_j, %g_j, %ctl, %acc_j) {n_j}   j = 1, 2, ...
//    with acc_j consecutive views of one region (each n_j f32 after the
//    last) and g_j consecutive views of one buffer, become
//      accumulate(%acc, %g, %ctl, %acc) {n_1 + n_2 + ...}.
//  - The optimizer step's (and refresh's) casts of the f32 parameters to
//    their bf16 working copies (rt-working-copy), both laid out in
//    parameter order,
//      cast(%p_j, %w_j) {n_j, f32, bf16}
//    with p_j and w_j consecutive views, become one cast.
//
// The kernels must follow one another on one stream (nothing but
// allocations and views between) and share their other operands.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTGROUPELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// One element-wise launch over two views: an accumulation in place (acc =
/// out at `a` of aBase, g at `b` of bBase) or a cast (x at `a`, y at `b`);
/// n elements of aBytes and bBytes.
struct Run1 {
  mutable rt::KernelOp k;
  Value aBase, bBase;
  int64_t a, b, n, aBytes, bBytes;
};

/// A view's base and offset; any other buffer is its own base.
std::pair<Value, int64_t> placeOf(Value v) {
  if (auto view = v.getDefiningOp<rt::ViewOp>())
    return {view.getBase(), view.getOffset()};
  return {v, 0};
}

std::optional<Run1> runOf(Operation *op) {
  auto k = dyn_cast<rt::KernelOp>(op);
  if (!k)
    return std::nullopt;
  ValueRange b = k.getBuffers();
  if (isKernel(k, abi::KernelId::accumulate)) {
    if (b[0] != b[3])
      return std::nullopt;
    auto [aBase, a] = placeOf(b[0]);
    auto [bBase, bo] = placeOf(b[1]);
    return Run1{k, aBase, bBase, a, bo, k.getInts()[abi::accumulate::n], 4, 4};
  }
  if (isKernel(k, abi::KernelId::cast)) {
    ArrayRef<int64_t> i = k.getInts();
    auto [aBase, a] = placeOf(b[0]);
    auto [bBase, bo] = placeOf(b[1]);
    int64_t from = abi::dtypeBytes(i[abi::cast::from]),
            to = abi::dtypeBytes(i[abi::cast::to]);
    if (from <= 0 || to <= 0)
      return std::nullopt;
    return Run1{k, aBase, bBase, a, bo, i[abi::cast::n], from, to};
  }
  return std::nullopt;
}

/// Whether `next` continues the run that ends with `last`.
bool continues(const Run1 &last, const Run1 &next) {
  if (next.k.getName() != last.k.getName() || next.aBase != last.aBase ||
      next.bBase != last.bBase || next.a != last.a + last.aBytes * last.n ||
      next.b != last.b + last.bBytes * last.n ||
      next.k.getStream() != last.k.getStream())
    return false;
  ArrayRef<int64_t> ni = next.k.getInts(), li = last.k.getInts();
  if (isKernel(next.k, abi::KernelId::accumulate))
    return next.k.getBuffers()[2] == last.k.getBuffers()[2];
  return ni[abi::cast::from] == li[abi::cast::from] &&
         ni[abi::cast::to] == li[abi::cast::to];
}

/// The run as one launch, at the last one's place.
void merge(ArrayRef<Run1> run) {
  const Run1 &first = run.front();
  int64_t n = 0;
  for (const Run1 &r : run)
    n += r.n;
  rt::KernelOp last = run.back().k;
  OpBuilder b(last);
  Location loc = first.k.getLoc();
  Value x = rt::ViewOp::create(b, loc, first.aBase, first.a, first.aBytes * n);
  Value y = rt::ViewOp::create(b, loc, first.bBase, first.b, first.bBytes * n);
  bool acc = isKernel(last, abi::KernelId::accumulate);
  SmallVector<Value> buffers =
      acc ? SmallVector<Value>{x, y, last.getBuffers()[2], x}
          : SmallVector<Value>{x, y};
  SmallVector<int64_t> ints(last.getInts());
  ints[acc ? int64_t(abi::accumulate::n) : int64_t(abi::cast::n)] = n;
  rt::KernelOp::create(b, loc, last.getCtx(), last.getName(), buffers, ints,
                       last.getFloats(), last.getStream());
  for (const Run1 &r : run) {
    SmallVector<Value> views = {r.k.getBuffers()[0], r.k.getBuffers()[1]};
    r.k.erase();
    for (Value v : views)
      if (v.use_empty() && v.getDefiningOp<rt::ViewOp>())
        v.getDefiningOp()->erase();
  }
}

struct RtGroupElementwisePass
    : public shardc::impl::RtGroupElementwiseBase<RtGroupElementwisePass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      SmallVector<SmallVector<Run1>> runs;
      SmallVector<Run1> run;
      for (Operation &op : block) {
        if (isa<rt::AllocOp, rt::ViewOp>(op))
          continue;
        std::optional<Run1> r = runOf(&op);
        if (r && !run.empty() && continues(run.back(), *r)) {
          run.push_back(*r);
          continue;
        }
        if (run.size() > 1)
          runs.push_back(run);
        run.clear();
        if (r)
          run.push_back(*r);
      }
      if (run.size() > 1)
        runs.push_back(run);
      for (ArrayRef<Run1> r : runs)
        merge(r);
    }
  }
};

} // namespace
