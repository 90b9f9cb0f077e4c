//===- ConcatViews.cpp - a concatenation's parts written in place --------===//
//
//   %x = rt.alloc X; producer(.., %x); concat_part(%x, %y) {start s}
//     => %x = rt.view %y[s * inner * e] size X; producer(.., %x)
//
// for a part that is contiguous in the result (outer 1: a concatenation
// along the outermost dimension with more than one element, or of flat
// vectors, as fsdp-bucket-gradients' flat gradient buffer on one rank):
// the part's producer writes straight into the concatenation and the copy
// is gone. x must be an allocation whose only concat_part is this one, y
// an allocation that only concat_parts write before anything else uses it.
// y's allocation moves before x's, so y lives from its first part's
// producer. Runs after convert-nn-to-rt (and rt-fuse-casts), before memory
// planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTCONCATVIEWS
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

namespace C = abi::concat_part;

/// Whether every user of y other than its concat_parts (and the views of
/// its parts this pass made) comes after all of them (the concatenation is
/// whole before it is read).
bool writtenFirst(Value y) {
  Operation *lastPart = nullptr;
  for (Operation *user : y.getUsers())
    if (isKernel(user, abi::KernelId::concat_part) &&
        cast<rt::KernelOp>(user).getBuffers()[1] == y &&
        (!lastPart || lastPart->isBeforeInBlock(user)))
      lastPart = user;
  for (Operation *user : y.getUsers()) {
    bool part = (isKernel(user, abi::KernelId::concat_part) &&
                 cast<rt::KernelOp>(user).getBuffers()[1] == y) ||
                isa<rt::ViewOp>(user);
    if (!part && lastPart && user->getBlock() == lastPart->getBlock() &&
        user->isBeforeInBlock(lastPart))
      return false;
  }
  return true;
}

struct RtConcatViewsPass
    : public shardc::impl::RtConcatViewsBase<RtConcatViewsPass> {
  void runOnOperation() override {
    SmallVector<rt::KernelOp> parts;
    getOperation().walk([&](rt::KernelOp k) {
      if (isKernel(k, abi::KernelId::concat_part))
        parts.push_back(k);
    });
    for (rt::KernelOp part : parts)
      inPlace(part);
  }

  void inPlace(rt::KernelOp part) {
    ArrayRef<int64_t> i = part.getInts();
    Value x = part.getBuffers()[0], y = part.getBuffers()[1];
    auto xAlloc = x.getDefiningOp<rt::AllocOp>();
    auto yAlloc = y.getDefiningOp<rt::AllocOp>();
    if (i[C::outer] != 1 || !xAlloc || !yAlloc || x == y ||
        xAlloc->getBlock() != part->getBlock() ||
        yAlloc->getBlock() != part->getBlock())
      return;
    int64_t e = abi::dtypeBytes(i[C::dtype]);
    int64_t bytes = i[C::n_x] * i[C::inner] * e;
    int64_t offset = i[C::start] * i[C::inner] * e;
    if (bytes != int64_t(xAlloc.getSize()) ||
        offset + bytes > int64_t(yAlloc.getSize()))
      return;
    for (Operation *user : x.getUsers())
      if (user != part.getOperation() &&
          isKernel(user, abi::KernelId::concat_part))
        return; // x goes into another concatenation too
    if (!writtenFirst(y))
      return;
    if (xAlloc->isBeforeInBlock(yAlloc))
      yAlloc->moveBefore(xAlloc);
    OpBuilder b(xAlloc);
    Value view = rt::ViewOp::create(b, xAlloc.getLoc(), y, offset, bytes);
    part.erase();
    x.replaceAllUsesWith(view);
    xAlloc.erase();
  }
};

} // namespace
