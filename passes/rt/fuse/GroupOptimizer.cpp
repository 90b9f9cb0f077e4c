//===- GroupOptimizer.cpp - one launch for many parameters' updates -------===//
//
// On a target with grouped kernels (TargetDescription::groupedKernels),
// rewrites the optimizer step's per-parameter launches:
//
//   squared_norm(x_1) -> s_1; squared_norm(x_2) -> s_2; add(s_1, s_2) -> t_2;
//   squared_norm(x_3) -> s_3; add(t_2, s_3) -> t_3; ...
//     => squared_norm_group(x_1, ..., x_k) -> t_k
//   adamw(p_1, ...); adamw(p_2, ...); ...   (same hyper-parameters and
//                                             clipping coefficient)
//     => adamw_group(hyper, c, p_1 g_1 m_1 v_1 p_1' m_1' v_1', ...)
//
// at most kMaxNormTensors and kMaxGroupTensors tensors a launch. The chain
// must run on one
// stream with nothing but allocations and views between its kernels, every
// squared norm and intermediate sum a fresh buffer read by the next add
// only (the last sum may be any buffer, as the io slot of the norm); the
// grouped kernel computes the same sums in the same order (f32 additions of
// f32 squared norms), so the results are unchanged. Runs after
// convert-nn-to-rt, before memory planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTGROUPOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// Tensors of one adamw_group launch at most (the CUDA kernel's parameter
/// block holds this many).
constexpr size_t kMaxGroupTensors = 32;
/// Tensors of one squared_norm_group launch at most (the CUDA kernel takes
/// them kMaxGroupTensors a pass, then sums every partial in order).
constexpr size_t kMaxNormTensors = 4096;

/// Allocations and views: no work.
bool isInert(Operation *op) { return isa<rt::AllocOp, rt::ViewOp>(op); }

/// The next op after `op` that does work, or null.
Operation *nextWork(Operation *op) {
  for (op = op->getNextNode(); op && isInert(op); op = op->getNextNode())
    ;
  return op;
}

/// Whether `writer` and `reader` are the only ops using `v`.
bool onlyWrittenAndRead(Value v, Operation *writer, Operation *reader) {
  for (Operation *user : v.getUsers())
    if (user != writer && user != reader)
      return false;
  return true;
}

/// A scalar f32 add (rank 0).
bool isScalarAdd(Operation *op) {
  if (!isKernel(op, abi::KernelId::add))
    return false;
  auto k = cast<rt::KernelOp>(op);
  return k.getInts().size() == abi::add::kNumInts &&
         k.getInts()[abi::add::R] == 0 && k.getComputeType().isF32();
}

/// A squared_norm into a fresh buffer read by `user` only.
bool isNormFor(Operation *op, Value out, Operation *user) {
  if (!isKernel(op, abi::KernelId::squared_norm))
    return false;
  auto k = cast<rt::KernelOp>(op);
  return k.getBuffers()[1] == out && out.getDefiningOp<rt::AllocOp>() &&
         onlyWrittenAndRead(out, op, user);
}

