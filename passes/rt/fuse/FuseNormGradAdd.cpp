//===- FuseNormGradAdd.cpp - the residual gradient's add in the norm grad -===//
//
// On a target with the fused residual-norm kernels
// (TargetDescription::fusedResidualNorm), for a norm gradient and the add
// of its dx to the residual stream's gradient, both computing on the same
// dtype,
//
//   layer_norm_grad(x, w, dy, dx, dw, db); add(dx, r) -> s   (or add(r, dx))
//     => layer_norm_grad(x, w, dy, s, dw, db, dr = r) {add_dr}
//   rms_norm_grad(x, w, dy, dx, dw); add(dx, r) -> s
//     => rms_norm_grad(x, w, dy, s, dw, dr = r) {add_dr}
//
// as llm.c's layernorm_backward adds into the residual gradient. The fused
// kernel rounds the norm's gradient to the dtype before adding r and
// rounds the sum, as the two kernels did: the same bits. Where it applies:
// the add is of two tensors of the norm's shape [M, C] (no broadcast), on
// the norm's stream; dx is an allocation that only the two read and write;
// r is defined before the norm, and s is, or is an allocation or a view
// of a buffer defined before it (moved up); and nothing between the norm
// and the add touches r's or s's buffers. A wait on the add's stream
// between them (FSDP's reduce-scatter of the layer's gradients is there,
// waiting for its bucket) could be what r or s waits for, so it stops the
// fusion unless only that stream touches r's and s's buffers before the
// add: r's bytes are then final at the norm, and no other stream uses s's.
// Runs after convert-nn-to-rt, before memory planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTFUSENORMGRADADD
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// Whether `v` is defined before `op` in its block, or is an argument of
/// it: r is read at the norm, so it must have been written before.
bool definedBefore(Value v, Operation *op) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() == op->getBlock();
  Operation *def = v.getDefiningOp();
  return def && def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

/// Whether every op before `op` in its block that touches the bytes of
/// `roots` runs on `stream` (ops that launch nothing aside).
bool onlyOnStream(ArrayRef<Value> roots, Operation *op, int64_t stream) {
  for (Operation &o : *op->getBlock()) {
    if (&o == op)
      return true;
    int64_t on = streamOf(&o);
    if (on >= 0 && on != stream && touchesRoots(&o, roots))
      return false;
  }
  return true;
}

/// Whether an op strictly between `from` and `to` touches the bytes of
/// `roots`, or waits on `stream` while an op on another stream touches
/// them before `to`.
bool touchedBetween(Operation *from, Operation *to, ArrayRef<Value> roots,
                    int64_t stream) {
  bool waits = false;
  for (Operation *op = from->getNextNode(); op && op != to;
       op = op->getNextNode()) {
    if (auto wait = dyn_cast<rt::EventWaitOp>(op))
      waits |= int64_t(wait.getStream()) == stream;
    if (isa<rt::ViewOp>(op))
      continue;
    if (touchesRoots(op, roots))
      return true;
  }
  return waits && !onlyOnStream(roots, to, stream);
}

struct RtFuseNormGradAddPass
    : public shardc::impl::RtFuseNormGradAddBase<RtFuseNormGradAddPass> {
  using Base::Base;

  void runOnOperation() override {
    const TargetDescription *t = lookupTargetOf(getOperation(), target);
    if (!t)
      return signalPassFailure();
    if (!t->fusedResidualNorm)
      return;
    SmallVector<rt::KernelOp> grads;
    getOperation().walk([&](rt::KernelOp k) {
      if (isKernel(k, abi::KernelId::layer_norm_grad) ||
          isKernel(k, abi::KernelId::rms_norm_grad))
        grads.push_back(k);
    });
    for (rt::KernelOp grad : grads)
      fuse(grad);
  }

  /// The one add reading `dx` besides `grad`, or null.
  static rt::KernelOp soleAdd(Value dx, rt::KernelOp grad) {
    rt::KernelOp add;
    for (Operation *user : dx.getUsers()) {
      if (user == grad.getOperation())
        continue;
      if (add || !isKernel(user, abi::KernelId::add))
        return {};
      add = cast<rt::KernelOp>(user);
    }
    return add;
  }

  void fuse(rt::KernelOp grad) {
    bool layer = isKernel(grad, abi::KernelId::layer_norm_grad);
    ArrayRef<int64_t> gi = grad.getInts();
    int64_t addDr = layer ? int64_t(abi::layer_norm_grad::add_dr)
                          : int64_t(abi::rms_norm_grad::add_dr);
    int64_t gM =
        layer ? gi[abi::layer_norm_grad::M] : gi[abi::rms_norm_grad::M];
    int64_t gC =
        layer ? gi[abi::layer_norm_grad::C] : gi[abi::rms_norm_grad::C];
    Value dx = grad.getBuffers()[3];
    if (gi[addDr] || !dx.getDefiningOp<rt::AllocOp>())
      return;
    rt::KernelOp add = soleAdd(dx, grad);
    if (!add || add->getBlock() != grad->getBlock() ||
        !grad->isBeforeInBlock(add) || add.getStream() != grad.getStream() ||
        add.getComputeType() != grad.getComputeType())
      return;
    auto [M, C] = plainAdd(add);
    Value a = add.getBuffers()[0], b = add.getBuffers()[1],
          s = add.getBuffers()[2];
    if (M != gM || C != gC || (a == dx) == (b == dx) || s == dx)
      return;
    Value r = a == dx ? b : a;
    if (!definedBefore(r, grad) ||
        touchedBetween(grad, add, {viewRoot(r), viewRoot(s)},
                       add.getStream()) ||
        !hoistable(s, grad))
      return;
    hoistBefore(s, grad);
    SmallVector<Value> bufs(grad.getBuffers().begin(), grad.getBuffers().end());
    bufs[3] = s;
    bufs.push_back(r);
    SmallVector<int64_t> ints(gi.begin(), gi.end());
    ints[addDr] = 1;
    OpBuilder builder(grad);
    rt::KernelOp::create(builder, grad.getLoc(), grad.getCtx(), grad.getName(),
                         bufs, ints, grad.getFloats(), grad.getStream(),
                         grad.getDtypeAttr());
    add.erase();
    grad.erase();
    if (dx.use_empty())
      dx.getDefiningOp()->erase();
  }
};

} // namespace
