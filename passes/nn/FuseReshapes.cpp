//===- FuseReshapes.cpp - the token reshapes exporters write around rows --===//
//
// GPT-2's Conv1D (x.view(-1, C) @ W + b, then .view(B, T, N)) exports as a
// reshape that merges the batch and sequence into one dim before each layer
// norm and projection, and one that splits it after. The ops between read
// each token's row alone, so they run as well on [B, T, C]: the merging
// reshape moves after them, and the chains of reshapes it leaves fold away.
// What remains has the tokens where the other families and tp-partition
// look for them (dim 1 the sequence).
//
//   op(reshape [B, T, C] -> [B*T, C]) -> op on [B, T, C], reshaped after
//     ([B, T, H, D] -> [B*T, H*D], attention's heads merged too: the op on
//     a [B, T, H*D] reshape of it)
//     (op: layer norm, RMS norm, linear, a unary element-wise op, or a
//     binary one whose other operand is a per-channel vector or merged
//     from the same shape)
//   reshape(reshape(x)) -> reshape(x);  reshape(x) to x's type -> x (x
//     computed)
//
//===----------------------------------------------------------------------===//
#include "passes/nn/FusePatterns.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::nn_fusion;

namespace {

/// The rows `v` merges: when `v` is reshape(x) of x [d0, d1, ..., dn]
/// (n >= 2) to [d0 * ... * dk, the rest's product] for some k >= 1 (the
/// batch and sequence merged; an attention's heads and head dims merged
/// too), the leading dims [d0, ..., dk]; x is set.
std::optional<SmallVector<int64_t>> mergedRows(Value v, Value &x) {
  auto r = v.getDefiningOp<nn::ReshapeOp>();
  if (!r)
    return std::nullopt;
  ArrayRef<int64_t> in = typeOf(r.getInput()).getShape();
  ArrayRef<int64_t> out = typeOf(r).getShape();
  if (in.size() < 3 || out.size() != 2)
    return std::nullopt;
  int64_t rows = in[0];
  for (size_t k = 1; k + 1 < in.size(); ++k) {
    rows *= in[k];
    if (rows == out[0]) {
      x = r.getInput();
      return SmallVector<int64_t>(in.take_front(k + 1));
    }
    if (rows > out[0])
      break;
  }
  return std::nullopt;
}

/// `v`'s merged rows as [leading dims..., features]: x itself, or a
/// reshape of it.
Value unmerged(PatternRewriter &rewriter, Location loc, Value v,
               ArrayRef<int64_t> lead) {
  Value x;
  (void)mergedRows(v, x);
  SmallVector<int64_t> shape(lead);
  shape.push_back(typeOf(v).getShape().back());
  if (typeOf(x).getShape() == ArrayRef<int64_t>(shape))
    return x;
  return nn::ReshapeOp::create(
      rewriter, loc, RankedTensorType::get(shape, typeOf(x).getElementType()), x);
}

/// Ops that compute each row (token) from that row alone: norms over the
/// last dim, projections, element-wise ops (binary ones checked apart).
bool isRowWise(Operation *op) {
  return isa<nn::LinearOp, nn::LayerNormOp, nn::RMSNormOp, nn::AddOp,
             nn::MulOp, nn::SubOp, nn::DivOp, nn::GeluOp, nn::SiluOp,
             nn::ReluOp, nn::LeakyReluOp, nn::TanhOp, nn::SigmoidOp,
             nn::ErfOp, nn::NegOp, nn::ExpOp, nn::SqrtOp, nn::ReciprocalOp,
             nn::LogOp, nn::SoftplusOp, nn::CastOp>(op);
}

/// A row-wise op reading a merged tensor: moved before the merge.
struct LiftTokenMerge : RewritePattern {
  LiftTokenMerge(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (op->getNumResults() != 1 || op->getNumOperands() == 0)
      return failure();
    auto result = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!result || result.getRank() != 2)
      return failure();
    Value x;
    auto lead = mergedRows(op->getOperand(0), x);
    if (!lead || !isRowWise(op))
      return failure();
    Location loc = op->getLoc();
    SmallVector<Value> operands(op->getOperands());
    if (isa<nn::AddOp, nn::MulOp, nn::SubOp, nn::DivOp>(op)) {
      Value other = op->getOperand(1), otherX;
      auto otherLead = mergedRows(other, otherX);
      if (otherLead && *otherLead == *lead)
        operands[1] = unmerged(rewriter, loc, other, *lead);
      else if (typeOf(other).getRank() > 1 ||
               !isChannelVector(other, typeOf(op->getOperand(0))))
        return failure();
    }
    operands[0] = unmerged(rewriter, loc, op->getOperand(0), *lead);
    SmallVector<int64_t> shape(*lead);
    shape.push_back(result.getShape().back());
    Type lifted = RankedTensorType::get(shape, result.getElementType());
    OperationState state(loc, op->getName(), operands, {lifted},
                         op->getAttrs());
    Operation *moved = rewriter.create(state);
    rewriter.replaceOpWithNewOp<nn::ReshapeOp>(op, result, moved->getResult(0));
    return success();
  }
};

/// reshape(reshape(x)) -> reshape(x), and a reshape to x's own type -> x.
struct FoldReshapeChain : OpRewritePattern<nn::ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(nn::ReshapeOp r,
                                PatternRewriter &rewriter) const override {
    // (Not of an argument: a graph that returns its input, an Identity
    // model, keeps the reshape that copies it.)
    if (r.getInput().getType() == r.getType() &&
        !isa<BlockArgument>(r.getInput())) {
      rewriter.replaceOp(r, r.getInput());
      return success();
    }
    auto inner = r.getInput().getDefiningOp<nn::ReshapeOp>();
    if (!inner)
      return failure();
    rewriter.replaceOpWithNewOp<nn::ReshapeOp>(r, r.getType(), inner.getInput());
    return success();
  }
};

} // namespace

void shardc::nn_fusion::populateReshapePatterns(RewritePatternSet &patterns) {
  patterns.add<LiftTokenMerge, FoldReshapeChain>(patterns.getContext());
}
