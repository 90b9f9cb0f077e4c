//===- config.cpp - fuzz target: Hugging Face config.json ------------------===//
//
// Bytes -> config.json -> loadModelConfig, as `shardc CONFIG` resolves it
// (frontends/meta/ModelConfig.cpp), then buildForwardModule, the meta
// frontend's model build, at one sequence of 1 to 64 tokens, and the
// verifier over what it built.
//
// The input (FuzzInput.h): part 0 is the file; the mode byte picks the
// sequence length (1 + mode % 64). A refused config is an llvm::Error
// naming the file: expected. A crash, a sanitizer report, a module that
// does not verify or more memory than libFuzzer's -rss_limit_mb is a
// finding.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "dialects/nn/NNDialect.h"
#include "frontends/meta/ModelConfig.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdio>
#include <cstdlib>

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
    ctx = c;
  }
  return *ctx;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz::FuzzInput in = fuzz::splitInput(data, size);
  std::string path = fuzz::writePart("config.json", in.parts[0]);
  llvm::Expected<meta::ModelConfig> config = meta::loadModelConfig(path);
  if (!config) {
    llvm::consumeError(config.takeError());
    return 0;
  }
  int64_t seqLen = 1 + in.mode % 64;
  auto built = meta::buildForwardModule(context(), *config, 1, seqLen);
  if (!built) {
    llvm::consumeError(built.takeError());
    return 0;
  }
  if (mlir::failed(mlir::verify(**built))) {
    std::fprintf(stderr, "config: the built module does not verify\n");
    std::abort();
  }
  return 0;
}
