//===- Weights.cpp - the imported model's initial weights -----------------===//
//
// The trainable initializers, written with the runtime's safetensors writer
// (runtime/safetensors.h), which reports failures as exceptions: this file
// alone is compiled with them and turns them into an llvm::Error.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Importer.h"
#include "runtime/formats/safetensors.h"

#include <exception>

llvm::Error
shardc::onnx_import::writeWeights(llvm::StringRef path,
                                  const std::vector<InitialWeight> &weights) {
  std::vector<runtime::NamedTensor> tensors;
  tensors.reserve(weights.size());
  for (const InitialWeight &w : weights)
    tensors.push_back({w.name, w.shape, w.data.data()});
  try {
    runtime::writeSafetensors(path.str(), tensors,
                              {{"format", "pt"}, {"producer", "shardc"}});
  } catch (const std::exception &e) {
    return llvm::createStringError("cannot write the initial weights: " +
                                   llvm::Twine(e.what()));
  }
  return llvm::Error::success();
}
