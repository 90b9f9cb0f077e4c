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

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <optional>
#include <type_traits>

namespace shardc {
#define GEN_PASS_DEF_NNFUSEPATTERNS
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

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

/// The operand of the commutative binary op `op` other than the one
/// satisfying `pred`, or null when neither does.
template <typename Op, typename Pred>
Value otherOperand(Op op, Pred pred) {
  if (pred(op.getLhs()))
    return op.getRhs();
  if (pred(op.getRhs()))
    return op.getLhs();
  return {};
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

//===----------------------------------------------------------------------===//
// GELU: x * (1 + erf(x / sqrt(2))) * 0.5 or
// x * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) * 0.5, in any association
// and order
//===----------------------------------------------------------------------===//

/// `x^3` as pow(x, 3) or x * x * x: returns x.
Value matchCube(Value c) {
  Operation *def = c.getDefiningOp();
  if (!def || !def->hasOneUse())
    return {};
  if (auto pow = dyn_cast<nn::PowOp>(def))
    return isScalar(pow.getRhs(), 3.0) ? pow.getLhs() : Value();
  auto mul = dyn_cast<nn::MulOp>(def);
  if (!mul)
    return {};
  for (int side = 0; side < 2; ++side) {
    auto sq = mul->getOperand(side).getDefiningOp<nn::MulOp>();
    Value x = mul->getOperand(1 - side);
    if (sq && sq->hasOneUse() && sq.getLhs() == x && sq.getRhs() == x)
      return x;
  }
  return {};
}

/// `sqrt(2/pi) * (x + 0.044715 x^3)`, the tanh form's argument, with the
/// factor on either side of the sum or distributed over it: returns x.
Value matchTanhArgument(Value a) {
  auto mul = a.getDefiningOp<nn::MulOp>();
  if (!mul || !mul->hasOneUse())
    return {};
  Value sum = otherOperand(mul, [](Value v) {
    return isScalar(v, std::sqrt(2.0 / M_PI));
  });
  auto add = sum ? sum.getDefiningOp<nn::AddOp>() : nullptr;
  if (!add || !add->hasOneUse())
    return {};
  for (int side = 0; side < 2; ++side) {
    Value x = add->getOperand(side);
    auto scaled = add->getOperand(1 - side).getDefiningOp<nn::MulOp>();
    if (!scaled || !scaled->hasOneUse())
      continue;
    Value cube =
        otherOperand(scaled, [](Value v) { return isScalar(v, 0.044715); });
    if (cube && matchCube(cube) == x && x.getType() == mul.getType())
      return x;
  }
  return {};
}

/// `1 + erf(x / sqrt(2))` (or `erf(x * (1/sqrt(2)))`), GELU "none", or
/// `1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))`, GELU "tanh": returns x and
/// sets `form`.
Value matchGeluTerm(Value a, StringRef &form) {
  auto add = a.getDefiningOp<nn::AddOp>();
  if (!add || !add->hasOneUse())
    return {};
  Value fn = otherOperand(add, [](Value v) { return isScalar(v, 1.0); });
  Operation *def = fn ? fn.getDefiningOp() : nullptr;
  if (!def || !def->hasOneUse() || fn.getType() != add.getType())
    return {};
  if (auto tanh = dyn_cast<nn::TanhOp>(def)) {
    form = "tanh";
    return matchTanhArgument(tanh.getInput());
  }
  auto erf = dyn_cast<nn::ErfOp>(def);
  if (!erf)
    return {};
  form = "none";
  Operation *arg = erf.getInput().getDefiningOp();
  if (!arg || !arg->hasOneUse())
    return {};
  if (auto div = dyn_cast<nn::DivOp>(arg))
    return isScalar(div.getRhs(), M_SQRT2) ? div.getLhs() : Value();
  if (auto mul = dyn_cast<nn::MulOp>(arg))
    return otherOperand(mul, [](Value v) { return isScalar(v, M_SQRT1_2); });
  return {};
}

struct FuseGelu : OpRewritePattern<nn::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::MulOp root,
                                PatternRewriter &rewriter) const override {
    // The three factors: the root's operand that is not a product, and the
    // two operands of the product that is.
    for (int side = 0; side < 2; ++side) {
      auto inner = root->getOperand(side).getDefiningOp<nn::MulOp>();
      if (!inner || !inner->hasOneUse())
        continue;
      Value factors[3] = {root->getOperand(1 - side), inner.getLhs(),
                          inner.getRhs()};
      for (int h = 0; h < 3; ++h) {
        if (!isScalar(factors[h], 0.5))
          continue;
        for (int e = 0; e < 3; ++e) {
          if (e == h)
            continue;
          Value x = factors[3 - h - e];
          StringRef form;
          if (matchGeluTerm(factors[e], form) != x ||
              x.getType() != root.getType())
            continue;
          rewriter.replaceOpWithNewOp<nn::GeluOp>(root, x.getType(), x, form);
          return success();
        }
      }
    }
    return failure();
  }
};

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
// SiLU: x * sigmoid(x)
//===----------------------------------------------------------------------===//

