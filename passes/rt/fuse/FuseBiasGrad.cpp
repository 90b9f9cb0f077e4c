//===- FuseBiasGrad.cpp - a bias gradient as its weight GEMM's epilogue ---===//
//
// A linear layer's backward pass reads dy[K, N] (K the rows: tokens) twice
// after its input gradient: the weight gradient, a GEMM that sums over the
// rows, and the bias gradient, the sum of the rows:
//
//   matmul(x, dy, dw) {trans_a}            dw[M,N] = x^T dy  (w [in, out])
//   sum_to(dy, db) over dy's leading dims  db[N]
//     => matmul_bgrad(x, dy, dw, db) {side 1}
//
//   matmul(dy, x, dw) {trans_a}            dw[M,N] = dy^T x  (w [out, in])
//   sum_to(dy, db)                         db[M]
//     => matmul_bgrad(dy, x, dw, db) {side 0}
//
// On CUDA the sum is cuBLASLt's BGRADB or BGRADA epilogue of the GEMM, so dy
// is read once (the bias gradients were 49 launches and 1.6 ms of a GPT-2
// 124M bf16 step on an H100: tools/bench/results/h100-2026-11-26-run4.log);
// on the CPU the column sums follow the GEMM in the same kernel, sum_to's
// arithmetic. A match needs the two on one stream, in one dtype and with
// the same output type (y_f32), the sum_to after the matmul with nothing
// between them but views, allocations and event records (db is then
// written earlier, by the GEMM, and nothing between can see it), and db
// definable above the matmul. Runs after rt-fuse-casts (which sets y_f32
// on both), before memory planning, on targets with GEMM epilogues.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTFUSEBIASGRAD
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// The rows and width of a sum_to that sums x's leading dimensions into its
/// innermost one (a bias gradient), or {-1, -1}.
std::pair<int64_t, int64_t> rowSum(rt::KernelOp sum) {
  ArrayRef<int64_t> i = sum.getInts();
  int64_t R = i[abi::sum_to::R];
  if (R < 2 || int64_t(i.size()) != abi::sum_to::kNumInts + 2 * R)
    return {-1, -1};
  const int64_t *dims = i.data() + abi::sum_to::kNumInts, *ystr = dims + R;
  int64_t N = dims[R - 1];
  if (ystr[R - 1] != 1 || i[abi::sum_to::out_n] != N)
    return {-1, -1};
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < R; ++d) {
    if (ystr[d] != 0)
      return {-1, -1};
    rows *= dims[d];
  }
  return {rows, N};
}

/// Whether only views, allocations and event records lie strictly between
/// `from` and `to` (one block).
bool onlyBookkeepingBetween(Operation *from, Operation *to) {
  for (Operation *op = from->getNextNode(); op && op != to;
       op = op->getNextNode())
    if (!isa<rt::ViewOp, rt::AllocOp, rt::EventRecordOp>(op))
      return false;
  return true;
}

/// The matmul before `sum` (only bookkeeping between) whose summed
/// operand is sum's input x, and that operand's side (0: a, 1: b); or
/// {null, -1}.
std::pair<rt::KernelOp, int64_t> weightGemmOf(rt::KernelOp sum) {
  auto [rows, N] = rowSum(sum);
  if (rows < 0)
    return {nullptr, -1};
  Value x = sum.getBuffers()[0];
  Operation *prev = sum->getPrevNode();
  while (prev && isa<rt::ViewOp, rt::AllocOp, rt::EventRecordOp>(prev))
    prev = prev->getPrevNode();
  auto mm = dyn_cast_or_null<rt::KernelOp>(prev);
  if (!mm || !isKernel(mm, abi::KernelId::matmul) ||
      mm.getStream() != sum.getStream() ||
      mm.getComputeType() != sum.getComputeType())
    return {nullptr, -1};
  ArrayRef<int64_t> i = mm.getInts();
  namespace K = abi::matmul;
  if (i[K::K] != rows || i[K::y_f32] != sum.getInts()[abi::sum_to::y_f32])
    return {nullptr, -1};
  // Side 1: b stored [K, N]; side 0: a stored [K, M].
  for (int64_t side : {1, 0})
    if (mm.getBuffers()[side] == x &&
        abi::matmulBgradSummable(side, i[K::trans_a], i[K::trans_b]) &&
        i[side ? K::N : K::M] == N)
      return {mm, side};
  return {nullptr, -1};
}

struct RtFuseBiasGradPass
    : public shardc::impl::RtFuseBiasGradBase<RtFuseBiasGradPass> {
  using Base::Base;

  void runOnOperation() override {
    const TargetDescription *t = lookupTargetOf(getOperation(), target);
    if (!t)
      return signalPassFailure();
    if (!t->gemmEpilogues)
      return;
    SmallVector<rt::KernelOp> sums;
    getOperation().walk([&](rt::KernelOp k) {
      if (isKernel(k, abi::KernelId::sum_to))
        sums.push_back(k);
    });
    for (rt::KernelOp sum : sums)
      fuse(sum);
  }

  void fuse(rt::KernelOp sum) {
    auto [mm, side] = weightGemmOf(sum);
    Value db = sum.getBuffers()[1];
    if (!mm || llvm::is_contained(mm.getBuffers(), db) || !hoistable(db, mm) ||
        !onlyBookkeepingBetween(mm, sum))
      return;
    hoistBefore(db, mm);
    SmallVector<Value> bufs(mm.getBuffers().begin(), mm.getBuffers().end());
    bufs.push_back(db);
    SmallVector<int64_t> ints(mm.getInts());
    ints.push_back(side);
    OpBuilder b(mm);
    rt::KernelOp::create(b, sum.getLoc(), mm.getCtx(),
                         abi::kernelInfo(abi::KernelId::matmul_bgrad).name,
                         bufs, ints, ArrayRef<double>{}, mm.getStream(),
                         mm.getDtypeAttr());
    mm.erase();
    sum.erase();
  }
};

} // namespace
