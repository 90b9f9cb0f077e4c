//===- Float8TpScales.cpp - tensorwise scales over the tp ranks -----------===//
//
// Under --tp a tensorwise float8 cast's operand is a tp rank's part of a
// tensor (a column- or row-parallel weight, an activation or gradient
// split by features) or a copy every tp rank holds (an activation gathered
// over the sequence). torchao casts the whole tensor with one scale (the
// DTensor's amax, a max over the tp ranks), so every tensorwise cast here
// takes its scale from the max of the tp ranks' amaxes, which is its own
// amax where the ranks hold copies:
//
//   cast_fp8(x -> q, s[, qt])                  (rowwise 0)
//     => amax_group(x -> a); all_gather(a -> a[T], tp axis);
//        fp8_scales(a[T] -> s); cast_fp8_scaled(x, s -> q[, qt])
//
// Runs after rt-float8-all-gather, whose gathered weights take the tp max
// with the shard axis's.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/Float8Scales.h"
#include "passes/rt/RtMatch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace shardc {
#define GEN_PASS_DEF_RTFLOAT8TPSCALES
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// `cast` (a tensorwise cast_fp8) with its scale the max over the tp ranks.
void globalize(rt::KernelOp cast, const abi::MeshGrid &mesh) {
  namespace C8 = abi::cast_fp8;
  ArrayRef<int64_t> i = cast.getInts();
  int64_t R = i[C8::R], C = i[C8::C], dtype = i[C8::dtype];
  int64_t format = i[C8::format];
  // x q scale, and qt with both.
  SmallVector<Value> bufs(cast.getBuffers());
  Value x = bufs[0], scale = bufs[2];
  OpBuilder b(cast);
  Location loc = cast.getLoc();
  Value ctx = cast.getCtx();
  Value amax = rt::AllocOp::create(b, loc, 4);
  launchKernel(b, loc, ctx, abi::KernelId::amax_group, {x, amax},
               {1, dtype, R * C}, dtype);
  gatherFp8Scales(b, loc, ctx, amax, 1, {mesh.tpAxis()}, mesh, format, dtype,
                  scale);
  SmallVector<Value> out = {x, scale, bufs[1]};
  if (i[C8::both])
    out.push_back(bufs[3]);
  launchKernel(b, loc, ctx, abi::KernelId::cast_fp8_scaled, out,
               {R, C, dtype, format, i[C8::trans], i[C8::both]}, dtype,
               cast.getStream());
  cast.erase();
}

struct RtFloat8TpScalesPass
    : public shardc::impl::RtFloat8TpScalesBase<RtFloat8TpScalesPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    abi::MeshGrid mesh = compiledMesh(fn->getParentOfType<ModuleOp>());
    if (mesh.tpAxis() < 0)
      return;
    SmallVector<rt::KernelOp> casts;
    fn.walk([&](rt::KernelOp k) {
      if (isKernel(k, abi::KernelId::cast_fp8) &&
          k.getInts()[abi::cast_fp8::rowwise] == 0)
        casts.push_back(k);
    });
    for (rt::KernelOp cast : casts)
      globalize(cast, mesh);
  }
};

} // namespace