struct FuseSilu : OpRewritePattern<nn::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::MulOp root,
                                PatternRewriter &rewriter) const override {
    for (int side = 0; side < 2; ++side) {
      auto sig = root->getOperand(side).getDefiningOp<nn::SigmoidOp>();
      Value x = root->getOperand(1 - side);
      if (!sig || !sig->hasOneUse() || sig.getInput() != x ||
          x.getType() != root.getType())
        continue;
      rewriter.replaceOpWithNewOp<nn::SiluOp>(root, x.getType(), x);
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

//===----------------------------------------------------------------------===//
// Rotary embedding: x * cos + rotate_half(x) * sin, with constant tables
//===----------------------------------------------------------------------===//

/// `rotate_half(x)` = concat(-x[..., D/2:], x[..., :D/2]) on the last
/// dimension: returns x.
Value matchRotateHalf(Value r) {
  auto cat = r.getDefiningOp<nn::ConcatOp>();
  RankedTensorType t = cat ? typeOf(cat) : RankedTensorType();
  if (!cat || cat->getNumOperands() != 2 || t.getRank() != 4 ||
      cat.getDim() != 3 || t.getDimSize(3) % 2 != 0)
    return {};
  int64_t half = t.getDimSize(3) / 2;
  auto neg = cat->getOperand(0).getDefiningOp<nn::NegOp>();
  auto hi = neg ? neg.getInput().getDefiningOp<nn::SliceOp>() : nullptr;
  auto lo = cat->getOperand(1).getDefiningOp<nn::SliceOp>();
  if (!hi || !lo || hi.getInput() != lo.getInput() || hi.getDim() != 3 ||
      lo.getDim() != 3 || hi.getStart() != half || lo.getStart() != 0 ||
      typeOf(hi).getDimSize(3) != half || typeOf(lo).getDimSize(3) != half ||
      hi.getInput().getType() != t)
    return {};
  return lo.getInput();
}

/// The [T, D/2] table of a constant [..., T, D] (leading dimensions 1)
/// whose two halves of D are equal bit for bit, as cat(freqs, freqs) makes
/// them; null otherwise.
std::optional<SmallVector<float>> halfTable(Value c, int64_t T, int64_t D) {
  auto cst = c.getDefiningOp<nn::ConstantOp>();
  auto dense = cst ? dyn_cast<DenseFPElementsAttr>(cst.getValue()) : nullptr;
  ArrayRef<int64_t> s = typeOf(c).getShape();
  if (!dense || !typeOf(c).getElementType().isF32() || s.size() < 2 ||
      s.take_back(2) != ArrayRef<int64_t>{T, D} ||
      llvm::any_of(s.drop_back(2), [](int64_t d) { return d != 1; }))
    return std::nullopt;
  SmallVector<float> all = llvm::to_vector(dense.getValues<float>());
  SmallVector<float> table;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < D / 2; ++k) {
      float a = all[t * D + k], b = all[t * D + k + D / 2];
      if (llvm::bit_cast<uint32_t>(a) != llvm::bit_cast<uint32_t>(b))
        return std::nullopt;
      table.push_back(a);
    }
  return table;
}

struct FuseRotary : OpRewritePattern<nn::AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::AddOp root,
                                PatternRewriter &rewriter) const override {
    RankedTensorType t = typeOf(root);
    if (t.getRank() != 4 || t.getDimSize(3) % 2 != 0 ||
        !t.getElementType().isF32())
      return failure();
    int64_t T = t.getDimSize(2), D = t.getDimSize(3);
    for (int side = 0; side < 2; ++side) {
      auto direct = root->getOperand(side).getDefiningOp<nn::MulOp>();
      auto rotated = root->getOperand(1 - side).getDefiningOp<nn::MulOp>();
      if (!direct || !rotated || !direct->hasOneUse() || !rotated->hasOneUse())
        continue;
      for (int ds = 0; ds < 2; ++ds) {
        Value x = direct->getOperand(ds), cosC = direct->getOperand(1 - ds);
        for (int rs = 0; rs < 2; ++rs) {
          Value sinC = rotated->getOperand(1 - rs);
          if (x.getType() != t || matchRotateHalf(rotated->getOperand(rs)) != x)
            continue;
          std::optional<SmallVector<float>> cosT = halfTable(cosC, T, D),
                                            sinT = halfTable(sinC, T, D);
          if (!cosT || !sinT)
            continue;
          auto tableType = RankedTensorType::get({T, D / 2}, t.getElementType());
          auto table = [&](ArrayRef<float> v) {
            return nn::ConstantOp::create(
                rewriter, root.getLoc(), tableType,
                DenseElementsAttr::get(tableType, v));
          };
          rewriter.replaceOpWithNewOp<nn::RotaryTableOp>(
              root, t, x, table(*cosT), table(*sinT), /*inverse=*/false);
          return success();
        }
      }
    }
    return failure();
  }
};

