//===- ChunkLossHead.cpp - the LM head and its loss over row chunks -------===//
//
// On a target with the kernel (TargetDescription::chunkedLossHead),
// rewrites the LM head, its fused loss and the head's two gradient GEMMs
//
//   linear(h, w) -> L                                  (logits [N, V])
//   cross_entropy_with_grad(L, t) -> loss, L           (gradient in place)
//   ...
//   linear(L, w, in_out) -> dh                         (dh = dL w)
//   matmul(L^T, h) -> dw                               (dw = dL^T h)
//
// into one linear_cross_entropy(h, w, t) -> loss, dh, dw that works through
// a scratch of R rows of logits at a time: the [N, V] logits are never all
// in memory (the plan's peak drops by (N - R) V floats where they set it).
// R is the pass's `rows`, or (0) as many rows as fit kAutoChunkBytes; where
// R >= N nothing changes. A match needs L a fresh allocation used by those
// four kernels only, all on one stream in that order, the gradient GEMMs
// reading the forward's h and w, and dh and dw fresh allocations written by
// nothing else before their GEMMs (their allocations move above the fused
// kernel, which takes the loss's place). Runs after convert-nn-to-rt,
// before memory planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTCHUNKLOSSHEAD
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// Logits bytes per chunk when the pass is given no row count.
constexpr int64_t kAutoChunkBytes = int64_t(64) << 20;

struct RtChunkLossHeadPass
    : public shardc::impl::RtChunkLossHeadBase<RtChunkLossHeadPass> {
  using Base::Base;

  void runOnOperation() override {
    const TargetDescription *t = lookupTargetOf(getOperation(), target);
    if (!t)
      return signalPassFailure();
    if (!t->chunkedLossHead)
      return;
    SmallVector<rt::KernelOp> losses;
    getOperation().walk([&](rt::KernelOp k) {
      if (isF32Kernel(k, abi::KernelId::cross_entropy_with_grad))
        losses.push_back(k);
    });
    for (rt::KernelOp ce : losses)
      chunk(ce);
  }

  /// Whether `v` is a fresh allocation whose users other than `writer`
  /// all come after `writer` in its block.
  static bool freshUntil(Value v, Operation *writer) {
    if (!v.getDefiningOp<rt::AllocOp>())
      return false;
    for (Operation *user : v.getUsers())
      if (user != writer && user->getBlock() == writer->getBlock() &&
          user->isBeforeInBlock(writer))
        return false;
    return true;
  }

  void chunk(rt::KernelOp ce) {
    namespace CE = abi::cross_entropy_with_grad;
    Value L = ce.getBuffers()[0];
    auto logits = L.getDefiningOp<rt::AllocOp>();
    if (!logits || ce.getBuffers()[3] != L)
      return;
    ArrayRef<int64_t> ci = ce.getInts();
    int64_t N = ci[CE::N], V = ci[CE::V];
    rt::KernelOp fwd, dh, dw;
    for (Operation *user : L.getUsers()) {
      if (user == ce)
        continue;
      auto k = dyn_cast<rt::KernelOp>(user);
      if (!k || k.getStream() != ce.getStream())
        return;
      ArrayRef<int64_t> i = k.getInts();
      if (isF32Kernel(k, abi::KernelId::linear) && k.getBuffers().size() == 3 &&
          !i[abi::linear::has_bias]) {
        if (k.getBuffers()[2] == L && !i[abi::linear::in_out] &&
            i[abi::linear::M] == N && i[abi::linear::N] == V && !fwd)
          fwd = k;
        else if (k.getBuffers()[0] == L && i[abi::linear::in_out] &&
                 i[abi::linear::M] == N && i[abi::linear::K] == V && !dh)
          dh = k;
        else
          return;
      } else if (isF32Kernel(k, abi::KernelId::matmul) &&
                 k.getBuffers()[0] == L && i[abi::matmul::trans_a] &&
                 !i[abi::matmul::trans_b] && i[abi::matmul::M] == V &&
                 i[abi::matmul::K] == N && !dw) {
        dw = k;
      } else {
        return;
      }
    }
    if (!fwd || !dh || !dw)
      return;
    Value h = fwd.getBuffers()[0], w = fwd.getBuffers()[1];
    int64_t C = fwd.getInts()[abi::linear::K];
    if (dh.getBuffers()[1] != w || dw.getBuffers()[1] != h ||
        dh.getInts()[abi::linear::N] != C || dw.getInts()[abi::matmul::N] != C)
      return;
    if (!fwd->isBeforeInBlock(ce) || !ce->isBeforeInBlock(dh) ||
        !ce->isBeforeInBlock(dw))
      return;
    Value dH = dh.getBuffers()[2], dW = dw.getBuffers()[2];
    if (!freshUntil(dH, dh) || !freshUntil(dW, dw))
      return;
    int64_t R = rows > 0 ? rows : std::max<int64_t>(1, kAutoChunkBytes / (V * 4));
    if (R >= N)
      return;
    dH.getDefiningOp()->moveBefore(ce);
    dW.getDefiningOp()->moveBefore(ce);
    OpBuilder b(ce);
    Value scratch = rt::AllocOp::create(b, ce.getLoc(), R * V * 4);
    rt::KernelOp::create(
        b, ce.getLoc(), ce.getCtx(),
        abi::kernelInfo(abi::KernelId::linear_cross_entropy).name,
        ValueRange{h, w, ce.getBuffers()[1], ce.getBuffers()[2], dH, dW,
                   scratch},
        ArrayRef<int64_t>{N, C, V, R, ci[CE::ignore_index]},
        ArrayRef<double>{}, ce.getStream());
    for (rt::KernelOp k : {fwd, ce, dh, dw})
      k.erase();
    logits.erase();
  }
};

} // namespace
