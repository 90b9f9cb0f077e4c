//===- step.cpp - the trainer's steps -------------------------------------===//
//
// Each step runs the compiled micro-step once per micro-batch (forward,
// backward, gradient accumulation), then the compiled optimizer step; it
// prints its line, writes its log record, and checkpoints when due.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/checkpoint_io.h"
#include "runtime/runtime.h"
#include "runtime/trainer/schedule.h"
#include "runtime/trainer/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

using namespace shardc;
using namespace shardc::runtime;

void Trainer::train() {
  for (int64_t step = startStep_; step < endStep_; ++step) {
    doing = "running step " + std::to_string(step);
    mem_->step = step;
    double valLoss = std::nan("");
    bool evaluated = valData_ && o_.evalEvery > 0 && step % o_.evalEvery == 0;
    if (evaluated) {
      doing = "evaluating --val-data before step " + std::to_string(step);
      valLoss = evaluate();
      doing = "running step " + std::to_string(step);
    }
    StepRecord r = runStep(step);
    report(step, r, evaluated, valLoss);
    progress_.step = step + 1;
    progress_.dataRow += G_;
    if (!o_.checkpointDir.empty() && o_.checkpointEvery > 0 &&
        progress_.step % o_.checkpointEvery == 0) {
      checkpointer_->save(o_.checkpointDir, progress_, o_, o_.keep);
      lastSaved_ = progress_.step;
    }
  }
}

StepRecord Trainer::runStep(int64_t step) {
  auto start = std::chrono::steady_clock::now();
  mem_->flops = 0;
  StepRecord r;
  r.loss = microBatches();
  if (!o_.dumpGrads.empty() && step + 1 == o_.steps)
    saveTensors(m_, mesh_, *backend_, o_.dumpGrads,
                mem_->region(abi::kRegionState), abi::kStateGrad);
  r.lr = learningRate(o_, step);
  r.gradNorm = std::nan("");
  // Every rank has the same global loss, so every rank decides alike.
  if (!std::isfinite(r.loss))
    skipNonfinite(step, r.loss);
  else
    r.gradNorm = update(step);
  r.ms = std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
             .count();
  r.tokPerS = double(G_ * T_) / (r.ms / 1000.0);
  // This rank's GEMM and attention work over the step's time.
  r.tflops = double(mem_->flops) / (r.ms / 1000.0) / 1e12;
  // Memory for the --log line only: reading /proc is no work for every step.
  if (log_.isOpen()) {
    int64_t peakRss = procStatusBytes("VmHWM");
    if (baselineRss_ >= 0 && peakRss >= 0)
      r.memMib = mib(peakRss - baselineRss_);
    r.plannedMib = mib(totalBytes_);
  }
  stepSeconds_ += r.ms * 1e-3;
  r.mfu = peak_ ? r.tflops * 1e12 / peak_->of(m_.computeDtype) : std::nan("");
  return r;
}

void Trainer::readBatch(const TokenData &data, int64_t firstRow, int64_t k) {
  const int64_t row = firstRow + (k * D_ + mesh_.dataIndex()) * B_;
  int32_t *tokens = mem_->host<int32_t>(*tokens_);
  int32_t *targets = mem_->host<int32_t>(*targets_);
  if (tpIndex_) {
    *mem_->host<int32_t>(*tpIndex_) = int32_t(mesh_.tpIndex());
    mem_->put(*tpIndex_);
  }
  // Every tp rank reads the whole sequences where the program takes them
  // whole (a vocabulary-parallel embedding and loss read every token).
  if (mesh_.tp == 1 || m_.tpWholeTokens) {
    data.batch(/*step=*/0, G_, row, B_, T_, tokens, targets);
    return;
  }
  // Sequence parallelism: tp rank t trains on tokens [t T/tp, (t+1) T/tp)
  // of every sequence.
  rowTokens_.resize(size_t(B_ * T_));
  rowTargets_.resize(size_t(B_ * T_));
  data.batch(/*step=*/0, G_, row, B_, T_, rowTokens_.data(), rowTargets_.data());
  const int64_t part = T_ / mesh_.tp, first = mesh_.tpIndex() * part;
  for (int64_t b = 0; b < B_; ++b)
    for (int64_t j = 0; j < part; ++j) {
      tokens[b * part + j] = rowTokens_[size_t(b * T_ + first + j)];
      targets[b * part + j] = rowTargets_[size_t(b * T_ + first + j)];
    }
}