//===----------------------------------------------------------------------===//
// Attention: softmax(q k^T * scale + causal mask) v
//===----------------------------------------------------------------------===//

/// Peels multiplications and divisions by compile-time scalars off `v`,
/// folding them into `scale`. Only single-use ops are peeled when
/// `singleUse` (scores, whose chain disappears), any otherwise (q and k,
/// which other ops may still read).
Value peelScale(Value v, double &scale, bool singleUse) {
  while (Operation *def = v.getDefiningOp()) {
    if (singleUse && !def->hasOneUse())
      break;
    std::optional<double> c;
    Value rest;
    if (auto mul = dyn_cast<nn::MulOp>(def))
      rest = otherOperand(mul, [&](Value o) {
        c = scalarValue(o);
        return c.has_value();
      });
    else if (auto div = dyn_cast<nn::DivOp>(def))
      if ((c = scalarValue(div.getRhs())))
        rest = div.getLhs();
    if (!rest || rest.getType() != def->getResult(0).getType() || *c == 0 ||
        !std::isfinite(*c))
      break;
    scale = isa<nn::DivOp>(def) ? scale / *c : scale * *c;
    v = rest;
  }
  return v;
}

enum class MaskKind { None, Causal };

/// A masked score: -inf, or a finite value at most -1e30 (Hugging Face
/// fills with float32's lowest). Added to any score below 1e29 in
/// magnitude, a finite one still gives exp(s - max) = 0 exactly in the
/// softmax, since every causal row keeps its diagonal unmasked.
bool isMaskedScore(const APFloat &v) {
  return v.isNegative() &&
         (v.isInfinity() || (v.isFinite() && v.convertToDouble() <= -1e30));
}

/// Whether `values`, a constant of `shape` [..., T, S] in row-major order,
/// has `keep(onOrBelow, v)` for every element v, onOrBelow telling whether
/// v is on or below the diagonal of its [T, S] matrix.
template <typename Values, typename Keep>
bool holdsByDiagonal(ArrayRef<int64_t> shape, int64_t t, int64_t s,
                     Values values, Keep keep) {
  if (shape.size() < 2 || shape[shape.size() - 2] != t || shape.back() != s)
    return false;
  int64_t e = 0;
  for (const auto &v : values) {
    int64_t i = (e / s) % t, j = e % s;
    ++e;
    if (!keep(j <= i, v))
      return false;
  }
  return true;
}

