//===- fastmath.h - vectorizable f32 exp, tanh, sigmoid ---------*- C++ -*-===//
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
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  float n = std::floor(x * 1.44269504088896341f + 0.5f);
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

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_CPU_FASTMATH_H
