//===- FuseEpilogues.cpp - GELU and bias gradients as GEMM epilogues ------===//
//
// On a target whose GEMMs have epilogues (TargetDescription::gemmEpilogues:
// cuBLASLt's GELU_AUX_BIAS and DGELU_BGRAD; on the CPU one threaded pass
// over the GEMM's output), fuses
//
//   linear(x, w, b?) -> pre; gelu_tanh(pre) -> y
//     => linear_gelu(x, w, b?) -> pre, y
//   linear(dy, w) -> t; gelu_grad_tanh(pre, t) -> dpre [; sum_to(dpre) -> db]
//     => linear_dgelu(dy, w, pre) -> dpre [, db]
//
// The fused kernel takes the GEMM's place; the buffers it now writes early
// (y; dpre and db) have their allocations moved above it. A match needs:
//  - the element-wise op on the GEMM's stream, its output a fresh rt.alloc;
//  - forward: no op between the two touching pre or y;
//  - the GEMM's width N a multiple of the target's gemmAuxLdMultiple (the
//    aux matrix's leading dimension: cuBLASLt refuses others);
//  - backward: t used by the two ops only (it is no longer written), no op
//    between them touching pre or dpre, and the bias gradient a sum_to of
//    dpre over every leading dimension into a fresh buffer, with no op
//    between touching dpre or db.
// Every kernel of a match computes in one dtype (f32 or bf16), which the
// fused kernel then computes in: on bf16 it rounds pre and y (dpre and db)
// once each from the GEMM's f32 result, skipping the rounding between the
// GEMM and the element-wise op, as a GEMM epilogue does.
// Runs after convert-nn-to-rt, before memory planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTFUSEEPILOGUES
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// Whether an op strictly between `from` and `to` (one block) uses any of
/// `values`.
bool touchedBetween(Operation *from, Operation *to, ArrayRef<Value> values) {
  for (Operation *op = from->getNextNode(); op && op != to;
       op = op->getNextNode())
    for (Value v : op->getOperands())
      if (llvm::is_contained(values, v))
        return true;
  return false;
}

/// `v`'s rt.alloc moved above `before` (it is not used above it).
void allocateBefore(Value v, Operation *before) {
  Operation *alloc = v.getDefiningOp();
  if (alloc->getBlock() == before->getBlock() && before->isBeforeInBlock(alloc))
    alloc->moveBefore(before);
}

bool isFreshAlloc(Value v) { return v.getDefiningOp<rt::AllocOp>() != nullptr; }

/// Whether `op` is an rt.kernel of kernel `id` computing in `type`.
bool isKernelOn(Operation *op, abi::KernelId id, Type type) {
  return isKernel(op, id) && cast<rt::KernelOp>(op).getComputeType() == type;
}

/// The dtype attribute of a kernel computing in `type` (none for f32).
TypeAttr dtypeAttr(Type type) {
  return type.isF32() ? TypeAttr() : TypeAttr::get(type);
}

/// The linear kernel's named ints.
struct Linear {
  int64_t M, K, N, inOut, hasBias;
};
Linear linearInts(rt::KernelOp k) {
  ArrayRef<int64_t> i = k.getInts();
  return {i[abi::linear::M], i[abi::linear::K], i[abi::linear::N],
          i[abi::linear::in_out], i[abi::linear::has_bias]};
}

/// The sum_to of [M, N] over its leading dims into [N] reading `x`, after
/// `after` in its block, or null.
rt::KernelOp biasGradOf(Value x, Operation *after, int64_t M, int64_t N) {
  Type type = cast<rt::KernelOp>(after).getComputeType();
  for (Operation *user : x.getUsers()) {
    if (!isKernelOn(user, abi::KernelId::sum_to, type) ||
        user->getBlock() != after->getBlock() ||
        !after->isBeforeInBlock(user))
      continue;
    auto s = cast<rt::KernelOp>(user);
    if (s.getBuffers().size() != 2 || s.getBuffers()[0] != x ||
        s.getStream() != cast<rt::KernelOp>(after).getStream())
      continue;
    ArrayRef<int64_t> i = s.getInts();
    int64_t R = i[abi::sum_to::R];
    const int64_t *dims = i.data() + abi::sum_to::kNumInts;
    const int64_t *ystr = dims + R;
    if (R < 1 || i[abi::sum_to::out_n] != N || dims[R - 1] != N ||
        ystr[R - 1] != 1)
      continue;
    int64_t rows = 1;
    bool leading = true;
    for (int64_t d = 0; d + 1 < R; ++d) {
      rows *= dims[d];
      leading &= ystr[d] == 0;
    }
    if (leading && rows == M)
      return s;
  }
  return nullptr;
}