/// An additive mask that is zero everywhere (no mask), or zero on and below
/// the diagonal of its last two dimensions [T, S] and masked above (causal;
/// see isMaskedScore).
std::optional<MaskKind> classifyMask(Value mask, int64_t t, int64_t s) {
  auto c = mask.getDefiningOp<nn::ConstantOp>();
  if (!c) {
    if (std::optional<double> v = splatValue(mask); v && *v == 0.0)
      return MaskKind::None;
    return std::nullopt;
  }
  auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!dense)
    return std::nullopt;
  if (llvm::all_of(dense.getValues<APFloat>(),
                   [](const APFloat &v) { return v.isZero(); }))
    return MaskKind::None;
  if (!holdsByDiagonal(typeOf(mask).getShape(), t, s, dense.getValues<APFloat>(),
                       [](bool below, const APFloat &v) {
                         return below ? v.isZero() : isMaskedScore(v);
                       }))
    return std::nullopt;
  return MaskKind::Causal;
}

/// Scores masked through a select, as masked_fill and torch.where write
/// them: where(causal, s, fill) or where(above, fill, s), the condition a
/// constant boolean [..., T, S] true on and below the diagonal (above it
/// for the second form) and `fill` a splat masked score (isMaskedScore).
/// It keeps s exactly where unmasked and gives the fill elsewhere, which the
/// softmax turns into 0 as an added mask does. Returns s, or null.
Value unmaskWhere(nn::WhereOp w, int64_t t, int64_t s, RankedTensorType st) {
  auto c = w.getCondition().getDefiningOp<nn::ConstantOp>();
  auto dense = c ? dyn_cast<DenseIntElementsAttr>(c.getValue()) : nullptr;
  if (!dense)
    return {};
  for (int side = 0; side < 2; ++side) {
    Value scores = side == 0 ? w.getLhs() : w.getRhs();
    Value fill = side == 0 ? w.getRhs() : w.getLhs();
    std::optional<double> f = splatValue(fill);
    if (scores.getType() != st || !f || !isMaskedScore(APFloat(*f)))
      continue;
    // The scores are kept on and below the diagonal (side 0), or above it.
    if (holdsByDiagonal(typeOf(w.getCondition()).getShape(), t, s,
                        dense.getValues<bool>(), [&](bool below, bool keep) {
                          return keep == (side == 0 ? below : !below);
                        }))
      return scores;
  }
  return {};
}

/// `k` laid out [..., S, D] from `kT` [..., D, S]: the source of a
/// transpose when it already is, else one transpose (composed with the
/// transpose that made kT, if any).
Value untranspose(PatternRewriter &rewriter, Location loc, Value kT) {
  RankedTensorType t = typeOf(kT);
  int64_t r = t.getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, r));
  Value src = kT;
  if (auto tr = kT.getDefiningOp<nn::TransposeOp>()) {
    perm.assign(tr.getPermutation().begin(), tr.getPermutation().end());
    src = tr.getInput();
  }
  std::swap(perm[r - 2], perm[r - 1]);
  SmallVector<int64_t> shape(t.getShape());
  std::swap(shape[r - 2], shape[r - 1]);
  if (llvm::equal(perm, llvm::seq<int64_t>(0, r)))
    return src;
  return nn::TransposeOp::create(
      rewriter, loc, RankedTensorType::get(shape, t.getElementType()), src,
      rewriter.getDenseI64ArrayAttr(perm));
}

