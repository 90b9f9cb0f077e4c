//===- FuseCasts.cpp - a bf16 -> f32 cast fused into the kernel before it -===//
//
// Under mixed precision (bf16 compute, f32 gradient reduction) every weight
// gradient is written in bf16 and cast to f32 before its reduce-scatter:
//
//   matmul(a, b, x) {bf16};           cast(x, y) {bf16 -> f32}
//   matmul_fp8(qa, qb, sa, sb, x) {bf16}; cast(x, y)
//   sum_to(g, x) {bf16};              cast(x, y)
//   layer_norm_grad(.., dw, db) {bf16}; cast(dw, yw); cast(db, yb)
//     => matmul(a, b, y) {y_f32}, matmul_fp8(.., y) {y_f32},
//        sum_to(g, y) {y_f32},
//        layer_norm_grad(.., yw, yb) {wb_f32}
//
// where x is an allocation the producer writes and the cast alone reads.
// The producer then writes its f32 result as it is, without rounding it to
// bf16 first (cuBLASLt's f32 D type; the CPU's f32 scratch): the gradient
// is the more exact one, as --fuse-epilogues' outputs are. Runs after
// convert-nn-to-rt, before the view passes and memory planning.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_RTFUSECASTS
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// The bf16 -> f32 cast that alone reads `x`, an allocation, besides its
/// writer `producer`; null if there is none.
rt::KernelOp widening(Value x, rt::KernelOp producer) {
  if (!x.getDefiningOp<rt::AllocOp>())
    return nullptr;
  rt::KernelOp cast;
  for (Operation *user : x.getUsers()) {
    if (user == producer.getOperation())
      continue;
    auto k = dyn_cast<rt::KernelOp>(user);
    if (cast || !isKernel(user, abi::KernelId::cast) ||
        k.getBuffers()[0] != x || k.getStream() != producer.getStream())
      return nullptr;
    ArrayRef<int64_t> i = k.getInts();
    if (i[abi::cast::from] != abi::kBF16 || i[abi::cast::to] != abi::kF32)
      return nullptr;
    cast = k;
  }
  // The producer writes x once; the cast reads it after.
  if (!cast || !producer->isBeforeInBlock(cast) ||
      llvm::count(producer.getBuffers(), x) != 1)
    return nullptr;
  return cast;
}

/// The producer's buffer `k` becomes the output of `cast` (hoistable), which
/// is erased with k's allocation.
void fuseInto(rt::KernelOp producer, rt::KernelOp cast, unsigned k) {
  Value x = producer.getBuffers()[k], y = cast.getBuffers()[1];
  hoistBefore(y, producer);
  producer.getBuffersMutable()[k].set(y);
  cast.erase();
  if (x.use_empty())
    x.getDefiningOp()->erase();
}

/// `k` with integer `at` set to 1.
void setFlag(rt::KernelOp k, int64_t at) {
  SmallVector<int64_t> ints(k.getInts());
  ints[at] = 1;
  k.setInts(ints);
}

struct RtFuseCastsPass
    : public shardc::impl::RtFuseCastsBase<RtFuseCastsPass> {
  void runOnOperation() override {
    SmallVector<rt::KernelOp> producers;
    getOperation().walk([&](rt::KernelOp k) {
      if (k.getComputeType().isBF16() &&
          (isKernel(k, abi::KernelId::matmul) ||
           isKernel(k, abi::KernelId::matmul_fp8) ||
           isKernel(k, abi::KernelId::sum_to) ||
           isKernel(k, abi::KernelId::layer_norm_grad)))
        producers.push_back(k);
    });
    for (rt::KernelOp k : producers)
      fuse(k);
  }

  void fuse(rt::KernelOp k) {
    if (isKernel(k, abi::KernelId::layer_norm_grad)) {
      // dw and db: both casts, or neither.
      rt::KernelOp cw = widening(k.getBuffers()[4], k),
                   cb = widening(k.getBuffers()[5], k);
      if (!cw || !cb || !hoistable(cw.getBuffers()[1], k) ||
          !hoistable(cb.getBuffers()[1], k))
        return;
      fuseInto(k, cw, 4);
      fuseInto(k, cb, 5);
      setFlag(k, abi::layer_norm_grad::wb_f32);
      return;
    }
    // The output y is the last buffer of each; its flag y_f32.
    unsigned out = k.getBuffers().size() - 1;
    int64_t flag = isKernel(k, abi::KernelId::matmul) ? abi::matmul::y_f32
                   : isKernel(k, abi::KernelId::matmul_fp8)
                       ? abi::matmul_fp8::y_f32
                       : abi::sum_to::y_f32;
    rt::KernelOp c = widening(k.getBuffers()[out], k);
    if (!c || !hoistable(c.getBuffers()[1], k))
      return;
    fuseInto(k, c, out);
    setFlag(k, flag);
  }
};

} // namespace
