//===- Float8Linears.cpp - the block linears in float8 (--float8) ---------===//
//
// torchao's convert_to_float8_training, with torchtitan's filter that
// leaves the LM head out, decided at compile time: each eligible nn.linear
// of the model function gets the recipe as its `float8` attribute
// (dialects/nn/Float8.h says what the recipe means; nn-autodiff passes it
// to the backward GEMMs; convert-nn-to-rt lowers it to cast_fp8 and
// matmul_fp8).
//
//===----------------------------------------------------------------------===//
#include "dialects/nn/Float8.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace shardc {
#define GEN_PASS_DEF_NNFLOAT8LINEARS
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// Whether `v` reaches the loss as its logits, through layout ops only.
bool isLogits(Value v) {
  for (Operation *user : v.getUsers()) {
    if (isa<nn::CrossEntropyOp, nn::CrossEntropyWithGradOp,
            nn::CrossEntropyGradOp, nn::VocabPartOp, nn::VocabStatsOp,
            nn::VocabCrossEntropyOp>(user))
      return true;
    if (isa<nn::ReshapeOp, nn::CastOp, nn::TransposeOp, shard::AllGatherOp>(
            user) &&
        isLogits(user->getResult(0)))
      return true;
  }
  return false;
}

/// The checkpoint name of parameter `v`, or empty if `v` is no parameter
/// of `fn`.
StringRef paramName(func::FuncOp fn, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &fn.getBody().front())
    return {};
  auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                              attrs::kParam);
  return name ? name.getValue() : StringRef();
}

/// Why `lin` stays in high precision, or empty if it can compute in
/// float8. `name` is its weight's parameter name.
std::string ineligible(nn::LinearOp lin) {
  auto x = cast<RankedTensorType>(lin.getInput().getType());
  int64_t k = x.getShape().back();
  int64_t n = cast<RankedTensorType>(lin.getType()).getShape().back();
  int64_t m = x.getNumElements() / k;
  auto bad = [](int64_t d) { return d % nn::kFloat8Multiple != 0; };
  std::string why;
  llvm::raw_string_ostream os(why);
  if (bad(k) || bad(n))
    os << "its features (in " << k << ", out " << n << ")";
  else if (bad(m))
    os << "its rows (" << m << " tokens)";
  else
    return {};
  os << " are not multiples of " << nn::kFloat8Multiple
     << ", which FP8 GEMMs need";
  return why;
}

struct NNFloat8LinearsPass
    : public shardc::impl::NNFloat8LinearsBase<NNFloat8LinearsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!nn::isFloat8Recipe(recipe)) {
      module.emitError("--float8 must be ")
          << nn::float8RecipeList() << ", got '" << recipe << "'";
      return signalPassFailure();
    }
    auto fn = module.lookupSymbol<func::FuncOp>("forward");
    if (!fn) {
      module.emitError("nn-float8-linears: no model function 'forward'");
      return signalPassFailure();
    }
    StringAttr recipeAttr = StringAttr::get(&getContext(), recipe);
    int64_t marked = 0, linears = 0;
    fn.walk([&](nn::LinearOp lin) {
      StringRef name = paramName(fn, lin.getWeight());
      if (name.empty())
        return; // a product of activations, not a layer
      ++linears;
      if (isLogits(lin.getResult()) || usedByEmbedding(lin.getWeight()))
        return; // the LM head stays in high precision, as torchtitan's
      if (std::string why = ineligible(lin); !why.empty()) {
        lin.emitRemark("--float8: ")
            << name << " stays in " << elementType(lin) << ": " << why;
        return;
      }
      lin.setFloat8Attr(recipeAttr);
      ++marked;
    });
    if (marked == 0) {
      module.emitError("--float8=")
          << recipe << ": no linear of the model can compute in float8 ("
          << linears
          << " linear layers, none of them a transformer block's with "
             "features and rows that are multiples of "
          << nn::kFloat8Multiple << ")";
      return signalPassFailure();
    }
  }

  static bool usedByEmbedding(Value weight) {
    return llvm::any_of(weight.getUsers(), [](Operation *user) {
      return isa<nn::EmbeddingOp>(user);
    });
  }
  static std::string elementType(nn::LinearOp lin) {
    std::string out;
    llvm::raw_string_ostream(out)
        << cast<RankedTensorType>(lin.getType()).getElementType();
    return out;
  }
};

} // namespace
