//===- shardc.cpp - the shardc compiler driver ----------------------------===//
//
//   shardc [MODEL] [-o FILE] [--emit mlir|rt|llvm|obj|exe]
//          [--seq-len N] [--micro-batch N]
//
// MODEL is a preset name, a Hugging Face config.json (or its directory) or
// an ONNX model (*.onnx).
//
//===----------------------------------------------------------------------===//
#include "compiler/Pipelines.h"
#include "compiler/Registration.h"
#include "compiler/Report.h"
#include "compiler/Target.h"
#include "frontends/meta/ModelConfig.h"
#include "frontends/onnx/Importer.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {

enum class Emit { MLIR, Train, Rt, LLVM, Obj, Exe };

cl::OptionCategory category("shardc options");

std::string presetList() {
  std::string s;
  for (const std::string &name : shardc::meta::presetNames())
    s += (s.empty() ? "" : ", ") + name;
  return s;
}

cl::opt<std::string> modelArg(cl::Positional, cl::init("tiny"),
                              cl::desc("<model: preset name, config.json or "
                                       "model.onnx>"),
                              cl::cat(category));
cl::opt<std::string> outputArg("o", cl::desc("Output file (default: 'train' "
                                             "for exe, 'model.o' for obj, "
                                             "stdout for text)"),
                               cl::value_desc("file"), cl::cat(category));
cl::opt<Emit> emitArg(
    "emit", cl::desc("What to produce"), cl::init(Emit::Exe),
    cl::values(clEnumValN(Emit::MLIR, "mlir", "the nn forward graph (MLIR)"),
               clEnumValN(Emit::Train, "train",
                          "the training step in the nn dialect (MLIR)"),
               clEnumValN(Emit::Rt, "rt", "the scheduled rt program (MLIR)"),
               clEnumValN(Emit::LLVM, "llvm", "LLVM IR"),
               clEnumValN(Emit::Obj, "obj", "an object file"),
               clEnumValN(Emit::Exe, "exe", "a training executable")),
    cl::cat(category));
cl::opt<int64_t> seqLenArg("seq-len",
                           cl::desc("Tokens per sequence (default: the "
                                    "model's positions, at most 1024)"),
                           cl::init(0), cl::cat(category));
cl::opt<int64_t> microBatchArg("micro-batch",
                               cl::desc("Sequences per micro-batch (ONNX: "
                                        "re-specializes dim 0 of the inputs; "
                                        "default: the model's)"),
                               cl::init(4), cl::cat(category));
cl::opt<std::string> lossArg(
    "loss",
    cl::desc("ONNX: the training loss: cross_entropy[:OUTPUT] (next-token "
             "cross-entropy on the logits output, by default 'logits' or the "
             "first output) or output:OUTPUT (a scalar output is the loss)"),
    cl::init("cross_entropy"), cl::cat(category));
cl::opt<bool> inferArg(
    "infer",
    cl::desc("ONNX: compile the graph as it is (no loss, no training) into "
             "an executable that reads its inputs and writes its outputs"),
    cl::init(false), cl::cat(category));
cl::list<std::string> bindArg(
    "bind",
    cl::desc("ONNX: fix graph input NAME at compile time to the TensorProto "
             "in FILE (inputs that determine shapes)"),
    cl::value_desc("NAME=FILE"), cl::cat(category));
cl::opt<bool> fusePatternsArg(
    "fuse-patterns",
    cl::desc("Rewrite decomposed GELU, layer norm and attention (as exporters "
             "write them) into the fused ops; =false keeps the graph's own "
             "ops"),
    cl::init(true), cl::cat(category));
cl::opt<bool> supportedOpsArg(
    "supported-ops", cl::desc("Print the ONNX op types shardc imports and exit"),
    cl::init(false), cl::cat(category));
cl::list<std::string> freezeArg(
    "freeze", cl::CommaSeparated,
    cl::desc("ONNX: initializers kept constant instead of trained (besides "
             "non-finite, integer and scalar ones)"),
    cl::value_desc("name,..."), cl::cat(category));
cl::opt<std::string> recomputeArg(
    "recompute",
    cl::desc("Activations recomputed in backward instead of kept: none, or "
             "block (each transformer block's, activation checkpointing)"),
    cl::init("none"), cl::cat(category));
