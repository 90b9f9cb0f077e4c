//===- FuseResidualNorm.cpp - a residual add fused with the norm after it -===//
//
// On a target with the fused kernels (TargetDescription::fusedResidualNorm),
// for an add and a norm computing on the same dtype (f32 or bf16: on bf16
// the fused kernel rounds s before the norm reads it, as the add's output
// was),
//
//   add(a, b) -> s; layer_norm(s, w, bias?) -> y
//     => add_layer_norm(a, b, w, bias?) -> s, y
//   add(a, b) -> s; rms_norm(s, w) -> y
//     => add_rms_norm(a, b, w) -> s, y
//
// where the add is of two tensors of the norm's shape [M, C] (no
// broadcast), the norm is the next kernel on the same stream with nothing
// but allocations, views, event waits and other streams' event records
// between (the fused kernel waits where the norm did), and s stays written (the residual
// stream and the norm's gradient read it). Runs after convert-nn-to-rt,
// before memory planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTFUSERESIDUALNORM
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

struct RtFuseResidualNormPass
    : public shardc::impl::RtFuseResidualNormBase<RtFuseResidualNormPass> {
  using Base::Base;

  void runOnOperation() override {
    const TargetDescription *t = lookupTargetOf(getOperation(), target);
    if (!t)
      return signalPassFailure();
    if (!t->fusedResidualNorm)
      return;
    SmallVector<rt::KernelOp> adds;
    getOperation().walk([&](rt::KernelOp k) {
      if (isKernel(k, abi::KernelId::add))
        adds.push_back(k);
    });
    for (rt::KernelOp add : adds)
      fuse(add);
  }

  void fuse(rt::KernelOp add) {
    auto [M, C] = plainAdd(add);
    if (M < 0)
      return;
    Operation *next = add->getNextNode();
    // Waits between only hold the norm back (for its weights): the add can
    // wait with it; so can another stream's event records (not the add's
    // own stream's: a record there marks the add as done).
    auto inert = [&](Operation *op) {
      if (isa<rt::AllocOp, rt::ViewOp, rt::EventWaitOp>(op))
        return true;
      auto record = dyn_cast<rt::EventRecordOp>(op);
      return record && int64_t(record.getStream()) != int64_t(add.getStream());
    };
    while (next && inert(next))
      next = next->getNextNode();
    bool layer = isKernel(next, abi::KernelId::layer_norm);
    if (!layer && !isKernel(next, abi::KernelId::rms_norm))
      return;
    auto norm = cast<rt::KernelOp>(next);
    Type type = add.getComputeType();
    if (norm.getComputeType() != type ||
        !(type.isF32() || (bf16 && type.isBF16())))
      return;
    Value s = add.getBuffers()[2];
    ArrayRef<int64_t> ni = norm.getInts();
    int64_t nM = layer ? ni[abi::layer_norm::M] : ni[abi::rms_norm::M];
    int64_t nC = layer ? ni[abi::layer_norm::C] : ni[abi::rms_norm::C];
    if (norm.getBuffers()[0] != s || nM != M || nC != C ||
        norm.getStream() != add.getStream())
      return;
    SmallVector<Value> nb(norm.getBuffers().begin(), norm.getBuffers().end());
    SmallVector<Value> bufs = {add.getBuffers()[0], add.getBuffers()[1]};
    bufs.append(nb.begin() + 1, nb.end() - 1); // w, bias?
    bufs.push_back(s);
    bufs.push_back(nb.back());
    SmallVector<int64_t> ints = {M, C};
    if (layer)
      ints.push_back(ni[abi::layer_norm::has_bias]);
    ints.push_back(layer ? ni[abi::layer_norm::dtype] : ni[abi::rms_norm::dtype]);
    OpBuilder b(norm);
    rt::KernelOp::create(
        b, norm.getLoc(), add.getCtx(),
        abi::kernelInfo(layer ? abi::KernelId::add_layer_norm
                              : abi::KernelId::add_rms_norm)
            .name,
        bufs, ints, norm.getFloats(), norm.getStream(),
        type.isF32() ? TypeAttr() : TypeAttr::get(type));
    add.erase();
    norm.erase();
  }
};

} // namespace
