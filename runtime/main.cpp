//===- main.cpp - the trainer's main: flags, data, steps, logging ---------===//
//
// Linked with a compiled model object into the executable shardc produces.
// Each step runs the compiled micro-step once per micro-batch (forward,
// backward, gradient accumulation), then the compiled optimizer step.
//
//===----------------------------------------------------------------------===//
#include "runtime/data.h"
#include "runtime/mesh.h"
#include "runtime/model.h"
#include "runtime/onnx_export.h"
#include "runtime/runtime.h"
#include "runtime/safetensors.h"

#include <chrono>
#include <map>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

using namespace shardc::runtime;

namespace {

const char *kUsage = R"(usage: %s [options]

Trains %s (%s), compiled for micro-batches of %lld x %lld tokens per rank
on a mesh of %lld ranks (%lld x %lld; launch with mpirun -np %lld).

data and run:
  --data FILE           llm.c token file (header of 256 int32: magic 20240520,
                        version 1, token count; then uint16 tokens); row b of
                        the global batch of step s starts at token (s*G + b)*T
                        with G = ranks x micro-batch x grad-accum; rank r takes
                        rows r*mb .. (r+1)*mb-1 of each global micro-batch;
                        wrapping around the file; without it, seeded
                        synthetic tokens
  --steps N             optimizer steps (default 10)
  --grad-accum N        micro-batches per step, gradients averaged (default 1)
  --seed N              seed of initialization and synthetic data (default 1337)
  --init-from FILE      initial weights from a safetensors file (Hugging Face
                        names, with or without the transformer./model. prefix)
  --save-weights FILE   write the weights after the last step (safetensors)
  --export-onnx FILE    (models compiled from ONNX) write the model with the
                        weights after the last step as its initializers;
                        over 2 GB they go to FILE.data (ONNX external data)
  --export-external-data  with --export-onnx: always write FILE.data
  --dump-grads FILE     write the last step's gradients, averaged over its
                        micro-batches and before clipping (safetensors)
  --log FILE            JSON lines, one per step: step, loss, lr, grad_norm,
                        ms, tok_per_s

optimizer (compiled: %s; semantics of torch.optim.AdamW / SGD):
  --lr X                peak learning rate (default 0.001)
  --beta1 X             AdamW beta1 (default 0.9)
  --beta2 X             AdamW beta2 (default 0.999)
  --eps X               AdamW epsilon (default 1e-8)
  --momentum X          SGD momentum (default 0)
  --weight-decay X      decoupled (AdamW) or L2 (SGD) weight decay, applied to
                        every parameter (default 0.01 for AdamW, 0 for SGD)
  --no-decay-1d         exclude 1-D parameters (norms, biases) from weight decay
  --clip-grad-norm X    clip gradients to global norm X (default 0: off), as
                        torch.nn.utils.clip_grad_norm_
  --lr-schedule S       constant (default), cosine or linear decay to zero
                        after warmup, over --steps
  --warmup-steps N      linear warmup: lr * (s+1)/N for steps s < N (default 0)
  --help                this message
)";

struct Options {
  std::string data, initFrom, saveWeights, dumpGrads, log, exportOnnx;
  int64_t steps = 10, gradAccum = 1, warmupSteps = 0;
  uint64_t seed = 1337;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, momentum = 0.0;
  double weightDecay = -1.0; // -1: the optimizer's default
  bool noDecay1D = false, exportExternal = false;
  double clipGradNorm = 0.0;
  std::string schedule = "constant";
};

int64_t parseInt(const std::string &flag, const std::string &value) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v < 0)
    throw std::runtime_error(flag + " expects a non-negative integer, got '" +
                             value + "'");
  return v;
}

double parseFloat(const std::string &flag, const std::string &value) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < 0)
    throw std::runtime_error(flag + " expects a non-negative number, got '" +
                             value + "'");
  return v;
}

/// The compiled optimizer, told by its state: SGD keeps momentum buffers.
std::string optimizerName(const Manifest &m) {
  for (const TensorSlot &s : m.state)
    if (s.name.rfind("momentum.", 0) == 0)
      return "sgd";
  return "adamw";
}

void printUsage(const char *argv0, const Manifest &m) {
  std::printf(kUsage, argv0, m.source.c_str(), m.family.c_str(),
              (long long)m.microBatch, (long long)m.seqLen,
              (long long)(m.replicas * m.shards), (long long)m.replicas,
              (long long)m.shards, (long long)(m.replicas * m.shards),
              optimizerName(m).c_str());
}

