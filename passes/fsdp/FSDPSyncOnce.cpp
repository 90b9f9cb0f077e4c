//===- FSDPSyncOnce.cpp - one gradient reduction per optimizer step -------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_FSDPSYNCONCE
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// One parameter's path from its full gradient to its sharded accumulator.
struct GradPath {
  unsigned result;          // index of the micro-step result it updates
  nn::AccumulateOp accumulate;
  Value full;               // the f32 full (padded) gradient
  std::string name;         // the parameter's name
};

/// Follows the value accumulated into a sharded gradient back through
/// all-reduce and casts to its reduce-scatter, and past a cast feeding the
/// reduce-scatter, to the f32 full gradient.
Value fullGradient(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    if (isa<shard::AllReduceOp, nn::CastOp>(op)) {
      v = op->getOperand(0);
      continue;
    }
    auto rs = dyn_cast<shard::ReduceScatterOp>(op);
    if (!rs)
      return Value();
    Value in = rs.getInput();
    if (auto cast = in.getDefiningOp<nn::CastOp>())
      return cast.getInput();
    return in;
  }
  return Value();
}

/// Erases ops without uses, last first, until none is left.
void eraseDead(Block &block) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (!op.hasTrait<OpTrait::IsTerminator>() && op.use_empty() &&
          isMemoryEffectFree(&op)) {
        op.erase();
        changed = true;
      }
  }
}

struct FSDPSyncOncePass : public shardc::impl::FSDPSyncOnceBase<FSDPSyncOncePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!step)
      return;
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    SmallVector<GradPath> paths;
    for (unsigned r = 1; r < ret.getNumOperands(); ++r) {
      auto acc = ret.getOperand(r).getDefiningOp<nn::AccumulateOp>();
      if (!acc)
        continue;
      Value full = fullGradient(acc.getGrad());
      if (!full)
        continue;
      auto updated = step.getResultAttrOfType<IntegerAttr>(r, attrs::kUpdates);
      auto slot = step.getArgAttrOfType<StringAttr>(updated.getInt(), attrs::kState);
      StringRef name = slot.getValue();
      name.consume_front(abi::kStateGrad);
      paths.push_back({r, acc, full, name.str()});
    }
    if (paths.empty()) {
      step.emitError("no sharded gradients to synchronize once");
      return signalPassFailure();
    }

    // The no-sync variant starts as a copy; both gain the full accumulators.
    OpBuilder mb(module.getBodyRegion());
    mb.setInsertionPointAfter(step);
    auto nosync = cast<func::FuncOp>(mb.clone(*step));
    nosync.setName("micro_step_nosync");
    Value control = body.getArgument(body.getNumArguments() - 1);

    auto addFullAccumulators = [&](func::FuncOp fn) {
      SmallVector<Value> accs;
      for (const GradPath &p : paths) {
        unsigned idx = fn.getNumArguments();
        fn.insertArgument(idx, p.full.getType(),
                          mb.getDictionaryAttr(mb.getNamedAttr(
                              attrs::kState,
                              mb.getStringAttr("grad_full." + p.name))),
                          fn.getLoc());
        accs.push_back(fn.getArgument(idx));
      }
      return accs;
    };

    // Sync step: full gradient + accumulated ones, reduced once; the
    // reduced shard overwrites the sharded gradient.
    SmallVector<Value> accs = addFullAccumulators(step);
    for (auto [p, acc] : llvm::zip(paths, accs)) {
      OpBuilder b = OpBuilder::atBlockEnd(&body);
      b.setInsertionPointAfterValue(p.full);
      Value total = nn::AccumulateOp::create(b, p.full.getLoc(), p.full.getType(),
                                             acc, p.full, control);
      p.full.replaceAllUsesExcept(total, total.getDefiningOp());
      ret.setOperand(p.result, p.accumulate.getGrad());
      p.accumulate.erase();
    }

    // No-sync step: accumulate the full gradients, reduce nothing.
    Block &nbody = nosync.getBody().front();
    auto nret = cast<func::ReturnOp>(nbody.getTerminator());
    SmallVector<Value> naccs = addFullAccumulators(nosync);
    Value ncontrol = nbody.getArgument(nbody.getNumArguments() - 1 - paths.size());
    SmallVector<Value> results = {nret.getOperand(0)};
    SmallVector<DictionaryAttr> resultAttrs = {nosync.getResultAttrDict(0)};
    SmallVector<Type> resultTypes = {nret.getOperand(0).getType()};
    for (auto [p, acc] : llvm::zip(paths, naccs)) {
      // The copy's accumulate of this parameter reads its full gradient.
      auto nacc = nret.getOperand(p.result).getDefiningOp<nn::AccumulateOp>();
      Value full = fullGradient(nacc.getGrad());
      OpBuilder b = OpBuilder::atBlockEnd(&nbody);
      b.setInsertionPointAfterValue(full);
      Value total = nn::AccumulateOp::create(b, full.getLoc(), full.getType(),
                                             acc, full, ncontrol);
      results.push_back(total);
      resultTypes.push_back(total.getType());
      resultAttrs.push_back(mb.getDictionaryAttr(mb.getNamedAttr(
          attrs::kUpdates,
          mb.getI64IntegerAttr(cast<BlockArgument>(acc).getArgNumber()))));
    }
    OpBuilder rb(nret);
    func::ReturnOp::create(rb, nret.getLoc(), results);
    nret.erase();
    nosync.setFunctionType(FunctionType::get(
        &getContext(), nosync.getArgumentTypes(), resultTypes));
    nosync.setAllResultAttrs(resultAttrs);
    eraseDead(nbody);
  }
};

} // namespace
