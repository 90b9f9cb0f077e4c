//===- Target.cpp - LLVM IR, object files and the link step ---------------===//
#include "compiler/Target.h"

#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>

#ifndef SHARDC_RUNTIME_DIR
#error "SHARDC_RUNTIME_DIR must name the directory of the runtime libraries"
#endif

using namespace shardc;

static std::unique_ptr<llvm::TargetMachine> hostTargetMachine(std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, "generic", "", options, llvm::Reloc::PIC_));
}

std::unique_ptr<llvm::Module>
shardc::translateToLLVMIR(mlir::ModuleOp module, llvm::LLVMContext &llvmContext) {
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(module, llvmContext, "shardc_step");
  if (!llvmModule)
    return nullptr;
  std::string error;
  if (auto tm = hostTargetMachine(error)) {
    llvmModule->setTargetTriple(tm->getTargetTriple());
    llvmModule->setDataLayout(tm->createDataLayout());
  }
  return llvmModule;
}

bool shardc::emitObjectFile(llvm::Module &module, llvm::StringRef path,
                            std::string &error) {
  std::unique_ptr<llvm::TargetMachine> tm = hostTargetMachine(error);
  if (!tm)
    return false;
  module.setTargetTriple(tm->getTargetTriple());
  module.setDataLayout(tm->createDataLayout());
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return false;
  }
  llvm::legacy::PassManager passes;
  if (tm->addPassesToEmitFile(passes, out, nullptr,
                              llvm::CodeGenFileType::ObjectFile)) {
    error = "the host target cannot emit object files";
    return false;
  }
  passes.run(module);
  out.flush();
  return true;
}

static bool link(llvm::StringRef objectPath, llvm::StringRef outputPath,
                 const TargetDescription &target, int64_t ranks,
                 bool hostEntries, bool shared, std::string &error) {
  const char *cxxEnv = std::getenv("SHARDC_CXX");
  std::string cxxName = cxxEnv && *cxxEnv ? cxxEnv : "c++";
  llvm::ErrorOr<std::string> cxx = llvm::sys::findProgramByName(cxxName);
  if (!cxx) {
    error = "cannot find the C++ compiler driver '" + cxxName +
            "' to link with (set SHARDC_CXX)";
    return false;
  }
  const char *dirEnv = std::getenv("SHARDC_RUNTIME_DIR");
  std::string runtimeDir = dirEnv && *dirEnv ? dirEnv : SHARDC_RUNTIME_DIR;
  llvm::SmallVector<std::string> args = {*cxx, objectPath.str()};
  if (shared)
    args.push_back("-shared");
  // The trainer's main is the first library; a shared library leaves it out.
  std::vector<std::string> libs = target.runtimeLibraries;
  if (shared && !libs.empty())
    libs.erase(libs.begin());
  bool mpi = ranks != 1 || target.collectivesOnOneRank || hostEntries;
  if (mpi)
    libs.insert(libs.end(), target.mpiLibraries.begin(),
                target.mpiLibraries.end());
  else
    libs.push_back(target.localMeshLibrary);
  for (const std::string &lib : libs) {
    llvm::SmallString<256> path(runtimeDir);
    llvm::sys::path::append(path, lib);
    if (!llvm::sys::fs::exists(path)) {
      error = "runtime library '" + std::string(path) +
              "' not found (set SHARDC_RUNTIME_DIR)";
      return false;
    }
    args.push_back(std::string(path));
  }
  for (const std::string &flag : target.linkFlags)
    args.push_back(flag);
  if (hostEntries)
    for (const std::string &flag : target.hostEntryLinkFlags)
      args.push_back(flag);
  if (mpi)
    for (const std::string &flag : target.mpiLinkFlags)
      args.push_back(flag);
  args.push_back("-o");
  args.push_back(outputPath.str());
  llvm::SmallVector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*cxx, argRefs, std::nullopt, {}, 0, 0,
                                     &message);
  if (rc != 0) {
    error = "linking '" + outputPath.str() + "' failed" +
            (message.empty() ? "" : ": " + message);
    return false;
  }
  return true;
}

bool shardc::linkExecutable(llvm::StringRef objectPath,
                            llvm::StringRef outputPath,
                            const TargetDescription &target, int64_t ranks,
                            bool hostEntries, std::string &error) {
  return link(objectPath, outputPath, target, ranks, hostEntries,
              /*shared=*/false, error);
}

bool shardc::linkSharedLibrary(llvm::StringRef objectPath,
                               llvm::StringRef outputPath,
                               const TargetDescription &target,
                               std::string &error) {
  return link(objectPath, outputPath, target, /*ranks=*/0,
              /*hostEntries=*/false, /*shared=*/true, error);
}
