//===- FuseRotary.cpp - the rotary embedding with constant tables ---------===//
//
// x * cos + rotate_half(x) * sin, with cos and sin constant tables whose
// two halves are equal (as cat(freqs, freqs) makes them), becomes
// nn.rotary_table over the half tables.
//
//===----------------------------------------------------------------------===//
#include "passes/nn/FusePatterns.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/bit.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::nn_fusion;

namespace {

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

} // namespace

void shardc::nn_fusion::populateRotaryPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseRotary>(patterns.getContext());
}
