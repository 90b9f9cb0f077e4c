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
#include "FuzzContext.h"
#include "FuzzInput.h"
#include "frontends/onnx/Importer.h"

using namespace shardc;

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
  auto imported = onnx_import::importModel(fuzz::fuzzContext(/*quiet=*/true),
                                           path, options);
  if (!imported)
    llvm::consumeError(imported.takeError());
  return 0;
}
