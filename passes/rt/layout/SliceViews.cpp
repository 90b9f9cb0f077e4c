//===- SliceViews.cpp - contiguous slices read in place -------------------===//
//
//   %y = rt.alloc Y; slice(%x, %y) {outer 1, start s, size n}
//     => %y = rt.view %x[s * inner * e] size Y
//
// for a slice that is contiguous in its source (outer 1: a slice of the
// outermost dimension with more than one element, or of a flat vector, as
// the parameters' parts of fsdp-bucket-gradients' reduced flat buffer).
// Its readers read the source in place. x must be an allocation (or a view
// of one), written before the slice as every transient is; y an allocation
// the slice alone writes, whose other users all follow it. The memory
// planner keeps x live while the view is read. Runs after
// convert-nn-to-rt, before memory planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTSLICEVIEWS
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

namespace S = abi::slice;

/// Whether `v` is a transient buffer: an allocation or a view of one.
bool isTransient(Value v) {
  return viewRoot(v).getDefiningOp<rt::AllocOp>() != nullptr;
}

struct RtSliceViewsPass
    : public shardc::impl::RtSliceViewsBase<RtSliceViewsPass> {
  void runOnOperation() override {
    SmallVector<rt::KernelOp> slices;
    getOperation().walk([&](rt::KernelOp k) {
      if (isKernel(k, abi::KernelId::slice))
        slices.push_back(k);
    });
    for (rt::KernelOp slice : slices)
      inPlace(slice);
  }

  void inPlace(rt::KernelOp slice) {
    ArrayRef<int64_t> i = slice.getInts();
    Value x = slice.getBuffers()[0], y = slice.getBuffers()[1];
    auto yAlloc = y.getDefiningOp<rt::AllocOp>();
    if (i[S::outer] != 1 || !yAlloc || !isTransient(x) || x == y)
      return;
    int64_t e = abi::dtypeBytes(i[S::dtype]);
    int64_t bytes = i[S::size] * i[S::inner] * e;
    int64_t offset = i[S::start] * i[S::inner] * e;
    if (bytes != int64_t(yAlloc.getSize()))
      return;
    for (Operation *user : y.getUsers())
      if (user != slice.getOperation() &&
          (user->getBlock() != slice->getBlock() ||
           user->isBeforeInBlock(slice)))
        return;
    OpBuilder b(slice);
    Value view = rt::ViewOp::create(b, slice.getLoc(), x, offset, bytes);
    slice.erase();
    y.replaceAllUsesWith(view);
    yAlloc.erase();
  }
};

} // namespace
