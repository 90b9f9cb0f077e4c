//===- main.cpp - the trainer's main: the loop, data, logging -------------===//
//
// Linked with a compiled model object into the executable shardc produces.
// Each step runs the compiled micro-step once per micro-batch (forward,
// backward, gradient accumulation), then the compiled optimizer step. The
// compiled entry points are launch tables that the backend walks; main
// reaches memory only through the backend (runtime/backend.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "runtime/backend.h"
#include "runtime/trainer/peaks.h"
#include "runtime/formats/checkpoint.h"
#include "runtime/formats/checkpoint_io.h"
#include "runtime/formats/files.h"
#include "runtime/formats/data.h"
#include "runtime/trainer/flags.h"
#include "runtime/formats/hf_io.h"
#include "runtime/mesh.h"
#include "runtime/trainer/model.h"
#include "runtime/formats/onnx_export.h"
#include "runtime/trainer/program.h"
#include "runtime/runtime.h"
#include "runtime/trainer/schedule.h"
#include "runtime/text.h"
#include "runtime/trainer/trace.h"
#include "runtime/trainer/watchdog.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>
#include <unistd.h>

using namespace shardc;
using namespace shardc::runtime;

namespace {

/// A line of /proc/self/status in bytes (VmRSS, VmHWM), or -1.
int64_t procStatusBytes(const char *key) {
  std::FILE *f = std::fopen("/proc/self/status", "r");
  if (!f)
    return -1;
  char line[256];
  int64_t kib = -1;
  size_t n = std::strlen(key);
  while (std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, key, n) == 0 && line[n] == ':')
      kib = std::atoll(line + n + 1);
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}


/// The flags of a command line as (flag, value) pairs, in order.
std::vector<std::pair<std::string, std::string>> flagList(int argc,
                                                          char **argv) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int k = 1; k < argc; ++k) {
    std::string a = argv[k];
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos)
      out.push_back({a.substr(0, eq), a.substr(eq + 1)});
    else if (a.rfind("--", 0) == 0 && k + 1 < argc &&
             std::string(argv[k + 1]).rfind("--", 0) != 0)
      out.push_back({a, argv[++k]});
    else
      out.push_back({a, ""});
  }
  return out;
}

/// Every rank runs the same program with the same flags: otherwise their
/// collectives would not match and they would wait for each other forever.
/// Throws on every rank, naming the first difference.
void checkRanksAgree(const Manifest &m, const Mesh &mesh, int argc,
                     char **argv) {
  std::string mine = programFingerprint(m);
  for (const auto &[flag, value] : flagList(argc, argv))
    mine += "\n" + flag + "\x1f" + value;
  std::vector<std::string> all = mesh.gatherStrings(mine);
  std::string verdict;
  auto lines = [](const std::string &s) {
    std::vector<std::string> out;
    size_t at = 0;
    while (at <= s.size()) {
      size_t nl = s.find('\n', at);
      out.push_back(s.substr(at, nl == std::string::npos ? nl : nl - at));
      if (nl == std::string::npos)
        break;
      at = nl + 1;
    }
    return out;
  };
  auto shown = [](const std::string &pair) {
    size_t sep = pair.find('\x1f');
    std::string flag = pair.substr(0, sep), value = pair.substr(sep + 1);
    return value.empty() ? flag : flag + " " + value;
  };
  for (size_t r = 1; r < all.size() && verdict.empty(); ++r) {
    if (all[r] == all[0])
      continue;
    std::vector<std::string> a = lines(all[0]), b = lines(all[r]);
    if (a[0] != b[0]) {
      verdict = "rank " + std::to_string(r) +
                " runs another compiled program than rank 0 (fingerprint " +
                b[0] + ", rank 0's " + a[0] +
                "): launch the same executable on every rank";
      break;
    }
    for (size_t k = 1; k < std::max(a.size(), b.size()); ++k) {
      if (k < a.size() && k < b.size() && a[k] == b[k])
        continue;
      verdict = "rank " + std::to_string(r) + " was started with " +
                (k < b.size() ? shown(b[k]) : "fewer flags") + ", rank 0 with " +
                (k < a.size() ? shown(a[k]) : "fewer flags") +
                ": every rank must be given the same flags";
      break;
    }
  }
  verdict = mesh.broadcastString(verdict);
  if (!verdict.empty())
    throw std::runtime_error(verdict);
}

