//===- onnx.cpp - fuzz target: ONNX models ---------------------------------===//
//
// Bytes -> model.onnx (and data.bin, its external data) -> importModel, the
// ONNX importer up to the verified nn module (frontends/onnx/Importer.cpp),
// training (the loss added) or, by the mode byte, inference.
//
// The input (FuzzInput.h): part 0 is model.onnx, part 1 (if any) data.bin
// beside it. mode & 1: --infer; (mode >> 1) % 4 + 1: the micro-batch;
// (mode >> 3) % 16 + 1: the sequence length. The compile-time evaluation
// budget is 256 MiB (the tools' default is 1 GiB), so that an input that
// folds a large constant costs a fraction of a second.
//
// A refused model is an llvm::Error naming the file and node: expected. A
// crash, a sanitizer report or more memory than libFuzzer's -rss_limit_mb
// is a finding.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "dialects/nn/NNDialect.h"
#include "frontends/onnx/Importer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

using namespace shardc;

namespace {

/// The context, made anew every 1000 inputs: it interns every type and
/// attribute an input makes, so one context for a whole campaign grows
/// without bound (1 GB after 700,000 inputs) and would end it at
/// -rss_limit_mb, a finding of the harness's, not the importer's.
mlir::MLIRContext &context() {
  static mlir::MLIRContext *ctx = nullptr;
  static int uses = 0;
  if (!ctx || ++uses % 1000 == 0) {
    delete ctx;
    auto *c = new mlir::MLIRContext();
    c->loadDialect<nn::NNDialect, mlir::func::FuncDialect>();
    c->printOpOnDiagnostic(false);
    // Diagnostics are expected on bad models: kept off the fuzzer's output.
    c->getDiagEngine().registerHandler([](mlir::Diagnostic &) {
      return mlir::success();
    });
    ctx = c;
  }
  return *ctx;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz::FuzzInput in = fuzz::splitInput(data, size);
  std::string path = fuzz::writePart("model.onnx", in.parts[0]);
  if (in.parts.size() > 1)
    fuzz::writePart("data.bin", in.parts[1]);
  else
    fuzz::removePart("data.bin");
  onnx_import::ImportOptions options;
  options.training = (in.mode & 1) == 0;
  options.microBatch = (in.mode >> 1) % 4 + 1;
  options.seqLen = (in.mode >> 3) % 16 + 1;
  options.foldBudgetBytes = int64_t(256) << 20;
  auto imported = onnx_import::importModel(context(), path, options);
  if (!imported)
    llvm::consumeError(imported.takeError());
  return 0;
}
