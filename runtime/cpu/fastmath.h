//===- fastmath.h - vectorizable row reductions --------------------*- C++ -*-===//
//
// The CPU kernels' row reductions over the branch-free fastExp (libm's expf
// is a scalar call). fastExp, fastTanh, fastSigmoid and the f16 and bf16
// conversions are per-element math shared with the CUDA kernels:
// runtime/math.h.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CPU_FASTMATH_H
#define SHARDC_RUNTIME_CPU_FASTMATH_H

#include "runtime/math.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace shardc::runtime {

/// Independent accumulators of the reductions below: they break the
/// dependency chain of one running max or sum (fixed association, so the
/// result does not depend on the thread count).
constexpr int64_t kChains = 8;

/// max of x[0, n).
inline float rowMax(const float *x, int64_t n) {
  float part[kChains];
  for (int64_t j = 0; j < kChains; ++j)
    part[j] = -INFINITY;
  int64_t k = 0;
  for (; k + kChains <= n; k += kChains)
    for (int64_t j = 0; j < kChains; ++j)
      part[j] = part[j] > x[k + j] ? part[j] : x[k + j];
  for (; k < n; ++k)
    part[0] = part[0] > x[k] ? part[0] : x[k];
  float mx = part[0];
  for (int64_t j = 1; j < kChains; ++j)
    mx = mx > part[j] ? mx : part[j];
  return mx;
}

/// out[k] = exp(x[k] - shift) over [0, n) (out may alias x); returns their
/// sum in double. The exp loop has no dependency between iterations, so it
/// vectorizes.
inline double expSum(const float *x, int64_t n, float shift, float *out) {
  for (int64_t k = 0; k < n; ++k)
    out[k] = fastExp(x[k] - shift);
  double part[kChains] = {};
  int64_t k = 0;
  for (; k + kChains <= n; k += kChains)
    for (int64_t j = 0; j < kChains; ++j)
      part[j] += out[k + j];
  for (; k < n; ++k)
    part[0] += out[k];
  double sum = 0;
  for (int64_t j = 0; j < kChains; ++j)
    sum += part[j];
  return sum;
}

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_CPU_FASTMATH_H
