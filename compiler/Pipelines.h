//===- Pipelines.h - shardc pass pipelines ----------------------*- C++ -*-===//
#ifndef SHARDC_COMPILER_PIPELINES_H
#define SHARDC_COMPILER_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace shardc {

/// nn forward graph -> rt step function with a memory plan.
void buildNNToRtPipeline(mlir::OpPassManager &pm);
/// rt step function -> LLVM dialect, ready for translation to LLVM IR.
void buildRtToLLVMPipeline(mlir::OpPassManager &pm);
/// Both, in order: what `shardc` runs on a frontend's module.
void buildLoweringPipeline(mlir::OpPassManager &pm);

/// Registers the pipelines above as `shardc-lower-to-rt`,
/// `shardc-lower-to-llvm` and `shardc-lower` for shardc-opt.
void registerPipelines();

} // namespace shardc

#endif // SHARDC_COMPILER_PIPELINES_H
