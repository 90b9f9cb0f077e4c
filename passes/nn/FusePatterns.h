//===- FusePatterns.h - nn-fuse-patterns' families and matchers -*- C++ -*-===//
//
// nn-fuse-patterns (FusePatterns.cpp) replaces exporters' decomposed chains
// by fused nn ops. Its patterns come in families, a file each: activations
// (GELU, SiLU), norms (layer norm, RMS norm), the rotary embedding and
// attention. Each file adds its patterns to the pass's set; the matchers
// declared here are the ones every family reads constants and operands with.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_NN_FUSEPATTERNS_H
#define SHARDC_PASSES_NN_FUSEPATTERNS_H

#include "dialects/nn/NNDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace shardc::nn_fusion {

/// The families, in the order the pass adds them (the patterns of one root
/// op are tried in that order).
void populateActivationPatterns(mlir::RewritePatternSet &patterns);
void populateNormPatterns(mlir::RewritePatternSet &patterns);
void populateRotaryPatterns(mlir::RewritePatternSet &patterns);
void populateAttentionPatterns(mlir::RewritePatternSet &patterns);
/// The token reshapes around row-wise ops (FuseReshapes.cpp), added first.
void populateReshapePatterns(mlir::RewritePatternSet &patterns);

mlir::RankedTensorType typeOf(mlir::Value v);

/// The value of `v` when every element of it is the same compile-time
/// float (an nn.fill, or a splat nn.constant).
std::optional<double> splatValue(mlir::Value v);

/// A compile-time scalar factor: a splat of rank 0 or of only unit
/// dimensions, so that multiplying by it never changes a shape.
std::optional<double> scalarValue(mlir::Value v);

/// Whether `c`, a constant of element type `elt`, is `exact` rounded to
/// that type (how an exporter writes sqrt(2) or 1/sqrt(2)).
bool isRounded(double c, double exact, mlir::Type elt);

/// Whether `v` is a compile-time scalar that is `exact` rounded to its
/// element type.
bool isScalar(mlir::Value v, double exact);

/// The operand of the commutative binary op `op` other than the one
/// satisfying `pred`, or null when neither does.
template <typename Op, typename Pred>
mlir::Value otherOperand(Op op, Pred pred) {
  if (pred(op.getLhs()))
    return op.getRhs();
  if (pred(op.getRhs()))
    return op.getLhs();
  return {};
}

/// A per-channel vector for the last dimension C of `like`: `v` is [C] or
/// [1, ..., 1, C] and broadcasting it onto `like` keeps `like`'s shape.
bool isChannelVector(mlir::Value v, mlir::RankedTensorType like);

/// A per-channel vector `v` as [C].
mlir::Value asChannelVector(mlir::PatternRewriter &rewriter,
                            mlir::Location loc, mlir::Value v);

} // namespace shardc::nn_fusion

#endif // SHARDC_PASSES_NN_FUSEPATTERNS_H
