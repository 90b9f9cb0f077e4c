//===- trainer.h - a training run in named phases -------------*- C++ -*-===//
//
// The trainer's run, phase by phase (main.cpp calls them in this order):
//
//   set-up          Trainer(): flags, the ranks' agreement, the outputs'
//                   check, the watchdog, the backend and the memory
//                                                          (setup.cpp)
//   initial weights initialWeights(): --init-from, the model's file or the
//                   seeded init                            (weights.cpp)
//   resume          resume(): the checkpoint directory, --resume; then the
//                   bf16 working copies                    (resume.cpp)
//   the run's I/O   openData(), openLog(), printBanner(), prepareLaunches(),
//                   openValidation()                       (setup.cpp)
//   steps           train(): per step, evaluation, one step (micro-batches
//                   and the update), its line and log, a checkpoint
//                                                          (step.cpp)
//   evaluation      evaluate()                             (evaluate.cpp)
//   finish          finish(): the last checkpoint and evaluation, the
//                   summaries, the trace                   (finish.cpp)
//   export          exportModel(): --save-weights, --export-hf,
//                   --export-onnx                          (export.cpp)
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_TRAINER_TRAINER_H
#define SHARDC_RUNTIME_TRAINER_TRAINER_H

#include "runtime/backend.h"
#include "runtime/formats/checkpoint.h"
#include "runtime/formats/data.h"
#include "runtime/mesh.h"
#include "runtime/trainer/flags.h"
#include "runtime/trainer/memory.h"
#include "runtime/program/model.h"
#include "runtime/trainer/peaks.h"
#include "runtime/trainer/step_log.h"
#include "runtime/program/trace.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace shardc::runtime {

/// What the trainer is doing, for the message of a failure that is not one
/// of its own errors (out of memory while reading --data FILE).
extern std::string doing;

/// Every rank runs the same program with the same flags: otherwise their
/// collectives would not match and they would wait for each other forever.
/// Throws on every rank, naming the first difference.
void checkRanksAgree(const Manifest &m, const Mesh &mesh, int argc,
                     char **argv);

/// An --infer build: reads each input slot from a raw file, runs the graph
/// once, writes each output slot to a raw file (infer.cpp).
int runInfer(const Manifest &m, int argc, char **argv);

class Trainer {
public:
  /// Set-up: parses the flags (throwing on a bad one), checks that the
  /// ranks agree and that the outputs can be written, starts the watchdog,
  /// and allocates the program's memory.
  Trainer(const Manifest &m, const Mesh &mesh, int argc, char **argv);

  /// The initial weights: --init-from, the model's own file (ONNX), or the
  /// seeded initialization.
  void initialWeights();
  /// Makes --checkpoint-dir, and with --resume replaces the initial state
  /// with the checkpoint's; then the steps this invocation runs (to
  /// --steps, or --run-steps of them).
  void resume();
  /// Casts the bf16 working copies from the parameters (rt-working-copy).
  void refreshWorkingCopies();
  /// The token stream (--data, or synthetic tokens).
  void openData();
  /// --log: a resumed run keeps the lines before its step.
  void openLog();
  /// The run's summary line (rank 0).
  void printBanner();
  /// The io slots the steps use, profiling, graphs and the trace.
  void prepareLaunches();
  /// --val-data.
  void openValidation();
  /// The steps from the start (or the resumed step) to --steps or
  /// --run-steps: each with its evaluation, line, log and checkpoint.
  void train();
  /// The last checkpoint and evaluation, the log's close, the
  /// communication, trace, profile and memory summaries.
  void finish();
  void printMemory();
  /// --save-weights, --export-hf, --export-onnx.
  void exportModel();

private:
  /// One step: its micro-batches, then the update; timed.
  StepRecord runStep(int64_t step);
  /// The micro-batches of `step`: the loss, averaged over them and ranks.
  double microBatches();
  /// Micro-batch `k`'s rows of this rank's data-parallel index from `data`
  /// (global batch rows from `firstRow`) into the tokens and targets
  /// slots: this tp rank's part of each sequence under --tp.
  void readBatch(const TokenData &data, int64_t firstRow, int64_t k);
  /// The optimizer step after a finite loss; returns the gradient norm.
  double update(int64_t step);
  /// A step whose loss is not finite: skipped, or the run stops.
  void skipNonfinite(int64_t step, double loss);
  /// The step's line (rank 0) and its --log record.
  void report(int64_t step, const StepRecord &r, bool evaluated,
              double valLoss);
  /// The loss of the weights on the --val-data batches.
  double evaluate();

  const Manifest &m_;
  const Mesh &mesh_;
  Options o_;
  /// Micro-batch, sequence length, ranks, data-parallel ranks (ranks / tp);
  /// rows of a global batch.
  int64_t B_ = 0, T_ = 0, P_ = 1, D_ = 1, G_ = 0;
  /// --tp's parts of each sequence: whole rows read here, then split.
  std::vector<int32_t> rowTokens_, rowTargets_;
  /// abi::kIoTpIndex where the program reads it (GPT-2 under --tp).
  const TensorSlot *tpIndex_ = nullptr;
  bool leader_ = false;
  int64_t baselineRss_ = -1;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Memory> mem_;
  std::unique_ptr<Checkpointer> checkpointer_;
  TrainProgress progress_;
  int64_t startStep_ = 0, endStep_ = 0, lastSaved_ = 0, nonfinite_ = 0;
  std::optional<TokenData> data_, valData_;
  StepLog log_;
  const DevicePeak *peak_ = nullptr;
  /// Every planned byte, on the device and (--offload=cpu) on the host.
  int64_t totalBytes_ = 0;
  /// The io slots of the steps.
  const TensorSlot *tokens_ = nullptr, *targets_ = nullptr, *loss_ = nullptr,
                   *control_ = nullptr, *hyper_ = nullptr,
                   *maxNorm_ = nullptr, *gradSq_ = nullptr;
  bool profiling_ = false;
  Trace trace_;
  double stepSeconds_ = 0;
};

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_TRAINER_TRAINER_H
