//===- Folded.cpp - ONNX ops evaluated at compile time only ---------------===//
//
// Comparisons (Less, LessOrEqual, Greater, GreaterOrEqual), logic (Not,
// And, Or, Xor), trigonometry (Cos, Sin), Max, Min, ReduceMax, CumSum and
// GatherND.
// Exporters use them to build causal masks, rope tables and position ids
// from shapes and constants: every input is known once the shapes are
// static, and the importer evaluates them (HostTensor.cpp). On values
// computed at runtime they are an error naming the input.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/GraphImporter.h"
#include "frontends/onnx/OpRegistry.h"
#include "runtime/abi/abi.h"

using namespace shardc;
using namespace shardc::onnx_import;
using llvm::Error;

Error GraphImporter::folded(const onnx::NodeProto &n) {
  for (int k = 0; k < n.input_size(); ++k)
    if (!n.input(k).empty() && !isConst(n.input(k)))
      return nodeError(n, "input '" + n.input(k) +
                              "' is computed at runtime; shardc evaluates " +
                              n.op_type() +
                              " only when its inputs are known at compile "
                              "time (masks, tables, positions)");
  std::vector<const HostTensor *> inputs;
  for (int k = 0; k < n.input_size(); ++k)
    inputs.push_back(n.input(k).empty() ? nullptr : &constant(n.input(k)));
  FoldAttrs attrs;
  attrs.axisFromInput = n.op_type() == "CumSum";
  attrs.exclusive = attrInt(n, "exclusive", 0);
  attrs.reverse = attrInt(n, "reverse", 0);
  attrs.batchDims = attrInt(n, "batch_dims", 0);
  attrs.axes = attrInts(n, "axes");
  attrs.keepDims = attrInt(n, "keepdims", 1);
  attrs.noopWithEmptyAxes = attrInt(n, "noop_with_empty_axes", 0);
  // GatherND's result can outgrow the broadcast of its inputs (which
  // importNode reserved): reserve the rest, (indices / k) x a slice.
  if (n.op_type() == "GatherND" && inputs.size() == 2 && inputs[0] && inputs[1]) {
    const std::vector<int64_t> &ds = inputs[0]->shape, &is = inputs[1]->shape;
    int64_t r = ds.size(), q = is.size(), bd = attrs.batchDims;
    int64_t k = q ? is.back() : 0;
    if (q >= 1 && bd >= 0 && bd < std::min(r, q) && k >= 1 && k <= r - bd) {
      // Its result: [indices' outer dims..., the data's dims past bd + k].
      std::vector<int64_t> out(is.begin(), is.end() - 1);
      out.insert(out.end(), ds.begin() + bd + k, ds.end());
      if (Error e = reserveFold(n, shardc::abi::checkedSize(out, 1)))
        return e;
    }
  }
  std::string why;
  std::optional<HostTensor> r = evalFolded(n.op_type(), inputs, attrs, why);
  if (!r)
    return nodeError(n, why);
  setConst(n.output(0), *r);
  return Error::success();
}

llvm::ArrayRef<OpInfo> shardc::onnx_import::foldedOps() {
  // Op type, opsets, inputs, outputs, handler.
  // clang-format off
  static const OpInfo ops[] = {
      {"Less", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::folded},
      {"LessOrEqual", {16, 21}, {2, 2}, {1, 1}, &GraphImporter::folded},
      {"Greater", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::folded},
      {"GreaterOrEqual", {16, 21}, {2, 2}, {1, 1}, &GraphImporter::folded},
      {"Not", {1, 21}, {1, 1}, {1, 1}, &GraphImporter::folded},
      {"And", {7, 21}, {2, 2}, {1, 1}, &GraphImporter::folded},
      {"Or", {7, 21}, {2, 2}, {1, 1}, &GraphImporter::folded},
      {"Xor", {7, 21}, {2, 2}, {1, 1}, &GraphImporter::folded},
      {"Cos", {7, 21}, {1, 1}, {1, 1}, &GraphImporter::folded},
      {"Sin", {7, 21}, {1, 1}, {1, 1}, &GraphImporter::folded},
      {"Max", {13, 21}, {1, kVariadic}, {1, 1}, &GraphImporter::folded},
      {"Min", {13, 21}, {1, kVariadic}, {1, 1}, &GraphImporter::folded},
      {"CumSum", {14, 21}, {2, 2}, {1, 1}, &GraphImporter::folded},
      // Axes an attribute before opset 18, the optional second input after.
      {"ReduceMax", {13, 21}, {1, 2}, {1, 1}, &GraphImporter::folded},
      {"GatherND", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::folded},
  };
  // clang-format on
  return ops;
}
