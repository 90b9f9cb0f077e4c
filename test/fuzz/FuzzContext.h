//===- FuzzContext.h - the MLIR context of the fuzz targets ------*- C++ -*-===//
//
// The targets that build MLIR (onnx, config) share one context per input
// batch: the nn and func dialects loaded, made anew every 1000 inputs. A
// context interns every type and attribute an input makes, so one context
// for a whole campaign grows without bound (1 GB after 700,000 inputs) and
// would end it at -rss_limit_mb: a finding of the harness's, not the
// frontend's.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TEST_FUZZ_FUZZCONTEXT_H
#define SHARDC_TEST_FUZZ_FUZZCONTEXT_H

#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

namespace shardc::fuzz {

/// The context for the next input. `quiet`: its diagnostics are dropped
/// (a frontend that reports a refused input as an error too); otherwise
/// they are printed, without the op.
inline mlir::MLIRContext &fuzzContext(bool quiet) {
  static mlir::MLIRContext *ctx = nullptr;
  static int uses = 0;
  if (!ctx || ++uses % 1000 == 0) {
    delete ctx;
    ctx = new mlir::MLIRContext();
    ctx->loadDialect<nn::NNDialect, mlir::func::FuncDialect>();
    ctx->printOpOnDiagnostic(false);
    if (quiet)
      ctx->getDiagEngine().registerHandler(
          [](mlir::Diagnostic &) { return mlir::success(); });
  }
  return *ctx;
}

} // namespace shardc::fuzz

#endif // SHARDC_TEST_FUZZ_FUZZCONTEXT_H
