//===- Driver.cpp - shardc's compilation, from model to executable --------===//
#include "compiler/Driver.h"

#include "compiler/Registration.h"
#include "compiler/Report.h"
#include "compiler/Target.h"
#include "frontends/meta/ModelConfig.h"
#include "frontends/onnx/Importer.h"
#include "runtime/text.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <optional>

using namespace llvm;
using namespace shardc;
using shardc::runtime::printable;

namespace {

Error fail(const Twine &message) { return createStringError(message); }

std::string activity = "starting";
void doing(const Twine &what) { activity = what.str(); }

/// Writes text produced by `print` to `path` ("-": stdout).
template <typename Fn> Error writeText(const std::string &path, Fn print) {
  std::error_code ec;
  ToolOutputFile out(path, ec, sys::fs::OF_Text);
  if (ec)
    return fail("cannot write '" + path + "': " + ec.message());
  print(out.os());
  out.keep();
  return Error::success();
}

/// The forward graph and a description of the model, from an ONNX file or
/// a config.
struct Imported {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string description;
  std::optional<onnx_import::ImportedModel> onnx;
};

Expected<Imported> importModel(mlir::MLIRContext &context,
                               const ModelOptions &opts,
                               const TargetDescription &target) {
  Imported out;
  if (opts.isOnnx()) {
    onnx_import::ImportOptions options;
    options.microBatch = opts.microBatchGiven ? opts.microBatch : 0;
    options.seqLen = opts.seqLen;
    options.training = !opts.infer;
    options.loss = opts.loss;
    options.frozen = opts.frozen;
    options.trainRegex = opts.train;
    options.bindings = opts.bindings;
    options.target = &target;
    options.allowExternalDataOutside = opts.allowExternalDataOutside;
    options.foldBudgetBytes = opts.foldBudgetMiB << 20;
    auto imported = onnx_import::importModel(context, opts.model, options);
    if (!imported)
      return imported.takeError();
    out.module = std::move(imported->module);
    out.description = imported->summary;
    out.onnx = std::move(*imported);
    return out;
  }
  Expected<meta::ModelConfig> config = meta::loadModelConfig(opts.model);
  if (!config)
    return config.takeError();
  for (const std::string &note : config->notes)
    llvm::errs() << "shardc: note: " << printable(config->source) << ": "
                 << printable(note) << "\n";
  int64_t seqLen =
      opts.seqLen ? opts.seqLen : std::min<int64_t>(config->maxPositions, 1024);
  auto built =
      meta::buildForwardModule(context, *config, opts.microBatch, seqLen);
  if (!built)
    return built.takeError();
  out.module = std::move(*built);
  out.description =
      (config->family == meta::Family::GPT2 ? "gpt2" : "llama") +
      (", " + Twine(config->numLayers) + " layers, micro-batch " +
       Twine(opts.microBatch) + " x " + Twine(seqLen) + " tokens")
          .str();
  return out;
}

/// An ONNX executable's companions beside it: its initial weights and the
/// graph that --export-onnx writes the trained weights into; the manifest
/// names them.
Error writeSideFiles(mlir::ModuleOp module, const onnx_import::ImportedModel &m,
                     const std::string &output) {
  std::string weightsFile = output + ".weights.safetensors";
  std::string graphFile = output + ".graph.onnx";
  if (Error e = onnx_import::writeWeights(weightsFile, m.weights))
    return e;
  std::error_code ec;
  raw_fd_ostream graphOut(graphFile, ec);
  if (ec)
    return fail("cannot write '" + graphFile + "': " + ec.message());
  graphOut << m.graphTemplate;
  mlir::MLIRContext *context = module.getContext();
  auto info = module->getAttrOfType<mlir::DictionaryAttr>("nn.model");
  mlir::NamedAttrList entries(info);
  mlir::Builder attrs(context);
  entries.set("init_file", attrs.getStringAttr(sys::path::filename(weightsFile)));
  entries.set("graph_file", attrs.getStringAttr(sys::path::filename(graphFile)));
  module->setAttr("nn.model", entries.getDictionary(context));
  return Error::success();
}

} // namespace

