//===- NNVerify.h - shared helpers of the nn verifiers ----------*- C++ -*-===//
#ifndef SHARDC_DIALECTS_NN_NNVERIFY_H
#define SHARDC_DIALECTS_NN_NNVERIFY_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

namespace shardc::nn::detail {

inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType());
}

/// Every operand and result of an nn op has a static shape.
mlir::LogicalResult verifyStaticShapes(mlir::Operation *op);

/// The floating-point `values` share one element type; `names` name them.
mlir::LogicalResult verifySameFloatType(mlir::Operation *op,
                                        llvm::ArrayRef<mlir::Value> values,
                                        llvm::ArrayRef<llvm::StringRef> names);

/// `type` has shape `expected`, or an error names `what`.
mlir::LogicalResult expectShape(mlir::Operation *op, llvm::StringRef what,
                                mlir::RankedTensorType type,
                                llvm::ArrayRef<int64_t> expected);

/// NumPy broadcasting of two static shapes; failure when incompatible.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// `from`'s shape broadcasts (NumPy) to exactly `to`'s, or an error names
/// both ("<fromName> T does not broadcast to the <toName> U").
mlir::LogicalResult verifyBroadcastsTo(mlir::Operation *op, mlir::Value from,
                                       llvm::StringRef fromName, mlir::Value to,
                                       llvm::StringRef toName);

/// A GEMM's float8 attributes: `recipe` one of nn::kFloat8Recipes, and
/// `grad` (the operand that is an output gradient) one of `grads`, set only
/// with a recipe.
mlir::LogicalResult verifyFloat8(mlir::Operation *op, mlir::StringAttr recipe,
                                 mlir::StringAttr grad,
                                 llvm::ArrayRef<llvm::StringRef> grads);

} // namespace shardc::nn::detail

#endif // SHARDC_DIALECTS_NN_NNVERIFY_H