cl::opt<std::string> meshArg(
    "mesh",
    cl::desc("Device mesh: N (fully sharded over N ranks) or RxS (HSDP: "
             "replicate R, shard S); 1 = one rank"),
    cl::init("1"), cl::cat(category));
cl::opt<std::string> wrapArg(
    "wrap",
    cl::desc("FSDP wrap policy: a regex whose first capture names a "
             "parameter's group (default: one group per transformer block; "
             "the rest is the root group)"),
    cl::init(""), cl::cat(category));
cl::opt<std::string> reshardArg(
    "reshard-after-forward",
    cl::desc("true: free gathered parameters after forward and gather again "
             "in backward (root group: false, as FSDP2); false: keep them; "
             "N: keep them sharded over groups of N ranks and gather within "
             "the group in backward"),
    cl::init("true"), cl::cat(category));
cl::opt<int64_t> prefetchForwardArg(
    "prefetch-forward", cl::desc("All-gathers issued this many groups ahead in forward"),
    cl::init(1), cl::cat(category));
cl::opt<int64_t> prefetchBackwardArg(
    "prefetch-backward", cl::desc("All-gathers issued this many groups ahead in backward"),
    cl::init(1), cl::cat(category));
cl::opt<std::string> paramDtypeArg(
    "param-dtype",
    cl::desc("Mixed precision: the dtype parameters are all-gathered and "
             "used in (f32 or bf16); master weights stay f32"),
    cl::init("f32"), cl::cat(category));
cl::opt<std::string> reduceDtypeArg(
    "reduce-dtype",
    cl::desc("Mixed precision: the dtype gradients are reduce-scattered in "
             "(f32 or bf16)"),
    cl::init("f32"), cl::cat(category));
cl::opt<std::string> outputDtypeArg(
    "output-dtype",
    cl::desc("Mixed precision: the dtype of the model's output, the loss "
             "(f32)"),
    cl::init("f32"), cl::cat(category));
cl::opt<std::string> gradSyncArg(
    "grad-sync",
    cl::desc("With --grad-accum on a mesh: 'every' micro-batch reduces its "
             "gradients, or only the 'last' one (unsharded gradients are "
             "accumulated until then, FSDP2's set_requires_gradient_sync)"),
    cl::init("every"), cl::cat(category));
cl::opt<bool> reportArg(
    "report",
    cl::desc("Print per-rank memory (parameters, gradients, optimizer state, "
             "gathered parameters, activations, planned peak) and the bytes "
             "each collective moves per mesh axis, then compile as asked"),
    cl::init(false), cl::cat(category));
cl::opt<std::string> optimizerArg("optimizer",
                                  cl::desc("The compiled optimizer: adamw or "
                                           "sgd (with momentum)"),
                                  cl::init("adamw"), cl::cat(category));

int fail(const Twine &message) {
  WithColor::error(errs(), "shardc") << message << "\n";
  return 1;
}

