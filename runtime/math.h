//===- math.h - per-element math shared by the CPU and CUDA kernels -*- C++ -*-===//
//
// The math of a kernel, element by element, written once as
// `__host__ __device__` functions: the CPU kernels (runtime/cpu) and the
// CUDA kernels (runtime/cuda) both call these, so the CPU kernels' tests
// cover them and the backends cannot drift. Plain C++ when not compiled by
// nvcc.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_MATH_H
#define SHARDC_RUNTIME_MATH_H

#include "runtime/abi/abi.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define SHARDC_HD __host__ __device__
#else
#define SHARDC_HD
#endif

namespace shardc::runtime {

/// The bits of a float and back (memcpy on the host, intrinsics on the
/// device).
SHARDC_HD inline uint32_t floatBits(float v) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(v);
#else
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
#endif
}

SHARDC_HD inline float bitsFloat(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
#endif
}

/// exp with the Cephes range reduction and polynomial: relative error
/// within 2 ulp on [-87, 88], inputs clamped to that range (exp(-87) ~
/// 1.6e-38 stands for underflow). Branch-free, so it vectorizes on the CPU.
SHARDC_HD inline float fastExp(float x) {
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
  // 2^n from its exponent bits. A NaN x leaves e NaN, whatever the scale;
  // its n is converted as 0 (converting a NaN to an integer is undefined).
  int32_t ni = n == n ? int32_t(n) : 0;
  return e * bitsFloat(uint32_t(ni + 127) << 23);
}

/// tanh(x) = 1 - 2 / (exp(2x) + 1): absolute error ~1e-7.
SHARDC_HD inline float fastTanh(float x) {
  return 1.0f - 2.0f / (fastExp(2.0f * x) + 1.0f);
}

SHARDC_HD inline float fastSigmoid(float x) {
  return 1.0f / (1.0f + fastExp(-x));
}

/// bf16 <-> f32: bf16 is the upper half of an f32; rounding to nearest even.
SHARDC_HD inline float bf16ToFloat(uint16_t h) {
  return bitsFloat(uint32_t(h) << 16);
}

