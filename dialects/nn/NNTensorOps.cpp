//===- NNTensorOps.cpp - verifiers of the generic tensor ops --------------===//
#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNVerify.h"
#include "runtime/abi/abi.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::nn;
using namespace shardc::nn::detail;

LogicalResult ConstantOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (getValue().getType() != getResult().getType())
    return emitOpError("value of type ")
           << getValue().getType() << " does not match the result type "
           << getResult().getType();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult SqrtOp::verify() { return verifyStaticShapes(*this); }
LogicalResult ErfOp::verify() { return verifyStaticShapes(*this); }
LogicalResult TanhOp::verify() { return verifyStaticShapes(*this); }
LogicalResult SigmoidOp::verify() { return verifyStaticShapes(*this); }
LogicalResult NegOp::verify() { return verifyStaticShapes(*this); }
LogicalResult ReciprocalOp::verify() { return verifyStaticShapes(*this); }
LogicalResult ExpOp::verify() { return verifyStaticShapes(*this); }
LogicalResult LogOp::verify() { return verifyStaticShapes(*this); }
LogicalResult ReluOp::verify() { return verifyStaticShapes(*this); }
LogicalResult SoftplusOp::verify() { return verifyStaticShapes(*this); }
LogicalResult NanToZeroOp::verify() { return verifyStaticShapes(*this); }
LogicalResult RoundF16Op::verify() { return verifyStaticShapes(*this); }
LogicalResult RoundBf16Op::verify() { return verifyStaticShapes(*this); }
LogicalResult LeakyReluOp::verify() { return verifyStaticShapes(*this); }

LogicalResult UnaryGradOp::verify() {
  if (abi::unaryFnCode(getFn().str()) < 0)
    return emitOpError("unknown function '")
           << getFn() << "' (expected " << abi::unaryFnList() << ")";
  return verifyStaticShapes(*this);
}

/// The broadcast of every operand's shape equals the result's.
static LogicalResult verifyBroadcast(Operation *op, ValueRange operands) {
  SmallVector<int64_t> shape;
  for (Value v : operands) {
    FailureOr<SmallVector<int64_t>> b =
        broadcastShapes(shape, tensorType(v).getShape());
    if (failed(b))
      return op->emitOpError("operand shapes do not broadcast: ")
             << operands.getTypes();
    shape = *b;
  }
  return expectShape(op, "result", tensorType(op->getResult(0)), shape);
}

LogicalResult WhereOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(verifySameFloatType(*this, {getLhs(), getRhs(), getResult()},
                                 {"lhs", "rhs", "result"})))
    return failure();
  return verifyBroadcast(*this, getOperands());
}

LogicalResult EqualOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (tensorType(getLhs()).getElementType() !=
      tensorType(getRhs()).getElementType())
    return emitOpError("compares ") << getLhs().getType() << " with "
                                    << getRhs().getType()
                                    << " (element types differ)";
  return verifyBroadcast(*this, getOperands());
}

LogicalResult BroadcastToOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(verifySameFloatType(*this, {getInput(), getResult()},
                                 {"input", "result"})))
    return failure();
  return verifyBroadcastsTo(*this, getInput(), "input", getResult(), "result");
}

LogicalResult BatchMatmulOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(verifySameFloatType(*this, {getLhs(), getRhs(), getResult()},
                                 {"lhs", "rhs", "result"})))
    return failure();
  ArrayRef<int64_t> a = tensorType(getLhs()).getShape();
  ArrayRef<int64_t> b = tensorType(getRhs()).getShape();
  if (a.size() < 2 || b.size() < 2)
    return emitOpError("expects operands of rank >= 2, got ")
           << getLhs().getType() << " and " << getRhs().getType();
  int64_t m = a[a.size() - (getTransposeA() ? 1 : 2)];
  int64_t k = a[a.size() - (getTransposeA() ? 2 : 1)];
  int64_t kb = b[b.size() - (getTransposeB() ? 1 : 2)];
  int64_t n = b[b.size() - (getTransposeB() ? 2 : 1)];
  if (k != kb)
    return emitOpError("contraction sizes differ: ")
           << k << " (lhs) and " << kb << " (rhs)";
  FailureOr<SmallVector<int64_t>> batch =
      broadcastShapes(a.drop_back(2), b.drop_back(2));
  if (failed(batch))
    return emitOpError("batch dimensions do not broadcast: ")
           << getLhs().getType() << " and " << getRhs().getType();
  SmallVector<int64_t> shape = *batch;
  shape.push_back(m);
  shape.push_back(n);
  return expectShape(*this, "result", tensorType(getResult()), shape);
}

LogicalResult ConcatOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (getInputs().empty())
    return emitOpError("expects at least one input");
  RankedTensorType first = tensorType(getInputs().front());
  int64_t rank = first.getRank(), dim = getDim();
  if (dim < 0 || dim >= rank)
    return emitOpError("dim ") << dim << " is out of range for rank " << rank;
  SmallVector<int64_t> shape(first.getShape());
  shape[dim] = 0;
  for (auto [k, v] : llvm::enumerate(getInputs())) {
    RankedTensorType t = tensorType(v);
    if (t.getElementType() != first.getElementType() || t.getRank() != rank)
      return emitOpError("input #") << k << " " << t
                                    << " differs in element type or rank "
                                       "from input #0 "
                                    << first;
    for (int64_t d = 0; d < rank; ++d)
      if (d != dim && t.getDimSize(d) != first.getDimSize(d))
        return emitOpError("input #") << k << " has size " << t.getDimSize(d)
                                      << " on dim " << d << ", input #0 "
                                      << first.getDimSize(d);
    shape[dim] += t.getDimSize(dim);
  }
  return expectShape(*this, "result", tensorType(getResult()), shape);
}

LogicalResult TriluOp::verify() {
  if (tensorType(getInput()).getRank() < 2)
    return emitOpError("expects an input of rank >= 2");
  return verifyStaticShapes(*this);
}
