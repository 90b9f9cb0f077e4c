//===- fastmath.h - vectorizable f32 exp, tanh; f16/bf16 ---------*- C++ -*-===//
//
// Branch-free f32 elementary functions that the compiler vectorizes inside
// kernel loops (libm's expf is a scalar call). exp uses the Cephes range
// reduction and polynomial: relative error within 2 ulp on [-87, 88],
// inputs clamped to that range (exp(-87) ~ 1.6e-38 stands for underflow).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CPU_FASTMATH_H
#define SHARDC_RUNTIME_CPU_FASTMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace shardc::runtime {

inline float fastExp(float x) {
  x = -87.0f > x ? -87.0f : x; // maxps
  x = 88.0f < x ? 88.0f : x;   // minps
  // Round x / ln2 to the nearest integer by adding and removing 1.5 * 2^23
  // (floor() is not inlined without -ffast-math, which would block
  // vectorization).
  const float kRound = 12582912.0f;
  float n = (x * 1.44269504088896341f + kRound) - kRound;
  // x - n ln2, with ln2 split in two for accuracy.
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float e = p * r * r + r + 1.0f;
  int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return e * scale;
}

/// tanh(x) = 1 - 2 / (exp(2x) + 1): absolute error ~1e-7.
inline float fastTanh(float x) { return 1.0f - 2.0f / (fastExp(2.0f * x) + 1.0f); }

inline float fastSigmoid(float x) { return 1.0f / (1.0f + fastExp(-x)); }

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

/// IEEE half (f16) -> f32, exact (subnormals, infinities and NaN included).
inline float halfToFloat(uint16_t h) {
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(float(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(float(mant | 0x400), int(exp) - 25);
  return (h & 0x8000) ? -v : v;
}

/// bf16 <-> f32: bf16 is the upper half of an f32; rounding to nearest even.
inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

inline uint16_t floatToBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN stays a quiet NaN
    return uint16_t((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_CPU_FASTMATH_H
