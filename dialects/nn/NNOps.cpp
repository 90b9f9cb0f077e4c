//===- NNOps.cpp - nn dialect op verifiers --------------------------------===//
//
// Diagnostics name the operand and the dimension at fault, so that a frontend
// bug or a malformed model reads as a sentence about the model.
//
//===----------------------------------------------------------------------===//
#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNVerify.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace shardc::nn;

using namespace shardc::nn::detail;

LogicalResult EmbeddingOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  RankedTensorType table = tensorType(getTable());
  if (table.getRank() != 2)
    return emitOpError("expects a table of rank 2 [vocab, hidden], got ")
           << table;
  if (failed(verifySameFloatType(*this, {getTable(), getResult()},
                                 {"table", "result"})))
    return failure();
  SmallVector<int64_t> shape(tensorType(getIds()).getShape());
  shape.push_back(table.getDimSize(1));
  return expectShape(*this, "result", tensorType(getResult()), shape);
}

LogicalResult LinearOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  SmallVector<Value> values = {getInput(), getWeight(), getResult()};
  SmallVector<StringRef> names = {"input", "weight", "result"};
  if (getBias()) {
    values.push_back(getBias());
    names.push_back("bias");
  }
  if (failed(verifySameFloatType(*this, values, names)))
    return failure();
  RankedTensorType x = tensorType(getInput()), w = tensorType(getWeight());
  if (x.getRank() < 1)
    return emitOpError("expects an input of rank >= 1");
  if (w.getRank() != 2)
    return emitOpError("expects a weight of rank 2, got ") << w;
  int64_t k = x.getShape().back();
  int64_t wk = w.getDimSize(getWeightInOut() ? 0 : 1);
  int64_t n = w.getDimSize(getWeightInOut() ? 1 : 0);
  if (wk != k)
    return emitOpError("input feature size ")
           << k << " does not match the weight's "
           << (getWeightInOut() ? "dim 0 (in, out layout)"
                                : "dim 1 (out, in layout)")
           << " of size " << wk;
  if (getBias() && failed(expectShape(*this, "bias", tensorType(getBias()), {n})))
    return failure();
  if (failed(verifyFloat8(*this, getFloat8Attr(), getFloat8GradAttr(), {"lhs"})))
    return failure();
  SmallVector<int64_t> shape(x.getShape());
  shape.back() = n;
  return expectShape(*this, "result", tensorType(getResult()), shape);
}

static LogicalResult verifyBinary(Operation *op) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1),
        res = op->getResult(0);
  if (failed(verifySameFloatType(op, {lhs, rhs, res}, {"lhs", "rhs", "result"})))
    return failure();
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(tensorType(lhs).getShape(), tensorType(rhs).getShape());
  if (failed(shape))
    return op->emitOpError("operand shapes do not broadcast: ")
           << lhs.getType() << " and " << rhs.getType();
  return expectShape(op, "result", tensorType(res), *shape);
}

LogicalResult AddOp::verify() { return verifyBinary(*this); }
LogicalResult MulOp::verify() { return verifyBinary(*this); }
LogicalResult SubOp::verify() { return verifyBinary(*this); }
LogicalResult DivOp::verify() { return verifyBinary(*this); }
LogicalResult PowOp::verify() { return verifyBinary(*this); }

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << getApproximate() << "\"";
  return verifyStaticShapes(*this);
}

LogicalResult SiluOp::verify() { return verifyStaticShapes(*this); }

static LogicalResult verifyNorm(Operation *op, Value input, Value weight,
                                Value bias, double eps) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  SmallVector<Value> values = {input, weight, op->getResult(0)};
  SmallVector<StringRef> names = {"input", "weight", "result"};
  if (bias) {
    values.push_back(bias);
    names.push_back("bias");
  }
  if (failed(verifySameFloatType(op, values, names)))
    return failure();
  RankedTensorType x = tensorType(input);
  if (x.getRank() < 1)
    return op->emitOpError("expects an input of rank >= 1");
  int64_t c = x.getShape().back();
  if (failed(expectShape(op, "weight", tensorType(weight), {c})))
    return failure();
  if (bias && failed(expectShape(op, "bias", tensorType(bias), {c})))
    return failure();
  if (!(eps >= 0.0))
    return op->emitOpError("expects eps >= 0, got ") << eps;
  return expectShape(op, "result", tensorType(op->getResult(0)), x.getShape());
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getInput(), getWeight(), getBias(),
                    getEps().convertToDouble());
}

LogicalResult RMSNormOp::verify() {
  return verifyNorm(*this, getInput(), getWeight(), Value(),
                    getEps().convertToDouble());
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = tensorType(getInput()).getRank();
  int64_t axis = getAxis();
  if (axis < -rank || axis >= rank)
    return emitOpError("axis ") << axis << " is out of range for rank "
                                << rank;
  return verifyStaticShapes(*this);
}

/// A rotary embedding's input: static, [batch, heads, seq, head_dim] with
/// an even head_dim.
static LogicalResult verifyRotaryInput(Operation *op, Value input) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  RankedTensorType x = tensorType(input);
  if (x.getRank() != 4)
    return op->emitOpError("expects an input of rank 4 [batch, heads, seq, "
                           "head_dim], got ")
           << x;
  if (x.getDimSize(3) % 2 != 0)
    return op->emitOpError("head dimension ")
           << x.getDimSize(3) << " must be even for rotary embedding";
  return success();
}

