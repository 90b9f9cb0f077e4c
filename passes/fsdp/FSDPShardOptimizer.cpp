//===- FSDPShardOptimizer.cpp - a global norm over sharded gradients ------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace shardc {
#define GEN_PASS_DEF_FSDPSHARDOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

struct FSDPShardOptimizerPass
    : public shardc::impl::FSDPShardOptimizerBase<FSDPShardOptimizerPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto opt = module.lookupSymbol<func::FuncOp>("opt_step");
    if (!module->hasAttr(attrs::kMesh) || !opt)
      return;
    abi::MeshGrid mesh = compiledMesh(module);
    if (mesh.tp > 1)
      countReplicatedOnce(module, opt, mesh.tp);
    auto gridRef = FlatSymbolRefAttr::get(&getContext(), attrs::kGridName);
    // Replicas hold equal shards: summing over the shard axis (and the tp
    // axis, whose ranks hold the parts of split parameters) is the norm.
    SmallVector<int16_t> axes = {int16_t(mesh.shardAxis())};
    if (mesh.tp > 1)
      axes.push_back(int16_t(mesh.tpAxis()));
    opt.walk([&](nn::ClipCoefOp clip) {
      OpBuilder b(clip);
      Value local = clip.getSquaredNorm();
      Value global = local;
      Operation *first = nullptr;
      for (int16_t axis : axes) {
        global = shard::AllReduceOp::create(
            b, clip.getLoc(), local.getType(), gridRef,
            b.getDenseI16ArrayAttr({axis}), global,
            shard::ReductionKindAttr::get(b.getContext(),
                                          shard::ReductionKind::Sum));
        first = first ? first : global.getDefiningOp();
      }
      local.replaceAllUsesExcept(global, first);
    });
  }

  /// Every tp rank holds a replicated parameter (tp.dim -1) and its summed
  /// gradient whole: its squared norm counts 1/tp on each (exact for a tp
  /// of a power of two).
  static void countReplicatedOnce(ModuleOp module, func::FuncOp opt,
                                  int64_t tp) {
    llvm::StringSet<> replicated;
    if (auto micro = module.lookupSymbol<func::FuncOp>("micro_step"))
      for (unsigned i = 0; i < micro.getNumArguments(); ++i) {
        auto name = micro.getArgAttrOfType<StringAttr>(i, attrs::kParam);
        auto dim = micro.getArgAttrOfType<IntegerAttr>(i, attrs::kTpDim);
        if (name && dim && dim.getInt() < 0)
          replicated.insert(name.getValue());
      }
    opt.walk([&](nn::SquaredNormOp sq) {
      auto arg = dyn_cast<BlockArgument>(sq.getInput());
      if (!arg)
        return;
      auto state = opt.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    attrs::kState);
      if (!state || !state.getValue().starts_with(abi::kStateGrad) ||
          !replicated.contains(
              state.getValue().drop_front(StringRef(abi::kStateGrad).size())))
        return;
      OpBuilder b(sq);
      b.setInsertionPointAfter(sq);
      Type t = sq.getType();
      Value share = nn::FillOp::create(b, sq.getLoc(), t,
                                       b.getF64FloatAttr(1.0 / double(tp)));
      Value scaled = nn::MulOp::create(b, sq.getLoc(), t, sq, share);
      sq.getResult().replaceAllUsesExcept(scaled, scaled.getDefiningOp());
    });
  }
};

} // namespace