bool wantsHelp(int argc, char **argv) {
  for (int k = 1; k < argc; ++k)
    if (std::string(argv[k]) == "--help" || std::string(argv[k]) == "-h")
      return true;
  return false;
}

Options parseOptions(int argc, char **argv, const Manifest &m) {
  Options o;
  for (int k = 1; k < argc; ++k) {
    std::string arg = argv[k];
    size_t eq = arg.find('=');
    bool inlineValue = eq != std::string::npos && arg.rfind("--", 0) == 0;
    std::string flag = inlineValue ? arg.substr(0, eq) : arg;
    auto next = [&]() -> std::string {
      if (inlineValue)
        return arg.substr(eq + 1);
      if (k + 1 >= argc)
        throw std::runtime_error(flag + " expects a value");
      return argv[++k];
    };
    if (flag == "--data")
      o.data = next();
    else if (flag == "--steps")
      o.steps = parseInt(flag, next());
    else if (flag == "--grad-accum")
      o.gradAccum = parseInt(flag, next());
    else if (flag == "--seed")
      o.seed = uint64_t(parseInt(flag, next()));
    else if (flag == "--init-from")
      o.initFrom = next();
    else if (flag == "--save-weights")
      o.saveWeights = next();
    else if (flag == "--export-onnx") {
      o.exportOnnx = next();
      if (m.graphFile.empty())
        throw std::runtime_error("--export-onnx: this model was not compiled "
                                 "from an ONNX file");
    }
    else if (flag == "--export-external-data" && !inlineValue)
      o.exportExternal = true;
    else if (flag == "--dump-grads")
      o.dumpGrads = next();
    else if (flag == "--log")
      o.log = next();
    else if (flag == "--lr")
      o.lr = parseFloat(flag, next());
    else if (flag == "--beta1")
      o.beta1 = parseFloat(flag, next());
    else if (flag == "--beta2")
      o.beta2 = parseFloat(flag, next());
    else if (flag == "--eps")
      o.eps = parseFloat(flag, next());
    else if (flag == "--momentum")
      o.momentum = parseFloat(flag, next());
    else if (flag == "--weight-decay")
      o.weightDecay = parseFloat(flag, next());
    else if (flag == "--no-decay-1d" && !inlineValue)
      o.noDecay1D = true;
    else if (flag == "--clip-grad-norm")
      o.clipGradNorm = parseFloat(flag, next());
    else if (flag == "--warmup-steps")
      o.warmupSteps = parseInt(flag, next());
    else if (flag == "--lr-schedule") {
      o.schedule = next();
      if (o.schedule != "constant" && o.schedule != "cosine" &&
          o.schedule != "linear")
        throw std::runtime_error("--lr-schedule must be constant, cosine or "
                                 "linear, got '" + o.schedule + "'");
    } else
      throw std::runtime_error("unknown option '" + arg + "' (see --help)");
  }
  if (o.gradAccum < 1)
    throw std::runtime_error("--grad-accum must be at least 1");
  if (o.beta1 >= 1 || o.beta2 >= 1)
    throw std::runtime_error("--beta1 and --beta2 must be below 1");
  if (o.weightDecay < 0)
    o.weightDecay = optimizerName(m) == "adamw" ? 0.01 : 0.0;
  return o;
}

/// The learning rate of step s (from 0) of `steps`.
double learningRate(const Options &o, int64_t s) {
  if (s < o.warmupSteps)
    return o.lr * double(s + 1) / double(o.warmupSteps);
  if (o.schedule == "constant")
    return o.lr;
  double span = double(std::max<int64_t>(1, o.steps - o.warmupSteps));
  double progress = std::min(1.0, double(s - o.warmupSteps) / span);
  if (o.schedule == "cosine")
    return o.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
  return o.lr * (1.0 - progress);
}

