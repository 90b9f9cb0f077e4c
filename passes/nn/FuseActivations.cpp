//===- FuseActivations.cpp - GELU and SiLU from their formulas ------------===//
//
// GELU (erf and tanh forms, in any association and order) and SiLU
// (x * sigmoid(x)) written out as elementwise chains become nn.gelu and
// nn.silu.
//
//===----------------------------------------------------------------------===//
#include "passes/nn/FusePatterns.h"

#include <cmath>

using namespace mlir;
using namespace shardc;
using namespace shardc::nn_fusion;

namespace {

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

} // namespace

void shardc::nn_fusion::populateActivationPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseGelu, FuseSilu>(patterns.getContext());
}