SHARDC_HD inline uint16_t floatToBf16(float v) {
  uint32_t bits = floatBits(v);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN stays a quiet NaN
    return uint16_t((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

/// IEEE half (f16) -> f32, exact (subnormals, infinities and NaN included).
SHARDC_HD inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu,
           mant = h & 0x3ffu;
  if (exp == 31) // infinity or NaN (the payload kept)
    return bitsFloat(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) { // zero or subnormal: mant * 2^-24, exact in f32
    float v = float(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// f32 -> IEEE half, rounding to nearest even; beyond the largest half
/// (65504, rounding included) infinity, below the smallest subnormal zero,
/// NaN a quiet NaN. As the hardware's cvt.rn.f16.f32 and PyTorch's .half().
SHARDC_HD inline uint16_t floatToHalf(float v) {
  uint32_t bits = floatBits(v);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) // NaN
    return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) // >= 65520 rounds to infinity (or is infinity)
    return uint16_t(sign | 0x7c00u);
  if (abs < 0x38800000u) { // below 2^-14: a subnormal half, or zero
    if (abs < 0x33000000u) // below 2^-25: rounds to zero (2^-25 ties to 0)
      return sign;
    // The value in units of 2^-24, rounded to nearest even.
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - int(abs >> 23); // 14 .. 24
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u),
             half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
      ++q;
    return uint16_t(sign | q);
  }
  // Normal: rebias the exponent and round the 13 dropped bits to nearest
  // even; a carry out of the mantissa steps the exponent, as it should.
  uint32_t r = abs - 0x38000000u;
  r += 0x0fffu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
}

/// x rounded to the nearest f16 or bf16 value, as an f32: what a Cast to
/// FLOAT16 or BFLOAT16 keeps when a graph computes in f32.
SHARDC_HD inline float roundToHalf(float x) { return halfToFloat(floatToHalf(x)); }
SHARDC_HD inline float roundToBf16(float x) { return bf16ToFloat(floatToBf16(x)); }

/// sqrt(2 / pi) and 1 / sqrt(2 pi), in f32 as the kernels use them:
/// kGeluAlpha is std::sqrt(2.0f / float(M_PI)) evaluated in f32 (0x3f4c4229,
/// one ulp below the correctly rounded value), as the kernels always had.
constexpr float kGeluAlpha = 0.7978845238685608f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr float kSqrtHalf = 0.7071067811865476f;

/// tanh(x) within a few ulp, branch-free so that it vectorizes (libm's
/// tanhf is a scalar call): Cephes' tanhf, the odd polynomial below 0.625
/// in magnitude, 1 - 2 / (exp(2|x|) + 1) with the sign of x above (where
/// tanh is at least 0.55, so fastExp's 2-ulp error stays a few ulp of the
/// result; exp saturates to give +-1 beyond 44). fastTanh, one formula
/// everywhere, loses all relative accuracy near 0.
SHARDC_HD inline float vecTanh(float x) {
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = x + x * z * p;
  float ax = fabsf(x);
  float large = 1.0f - 2.0f / (fastExp(2.0f * ax) + 1.0f);
  large = copysignf(large, x);
  return ax < 0.625f ? small : large;
}

/// The tanh form's tanh(z) for z = sqrt(2/pi) (v + 0.044715 v^3), as the
/// exported chain (and PyTorch) computes it: 0.5 v (1 + tanh(z)) then has
/// the chain's own cancellation where tanh(z) nears -1 (zeros where 1 +
/// tanh(z) rounds to 0 included), and vecTanh's few ulp on top.
/// Against a double reference over [-10, 10] (test/unit/KernelsTest.cpp,
/// GeluTanhWorstError, which bounds them): 3.9 ulp where x >= -1, 1.9 |x|
/// 2^-24 everywhere, the gradient 1.6 (1 + |x|) 2^-24.
/// tools/bench/gelu_tanh compares the formulas and their cost.
SHARDC_HD inline float geluTanhInner(float v) {
  return vecTanh(kGeluAlpha * (v + 0.044715f * v * v * v));
}

/// GELU: the tanh approximation or the exact (erf) form.
SHARDC_HD inline float gelu(float v, bool tanhForm) {
  return tanhForm ? 0.5f * v * (1.0f + geluTanhInner(v))
                  : 0.5f * v * (1.0f + erff(v * kSqrtHalf));
}

/// d gelu(v) / dv.
SHARDC_HD inline float geluGrad(float v, bool tanhForm) {
  if (tanhForm) {
    float t = geluTanhInner(v);
    return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluAlpha *
                                   (1.0f + 3.0f * 0.044715f * v * v);
  }
  return 0.5f * (1.0f + erff(v * kSqrtHalf)) +
         v * fastExp(-0.5f * v * v) * kInvSqrt2Pi;
}

SHARDC_HD inline float silu(float v) { return v * fastSigmoid(v); }

/// dy * d silu(v) / dv, associated as (dy s) (1 + v (1 - s)).
SHARDC_HD inline float siluBackward(float dy, float v) {
  float s = fastSigmoid(v);
  return dy * s * (1.0f + v * (1.0f - s));
}

/// SwiGLU's product y = silu(g) u (the swiglu kernel), with silu(g)
/// rounded to bf16 on bf16 first, as the unfused silu kernel's output is.
SHARDC_HD inline float swiglu(float g, float u, bool bf16) {
  float s = silu(g);
  return (bf16 ? roundToBf16(s) : s) * u;
}

/// SwiGLU's gradient (swiglu_grad): dg = silu'(g) (dy u) and du = dy
/// silu(g), dy u and silu(g) rounded to bf16 on bf16 first, as the unfused
/// mul and silu kernels' outputs are.
SHARDC_HD inline void swigluGrad(float g, float u, float dy, bool bf16,
                                 float &dg, float &du) {
  float t = dy * u, s = silu(g);
  dg = siluBackward(bf16 ? roundToBf16(t) : t, g);
  du = dy * (bf16 ? roundToBf16(s) : s);
}

/// The per-step scalars of torch.optim.AdamW, computed in double from the
/// hyper-parameter input (abi::Hyper) and applied in f32.
struct AdamWScalars {
  float decay;    ///< 1 - lr * weight_decay
  float stepSize; ///< lr / (1 - beta1^step)
  float bc2Sqrt;  ///< sqrt(1 - beta2^step)
  float b1, b2, oneMinusB1, oneMinusB2, eps;
};

SHARDC_HD inline AdamWScalars adamwScalars(const float *hyper, bool is1D) {
  double lr = hyper[abi::kLr], beta1 = hyper[abi::kBeta1],
         beta2 = hyper[abi::kBeta2], eps = hyper[abi::kEps],
         step = hyper[abi::kStep];
  double weightDecay =
      is1D ? hyper[abi::kWeightDecay1D] : hyper[abi::kWeightDecay];
  AdamWScalars s;
  s.decay = float(1.0 - lr * weightDecay);
  s.bc2Sqrt = float(sqrt(1.0 - pow(beta2, step)));
  s.stepSize = float(lr / (1.0 - pow(beta1, step)));
  s.b1 = float(beta1);
  s.b2 = float(beta2);
  s.oneMinusB1 = float(1 - beta1);
  s.oneMinusB2 = float(1 - beta2);
  s.eps = float(eps);
  return s;
}

/// One element of AdamW: gradient g (already scaled by the clipping
/// coefficient); updates p, m, v in place.
SHARDC_HD inline void adamwUpdate(const AdamWScalars &s, float g, float &p,
                                  float &m, float &v) {
  float pk = p * s.decay;
  float mk = m * s.b1 + g * s.oneMinusB1;
  float vk = v * s.b2 + s.oneMinusB2 * g * g;
  float denom = sqrtf(vk) / s.bc2Sqrt + s.eps;
  p = pk + (-s.stepSize) * mk / denom; // addcdiv: p + value * m / denom
  m = mk;
  v = vk;
}

/// The scalars of torch.optim.SGD for one step, from the hyper-parameter
/// input (abi::Hyper), in f32.
struct SGDScalars {
  float lr, momentum, weightDecay;
  bool first; ///< step 1: the momentum buffer starts as the gradient
};

SHARDC_HD inline SGDScalars sgdScalars(const float *hyper, bool is1D) {
  return {hyper[abi::kLr], hyper[abi::kBeta1],
          is1D ? hyper[abi::kWeightDecay1D] : hyper[abi::kWeightDecay],
          hyper[abi::kStep] <= 1.0f};
}

/// One element of SGD: gradient g (already scaled by the clipping
/// coefficient), parameter p and momentum buffer buf; writes p2 and buf2.
SHARDC_HD inline void sgdUpdate(const SGDScalars &s, float g, float p,
                                float buf, float &p2, float &buf2) {
  float d = g;
  if (s.weightDecay != 0.0f)
    d = d + s.weightDecay * p;
  if (s.momentum != 0.0f) {
    float bk = s.first ? d : buf * s.momentum + d;
    buf2 = bk;
    d = bk;
  } else {
    buf2 = buf;
  }
  p2 = p + (-s.lr) * d;
}

/// Softmax over n elements `inner` apart (one column of [outer, n, inner]):
/// the max, exp and a double sum, then one scale.
SHARDC_HD inline void softmaxColumn(const float *xs, float *ys, int64_t n,
                                    int64_t inner) {
  float mx = xs[0];
  for (int64_t k = 1; k < n; ++k)
    mx = mx < xs[k * inner] ? xs[k * inner] : mx; // std::max
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) {
    ys[k * inner] = fastExp(xs[k * inner] - mx);
    sum += ys[k * inner];
  }
  float inv = float(1.0 / sum);
  for (int64_t k = 0; k < n; ++k)
    ys[k * inner] *= inv;
}

/// The softmax gradient of one column: dx = y (dy - sum y dy).
SHARDC_HD inline void softmaxGradColumn(const float *y, const float *dy,
                                        float *dx, int64_t n, int64_t inner) {
  double dot = 0;
  for (int64_t k = 0; k < n; ++k)
    dot += double(y[k * inner]) * dy[k * inner];
  for (int64_t k = 0; k < n; ++k)
    dx[k * inner] = float(y[k * inner] * (dy[k * inner] - dot));
}

/// Whether `fn` is a function code of the unary kernels (abi::UnaryFn).
SHARDC_HD inline bool isUnaryFn(int64_t fn) {
  return fn >= 0 && fn < int64_t(abi::UnaryFn::kNumFns);
}

/// The unary kernels' function `fn` (abi::UnaryFn) at x, in double: the
/// kernels compute in double and round once, as ONNX Runtime's f32 results
/// are expected to be correctly rounded to within an ulp. NaN for a code
/// that is not a function (the kernels refuse such a code before calling).
SHARDC_HD inline double unaryFn(int64_t fn, double x) {
  switch (abi::UnaryFn(fn)) {
  case abi::UnaryFn::sqrt:
    return sqrt(x);
  case abi::UnaryFn::erf:
    return erf(x);
  case abi::UnaryFn::tanh:
    return tanh(x);
  case abi::UnaryFn::sigmoid:
    return 1.0 / (1.0 + exp(-x));
  case abi::UnaryFn::neg:
    return -x;
  case abi::UnaryFn::reciprocal:
    return 1.0 / x;
  case abi::UnaryFn::exp:
    return exp(x);
  case abi::UnaryFn::log:
    return log(x);
  case abi::UnaryFn::relu:
    return x > 0 ? x : 0.0;
  case abi::UnaryFn::softplus:
    // torch.nn.functional.softplus (beta 1, threshold 20).
    return x > 20 ? x : log1p(exp(x));
  case abi::UnaryFn::nan_to_zero:
    return x != x ? 0.0 : x;
  case abi::UnaryFn::round_f16: // x is an f32 value: rounded once, to the half
    return roundToHalf(float(x));
  case abi::UnaryFn::round_bf16:
    return roundToBf16(float(x));
  case abi::UnaryFn::kNumFns:
    break;
  }
  return NAN;
}

/// f'(x) of the unary function `fn`, given y = f(x), in double; NaN for a
/// code that is not a function.
SHARDC_HD inline double unaryFnDerivative(int64_t fn, double x, double y) {
  switch (abi::UnaryFn(fn)) {
  case abi::UnaryFn::sqrt:
    return 0.5 / y;
  case abi::UnaryFn::erf: // 2 / sqrt(pi) exp(-x^2)
    return 2.0 / sqrt(3.14159265358979323846) * exp(-x * x);
  case abi::UnaryFn::tanh:
    return 1.0 - y * y;
  case abi::UnaryFn::sigmoid:
    return y * (1.0 - y);
  case abi::UnaryFn::neg:
    return -1.0;
  case abi::UnaryFn::reciprocal:
    return -y * y;
  case abi::UnaryFn::exp:
    return y;
  case abi::UnaryFn::log:
    return 1.0 / x;
  case abi::UnaryFn::relu:
    return x > 0 ? 1.0 : 0.0; // 0 at 0, as PyTorch
  case abi::UnaryFn::softplus:
    return x > 20 ? 1.0 : 1.0 / (1.0 + exp(-x));
  case abi::UnaryFn::nan_to_zero:
    return x != x ? 0.0 : 1.0;
  case abi::UnaryFn::round_f16:
  case abi::UnaryFn::round_bf16:
    return 1.0; // the cast's gradient passes through, as in PyTorch
  case abi::UnaryFn::kNumFns:
    break;
  }
  return NAN;
}

/// The vocabulary-parallel loss (vocab_ce, vocab_ce_grad): the tp rank
/// whose tokens hold row n of sequences of seq tokens (rank r the r-th
/// seq/tp of each; the trainer reads a rank's tokens so).
SHARDC_HD inline int64_t vocabOwner(int64_t n, int64_t seq, int64_t tp) {
  return (n % seq) / (seq / tp);
}

/// The whole row n's logsumexp and target logit from every tp rank's
/// stats[tp,N,2] (vocab_ce_stats), the ranks combined in order.
SHARDC_HD inline void vocabWholeRow(const float *stats, int64_t N, int64_t tp,
                                    int64_t n, double &lse, double &target) {
  float top = stats[2 * n];
  for (int64_t r = 1; r < tp; ++r)
    top = fmaxf(top, stats[2 * (r * N + n)]);
  double sum = 0;
  target = 0;
  for (int64_t r = 0; r < tp; ++r) {
    sum += exp(double(stats[2 * (r * N + n)]) - double(top));
    target += stats[2 * (r * N + n) + 1];
  }
  lse = double(top) + log(sum);
}

/// The inverse frequency of rotary pair k of a head of D: 1 / theta^(2k/D),
/// formed in f32 as in Hugging Face's LlamaRotaryEmbedding.
SHARDC_HD inline float rotaryInvFreq(double theta, int64_t k, int64_t D) {
  return 1.0f / float(pow(theta, double(2 * k) / double(D)));
}

/// The rotary angle of position t, in f32: t * invFreq.
SHARDC_HD inline float rotaryAngle(int64_t t, float invFreq) {
  return float(t) * invFreq;
}

/// Float8 (OCP FP8, as torch.float8_e4m3fn and float8_e5m2; `format` is
/// abi::kF8E4M3 or kF8E5M2): 3 or 2 mantissa bits, exponent bias 7 or 15,
/// largest finite 448 or 57344. e4m3fn has no infinities and one NaN code.
SHARDC_HD inline int fp8MantissaBits(int64_t format) {
  return format == abi::kF8E5M2 ? 2 : 3;
}
SHARDC_HD inline int fp8Bias(int64_t format) {
  return format == abi::kF8E5M2 ? 15 : 7;
}
SHARDC_HD inline float fp8Max(int64_t format) {
  return format == abi::kF8E5M2 ? 57344.0f : 448.0f;
}

/// f32 -> fp8, saturating to +-fp8Max (torchao's to_fp8_saturated clamps
/// before its cast) and rounding to nearest even; NaN -> the NaN code 0x7f
/// (sign kept).
SHARDC_HD inline uint8_t floatToFp8(float v, int64_t format) {
  const int m = fp8MantissaBits(format), emin = 1 - fp8Bias(format);
  const float maxv = fp8Max(format);
  uint8_t sign = uint8_t((floatBits(v) >> 24) & 0x80u);
  float a = fabsf(v);
  if (!(a == a))
    return uint8_t(sign | 0x7f);
  a = a < maxv ? a : maxv;
  int e = int((floatBits(a) >> 23) & 0xffu) - 127; // floor(log2 a); 0: -127
  int quantum = (e < emin ? emin : e) - m;         // log2 of one step
  int r = int(rintf(ldexpf(a, -quantum)));         // to nearest even
  if (e < emin) // subnormal (r = 2^m is the smallest normal: the same code)
    return uint8_t(sign | r);
  int biased = e + fp8Bias(format);
  if (r == 2 << m) { // rounded up to the next power of two
    r >>= 1;
    ++biased;
  }
  return uint8_t(sign | (biased << m) | (r - (1 << m)));
}

/// fp8 -> f32, exact (for the finite codes floatToFp8 writes).
SHARDC_HD inline float fp8ToFloat(uint8_t q, int64_t format) {
  const int m = fp8MantissaBits(format), bias = fp8Bias(format);
  int biased = (q & 0x7f) >> m, mant = q & ((1 << m) - 1);
  float v = biased == 0 ? ldexpf(float(mant), 1 - bias - m)
                        : ldexpf(float((1 << m) + mant), biased - bias - m);
  return (q & 0x80) ? -v : v;
}

/// The scale that maps an amax onto fp8's range, as torchao's
/// amax_to_scale: max / max(amax, 1e-12) in f64, rounded to f32; with
/// pow2 (the rowwise recipe's round_scales_to_power_of_2) then rounded
/// down to a power of two as exp2(floor(log2(scale))).
SHARDC_HD inline float fp8Scale(float amax, int64_t format, bool pow2) {
  double a = amax > 1e-12 ? double(amax) : 1e-12;
  float s = float(double(fp8Max(format)) / a);
  return pow2 ? exp2f(floorf(log2f(s))) : s;
}

/// The position of row r of a rotary kernel's x (rows of D): x[B,H,T,D]
/// (abi::kAttentionBHTD) or x[B,T,H,D] (abi::kAttentionRows).
SHARDC_HD inline int64_t rotaryPosition(int64_t r, int64_t T, int64_t H,
                                        int64_t layout) {
  return (layout == abi::kAttentionRows ? r / H : r) % T;
}

/// One rotary pair (a, b) = (x[k], x[k + D/2]) rotated by the angle whose
/// cosine and sine are c and s: x cat(cos, cos) + rotate_half(x) cat(sin,
/// sin), i.e. (a c - b s, b c + a s).
SHARDC_HD inline void rotatePair(float a, float b, float c, float s, float &ya,
                                 float &yb) {
  ya = a * c - b * s;
  yb = b * c + a * s;
}

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_MATH_H
