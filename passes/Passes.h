//===- Passes.h - shardc passes ---------------------------------*- C++ -*-===//
#ifndef SHARDC_PASSES_PASSES_H
#define SHARDC_PASSES_PASSES_H

#include "dialects/nn/NNDialect.h"
#include "dialects/rt/RtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

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
/// On the model module: a dictionary describing the model (for the manifest).
constexpr llvm::StringLiteral kModel = "nn.model";
/// On a step function: the dictionary the runtime reads to lay out memory.
constexpr llvm::StringLiteral kManifest = "rt.manifest";
/// The symbol of the compiled step and of its manifest.
constexpr llvm::StringLiteral kStepName = "shardc_step";
constexpr llvm::StringLiteral kManifestSymbol = "shardc_manifest";
} // namespace attrs

/// Byte alignment of every buffer in every region.
constexpr int64_t kBufferAlignment = 64;
inline int64_t alignTo(int64_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

} // namespace shardc

#endif // SHARDC_PASSES_PASSES_H
