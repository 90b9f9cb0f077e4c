//===- FusePatterns.cpp - decomposed GELU, SiLU, norms, attention ---------===//
//
// Exporters write GELU (erf and tanh forms), SiLU, layer norm, RMS norm,
// rotary embedding with constant tables and attention (multi-head or grouped-query, causal by a -inf or a large finite
// negative mask) as chains of elementwise ops, reductions and batched
// matmuls. Each pattern here recognises a chain
// that computes exactly what a fused nn op computes (the same function of
// its inputs, constants equal to the fused op's up to the element type's
// rounding) and replaces it by that op, whose kernels and VJP read the
// activations once. A chain that differs in any way (another constant, an
// extra use of an intermediate that the fused op would not produce, a
// non-causal mask) is left as it is.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/nn/FusePatterns.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/APFloat.h"

namespace shardc {
#define GEN_PASS_DEF_NNFUSEPATTERNS
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace shardc::nn_fusion {

RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// The value of `v` when every element of it is the same compile-time
/// float (an nn.fill, or a splat nn.constant).
std::optional<double> splatValue(Value v) {
  if (auto fill = v.getDefiningOp<nn::FillOp>())
    return fill.getValue().convertToDouble();
  auto c = v.getDefiningOp<nn::ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

/// A compile-time scalar factor: a splat of rank 0 or of only unit
/// dimensions, so that multiplying by it never changes a shape.
std::optional<double> scalarValue(Value v) {
  if (llvm::any_of(typeOf(v).getShape(), [](int64_t d) { return d != 1; }))
    return std::nullopt;
  return splatValue(v);
}

/// Whether `c`, a constant of element type `elt`, is `exact` rounded to
/// that type (how an exporter writes sqrt(2) or 1/sqrt(2)).
bool isRounded(double c, double exact, Type elt) {
  auto ft = dyn_cast<FloatType>(elt);
  if (!ft)
    return false;
  bool lost;
  APFloat a(c), e(exact);
  a.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  e.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  return a.bitwiseIsEqual(e);
}

bool isScalar(Value v, double exact) {
  std::optional<double> c = scalarValue(v);
  return c && isRounded(*c, exact, typeOf(v).getElementType());
}

/// A per-channel vector for the last dimension C of `like`: `v` is [C] or
/// [1, ..., 1, C] and broadcasting it onto `like` keeps `like`'s shape.
bool isChannelVector(Value v, RankedTensorType like) {
  ArrayRef<int64_t> s = typeOf(v).getShape();
  if (s.empty() || s.back() != like.getShape().back() ||
      int64_t(s.size()) > like.getRank() ||
      typeOf(v).getElementType() != like.getElementType())
    return false;
  return llvm::all_of(s.drop_back(), [](int64_t d) { return d == 1; });
}

Value asChannelVector(PatternRewriter &rewriter, Location loc, Value v) {
  RankedTensorType t = typeOf(v);
  if (t.getRank() == 1)
    return v;
  auto flat = RankedTensorType::get({t.getShape().back()}, t.getElementType());
  return nn::ReshapeOp::create(rewriter, loc, flat, v);
}

} // namespace shardc::nn_fusion

namespace {

struct NNFusePatternsPass
    : public shardc::impl::NNFusePatternsBase<NNFusePatternsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    nn_fusion::populateReshapePatterns(patterns);
    nn_fusion::populateActivationPatterns(patterns);
    nn_fusion::populateNormPatterns(patterns);
    nn_fusion::populateRotaryPatterns(patterns);
    nn_fusion::populateAttentionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
