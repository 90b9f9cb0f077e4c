//===- Float8Scales.h - tensorwise scales of tensors spread over ranks -*- C++ -*-===//
//
// What rt-float8-all-gather and rt-float8-tp-scales share: launching a
// kernel of the ABI, and the scales of tensors whose parts lie on several
// ranks (kernels.def's amax_group, fp8_scales): each rank's amaxes
// gathered over each mesh axis that spreads them, and the scale of each
// tensor from the max of all.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_RT_FLOAT8SCALES_H
#define SHARDC_PASSES_RT_FLOAT8SCALES_H

#include "dialects/rt/RtDialect.h"
#include "runtime/abi/abi.h"

#include "mlir/IR/Builders.h"

namespace shardc {

/// Launches kernel `id` at b's insertion point, typed bf16 when `dtype` is
/// abi::kBF16.
inline void launchKernel(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value ctx, abi::KernelId id,
                         mlir::ValueRange buffers,
                         llvm::ArrayRef<int64_t> ints, int64_t dtype = -1,
                         int64_t stream = abi::kComputeStream) {
  mlir::TypeAttr type = dtype == abi::kBF16
                            ? mlir::TypeAttr::get(b.getBF16Type())
                            : mlir::TypeAttr();
  rt::KernelOp::create(b, loc, ctx, abi::kernelInfo(id).name, buffers, ints,
                       llvm::ArrayRef<double>{}, stream, type);
}

/// Writes into `scales` (k {s, 1/s} pairs of f32s) the scales of k tensors of `format` whose
/// amaxes on this rank are `amax` (k f32s) and whose other parts are on
/// the ranks of mesh axes `axes`: the amaxes gathered over each axis in
/// turn (on the compute stream), then fp8_scales over all of them, with
/// the max rounded to `dtype` (the tensors' dtype as cast).
inline void gatherFp8Scales(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value ctx, mlir::Value amax, int64_t k,
                            llvm::ArrayRef<int64_t> axes,
                            const abi::MeshGrid &mesh, int64_t format,
                            int64_t dtype, mlir::Value scales) {
  int64_t ranks = 1;
  for (int64_t axis : axes) {
    int64_t P = mesh.axisSize(axis);
    mlir::Value all = rt::AllocOp::create(b, loc, ranks * P * k * 4);
    rt::AllGatherOp::create(b, loc, ctx, mlir::ValueRange{amax},
                            mlir::ValueRange{all}, mlir::ValueRange{}, axis,
                            b.getF32Type(),
                            llvm::ArrayRef<int64_t>{ranks * k},
                            /*subgroup=*/0, /*group=*/mlir::IntegerAttr(),
                            abi::kComputeStream);
    amax = all;
    ranks *= P;
  }
  launchKernel(b, loc, ctx, abi::KernelId::fp8_scales, {amax, scales},
               {ranks, k, format, dtype});
}

} // namespace shardc

#endif // SHARDC_PASSES_RT_FLOAT8SCALES_H
