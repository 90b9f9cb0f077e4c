//===- OpRegistry.h - the ONNX op types the importer maps -------*- C++ -*-===//
//
// Private to frontends/onnx. One entry per op type of the default domain:
// the opsets at which its handler is right, how many inputs and outputs a
// node of it may have, and the GraphImporter member that maps it. Each op
// group (ops/*.cpp) declares its table; GraphImporter::importNode looks a
// node up and checks it against its entry before calling the handler.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTENDS_ONNX_OPREGISTRY_H
#define SHARDC_FRONTENDS_ONNX_OPREGISTRY_H

#include "frontends/onnx/GraphImporter.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <limits>

namespace shardc::onnx_import {

/// An inclusive range [min, max].
struct Bounds {
  int64_t min, max;
  bool contains(int64_t v) const { return v >= min && v <= max; }
};

/// The max of a variadic input or output list. Every input of an op with
/// variadic inputs is required.
constexpr int64_t kVariadic = std::numeric_limits<int64_t>::max();

/// How the importer maps one op type.
struct OpInfo {
  llvm::StringRef opType;
  /// The model opsets (of the default domain) the handler knows the op's
  /// versions at: from the op's first version in kMinOpset..kMaxOpset.
  Bounds opsets;
  /// Input counts. The first `inputs.min` inputs are required: a node may
  /// not leave them out with an empty name.
  Bounds inputs;
  Bounds outputs;
  llvm::Error (GraphImporter::*handler)(const onnx::NodeProto &);
};

/// The entry of `opType`, or null when the importer does not map it.
const OpInfo *lookupOp(llvm::StringRef opType);

// The op groups' tables.
llvm::ArrayRef<OpInfo> elementwiseOps();
llvm::ArrayRef<OpInfo> linearOps();
llvm::ArrayRef<OpInfo> normalizationOps();
llvm::ArrayRef<OpInfo> shapeOps();
llvm::ArrayRef<OpInfo> foldedOps();

} // namespace shardc::onnx_import

#endif // SHARDC_FRONTENDS_ONNX_OPREGISTRY_H
