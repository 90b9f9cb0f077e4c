//===- BuildOptimizer.cpp - the compiled optimizer step -------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_NNBUILDOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

struct NNBuildOptimizerPass
    : public shardc::impl::NNBuildOptimizerBase<NNBuildOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (optimizer != abi::kOptimizerAdamW && optimizer != abi::kOptimizerSGD) {
      module.emitError("optimizer must be 'adamw' or 'sgd', got '")
          << optimizer << "'";
      return signalPassFailure();
    }
    auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!micro) {
      module.emitError("no 'micro_step' function: run nn-autodiff first");
      return signalPassFailure();
    }
    build(module, micro);
    // The runtime reads which optimizer it runs from the manifest.
    NamedAttrList model(module->getAttrOfType<DictionaryAttr>(attrs::kModel));
    model.set("optimizer", StringAttr::get(&getContext(), optimizer));
    module->setAttr(attrs::kModel, model.getDictionary(&getContext()));
  }

  void build(ModuleOp module, func::FuncOp micro) {
    MLIRContext *ctx = &getContext();
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointAfter(micro);
    Location loc = micro.getLoc();

    struct Param {
      std::string name;
      Type type;
    };
    SmallVector<Param> params;
    for (unsigned i = 0; i < micro.getNumArguments(); ++i)
      if (auto name = micro.getArgAttrOfType<StringAttr>(i, attrs::kParam))
        params.push_back({name.str(), micro.getArgumentTypes()[i]});

    SmallVector<std::string> stateNames =
        optimizer == abi::kOptimizerAdamW
            ? SmallVector<std::string>{abi::kStateExpAvg, abi::kStateExpAvgSq}
            : SmallVector<std::string>{abi::kStateMomentum};

    // Arguments: params, grads, each state kind, hyper, max_grad_norm.
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    auto addArg = [&](Type t, StringRef role, const std::string &name) {
      argTypes.push_back(t);
      argAttrs.push_back(
          b.getDictionaryAttr(b.getNamedAttr(role, b.getStringAttr(name))));
      return argTypes.size() - 1;
    };
    for (const Param &p : params)
      addArg(p.type, attrs::kParam, p.name);
    for (const Param &p : params)
      addArg(p.type, attrs::kState, abi::kStateGrad + p.name);
    for (const std::string &s : stateNames)
      for (const Param &p : params)
        addArg(p.type, attrs::kState, s + p.name);
    auto f32 = Float32Type::get(ctx);
    auto scalar = RankedTensorType::get({}, f32);
    size_t hyperArg =
        addArg(RankedTensorType::get({abi::kHyperSize}, f32), attrs::kInput,
               abi::kIoOptimizer);
    size_t maxNormArg = addArg(scalar, attrs::kInput, abi::kIoMaxGradNorm);

    // Results: grad_sq_norm, then params and states updated in place.
    SmallVector<Type> resultTypes = {scalar};
    SmallVector<DictionaryAttr> resultAttrs = {b.getDictionaryAttr(
        b.getNamedAttr(attrs::kOutput, b.getStringAttr(abi::kIoGradSqNorm)))};
    size_t n = params.size();
    auto updates = [&](size_t argIndex) {
      resultTypes.push_back(argTypes[argIndex]);
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(attrs::kUpdates, b.getI64IntegerAttr(argIndex))));
    };
    for (size_t k = 0; k < n; ++k)
      updates(k);
    for (size_t s = 0; s < stateNames.size(); ++s)
      for (size_t k = 0; k < n; ++k)
        updates(2 * n + s * n + k);

    auto fn = func::FuncOp::create(b, loc, "opt_step",
                                   b.getFunctionType(argTypes, resultTypes));
    fn.setAllArgAttrs(argAttrs);
    fn.setAllResultAttrs(resultAttrs);
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    auto arg = [&](size_t i) { return entry->getArgument(i); };

    // Global gradient norm and the clipping coefficient.
    Value sq;
    for (size_t k = 0; k < n; ++k) {
      Value s = nn::SquaredNormOp::create(b, loc, scalar, arg(n + k));
      sq = sq ? Value(nn::AddOp::create(b, loc, scalar, sq, s)) : s;
    }
    if (!sq)
      sq = nn::FillOp::create(b, loc, scalar, b.getF64FloatAttr(0.0));
    Value coef = nn::ClipCoefOp::create(b, loc, scalar, sq, arg(maxNormArg));

    SmallVector<Value> newParams, newStates(stateNames.size() * n);
    for (size_t k = 0; k < n; ++k) {
      Type t = params[k].type;
      if (optimizer == abi::kOptimizerAdamW) {
        auto op = nn::AdamWOp::create(b, loc, TypeRange{t, t, t}, arg(k),
                                      arg(n + k), arg(2 * n + k),
                                      arg(3 * n + k), arg(hyperArg), coef);
        newParams.push_back(op.getNewParam());
        newStates[k] = op.getNewExpAvg();
        newStates[n + k] = op.getNewExpAvgSq();
      } else {
        auto op = nn::SGDOp::create(b, loc, TypeRange{t, t}, arg(k), arg(n + k),
                                    arg(2 * n + k), arg(hyperArg), coef);
        newParams.push_back(op.getNewParam());
        newStates[k] = op.getNewMomentumBuffer();
      }
    }
    SmallVector<Value> results = {sq};
    llvm::append_range(results, newParams);
    llvm::append_range(results, newStates);
    func::ReturnOp::create(b, loc, results);
  }
};

} // namespace
