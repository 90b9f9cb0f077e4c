//===- step_log.h - the --log file: one JSON line a step ------*- C++ -*-===//
#ifndef SHARDC_RUNTIME_TRAINER_STEP_LOG_H
#define SHARDC_RUNTIME_TRAINER_STEP_LOG_H

#include <cstdint>
#include <cstdio>
#include <string>

namespace shardc::runtime {

/// A number as JSON writes it: "%.9g", or null where it is not finite
/// (JSON has no nan: a skipped step's grad_norm, a non-finite loss).
std::string jsonNumber(double v);

/// What one step did, as its line and its log record say.
struct StepRecord {
  double loss = 0, lr = 0, gradNorm = 0;
  double ms = 0, tokPerS = 0, tflops = 0, mfu = 0;
  /// Rank 0's resident set growth so far (its peak, VmHWM, over the run's
  /// start) and the planned peak, in MiB; measured < 0: not known.
  double memMib = -1, plannedMib = 0;
};

/// The --log file (rank 0): JSON lines, one per step. Every write is
/// flushed, and a failed one throws naming the file.
class StepLog {
public:
  StepLog() = default;
  StepLog(const StepLog &) = delete;
  StepLog &operator=(const StepLog &) = delete;
  ~StepLog();

  /// Opens `path`; a run resumed at `startStep` > 0 keeps the lines before
  /// its step and appends.
  void open(const std::string &path, int64_t startStep);
  bool isOpen() const { return file_ != nullptr; }
  /// A step's line; val_loss where `evaluated`.
  void step(int64_t step, const StepRecord &r, bool evaluated,
            double valLoss);
  /// The validation loss after the last step, under step `steps`.
  void finalValidation(int64_t steps, double valLoss);
  /// Closes the file; throws if its last writes failed.
  void close();

private:
  void check(int wrote);

  std::string path_;
  std::FILE *file_ = nullptr;
};

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_TRAINER_STEP_LOG_H
