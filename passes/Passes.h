//===- Passes.h - shardc passes ---------------------------------*- C++ -*-===//
#ifndef SHARDC_PASSES_PASSES_H
#define SHARDC_PASSES_PASSES_H

#include "dialects/fsdp/FSDPDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/rt/RtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "target/Attrs.h"
#include "runtime/abi/abi.h"

namespace shardc {

struct TargetDescription;

/// nn-propagate-dtype on one function (fsdp-shard-parameters runs it on the
/// model function it leaves with bf16 parameters, so that every pass in
/// between verifies).
void propagateComputeDtype(mlir::func::FuncOp fn,
                           const TargetDescription &target);

/// The compiled mesh: the module's `fsdp.mesh` attribute ([R, S] or
/// [R, S, T]), or one rank without it.
abi::MeshGrid compiledMesh(mlir::ModuleOp module);

/// The module's `shard.grid @mesh` for `mesh` (its axes as abi::MeshGrid
/// numbers them) and its `fsdp.mesh` attribute, created at the module's
/// start unless there; the pass that runs first creates them (tp-partition,
/// else fsdp-shard-parameters). Fails, naming both, if the module's
/// compiled mesh is another.
mlir::FailureOr<mlir::FlatSymbolRefAttr>
getOrCreateGrid(mlir::ModuleOp module, const abi::MeshGrid &mesh);

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"



/// The op computing a micro-step's loss (its first result): where forward
/// ends and backward begins. Null when the loss is not computed by an op.
inline mlir::Operation *lossOp(mlir::func::FuncOp microStep) {
  auto ret = llvm::cast<mlir::func::ReturnOp>(
      microStep.getBody().front().getTerminator());
  return ret.getNumOperands() ? ret.getOperand(0).getDefiningOp() : nullptr;
}

using abi::alignTo;

} // namespace shardc

#endif // SHARDC_PASSES_PASSES_H
