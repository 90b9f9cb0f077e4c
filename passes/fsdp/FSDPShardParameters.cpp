//===- FSDPShardParameters.cpp - group, shard and gather parameters -------===//
#include "passes/Passes.h"

#include "target/Sharding.h"
#include "target/TargetDescription.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Regex.h"

namespace shardc {
#define GEN_PASS_DEF_FSDPSHARDPARAMETERS
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

struct FSDPShardParametersPass
    : public shardc::impl::FSDPShardParametersBase<FSDPShardParametersPass> {
  using Base::Base;
  const TargetDescription *targetDesc = nullptr;
  MeshShape shape;
  Type paramType, reduceType;

  Type dtype(StringRef name) {
    if (name == "f32")
      return Float32Type::get(&getContext());
    if (name == "bf16")
      return BFloat16Type::get(&getContext());
    return Type();
  }

  /// Reads the options in order (the mesh, the wrap policy, the target,
  /// the dtypes), emitting an error that names the first bad one.
  LogicalResult readOptions(ModuleOp module, const llvm::Regex &policy) {
    std::string error;
    if (!parseMesh(mesh, shape, error)) {
      module.emitError(error);
      return failure();
    }
    std::string regexError;
    if (!policy.isValid(regexError)) {
      module.emitError("invalid wrap policy '") << wrap << "': " << regexError;
      return failure();
    }
    targetDesc = lookupTarget(target);
    if (!targetDesc) {
      module.emitError("unknown target '")
          << target << "' (this shardc has: " << targetNames() << ")";
      return failure();
    }
    paramType = dtype(paramDtype);
    reduceType = dtype(reduceDtype);
    if (!paramType || !reduceType) {
      module.emitError("param-dtype and reduce-dtype must be f32 or bf16, got '")
          << paramDtype << "' and '" << reduceDtype << "'";
      return failure();
    }
    return success();
  }

  /// Replaces the uses of `arg`, now its rank's shard of `type` (dim 0
  /// padded to `padded`), by the whole parameter: its gradient's syncs
  /// over tp and the replicas, the cast to the param dtype, the all-gather
  /// over the shard axis, the cast to the compute dtype and the slice off
  /// the padding, each tagged with `group`.
  void gatherParameter(OpBuilder &b, func::FuncOp fwd, BlockArgument arg,
                       RankedTensorType type, ArrayRef<int64_t> padded,
                       FlatSymbolRefAttr gridRef, int64_t group) {
    unsigned i = arg.getArgNumber();
    auto localType = cast<RankedTensorType>(arg.getType());
    Value v = arg;
    SmallVector<Operation *> created;
    // Whole on every tp rank, each with the gradient of its own tokens:
    // summed over tp on the shard (in the master weights' dtype, after
    // the reduce-scatter).
    auto tpDim = fwd.getArgAttrOfType<IntegerAttr>(i, attrs::kTpDim);
    if (shape.tp > 1 && tpDim && tpDim.getInt() < 0) {
      v = fsdp::SyncGradOp::create(
          b, arg.getLoc(), localType, v, gridRef,
          b.getDenseI16ArrayAttr({int16_t(shape.tpAxis())}));
      created.push_back(v.getDefiningOp());
    }
    if (shape.replicas > 1) {
      v = fsdp::SyncGradOp::create(
          b, arg.getLoc(), localType, v, gridRef,
          b.getDenseI16ArrayAttr({int16_t(shape.replicaAxis())}));
      created.push_back(v.getDefiningOp());
    }
    bool mixed = paramType != type.getElementType();
    if (mixed || reduceType != type.getElementType()) {
      // To the param dtype for the all-gather; its gradient, reduced in
      // the reduce dtype, comes back to the master weights' dtype here
      // (a no-op cast forward when the params are gathered as they are).
      v = nn::CastOp::create(b, arg.getLoc(), localType.clone(paramType), v,
                             TypeAttr());
      created.push_back(v.getDefiningOp());
    }
    int16_t shardAxis = int16_t(shape.shardAxis());
    v = shard::AllGatherOp::create(
        b, arg.getLoc(),
        RankedTensorType::get(padded, mixed ? paramType : type.getElementType()),
        gridRef, b.getDenseI16ArrayAttr({shardAxis}), v, b.getIndexAttr(0));
    created.push_back(v.getDefiningOp());
    // Kernels compute in the param dtype where the target does, else in
    // the master weights' dtype.
    Type gathered = mixed ? paramType : type.getElementType();
    Type computeType =
        targetDesc->computes(rt::dtypeCode(paramType)) ? paramType
                                                       : type.getElementType();
    if (computeType != gathered || reduceType != gathered) {
      // Widened for the kernels where they do not compute in the param
      // dtype (else a no-op cast); either way its gradient is reduced in
      // the reduce dtype.
      v = nn::CastOp::create(b, arg.getLoc(),
                             RankedTensorType::get(padded, computeType), v,
                             TypeAttr::get(reduceType));
      created.push_back(v.getDefiningOp());
    }
    if (padded[0] != type.getShape()[0]) {
      v = nn::SliceOp::create(b, arg.getLoc(), type, v, 0, 0);
      created.push_back(v.getDefiningOp());
    }
    for (Operation *op : created)
      op->setAttr(attrs::kGroup, b.getI64IntegerAttr(group));
    SmallPtrSet<Operation *, 4> except(created.begin(), created.end());
    arg.replaceAllUsesExcept(v, except);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::Regex policy(wrap);
    if (failed(readOptions(module, policy)))
      return signalPassFailure();
    auto fwd = module.lookupSymbol<func::FuncOp>("forward");
    if (!fwd) {
      module.emitError("no model function named 'forward'");
      return signalPassFailure();
    }

    shape.tp = tp;
    FailureOr<FlatSymbolRefAttr> grid = getOrCreateGrid(module, shape);
    if (failed(grid))
      return signalPassFailure();
    OpBuilder b(module.getBodyRegion());
    int64_t S = shape.shards;

    // Groups in the order their parameters appear.
    llvm::StringMap<int64_t> groupIds;
    Block &entry = fwd.getBody().front();
    b.setInsertionPointToStart(&entry);
    SmallVector<Type> argTypes(fwd.getArgumentTypes());
    for (BlockArgument arg : entry.getArguments()) {
      unsigned i = arg.getArgNumber();
      auto name = fwd.getArgAttrOfType<StringAttr>(i, attrs::kParam);
      if (!name)
        continue;
      auto type = cast<RankedTensorType>(arg.getType());
      if (type.getRank() < 1) {
        fwd.emitError("parameter '") << name.str() << "' is a scalar; FSDP "
                                     << "shards on dim 0";
        return signalPassFailure();
      }
      SmallVector<StringRef> match;
      int64_t group = -1;
      if (policy.match(name.getValue(), &match) && match.size() > 1) {
        auto [it, inserted] = groupIds.try_emplace(match[1], groupIds.size());
        group = it->second;
      }
      ArrayRef<int64_t> global = type.getShape();
      int64_t rows = (global[0] + S - 1) / S;
      SmallVector<int64_t> local(global), padded(global);
      local[0] = rows;
      padded[0] = rows * S;
      auto localType = RankedTensorType::get(local, type.getElementType());
      arg.setType(localType);
      argTypes[i] = localType;
      fwd.setArgAttr(i, attrs::kGroup, b.getI64IntegerAttr(group));
      fwd.setArgAttr(i, attrs::kGlobalShape, b.getDenseI64ArrayAttr(global));
      gatherParameter(b, fwd, arg, type, padded, *grid, group);
    }
    fwd.setFunctionType(
        b.getFunctionType(argTypes, fwd.getFunctionType().getResults()));
    // The activations' collectives (tp-partition's, not a group's gathers)
    // sum in the reduce dtype, as the gradients' do.
    fwd.walk([&](Operation *op) {
      if (isa<shard::AllGatherOp, shard::ReduceScatterOp>(op) &&
          !op->hasAttr(attrs::kGroup))
        op->setAttr(attrs::kSumDtype, TypeAttr::get(reduceType));
    });
    // bf16 parameters the target computes on: the model computes in bf16.
    propagateComputeDtype(fwd, *targetDesc);
  }
};

} // namespace