const std::string &shardc::compileActivity() { return activity; }

Error shardc::compile(const DriverOptions &options) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();

  const ModelOptions &model = options.model;
  const OutputOptions &out = options.output;
  doing("importing " + model.model);
  Expected<Imported> imported = importModel(context, model, *out.targetDesc);
  if (!imported)
    return imported.takeError();
  mlir::ModuleOp module = *imported->module;
  std::string path = options.outputPath();
  if (imported->onnx && out.emit == Emit::Exe)
    if (Error e = writeSideFiles(module, *imported->onnx, path))
      return e;
  if (out.emit == Emit::MLIR)
    return writeText(path, [&](raw_ostream &os) { module->print(os); });

  // One pass manager up to the stage --emit asks for.
  doing("compiling " + model.model);
  PipelineOptions pipeline = options.pipeline();
  mlir::PassManager pm(&context);
  buildTrainingPipeline(pm, pipeline);
  if (out.emit != Emit::Train)
    buildNNToRtPipeline(pm, pipeline);
  if (failed(pm.run(module)))
    return fail("compiling " + model.model + " failed");
  if (out.emit == Emit::Train)
    return writeText(path, [&](raw_ostream &os) { module->print(os); });
  if (out.report)
    printReport(module, outs());
  if (out.emit == Emit::Rt)
    return writeText(path, [&](raw_ostream &os) { module->print(os); });

  // rt -> launch tables (LLVM globals) -> LLVM IR -> object -> executable.
  doing("lowering " + model.model + " to LLVM");
  mlir::PassManager llvmPM(&context);
  buildRtToLLVMPipeline(llvmPM);
  if (failed(llvmPM.run(module)))
    return fail("lowering " + model.model + " to LLVM failed");
  LLVMContext llvmContext;
  std::unique_ptr<Module> llvmModule = translateToLLVMIR(module, llvmContext);
  if (!llvmModule)
    return fail("translating " + model.model + " to LLVM IR failed");
  if (out.emit == Emit::LLVM)
    return writeText(path,
                     [&](raw_ostream &os) { llvmModule->print(os, nullptr); });
  std::string error;
  if (out.emit == Emit::Obj)
    return emitObjectFile(*llvmModule, path, error) ? Error::success()
                                                    : fail(error);
  doing("linking " + path);
  SmallString<128> objectPath;
  if (std::error_code ec =
          sys::fs::createTemporaryFile("shardc-step", "o", objectPath))
    return fail("cannot create a temporary object file: " + ec.message());
  FileRemover removeObject(objectPath);
  if (!emitObjectFile(*llvmModule, objectPath, error) ||
      !linkExecutable(objectPath, path, *out.targetDesc,
                      options.training.meshShape.ranks(),
                      options.training.offload == abi::kOffloadCpu, error))
    return fail(error);
  const TrainingOptions &t = options.training;
  errs() << "shardc: compiled " << printable(model.model) << " ("
         << printable(imported->description) << ", "
         << (model.infer ? "inference" : t.optimizer)
         << (t.recompute == "block" ? ", recompute block" : "")
         << (t.mesh != "1" ? ", mesh " + t.mesh : std::string())
         << (out.target != "cpu" ? ", target " + out.target +
                                        (out.cudaEmulation ? " (emulated)"
                                                           : "")
                                  : std::string())
         << ") -> " << printable(path) << "\n";
  // Tensor names come from the model file: printable, one line each.
  auto names = [](const std::vector<std::string> &list) {
    std::string text;
    for (const std::string &name : list)
      text += (text.empty() ? "" : ", ") + printable(name);
    return text;
  };
  if (imported->onnx && !model.infer) {
    errs() << "shardc: trains " << imported->onnx->trained.size()
           << " initializers: " << names(imported->onnx->trained) << "\n";
    if (!imported->onnx->tied.empty())
      errs() << "shardc: tied: " << names(imported->onnx->tied) << "\n";
  }
  return Error::success();
}
