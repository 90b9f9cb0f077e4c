//===- FuseNorms.cpp - layer norm and RMS norm from their formulas --------===//
//
// Layer norm ((x - mean) / sqrt(var + eps)) and RMS norm
// (x / sqrt(mean(x^2) + eps)) written out as reductions and elementwise
// ops become nn.layer_norm and nn.rms_norm; a following per-channel
// weight (and bias) is absorbed into the norm.
//
//===----------------------------------------------------------------------===//
#include "passes/nn/FusePatterns.h"

#include <type_traits>

using namespace mlir;
using namespace shardc;
using namespace shardc::nn_fusion;

namespace {

//===----------------------------------------------------------------------===//
// Layer norm: (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)
//===----------------------------------------------------------------------===//

/// `mean(x)` over the last dimension, kept as size 1: sum_to then a
/// division by the dimension's size. Returns x.
Value matchLastDimMean(Value m) {
  auto div = m.getDefiningOp<nn::DivOp>();
  if (!div || div.getType() != div.getLhs().getType())
    return {};
  auto sum = div.getLhs().getDefiningOp<nn::SumToOp>();
  if (!sum)
    return {};
  Value x = sum.getInput();
  ArrayRef<int64_t> xs = typeOf(x).getShape(), ms = typeOf(sum).getShape();
  if (xs.empty() || ms.size() != xs.size() ||
      ms.drop_back() != xs.drop_back() || ms.back() != 1 ||
      !isScalar(div.getRhs(), double(xs.back())))
    return {};
  return x;
}

/// `v + eps` for a compile-time scalar eps >= 0 (either side), the add
/// read once: returns v and sets eps.
Value matchPlusEps(Value sum, double &eps) {
  auto add = sum.getDefiningOp<nn::AddOp>();
  if (!add || !add->hasOneUse())
    return {};
  std::optional<double> c;
  Value v = otherOperand(add, [&](Value o) {
    c = scalarValue(o);
    return c.has_value();
  });
  if (!v || v.getType() != add.getType() || *c < 0)
    return {};
  eps = *c;
  return v;
}

/// Whether `sq` is `x^2`, as pow(x, 2) or x * x.
bool isSquareOf(Value sq, Value x) {
  if (auto pow = sq.getDefiningOp<nn::PowOp>())
    return pow.getLhs() == x && isScalar(pow.getRhs(), 2.0);
  if (auto mul = sq.getDefiningOp<nn::MulOp>())
    return mul.getLhs() == x && mul.getRhs() == x;
  return false;
}

/// A norm's weight before a following multiplication is absorbed: ones
/// over the last dimension of `xt`.
Value channelOnes(PatternRewriter &rewriter, Location loc,
                  RankedTensorType xt) {
  auto channel =
      RankedTensorType::get({xt.getShape().back()}, xt.getElementType());
  return nn::FillOp::create(rewriter, loc, channel,
                            rewriter.getF64FloatAttr(1.0));
}

struct FuseLayerNorm : OpRewritePattern<nn::DivOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::DivOp root,
                                PatternRewriter &rewriter) const override {
    // Numerator d = x - mean(x).
    auto d = root.getLhs().getDefiningOp<nn::SubOp>();
    if (!d || d.getType() != root.getType())
      return failure();
    Value x = d.getLhs();
    if (x.getType() != d.getType() || matchLastDimMean(d.getRhs()) != x)
      return failure();
    // Denominator sqrt(mean(d^2) + eps).
    auto sqrt = root.getRhs().getDefiningOp<nn::SqrtOp>();
    double eps = 0;
    Value var = sqrt && sqrt->hasOneUse() ? matchPlusEps(sqrt.getInput(), eps)
                                          : Value();
    Value sq = var ? matchLastDimMean(var) : Value();
    if (!sq || !isSquareOf(sq, d.getResult()))
      return failure();
    // The weight is ones until a following multiplication is absorbed.
    RankedTensorType xt = typeOf(x);
    rewriter.replaceOpWithNewOp<nn::LayerNormOp>(
        root, xt, x, channelOnes(rewriter, root.getLoc(), xt), Value(),
        rewriter.getF64FloatAttr(eps));
    return success();
  }
};