struct RtFuseEpiloguesPass
    : public shardc::impl::RtFuseEpiloguesBase<RtFuseEpiloguesPass> {
  using Base::Base;

  void runOnOperation() override {
    const TargetDescription *t = lookupTargetOf(getOperation(), target);
    if (!t)
      return signalPassFailure();
    if (!t->gemmEpilogues)
      return;
    auxLdMultiple = t->gemmAuxLdMultiple;
    SmallVector<rt::KernelOp> gelus, grads;
    getOperation().walk([&](rt::KernelOp k) {
      if (isKernel(k, abi::KernelId::gelu) && k.getInts()[abi::gelu::tanh])
        gelus.push_back(k);
      else if (isKernel(k, abi::KernelId::gelu_grad) &&
               k.getInts()[abi::gelu_grad::tanh])
        grads.push_back(k);
    });
    for (rt::KernelOp g : gelus)
      fuseForward(g);
    for (rt::KernelOp g : grads)
      fuseBackward(g);
  }

  /// TargetDescription::gemmAuxLdMultiple of the target.
  int64_t auxLdMultiple = 1;

  /// Whether the target's epilogue takes an aux matrix N wide.
  bool auxFits(const Linear &L) const { return L.N % auxLdMultiple == 0; }

  /// The linear kernel that wrote `v` last before `op` in its block, on
  /// `op`'s stream and in its dtype, or null.
  static rt::KernelOp producer(Value v, rt::KernelOp op) {
    for (Operation *p = op->getPrevNode(); p; p = p->getPrevNode()) {
      auto k = dyn_cast<rt::KernelOp>(p);
      if (!k)
        continue;
      if (!llvm::is_contained(k.getBuffers(), v))
        continue;
      if (isKernelOn(k, abi::KernelId::linear, op.getComputeType()) &&
          k.getBuffers().back() == v && k.getStream() == op.getStream())
        return k;
      return nullptr;
    }
    return nullptr;
  }

  void fuseForward(rt::KernelOp gelu) {
    Value pre = gelu.getBuffers()[0], y = gelu.getBuffers()[1];
    rt::KernelOp lin = producer(pre, gelu);
    if (!lin || !isFreshAlloc(y) || touchedBetween(lin, gelu, {pre, y}))
      return;
    Linear L = linearInts(lin);
    if (gelu.getInts()[abi::gelu::n] != L.M * L.N || !auxFits(L))
      return;
    allocateBefore(y, lin);
    SmallVector<Value> bufs(lin.getBuffers().begin(), lin.getBuffers().end());
    bufs.push_back(y);
    OpBuilder b(lin);
    Type type = gelu.getComputeType();
    rt::KernelOp::create(
        b, gelu.getLoc(), lin.getCtx(),
        abi::kernelInfo(abi::KernelId::linear_gelu).name, bufs,
        SmallVector<int64_t>{L.M, L.K, L.N, L.inOut, L.hasBias,
                             rt::dtypeCode(type)},
        ArrayRef<double>{}, lin.getStream(), dtypeAttr(type));
    lin.erase();
    gelu.erase();
  }

  void fuseBackward(rt::KernelOp grad) {
    Value pre = grad.getBuffers()[0], t = grad.getBuffers()[1],
          dpre = grad.getBuffers()[2];
    rt::KernelOp lin = producer(t, grad);
    if (!lin || !isFreshAlloc(dpre) || !isFreshAlloc(t))
      return;
    Linear L = linearInts(lin);
    if (L.hasBias || grad.getInts()[abi::gelu_grad::n] != L.M * L.N ||
        !auxFits(L))
      return;
    for (Operation *user : t.getUsers())
      if (user != lin && user != grad)
        return;
    if (touchedBetween(lin, grad, {pre, dpre}))
      return;
    rt::KernelOp sum = biasGradOf(dpre, grad, L.M, L.N);
    Value db;
    if (sum) {
      db = sum.getBuffers()[1];
      if (!isFreshAlloc(db) || touchedBetween(grad, sum, {dpre, db}))
        sum = nullptr;
    }
    allocateBefore(dpre, lin);
    if (sum)
      allocateBefore(db, lin);
    SmallVector<Value> bufs = {lin.getBuffers()[0], lin.getBuffers()[1], pre,
                               dpre};
    if (sum)
      bufs.push_back(db);
    OpBuilder b(lin);
    Type type = grad.getComputeType();
    rt::KernelOp::create(
        b, grad.getLoc(), lin.getCtx(),
        abi::kernelInfo(abi::KernelId::linear_dgelu).name, bufs,
        SmallVector<int64_t>{L.M, L.K, L.N, L.inOut, sum ? 1 : 0,
                             rt::dtypeCode(type)},
        ArrayRef<double>{}, lin.getStream(), dtypeAttr(type));
    Operation *tAlloc = t.getDefiningOp();
    lin.erase();
    grad.erase();
    if (sum)
      sum.erase();
    if (tAlloc->use_empty())
      tAlloc->erase();
  }
};

} // namespace
