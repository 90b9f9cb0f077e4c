//===- options.h - a run's settings --------------------------------*- C++ -*-===//
//
// What a run was asked to do: the trainer's flags as parsed
// (runtime/trainer/flags.cpp parses them and says each in its usage), and
// what checkpoints record of them and check on resume.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_PROGRAM_OPTIONS_H
#define SHARDC_RUNTIME_PROGRAM_OPTIONS_H

#include <cstdint>
#include <string>

namespace shardc::runtime {

/// The trainer's flags, as parsed (the usage text in flags.cpp says each).
struct Options {
  std::string data, initFrom, saveWeights, dumpGrads, log, exportOnnx;
  int64_t steps = 10, gradAccum = 1, warmupSteps = 0;
  uint64_t seed = 1337;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, momentum = 0.0;
  double weightDecay = -1.0; // -1: the optimizer's default
  bool noDecay1D = false, exportExternal = false;
  double clipGradNorm = 0.0;
  std::string schedule = "constant";
  /// Checkpoints: written under checkpointDir every checkpointEvery steps
  /// (0: at the end only), the newest `keep` kept (0: all). resume: "" (do
  /// not), "latest" (from checkpointDir; an error if none), "auto" (from
  /// checkpointDir if there is one), or a directory.
  std::string checkpointDir, resume;
  /// Chrome trace output (rank r > 0 of a mesh writes FILE with .rank<r>).
  std::string trace;
  /// --export-hf DIR, split into files of at most maxShardBytes.
  std::string exportHf;
  int64_t maxShardBytes = 5000000000;
  /// Seconds a collective may take before the run aborts (0: no limit).
  double collectiveTimeout = 300;
  /// Steps with a non-finite loss that may be skipped before the run stops.
  int64_t skipNonfinite = 0;
  /// Load initial weights holding NaN or infinity (--allow-nonfinite-init).
  bool allowNonfiniteInit = false;
  /// --shuffle[=SEED]: read the data's seq-len windows in a seeded
  /// permutation per pass (SEED: --seed's by default).
  bool shuffle = false;
  uint64_t shuffleSeed = 0;
  bool shuffleSeedGiven = false;
  int64_t checkpointEvery = 0, keep = 0;
  /// Steps this invocation runs at most (0: up to --steps).
  int64_t runSteps = 0;
  /// CUDA target: replay captured CUDA graphs (--cuda-graphs).
  bool cudaGraphs = true;
  /// --val-data SPEC: evalSteps global batches of it evaluated before the
  /// update of steps 0, evalEvery, 2 evalEvery, ... (0: none of those) and
  /// after the last step.
  std::string valData;
  int64_t evalEvery = 0, evalSteps = 10;
  /// Print the step line of steps 0, N, 2N, ..., the last and the evaluated
  /// ones (--print-every; the --log has every step).
  int64_t printEvery = 1;
};

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_PROGRAM_OPTIONS_H
