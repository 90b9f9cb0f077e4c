//===- NNTrainOps.cpp - verifiers of the gradient and optimizer ops -------===//
#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNVerify.h"

using namespace mlir;
using namespace shardc::nn;
using namespace shardc::nn::detail;

LogicalResult FillOp::verify() { return verifyStaticShapes(*this); }

LogicalResult MatmulOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(verifySameFloatType(*this, {getLhs(), getRhs(), getResult()},
                                 {"lhs", "rhs", "result"})))
    return failure();
  RankedTensorType a = tensorType(getLhs()), b = tensorType(getRhs());
  if (a.getRank() != 2 || b.getRank() != 2)
    return emitOpError("expects 2-D operands, got ") << a << " and " << b;
  int64_t m = a.getDimSize(getTransposeA() ? 1 : 0);
  int64_t k = a.getDimSize(getTransposeA() ? 0 : 1);
  int64_t kb = b.getDimSize(getTransposeB() ? 1 : 0);
  int64_t n = b.getDimSize(getTransposeB() ? 0 : 1);
  if (k != kb)
    return emitOpError("contraction sizes differ: ") << k << " and " << kb;
  if (failed(verifyFloat8(*this, getFloat8Attr(), getFloat8GradAttr(),
                          {"lhs", "rhs"})))
    return failure();
  return expectShape(*this, "result", tensorType(getResult()), {m, n});
}

LogicalResult SumToOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(verifySameFloatType(*this, {getInput(), getResult()},
                                 {"input", "result"})))
    return failure();
  return verifyBroadcastsTo(*this, getResult(), "result", getInput(), "input");
}

LogicalResult EmbeddingGradOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(verifySameFloatType(*this, {getGrad(), getResult()},
                                 {"grad", "result"})))
    return failure();
  RankedTensorType table = tensorType(getResult());
  if (table.getRank() != 2)
    return emitOpError("expects a result of rank 2 [vocab, hidden]");
  SmallVector<int64_t> shape(tensorType(getIds()).getShape());
  shape.push_back(table.getDimSize(1));
  return expectShape(*this, "grad", tensorType(getGrad()), shape);
}

static LogicalResult verifyNormGrad(Operation *op, Value x, Value w, Value dy) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  SmallVector<Value> values = {x, w, dy};
  SmallVector<StringRef> names = {"input", "weight", "grad"};
  for (Value r : op->getResults()) {
    values.push_back(r);
    names.push_back("result");
  }
  if (failed(verifySameFloatType(op, values, names)))
    return failure();
  RankedTensorType xt = tensorType(x);
  if (xt.getRank() < 1)
    return op->emitOpError("expects an input of rank >= 1");
  int64_t c = xt.getShape().back();
  if (failed(expectShape(op, "weight", tensorType(w), {c})) ||
      failed(expectShape(op, "grad", tensorType(dy), xt.getShape())) ||
      failed(expectShape(op, "input gradient", tensorType(op->getResult(0)),
                         xt.getShape())))
    return failure();
  for (Value r : op->getResults().drop_front())
    if (failed(expectShape(op, "parameter gradient", tensorType(r), {c})))
      return failure();
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNormGrad(*this, getInput(), getWeight(), getGrad());
}

LogicalResult RMSNormGradOp::verify() {
  return verifyNormGrad(*this, getInput(), getWeight(), getGrad());
}

LogicalResult GeluGradOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << getApproximate() << "\"";
  return verifyStaticShapes(*this);
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  auto [q, k, v, dy] = std::make_tuple(tensorType(getQuery()), tensorType(getKey()),
                                       tensorType(getValue()), tensorType(getGrad()));
  if (q.getRank() != 4 || k.getRank() != 4 || k != v)
    return emitOpError("expects query [B, H, T, D] and key/value [B, G, S, D]");
  if (k.getDimSize(1) == 0 || q.getDimSize(1) % k.getDimSize(1) != 0)
    return emitOpError("number of query heads ")
           << q.getDimSize(1) << " is not a multiple of the number of "
           << "key/value heads " << k.getDimSize(1);
  if (failed(expectShape(*this, "grad", dy, q.getShape())) ||
      failed(expectShape(*this, "query gradient", tensorType(getQueryGrad()),
                         q.getShape())) ||
      failed(expectShape(*this, "key gradient", tensorType(getKeyGrad()),
                         k.getShape())) ||
      failed(expectShape(*this, "value gradient", tensorType(getValueGrad()),
                         k.getShape())))
    return failure();
  return success();
}

