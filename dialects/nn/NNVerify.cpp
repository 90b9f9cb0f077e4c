//===- NNVerify.cpp - shared helpers of the nn verifiers ------------------===//
#include "dialects/nn/NNVerify.h"
#include "dialects/nn/Float8.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace shardc::nn;
using shardc::nn::detail::tensorType;

/// Every operand and result of an nn op has a static shape.
LogicalResult shardc::nn::detail::verifyStaticShapes(Operation *op) {
  for (Value v : op->getOperands())
    if (!tensorType(v).hasStaticShape())
      return op->emitOpError("requires statically shaped operands, got ")
             << v.getType();
  for (Value v : op->getResults())
    if (!tensorType(v).hasStaticShape())
      return op->emitOpError("requires a statically shaped result, got ")
             << v.getType();
  return success();
}

/// The floating-point operands and result share one element type.
LogicalResult shardc::nn::detail::verifySameFloatType(Operation *op, ArrayRef<Value> values,
                                  ArrayRef<StringRef> names) {
  Type expected = tensorType(values.front()).getElementType();
  for (auto [v, name] : llvm::zip(values, names))
    if (tensorType(v).getElementType() != expected)
      return op->emitOpError("expects ")
             << name << " to have element type " << expected << ", got "
             << tensorType(v).getElementType();
  return success();
}

LogicalResult shardc::nn::detail::expectShape(Operation *op, StringRef what, RankedTensorType type,
                          ArrayRef<int64_t> expected) {
  if (type.getShape() == expected)
    return success();
  InFlightDiagnostic diag = op->emitOpError("expects ") << what << " of shape [";
  llvm::interleaveComma(expected, diag);
  diag << "], got " << type;
  return diag;
}

/// NumPy broadcasting of two static shapes; failure when incompatible.
FailureOr<SmallVector<int64_t>> shardc::nn::detail::broadcastShapes(ArrayRef<int64_t> a,
                                                        ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  return out;
}

LogicalResult shardc::nn::detail::verifyBroadcastsTo(Operation *op, Value from,
                                                     StringRef fromName, Value to,
                                                     StringRef toName) {
  ArrayRef<int64_t> target = tensorType(to).getShape();
  FailureOr<SmallVector<int64_t>> b =
      broadcastShapes(tensorType(from).getShape(), target);
  if (failed(b) || ArrayRef<int64_t>(*b) != target)
    return op->emitOpError() << fromName << " " << from.getType()
                             << " does not broadcast to the " << toName << " "
                             << to.getType();
  return success();
}

LogicalResult shardc::nn::detail::verifyFloat8(Operation *op,
                                               StringAttr recipe,
                                               StringAttr grad,
                                               ArrayRef<StringRef> grads) {
  if (recipe && !isFloat8Recipe(recipe.getValue()))
    return op->emitOpError("float8 recipe '")
           << recipe.getValue() << "' is not one of " << float8RecipeList();
  if (grad && !recipe)
    return op->emitOpError("has float8_grad without a float8 recipe");
  if (grad && !llvm::is_contained(grads, grad.getValue()))
    return op->emitOpError("float8_grad '")
           << grad.getValue() << "' is not one of "
           << llvm::join(grads, ", ");
  return success();
}
