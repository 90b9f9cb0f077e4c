//===- NNAutodiff.cpp - vector-Jacobian products of the nn ops ------------===//
//
// Each forward op's DifferentiableOpInterface::buildVJP: the backward ops
// that turn the gradient of its result into gradients of its operands.
//
//===----------------------------------------------------------------------===//
#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNVerify.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace shardc::nn;
using shardc::nn::detail::tensorType;

namespace {

RankedTensorType withShape(Value like, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, tensorType(like).getElementType());
}

/// `grad` summed down to the shape of `operand` (identity when equal).
Value sumTo(OpBuilder &b, Location loc, Value grad, Value operand) {
  if (grad.getType() == operand.getType())
    return grad;
  return SumToOp::create(b, loc, operand.getType(), grad);
}

/// `v` viewed as a matrix [numel / last, last].
Value flatten2D(OpBuilder &b, Location loc, Value v) {
  RankedTensorType t = tensorType(v);
  int64_t last = t.getShape().back();
  if (t.getRank() == 2)
    return v;
  return ReshapeOp::create(b, loc, withShape(v, {t.getNumElements() / last, last}), v);
}

} // namespace

SmallVector<Value> EmbeddingOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  Value dTable = EmbeddingGradOp::create(b, getLoc(), getTable().getType(),
                                         getIds(), grads[0]);
  return {Value(), dTable};
}

SmallVector<Value> LinearOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  Location loc = getLoc();
  Value dy = grads[0];
  // dx = dy @ W for W [N, K] (read as [in, out]), dy @ W^T for W [K, N].
  // A float8 linear's two backward GEMMs are float8 too, dy their
  // gradient operand (e5m2 under tensorwise: dialects/nn/Float8.h).
  StringAttr f8 = getFloat8Attr();
  auto gradAt = [&](StringRef side) {
    return f8 ? b.getStringAttr(side) : StringAttr();
  };
  Value dx = LinearOp::create(b, loc, getInput().getType(), dy, getWeight(),
                              Value(), !getWeightInOut(), f8, gradAt("lhs"));
  Value x2 = flatten2D(b, loc, getInput()), dy2 = flatten2D(b, loc, dy);
  // dW = dy^T x ([N, K]) or x^T dy ([K, N]).
  Value dw = getWeightInOut()
                 ? MatmulOp::create(b, loc, getWeight().getType(), x2, dy2,
                                    /*transpose_a=*/true, false, f8,
                                    gradAt("rhs"))
                 : MatmulOp::create(b, loc, getWeight().getType(), dy2, x2,
                                    /*transpose_a=*/true, false, f8,
                                    gradAt("lhs"));
  Value db = getBias() ? sumTo(b, loc, dy, getBias()) : Value();
  if (getBias())
    return {dx, dw, db};
  return {dx, dw};
}

SmallVector<Value> AddOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {sumTo(b, getLoc(), grads[0], getLhs()),
          sumTo(b, getLoc(), grads[0], getRhs())};
}

SmallVector<Value> MulOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  Location loc = getLoc();
  Value dy = grads[0];
  Value dl = MulOp::create(b, loc, dy.getType(), dy, getRhs());
  Value dr = MulOp::create(b, loc, dy.getType(), dy, getLhs());
  return {sumTo(b, loc, dl, getLhs()), sumTo(b, loc, dr, getRhs())};
}

SmallVector<Value> GeluOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {GeluGradOp::create(b, getLoc(), getType(), getInput(), grads[0],
                             getApproximate())};
}

SmallVector<Value> SiluOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {SiluGradOp::create(b, getLoc(), getType(), getInput(), grads[0])};
}

SmallVector<Value> LayerNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  auto g = LayerNormGradOp::create(
      b, getLoc(), TypeRange{getType(), getWeight().getType(), getWeight().getType()},
      getInput(), getWeight(), grads[0], getEpsAttr());
  if (getBias())
    return {g.getInputGrad(), g.getWeightGrad(), g.getBiasGrad()};
  return {g.getInputGrad(), g.getWeightGrad()};
}

SmallVector<Value> RMSNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  auto g = RMSNormGradOp::create(b, getLoc(),
                                 TypeRange{getType(), getWeight().getType()},
                                 getInput(), getWeight(), grads[0], getEpsAttr());
  return {g.getInputGrad(), g.getWeightGrad()};
}

SmallVector<Value> SoftmaxOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {SoftmaxGradOp::create(b, getLoc(), getType(), getResult(), grads[0],
                                getAxis())};
}

