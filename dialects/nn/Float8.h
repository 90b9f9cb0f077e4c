//===- Float8.h - torchao's float8 recipes, as shardc compiles them -*- C++ -*-===//
//
// The one place that says what a float8 recipe (--float8, nn.linear's and
// nn.matmul's `float8` attribute) means, after torchao's
// Float8LinearConfig.from_recipe_name: which fp8 format each operand of a
// GEMM is cast to, and how it is scaled. nn-float8-linears sets the recipe,
// convert-nn-to-rt lowers it (cast_fp8 and matmul_fp8, kernels.def).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_DIALECTS_NN_FLOAT8_H
#define SHARDC_DIALECTS_NN_FLOAT8_H

#include "runtime/abi/abi.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace shardc::nn {

/// The recipes, by torchao's names:
/// - tensorwise: one dynamic scale per tensor (fp8 max / amax); the input
///   and weight in e4m3, the output gradient in e5m2;
/// - rowwise: a scale per row of each GEMM operand along the GEMM's
///   reduction axis, rounded down to a power of two; e4m3 for all three.
inline constexpr llvm::StringLiteral kFloat8Recipes[] = {"tensorwise",
                                                         "rowwise"};

inline bool isFloat8Recipe(llvm::StringRef recipe) {
  return llvm::is_contained(kFloat8Recipes, recipe);
}

/// "tensorwise|rowwise", for messages.
inline std::string float8RecipeList() {
  std::string out;
  for (llvm::StringRef r : kFloat8Recipes)
    out += (out.empty() ? "" : "|") + r.str();
  return out;
}

/// Whether `recipe` scales rows (with power-of-two scales) rather than
/// whole tensors.
inline bool float8Rowwise(llvm::StringRef recipe) {
  return recipe == "rowwise";
}

/// The fp8 dtype code an operand is cast to under `recipe`; `isGrad`: the
/// operand is the linear's output gradient.
inline int64_t float8Format(llvm::StringRef recipe, bool isGrad) {
  return isGrad && recipe == "tensorwise" ? abi::kF8E5M2 : abi::kF8E4M3;
}

/// The dimensions of a float8 linear (its in and out features) are
/// multiples of this: the FP8 GEMMs of cuBLASLt take no others.
inline constexpr int64_t kFloat8Multiple = 16;

} // namespace shardc::nn

#endif // SHARDC_DIALECTS_NN_FLOAT8_H
