//===- Target.h - LLVM IR, object files and the link step -------*- C++ -*-===//
#ifndef SHARDC_COMPILER_TARGET_H
#define SHARDC_COMPILER_TARGET_H

#include "target/TargetDescription.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <memory>
#include <string>

namespace shardc {

/// Translates a module in the LLVM dialect to LLVM IR for the host target.
/// Reports failures as diagnostics on the module.
std::unique_ptr<llvm::Module> translateToLLVMIR(mlir::ModuleOp module,
                                                llvm::LLVMContext &llvmContext);

/// Writes `module` as a relocatable (position-independent) object file for
/// the host. On failure returns false and sets `error`.
bool emitObjectFile(llvm::Module &module, llvm::StringRef path,
                    std::string &error);

/// Links a compiled step object with the runtime of `target` into an
/// executable by running the system C++ compiler driver (`$SHARDC_CXX`,
/// else `c++`), with the target's libraries and link line, for a mesh of
/// `ranks` (one rank of a target without collectives: no MPI). With
/// `hostEntries` (--offload=cpu) it links the CPU backend, which runs them,
/// and MPI.
bool linkExecutable(llvm::StringRef objectPath, llvm::StringRef outputPath,
                    const TargetDescription &target, int64_t ranks,
                    bool hostEntries, std::string &error);

/// Links a compiled step object with the runtime's kernels (not its main)
/// into a shared library, for tools and tests that drive the entry points
/// themselves.
bool linkSharedLibrary(llvm::StringRef objectPath, llvm::StringRef outputPath,
                       const TargetDescription &target, std::string &error);

} // namespace shardc

#endif // SHARDC_COMPILER_TARGET_H