/// The checkpoint name of a parameter without its model prefix, if any.
std::string withoutPrefix(const std::string &name) {
  for (const char *prefix : {"transformer.", "model."})
    if (name.rfind(prefix, 0) == 0)
      return name.substr(std::strlen(prefix));
  return name;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

void loadParameters(const Manifest &m, const std::string &path, char *params,
                    int64_t shardIndex) {
  std::map<std::string, LoadedTensor> file = readSafetensors(path);
  for (const TensorSlot &p : m.params) {
    auto it = file.find(p.name);
    if (it == file.end())
      it = file.find(withoutPrefix(p.name));
    if (it == file.end())
      throw std::runtime_error(path + ": missing parameter '" + p.name + "'");
    const std::vector<int64_t> &full = p.sharded() ? p.globalShape : p.shape;
    if (it->second.shape != full)
      throw std::runtime_error(path + ": parameter '" + p.name +
                               "' has shape " + shapeString(it->second.shape) +
                               ", expected " + shapeString(full));
    // This rank's rows; padding rows stay zero.
    int64_t rows = p.shape[0], first = p.sharded() ? shardIndex * rows : 0;
    int64_t count = std::max<int64_t>(0, std::min(rows, full[0] - first));
    float *dst = reinterpret_cast<float *>(params + p.offset);
    std::memset(dst, 0, p.bytes);
    std::memcpy(dst, it->second.data.data() + first * p.rowSize(),
                count * p.rowSize() * 4);
  }
}

/// One tensor per parameter, read from `region` at the slot of `prefix +
/// name` (params: no prefix; gradients: "grad."). Sharded tensors are
/// gathered on the shard axis into `storage` (complete on rank 0).
std::vector<NamedTensor> gatherTensors(const Manifest &m, const Mesh &mesh,
                                       const char *region,
                                       const std::string &prefix,
                                       std::vector<std::vector<float>> &storage) {
  storage.assign(m.params.size(), {});
  std::vector<NamedTensor> tensors;
  for (size_t k = 0; k < m.params.size(); ++k) {
    const TensorSlot &p = m.params[k];
    int64_t offset = prefix.empty() ? p.offset : m.stateSlot(prefix + p.name).offset;
    const float *local = reinterpret_cast<const float *>(region + offset);
    if (!p.sharded()) {
      tensors.push_back({p.name, p.shape, local});
      continue;
    }
    storage[k].resize(size_t(p.numel() * mesh.shards));
    int rc = MPI_Gather(local, int(p.numel()), MPI_FLOAT, storage[k].data(),
                        int(p.numel()), MPI_FLOAT, 0, mesh.shardComm());
    if (rc != MPI_SUCCESS)
      throw std::runtime_error("gathering '" + p.name + "' failed");
    tensors.push_back({p.name, p.globalShape, storage[k].data()});
  }
  return tensors;
}

/// Writes the tensors gatherTensors reads as a safetensors file (rank 0).
void saveTensors(const Manifest &m, const Mesh &mesh, const std::string &path,
                 const char *region, const std::string &prefix) {
  std::vector<std::vector<float>> storage;
  std::vector<NamedTensor> tensors = gatherTensors(m, mesh, region, prefix, storage);
  if (mesh.rank == 0)
    writeSafetensors(path, tensors, {{"format", "pt"}, {"producer", "shardc"}});
}

/// A file that shardc wrote next to the executable.
std::string besideExecutable(const std::string &name) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return name;
  std::string exe(buf, size_t(n));
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? name : exe.substr(0, slash + 1) + name;
}

struct AlignedFree {
  void operator()(char *p) const { std::free(p); }
};
using Region = std::unique_ptr<char, AlignedFree>;

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

/// `touch`: zero the region now (it becomes resident); otherwise its pages
/// are committed as the kernels first write them, so the resident set
/// measures what the step really uses.
Region allocateRegion(int64_t bytes, const char *what, bool touch = true) {
  size_t size = size_t((bytes + 63) / 64 * 64);
  if (size == 0)
    size = 64;
  char *p = static_cast<char *>(std::aligned_alloc(64, size));
  if (!p)
    throw std::runtime_error(std::string("cannot allocate ") +
                             std::to_string(bytes) + " bytes for " + what);
  if (touch)
    std::memset(p, 0, size);
  return Region(p);
}