/// Writes text produced by `print` to the output file or stdout.
template <typename Fn> int writeText(Fn print) {
  std::string path = outputArg.empty() ? "-" : outputArg.getValue();
  std::error_code ec;
  ToolOutputFile out(path, ec, sys::fs::OF_Text);
  if (ec)
    return fail("cannot write '" + path + "': " + ec.message());
  print(out.os());
  out.keep();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter([](raw_ostream &os) { os << "shardc 0.1\n"; });
  std::string overview =
      "shardc: compile a transformer into a training executable\n\n"
      "  shardc tiny -o train && ./train --steps 10\n\n"
      "MODEL is a preset (" +
      presetList() +
      ") or a Hugging Face config.json (model_type gpt2 or llama) or a "
      "directory holding one, or an ONNX model (*.onnx, opsets 13 to 21). "
      "The default is 'tiny'.\n";
  cl::ParseCommandLineOptions(argc, argv, overview);

  if (supportedOpsArg) {
    for (const std::string &op : shardc::onnx_import::supportedOps())
      outs() << op << "\n";
    return 0;
  }
  if (recomputeArg != "none" && recomputeArg != "block")
    return fail("--recompute must be 'none' or 'block', got '" + recomputeArg +
                "'");
  if (optimizerArg != "adamw" && optimizerArg != "sgd")
    return fail("--optimizer must be 'adamw' or 'sgd', got '" + optimizerArg +
                "'");
  unsigned reshardGroup;
  if (reshardArg != "true" && reshardArg != "false" &&
      (StringRef(reshardArg).getAsInteger(10, reshardGroup) || reshardGroup == 0))
    return fail("--reshard-after-forward must be true, false or a number of "
                "ranks N, got '" + reshardArg + "'");
  if (prefetchForwardArg < 0 || prefetchBackwardArg < 0)
    return fail("--prefetch-forward and --prefetch-backward must be >= 0");
  for (const auto &[flag, value] :
       {std::pair<StringRef, StringRef>{"--param-dtype", paramDtypeArg},
        {"--reduce-dtype", reduceDtypeArg}})
    if (value != "f32" && value != "bf16")
      return fail(flag + " must be f32 or bf16, got '" + value + "'");
  if (outputDtypeArg != "f32")
    return fail("--output-dtype must be f32: the loss is computed and "
                "reported in f32, got '" + outputDtypeArg + "'");
  std::string regexError;
  if (!wrapArg.empty() && !Regex(wrapArg).isValid(regexError))
    return fail("--wrap '" + wrapArg + "' is not a valid regex: " + regexError);
  {
    SmallVector<StringRef> dims;
    StringRef(meshArg).split(dims, 'x');
    unsigned v, shards = 0;
    if (dims.size() > 2 ||
        llvm::any_of(dims, [&](StringRef d) { return d.getAsInteger(10, v) || v == 0; }))
      return fail("--mesh must be N or RxS with positive sizes, got '" + meshArg + "'");
    dims.back().getAsInteger(10, shards);
    if (!StringRef(reshardArg).getAsInteger(10, reshardGroup) &&
        shards % reshardGroup != 0)
      return fail("--reshard-after-forward=" + reshardArg +
                  " must divide the " + Twine(shards) +
                  " ranks of the shard axis");
  }
  if (gradSyncArg != "every" && gradSyncArg != "last")
    return fail("--grad-sync must be 'every' or 'last', got '" + gradSyncArg + "'");
  if (gradSyncArg == "last" && meshArg == "1")
    return fail("--grad-sync=last needs a mesh (--mesh): one rank reduces nothing");
  shardc::PipelineOptions pipeline;
  pipeline.training = !inferArg;
  pipeline.fusePatterns = fusePatternsArg;
  pipeline.gradSyncOnce = gradSyncArg == "last";
  pipeline.paramDtype = paramDtypeArg;
  pipeline.reduceDtype = reduceDtypeArg;
  pipeline.recompute = recomputeArg;
  pipeline.optimizer = optimizerArg;
  pipeline.mesh = meshArg;
  pipeline.wrap = wrapArg;
  pipeline.reshardAfterForward = reshardArg;
  pipeline.prefetchForward = prefetchForwardArg;
  pipeline.prefetchBackward = prefetchBackwardArg;

  mlir::DialectRegistry registry;
  shardc::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();

  // The forward graph, from a config (meta frontend) or an ONNX file.
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string source, description;
  std::optional<shardc::onnx_import::ImportedModel> onnxModel;
  bool isOnnx = StringRef(modelArg).ends_with(".onnx");
  if (isOnnx) {
    shardc::onnx_import::ImportOptions options;
    options.microBatch = microBatchArg.getNumOccurrences() ? microBatchArg : 0;
    options.seqLen = seqLenArg;
    options.training = !inferArg;
    options.loss = lossArg;
    options.frozen.assign(freezeArg.begin(), freezeArg.end());
    for (const std::string &bind : bindArg) {
      auto [name, file] = StringRef(bind).split('=');
      if (name.empty() || file.empty())
        return fail("--bind expects NAME=FILE, got '" + bind + "'");
      options.bindings[name.str()] = file.str();
    }
    auto imported = shardc::onnx_import::importModel(context, modelArg, options);
    if (!imported)
      return fail(toString(imported.takeError()));
    module = std::move(imported->module);
    source = modelArg;
    description = imported->summary;
    onnxModel = std::move(*imported);
  } else {
    if (inferArg || bindArg.getNumOccurrences() || freezeArg.getNumOccurrences() ||
        lossArg.getNumOccurrences())
      return fail("--infer, --bind, --freeze and --loss apply to ONNX models");
    Expected<shardc::meta::ModelConfig> config =
        shardc::meta::loadModelConfig(modelArg);
    if (!config)
      return fail(toString(config.takeError()));
    int64_t seqLen = seqLenArg ? seqLenArg.getValue()
                               : std::min<int64_t>(config->maxPositions, 1024);
    auto built = shardc::meta::buildForwardModule(context, *config,
                                                  microBatchArg, seqLen);
    if (!built)
      return fail(toString(built.takeError()));
    module = std::move(*built);
    source = modelArg;
    description = (config->family == shardc::meta::Family::GPT2 ? "gpt2" : "llama") +
                  (", " + Twine(config->numLayers) + " layers, micro-batch " +
                   Twine(microBatchArg) + " x " + Twine(seqLen) + " tokens")
                      .str();
  }
  if (inferArg && (meshArg != "1" || recomputeArg != "none"))
    return fail("--infer compiles for one rank without recomputation");
  std::string output = outputArg.empty() ? "train" : outputArg.getValue();
  if (onnxModel && emitArg == Emit::Exe) {
    // The executable's companions: its initial weights and the graph that
    // --export-onnx writes the trained weights into.
    std::string weightsFile = output + ".weights.safetensors";
    std::string graphFile = output + ".graph.onnx";
    if (Error e = shardc::onnx_import::writeWeights(weightsFile, onnxModel->weights))
      return fail(toString(std::move(e)));
    std::error_code ec;
    raw_fd_ostream graphOut(graphFile, ec);
    if (ec)
      return fail("cannot write '" + graphFile + "': " + ec.message());
    graphOut << onnxModel->graphTemplate;
    auto info = (*module)->getAttrOfType<mlir::DictionaryAttr>("nn.model");
    mlir::NamedAttrList entries(info);
    mlir::Builder attrs(&context);
    entries.set("init_file", attrs.getStringAttr(sys::path::filename(weightsFile)));
    entries.set("graph_file", attrs.getStringAttr(sys::path::filename(graphFile)));
    (*module)->setAttr("nn.model", entries.getDictionary(&context));
  }
  if (emitArg == Emit::MLIR)
    return writeText([&](raw_ostream &os) { (*module)->print(os); });

  mlir::PassManager pm(&context);
  if (emitArg == Emit::Train) {
    if (inferArg)
      return fail("--emit train: an --infer build has no training step");
    shardc::buildTrainingPipeline(pm, pipeline);
    if (failed(pm.run(*module)))
      return fail("building the training step of " + source + " failed");
    return writeText([&](raw_ostream &os) { (*module)->print(os); });
  }
  shardc::buildTrainingPipeline(pm, pipeline);
  shardc::buildNNToRtPipeline(pm);
  if (failed(pm.run(*module)))
    return fail("lowering " + source + " failed");
  if (reportArg)
    shardc::printReport(*module, outs());
  if (emitArg == Emit::Rt)
    return writeText([&](raw_ostream &os) { (*module)->print(os); });
  mlir::PassManager llvmPM(&context);
  shardc::buildRtToLLVMPipeline(llvmPM);
  if (failed(llvmPM.run(*module)))
    return fail("lowering " + source + " to LLVM failed");

  LLVMContext llvmContext;
  std::unique_ptr<Module> llvmModule =
      shardc::translateToLLVMIR(*module, llvmContext);
  if (!llvmModule)
    return fail("translating " + source + " to LLVM IR failed");
  if (emitArg == Emit::LLVM)
    return writeText([&](raw_ostream &os) { llvmModule->print(os, nullptr); });

  std::string error;
  if (emitArg == Emit::Obj) {
    std::string path = outputArg.empty() ? "model.o" : outputArg.getValue();
    if (!shardc::emitObjectFile(*llvmModule, path, error))
      return fail(error);
    return 0;
  }

  SmallString<128> objectPath;
  if (std::error_code ec =
          sys::fs::createTemporaryFile("shardc-step", "o", objectPath))
    return fail("cannot create a temporary object file: " + ec.message());
  FileRemover removeObject(objectPath);
  if (!shardc::emitObjectFile(*llvmModule, objectPath, error))
    return fail(error);
  if (!shardc::linkExecutable(objectPath, output, error))
    return fail(error);
  errs() << "shardc: compiled " << source << " (" << description << ", "
         << (inferArg ? "inference" : optimizerArg.getValue())
         << (recomputeArg == "block" ? ", recompute block" : "")
         << (meshArg != "1" ? ", mesh " + meshArg : std::string()) << ") -> "
         << output << "\n";
  return 0;
}
