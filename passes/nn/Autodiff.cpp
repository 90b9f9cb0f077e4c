//===- Autodiff.cpp - reverse-mode differentiation of the forward graph ---===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace shardc {
#define GEN_PASS_DEF_NNAUTODIFF
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

struct NNAutodiffPass : public shardc::impl::NNAutodiffBase<NNAutodiffPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (recompute != "none" && recompute != "block" &&
        recompute != "selective") {
      module.emitError("recompute must be 'none', 'block' or 'selective', "
                       "got '")
          << recompute << "'";
      return signalPassFailure();
    }
    auto fwd = module.lookupSymbol<func::FuncOp>(entryName);
    if (!fwd) {
      module.emitError("no model function named '") << entryName << "'";
      return signalPassFailure();
    }
    if (failed(differentiate(fwd)))
      return signalPassFailure();
    fwd.erase();
  }

  /// The gradient of `v` so far, or null.
  Value gradOf(Value v) const { return grads.lookup(v); }

  void addGrad(OpBuilder &b, Value v, Value g) {
    Value &slot = grads[v];
    slot = slot ? Value(nn::AddOp::create(b, g.getLoc(), g.getType(), slot, g))
                : g;
  }

  Value zeros(OpBuilder &b, Location loc, Type type) {
    return nn::FillOp::create(b, loc, type, b.getF64FloatAttr(0.0));
  }

  /// micro_step's signature: the forward's arguments, a gradient
  /// accumulator per parameter and the accumulate control; the loss and the
  /// updated accumulators. Sets `paramArgs` to the parameters' arguments.
  func::FuncOp createMicroStep(OpBuilder &b, func::FuncOp fwd, Type lossType,
                               SmallVectorImpl<unsigned> &paramArgs) {
    // micro_step(forward args..., grad accumulators..., accumulate)
    MLIRContext *ctx = &getContext();
    SmallVector<Type> argTypes(fwd.getArgumentTypes());
    SmallVector<DictionaryAttr> argAttrs;
    for (unsigned i = 0; i < fwd.getNumArguments(); ++i)
      argAttrs.push_back(fwd.getArgAttrDict(i) ? fwd.getArgAttrDict(i)
                                               : b.getDictionaryAttr({}));
    for (unsigned i = 0; i < fwd.getNumArguments(); ++i)
      if (auto name = fwd.getArgAttrOfType<StringAttr>(i, attrs::kParam)) {
        paramArgs.push_back(i);
        argTypes.push_back(fwd.getArgumentTypes()[i]);
        argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
            attrs::kState, b.getStringAttr(abi::kStateGrad + name.str()))));
      }
    auto controlType = RankedTensorType::get({2}, Float32Type::get(ctx));
    argTypes.push_back(controlType);
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(attrs::kInput, b.getStringAttr(abi::kIoAccumulate))));

    SmallVector<Type> resultTypes = {lossType};
    SmallVector<DictionaryAttr> resultAttrs = {b.getDictionaryAttr(
        b.getNamedAttr(attrs::kOutput, b.getStringAttr(abi::kIoLoss)))};
    unsigned firstAcc = fwd.getNumArguments();
    for (auto [k, i] : llvm::enumerate(paramArgs)) {
      resultTypes.push_back(fwd.getArgumentTypes()[i]);
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          attrs::kUpdates, b.getI64IntegerAttr(firstAcc + k))));
    }

    auto step = func::FuncOp::create(b, fwd.getLoc(), "micro_step",
                                     b.getFunctionType(argTypes, resultTypes));
    step.setAllArgAttrs(argAttrs);
    step.setAllResultAttrs(resultAttrs);
    return step;
  }

  /// The gradients of the forward's ops, in reverse order, from the loss's
  /// (1): each op's VJP rule (on its recomputation where a block is
  /// recomputed), summed into its operands' gradients where they need one.
  LogicalResult backward(OpBuilder &b, ArrayRef<Operation *> forwardOps,
                         const DenseSet<Value> &needsGrad, Value loss,
                         Location loc) {
    grads[loss] = nn::FillOp::create(b, loc, loss.getType(),
                                     b.getF64FloatAttr(1.0));
    DenseMap<Operation *, Operation *> recomputed;
    for (Operation *op : llvm::reverse(forwardOps)) {
      if (llvm::none_of(op->getResults(), [&](Value r) { return gradOf(r); }) ||
          llvm::none_of(op->getOperands(),
                        [&](Value v) { return needsGrad.contains(v); }))
        continue;
      Operation *target = op;
      if (recompute != "none" && op->hasAttr(attrs::kBlock)) {
        if (!recomputed.count(op))
          recomputeBlock(b, forwardOps, op->getAttr(attrs::kBlock), recomputed);
        target = recomputed.lookup(op);
      }
      auto vjp = dyn_cast<nn::DifferentiableOpInterface>(target);
      if (!vjp)
        return op->emitOpError("is not differentiable (it has no "
                               "DifferentiableOpInterface)");
      SmallVector<Value> resultGrads;
      for (Value r : op->getResults())
        resultGrads.push_back(gradOf(r) ? gradOf(r)
                                        : zeros(b, op->getLoc(), r.getType()));
      SmallVector<Value> operandGrads = vjp.buildVJP(b, resultGrads);
      if (operandGrads.size() != op->getNumOperands())
        return op->emitOpError("VJP rule returned ")
               << operandGrads.size() << " gradients for "
               << op->getNumOperands() << " operands";
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
        if (g && needsGrad.contains(operand))
          addGrad(b, operand, g);
    }

    return success();
  }

  LogicalResult differentiate(func::FuncOp fwd) {
    if (!fwd.getBody().hasOneBlock())
      return fwd.emitError("the model function must have a single block");
    auto ret = cast<func::ReturnOp>(fwd.getBody().front().getTerminator());
    auto lossType = RankedTensorType::get({}, Float32Type::get(&getContext()));
    if (ret.getNumOperands() != 1 || ret.getOperand(0).getType() != lossType)
      return fwd.emitError("the model function must return one scalar f32 loss");

    OpBuilder b(fwd);
    SmallVector<unsigned> paramArgs;
    func::FuncOp step = createMicroStep(b, fwd, lossType, paramArgs);
    unsigned firstAcc = fwd.getNumArguments();
    Block *entry = step.addEntryBlock();
    b.setInsertionPointToStart(entry);

    // Forward.
    IRMapping map;
    for (BlockArgument arg : fwd.getArguments())
      map.map(arg, entry->getArgument(arg.getArgNumber()));
    SmallVector<Operation *> forwardOps;
    for (Operation &op : fwd.getBody().front().without_terminator())
      forwardOps.push_back(b.clone(op, map));
    Value loss = map.lookup(ret.getOperand(0));

    // Only values computed from parameters need gradients: constants,
    // masks and index arithmetic get none.
    DenseSet<Value> needsGrad;
    for (unsigned i : paramArgs)
      needsGrad.insert(entry->getArgument(i));
    for (Operation *op : forwardOps)
      if (llvm::any_of(op->getOperands(),
                       [&](Value v) { return needsGrad.contains(v); }))
        needsGrad.insert(op->result_begin(), op->result_end());

    // Backward, in reverse order.
    if (failed(backward(b, forwardOps, needsGrad, loss, fwd.getLoc())))
      return failure();

    // Fold each parameter's gradient into its accumulator.
    SmallVector<Value> results = {loss};
    Value control = entry->getArguments().back();
    for (auto [k, i] : llvm::enumerate(paramArgs)) {
      Value param = entry->getArgument(i);
      Value g = gradOf(param);
      if (!g)
        g = zeros(b, fwd.getLoc(), param.getType());
      Value acc = entry->getArgument(firstAcc + k);
      results.push_back(nn::AccumulateOp::create(b, fwd.getLoc(), acc.getType(),
                                                 acc, g, control));
    }
    func::ReturnOp::create(b, fwd.getLoc(), results);

    // VJP rules return gradients for every operand; those of operands that
    // need none are dead.
    SmallVector<Operation *> ops;
    for (Operation &op : entry->without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (isOpTriviallyDead(op))
        op->erase();
    return success();
  }

  /// Whether selective recompute keeps `op`'s results from the forward:
  /// the GEMMs and attention (torchtitan's per-op policy saves the matmul
  /// and SDPA outputs); the element-wise ops, norms and layout ops are
  /// recomputed.
  static bool keptBySelective(Operation *op) {
    return isa<nn::LinearOp, nn::BatchMatmulOp, nn::AttentionOp>(op);
  }

  /// Re-emits the forward ops of `block` at the insertion point; operands
  /// produced inside the block read the re-emitted values. With
  /// recompute=selective the kept ops are not re-emitted: their forward
  /// results (and, for their gradients, their forward operands) are read.
  void recomputeBlock(OpBuilder &b, ArrayRef<Operation *> forwardOps,
                      Attribute block,
                      DenseMap<Operation *, Operation *> &recomputed) {
    IRMapping map;
    for (Operation *op : forwardOps) {
      if (op->getAttr(attrs::kBlock) != block)
        continue;
      if (recompute == "selective" && isa<nn::AttentionOp>(op)) {
        // Attention keeps its operands too (as SDPA saves q, k and v): its
        // gradient reads the forward's, and pairs with it on the target's
        // fused attention (rt-fused-attention).
        recomputed[op] = op;
        continue;
      }
      Operation *clone = b.clone(*op, map);
      recomputed[op] = clone;
      if (recompute == "selective" && keptBySelective(op))
        // A GEMM's gradient reads the recomputed operands (the clone's),
        // later ops its forward result; the clone itself is dead.
        for (Value r : op->getResults())
          map.map(r, r);
    }
  }

  DenseMap<Value, Value> grads;
};

} // namespace
