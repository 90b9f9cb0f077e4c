//===- FuseAttention.cpp - attention from its batched matmuls -------------===//
//
// softmax(q k^T * scale + mask) v, multi-head or grouped-query, causal by
// a -inf or a large finite negative mask (or unmasked), written as batched
// matmuls, a softmax and the reshapes and transposes exporters put
// between them, becomes nn.attention.
//
//===----------------------------------------------------------------------===//
#include "passes/nn/FusePatterns.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/APFloat.h"

#include <cmath>

using namespace mlir;
using namespace shardc;
using namespace shardc::nn_fusion;

namespace {

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

} // namespace

void shardc::nn_fusion::populateAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseAttention>(patterns.getContext());
}