SmallVector<Value> RotaryOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  // A rotation's transpose is the rotation by the opposite angles.
  return {RotaryOp::create(b, getLoc(), getType(), grads[0], getTheta(),
                           /*inverse=*/!getInverse())};
}

SmallVector<Value> LeakyReluOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {LeakyReluGradOp::create(b, getLoc(), getType(), getInput(), grads[0],
                                  getAlphaAttr())};
}

SmallVector<Value> RotaryTableOp::buildVJP(OpBuilder &b,
                                           ArrayRef<Value> grads) {
  Value dx = RotaryTableOp::create(b, getLoc(), getType(), grads[0], getCos(),
                                   getSin(), /*inverse=*/!getInverse());
  return {dx, Value(), Value()};
}

SmallVector<Value> AttentionOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  auto g = AttentionGradOp::create(
      b, getLoc(),
      TypeRange{getQuery().getType(), getKey().getType(), getValue().getType()},
      getQuery(), getKey(), getValue(), grads[0], getCausal(),
      llvm::APFloat(getScaleOrDefault()));
  return {g.getQueryGrad(), g.getKeyGrad(), g.getValueGrad()};
}

SmallVector<Value> ReshapeOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {ReshapeOp::create(b, getLoc(), getInput().getType(), grads[0])};
}

SmallVector<Value> TransposeOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  return {TransposeOp::create(b, getLoc(), getInput().getType(), grads[0],
                              b.getDenseI64ArrayAttr(inverse))};
}

SmallVector<Value> SliceOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {SliceGradOp::create(b, getLoc(), getInput().getType(), grads[0],
                              getDimAttr(), getStartAttr())};
}

SmallVector<Value> CrossEntropyOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  Value dLogits = CrossEntropyGradOp::create(
      b, getLoc(), getLogits().getType(), getLogits(), getTargets(), grads[0],
      getIgnoreIndexAttr());
  return {dLogits, Value()};
}

SmallVector<Value> VocabCrossEntropyOp::buildVJP(OpBuilder &b,
                                                ArrayRef<Value> grads) {
  // The statistics carry no gradient: the loss's reaches the logits here.
  Value dLogits = VocabCrossEntropyGradOp::create(
      b, getLoc(), getLogits().getType(), getLogits(), getTargets(),
      getStats(), getTpIndex(), grads[0], getIgnoreIndexAttr());
  return {dLogits, Value(), Value(), Value()};
}

SmallVector<Value> CastOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  // Nothing flows through a conversion from or to integers.
  if (!isa<FloatType>(tensorType(getInput()).getElementType()) ||
      !isa<FloatType>(tensorType(getResult()).getElementType()))
    return {Value()};
  Type elt = getGradType() ? *getGradType()
                           : tensorType(getInput()).getElementType();
  Value g = grads[0];
  if (tensorType(g).getElementType() == elt)
    return {g};
  return {CastOp::create(b, getLoc(), withShape(g, tensorType(g).getShape())
                                          .clone(elt),
                         g, TypeAttr())};
}

SmallVector<Value> SumToOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {BroadcastToOp::create(b, getLoc(), getInput().getType(), grads[0])};
}

SmallVector<Value> ConstantOp::buildVJP(OpBuilder &, ArrayRef<Value>) {
  return {};
}

SmallVector<Value> SubOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  Location loc = getLoc();
  Value dy = grads[0];
  Value neg = NegOp::create(b, loc, dy.getType(), dy);
  return {sumTo(b, loc, dy, getLhs()), sumTo(b, loc, neg, getRhs())};
}

SmallVector<Value> DivOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  // d(l/r)/dl = 1/r; d(l/r)/dr = -(l/r)/r.
  Location loc = getLoc();
  Value dy = grads[0];
  Type t = dy.getType();
  Value dl = DivOp::create(b, loc, t, dy, getRhs());
  Value dr = NegOp::create(
      b, loc, t, DivOp::create(b, loc, t, MulOp::create(b, loc, t, dy, getResult()),
                               getRhs()));
  return {sumTo(b, loc, dl, getLhs()), sumTo(b, loc, dr, getRhs())};
}