double Trainer::microBatches() {
  double loss = 0;
  for (int64_t k = 0; k < o_.gradAccum; ++k) {
    readBatch(*data_, progress_.dataRow, k);
    float *ctl = mem_->host<float>(*control_);
    ctl[0] = k > 0 ? 1.0f : 0.0f; // keep the accumulator
    // The loss is the mean over micro-batches and ranks (a tp rank's loss
    // is its part of the tokens'); collectives sum.
    ctl[1] = float(1.0 / double(o_.gradAccum * P_));
    for (const TensorSlot *s : {tokens_, targets_, control_})
      mem_->put(*s);
    // With a no-sync step, gradients are reduced on the last micro-batch.
    bool sync = k + 1 == o_.gradAccum || !shardc_program_micro_step_nosync;
    if (sync)
      mem_->run(shardc_program_micro_step, "micro_step");
    else
      mem_->run(shardc_program_micro_step_nosync, "micro_step_nosync");
    mem_->get(*loss_);
    loss += *mem_->host<float>(*loss_) / double(o_.gradAccum);
  }
  if (P_ > 1)
    loss = mesh_.sumAll(loss) / double(P_);
  return loss;
}

void Trainer::skipNonfinite(int64_t step, double loss) {
  if (++nonfinite_ > o_.skipNonfinite)
    throw std::runtime_error(
        "step " + std::to_string(step) + ": the loss is " +
        (std::isnan(loss) ? "nan" : "infinite") + "; stopping" +
        (o_.skipNonfinite ? " after " + std::to_string(o_.skipNonfinite) +
                                " skipped steps (--skip-nonfinite)"
                          : " (--skip-nonfinite N skips up to N such "
                            "steps' updates)"));
  if (leader_)
    std::printf("step %4lld: loss is not finite: update skipped (%lld of "
                "%lld allowed by --skip-nonfinite)\n",
                (long long)step, (long long)nonfinite_,
                (long long)o_.skipNonfinite);
}

double Trainer::update(int64_t step) {
  fillHyper(o_, m_, step, mem_->host<float>(*hyper_));
  *mem_->host<float>(*maxNorm_) = float(o_.clipGradNorm);
  mem_->put(*hyper_);
  mem_->put(*maxNorm_);
  mem_->run(shardc_program_opt_step, "opt_step");
  mem_->get(*gradSq_);
  double gradNorm = std::sqrt(double(*mem_->host<float>(*gradSq_)));
  if (!std::isfinite(gradNorm))
    throw std::runtime_error(
        "step " + std::to_string(step) +
        ": the gradient norm is not finite although the loss is; the "
        "update has made the weights non-finite, so the run stops "
        "(lower --lr, or clip with --clip-grad-norm)");
  return gradNorm;
}

void Trainer::report(int64_t step, const StepRecord &r, bool evaluated,
                     double valLoss) {
  bool printed = step % o_.printEvery == 0 || step + 1 == endStep_ || evaluated;
  if (leader_ && printed) {
    std::printf("step %4lld/%lld | loss %.6f | lr %.3e | norm %.4f | %8.2f ms "
                "| %10.0f tok/s | mem %.1f MiB | tflops %.3f",
                (long long)step, (long long)o_.steps, r.loss, r.lr, r.gradNorm,
                r.ms, r.tokPerS, mib(totalBytes_), r.tflops);
    if (peak_)
      std::printf(" | mfu %.1f%%", 100.0 * r.mfu);
    if (evaluated)
      std::printf(" | val_loss %.6f", valLoss);
    std::printf("\n");
  }
  std::fflush(stdout);
  if (log_.isOpen())
    log_.step(step, r, evaluated, valLoss);
}
