//===- FusedAttention.cpp - attention through the target's fused library --===//
//
// On a target with a fused-attention library (TargetDescription::
// fusedAttention: cuDNN's SDPA on CUDA), a bf16 attention and its gradient
//
//   attention(q, k, v) -> o
//   ...
//   attention_grad(q, k, v, do) -> dq, dk, dv
//     => sdpa(q, k, v) -> o, lse                    (lse f32 [B,H,T])
//        sdpa_grad(q, k, v, o, lse, do) -> dq, dk, dv
//
// so that the backward reads the forward's output and per-row log-sum-exp
// instead of recomputing the forward. lse is a new buffer, live from the
// forward to the gradient (the memory plan counts it); each launch gets a
// workspace buffer of abi::sdpaWorkspaceBytes, live for that launch only.
// sdpa_grad's last int is the pass's `deterministic` option
// (--deterministic-attention): 1, cuDNN's deterministic backward, whose
// workspace holds an O(T S) dP buffer; 0, the non-deterministic one (dQ
// accumulated in f32 in any order), whose workspace is O(T D).
//
// A pair is matched on its buffers: the gradient's q, k and v are the
// latest attention's before it in the block, with the same shape, mask,
// scale and stream, and that attention's output a fresh rt.alloc. (Under
// --recompute the recomputed attention is the one matched.) Every other
// bf16 attention (a forward whose output is recomputed for the backward,
// inference) becomes sdpa too, its lse written and dropped. f32 attention
// and a gradient with no forward to pair with stay on the target's
// kernels. Runs after convert-nn-to-rt, before memory planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTFUSEDATTENTION
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

namespace A = abi::attention;
namespace G = abi::attention_grad;

/// attention's and attention_grad's ints name the same things in the same
/// order; sdpa's and sdpa_grad's are those with ws_bytes before the layout.
static_assert(int64_t(A::dtype) == int64_t(G::dtype) &&
                  int64_t(A::kNumInts) == int64_t(G::kNumInts) &&
                  int64_t(abi::sdpa::ws_bytes) == int64_t(A::layout) &&
                  int64_t(abi::sdpa_grad::ws_bytes) == int64_t(A::layout) &&
                  int64_t(abi::sdpa::kNumInts) == int64_t(A::kNumInts) + 1,
              "sdpa's ints are attention's with ws_bytes before the layout");

/// The forward attention `grad` differentiates: the latest attention
/// before it on its q, k and v, computing the same thing; or null.
rt::KernelOp forwardOf(rt::KernelOp grad) {
  ValueRange gb = grad.getBuffers();
  for (Operation *p = grad->getPrevNode(); p; p = p->getPrevNode()) {
    auto k = dyn_cast<rt::KernelOp>(p);
    if (!k || !isKernel(k, abi::KernelId::attention))
      continue;
    ValueRange fb = k.getBuffers();
    if (fb[0] != gb[0] || fb[1] != gb[1] || fb[2] != gb[2])
      continue;
    bool same = k.getInts() == grad.getInts() &&
                k.getFloats() == grad.getFloats() &&
                k.getStream() == grad.getStream() &&
                k.getComputeType() == grad.getComputeType() &&
                fb[3].getDefiningOp<rt::AllocOp>();
    return same ? k : nullptr;
  }
  return nullptr;
}

/// A fresh buffer of `bytes` allocated just before `op`.
Value allocBefore(Operation *op, int64_t bytes) {
  OpBuilder b(op);
  return rt::AllocOp::create(b, op->getLoc(), bytes);
}

static_assert(int64_t(abi::sdpa_grad::deterministic) ==
                      int64_t(abi::sdpa::kNumInts) &&
                  int64_t(abi::sdpa_grad::kNumInts) ==
                      int64_t(abi::sdpa::kNumInts) + 1,
              "sdpa_grad's ints are sdpa's, then deterministic");