double mib(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

template <typename T> T *at(const Region &r, const TensorSlot &slot) {
  return reinterpret_cast<T *>(r.get() + slot.offset);
}

int run(const Manifest &m, const Mesh &mesh, int argc, char **argv) {
  if (m.params.empty())
    throw std::runtime_error("the compiled model has no parameters");
  Options o = parseOptions(argc, argv, m);

  // Rows of the global batch: per micro-batch, every rank's micro-batch.
  const int64_t B = m.microBatch, T = m.seqLen, P = mesh.world;
  const int64_t G = B * P * o.gradAccum;
  const bool leader = mesh.rank == 0;
  TokenData data = o.data.empty()
                       ? TokenData::synthetic(o.seed, m.vocabSize,
                                              (o.steps + 1) * G * T + 1)
                       : TokenData::load(o.data, m.vocabSize);

  int64_t baselineRss = procStatusBytes("VmRSS");
  Region params = allocateRegion(m.paramBytes, "parameters");
  Region state = allocateRegion(m.stateBytes, "gradients and optimizer state");
  Region io = allocateRegion(m.ioBytes, "inputs and outputs");
  Region arena = allocateRegion(m.arenaBytes, "activations", /*touch=*/false);
  if (!o.initFrom.empty())
    loadParameters(m, o.initFrom, params.get(), mesh.shardIndex());
  else if (!m.initFile.empty())
    loadParameters(m, besideExecutable(m.initFile), params.get(), mesh.shardIndex());
  else
    initParameters(m, o.seed, params.get(), mesh.shardIndex());

  std::FILE *log = nullptr;
  if (leader && !o.log.empty() && !(log = std::fopen(o.log.c_str(), "w")))
    throw std::runtime_error(o.log + ": cannot open log file for writing");

  int64_t totalBytes = m.paramBytes + m.stateBytes + m.ioBytes + m.arenaBytes;
  if (leader)
    std::printf("shardc: %s (%s), %.2fM parameters, batch %lld x %lld x %lld "
              "tokens, %s; memory: params %.1f MiB, grads+optimizer %.1f MiB, "
              "activations %.1f MiB\n",
              m.source.c_str(), m.family.c_str(), m.numParams() / 1e6,
              (long long)o.gradAccum, (long long)B, (long long)T,
              optimizerName(m).c_str(), mib(m.paramBytes), mib(m.stateBytes),
              mib(m.arenaBytes));
  const TensorSlot &tokens = m.ioSlot("tokens"), &targets = m.ioSlot("targets");
  const TensorSlot &lossSlot = m.ioSlot("loss"), &control = m.ioSlot("accumulate");
  const TensorSlot &hyper = m.ioSlot("optimizer");
  const TensorSlot &maxNorm = m.ioSlot("max_grad_norm");
  const TensorSlot &gradSq = m.ioSlot("grad_sq_norm");
  Context ctx;
  ctx.mesh = &mesh;
  const char *profileEnv = std::getenv("SHARDC_PROFILE");
  ctx.profiling = profileEnv && *profileEnv && std::string(profileEnv) != "0";
  for (int64_t step = 0; step < o.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    ctx.startProfileInterval();
    double loss = 0;
    for (int64_t k = 0; k < o.gradAccum; ++k) {
      data.batch(step, G, (k * P + mesh.rank) * B, B, T,
                 at<int32_t>(io, tokens), at<int32_t>(io, targets));
      float *ctl = at<float>(io, control);
      ctl[0] = k > 0 ? 1.0f : 0.0f; // keep the accumulator
      // The loss is the mean over micro-batches and ranks; collectives sum.
      ctl[1] = float(1.0 / double(o.gradAccum * P));
      ctx.startProfileInterval();
      // With a no-sync step, gradients are reduced on the last micro-batch.
      bool sync = k + 1 == o.gradAccum || !shardc_micro_step_nosync;
      (sync ? shardc_micro_step : shardc_micro_step_nosync)(
          &ctx, params.get(), state.get(), io.get(), arena.get());
      loss += *at<float>(io, lossSlot) / double(o.gradAccum);
    }
    if (P > 1)
      loss = mesh.sumAll(loss) / double(P);
    if (!o.dumpGrads.empty() && step + 1 == o.steps)
      saveTensors(m, mesh, o.dumpGrads, state.get(), "grad.");
    double lr = learningRate(o, step);
    float *h = at<float>(io, hyper);
    h[0] = float(lr);
    h[1] = float(optimizerName(m) == "adamw" ? o.beta1 : o.momentum);
    h[2] = float(o.beta2);
    h[3] = float(o.eps);
    h[4] = float(o.weightDecay);
    h[5] = float(o.noDecay1D ? 0.0 : o.weightDecay);
    h[6] = float(step + 1);
    *at<float>(io, maxNorm) = float(o.clipGradNorm);
    ctx.startProfileInterval();
    shardc_opt_step(&ctx, params.get(), state.get(), io.get(), arena.get());
    ctx.resetEvents();
    double gradNorm = std::sqrt(double(*at<float>(io, gradSq)));
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    double tokPerS = double(G * T) / (ms / 1000.0);
    if (leader)
      std::printf("step %4lld/%lld | loss %.6f | lr %.3e | norm %.4f | %8.2f ms | "
                "%10.0f tok/s | mem %.1f MiB\n",
                (long long)step, (long long)o.steps, loss, lr, gradNorm, ms,
                tokPerS, mib(totalBytes));
    std::fflush(stdout);
    if (log) {
      std::fprintf(log,
                   "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, "
                   "\"grad_norm\": %.9g, \"ms\": %.3f, \"tok_per_s\": %.1f}\n",
                   (long long)step, loss, lr, gradNorm, ms, tokPerS);
      std::fflush(log);
    }
  }
  if (log)
    std::fclose(log);
  if (ctx.profiling && leader)
    ctx.printProfile();
  // The planned peak against the resident memory the run added (rank 0).
  int64_t peakRss = procStatusBytes("VmHWM");
  if (leader && baselineRss >= 0 && peakRss >= 0)
    std::printf("memory: planned peak %lld bytes, measured peak %lld bytes "
                "(resident set growth of rank 0)\n",
                (long long)totalBytes, (long long)(peakRss - baselineRss));
  if (!o.saveWeights.empty()) {
    saveTensors(m, mesh, o.saveWeights, params.get(), "");
    if (leader)
      std::printf("saved weights to %s\n", o.saveWeights.c_str());
  }
  if (!o.exportOnnx.empty()) {
    std::vector<std::vector<float>> storage;
    std::vector<NamedTensor> tensors = gatherTensors(m, mesh, params.get(), "", storage);
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
/// f32, int32, bool as one byte).
int runInfer(const Manifest &m, int argc, char **argv) {
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
  Region params = allocateRegion(m.paramBytes, "parameters");
  Region state = allocateRegion(m.stateBytes, "state");
  Region io = allocateRegion(m.ioBytes, "inputs and outputs");
  Region arena = allocateRegion(m.arenaBytes, "activations");
  if (!m.params.empty())
    loadParameters(m, besideExecutable(m.initFile), params.get(), 0);
  for (const auto &[name, file] : inputs) {
    const TensorSlot &slot = m.ioSlot(name);
    std::FILE *f = std::fopen(file.c_str(), "rb");
    if (!f)
      throw std::runtime_error(file + ": cannot open input '" + name + "'");
    size_t got = std::fread(io.get() + slot.offset, 1, size_t(slot.bytes), f);
    bool extra = std::fgetc(f) != EOF;
    std::fclose(f);
    if (got != size_t(slot.bytes) || extra)
      throw std::runtime_error(file + ": input '" + name + "' needs exactly " +
                               std::to_string(slot.bytes) + " bytes (" +
                               slot.dtype + " " + shapeString(slot.shape) + ")");
  }
  Context ctx;
  shardc_infer(&ctx, params.get(), state.get(), io.get(), arena.get());
  for (const auto &[name, file] : outputs) {
    const TensorSlot &slot = m.ioSlot(name);
    std::FILE *f = std::fopen(file.c_str(), "wb");
    if (!f || std::fwrite(io.get() + slot.offset, 1, size_t(slot.bytes), f) !=
                  size_t(slot.bytes))
      throw std::runtime_error(file + ": cannot write output '" + name + "'");
    std::fclose(f);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Manifest m;
  try {
    m = Manifest::parse(shardc_manifest);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  if (shardc_infer) {
    try {
      return runInfer(m, argc, argv);
    } catch (const std::exception &e) {
      std::fprintf(stderr, "error: %s\n", e.what());
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
  } catch (const std::exception &e) {
    std::fflush(stdout);
    // Every rank meets the same errors (same flags, same files); rank 0
    // reports. Abort the others so that no rank waits in a collective.
    if (mesh.rank == 0 || mesh.world == 1)
      std::fprintf(stderr, "error: %s\n", e.what());
    if (mesh.world > 1)
      MPI_Abort(MPI_COMM_WORLD, 1);
    Mesh::finalize();
    return 1;
  }
}