struct RtGroupOptimizerPass
    : public shardc::impl::RtGroupOptimizerBase<RtGroupOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    const TargetDescription *t = lookupTargetOf(getOperation(), target);
    if (!t)
      return signalPassFailure();
    if (!t->groupedKernels)
      return;
    for (Block &block : getOperation().getBody())
      groupBlock(block);
  }

  void groupBlock(Block &block) {
    // Chains of norms, started at a squared_norm followed by another.
    for (Operation *op = &block.front(); op;) {
      Operation *next = op->getNextNode();
      if (isKernel(op, abi::KernelId::squared_norm))
        if (Operation *end = groupNorms(op))
          next = end->getNextNode();
      op = next;
    }
    for (Operation *op = &block.front(); op;) {
      Operation *next = op->getNextNode();
      if (isKernel(op, abi::KernelId::adamw))
        if (Operation *end = groupAdamW(op))
          next = end->getNextNode();
      op = next;
    }
  }

  /// From squared_norm `first`: the chain norm, norm, add, (norm, add)*;
  /// returns the grouped kernel, or null if there is no chain of two.
  Operation *groupNorms(Operation *first) {
    auto n1 = cast<rt::KernelOp>(first);
    SmallVector<rt::KernelOp> norms = {n1}, adds;
    Operation *n2 = nextWork(first);
    if (!isKernel(n2, abi::KernelId::squared_norm))
      return nullptr;
    Operation *add = nextWork(n2);
    if (!isScalarAdd(add))
      return nullptr;
    auto a = cast<rt::KernelOp>(add);
    if (a.getBuffers()[0] != n1.getBuffers()[1] ||
        a.getBuffers()[1] != cast<rt::KernelOp>(n2).getBuffers()[1] ||
        !isNormFor(n1, a.getBuffers()[0], a) ||
        !isNormFor(n2, a.getBuffers()[1], a))
      return nullptr;
    norms.push_back(cast<rt::KernelOp>(n2));
    adds.push_back(a);
    while (norms.size() < kMaxNormTensors) {
      Value sum = adds.back().getBuffers()[2];
      Operation *n = nextWork(adds.back());
      Operation *add2 = n ? nextWork(n) : nullptr;
      if (!n || !add2 || !isScalarAdd(add2))
        break;
      auto a2 = cast<rt::KernelOp>(add2);
      if (a2.getBuffers()[0] != sum || !sum.getDefiningOp<rt::AllocOp>() ||
          !onlyWrittenAndRead(sum, adds.back(), a2) ||
          !isNormFor(n, a2.getBuffers()[1], a2))
        break;
      norms.push_back(cast<rt::KernelOp>(n));
      adds.push_back(a2);
    }
    for (rt::KernelOp k : llvm::concat<rt::KernelOp>(norms, adds))
      if (k.getStream() != n1.getStream())
        return nullptr;
    Value out = adds.back().getBuffers()[2];
    SmallVector<Value> bufs;
    SmallVector<int64_t> ints = {int64_t(norms.size())};
    for (rt::KernelOp n : norms) {
      bufs.push_back(n.getBuffers()[0]);
      ints.push_back(n.getInts()[abi::squared_norm::n]);
    }
    bufs.push_back(out);
    OpBuilder b(adds.back());
    auto grouped = rt::KernelOp::create(
        b, adds.back().getLoc(), n1.getCtx(),
        abi::kernelInfo(abi::KernelId::squared_norm_group).name, bufs, ints,
        ArrayRef<double>{}, n1.getStream());
    // Inner sums and norms are gone, with their buffers.
    SmallVector<Operation *> dead;
    for (rt::KernelOp n : norms)
      dead.push_back(n.getBuffers()[1].getDefiningOp());
    for (rt::KernelOp a : ArrayRef<rt::KernelOp>(adds).drop_back())
      dead.push_back(a.getBuffers()[2].getDefiningOp());
    for (rt::KernelOp k : llvm::concat<rt::KernelOp>(norms, adds))
      k.erase();
    for (Operation *d : dead)
      if (d->use_empty())
        d->erase();
    return grouped;
  }

  /// From adamw `first`: the run of adamw kernels with its hyper-parameters,
  /// coefficient and stream; returns the grouped kernel, or null.
  Operation *groupAdamW(Operation *first) {
    auto a1 = cast<rt::KernelOp>(first);
    Value hyper = a1.getBuffers()[4], coef = a1.getBuffers()[5];
    SmallVector<rt::KernelOp> run = {a1};
    while (run.size() < kMaxGroupTensors) {
      Operation *n = nextWork(run.back());
      if (!isKernel(n, abi::KernelId::adamw))
        break;
      auto a = cast<rt::KernelOp>(n);
      if (a.getBuffers()[4] != hyper || a.getBuffers()[5] != coef ||
          a.getStream() != a1.getStream())
        break;
      run.push_back(a);
    }
    if (run.size() < 2)
      return nullptr;
    SmallVector<Value> bufs = {hyper, coef};
    SmallVector<int64_t> ints = {int64_t(run.size())};
    for (rt::KernelOp a : run) {
      ValueRange in = a.getBuffers();
      for (int j : {0, 1, 2, 3, 6, 7, 8})
        bufs.push_back(in[j]);
      ints.push_back(a.getInts()[abi::adamw::n]);
      ints.push_back(a.getInts()[abi::adamw::is_1d]);
    }
    OpBuilder b(run.back());
    auto grouped = rt::KernelOp::create(
        b, run.back().getLoc(), a1.getCtx(),
        abi::kernelInfo(abi::KernelId::adamw_group).name, bufs, ints,
        ArrayRef<double>{}, a1.getStream());
    for (rt::KernelOp a : run)
      a.erase();
    return grouped;
  }
};

} // namespace
