//===- Report.h - per-rank memory and communication report -----*- C++ -*-===//
#ifndef SHARDC_COMPILER_REPORT_H
#define SHARDC_COMPILER_REPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace shardc {

/// Prints, for a module lowered to planned rt step functions (after
/// buildNNToRtPipeline), the bytes each rank holds (parameters, gradients,
/// optimizer state, peak gathered parameters, activations, the planned
/// peak) and the bytes each kind of collective moves on each mesh axis.
void printReport(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace shardc

#endif // SHARDC_COMPILER_REPORT_H
