//===- schedule.cpp - learning-rate schedule and optimizer inputs ---------===//
#include "runtime/trainer/schedule.h"

#include <algorithm>
#include <cmath>

using namespace shardc;
using namespace shardc::runtime;

/// The learning rate of step s (from 0) of `steps`.
double shardc::runtime::learningRate(const Options &o, int64_t s) {
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

void shardc::runtime::fillHyper(const Options &o, const Manifest &m,
                                int64_t s, float hyper[abi::kHyperSize]) {
  hyper[abi::kLr] = float(learningRate(o, s));
  hyper[abi::kBeta1] =
      float(m.optimizer == abi::kOptimizerAdamW ? o.beta1 : o.momentum);
  hyper[abi::kBeta2] = float(o.beta2);
  hyper[abi::kEps] = float(o.eps);
  hyper[abi::kWeightDecay] = float(o.weightDecay);
  hyper[abi::kWeightDecay1D] = float(o.noDecay1D ? 0.0 : o.weightDecay);
  hyper[abi::kStep] = float(s + 1);
}
