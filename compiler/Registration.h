//===- Registration.h - every dialect and pass of shardc --------*- C++ -*-===//
//
// The one place that registers the project's dialects and passes and the
// upstream ones its pipelines use; shardc and shardc-opt both call it.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_COMPILER_REGISTRATION_H
#define SHARDC_COMPILER_REGISTRATION_H

#include "mlir/IR/DialectRegistry.h"

namespace shardc {
/// nn, rt and the upstream dialects of the pipeline (func, arith, llvm,
/// shard, ...), with the LLVM IR translation interfaces.
void registerAllDialects(mlir::DialectRegistry &registry);
/// Project passes, the named pipelines and the upstream passes they use.
void registerAllPasses();
} // namespace shardc

#endif // SHARDC_COMPILER_REGISTRATION_H
