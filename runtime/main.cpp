//===- main.cpp - the trainer's main: flags, data, steps, logging ---------===//
//
// Linked with a compiled step object into the executable shardc produces.
//
//===----------------------------------------------------------------------===//
#include "runtime/data.h"
#include "runtime/model.h"
#include "runtime/runtime.h"
#include "runtime/safetensors.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

using namespace shardc::runtime;

namespace {

const char *kUsage = R"(usage: %s [options]

Runs the compiled training step of %s (%s).

options:
  --data FILE           llm.c token file (header of 256 int32: magic 20240520,
                        version 1, token count; then uint16 tokens); the batch
                        of step s takes row b from token (s*B+b)*T, wrapping
                        around the file; without it, seeded synthetic tokens
  --steps N             number of steps (default 10)
  --seed N              seed of initialization and synthetic data (default 1337)
  --init-from FILE      initial weights from a safetensors file (Hugging Face
                        names, with or without the transformer./model. prefix)
  --save-weights FILE   write the weights after the last step (safetensors)
  --log FILE            JSON lines, one per step: step, loss, ms, tok_per_s
  --help                this message
)";

struct Options {
  std::string data, initFrom, saveWeights, log;
  int64_t steps = 10;
  uint64_t seed = 1337;
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

Options parseOptions(int argc, char **argv, const Manifest &m) {
  Options o;
  for (int k = 1; k < argc; ++k) {
    std::string arg = argv[k], value;
    if (arg == "--help" || arg == "-h") {
      std::printf(kUsage, argv[0], m.source.c_str(), m.family.c_str());
      std::exit(0);
    }
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
    else if (flag == "--seed")
      o.seed = uint64_t(parseInt(flag, next()));
    else if (flag == "--init-from")
      o.initFrom = next();
    else if (flag == "--save-weights")
      o.saveWeights = next();
    else if (flag == "--log")
      o.log = next();
    else
      throw std::runtime_error("unknown option '" + arg + "' (see --help)");
  }
  return o;
}

/// The checkpoint name of a parameter without its model prefix, if any.
std::string withoutPrefix(const std::string &name) {
  for (const char *prefix : {"transformer.", "model."})
    if (name.rfind(prefix, 0) == 0)
      return name.substr(std::strlen(prefix));
  return name;
}

void loadParameters(const Manifest &m, const std::string &path, char *params) {
  std::map<std::string, LoadedTensor> file = readSafetensors(path);
  for (const TensorSlot &p : m.params) {
    auto it = file.find(p.name);
    if (it == file.end())
      it = file.find(withoutPrefix(p.name));
    if (it == file.end())
      throw std::runtime_error(path + ": missing parameter '" + p.name + "'");
    if (it->second.shape != p.shape) {
      std::string want, got;
      for (int64_t d : p.shape)
        want += (want.empty() ? "" : ", ") + std::to_string(d);
      for (int64_t d : it->second.shape)
        got += (got.empty() ? "" : ", ") + std::to_string(d);
      throw std::runtime_error(path + ": parameter '" + p.name +
                               "' has shape [" + got + "], expected [" + want +
                               "]");
    }
    std::memcpy(params + p.offset, it->second.data.data(), p.numel() * 4);
  }
}

void saveParameters(const Manifest &m, const std::string &path,
                    const char *params) {
  std::vector<NamedTensor> tensors;
  for (const TensorSlot &p : m.params)
    tensors.push_back({p.name, p.shape,
                       reinterpret_cast<const float *>(params + p.offset)});
  writeSafetensors(path, tensors, {{"format", "pt"}, {"producer", "shardc"}});
}

struct AlignedFree {
  void operator()(char *p) const { std::free(p); }
};
using Region = std::unique_ptr<char, AlignedFree>;

Region allocateRegion(int64_t bytes, const char *what) {
  size_t size = size_t((bytes + 63) / 64 * 64);
  if (size == 0)
    size = 64;
  char *p = static_cast<char *>(std::aligned_alloc(64, size));
  if (!p)
    throw std::runtime_error(std::string("cannot allocate ") +
                             std::to_string(bytes) + " bytes for " + what);
  std::memset(p, 0, size);
  return Region(p);
}

double mib(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

int run(int argc, char **argv) {
  Manifest m = Manifest::parse(shardc_manifest);
  Options o = parseOptions(argc, argv, m);

  const int64_t B = m.microBatch, T = m.seqLen;
  TokenData data = o.data.empty()
                       ? TokenData::synthetic(o.seed, m.vocabSize,
                                              (o.steps + 1) * B * T + 1)
                       : TokenData::load(o.data, m.vocabSize);

  Region params = allocateRegion(m.paramBytes, "parameters");
  Region io = allocateRegion(m.ioBytes, "inputs and outputs");
  Region arena = allocateRegion(m.arenaBytes, "activations");
  if (o.initFrom.empty())
    initParameters(m, o.seed, params.get());
  else
    loadParameters(m, o.initFrom, params.get());

  std::FILE *log = nullptr;
  if (!o.log.empty() && !(log = std::fopen(o.log.c_str(), "w")))
    throw std::runtime_error(o.log + ": cannot open log file for writing");

  std::printf("shardc: %s (%s), %.2fM parameters, micro-batch %lld x %lld, "
              "memory: params %.1f MiB, activations %.1f MiB\n",
              m.source.c_str(), m.family.c_str(), m.numParams() / 1e6,
              (long long)B, (long long)T, mib(m.paramBytes),
              mib(m.arenaBytes));
  const TensorSlot &tokens = m.input("tokens"), &targets = m.input("targets");
  const TensorSlot &lossSlot = m.output("loss");
  Context ctx;
  for (int64_t step = 0; step < o.steps; ++step) {
    data.batch(step, B, 0, B, T,
               reinterpret_cast<int32_t *>(io.get() + tokens.offset),
               reinterpret_cast<int32_t *>(io.get() + targets.offset));
    auto start = std::chrono::steady_clock::now();
    shardc_step(&ctx, params.get(), io.get(), arena.get());
    ctx.resetEvents();
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    float loss;
    std::memcpy(&loss, io.get() + lossSlot.offset, sizeof(float));
    double tokPerS = double(B * T) / (ms / 1000.0);
    std::printf("step %4lld/%lld | loss %.6f | %8.2f ms | %10.0f tok/s | "
                "mem %.1f MiB\n",
                (long long)step, (long long)o.steps, loss, ms, tokPerS,
                mib(m.paramBytes + m.ioBytes + m.arenaBytes));
    std::fflush(stdout);
    if (log) {
      std::fprintf(log,
                   "{\"step\": %lld, \"loss\": %.9g, \"ms\": %.3f, "
                   "\"tok_per_s\": %.1f}\n",
                   (long long)step, loss, ms, tokPerS);
      std::fflush(log);
    }
  }
  if (log)
    std::fclose(log);
  if (!o.saveWeights.empty()) {
    saveParameters(m, o.saveWeights, params.get());
    std::printf("saved weights to %s\n", o.saveWeights.c_str());
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