LogicalResult SliceGradOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  RankedTensorType dy = tensorType(getGrad()), out = tensorType(getResult());
  int64_t dim = getDim(), start = getStart();
  if (dy.getRank() != out.getRank() || dim < 0 || dim >= out.getRank())
    return emitOpError("dim ") << dim << " is out of range";
  for (int64_t i = 0; i < out.getRank(); ++i)
    if (i != dim && dy.getDimSize(i) != out.getDimSize(i))
      return emitOpError("result dimension ") << i << " must equal the grad's";
  if (start < 0 || start + dy.getDimSize(dim) > out.getDimSize(dim))
    return emitOpError("slice is out of bounds of the result");
  return success();
}

/// logits [..., V], targets [...], and a gradient of the logits' shape.
static LogicalResult verifyCrossEntropyGrad(Operation *op, Value logitsValue,
                                            Value targets, Value grad) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  RankedTensorType logits = tensorType(logitsValue);
  if (logits.getRank() < 1)
    return op->emitOpError("expects logits of rank >= 1 [..., vocab]");
  if (failed(expectShape(op, "targets", tensorType(targets),
                         logits.getShape().drop_back())))
    return failure();
  return expectShape(op, "logits gradient", tensorType(grad), logits.getShape());
}

LogicalResult CrossEntropyGradOp::verify() {
  return verifyCrossEntropyGrad(*this, getLogits(), getTargets(), getResult());
}

LogicalResult CrossEntropyWithGradOp::verify() {
  return verifyCrossEntropyGrad(*this, getLogits(), getTargets(),
                                getLogitsGrad());
}

LogicalResult VocabPartOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (getRows() < 1)
    return emitOpError("expects rows >= 1, got ") << getRows();
  if (failed(expectShape(*this, "tp_index", tensorType(getTpIndex()), {1})) ||
      failed(expectShape(*this, "local", tensorType(getLocal()),
                         tensorType(getIds()).getShape())))
    return failure();
  SmallVector<int64_t> mask(tensorType(getIds()).getShape());
  mask.push_back(1);
  return expectShape(*this, "mask", tensorType(getMask()), mask);
}

/// logits [d0..dn, V], targets [d0..dn], tp_index [1], and (where given)
/// stats [tp d0, d1..dn, 2] of tp >= 1 ranks.
static LogicalResult verifyVocabLoss(Operation *op, Value logitsValue,
                                     Value targets, Value tpIndex,
                                     Value stats) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  RankedTensorType logits = tensorType(logitsValue);
  if (logits.getRank() < 2)
    return op->emitOpError("expects logits of rank >= 2 [..., tokens, vocab]");
  ArrayRef<int64_t> rows = logits.getShape().drop_back();
  if (failed(expectShape(op, "targets", tensorType(targets), rows)) ||
      failed(expectShape(op, "tp_index", tensorType(tpIndex), {1})))
    return failure();
  if (!stats)
    return success();
  ArrayRef<int64_t> s = tensorType(stats).getShape();
  if (s.size() != rows.size() + 1 || rows[0] == 0 || s[0] % rows[0] ||
      s.drop_front().drop_back() != rows.drop_front() || s.back() != 2)
    return op->emitOpError("expects stats of every tp rank [tp * ")
           << rows[0] << ", ..., 2], got " << tensorType(stats);
  int64_t tp = s[0] / rows[0];
  if (rows.back() % tp)
    return op->emitOpError("the sequence of ")
           << rows.back() << " tokens does not split over " << tp
           << " tp ranks";
  return success();
}

LogicalResult VocabStatsOp::verify() {
  if (failed(verifyVocabLoss(*this, getLogits(), getTargets(), getTpIndex(),
                             Value())))
    return failure();
  SmallVector<int64_t> shape(tensorType(getTargets()).getShape());
  shape.push_back(2);
  return expectShape(*this, "stats", tensorType(getStats()), shape);
}

LogicalResult VocabCrossEntropyOp::verify() {
  return verifyVocabLoss(*this, getLogits(), getTargets(), getTpIndex(),
                         getStats());
}

LogicalResult VocabCrossEntropyGradOp::verify() {
  if (failed(verifyVocabLoss(*this, getLogits(), getTargets(), getTpIndex(),
                             getStats())))
    return failure();
  return expectShape(*this, "result", tensorType(getResult()),
                     tensorType(getLogits()).getShape());
}