/// `kT` [B, H, D, S] written as a transpose of the heads flattened:
/// reshape([B*H, D, S] <- transpose(0, 2, 1) <- reshape([B*H, S, D] <- k)),
/// as the dynamo exporter writes k^T. Returns k as [B, H, S, D] (a reshape
/// of the source), or null.
Value unflattenTranspose(PatternRewriter &rewriter, Location loc, Value kT) {
  RankedTensorType t = typeOf(kT);
  if (t.getRank() != 4)
    return {};
  auto outer = kT.getDefiningOp<nn::ReshapeOp>();
  auto tr = outer ? outer.getInput().getDefiningOp<nn::TransposeOp>() : nullptr;
  auto inner = tr ? tr.getInput().getDefiningOp<nn::ReshapeOp>() : nullptr;
  if (!inner || !llvm::equal(tr.getPermutation(), ArrayRef<int64_t>{0, 2, 1}))
    return {};
  int64_t b = t.getDimSize(0), h = t.getDimSize(1), d = t.getDimSize(2),
          s = t.getDimSize(3);
  if (typeOf(inner).getShape() != ArrayRef<int64_t>{b * h, s, d})
    return {};
  // The source must hold [..., S, D] rows in the same order.
  ArrayRef<int64_t> src = typeOf(inner.getInput()).getShape();
  if (src.size() < 2 || src.take_back(2) != ArrayRef<int64_t>{s, d})
    return {};
  auto heads = RankedTensorType::get({b, h, s, d}, t.getElementType());
  return nn::ReshapeOp::create(rewriter, loc, heads, inner.getInput());
}

/// Grouped-query attention as exporters write repeat_kv: `k` [B, H, S, D] =
/// reshape(broadcast_to([B, G, R, S, D] <- reshape([B, G, 1, S, D] <- k0)))
/// with H = G R. Returns k0 [B, G, S, D], or null.
Value ungroup(Value k) {
  auto flat = k.getDefiningOp<nn::ReshapeOp>();
  auto bc = flat ? flat.getInput().getDefiningOp<nn::BroadcastToOp>() : nullptr;
  auto unsq = bc ? bc.getInput().getDefiningOp<nn::ReshapeOp>() : nullptr;
  if (!unsq)
    return {};
  ArrayRef<int64_t> ks = typeOf(k).getShape(), bs = typeOf(bc).getShape(),
                    us = typeOf(unsq).getShape();
  Value k0 = unsq.getInput();
  ArrayRef<int64_t> k0s = typeOf(k0).getShape();
  if (ks.size() != 4 || bs.size() != 5 || us.size() != 5 || k0s.size() != 4)
    return {};
  int64_t g = bs[1], r = bs[2];
  bool ok = bs[0] == ks[0] && g * r == ks[1] && bs[3] == ks[2] &&
            bs[4] == ks[3] && us[0] == bs[0] && us[1] == g && us[2] == 1 &&
            us[3] == bs[3] && us[4] == bs[4] && k0s[0] == ks[0] &&
            k0s[1] == g && k0s[2] == ks[2] && k0s[3] == ks[3];
  return ok ? k0 : Value();
}

/// `v` as [B, H, T, D]: rank 4 as it is, rank 3 [N, T, D] as [N, 1, T, D].
Value asHeads(PatternRewriter &rewriter, Location loc, Value v) {
  RankedTensorType t = typeOf(v);
  if (t.getRank() == 4)
    return v;
  auto heads = RankedTensorType::get(
      {t.getDimSize(0), 1, t.getDimSize(1), t.getDimSize(2)},
      t.getElementType());
  return nn::ReshapeOp::create(rewriter, loc, heads, v);
}

