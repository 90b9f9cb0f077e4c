//===- schedule.h - learning-rate schedule and optimizer inputs ---*- C++ -*-===//
#ifndef SHARDC_RUNTIME_TRAINER_SCHEDULE_H
#define SHARDC_RUNTIME_TRAINER_SCHEDULE_H

#include "runtime/abi/abi.h"
#include "runtime/trainer/flags.h"

namespace shardc::runtime {

/// The learning rate of step s (from 0) of o.steps: warmup, then constant,
/// cosine or linear decay to zero.
double learningRate(const Options &o, int64_t s);

/// The optimizer's hyper-parameter input of step s (abi::Hyper layout).
void fillHyper(const Options &o, const Manifest &m, int64_t s,
               float hyper[abi::kHyperSize]);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_TRAINER_SCHEDULE_H