SmallVector<Value> PowOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  // d(l^r)/dl = r l^(r-1); d(l^r)/dr = l^r log(l).
  Location loc = getLoc();
  Value dy = grads[0];
  Type t = dy.getType();
  auto one = FillOp::create(b, loc, withShape(getRhs(), {}), b.getF64FloatAttr(1.0));
  Value rMinus1 = SubOp::create(b, loc, getRhs().getType(), getRhs(), one);
  Value p = PowOp::create(b, loc, t, getLhs(), rMinus1);
  Value dl = MulOp::create(b, loc, t, MulOp::create(b, loc, t, dy, getRhs()), p);
  Value logL = LogOp::create(b, loc, getLhs().getType(), getLhs());
  Value dr = MulOp::create(b, loc, t, MulOp::create(b, loc, t, dy, getResult()), logL);
  return {sumTo(b, loc, dl, getLhs()), sumTo(b, loc, dr, getRhs())};
}

#define SHARDC_MATH_VJP(Op, fn)                                                \
  SmallVector<Value> Op::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {       \
    return {UnaryGradOp::create(b, getLoc(), getType(), getInput(),            \
                                getResult(), grads[0], fn)};                   \
  }
SHARDC_MATH_VJP(SqrtOp, "sqrt")
SHARDC_MATH_VJP(ErfOp, "erf")
SHARDC_MATH_VJP(TanhOp, "tanh")
SHARDC_MATH_VJP(SigmoidOp, "sigmoid")
SHARDC_MATH_VJP(ReciprocalOp, "reciprocal")
SHARDC_MATH_VJP(ExpOp, "exp")
SHARDC_MATH_VJP(LogOp, "log")
SHARDC_MATH_VJP(ReluOp, "relu")
SHARDC_MATH_VJP(SoftplusOp, "softplus")
SHARDC_MATH_VJP(NanToZeroOp, "nan_to_zero")
SHARDC_MATH_VJP(RoundF16Op, "round_f16")
SHARDC_MATH_VJP(RoundBf16Op, "round_bf16")
#undef SHARDC_MATH_VJP

SmallVector<Value> NegOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {NegOp::create(b, getLoc(), getType(), grads[0])};
}

SmallVector<Value> WhereOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  Location loc = getLoc();
  Value dy = grads[0];
  auto zero = FillOp::create(b, loc, withShape(dy, {}), b.getF64FloatAttr(0.0));
  Value dl = WhereOp::create(b, loc, dy.getType(), getCondition(), dy, zero);
  Value dr = WhereOp::create(b, loc, dy.getType(), getCondition(), zero, dy);
  return {Value(), sumTo(b, loc, dl, getLhs()), sumTo(b, loc, dr, getRhs())};
}

SmallVector<Value> BroadcastToOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {sumTo(b, getLoc(), grads[0], getInput())};
}

SmallVector<Value> BatchMatmulOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  // C = A B: dA = dC B^T, dB = A^T dC, each in the operand's own layout,
  // then summed over the batch dimensions the operand was broadcast on.
  Location loc = getLoc();
  Value dc = grads[0], a = getLhs(), bm = getRhs();
  bool ta = getTransposeA(), tb = getTransposeB();
  auto product = [&](Value x, Value y, bool tx, bool ty, Value like) {
    ArrayRef<int64_t> cs = tensorType(dc).getShape();
    ArrayRef<int64_t> ls = tensorType(like).getShape();
    SmallVector<int64_t> shape(cs.drop_back(2));
    shape.push_back(ls[ls.size() - 2]);
    shape.push_back(ls[ls.size() - 1]);
    Value full = BatchMatmulOp::create(b, loc, withShape(like, shape), x, y, tx, ty);
    return sumTo(b, loc, full, like);
  };
  // A [M,K]: dA = dC B^T (B [K,N]) or dC B (B stored [N,K]).
  // A^T stored [K,M]: dA = B dC^T (B [K,N]) or B^T dC^T (B stored [N,K]).
  Value da = ta ? product(bm, dc, tb, true, a) : product(dc, bm, false, !tb, a);
  // B [K,N]: dB = A^T dC (A [M,K]) or A dC (A stored [K,M]).
  // B^T stored [N,K]: dB = dC^T A (A [M,K]) or dC^T A^T (A stored [K,M]).
  Value db = tb ? product(dc, a, true, ta, bm) : product(a, dc, !ta, false, bm);
  return {da, db};
}

SmallVector<Value> ConcatOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  SmallVector<Value> result;
  int64_t start = 0;
  for (Value in : getInputs()) {
    result.push_back(SliceOp::create(b, getLoc(), in.getType(), grads[0],
                                     getDimAttr(), b.getI64IntegerAttr(start)));
    start += tensorType(in).getDimSize(getDim());
  }
  return result;
}

SmallVector<Value> TriluOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  return {TriluOp::create(b, getLoc(), getType(), grads[0], getUpper(), getK())};
}