/// `k`'s ints with the workspace bytes of sdpa (`grad`: sdpa_grad) after;
/// sdpa_grad's end with `deterministic`, which sizes its workspace.
SmallVector<int64_t> sdpaInts(rt::KernelOp k, bool grad, bool deterministic,
                              int64_t &ws) {
  ArrayRef<int64_t> i = k.getInts();
  ws = abi::sdpaWorkspaceBytes(i[A::B], i[A::H], i[A::G], i[A::T], i[A::S],
                               i[A::D], grad, deterministic);
  SmallVector<int64_t> ints(i.begin(), i.end());
  ints.insert(ints.begin() + A::layout, ws);
  if (grad)
    ints.push_back(deterministic ? 1 : 0);
  return ints;
}

/// Replaces `k` by kernel `id` on `buffers`.
void replaceKernel(rt::KernelOp k, abi::KernelId id, ValueRange buffers,
                   ArrayRef<int64_t> ints) {
  OpBuilder b(k);
  std::optional<Type> dtype = k.getDtype();
  rt::KernelOp::create(b, k.getLoc(), k.getCtx(), abi::kernelInfo(id).name,
                       buffers, ints, k.getFloats(), k.getStream(),
                       dtype ? TypeAttr::get(*dtype) : TypeAttr());
  k.erase();
}

/// `fwd` through sdpa, with a new lse buffer and its workspace; returns
/// the lse buffer (unused for a forward alone).
Value fuseForward(rt::KernelOp fwd) {
  ArrayRef<int64_t> i = fwd.getInts();
  Value lse = allocBefore(fwd, i[A::B] * i[A::H] * i[A::T] * 4);
  int64_t ws = 0;
  SmallVector<int64_t> ints = sdpaInts(fwd, false, true, ws);
  Value work = allocBefore(fwd, ws);
  ValueRange fb = fwd.getBuffers();
  replaceKernel(fwd, abi::KernelId::sdpa,
                {fb[0], fb[1], fb[2], fb[3], lse, work}, ints);
  return lse;
}

/// The pair (fwd, grad) through the fused kernels: sdpa_grad reads the
/// forward's o and lse.
void fuse(rt::KernelOp fwd, rt::KernelOp grad, bool deterministic) {
  Value o = fwd.getBuffers()[3];
  Value lse = fuseForward(fwd);
  int64_t ws = 0;
  SmallVector<int64_t> ints = sdpaInts(grad, true, deterministic, ws);
  Value work = allocBefore(grad, ws);
  ValueRange gb = grad.getBuffers();
  replaceKernel(grad, abi::KernelId::sdpa_grad,
                {gb[0], gb[1], gb[2], o, lse, gb[3], gb[4], gb[5], gb[6], work},
                ints);
}

struct RtFusedAttentionPass
    : public shardc::impl::RtFusedAttentionBase<RtFusedAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    const TargetDescription *t = lookupTargetOf(getOperation(), target);
    if (!t)
      return signalPassFailure();
    if (!t->fusedAttention)
      return;
    SmallVector<std::pair<rt::KernelOp, rt::KernelOp>> pairs;
    getOperation().walk([&](rt::KernelOp grad) {
      if (!isKernel(grad, abi::KernelId::attention_grad) ||
          !grad.getComputeType().isBF16())
        return;
      if (rt::KernelOp fwd = forwardOf(grad))
        pairs.push_back({fwd, grad});
    });
    // A forward matched twice (two gradients of one attention) stays.
    llvm::DenseMap<Operation *, int> uses;
    for (auto &[fwd, grad] : pairs)
      ++uses[fwd];
    for (auto &[fwd, grad] : pairs)
      if (uses[fwd] == 1)
        fuse(fwd, grad, deterministic);
    SmallVector<rt::KernelOp> alone;
    getOperation().walk([&](rt::KernelOp fwd) {
      if (isKernel(fwd, abi::KernelId::attention) &&
          fwd.getComputeType().isBF16() && !uses.count(fwd))
        alone.push_back(fwd);
    });
    for (rt::KernelOp fwd : alone)
      fuseForward(fwd);
  }
};

} // namespace
