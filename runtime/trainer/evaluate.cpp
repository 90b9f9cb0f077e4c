//===- evaluate.cpp - the loss on --val-data ------------------------------===//
#include "runtime/runtime.h"
#include "runtime/trainer/trainer.h"

using namespace shardc;
using namespace shardc::runtime;

// The loss of the current weights on the file's first --eval-steps global
// batches, averaged over them and the ranks. Each batch runs the training
// micro-step with the accumulator control (keep 0, scale 0): its gradients
// are discarded, and the next training micro-step (keep 0) writes the
// accumulators afresh.
double Trainer::evaluate() {
  double total = 0;
  for (int64_t k = 0; k < o_.evalSteps; ++k) {
    readBatch(*valData_, /*firstRow=*/0, k);
    float *ctl = mem_->host<float>(*control_);
    ctl[0] = 0.0f;
    ctl[1] = 0.0f;
    for (const TensorSlot *s : {tokens_, targets_, control_})
      mem_->put(*s);
    mem_->run(shardc_program_micro_step, "micro_step");
    mem_->get(*loss_);
    total += *mem_->host<float>(*loss_);
  }
  total /= double(o_.evalSteps);
  return P_ > 1 ? mesh_.sumAll(total) / double(P_) : total;
}
