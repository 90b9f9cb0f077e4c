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
// broadcast), the norm is the next norm of s on the same stream, and s stays
// written (the residual stream and the norm's gradient read it). What lies
// between must not touch a buffer of the pair (by the buffer it views) and
// the add's stream must run no collective there. The fused kernel goes
//   - where the norm was, if the add's stream records no event and runs no
//     kernel between (its waits there hold the norm back, for its weights:
//     the add can wait with it);
//   - else where the add was, with the add's stream's waits between hoisted
//     before it, if each waits on an event recorded before the add (the
//     events recorded between then also mark the norm done). This fuses the
//     add that ends an FSDP group with the norm that begins the next, across
//     the events and the next groups' copy-in casts between them.
// Runs after convert-nn-to-rt, before memory planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

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

  /// What stands between an add and the norm of its sum.
  struct Between {
    rt::KernelOp norm;
    /// The add's stream's event waits: they hold the norm back (for its
    /// weights).
    SmallVector<rt::EventWaitOp> waits;
    /// Whether the add's stream records an event or runs work between: the
    /// add is then known done there, and the fused kernel takes the add's
    /// place (with the waits hoisted before it), not the norm's.
    bool ordered = false;
    /// Kernels (and other streams' collectives) between.
    SmallVector<Operation *> work;
  };

  /// The norm kernel after `add` on its stream that reads the sum s, and
  /// what lies between; no norm where something between touches a buffer
  /// of the pair (by the buffer it views), or the add's stream runs a
  /// collective. The search ends at the first other op that touches the
  /// add's buffers (the next reader of s), so a norm of s much later (a
  /// recomputation in backward) is never moved up to the add.
  static std::optional<Between> findNorm(rt::KernelOp add) {
    Value s = add.getBuffers()[2];
    int64_t stream = add.getStream();
    SmallVector<Value> roots;
    for (Value b : add.getBuffers())
      roots.push_back(viewRoot(b));
    Between between;
    for (Operation *op = add->getNextNode(); op; op = op->getNextNode()) {
      if (isa<rt::AllocOp, rt::ViewOp>(op))
        continue;
      if (auto wait = dyn_cast<rt::EventWaitOp>(op)) {
        if (int64_t(wait.getStream()) == stream)
          between.waits.push_back(wait);
        continue;
      }
      if (auto record = dyn_cast<rt::EventRecordOp>(op)) {
        between.ordered |= int64_t(record.getStream()) == stream;
        continue;
      }
      auto k = dyn_cast<rt::KernelOp>(op);
      bool norm = k && (isKernel(k, abi::KernelId::layer_norm) ||
                        isKernel(k, abi::KernelId::rms_norm));
      if (norm && int64_t(k.getStream()) == stream && k.getBuffers()[0] == s) {
        between.norm = k;
        break;
      }
      if (!k && streamOf(op) < 0)
        return std::nullopt; // control flow, a return
      if (streamOf(op) == stream && !k)
        return std::nullopt; // a collective on the add's stream
      if (touchesRoots(op, roots))
        return std::nullopt;
      between.ordered |= streamOf(op) == stream;
      between.work.push_back(op);
    }
    if (!between.norm)
      return std::nullopt;
    roots.clear();
    for (Value b : between.norm.getBuffers())
      roots.push_back(viewRoot(b));
    auto touchesNorm = [&](Operation *op) { return touchesRoots(op, roots); };
    if (llvm::any_of(between.work, touchesNorm))
      return std::nullopt;
    return between;
  }

  /// Whether the event `wait` waits on is last recorded before `add`.
  static bool recordedBefore(rt::EventWaitOp wait, Operation *add) {
    bool pastAdd = false;
    for (Operation *op = wait->getPrevNode(); op; op = op->getPrevNode()) {
      pastAdd |= op == add;
      auto record = dyn_cast<rt::EventRecordOp>(op);
      if (record && record.getEvent() == wait.getEvent())
        return pastAdd;
    }
    return false;
  }

  /// Where the fused kernel goes: the norm's place, or (Between::ordered)
  /// the add's, its waits hoisted before it; null if a wait there waits on
  /// an event recorded after the add.
  static Operation *placeFused(rt::KernelOp add, Between &between) {
    if (!between.ordered)
      return between.norm;
    for (rt::EventWaitOp wait : between.waits)
      if (!recordedBefore(wait, add))
        return nullptr;
    for (Value b : between.norm.getBuffers())
      if (!hoistable(b, add))
        return nullptr;
    for (rt::EventWaitOp wait : between.waits)
      wait->moveBefore(add);
    for (Value b : between.norm.getBuffers())
      hoistBefore(b, add);
    return add;
  }

  void fuse(rt::KernelOp add) {
    auto [M, C] = plainAdd(add);
    if (M < 0)
      return;
    std::optional<Between> between = findNorm(add);
    if (!between)
      return;
    rt::KernelOp norm = between->norm;
    bool layer = isKernel(norm, abi::KernelId::layer_norm);
    Type type = add.getComputeType();
    if (norm.getComputeType() != type ||
        !(type.isF32() || (bf16 && type.isBF16())))
      return;
    Value s = add.getBuffers()[2];
    ArrayRef<int64_t> ni = norm.getInts();
    int64_t nM = layer ? ni[abi::layer_norm::M] : ni[abi::rms_norm::M];
    int64_t nC = layer ? ni[abi::layer_norm::C] : ni[abi::rms_norm::C];
    if (nM != M || nC != C)
      return;
    Operation *at = placeFused(add, *between);
    if (!at)
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
    if (!layer)
      ints.push_back(0); // amax (rt-fuse-amax)
    OpBuilder b(at);
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
