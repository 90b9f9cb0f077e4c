//===- Importer.h - ONNX models into the nn dialect -------------*- C++ -*-===//
//
// Reads an ONNX model (protobuf, tensors inline or as external data, opsets
// 13 to 21) and builds the nn forward graph: a `forward(tokens, targets,
// params...) -> loss` function for training, or an `infer(inputs...,
// params...) -> outputs` function that runs the graph as it is.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTENDS_ONNX_IMPORTER_H
#define SHARDC_FRONTENDS_ONNX_IMPORTER_H

#include "target/TargetDescription.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace shardc::onnx_import {

struct ImportOptions {
  /// Sequences per micro-batch: replaces dim 0 of every graph input (0: keep
  /// the model's size, which must then be static).
  int64_t microBatch = 0;
  /// The size of a symbolic dim 1 of the inputs (0: it must be static).
  int64_t seqLen = 0;
  /// Build the training forward (with a loss) rather than the graph as is.
  bool training = true;
  /// "cross_entropy[:OUTPUT]": next-token cross-entropy on the logits output
  /// (default "logits" or the first output); "output:OUTPUT": a scalar
  /// output of the graph is the loss.
  std::string loss = "cross_entropy";
  /// Graph inputs fixed at compile time: name -> file holding a serialized
  /// onnx TensorProto.
  std::map<std::string, std::string> bindings;
  /// Initializers kept constant (not trained), besides the ones that are
  /// not finite, not floating point or scalars.
  std::vector<std::string> frozen;
  /// --train: a regex; only the floating-point initializers whose whole
  /// name it matches are trained (empty: the default rule).
  std::string trainRegex;
  /// The target the model is compiled for: which element types its kernels
  /// compute and index in (null: the default target).
  const TargetDescription *target = nullptr;
  /// --allow-external-data-outside: external data files may lie outside the
  /// model's folder (after symlinks); they must still be regular files.
  bool allowExternalDataOutside = false;
  /// Bytes of values evaluated at compile time (8 an element), in all.
  int64_t foldBudgetBytes = int64_t(1) << 30;
  /// A trained initializer that equals another's transpose bit for bit is
  /// computed from it, tied (false: each trained as the file has it).
  bool retieTransposes = true;
};

/// A trainable initializer: the initial value of a parameter.
struct InitialWeight {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<InitialWeight> weights;
  /// The model, serialized, with the trainable initializers' data removed:
  /// what the trainer's --export-onnx fills in again.
  std::string graphTemplate;
  /// A one-line description for the driver's summary.
  std::string summary;
  /// The names of the trained initializers, and the tied copies
  /// ("copy = transpose of parameter"), for the compile log.
  std::vector<std::string> trained, tied;
};

/// The op types the importer maps (its op registry's), sorted.
const std::vector<std::string> &supportedOps();

llvm::Expected<ImportedModel> importModel(mlir::MLIRContext &context,
                                          llvm::StringRef path,
                                          const ImportOptions &options);

/// Writes `weights` as an f32 safetensors file (the executable's initial
/// weights) with the runtime's writer (runtime/safetensors.h).
llvm::Error writeWeights(llvm::StringRef path,
                         const std::vector<InitialWeight> &weights);

} // namespace shardc::onnx_import

#endif // SHARDC_FRONTENDS_ONNX_IMPORTER_H
