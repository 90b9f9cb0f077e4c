//===- finish.cpp - the end of a run: last checkpoint, summaries ----------===//
#include "runtime/trainer/trainer.h"

#include <cstdio>

using namespace shardc;
using namespace shardc::runtime;

void Trainer::finish() {
  if (!o_.checkpointDir.empty() && lastSaved_ != progress_.step)
    checkpointer_->save(o_.checkpointDir, progress_, o_, o_.keep);
  // After the last step (not where --run-steps stops short of it): the
  // final weights' validation loss, logged under step --steps.
  if (valData_ && endStep_ == o_.steps && startStep_ < endStep_) {
    doing = "evaluating --val-data after the last step";
    double valLoss = evaluate();
    if (leader_)
      std::printf("step %4lld/%lld | val_loss %.6f (after the last step)\n",
                  (long long)o_.steps, (long long)o_.steps, valLoss);
    if (log_.isOpen())
      log_.finalValidation(o_.steps, valLoss);
  }
  log_.close();
  if (leader_ && trace_.commSeconds() > 0 && stepSeconds_ > 0) {
    int64_t ran = endStep_ - startStep_;
    std::printf("communication: %.2f ms per step on rank 0, %.2f ms of it "
                "exposed (not overlapped by compute): %.1f%% of the step "
                "time\n",
                1e3 * trace_.commSeconds() / double(ran),
                1e3 * trace_.exposedCommSeconds() / double(ran),
                100.0 * trace_.exposedCommSeconds() / stepSeconds_);
  }
  if (!o_.trace.empty()) {
    std::string path = mesh_.rank == 0
                           ? o_.trace
                           : o_.trace + ".rank" + std::to_string(mesh_.rank);
    trace_.writeJson(path, mesh_.rank);
    if (leader_)
      std::printf("trace written to %s%s\n", o_.trace.c_str(),
                  mesh_.world > 1 ? " (rank r > 0: .rank<r>)" : "");
  }
  if (profiling_ && leader_)
    backend_->printProfile();
  printMemory();
}

// The planned peak against the resident memory the run added (rank 0),
// split where the regions are host memory: the pages of the regions the
// plan counts, and the rest, the runtime's own (its libraries' code paged
// in, oneDNN's JIT kernels, thread stacks, the heap), which no plan of the
// program's tensors holds.
void Trainer::printMemory() {
  int64_t peakRss = procStatusBytes("VmHWM");
  if (!leader_ || baselineRss_ < 0 || peakRss < 0)
    return;
  int64_t grown = peakRss - baselineRss_;
  std::printf("memory: planned peak %lld bytes, measured peak %lld bytes "
              "(resident set growth of rank 0)",
              (long long)totalBytes_, (long long)grown);
  int64_t regions = mem_->plannedRegionsResident();
  if (regions >= 0 && totalBytes_ > 0)
    std::printf(": the planned regions %lld bytes (%+.1f%% of the plan), the "
                "runtime's own %lld bytes (libraries' code, JIT kernels, "
                "threads, heap)",
                (long long)regions,
                100.0 * double(regions - totalBytes_) / double(totalBytes_),
                (long long)(grown - regions));
  std::printf("\n");
}
