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
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTCHUNKLOSSHEAD
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// Logits bytes per chunk when the pass is given no row count: 256 MiB
/// (GPT-2's head: 2,668 bf16 or 1,334 f32 rows). Each chunk's dw GEMM
/// reads and writes the whole [V, C] f32 gradient, so fewer, larger chunks
/// cost less: on an H200, gpt2-124m's bf16 step ran 137,559 tok/s at 333
/// rows, 158,065 at 1,024 and 162,747 at 4,096
/// (tools/bench/results/h200-2026-11-26-lmhead.log).
constexpr int64_t kAutoChunkBytes = int64_t(256) << 20;

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
      if (!chunkBf16(ce))
        chunk(ce);
  }

  /// The kernel `user` of `v` other than `not`, if it is the only other.
  static rt::KernelOp otherUser(Value v, Operation *not_) {
    rt::KernelOp found;
    for (Operation *user : v.getUsers()) {
      if (user == not_)
        continue;
      auto k = dyn_cast<rt::KernelOp>(user);
      if (!k || found)
        return {};
      found = k;
    }
    return found;
  }

  /// The rows of a cast kernel `k` from `from` to `to`, or -1.
  static int64_t castCount(rt::KernelOp k, int64_t from, int64_t to) {
    if (!k || !isKernel(k, abi::KernelId::cast) ||
        k.getInts()[abi::cast::from] != from || k.getInts()[abi::cast::to] != to)
      return -1;
    return k.getInts()[abi::cast::n];
  }

  /// The bf16 head (nn-propagate-dtype casts its logits up for the loss and
  /// the loss gradient back down):
  ///   linear(h, w) -> Lb (bf16); cast(Lb) -> L; cross_entropy_with_grad(L)
  ///   -> loss, L; cast(L) -> dLb; linear(dLb, w, in_out) -> dh (bf16);
  ///   matmul(dLb^T, h) -> dw (bf16)
  /// becomes one bf16 linear_cross_entropy, which rounds the logits and
  /// their gradient to bf16 where the casts did. Returns whether it did.
  bool chunkBf16(rt::KernelOp ce) {
    namespace CE = abi::cross_entropy_with_grad;
    Value L = ce.getBuffers()[0];
    if (!L.getDefiningOp<rt::AllocOp>() || ce.getBuffers()[3] != L)
      return false;
    int64_t N = ce.getInts()[CE::N], V = ce.getInts()[CE::V];
    rt::KernelOp up, down;
    for (Operation *user : L.getUsers()) {
      auto k = dyn_cast<rt::KernelOp>(user);
      if (!k || k.getStream() != ce.getStream())
        return false;
      if (k == ce)
        continue;
      if (k.getBuffers()[1] == L && !up)
        up = k;
      else if (k.getBuffers()[0] == L && !down)
        down = k;
      else
        return false;
    }
    if (castCount(up, abi::kBF16, abi::kF32) != N * V ||
        castCount(down, abi::kF32, abi::kBF16) != N * V ||
        !up->isBeforeInBlock(ce) || !ce->isBeforeInBlock(down))
      return false;
    Value Lb = up.getBuffers()[0], dLb = down.getBuffers()[1];
    rt::KernelOp fwd = otherUser(Lb, up);
    if (!Lb.getDefiningOp<rt::AllocOp>() || !dLb.getDefiningOp<rt::AllocOp>() ||
        !fwd || !fwd->isBeforeInBlock(up) || fwd.getBuffers().size() != 3 ||
        fwd.getBuffers()[2] != Lb || !isBf16Linear(fwd, N, V, false))
      return false;
    rt::KernelOp dh, dw;
    for (Operation *user : dLb.getUsers()) {
      auto k = dyn_cast<rt::KernelOp>(user);
      if (!k || k.getStream() != ce.getStream())
        return false;
      if (k == down)
        continue;
      if (isBf16Linear(k, N, V, true) && k.getBuffers()[0] == dLb && !dh)
        dh = k;
      else if (isBf16Matmul(k, V, N) && k.getBuffers()[0] == dLb && !dw)
        dw = k;
      else
        return false;
    }
    if (!dh || !dw || !down->isBeforeInBlock(dh) || !down->isBeforeInBlock(dw))
      return false;
    return fuse(fwd, ce, dh, dw, /*bf16=*/true, {Lb, L, dLb}, {up, down});
  }

  static bool isBf16Linear(rt::KernelOp k, int64_t N, int64_t V, bool inOut) {
    namespace Li = abi::linear;
    ArrayRef<int64_t> i = k.getInts();
    return isKernel(k, abi::KernelId::linear) &&
           k.getComputeType().isBF16() && k.getBuffers().size() == 3 &&
           !i[Li::has_bias] && bool(i[Li::in_out]) == inOut &&
           i[Li::M] == N && (inOut ? i[Li::K] : i[Li::N]) == V;
  }

  static bool isBf16Matmul(rt::KernelOp k, int64_t V, int64_t N) {
    namespace Mm = abi::matmul;
    ArrayRef<int64_t> i = k.getInts();
    return isKernel(k, abi::KernelId::matmul) && k.getComputeType().isBF16() &&
           i[Mm::trans_a] && !i[Mm::trans_b] && i[Mm::M] == V && i[Mm::K] == N;
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
    fuse(fwd, ce, dh, dw, /*bf16=*/false, {L}, {});
  }

  /// Replaces the head `fwd`, its loss `ce` and gradient GEMMs `dh`, `dw`
  /// (and the casts and logits buffers between them) by one
  /// linear_cross_entropy, if their operands are the head's and the
  /// gradients' buffers are fresh. Returns whether it did.
  bool fuse(rt::KernelOp fwd, rt::KernelOp ce, rt::KernelOp dh,
            rt::KernelOp dw, bool bf16, ArrayRef<Value> logits,
            ArrayRef<rt::KernelOp> casts) {
    namespace CE = abi::cross_entropy_with_grad;
    ArrayRef<int64_t> ci = ce.getInts();
    int64_t N = ci[CE::N], V = ci[CE::V];
    Value h = fwd.getBuffers()[0], w = fwd.getBuffers()[1];
    int64_t C = fwd.getInts()[abi::linear::K];
    if (dh.getBuffers()[1] != w || dw.getBuffers()[1] != h ||
        dh.getInts()[abi::linear::N] != C || dw.getInts()[abi::matmul::N] != C)
      return false;
    if (!fwd->isBeforeInBlock(ce) || !ce->isBeforeInBlock(dh) ||
        !ce->isBeforeInBlock(dw))
      return false;
    Value dH = dh.getBuffers()[2], dW = dw.getBuffers()[2];
    if (!freshUntil(dH, dh) || !freshUntil(dW, dw))
      return false;
    // The scratch holds logits of the dtype: bf16 rows on bf16.
    int64_t ld = abi::lossHeadRowStride(V), elem = bf16 ? 2 : 4;
    int64_t R =
        rows > 0 ? rows : std::max<int64_t>(1, kAutoChunkBytes / (ld * elem));
    if (R >= N)
      return false;
    dH.getDefiningOp()->moveBefore(ce);
    dW.getDefiningOp()->moveBefore(ce);
    OpBuilder b(ce);
    Value scratch = rt::AllocOp::create(b, ce.getLoc(), R * ld * elem);
    Type dtype = bf16 ? b.getBF16Type() : b.getF32Type();
    rt::KernelOp::create(
        b, ce.getLoc(), ce.getCtx(),
        abi::kernelInfo(abi::KernelId::linear_cross_entropy).name,
        ValueRange{h, w, ce.getBuffers()[1], ce.getBuffers()[2], dH, dW,
                   scratch},
        ArrayRef<int64_t>{N, C, V, R, ci[CE::ignore_index],
                          rt::dtypeCode(dtype)},
        ArrayRef<double>{}, ce.getStream(),
        bf16 ? TypeAttr::get(dtype) : TypeAttr());
    for (rt::KernelOp k : {fwd, ce, dh, dw})
      k.erase();
    for (rt::KernelOp k : casts)
      k.erase();
    for (Value v : logits)
      v.getDefiningOp()->erase();
    return true;
  }
};

} // namespace
