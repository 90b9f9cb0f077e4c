//===- Driver.cpp - shardc's compilation, from model to executable --------===//
#include "compiler/Driver.h"

#include "compiler/Registration.h"
#include "compiler/Report.h"
#include "compiler/Target.h"
#include "frontends/meta/ModelConfig.h"
#include "frontends/onnx/Importer.h"
#include "runtime/text.h"
#include "target/Machine.h"
#include "target/Sharding.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cmath>
#include <optional>
#include <set>

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
    options.retieTransposes = opts.retieHead;
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
  // The config's own model_type (qwen2, mistral), not the family it is
  // built as.
  std::string type = !config->modelType.empty() ? config->modelType
                     : config->family == meta::Family::GPT2 ? "gpt2"
                                                             : "llama";
  out.description =
      type + (", " + Twine(config->numLayers) + " layers, micro-batch " +
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

namespace {

/// The model imported and compiled through the pipeline up to what
/// `--emit` asks (mlir, train or rt and beyond), into `module`.
Error lowerModule(mlir::MLIRContext &context, const DriverOptions &options,
                  mlir::OwningOpRef<mlir::ModuleOp> &owned,
                  std::optional<Imported> &importedOut, bool writeFiles) {
  const ModelOptions &model = options.model;
  const OutputOptions &out = options.output;
  doing("importing " + model.model);
  Expected<Imported> imported = importModel(context, model, *out.targetDesc);
  if (!imported)
    return imported.takeError();
  mlir::ModuleOp module = *imported->module;
  std::string path = options.outputPath();
  if (writeFiles && imported->onnx && out.emit == Emit::Exe)
    if (Error e = writeSideFiles(module, *imported->onnx, path))
      return e;
  if (out.emit != Emit::MLIR) {
    // One pass manager up to the stage --emit asks for.
    doing("compiling " + model.model);
    PipelineOptions pipeline = options.pipeline();
    mlir::PassManager pm(&context);
    buildTrainingPipeline(pm, pipeline);
    if (out.emit != Emit::Train)
      buildNNToRtPipeline(pm, pipeline);
    if (failed(pm.run(module)))
      return fail("compiling " + model.model + " failed");
  }
  owned = std::move(imported->module);
  importedOut = std::move(*imported);
  return Error::success();
}

/// One plan --plan=auto weighs.
struct Candidate {
  int64_t tp;
  std::string mesh, recompute, reshard;
  int64_t prefetch, microBatch, gradAccum;
  double seconds = 0, tokensPerSecond = 0;
  int64_t peak = 0;
};

/// The GPUs of a node on --predict's machine (--gpus-per-node overrides a
/// bundled one's, as rt-predict does); 8 where the machine does not load
/// (rt-predict then names the fault).
int64_t gpusPerNode(const PredictOptions &predict) {
  Machine machine;
  std::string error;
  if (!loadMachine(predict.machine, machine, error))
    return 8;
  machine.setGpusPerNode(predict.gpusPerNode);
  return machine.gpusPerNode;
}

/// The tp degrees --plan=auto weighs: 1, 2, 4 and 8 where they divide the
/// ranks of a replica and fit in a node, and the given one. Only the given
/// one where the other flags refuse tp (said once, with the reason).
std::vector<int64_t> tpDegrees(const DriverOptions &options) {
  DriverOptions probe = options;
  probe.training.tp = 2;
  probe.predict.plan = "manual";
  if (Error e = probe.checkTpSupported()) {
    errs() << "shardc: --plan=auto: no tp candidates: "
           << toString(std::move(e)) << "\n";
    return {options.training.tp};
  }
  const MeshShape &mesh = options.training.meshShape;
  int64_t perReplica = mesh.shards * mesh.tp, perNode = gpusPerNode(options.predict);
  std::vector<int64_t> degrees;
  for (int64_t t : {1, 2, 4, 8})
    if (perReplica % t == 0 && t <= perNode)
      degrees.push_back(t);
  if (!llvm::is_contained(degrees, mesh.tp))
    degrees.push_back(mesh.tp);
  llvm::sort(degrees);
  return degrees;
}

/// --plan=auto's candidates at tp degree `t`: the ranks of a replica split
/// into t-way tp groups, the global batch kept. Each data-parallel rank's
/// sequences are run in a micro-batch (the given --grad-accum's share of
/// them) and its halvings that divide them, with --grad-accum making up
/// the rest; recompute none, selective and block; with more than one
/// FSDP rank, reshard after forward or not, and prefetch depths 1 and 2.
/// None where the global batch does not split over the data-parallel ranks.
std::vector<Candidate> candidatesAt(const DriverOptions &options, int64_t t) {
  const ModelOptions &model = options.model;
  const MeshShape &given = options.training.meshShape;
  // The global batch is split over the data-parallel ranks (replicas x
  // shards); the ranks of a tp group share their sequences.
  int64_t sequences = model.microBatch * options.predict.gradAccum *
                      given.replicas * given.shards;
  int64_t shards = given.shards * given.tp / t;
  int64_t dataRanks = given.replicas * shards;
  if (sequences % dataRanks) {
    errs() << "shardc: --plan=auto: --tp " << t << " skipped: the global "
           << "batch of " << sequences << " sequences does not split over "
           << dataRanks << " data-parallel ranks\n";
    return {};
  }
  int64_t perRank = sequences / dataRanks;
  int64_t top = perRank % options.predict.gradAccum == 0
                    ? perRank / options.predict.gradAccum
                    : perRank;
  // An ONNX model's batch may be fixed by the file: only the given one.
  std::vector<int64_t> microBatches = {top};
  if (!model.isOnnx())
    for (int64_t mb = top / 2; mb >= 1 && microBatches.size() < 3; mb /= 2)
      if (perRank % mb == 0)
        microBatches.push_back(mb);
  std::vector<std::string> reshards = {"true"};
  std::vector<int64_t> prefetches = {options.training.prefetchForward};
  if (given.replicas * shards > 1) {
    reshards = {"true", "false"};
    prefetches = {1, 2};
  }
  std::string mesh = given.replicas > 1 ? std::to_string(given.replicas) +
                                              "x" + std::to_string(shards)
                                        : std::to_string(shards);
  std::vector<Candidate> out;
  for (const char *recompute : {"none", "selective", "block"})
    for (const std::string &reshard : reshards)
      for (int64_t prefetch : prefetches)
        for (int64_t mb : microBatches)
          out.push_back({t, mesh, recompute, reshard, prefetch, mb,
                         perRank / mb});
  return out;
}

/// `options` with candidate `c`'s plan.
Expected<DriverOptions> withPlan(const DriverOptions &options,
                                 const Candidate &c) {
  DriverOptions o = options;
  o.predict.plan = "manual";
  o.training.tp = c.tp;
  o.training.mesh = c.mesh;
  o.training.recompute = c.recompute;
  o.training.reshardAfterForward = c.reshard;
  o.training.prefetchForward = o.training.prefetchBackward = c.prefetch;
  o.model.microBatch = c.microBatch;
  o.model.microBatchGiven = true;
  o.predict.gradAccum = c.gradAccum;
  std::string error;
  if (!parseMesh(o.training.mesh, o.training.meshShape, error))
    return fail(error);
  o.training.meshShape.tp = c.tp;
  if (!parseReshard(o.training.reshardAfterForward, &o.training.meshShape,
                    o.training.reshard, error))
    return fail(error);
  return o;
}

/// Compiles candidate `c` to rt and reads its prediction into it. A tp
/// degree other than the given one that the model cannot take (heads or
/// sequence not divisible) fails with `skipReason` set instead of printing.
Error predictCandidate(const DriverOptions &options, Candidate &c,
                       double &budget, std::string &machine,
                       std::string &skipReason) {
  Expected<DriverOptions> o = withPlan(options, c);
  if (!o)
    return o.takeError();
  o->output.emit = Emit::Rt;
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  std::optional<mlir::ScopedDiagnosticHandler> quiet;
  if (c.tp != options.training.tp)
    quiet.emplace(&context, [&](mlir::Diagnostic &d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error &&
          skipReason.empty())
        skipReason = d.str();
      return mlir::success();
    });
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<Imported> imported;
  if (Error e = lowerModule(context, *o, module, imported, false)) {
    if (!skipReason.empty()) {
      consumeError(std::move(e));
      return Error::success();
    }
    return e;
  }
  std::optional<Prediction> p = readPrediction(*module, c.gradAccum);
  if (!p)
    return fail("--plan=auto: no prediction for a candidate");
  c.seconds = p->seconds;
  c.tokensPerSecond = p->tokensPerSecond();
  c.peak = plannedPeakBytes(*module);
  if (budget <= 0)
    budget = p->memoryBudget;
  machine = p->machine;
  return Error::success();
}

std::string byteSize(double bytes) {
  char text[64];
  if (std::fabs(bytes) >= double(int64_t(1) << 30))
    std::snprintf(text, sizeof(text), "%.2f GiB",
                  bytes / double(int64_t(1) << 30));
  else
    std::snprintf(text, sizeof(text), "%.2f MiB", bytes / (1 << 20));
  return text;
}

void printPlanTable(ArrayRef<Candidate> candidates, const Candidate *best,
                    double budget, const std::string &machine) {
  outs() << "--plan=auto on " << machine << ", memory budget "
         << byteSize(budget) << " a rank:\n";
  outs() << "  tp  mesh  recompute  reshard  prefetch  micro-batch  "
            "grad-accum   step ms  tok/s/rank  peak MiB\n";
  for (const Candidate &c : candidates)
    outs() << format("  %2lld  %-4s  %-9s  %-7s  %8lld  %11lld  %10lld  "
                     "%8.2f  %10.0f  %8.1f%s\n",
                     (long long)c.tp, c.mesh.c_str(), c.recompute.c_str(),
                     c.reshard.c_str(), (long long)c.prefetch,
                     (long long)c.microBatch, (long long)c.gradAccum,
                     c.seconds * 1e3, c.tokensPerSecond,
                     double(c.peak) / (1 << 20),
                     &c == best               ? "  <- chosen"
                     : double(c.peak) > budget ? "  (over budget)"
                                              : "");
}

/// --plan=auto: every candidate compiled to rt and predicted; the table
/// printed; the fastest (tokens a second a rank) within the memory budget
/// returned as options.
Expected<DriverOptions> choosePlan(const DriverOptions &options) {
  std::vector<Candidate> all;
  for (int64_t t : tpDegrees(options))
    llvm::append_range(all, candidatesAt(options, t));
  double budget = options.predict.memoryBudgetBytes;
  std::string machine;
  errs() << "shardc: --plan=auto: " << all.size() << " candidates on "
         << options.predict.machine << "\n";
  std::vector<Candidate> candidates;
  std::set<int64_t> skipped;
  for (Candidate &c : all) {
    if (skipped.count(c.tp))
      continue;
    std::string skipReason;
    if (Error e = predictCandidate(options, c, budget, machine, skipReason))
      return e;
    if (!skipReason.empty()) {
      errs() << "shardc: --plan=auto: --tp " << c.tp
             << " skipped: " << skipReason << "\n";
      skipped.insert(c.tp);
      continue;
    }
    candidates.push_back(c);
  }
  const Candidate *best = nullptr, *smallest = nullptr;
  for (const Candidate &c : candidates) {
    if (!smallest || c.peak < smallest->peak)
      smallest = &c;
    // The fastest; among those within 0.1% of each other, the smallest.
    double rate = c.tokensPerSecond, bestRate = best ? best->tokensPerSecond : 0;
    if (double(c.peak) <= budget &&
        (!best || rate > bestRate * 1.001 ||
         (rate >= bestRate * 0.999 && c.peak < best->peak)))
      best = &c;
  }
  printPlanTable(candidates, best, budget, machine);
  if (!smallest)
    return fail("--plan=auto: no candidate compiled");
  if (!best)
    return fail("--plan=auto: no candidate fits within the memory budget of " +
                byteSize(budget) + " a rank: the smallest plans " +
                byteSize(double(smallest->peak)) + ", " +
                byteSize(double(smallest->peak) - budget) +
                " over (--memory-budget raises the budget; a larger mesh "
                "shards more)");
  Expected<DriverOptions> chosen = withPlan(options, *best);
  if (!chosen)
    return chosen.takeError();
  outs() << "--plan=auto chose: --mesh " << best->mesh << " --tp " << best->tp
         << " --recompute=" << best->recompute
         << " --reshard-after-forward=" << best->reshard
         << " --prefetch-forward " << best->prefetch << " --prefetch-backward "
         << best->prefetch << " --micro-batch " << best->microBatch
         << (options.training.deterministicAttention
                 ? ""
                 : " --deterministic-attention=false")
         << "; run the trainer with --grad-accum " << best->gradAccum << "\n";
  outs().flush();
  return chosen;
}

/// --calibrate FILE: shardc-calibrate, beside shardc (it runs itself on two
/// local ranks under mpirun for the collectives); with --target cuda,
/// shardc-calibrate-cuda (the GPU), or shardc-calibrate-cuda-emu with
/// --cuda-emulation (the emulated device, quick sizes).
Error calibrate(const DriverOptions &given) {
  const std::string &file = given.predict.calibrate;
  bool cuda = given.output.target == "cuda";
  bool emulated = cuda && given.output.cudaEmulation;
  std::string self = sys::fs::getMainExecutable(nullptr, nullptr);
  SmallString<256> tool(sys::path::parent_path(self));
  sys::path::append(tool, !cuda      ? "shardc-calibrate"
                          : emulated ? "shardc-calibrate-cuda-emu"
                                     : "shardc-calibrate-cuda");
  if (!sys::fs::can_execute(tool))
    return fail("--calibrate: the measuring tool '" + tool.str().str() +
                "' is missing (it is built beside shardc" +
                (cuda ? std::string(emulated ? " where the emulated CUDA "
                                               "device is built"
                                             : " where nvcc is found")
                      : std::string()) +
                ")");
  if (!cuda && !sys::findProgramByName("mpirun"))
    return fail("--calibrate measures MPI between two local ranks: mpirun "
                "is not on PATH");
  std::vector<StringRef> args = {tool, file};
  std::string message;
  int rc = sys::ExecuteAndWait(tool, args, std::nullopt, {}, 0, 0, &message);
  // shardc-calibrate-cuda's exit 3: no CUDA device here.
  if (cuda && !emulated && rc == 3)
    return fail("--calibrate --target cuda: no CUDA device here; "
                "--cuda-emulation calibrates the emulated device instead");
  if (rc != 0)
    return fail("--calibrate: " + tool.str().str() + " failed" +
                (message.empty() ? "" : ": " + message));
  return Error::success();
}

/// -o's directory exists and is writable: checked before the compile, so
/// that a mistyped path costs no compile time and is named in one line
/// (the linker's own error was two, naming neither shardc nor -o).
Error checkOutputDirectory(const std::string &path) {
  if (path == "-")
    return Error::success();
  if (sys::fs::is_directory(path))
    return fail("-o " + path + ": is a directory, not a file to write");
  SmallString<256> dir(path);
  sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  if (!sys::fs::is_directory(dir))
    return fail("-o " + path + ": the directory '" + dir +
                "' does not exist");
  if (sys::fs::access(dir, sys::fs::AccessMode::Write))
    return fail("-o " + path + ": the directory '" + dir +
                "' is not writable");
  return Error::success();
}

} // namespace