/// layer_norm(x, ones) * w -> layer_norm(x, w) (Op = MulOp) and
/// layer_norm(x, w) + b -> layer_norm(x, w, b) (Op = AddOp), for a
/// per-channel w or b.
template <typename Op>
struct AbsorbLayerNormAffine : OpRewritePattern<Op> {
  using OpRewritePattern<Op>::OpRewritePattern;
  static constexpr bool kWeight = std::is_same_v<Op, nn::MulOp>;

  LogicalResult matchAndRewrite(Op op,
                                PatternRewriter &rewriter) const override {
    for (int side = 0; side < 2; ++side) {
      auto ln = op->getOperand(side).template getDefiningOp<nn::LayerNormOp>();
      Value v = op->getOperand(1 - side);
      if (!ln || !ln->hasOneUse() || ln.getBias() ||
          (kWeight && splatValue(ln.getWeight()) != 1.0) ||
          op.getType() != ln.getType() || !isChannelVector(v, ln.getType()))
        continue;
      Value channel = asChannelVector(rewriter, op.getLoc(), v);
      rewriter.replaceOpWithNewOp<nn::LayerNormOp>(
          op, ln.getType(), ln.getInput(), kWeight ? channel : ln.getWeight(),
          kWeight ? Value() : channel, ln.getEpsAttr());
      return success();
    }
    return failure();
  }
};

//===----------------------------------------------------------------------===//
// RMS norm: x * (1 / sqrt(mean(x^2) + eps)), then * w
//===----------------------------------------------------------------------===//

/// `1 / sqrt(v)` as reciprocal(sqrt(v)) or 1 / sqrt(v): returns v.
Value matchRsqrt(Value r) {
  Operation *def = r.getDefiningOp();
  if (!def || !def->hasOneUse())
    return {};
  Value root;
  if (auto rec = dyn_cast<nn::ReciprocalOp>(def))
    root = rec.getInput();
  else if (auto div = dyn_cast<nn::DivOp>(def); div && isScalar(div.getLhs(), 1.0))
    root = div.getRhs();
  auto sqrt = root ? root.getDefiningOp<nn::SqrtOp>() : nullptr;
  if (!sqrt || !sqrt->hasOneUse() || sqrt.getType() != r.getType())
    return {};
  return sqrt.getInput();
}

struct FuseRMSNorm : OpRewritePattern<nn::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::MulOp root,
                                PatternRewriter &rewriter) const override {
    for (int side = 0; side < 2; ++side) {
      Value x = root->getOperand(1 - side);
      Value v = matchRsqrt(root->getOperand(side));
      double eps = 0;
      Value ms = v ? matchPlusEps(v, eps) : Value();
      if (!ms || x.getType() != root.getType())
        continue;
      // mean(x^2): the division, its sum and the square each read once.
      Value sq = matchLastDimMean(ms);
      auto mean = ms.getDefiningOp<nn::DivOp>();
      if (!sq || !sq.hasOneUse() || !mean->hasOneUse() ||
          !mean.getLhs().hasOneUse() || !isSquareOf(sq, x))
        continue;
      RankedTensorType xt = typeOf(x);
      rewriter.replaceOpWithNewOp<nn::RMSNormOp>(
          root, xt, x, channelOnes(rewriter, root.getLoc(), xt),
          rewriter.getF64FloatAttr(eps));
      return success();
    }
    return failure();
  }
};

/// rms_norm(x, ones) * w -> rms_norm(x, w), for a per-channel w.
struct AbsorbRMSNormWeight : OpRewritePattern<nn::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::MulOp op,
                                PatternRewriter &rewriter) const override {
    for (int side = 0; side < 2; ++side) {
      auto norm = op->getOperand(side).getDefiningOp<nn::RMSNormOp>();
      Value w = op->getOperand(1 - side);
      if (!norm || !norm->hasOneUse() || splatValue(norm.getWeight()) != 1.0 ||
          op.getType() != norm.getType() || !isChannelVector(w, norm.getType()))
        continue;
      rewriter.replaceOpWithNewOp<nn::RMSNormOp>(
          op, norm.getType(), norm.getInput(),
          asChannelVector(rewriter, op.getLoc(), w), norm.getEpsAttr());
      return success();
    }
    return failure();
  }
};

} // namespace

void shardc::nn_fusion::populateNormPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseLayerNorm, FuseRMSNorm,
               AbsorbLayerNormAffine<nn::MulOp>,
               AbsorbLayerNormAffine<nn::AddOp>, AbsorbRMSNormWeight>(patterns.getContext());
}