LogicalResult RotaryOp::verify() {
  if (failed(verifyRotaryInput(*this, getInput())))
    return failure();
  if (!(getTheta().convertToDouble() > 0.0))
    return emitOpError("theta must be positive");
  return success();
}

LogicalResult RotaryTableOp::verify() {
  if (failed(verifyRotaryInput(*this, getInput())))
    return failure();
  RankedTensorType x = tensorType(getInput());
  if (getResult().getType() != x)
    return emitOpError("result type must be the input's, ") << x;
  SmallVector<int64_t> table = {x.getDimSize(2), x.getDimSize(3) / 2};
  for (Value t : {getCos(), getSin()}) {
    RankedTensorType tt = tensorType(t);
    if (tt.getShape() != ArrayRef<int64_t>(table) ||
        tt.getElementType() != x.getElementType())
      return emitOpError("cos and sin tables must be [seq, head_dim / 2] = [")
             << table[0] << ", " << table[1] << "] of " << x.getElementType()
             << ", got " << tt;
  }
  return success();
}

double AttentionOp::getScaleOrDefault() {
  if (std::optional<llvm::APFloat> s = getScale())
    return s->convertToDouble();
  return 1.0 / std::sqrt(double(tensorType(getQuery()).getDimSize(3)));
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (failed(verifySameFloatType(
          *this, {getQuery(), getKey(), getValue(), getResult()},
          {"query", "key", "value", "result"})))
    return failure();
  RankedTensorType q = tensorType(getQuery()), k = tensorType(getKey()),
                   v = tensorType(getValue());
  RankedTensorType types[] = {q, k, v};
  StringRef names[] = {"query", "key", "value"};
  for (auto [t, name] : llvm::zip(types, names))
    if (t.getRank() != 4)
      return emitOpError("expects ")
             << name << " of rank 4 [batch, heads, seq, head_dim], got " << t;
  int64_t b = q.getDimSize(0), h = q.getDimSize(1), t = q.getDimSize(2),
          d = q.getDimSize(3);
  int64_t hkv = k.getDimSize(1), s = k.getDimSize(2);
  if (failed(expectShape(*this, "key", k, {b, hkv, s, d})))
    return failure();
  if (failed(expectShape(*this, "value", v, {b, hkv, s, d})))
    return failure();
  if (hkv == 0 || h % hkv != 0)
    return emitOpError("number of query heads ")
           << h << " is not a multiple of the number of key/value heads "
           << hkv;
  if (getCausal() && s != t)
    return emitOpError("causal attention expects equal query and key "
                       "lengths, got ")
           << t << " and " << s;
  return expectShape(*this, "result", tensorType(getResult()), {b, h, t, d});
}

LogicalResult ReshapeOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (failed(verifySameFloatType(*this, {getInput(), getResult()},
                                 {"input", "result"})))
    return failure();
  int64_t in = tensorType(getInput()).getNumElements();
  int64_t out = tensorType(getResult()).getNumElements();
  if (in != out)
    return emitOpError("cannot reshape ")
           << in << " elements into " << out << " elements";
  return success();
}

LogicalResult TransposeOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (failed(verifySameFloatType(*this, {getInput(), getResult()},
                                 {"input", "result"})))
    return failure();
  RankedTensorType x = tensorType(getInput());
  ArrayRef<int64_t> perm = getPermutation();
  if (int64_t(perm.size()) != x.getRank())
    return emitOpError("permutation has ")
           << perm.size() << " entries for an input of rank " << x.getRank();
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.getRank() || seen[p])
      return emitOpError("permutation is not a permutation of 0..")
             << x.getRank() - 1;
    seen[p] = true;
    shape.push_back(x.getDimSize(p));
  }
  return expectShape(*this, "result", tensorType(getResult()), shape);
}

LogicalResult SliceOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (failed(verifySameFloatType(*this, {getInput(), getResult()},
                                 {"input", "result"})))
    return failure();
  RankedTensorType x = tensorType(getInput()), y = tensorType(getResult());
  int64_t dim = getDim(), start = getStart();
  if (dim < 0 || dim >= x.getRank())
    return emitOpError("dim ") << dim << " is out of range for rank "
                               << x.getRank();
  if (y.getRank() != x.getRank())
    return emitOpError("expects a result of rank ") << x.getRank();
  for (int64_t i = 0; i < x.getRank(); ++i)
    if (i != dim && x.getDimSize(i) != y.getDimSize(i))
      return emitOpError("result dimension ")
             << i << " must equal the input's (" << x.getDimSize(i) << ")";
  if (start < 0 || start + y.getDimSize(dim) > x.getDimSize(dim))
    return emitOpError("slice [")
           << start << ", " << start + y.getDimSize(dim)
           << ") is out of bounds for dimension " << dim << " of size "
           << x.getDimSize(dim);
  return success();
}

LogicalResult CastOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (tensorType(getInput()).getShape() != tensorType(getResult()).getShape())
    return emitOpError("changes the shape: ")
           << getInput().getType() << " to " << getResult().getType();
  if (std::optional<Type> g = getGradType())
    if (!isa<Float32Type, BFloat16Type, Float16Type>(*g))
      return emitOpError("grad_type must be f32, bf16 or f16, got ") << *g;
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  RankedTensorType logits = tensorType(getLogits());
  if (logits.getRank() < 1)
    return emitOpError("expects logits of rank >= 1 [..., vocab]");
  return expectShape(*this, "targets", tensorType(getTargets()),
                     logits.getShape().drop_back());
}

#define GET_OP_CLASSES
#include "dialects/nn/NNOps.cpp.inc"
