//===- OpRegistry.cpp - the ONNX op types the importer maps ---------------===//
//
// The op groups' tables, gathered once and sorted by op type: lookups, and
// the list `shardc --supported-ops` prints and errors name.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OpRegistry.h"

#include "llvm/ADT/STLExtras.h"

#include <cassert>

using namespace shardc::onnx_import;

namespace {

const std::vector<OpInfo> &registry() {
  static const std::vector<OpInfo> ops = [] {
    std::vector<OpInfo> all;
    for (llvm::ArrayRef<OpInfo> group :
         {elementwiseOps(), linearOps(), normalizationOps(), shapeOps(),
          foldedOps()})
      all.insert(all.end(), group.begin(), group.end());
    llvm::sort(all, [](const OpInfo &a, const OpInfo &b) {
      return a.opType < b.opType;
    });
    for (size_t k = 0; k < all.size(); ++k) {
      const OpInfo &op = all[k];
      (void)op;
      assert((k == 0 || all[k - 1].opType != op.opType) &&
             "an op type is registered twice");
      assert(op.opsets.min >= kMinOpset && op.opsets.max <= kMaxOpset &&
             op.opsets.min <= op.opsets.max && "opsets outside the model's");
      assert(op.inputs.min <= op.inputs.max && op.outputs.min >= 1 &&
             op.outputs.min <= op.outputs.max && op.handler &&
             "malformed op entry");
    }
    return all;
  }();
  return ops;
}

} // namespace

const OpInfo *shardc::onnx_import::lookupOp(llvm::StringRef opType) {
  const std::vector<OpInfo> &ops = registry();
  auto it = llvm::partition_point(
      ops, [&](const OpInfo &op) { return op.opType < opType; });
  return it != ops.end() && it->opType == opType ? &*it : nullptr;
}

const std::vector<std::string> &shardc::onnx_import::supportedOps() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const OpInfo &op : registry())
      all.push_back(op.opType.str());
    return all;
  }();
  return names;
}
