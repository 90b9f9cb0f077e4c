//===- flags.cpp - the trainer's command line -----------------------------===//
#include "runtime/trainer/flags.h"
#include "runtime/abi/abi.h"
#include "runtime/formats/hf_io.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

using namespace shardc;
using namespace shardc::runtime;

namespace {

const char *kUsage = R"(usage: %s [options]

Trains %s (%s), compiled for micro-batches of %lld x %lld tokens per rank
on a mesh of %lld ranks (%lld x %lld%s; launch with mpirun -np %lld).

data and run:
  --data SPEC           llm.c token files (a header of 256 int32: magic
                        20240520, version 1, count, then uint16 tokens; or
                        magic 20240801, version 7, count, then uint32 tokens,
                        Llama 3's): a file, a glob ('dir/train_*.bin'), a
                        directory (its *.bin) or a comma-separated list, read
                        in name order as one stream (one format for all); row
                        b of the global batch of step s is the stream's
                        window (s*G + b) mod W of W = (tokens-1)/T windows of
                        T tokens, with G = ranks x micro-batch x grad-accum;
                        rank r takes rows r*mb .. (r+1)*mb-1 of each global
                        micro-batch; tokens are read and checked as batches
                        need them; without it, seeded synthetic tokens
  --shuffle[=SEED]      read the windows in a seeded permutation, a new one
                        per pass over the data (SEED: --seed's); resumes
                        exactly
  --steps N             optimizer steps in all (default 10); the lr schedule
                        spans them, and a resumed run stops there
  --val-data SPEC       validation tokens (as --data): the loss of the
                        weights on its first --eval-steps global batches,
                        the mean over them and the ranks, as val_loss in
                        the step line and the log, before the update of
                        steps 0, N, 2N, ... (--eval-every N) and after the
                        last step; the same batches every time (windows
                        from the file's start, wrapping as --data's);
                        evaluated with the training micro-step (a forward
                        and a backward) whose gradients are discarded; not
                        counted in the step's ms, tok/s and tflops
  --eval-every N        evaluate every N steps too (default 0: after the
                        last step only)
  --print-every N       print the step line of steps 0, N, 2N, ..., of the
                        last step and of evaluated ones (default 1: every
                        step; --log writes every step)
  --eval-steps K        global batches per evaluation (default 10)
  --run-steps N         stop after N steps of this invocation (and write a
                        checkpoint with --checkpoint-dir), for allocations
                        with a time limit: resume continues the same run
  --grad-accum N        micro-batches per step, gradients averaged (default 1)
  --seed N              seed of initialization and synthetic data (default 1337)
  --init-from PATH      initial weights, Hugging Face names (with or without
                        the transformer./model. prefix): a safetensors file,
                        a directory as save_pretrained writes it (holding
                        model.safetensors, or model.safetensors.index.json
                        and its files), or such an index; f32, f16 or bf16;
                        each rank reads only its rows; a NaN or infinity
                        in them is an error naming the file and tensor
  --allow-nonfinite-init  load initial weights (--init-from, an ONNX
                        model's) that hold NaN or infinity anyway
  --save-weights FILE   write the weights after the last step (safetensors)
  --export-hf DIR       after the last step, write the model as
                        save_pretrained does (f32): DIR/model.safetensors,
                        or model-0000k-of-0000n.safetensors files and
                        model.safetensors.index.json, and config.json
                        (models compiled from a config.json or a preset;
                        none for ONNX models), so that transformers'
                        from_pretrained(DIR) loads it
  --max-shard-size S    with --export-hf: files of at most S (5GB, 500MB,
                        10KB in powers of 1000, 2GiB, or bytes; default
                        5GB); a larger tensor gets a file of its own
  --export-onnx FILE    (models compiled from ONNX) write the model with the
                        weights after the last step as its initializers;
                        over 2 GB they go to FILE.data (ONNX external data)
  --export-external-data  with --export-onnx: always write FILE.data
  --dump-grads FILE     write the last step's gradients, averaged over its
                        micro-batches and before clipping (safetensors)
  --log FILE            JSON lines, one per step: step, loss, lr, grad_norm,
                        ms, tok_per_s, tflops, mfu (null where the device's
                        peak is unknown), mem_mib (rank 0's resident set
                        growth so far, its peak) and planned_mib (the
                        planned peak), val_loss where evaluated; after
                        the last step, with --val-data, {step, val_loss} (a
                        resumed run keeps the lines before its checkpoint's
                        step and appends)
  --trace FILE          write a Chrome/Perfetto trace (JSON) of every kernel
                        and collective launched, per stream, with the bytes
                        of each collective; on a mesh, rank r > 0 writes
                        FILE.rank<r>, and the communication per step and
                        its exposed share are printed at the end (cpu
                        target: host timestamps; cuda: CUDA events around
                        each launch, per stream, every step launched
                        without graphs while tracing)
  --cuda-graphs=B       cuda target: capture each entry point once as a CUDA
                        graph and replay it (true, the default), or launch
                        every kernel of every step (false); the losses are
                        the same, bit for bit
  --collective-timeout S  on a mesh: a collective that has not completed
                        after S seconds (a rank died, hangs or is stopped)
                        ends the run with an error naming it, its bytes and
                        the rank (default 300; 0: no limit); cuda target:
                        NCCL's communicators are then non-blocking, and
                        aborted (ncclCommAbort) before the exit

checkpoints (the whole training state; format in docs/checkpoints-and-hf.md):
  --checkpoint-dir DIR  write checkpoints under DIR: DIR/step-NNNNNNNN, each
                        rank its shards, published atomically, and DIR/latest
  --checkpoint-every N  every N steps, and after the last (default: after the
                        last only)
  --keep K              keep the newest K checkpoints (default 0: all)
  --resume              continue from DIR/latest of --checkpoint-dir; --steps
                        stays the total (a run resumed at step 10 with --steps
                        20 runs 10 more); the mesh may differ from the one
                        that wrote it (each rank reads the rows it needs)
  --resume DIR          continue from the checkpoint in DIR (a checkpoint
                        directory, or one of its step-NNNNNNNN); also
                        --resume=DIR
  --resume auto         as --resume if --checkpoint-dir holds a checkpoint,
                        otherwise start fresh; also --resume=auto

optimizer (compiled: %s; semantics of torch.optim.AdamW / SGD):
  --skip-nonfinite N    a step whose loss is not finite skips its update;
                        after N such steps, or at once by default (0), the
                        run stops with an error naming the step (a
                        non-finite gradient norm with a finite loss always
                        stops it: the update has been applied)
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

} // namespace

void shardc::runtime::printUsage(const char *argv0, const Manifest &m) {
  // Under --tp the tokens per rank are its part of each sequence.
  const long long ranks = (long long)(m.replicas * m.shards * m.tp);
  const std::string tp =
      m.tp > 1 ? " x tp " + std::to_string(m.tp) + ", each rank 1/" +
                     std::to_string(m.tp) + " of each sequence"
               : std::string();
  std::printf(kUsage, argv0, m.source.c_str(), m.family.c_str(),
              (long long)m.microBatch, (long long)m.seqLen, ranks,
              (long long)m.replicas, (long long)m.shards, tp.c_str(), ranks,
              m.optimizer.c_str());
}

bool shardc::runtime::wantsHelp(int argc, char **argv) {
  for (int k = 1; k < argc; ++k)
    if (std::string(argv[k]) == "--help" || std::string(argv[k]) == "-h")
      return true;
  return false;
}

namespace {

/// One flag of the command line: its name, and its value inline
/// (--flag=value) or as the next argument.
struct FlagReader {
  int argc;
  char **argv;
  int &k;
  std::string arg, flag;
  size_t eq;
  bool inlineValue;

  FlagReader(int argc, char **argv, int &k)
      : argc(argc), argv(argv), k(k), arg(argv[k]), eq(arg.find('=')),
        inlineValue(eq != std::string::npos && arg.rfind("--", 0) == 0) {
    flag = inlineValue ? arg.substr(0, eq) : arg;
  }

  /// The flag's value; an empty one would silently mean "none".
  std::string next() {
    std::string value;
    if (inlineValue)
      value = arg.substr(eq + 1);
    else if (k + 1 >= argc)
      throw std::runtime_error(flag + " expects a value");
    else
      value = argv[++k];
    if (value.empty())
      throw std::runtime_error(flag + " expects a value, got an empty "
                                      "string");
    return value;
  }
};

/// Which flags were given, for the checks of their combinations.
struct Given {
  bool shardSize = false, evalSteps = false;
};

/// The data, evaluation and run flags; false if `f` is none of them.
bool parseRunFlag(FlagReader &f, Options &o, Given &given) {
  const std::string &flag = f.flag;
  if (flag == "--data")
    o.data = f.next();
  else if (flag == "--val-data")
    o.valData = f.next();
  else if (flag == "--eval-every")
    o.evalEvery = parseInt(flag, f.next());
  else if (flag == "--print-every")
    o.printEvery = parseInt(flag, f.next());
  else if (flag == "--eval-steps") {
    o.evalSteps = parseInt(flag, f.next());
    given.evalSteps = true;
  } else if (flag == "--steps")
    o.steps = parseInt(flag, f.next());
  else if (flag == "--grad-accum")
    o.gradAccum = parseInt(flag, f.next());
  else if (flag == "--seed")
    o.seed = uint64_t(parseInt(flag, f.next()));
  else if (flag == "--skip-nonfinite")
    o.skipNonfinite = parseInt(flag, f.next());
  else if (flag == "--shuffle") {
    o.shuffle = true;
    if (f.inlineValue) {
      o.shuffleSeed = uint64_t(parseInt(flag, f.next()));
      o.shuffleSeedGiven = true;
    }
  } else if (flag == "--collective-timeout")
    o.collectiveTimeout = parseFloat(flag, f.next());
  else if (flag == "--run-steps")
    o.runSteps = parseInt(flag, f.next());
  else
    return false;
  return true;
}

/// --cuda-graphs[=true|false], on a program compiled for cuda.
void parseCudaGraphs(FlagReader &f, Options &o, const Manifest &m) {
  std::string v = f.inlineValue ? f.next() : "true";
  if (v != "true" && v != "false")
    throw std::runtime_error("--cuda-graphs expects true or false, got '" + v +
                             "'");
  if (m.target != "cuda")
    throw std::runtime_error(
        "--cuda-graphs: this program was compiled for the " +
        (m.target.empty() ? std::string("cpu") : m.target) +
        " target, which has no CUDA graphs");
  o.cudaGraphs = v == "true";
}

/// The weights' and the run's inputs and outputs (--init-from, --log,
/// --trace, the exports); false if `f` is none of them.
bool parseFileFlag(FlagReader &f, Options &o, const Manifest &m,
                   Given &given) {
  const std::string &flag = f.flag;
  if (flag == "--init-from")
    o.initFrom = f.next();
  else if (flag == "--allow-nonfinite-init")
    o.allowNonfiniteInit = true;
  else if (flag == "--save-weights")
    o.saveWeights = f.next();
  else if (flag == "--export-onnx") {
    o.exportOnnx = f.next();
    if (m.graphFile.empty())
      throw std::runtime_error("--export-onnx: this model was not compiled "
                               "from an ONNX file");
  } else if (flag == "--export-external-data" && !f.inlineValue)
    o.exportExternal = true;
  else if (flag == "--dump-grads")
    o.dumpGrads = f.next();
  else if (flag == "--log")
    o.log = f.next();
  else if (flag == "--trace") {
    o.trace = f.next();
    if (o.trace.empty())
      throw std::runtime_error("--trace expects a file name");
  } else if (flag == "--cuda-graphs")
    parseCudaGraphs(f, o, m);
  else if (flag == "--export-hf") {
    o.exportHf = f.next();
    if (o.exportHf.empty())
      throw std::runtime_error("--export-hf expects a directory");
  } else if (flag == "--max-shard-size") {
    o.maxShardBytes = parseByteSize(flag, f.next());
    given.shardSize = true;
  } else
    return false;
  return true;
}

/// The checkpoint flags; false if `f` is none of them.
bool parseCheckpointFlag(FlagReader &f, Options &o) {
  const std::string &flag = f.flag;
  if (flag == "--checkpoint-dir")
    o.checkpointDir = f.next();
  else if (flag == "--checkpoint-every")
    o.checkpointEvery = parseInt(flag, f.next());
  else if (flag == "--keep")
    o.keep = parseInt(flag, f.next());
  else if (flag == "--resume") {
    // --resume=DIR, --resume DIR (a next argument that is not a flag), or
    // --resume alone: the latest of --checkpoint-dir.
    if (f.inlineValue)
      o.resume = f.arg.substr(f.eq + 1);
    else if (f.k + 1 < f.argc && f.argv[f.k + 1][0] != '-')
      o.resume = f.argv[++f.k];
    else
      o.resume = "latest";
    if (o.resume.empty())
      throw std::runtime_error("--resume= expects a directory or auto");
  } else
    return false;
  return true;
}

/// The optimizer and schedule flags; false if `f` is none of them.
bool parseOptimizerFlag(FlagReader &f, Options &o) {
  const std::string &flag = f.flag;
  if (flag == "--lr")
    o.lr = parseFloat(flag, f.next());
  else if (flag == "--beta1")
    o.beta1 = parseFloat(flag, f.next());
  else if (flag == "--beta2")
    o.beta2 = parseFloat(flag, f.next());
  else if (flag == "--eps")
    o.eps = parseFloat(flag, f.next());
  else if (flag == "--momentum")
    o.momentum = parseFloat(flag, f.next());
  else if (flag == "--weight-decay")
    o.weightDecay = parseFloat(flag, f.next());
  else if (flag == "--no-decay-1d" && !f.inlineValue)
    o.noDecay1D = true;
  else if (flag == "--clip-grad-norm")
    o.clipGradNorm = parseFloat(flag, f.next());
  else if (flag == "--warmup-steps")
    o.warmupSteps = parseInt(flag, f.next());
  else if (flag == "--lr-schedule") {
    o.schedule = f.next();
    if (o.schedule != "constant" && o.schedule != "cosine" &&
        o.schedule != "linear")
      throw std::runtime_error("--lr-schedule must be constant, cosine or "
                               "linear, got '" + o.schedule + "'");
  } else
    return false;
  return true;
}

/// The flags that need another, or bound one another; then the defaults
/// that depend on other flags.
void checkCombinations(Options &o, const Manifest &m, const Given &given) {
  if (o.checkpointDir.empty() && (o.checkpointEvery > 0 || o.keep > 0 ||
                                  o.resume == "latest" || o.resume == "auto"))
    throw std::runtime_error(
        std::string(o.resume == "latest" || o.resume == "auto"
                        ? "--resume"
                        : o.keep > 0 ? "--keep" : "--checkpoint-every") +
        " needs --checkpoint-dir DIR");
  if (given.shardSize && o.exportHf.empty())
    throw std::runtime_error("--max-shard-size needs --export-hf DIR");
  if (o.gradAccum < 1)
    throw std::runtime_error("--grad-accum must be at least 1");
  if (o.evalEvery < 0)
    throw std::runtime_error("--eval-every must be 0 (after the last step "
                             "only) or positive");
  if (o.printEvery < 1)
    throw std::runtime_error("--print-every must be at least 1");
  if (o.evalSteps < 1)
    throw std::runtime_error("--eval-steps must be at least 1");
  if (o.valData.empty() && (o.evalEvery > 0 || given.evalSteps))
    throw std::runtime_error(std::string(o.evalEvery > 0 ? "--eval-every"
                                                         : "--eval-steps") +
                             " needs --val-data FILE to evaluate on");
  if (o.beta1 >= 1 || o.beta2 >= 1)
    throw std::runtime_error("--beta1 and --beta2 must be below 1");
  if (o.weightDecay < 0)
    o.weightDecay = m.optimizer == abi::kOptimizerAdamW ? 0.01 : 0.0;
  if (o.shuffle && !o.shuffleSeedGiven)
    o.shuffleSeed = o.seed;
}

} // namespace

Options shardc::runtime::parseOptions(int argc, char **argv,
                                      const Manifest &m) {
  Options o;
  Given given;
  for (int k = 1; k < argc; ++k) {
    FlagReader f(argc, argv, k);
    if (!parseRunFlag(f, o, given) && !parseFileFlag(f, o, m, given) &&
        !parseCheckpointFlag(f, o) && !parseOptimizerFlag(f, o))
      throw std::runtime_error("unknown option '" + f.arg + "' (see --help)");
  }
  checkCombinations(o, m, given);
  return o;
}


namespace {

bool sameFile(const struct stat &a, const std::string &path) {
  struct stat b;
  return ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

} // namespace

void shardc::runtime::checkOutputs(const Options &o) {
  struct Output {
    const char *flag;
    const std::string &path;
    bool directory;
  };
  const Output outputs[] = {{"--save-weights", o.saveWeights, false},
                            {"--dump-grads", o.dumpGrads, false},
                            {"--log", o.log, false},
                            {"--export-onnx", o.exportOnnx, false},
                            {"--trace", o.trace, false},
                            {"--export-hf", o.exportHf, true},
                            {"--checkpoint-dir", o.checkpointDir, true}};
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"--data", o.data}, {"--init-from", o.initFrom},
      {"--val-data", o.valData}};
  for (const Output &out : outputs)
    if (!out.path.empty())
      checkOutputPath(std::string(out.flag) + " " + out.path, out.path,
                      out.directory, inputs);
}

void shardc::runtime::checkOutputPath(
    const std::string &what, const std::string &path, bool directory,
    const std::vector<std::pair<std::string, std::string>> &inputs) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
      throw std::runtime_error(
          what + ": exists and is not a " +
          (directory ? "directory" : "regular file") +
          (directory ? ""
                     : " (a device, FIFO or directory is never "
                       "written over)"));
    for (const auto &[flag, input] : inputs)
      if (!input.empty() && sameFile(st, input))
        throw std::runtime_error(what + ": is the " + flag +
                                 " file of this run; writing it would "
                                 "destroy the input");
    if (::access(path.c_str(), W_OK) != 0)
      throw std::runtime_error(what + ": not writable");
    return;
  }
  // A new file (or directory: created with its parents when written):
  // the nearest existing ancestor must be a writable directory.
  std::string dir = path;
  while (true) {
    size_t slash = dir.find_last_of('/');
    dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
    if (::stat(dir.c_str(), &st) == 0 || dir == "." || dir == "/")
      break;
    if (!directory)
      throw std::runtime_error(what + ": directory " + dir + " does not exist");
  }
  if (!S_ISDIR(st.st_mode))
    throw std::runtime_error(what + ": " + dir + " is not a directory");
  if (::access(dir.c_str(), W_OK) != 0)
    throw std::runtime_error(what + ": directory " + dir + " is not writable");
}
