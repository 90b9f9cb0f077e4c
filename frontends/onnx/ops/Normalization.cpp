//===- Normalization.cpp - normalizations and reductions ------------------===//
//
// LayerNormalization (with its optional mean and inverse standard deviation
// outputs), Softmax, ReduceMean and ReduceSum.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/GraphImporter.h"
#include "frontends/onnx/OpRegistry.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace shardc;
using namespace shardc::onnx_import;
using llvm::Error;
using llvm::Expected;

Error GraphImporter::layerNorm(const onnx::NodeProto &n) {
  Expected<Value> xv = floatValue(n, 0);
  if (!xv)
    return xv.takeError();
  Expected<Value> sv = floatValue(n, 1);
  if (!sv)
    return sv.takeError();
  SmallVector<int64_t> xs(shapeOf(*xv));
  int64_t rank = xs.size(), axis = attrInt(n, "axis", -1);
  if (Error e = normalizeAxis(n, axis, rank))
    return e;
  double eps = attrFloat(n, "epsilon", 1e-5);
  if (!(eps >= 0) || !std::isfinite(eps))
    return nodeError(n, "epsilon must be a finite value >= 0, got " +
                            llvm::formatv("{0}", eps).str());
  int64_t outer = 1, c = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? outer : c) *= xs[d];
  // Normalizing over dims axis.. is normalizing the rows of [outer, C].
  auto asRow = [&](Value v, llvm::StringRef what) -> Expected<Value> {
    int64_t numel = cast<RankedTensorType>(v.getType()).getNumElements();
    if (numel != c)
      return nodeError(n, what + " has " + llvm::Twine(numel) +
                              " elements; the normalized shape has " + llvm::Twine(c));
    return reshape(v, {c});
  };
  Expected<Value> scale = asRow(*sv, "scale");
  if (!scale)
    return scale.takeError();
  Value bias;
  if (hasInput(n, 2)) {
    Expected<Value> bv = floatValue(n, 2);
    if (!bv)
      return bv.takeError();
    Expected<Value> row = asRow(*bv, "bias");
    if (!row)
      return row.takeError();
    bias = *row;
  }
  Value x2 = reshape(*xv, {outer, c});
  Value y = nn::LayerNormOp::create(b, loc, x2.getType(), x2, *scale, bias,
                                    llvm::APFloat(eps));
  setValue(n.output(0), reshape(y, xs));
  // Optional outputs: the mean and 1/sqrt(var + eps) over the normalized dims.
  bool wantStats = (n.output_size() > 1 && !n.output(1).empty()) ||
                   (n.output_size() > 2 && !n.output(2).empty());
  if (wantStats) {
    SmallVector<int64_t> statShape(xs);
    for (int64_t d = axis; d < rank; ++d)
      statShape[d] = 1;
    Value count = floatScalar(double(c));
    Value sum = nn::SumToOp::create(b, loc, type({outer, 1}), x2);
    Value mean = nn::DivOp::create(b, loc, type({outer, 1}), sum, count);
    Value centered = nn::SubOp::create(b, loc, x2.getType(), x2, mean);
    Value sq = nn::MulOp::create(b, loc, x2.getType(), centered, centered);
    Value var = nn::DivOp::create(
        b, loc, type({outer, 1}),
        nn::SumToOp::create(b, loc, type({outer, 1}), sq), count);
    Value std = nn::SqrtOp::create(
        b, loc, type({outer, 1}),
        nn::AddOp::create(b, loc, type({outer, 1}), var, floatScalar(eps)));
    Value inv = nn::ReciprocalOp::create(b, loc, type({outer, 1}), std);
    if (n.output_size() > 1 && !n.output(1).empty())
      setValue(n.output(1), reshape(mean, statShape));
    if (n.output_size() > 2 && !n.output(2).empty())
      setValue(n.output(2), reshape(inv, statShape));
  }
  return Error::success();
}

Error GraphImporter::softmax(const onnx::NodeProto &n) {
  int64_t axis = attrInt(n, "axis", -1);
  if (Error e = normalizeAxis(n, axis, shape_(n, 0).size()))
    return e;
  Expected<Value> x = floatValue(n, 0);
  if (!x)
    return x.takeError();
  setValue(n.output(0), nn::SoftmaxOp::create(b, loc, x->getType(), *x, axis));
  return Error::success();
}

Error GraphImporter::reduce(const onnx::NodeProto &n) {
  bool mean = n.op_type() == "ReduceMean";
  Expected<Value> xv = floatValue(n, 0);
  if (!xv)
    return xv.takeError();
  SmallVector<int64_t> xs(shapeOf(*xv));
  int64_t rank = xs.size();
  // Axes: an attribute before opset 18 (13 for ReduceSum), an input after.
  std::vector<int64_t> axes;
  bool axesAsInput = n.op_type() == "ReduceSum" ? opset >= 13 : opset >= 18;
  if (axesAsInput && hasInput(n, 1)) {
    Expected<std::vector<int64_t>> a = constInts(n, 1, "axes");
    if (!a)
      return a.takeError();
    axes = *a;
  } else if (auto a = attrInts(n, "axes")) {
    axes = *a;
  }
  if (axes.empty()) {
    if (attrInt(n, "noop_with_empty_axes", 0)) {
      setValue(n.output(0), *xv);
      return Error::success();
    }
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  SmallVector<int64_t> kept(xs), dropped;
  int64_t count = 1;
  for (int64_t a : axes) {
    if (Error e = normalizeAxis(n, a, rank))
      return e;
    count *= xs[a];
    kept[a] = 1;
  }
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(axes, d) && !llvm::is_contained(axes, d - rank))
      dropped.push_back(xs[d]);
  Value y = kept == xs ? *xv : Value(nn::SumToOp::create(b, loc, type(kept), *xv));
  if (mean)
    y = nn::DivOp::create(b, loc, y.getType(), y, floatScalar(double(count)));
  if (!attrInt(n, "keepdims", 1))
    y = reshape(y, dropped);
  setValue(n.output(0), y);
  return Error::success();
}

ArrayRef<OpInfo> shardc::onnx_import::normalizationOps() {
  // Op type, opsets, inputs, outputs, handler.
  // clang-format off
  static const OpInfo ops[] = {
      // An op of the default domain from opset 17.
      {"LayerNormalization", {17, 21}, {2, 3}, {1, 3},
       &GraphImporter::layerNorm},
      {"Softmax", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::softmax},
      {"ReduceMean", {13, 21}, {1, 2}, {1, 1}, &GraphImporter::reduce},
      {"ReduceSum", {13, 21}, {1, 2}, {1, 1}, &GraphImporter::reduce},
  };
  // clang-format on
  return ops;
}