struct FuseAttention : OpRewritePattern<nn::BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::BatchMatmulOp out,
                                PatternRewriter &rewriter) const override {
    if (out.getTransposeA() || out.getTransposeB())
      return failure();
    // The probabilities, through the dynamo exporter's NaN guard: a causal
    // or unmasked row of finite scores has no NaN, so it is the identity.
    Value probs = out.getLhs();
    if (auto guard = probs.getDefiningOp<nn::NanToZeroOp>();
        guard && guard->hasOneUse())
      probs = guard.getInput();
    auto softmax = probs.getDefiningOp<nn::SoftmaxOp>();
    RankedTensorType st = softmax ? typeOf(softmax) : RankedTensorType();
    if (!softmax || !softmax->hasOneUse() ||
        (softmax.getAxis() != -1 && softmax.getAxis() != st.getRank() - 1))
      return failure();
    int64_t r = st.getRank();
    if (r != 3 && r != 4)
      return failure();
    int64_t t = st.getDimSize(r - 2), s = st.getDimSize(r - 1);
    // Scores: [+ mask, or a causal select] over [scalings] over q k^T.
    Value scores = softmax.getInput();
    MaskKind mask = MaskKind::None;
    if (auto add = scores.getDefiningOp<nn::AddOp>();
        add && add->hasOneUse() && add.getType() == st) {
      for (int side = 0; side < 2; ++side) {
        Value m = add->getOperand(1 - side);
        if (add->getOperand(side).getType() != st)
          continue;
        if (std::optional<MaskKind> kind = classifyMask(m, t, s)) {
          mask = *kind;
          scores = add->getOperand(side);
          break;
        }
      }
      if (scores == softmax.getInput())
        return failure();
    } else if (auto w = scores.getDefiningOp<nn::WhereOp>();
               w && w->hasOneUse() && w.getType() == st) {
      Value unmasked = unmaskWhere(w, t, s, st);
      if (!unmasked)
        return failure();
      mask = MaskKind::Causal;
      scores = unmasked;
    }
    double scale = 1.0;
    scores = peelScale(scores, scale, /*singleUse=*/true);
    auto qk = scores.getDefiningOp<nn::BatchMatmulOp>();
    if (!qk || !qk->hasOneUse() || qk.getTransposeA() ||
        scores.getType() != st)
      return failure();
    Value q = peelScale(qk.getLhs(), scale, false);
    Value kRaw = peelScale(qk.getRhs(), scale, false);
    Value v = out.getRhs();
    // Equal batch dimensions (no broadcasting), one head size.
    RankedTensorType qt = typeOf(q), kt = typeOf(kRaw), vt = typeOf(v);
    if (qt.getRank() != r || kt.getRank() != r || vt.getRank() != r)
      return failure();
    int64_t d = qt.getDimSize(r - 1);
    SmallVector<int64_t> kShape(st.getShape().drop_back(2));
    kShape.append(qk.getTransposeB() ? SmallVector<int64_t>{s, d}
                                     : SmallVector<int64_t>{d, s});
    SmallVector<int64_t> qShape(st.getShape().drop_back()), vShape(kShape);
    qShape.push_back(d);
    vShape[r - 2] = s;
    vShape[r - 1] = d;
    if (qt.getShape() != ArrayRef(qShape) ||
        kt.getShape() != ArrayRef(kShape) ||
        vt.getShape() != ArrayRef(vShape) ||
        (mask == MaskKind::Causal && t != s))
      return failure();

    Location loc = out.getLoc();
    Value k;
    if (qk.getTransposeB())
      k = kRaw;
    else if (!(k = unflattenTranspose(rewriter, loc, kRaw)))
      k = untranspose(rewriter, loc, kRaw);
    // Grouped-query attention: the op reads the G key/value heads itself.
    if (r == 4) {
      Value k0 = ungroup(k), v0 = ungroup(v);
      if (k0 && v0 && k0.getType() == v0.getType()) {
        k = k0;
        v = v0;
      }
    }
    Value q4 = asHeads(rewriter, loc, q), k4 = asHeads(rewriter, loc, k),
          v4 = asHeads(rewriter, loc, v);
    auto attn = nn::AttentionOp::create(
        rewriter, loc, q4.getType(), q4, k4, v4,
        mask == MaskKind::Causal ? rewriter.getUnitAttr() : UnitAttr(),
        rewriter.getF64FloatAttr(scale));
    Value result = attn.getResult();
    if (r == 3)
      result = nn::ReshapeOp::create(rewriter, loc, out.getType(), result);
    rewriter.replaceOp(out, result);
    return success();
  }
};

struct NNFusePatternsPass
    : public shardc::impl::NNFusePatternsBase<NNFusePatternsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseGelu, FuseSilu, FuseLayerNorm, FuseRMSNorm,
                 AbsorbLayerNormAffine<nn::MulOp>, AbsorbLayerNormAffine<nn::AddOp>,
                 AbsorbRMSNormWeight, FuseRotary, FuseAttention>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
