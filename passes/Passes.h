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
#include "runtime/abi/abi.h"

namespace shardc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Attribute names shared by the frontends, the passes and the runtime.
namespace attrs {
/// On a model function argument: the parameter's checkpoint name.
constexpr llvm::StringLiteral kParam = "nn.param";
/// On a parameter: "normal" (with kInitStd), "zeros" or "ones".
constexpr llvm::StringLiteral kInit = "nn.init";
constexpr llvm::StringLiteral kInitStd = "nn.init_std";
/// On a model function argument: the input's name ("tokens", "targets").
constexpr llvm::StringLiteral kInput = "nn.input";
/// On a model function argument: persistent training state (gradient
/// accumulators "grad.<param>", optimizer states "exp_avg.<param>", ...).
constexpr llvm::StringLiteral kState = "nn.state";
/// On a model function result: written to the io region under this name.
constexpr llvm::StringLiteral kOutput = "nn.output";
/// On a model function result: the index of the argument it updates in place.
constexpr llvm::StringLiteral kUpdates = "nn.updates";
/// On a forward op: the transformer block it belongs to.
constexpr llvm::StringLiteral kBlock = "nn.block";
/// On a sharded parameter argument: its group (-1: the root group) and its
/// global shape; on gathers: the group they gather.
constexpr llvm::StringLiteral kGroup = "fsdp.group";
constexpr llvm::StringLiteral kGlobalShape = "fsdp.shape";
/// On the module: the mesh shape [R, S] (R = 1 without replication).
constexpr llvm::StringLiteral kMesh = "fsdp.mesh";
/// The name of the device grid.
constexpr llvm::StringLiteral kGridName = "mesh";
/// On the model module: a dictionary describing the model (for the manifest).
constexpr llvm::StringLiteral kModel = "nn.model";
/// On the lowered module: the dictionary the runtime reads to lay out memory.
constexpr llvm::StringLiteral kManifest = "rt.manifest";
/// The prefix of compiled entry points (shardc_micro_step, ...).
constexpr llvm::StringLiteral kEntryPrefix = "shardc_";
/// On a lowered step function: the bytes of arena it needs.
constexpr llvm::StringLiteral kArenaBytes = "rt.arena_bytes";
/// On a lowered step function: the peak bytes of gathered parameters.
constexpr llvm::StringLiteral kPeakGatheredBytes = "rt.peak_gathered_bytes";
} // namespace attrs


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