/// Keeps the lines of a JSON-lines log whose "step" is below `step`.
void truncateLog(const std::string &path, int64_t step) {
  if (!pathExists(path))
    return;
  std::string text = readTextFile(path), kept;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    end = end == std::string::npos ? text.size() : end + 1;
    std::string line = text.substr(at, end - at);
    long long s = -1;
    if (std::sscanf(line.c_str(), "{\"step\": %lld", &s) == 1 && s < step)
      kept += line;
    at = end;
  }
  writeFileDurably(path, kept);
}

double mib(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

/// The memory of a compiled program on its backend: the regions it
/// addresses, and a host copy of the io region for inputs and outputs.
/// With --offload=cpu the parameters, state and io regions are pinned host
/// memory the device also addresses, and the entries the manifest marks
/// "host" (the optimizer step) run on the host with the CPU backend, over
/// them and a host arena.
struct Memory {
  Memory(Backend &backend, const Manifest &m, bool touchArena,
         const Mesh *mesh = nullptr)
      : backend(backend), manifest(m) {
    const bool offload = m.offloaded();
    int64_t onDevice = abi::alignTo(m.ioBytes) + abi::alignTo(m.arenaBytes);
    if (!offload)
      onDevice += abi::alignTo(m.paramBytes) + abi::alignTo(m.stateBytes);
    backend.reserve(onDevice + 4 * abi::kBufferAlignment);
    auto place = [&](int64_t bytes, const char *what) {
      return offload ? backend.allocateHost(bytes, what)
                     : backend.allocate(bytes, what);
    };
    base[abi::kRegionParams] = place(m.paramBytes, "parameters");
    base[abi::kRegionState] =
        place(m.stateBytes, "gradients and optimizer state");
    base[abi::kRegionIo] = place(m.ioBytes, "inputs and outputs");
    // Untouched, the arena's pages are committed as kernels first write
    // them, so the resident set measures what the step really uses.
    base[abi::kRegionArena] =
        backend.allocate(m.arenaBytes, "activations", touchArena);
    base[abi::kRegionConstants] = const_cast<char *>(shardc_constants);
    io.assign(size_t(m.ioBytes), 0);
    bytes[abi::kRegionParams] = m.paramBytes;
    bytes[abi::kRegionState] = m.stateBytes;
    bytes[abi::kRegionIo] = m.ioBytes;
    bytes[abi::kRegionArena] = m.arenaBytes;
    bytes[abi::kRegionConstants] = m.constantsBytes;
    if (!m.hostEntries.empty()) {
      // The CPU backend, linked in for them (its weak factory, so that other
      // executables hold no CPU backend).
      hostBackend =
          makeBackend("cpu", mesh && mesh->world > 1 ? mesh : nullptr, 0);
      for (int r = 0; r < abi::kNumRegions; ++r) {
        hostBase[r] = base[r];
        hostBytes[r] = bytes[r];
      }
      hostBase[abi::kRegionArena] =
          hostBackend->allocate(m.hostArenaBytes, "the host optimizer's arena");
      hostBytes[abi::kRegionArena] = m.hostArenaBytes;
    }
  }
  char *region(abi::Region r) const { return static_cast<char *>(base[r]); }
  template <typename T> T *host(const TensorSlot &slot) {
    return reinterpret_cast<T *>(io.data() + slot.offset);
  }
  /// Host io slot -> backend.
  void put(const TensorSlot &slot) {
    backend.copyToDevice(region(abi::kRegionIo) + slot.offset,
                         io.data() + slot.offset, slot.bytes);
  }
  /// Backend io slot -> host.
  void get(const TensorSlot &slot) {
    backend.copyToHost(io.data() + slot.offset,
                       region(abi::kRegionIo) + slot.offset, slot.bytes);
  }
  /// Runs compiled entry `program` (checked against the ABI first).
  void run(const int64_t *program, const char *name) {
    if (!program)
      throw std::runtime_error(std::string("the compiled program has no '") +
                               name + "' entry point");
    const bool onHost = hostBackend && manifest.runsOnHost(name);
    if (checked.insert(program).second) {
      std::string wrong = validateProgram(program, onHost ? hostBytes : bytes);
      if (!wrong.empty())
        throw std::runtime_error(std::string("compiled entry '") + name +
                                 "' is malformed: " + wrong);
    }
    flops += manifest.flopsOf(name);
    if (trace)
      trace->beginRun(name, step);
    if (onHost) {
      // The device's runs are complete when `run` returns: the host reads
      // what they wrote.
      hostBackend->setTrace(trace);
      hostBackend->run(program, hostBase);
    } else {
      backend.run(program, base);
    }
    if (trace)
      trace->endRun();
  }

  Backend &backend;
  const Manifest &manifest;
  void *base[abi::kNumRegions] = {};
  int64_t bytes[abi::kNumRegions] = {};
  /// --offload=cpu: the host's backend, regions and their sizes.
  std::unique_ptr<Backend> hostBackend;
  void *hostBase[abi::kNumRegions] = {};
  int64_t hostBytes[abi::kNumRegions] = {};
  std::vector<char> io;
  std::set<const int64_t *> checked;
  /// The FLOPs of the runs since it was last reset (the compiler's count of
  /// each entry's GEMMs and attention, on this rank).
  int64_t flops = 0;
  /// Launches go to `trace`, labelled with the entry and `step`.
  Trace *trace = nullptr;
  int64_t step = 0;
};

/// What the trainer is doing, for the message of a failure that is not one
/// of its own errors (out of memory while reading --data FILE).
std::string doing = "starting";

int run(const Manifest &m, const Mesh &mesh, int argc, char **argv) {
  doing = "reading the command line";
  if (m.params.empty())
    throw std::runtime_error("the compiled model has no parameters");
  Options o = parseOptions(argc, argv, m);
  if (mesh.world > 1)
    checkRanksAgree(m, mesh, argc, argv);
  if (mesh.rank == 0)
    checkOutputs(o);
  if (mesh.world > 1)
    watchdog::start(mesh.rank, o.collectiveTimeout);

  // Rows of the global batch: per micro-batch, every rank's micro-batch.
  const int64_t B = m.microBatch, T = m.seqLen, P = mesh.world;
  const int64_t G = B * P * o.gradAccum;
  const bool leader = mesh.rank == 0;
  int64_t baselineRss = procStatusBytes("VmRSS");
  doing = "allocating the model's memory";
  std::unique_ptr<Backend> backend =
      makeBackend(m.target, &mesh, m.constantsBytes);
  Memory mem(*backend, m, /*touchArena=*/false, &mesh);
  char *params = mem.region(abi::kRegionParams);
  doing = o.initFrom.empty() ? std::string("initializing the parameters")
                             : "reading --init-from " + o.initFrom;
  if (!o.initFrom.empty())
    loadParameters(m, o.initFrom, *backend, params, mesh.shardIndex(),
                   o.allowNonfiniteInit);
  else if (!m.initFile.empty())
    loadParameters(m, besideExecutable(m.initFile), *backend, params,
                   mesh.shardIndex(), o.allowNonfiniteInit);
  else if (backend->hostMemory())
    initParameters(m, o.seed, params, mesh.shardIndex());
  else {
    std::vector<char> host(size_t(m.paramBytes), 0);
    initParameters(m, o.seed, host.data(), mesh.shardIndex());
    backend->copyToDevice(params, host.data(), m.paramBytes);
  }

  // Checkpoints: the directory is made (and so checked) before the first
  // step; a resume replaces the initial state with the checkpoint's.
  Checkpointer checkpointer(m, mesh, *backend, mem.base);
  if (leader && !o.checkpointDir.empty()) {
    makeDirectories(o.checkpointDir);
    if (access(o.checkpointDir.c_str(), W_OK) != 0)
      throw std::runtime_error(o.checkpointDir +
                               ": --checkpoint-dir is not writable");
  }
  TrainProgress progress;
  if (!o.resume.empty()) {
    doing = "resuming from a checkpoint";
    bool fromDir = o.resume == "latest" || o.resume == "auto";
    std::string where = fromDir ? o.checkpointDir : o.resume;
    std::string found = mesh.broadcastString(leader ? findCheckpoint(where) : "");
    if (!found.empty()) {
      progress = checkpointer.load(found, o);
      if (progress.step > o.steps)
        throw std::runtime_error(found + ": the checkpoint is at step " +
                                 std::to_string(progress.step) +
                                 ", past --steps " + std::to_string(o.steps));
    } else if (o.resume == "auto") {
      if (leader)
        std::printf("checkpoint: none in %s; starting fresh\n", where.c_str());
    } else {
      throw std::runtime_error(
          where + ": no checkpoint to resume from" +
          (fromDir ? " (--resume=auto starts fresh when there is none)" : ""));
    }
  }
  // One rank's bf16 working copies of the parameters (rt-working-copy) are
  // cast from them here, once they are initialized or loaded; opt_step
  // keeps them after that.
  if (shardc_program_refresh)
    mem.run(shardc_program_refresh, "refresh");
  const int64_t startStep = progress.step;
  doing = o.data.empty() ? std::string("making synthetic tokens")
                         : "reading --data " + o.data;
  TokenData data =
      o.data.empty()
          ? TokenData::synthetic(o.seed, m.vocabSize,
                                 (progress.dataRow +
                                  (o.steps - startStep + 1) * G) * T + 1)
          : TokenData::open(o.data, m.vocabSize);
  data.setShuffle(o.shuffle, o.shuffleSeed);
  if (leader && !o.data.empty() && data.files().size() > 1)
    std::printf("data: %zu shards of the %s format, %lld tokens, read as one "
                "stream (%s ... %s)%s\n",
                data.files().size(), data.format(), (long long)data.size(),
                data.files().front().c_str(), data.files().back().c_str(),
                o.shuffle ? ", windows shuffled" : "");

  std::FILE *log = nullptr;
  if (leader && !o.log.empty()) {
    // A resumed run's log: the lines before its step, then its own.
    if (startStep > 0)
      truncateLog(o.log, startStep);
    if (!(log = std::fopen(o.log.c_str(), startStep > 0 ? "a" : "w")))
      throw std::runtime_error(o.log + ": cannot open log file for writing");
  }

  // JSON has no nan: a skipped step's grad_norm (or a non-finite loss) is
  // null.
  auto jsonNumber = [](double v) {
    char buf[32];
    if (!std::isfinite(v))
      return std::string("null");
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    return std::string(buf);
  };
  auto checkLogWrite = [&](int wrote) {
    if (wrote < 0 || std::fflush(log) != 0)
      throw std::runtime_error(o.log + ": --log: write failed: " +
                               std::strerror(errno));
  };
  // The device's peak, for mfu (GPUs the table knows).
  const DevicePeak *peak = devicePeak(backend->deviceName());
  // Every planned byte, on the device and (--offload=cpu) on the host.
  int64_t totalBytes = m.paramBytes + m.stateBytes + m.ioBytes + m.arenaBytes +
                       m.hostArenaBytes;
  if (leader) {
    std::printf("shardc: %s (%s), %.2fM parameters, batch %lld x %lld x %lld "
              "tokens, %s; memory: params %.1f MiB, grads+optimizer %.1f MiB, "
              "activations %.1f MiB",
              m.source.c_str(), m.family.c_str(), m.numParams() / 1e6,
              (long long)o.gradAccum, (long long)B, (long long)T,
              m.optimizer.c_str(), mib(m.paramBytes), mib(m.stateBytes),
              mib(m.arenaBytes));
    std::printf("; %.3f GFLOP a micro-step on this rank (GEMMs and "
                "attention)",
                double(m.flopsOf("micro_step")) / 1e9);
    std::printf("; GEMMs: %s", backend->gemmLibrary().c_str());
    if (peak)
      std::printf("; mfu against the %s's %s peak, %.1f TFLOP/s", peak->model,
                  m.computeDtype.c_str(), peak->of(m.computeDtype) / 1e12);
    if (m.offloaded())
      std::printf("; --offload=cpu: %.1f MiB on the device, %.1f MiB of "
                  "pinned host memory",
                  mib(m.arenaBytes),
                  mib(m.paramBytes + m.stateBytes + m.ioBytes +
                      m.hostArenaBytes));
    std::printf("\n");
  }
  const TensorSlot &tokens = m.ioSlot(abi::kIoTokens),
                   &targets = m.ioSlot(abi::kIoTargets);
  const TensorSlot &lossSlot = m.ioSlot(abi::kIoLoss),
                   &control = m.ioSlot(abi::kIoAccumulate);
  const TensorSlot &hyper = m.ioSlot(abi::kIoOptimizer);
  const TensorSlot &maxNorm = m.ioSlot(abi::kIoMaxGradNorm);
  const TensorSlot &gradSq = m.ioSlot(abi::kIoGradSqNorm);
  if (hyper.bytes != abi::kHyperSize * 4)
    throw std::runtime_error("the compiled optimizer input has " +
                             std::to_string(hyper.bytes) + " bytes, not " +
                             std::to_string(abi::kHyperSize * 4));
  const char *profileEnv = std::getenv("SHARDC_PROFILE");
  bool profiling = profileEnv && *profileEnv && std::string(profileEnv) != "0";
  backend->setProfiling(profiling);
  backend->setGraphs(o.cudaGraphs);
  backend->setAllowTf32(m.allowTf32);
  // Every launch is timed for the exposed-communication line (and kept for
  // --trace); a backend that cannot time them records none.
  Trace trace;
  trace.setKeepEvents(!o.trace.empty());
  trace.setOrigin(std::stod(mesh.broadcastString(
      std::to_string((long long)Trace::unixMicros()))));
  backend->setTrace(&trace);
  mem.trace = &trace;
  double stepSeconds = 0;
  int64_t lastSaved = startStep, nonfinite = 0;
  const int64_t endStep =
      o.runSteps > 0 ? std::min(o.steps, startStep + o.runSteps) : o.steps;
  // --val-data: the loss of the current weights on the file's first
  // --eval-steps global batches, averaged over them and the ranks. Each
  // batch runs the training micro-step with the accumulator control
  // (keep 0, scale 0): its gradients are discarded, and the next training
  // micro-step (keep 0) writes the accumulators afresh.
  std::optional<TokenData> valData;
  if (!o.valData.empty()) {
    doing = "reading --val-data " + o.valData;
    valData.emplace(TokenData::open(o.valData, m.vocabSize));
  }
  auto evaluate = [&]() {
    double total = 0;
    for (int64_t k = 0; k < o.evalSteps; ++k) {
      valData->batch(/*step=*/0, G, (k * P + mesh.rank) * B, B, T,
                     mem.host<int32_t>(tokens), mem.host<int32_t>(targets));
      float *ctl = mem.host<float>(control);
      ctl[0] = 0.0f;
      ctl[1] = 0.0f;
      for (const TensorSlot *s : {&tokens, &targets, &control})
        mem.put(*s);
      mem.run(shardc_program_micro_step, "micro_step");
      mem.get(lossSlot);
      total += *mem.host<float>(lossSlot);
    }
    total /= double(o.evalSteps);
    return P > 1 ? mesh.sumAll(total) / double(P) : total;
  };
  for (int64_t step = startStep; step < endStep; ++step) {
    doing = "running step " + std::to_string(step);
    mem.step = step;
    double valLoss = std::nan("");
    bool evaluated = valData && o.evalEvery > 0 && step % o.evalEvery == 0;
    if (evaluated) {
      doing = "evaluating --val-data before step " + std::to_string(step);
      valLoss = evaluate();
      doing = "running step " + std::to_string(step);
    }
    auto start = std::chrono::steady_clock::now();
    mem.flops = 0;
    double loss = 0;
    for (int64_t k = 0; k < o.gradAccum; ++k) {
      data.batch(/*step=*/0, G, progress.dataRow + (k * P + mesh.rank) * B, B, T,
                 mem.host<int32_t>(tokens), mem.host<int32_t>(targets));
      float *ctl = mem.host<float>(control);
      ctl[0] = k > 0 ? 1.0f : 0.0f; // keep the accumulator
      // The loss is the mean over micro-batches and ranks; collectives sum.
      ctl[1] = float(1.0 / double(o.gradAccum * P));
      for (const TensorSlot *s : {&tokens, &targets, &control})
        mem.put(*s);
      // With a no-sync step, gradients are reduced on the last micro-batch.
      bool sync = k + 1 == o.gradAccum || !shardc_program_micro_step_nosync;
      if (sync)
        mem.run(shardc_program_micro_step, "micro_step");
      else
        mem.run(shardc_program_micro_step_nosync, "micro_step_nosync");
      mem.get(lossSlot);
      loss += *mem.host<float>(lossSlot) / double(o.gradAccum);
    }
    if (P > 1)
      loss = mesh.sumAll(loss) / double(P);
    if (!o.dumpGrads.empty() && step + 1 == o.steps)
      saveTensors(m, mesh, *backend, o.dumpGrads,
                  mem.region(abi::kRegionState), abi::kStateGrad);
    double lr = learningRate(o, step);
    double gradNorm = std::nan("");
    // Every rank has the same global loss, so every rank decides alike.
    if (!std::isfinite(loss)) {
      if (++nonfinite > o.skipNonfinite)
        throw std::runtime_error(
            "step " + std::to_string(step) + ": the loss is " +
            (std::isnan(loss) ? "nan" : "infinite") + "; stopping" +
            (o.skipNonfinite ? " after " + std::to_string(o.skipNonfinite) +
                                   " skipped steps (--skip-nonfinite)"
                             : " (--skip-nonfinite N skips up to N such "
                               "steps' updates)"));
      if (leader)
        std::printf("step %4lld: loss is not finite: update skipped (%lld of "
                    "%lld allowed by --skip-nonfinite)\n",
                    (long long)step, (long long)nonfinite,
                    (long long)o.skipNonfinite);
    } else {
      fillHyper(o, m, step, mem.host<float>(hyper));
      *mem.host<float>(maxNorm) = float(o.clipGradNorm);
      mem.put(hyper);
      mem.put(maxNorm);
      mem.run(shardc_program_opt_step, "opt_step");
      mem.get(gradSq);
      gradNorm = std::sqrt(double(*mem.host<float>(gradSq)));
      if (!std::isfinite(gradNorm))
        throw std::runtime_error(
            "step " + std::to_string(step) +
            ": the gradient norm is not finite although the loss is; the "
            "update has made the weights non-finite, so the run stops "
            "(lower --lr, or clip with --clip-grad-norm)");
    }
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    double tokPerS = double(G * T) / (ms / 1000.0);
    // This rank's GEMM and attention work over the step's time.
    double tflops = double(mem.flops) / (ms / 1000.0) / 1e12;
    stepSeconds += ms * 1e-3;
    double mfu =
        peak ? tflops * 1e12 / peak->of(m.computeDtype) : std::nan("");
    if (leader) {
      std::printf("step %4lld/%lld | loss %.6f | lr %.3e | norm %.4f | %8.2f ms | "
                "%10.0f tok/s | mem %.1f MiB | tflops %.3f",
                (long long)step, (long long)o.steps, loss, lr, gradNorm, ms,
                tokPerS, mib(totalBytes), tflops);
      if (peak)
        std::printf(" | mfu %.1f%%", 100.0 * mfu);
      if (evaluated)
        std::printf(" | val_loss %.6f", valLoss);
      std::printf("\n");
    }
    std::fflush(stdout);
    if (log) {
      std::string val =
          evaluated ? ", \"val_loss\": " + jsonNumber(valLoss) : "";
      int wrote = std::fprintf(
          log,
          "{\"step\": %lld, \"loss\": %s, \"lr\": %.9g, "
          "\"grad_norm\": %s, \"ms\": %.3f, \"tok_per_s\": %.1f, "
          "\"tflops\": %.6g, \"mfu\": %s%s}\n",
          (long long)step, jsonNumber(loss).c_str(), lr,
          jsonNumber(gradNorm).c_str(), ms, tokPerS, tflops,
          jsonNumber(mfu).c_str(), val.c_str());
      checkLogWrite(wrote);
    }
    progress.step = step + 1;
    progress.dataRow += G;
    if (!o.checkpointDir.empty() && o.checkpointEvery > 0 &&
        progress.step % o.checkpointEvery == 0) {
      checkpointer.save(o.checkpointDir, progress, o, o.keep);
      lastSaved = progress.step;
    }
  }
  if (!o.checkpointDir.empty() && lastSaved != progress.step)
    checkpointer.save(o.checkpointDir, progress, o, o.keep);
  // After the last step (not where --run-steps stops short of it): the
  // final weights' validation loss, logged under step --steps.
  if (valData && endStep == o.steps && startStep < endStep) {
    doing = "evaluating --val-data after the last step";
    double valLoss = evaluate();
    if (leader)
      std::printf("step %4lld/%lld | val_loss %.6f (after the last step)\n",
                  (long long)o.steps, (long long)o.steps, valLoss);
    if (log)
      checkLogWrite(std::fprintf(log, "{\"step\": %lld, \"val_loss\": %s}\n",
                                 (long long)o.steps,
                                 jsonNumber(valLoss).c_str()));
  }
  if (log && std::fclose(log) != 0)
    throw std::runtime_error(o.log + ": --log: write failed: " +
                             std::strerror(errno));
  if (leader && trace.commSeconds() > 0 && stepSeconds > 0) {
    int64_t ran = endStep - startStep;
    std::printf("communication: %.2f ms per step on rank 0, %.2f ms of it "
                "exposed (not overlapped by compute): %.1f%% of the step "
                "time\n",
                1e3 * trace.commSeconds() / double(ran),
                1e3 * trace.exposedCommSeconds() / double(ran),
                100.0 * trace.exposedCommSeconds() / stepSeconds);
  }
  if (!o.trace.empty()) {
    std::string path = mesh.rank == 0
                           ? o.trace
                           : o.trace + ".rank" + std::to_string(mesh.rank);
    trace.writeJson(path, mesh.rank);
    if (leader)
      std::printf("trace written to %s%s\n", o.trace.c_str(),
                  mesh.world > 1 ? " (rank r > 0: .rank<r>)" : "");
  }
  if (profiling && leader)
    backend->printProfile();
  // The planned peak against the resident memory the run added (rank 0).
  int64_t peakRss = procStatusBytes("VmHWM");
  if (leader && baselineRss >= 0 && peakRss >= 0)
    std::printf("memory: planned peak %lld bytes, measured peak %lld bytes "
                "(resident set growth of rank 0)\n",
                (long long)totalBytes, (long long)(peakRss - baselineRss));
  if (!o.saveWeights.empty()) {
    saveTensors(m, mesh, *backend, o.saveWeights, params, "");
    if (leader)
      std::printf("saved weights to %s\n", o.saveWeights.c_str());
  }
  if (!o.exportHf.empty()) {
    int64_t files = exportHf(m, mesh, *backend, params, o.exportHf,
                             o.maxShardBytes);
    if (leader)
      std::printf("exported the trained model to %s (%lld safetensors "
                  "file%s)\n",
                  o.exportHf.c_str(), (long long)files, files == 1 ? "" : "s");
  }
  if (!o.exportOnnx.empty()) {
    std::vector<std::vector<float>> storage;
    std::vector<NamedTensor> tensors =
        gatherTensors(m, mesh, *backend, params, "", storage);
    if (leader) {
      std::vector<ExportTensor> weights;
      for (const NamedTensor &t : tensors)
        weights.push_back({t.name, t.shape, t.data});
      exportOnnx(besideExecutable(m.graphFile), o.exportOnnx, weights,
                 o.exportExternal);
      std::printf("exported the trained model to %s\n", o.exportOnnx.c_str());
    }
  }
  return 0;
}

/// An --infer build: reads each input slot from a raw file, runs the graph
/// once, writes each output slot to a raw file (little-endian, row-major;
/// f32, int32, bool as one byte; f64, f16 or bf16 where the model's file
/// declares the input or output so, converted from and to f32).
int runInfer(const Manifest &m, int argc, char **argv) {
  doing = "running inference";
  std::map<std::string, std::string> inputs, outputs;
  for (int k = 1; k < argc; ++k) {
    std::string arg = argv[k];
    if ((arg == "--input" || arg == "--output") && k + 1 < argc) {
      std::string spec = argv[++k];
      size_t eq = spec.rfind('=');
      if (eq == std::string::npos || eq == 0)
        throw std::runtime_error(arg + " expects NAME=FILE, got '" + spec + "'");
      (arg == "--input" ? inputs : outputs)[spec.substr(0, eq)] = spec.substr(eq + 1);
    } else {
      throw std::runtime_error("unknown option '" + arg +
                               "' (an --infer build takes --input NAME=FILE "
                               "and --output NAME=FILE)");
    }
  }
  // Outputs are checked before anything runs, as the trainer's are: each a
  // compiled output, a regular file (or a new one in a writable
  // directory), never one of the inputs.
  std::vector<std::pair<std::string, std::string>> inputFiles;
  for (const auto &[name, file] : inputs)
    inputFiles.push_back({"--input " + name, file});
  for (const auto &[name, file] : outputs) {
    m.ioSlot(name);
    checkOutputPath("--output " + name + "=" + file, file, false, inputFiles);
  }
  std::unique_ptr<Backend> backend =
      makeBackend(m.target, nullptr, m.constantsBytes);
  Memory mem(*backend, m, /*touchArena=*/true);
  if (!m.params.empty())
    loadParameters(m, besideExecutable(m.initFile), *backend,
                   mem.region(abi::kRegionParams), 0);
  for (const auto &[name, file] : inputs) {
    const TensorSlot &slot = m.ioSlot(name);
    std::string error;
    uint64_t size = 0;
    FileHandle f = openInputFile(file, UINT64_MAX, "", error, &size);
    if (!f)
      throw std::runtime_error(error + " (input '" + name + "')");
    // An f32 slot whose file is f64, f16 or bf16 is read in that type and
    // converted (the graph computes in f32).
    bool converted = slot.convertsFile();
    int64_t bytes = fileBytes(slot);
    if (size != uint64_t(bytes))
      throw std::runtime_error(file + ": input '" + name + "' needs exactly " +
                               std::to_string(bytes) + " bytes (" +
                               (converted ? slot.fileDtype : slot.dtype) + " " +
                               shapeString(slot.shape) + ")");
    if (converted) {
      std::vector<char> raw(static_cast<size_t>(bytes));
      readAt(f.fd(), file, 0, raw.data(), uint64_t(bytes));
      decodeFile(slot, raw.data(), mem.host<float>(slot));
    } else {
      readAt(f.fd(), file, 0, mem.host<char>(slot), uint64_t(slot.bytes));
    }
    mem.put(slot);
  }
  mem.run(shardc_program_infer, "infer");
  for (const auto &[name, file] : outputs) {
    const TensorSlot &slot = m.ioSlot(name);
    mem.get(slot);
    const char *data = mem.host<char>(slot);
    int64_t bytes = fileBytes(slot);
    std::vector<char> encoded;
    if (slot.convertsFile()) {
      encoded.resize(static_cast<size_t>(bytes));
      encodeFile(slot, mem.host<float>(slot), encoded.data());
      data = encoded.data();
    }
    DurableFile out(file); // a temporary, fsynced and renamed into place
    out.write(data, uint64_t(bytes));
    out.commit();
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Manifest m;
  try {
    m = Manifest::parse(shardc_manifest);
  } catch (...) {
    std::fprintf(stderr, "error: %s\n",
                 describeCurrentException("reading the compiled manifest").c_str());
    return 1;
  }
  if (shardc_program_infer) {
    try {
      return runInfer(m, argc, argv);
    } catch (...) {
      std::fprintf(stderr, "error: %s\n",
                   describeCurrentException(doing).c_str());
      return 1;
    }
  }
  // --help needs no launcher: answered before MPI starts.
  if (wantsHelp(argc, argv)) {
    printUsage(argv[0], m);
    return 0;
  }
  Mesh mesh = Mesh::init(&argc, &argv, m.replicas, m.shards);
  try {
    int rc = run(m, mesh, argc, argv);
    Mesh::finalize();
    return rc;
  } catch (...) {
    std::fflush(stdout);
    // Each rank reports its own error, with its rank on a mesh; then the
    // others are aborted so that no rank waits in a collective.
    std::string message = describeCurrentException(doing);
    if (mesh.world == 1)
      std::fprintf(stderr, "error: %s\n", message.c_str());
    else
      std::fprintf(stderr, "error: rank %d: %s\n", mesh.rank, message.c_str());
    std::fflush(stderr);
    if (mesh.world > 1)
      mesh.abort(1);
    Mesh::finalize();
    return 1;
  }
}