Error shardc::compile(const DriverOptions &given) {
  if (!given.predict.calibrate.empty())
    return calibrate(given);
  if (Error e = checkOutputDirectory(given.outputPath()))
    return e;
  DriverOptions options = given;
  if (given.predict.plan == "auto") {
    Expected<DriverOptions> chosen = choosePlan(given);
    if (!chosen)
      return chosen.takeError();
    options = *chosen;
  }
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();

  const ModelOptions &model = options.model;
  const OutputOptions &out = options.output;
  mlir::OwningOpRef<mlir::ModuleOp> owned;
  std::optional<Imported> imported;
  if (Error e = lowerModule(context, options, owned, imported, true))
    return e;
  mlir::ModuleOp module = *owned;
  std::string path = options.outputPath();
  if (out.emit == Emit::MLIR || out.emit == Emit::Train)
    return writeText(path, [&](raw_ostream &os) { module->print(os); });
  if (out.report)
    printReport(module, outs());
  if (std::optional<Prediction> p =
          readPrediction(module, options.predict.gradAccum)) {
    if (out.report)
      printPrediction(*p, outs());
  }
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
         << (t.recompute != "none" ? ", recompute " + t.recompute
                                   : std::string())
         << (t.mesh != "1" ? ", mesh " + t.mesh : std::string())
         << (t.tp > 1 ? ", tp " + std::to_string(t.tp) : std::string())
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
