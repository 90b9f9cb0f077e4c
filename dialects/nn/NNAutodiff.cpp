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
  Value dx = LinearOp::create(b, loc, getInput().getType(), dy, getWeight(),
                              Value(), !getWeightInOut());
  Value x2 = flatten2D(b, loc, getInput()), dy2 = flatten2D(b, loc, dy);
  // dW = dy^T x ([N, K]) or x^T dy ([K, N]).
  Value dw = getWeightInOut()
                 ? MatmulOp::create(b, loc, getWeight().getType(), x2, dy2,
                                    /*transpose_a=*/true, false)
                 : MatmulOp::create(b, loc, getWeight().getType(), dy2, x2,
                                    /*transpose_a=*/true, false);
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

SmallVector<Value> CastOp::buildVJP(OpBuilder &b, ArrayRef<Value> grads) {
  Type elt = getGradType() ? *getGradType()
                           : tensorType(getInput()).getElementType();
  Value g = grads[0];
  if (tensorType(g).getElementType() == elt)
    return {g};
  return {CastOp::create(b, getLoc(), withShape(g, tensorType(g).getShape())
                                          .clone(elt),
                         g, TypeAttr())};
}
