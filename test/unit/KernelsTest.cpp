//===- KernelsTest.cpp - CPU kernels against naive references -------------===//
//
// Each kernel runs on random inputs and is compared with a direct, double
// precision transcription of the op's definition in the nn dialect.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/fastmath.h"
#include "runtime/kernels.h"
#include "runtime/math.h"
#include "runtime/runtime.h"

#include "test/unit/TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace shardc::test;
namespace A = shardc::abi;
using Id = A::KernelId;

shardc::runtime::Context ctx;

TEST(Kernels, Embedding) {
  const int64_t N = 7, V = 11, C = 5;
  std::vector<int32_t> ids = {0, 3, 10, 3, 7, 1, 9};
  Vec table = randomVec(V * C, 1), y(N * C);
  std::vector<void *> b = bufs(ids, table, y);
  namespace E = A::embedding;
  std::vector<int64_t> ints =
      packInts(Id::embedding, {{E::N, N}, {E::V, V}, {E::C, C}});
  SHARDC_LAUNCH(embedding, &ctx, b, ints, nullptr, A::kComputeStream);
  std::vector<double> want;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      want.push_back(table[ids[n] * C + c]);
  expectNear(y, want, 0);
}

void checkLinear(bool inOut, bool bias) {
  const int64_t M = 6, K = 9, N = 4;
  Vec x = randomVec(M * K, 2), w = randomVec(K * N, 3), bv = randomVec(N, 4),
      y(M * N);
  std::vector<void *> b = bias ? bufs(x, w, bv, y) : bufs(x, w, y);
  namespace L = A::linear;
  std::vector<int64_t> ints = packInts(Id::linear, {{L::M, M},
                                                    {L::K, K},
                                                    {L::N, N},
                                                    {L::in_out, inOut},
                                                    {L::has_bias, bias}});
  SHARDC_LAUNCH(linear, &ctx, b, ints, nullptr, A::kComputeStream);
  std::vector<double> want;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias ? bv[n] : 0.0;
      for (int64_t k = 0; k < K; ++k)
        s += double(x[m * K + k]) * (inOut ? w[k * N + n] : w[n * K + k]);
      want.push_back(s);
    }
  expectNear(y, want);
}

TEST(Kernels, LinearOutIn) { checkLinear(false, false); }
TEST(Kernels, LinearOutInBias) { checkLinear(false, true); }
TEST(Kernels, LinearInOutBias) { checkLinear(true, true); }

TEST(Kernels, AddMulBroadcast) {
  // [2,3,4] op [3,1] -> [2,3,4]: rhs strides (0, 1, 0).
  Vec a = randomVec(24, 5), c = randomVec(3, 6), y(24);
  // dims[3], then the element strides of a and of c.
  std::vector<int64_t> tail = {2, 3, 4, 12, 4, 1, 0, 1, 0};
  std::vector<void *> b = bufs(a, c, y);
  for (bool isMul : {false, true}) {
    if (isMul)
      SHARDC_LAUNCH(mul, &ctx, b, packInts(Id::mul, {{A::mul::R, 3}}, tail),
                    nullptr, A::kComputeStream);
    else
      SHARDC_LAUNCH(add, &ctx, b, packInts(Id::add, {{A::add::R, 3}}, tail),
                    nullptr, A::kComputeStream);
    std::vector<double> want;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) {
          double l = a[i * 12 + j * 4 + k], r = c[j];
          want.push_back(isMul ? l * r : l + r);
        }
    expectNear(y, want);
  }
}

TEST(Kernels, LayerNorm) {
  const int64_t M = 5, C = 16;
  Vec x = randomVec(M * C, 7, 3.0f), w = randomVec(C, 8), bv = randomVec(C, 9),
      y(M * C);
  std::vector<void *> b = bufs(x, w, bv, y);
  namespace LN = A::layer_norm;
  std::vector<int64_t> ints =
      packInts(Id::layer_norm, {{LN::M, M}, {LN::C, C}, {LN::has_bias, 1}});
  std::vector<double> eps = packFloats(Id::layer_norm, {{LN::f::eps, 1e-5}});
  SHARDC_LAUNCH(layer_norm, &ctx, b, ints, eps, A::kComputeStream);
  std::vector<double> want;
  for (int64_t m = 0; m < M; ++m) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c)
      mean += x[m * C + c] / double(C);
    for (int64_t c = 0; c < C; ++c)
      var += std::pow(x[m * C + c] - mean, 2) / double(C);
    for (int64_t c = 0; c < C; ++c)
      want.push_back((x[m * C + c] - mean) / std::sqrt(var + 1e-5) * w[c] +
                     bv[c]);
  }
  expectNear(y, want);
}

TEST(Kernels, RMSNorm) {
  const int64_t M = 4, C = 12;
  Vec x = randomVec(M * C, 10, 2.0f), w = randomVec(C, 11), y(M * C);
  std::vector<void *> b = bufs(x, w, y);
  namespace RN = A::rms_norm;
  std::vector<int64_t> ints = packInts(Id::rms_norm, {{RN::M, M}, {RN::C, C}});
  std::vector<double> eps = packFloats(Id::rms_norm, {{RN::f::eps, 1e-6}});
  SHARDC_LAUNCH(rms_norm, &ctx, b, ints, eps, A::kComputeStream);
  std::vector<double> want;
  for (int64_t m = 0; m < M; ++m) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c)
      ms += std::pow(x[m * C + c], 2) / double(C);
    for (int64_t c = 0; c < C; ++c)
      want.push_back(x[m * C + c] / std::sqrt(ms + 1e-6) * w[c]);
  }
  expectNear(y, want);
}

TEST(Kernels, GeluBothForms) {
  Vec x = randomVec(100, 12, 3.0f), y(100);
  std::vector<void *> b = bufs(x, y);
  for (int64_t tanhForm : {0, 1}) {
    std::vector<int64_t> ints =
        packInts(Id::gelu, {{A::gelu::n, 100}, {A::gelu::tanh, tanhForm}});
    SHARDC_LAUNCH(gelu, &ctx, b, ints, nullptr, A::kComputeStream);
    std::vector<double> want;
    for (float v : x) {
      double d = v;
      want.push_back(tanhForm ? 0.5 * d *
                                    (1 + std::tanh(std::sqrt(2 / M_PI) *
                                                   (d + 0.044715 * d * d * d)))
                              : 0.5 * d * (1 + std::erf(d / std::sqrt(2.0))));
    }
    expectNear(y, want);
  }
}

/// The tanh-form GELU kernel and its gradient over the whole input range
/// against a double-precision reference, through the kernels themselves (a
/// launch large enough to take the threaded, vectorized loops). The stated
/// worst errors (runtime/math.h, vecTanh and geluTanhInner):
///  - for x >= -1, where 1 + tanh(z) >= 0.3 has no cancellation, the GELU
///    is within kGeluUlps ulp of the reference;
///  - everywhere in [-10, 10] (normal x), |gelu - ref| <= kGeluScaled |x|
///    2^-24: where tanh(z) nears -1, 0.5 x (1 + tanh(z)) in f32 (the
///    exported chain's formula, and PyTorch's) keeps that much, whatever
///    its tanh;
///  - the gradient within kGradScaled (1 + |x|) 2^-24 everywhere.
TEST(Kernels, GeluTanhWorstError) {
  constexpr double kGeluUlps = 6, kGeluScaled = 4, kGradScaled = 4;
  // Every 97th float in [-10, 10] by bit pattern, both signs (~22M).
  Vec x;
  for (uint32_t bits = 0; ; bits += 97) {
    float v;
    std::memcpy(&v, &bits, sizeof(v));
    if (!(v <= 10.0f))
      break;
    x.push_back(v);
    x.push_back(-v);
  }
  const int64_t n = int64_t(x.size());
  Vec y(n), dy(n, 1.0f), dx(n);
  std::vector<void *> b = bufs(x, y);
  std::vector<int64_t> ints =
      packInts(Id::gelu, {{A::gelu::n, n}, {A::gelu::tanh, 1}});
  SHARDC_LAUNCH(gelu, &ctx, b, ints, nullptr, A::kComputeStream);
  std::vector<void *> g = bufs(x, dy, dx);
  ints = packInts(Id::gelu_grad, {{A::gelu_grad::n, n}, {A::gelu_grad::tanh, 1}});
  SHARDC_LAUNCH(gelu_grad, &ctx, g, ints, nullptr, A::kComputeStream);
  const double alpha = std::sqrt(2.0 / M_PI), two24 = std::ldexp(1.0, -24);
  double worstUlps = 0, worstScaled = 0, worstGrad = 0;
  float atUlps = 0, atScaled = 0, atGrad = 0;
  for (int64_t k = 0; k < n; ++k) {
    double v = x[k];
    double z = alpha * (v + 0.044715 * v * v * v);
    double s = 1.0 / (1.0 + std::exp(-2.0 * z)); // 0.5 (1 + tanh z)
    double ref = v * s;
    double t = std::tanh(z);
    double dref = s + 0.5 * v * (1 - t * t) * alpha * (1 + 3 * 0.044715 * v * v);
    double err = std::fabs(double(y[k]) - ref);
    if (v >= -1.0 && ref != 0.0) {
      float r = float(std::fabs(ref));
      double ulp = double(std::nextafter(r, INFINITY)) - double(r);
      if (err / ulp > worstUlps) {
        worstUlps = err / ulp;
        atUlps = x[k];
      }
    }
    // Normal inputs: a subnormal GELU has fewer bits than any bound here.
    if (std::fabs(v) >= 1.1754944e-38 &&
        err / (std::fabs(v) * two24) > worstScaled) {
      worstScaled = err / (std::fabs(v) * two24);
      atScaled = x[k];
    }
    double gerr = std::fabs(double(dx[k]) - dref) / ((1 + std::fabs(v)) * two24);
    if (gerr > worstGrad) {
      worstGrad = gerr;
      atGrad = x[k];
    }
  }
  std::printf("tanh-GELU over %lld inputs in [-10, 10]: %.2f ulp (x >= -1; at "
              "%g), %.2f |x| 2^-24 (at %g); gradient %.2f (1 + |x|) 2^-24 (at "
              "%g)\n",
              (long long)n, worstUlps, atUlps, worstScaled, atScaled, worstGrad,
              atGrad);
  EXPECT_LE(worstUlps, kGeluUlps) << "at x = " << atUlps;
  EXPECT_LE(worstScaled, kGeluScaled) << "at x = " << atScaled;
  EXPECT_LE(worstGrad, kGradScaled) << "at x = " << atGrad;
}

/// fastExp (runtime/math.h) against std::exp: within 2 ulp on [-87, 88]
/// (every 101st float there by bit pattern), clamped past it, and NaN for
/// NaN (the loss's NaN check depends on it; its exponent's conversion was
/// once undefined for NaN, which UBSan reported).
TEST(Kernels, FastExp) {
  double worst = 0;
  float at = 0;
  for (uint32_t bits = 0;; bits += 101) {
    float v;
    std::memcpy(&v, &bits, sizeof(v));
    if (!(v <= 88.0f))
      break;
    for (float x : {v, -v}) {
      if (x < -87.0f)
        continue;
      float ref = float(std::exp(double(x)));
      double ulp = double(std::nextafter(ref, INFINITY)) - double(ref);
      double err = std::fabs(double(shardc::runtime::fastExp(x)) - std::exp(double(x))) / ulp;
      if (err > worst) {
        worst = err;
        at = x;
      }
    }
  }
  EXPECT_LE(worst, 2.0) << "at x = " << at;
  EXPECT_EQ(shardc::runtime::fastExp(-1000.0f), shardc::runtime::fastExp(-87.0f));
  EXPECT_EQ(shardc::runtime::fastExp(1000.0f), shardc::runtime::fastExp(88.0f));
  EXPECT_TRUE(std::isnan(shardc::runtime::fastExp(NAN)));
  EXPECT_TRUE(std::isnan(shardc::runtime::fastExp(-NAN)));
}

TEST(Kernels, Silu) {
  Vec x = randomVec(50, 13, 3.0f), y(50);
  std::vector<void *> b = bufs(x, y);
  std::vector<int64_t> ints = packInts(Id::silu, {{A::silu::n, 50}});
  SHARDC_LAUNCH(silu, &ctx, b, ints, nullptr, A::kComputeStream);
  std::vector<double> want;
  for (float v : x)
    want.push_back(v / (1.0 + std::exp(-double(v))));
  expectNear(y, want);
}

/// Element (b, h, t, 0) of a rotary operand [B,H,T,D] (layout 0) or
/// [B,T,H,D] (layout 1).
int64_t rotaryRow(int64_t layout, int64_t b, int64_t h, int64_t t, int64_t H,
                  int64_t T, int64_t D) {
  return (layout ? (b * T + t) * H + h : (b * H + h) * T + t) * D;
}

TEST(Kernels, Rotary) {
  const int64_t B = 2, H = 3, T = 5, D = 8;
  Vec x = randomVec(B * H * T * D, 14);
  namespace R = A::rotary;
  for (int64_t layout : {A::kAttentionBHTD, A::kAttentionRows}) {
    Vec y(x.size());
    std::vector<void *> b = bufs(x, y);
    std::vector<int64_t> ints = packInts(Id::rotary, {{R::B, B},
                                                      {R::H, H},
                                                      {R::T, T},
                                                      {R::D, D},
                                                      {R::inverse, 0},
                                                      {R::layout, layout}});
    std::vector<double> theta =
        packFloats(Id::rotary, {{R::f::theta, 10000.0}});
    SHARDC_LAUNCH(rotary, &ctx, b, ints, theta, A::kComputeStream);
    std::vector<double> want(x.size());
    for (int64_t bi = 0; bi < B; ++bi)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < D; ++d) {
            // y = x cos + rotate_half(x) sin, frequencies repeated over
            // halves.
            int64_t k = d % (D / 2), at = rotaryRow(layout, bi, h, t, H, T, D);
            double angle = t * std::pow(10000.0, -2.0 * k / D);
            const float *row = &x[at];
            double rot = d < D / 2 ? -row[d + D / 2] : row[d - D / 2];
            want[at + d] = row[d] * std::cos(angle) + rot * std::sin(angle);
          }
    SCOPED_TRACE(layout ? "[B,T,H,D]" : "[B,H,T,D]");
    expectNear(y, want, 1e-5);
  }
}

TEST(Kernels, RotaryTable) {
  // Any tables (not only a theta's): y = x cat(c, c) + rotate_half(x)
  // cat(s, s) in double; with inverse, sin negated.
  const int64_t B = 2, H = 3, T = 5, D = 8, half = D / 2;
  Vec x = randomVec(B * H * T * D, 18), c = randomVec(T * half, 19),
      s = randomVec(T * half, 20), y(x.size());
  namespace R = A::rotary_table;
  for (int64_t layout : {A::kAttentionBHTD, A::kAttentionRows})
    for (int inverse = 0; inverse < 2; ++inverse) {
      std::vector<void *> b = bufs(x, c, s, y);
      std::vector<int64_t> ints = packInts(Id::rotary_table,
                                           {{R::B, B},
                                            {R::H, H},
                                            {R::T, T},
                                            {R::D, D},
                                            {R::inverse, inverse},
                                            {R::layout, layout}});
      SHARDC_LAUNCH(rotary_table, &ctx, b, ints, nullptr, A::kComputeStream);
      std::vector<double> want(x.size());
      for (int64_t bi = 0; bi < B; ++bi)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t t = 0; t < T; ++t)
            for (int64_t d = 0; d < D; ++d) {
              int64_t at = rotaryRow(layout, bi, h, t, H, T, D);
              const float *row = &x[at];
              double rot = d < half ? -row[d + half] : row[d - half];
              double sn = (inverse ? -1.0 : 1.0) * s[t * half + d % half];
              want[at + d] = row[d] * double(c[t * half + d % half]) + rot * sn;
            }
      SCOPED_TRACE(std::string(inverse ? "inverse" : "forward") +
                   (layout ? " [B,T,H,D]" : " [B,H,T,D]"));
      expectNear(y, want, 1e-5);
    }
}

void checkAttention(int64_t H, int64_t G, bool causal) {
  const int64_t B = 2, T = 6, D = 4;
  Vec q = randomVec(B * H * T * D, 15), k = randomVec(B * G * T * D, 16),
      v = randomVec(B * G * T * D, 17), o(q.size());
  std::vector<void *> b = bufs(q, k, v, o);
  namespace At = A::attention;
  std::vector<int64_t> ints = packInts(Id::attention, {{At::B, B},
                                                       {At::H, H},
                                                       {At::G, G},
                                                       {At::T, T},
                                                       {At::S, T},
                                                       {At::D, D},
                                                       {At::causal, causal}});
  double scaleValue = 1.0 / std::sqrt(double(D));
  std::vector<double> scale =
      packFloats(Id::attention, {{At::f::scale, scaleValue}});
  SHARDC_LAUNCH(attention, &ctx, b, ints, scale, A::kComputeStream);
  std::vector<double> want(o.size());
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t h = 0; h < H; ++h) {
      int64_t g = h / (H / G);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> p(T, 0.0);
        double mx = -1e300, sum = 0;
        int64_t valid = causal ? t + 1 : T;
        for (int64_t s = 0; s < valid; ++s) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += double(q[((bi * H + h) * T + t) * D + d]) *
                   k[((bi * G + g) * T + s) * D + d];
          p[s] = dot * scaleValue;
          mx = std::max(mx, p[s]);
        }
        for (int64_t s = 0; s < valid; ++s)
          sum += (p[s] = std::exp(p[s] - mx));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t s = 0; s < valid; ++s)
            acc += p[s] / sum * v[((bi * G + g) * T + s) * D + d];
          want[((bi * H + h) * T + t) * D + d] = acc;
        }
      }
    }
  expectNear(o, want);
}

TEST(Kernels, AttentionCausalMultiHead) { checkAttention(4, 4, true); }
TEST(Kernels, AttentionCausalGroupedQuery) { checkAttention(6, 2, true); }
TEST(Kernels, AttentionFull) { checkAttention(2, 1, false); }

// The attention kernels under layout Rows (rt-attention-layout): q, k and
// v read in place from a fused QKV buffer [B*T, (H+2G)*D], o and dO as
// rows [B*T, H*D], dq, dk and dv written into the columns of one
// [B*T, (H+2G)*D] gradient. The same values as the dense layout, to f32
// rounding (the same body reads the rows in place: BLAS may order a sum
// differently for another leading dimension).
TEST(Kernels, AttentionRowsLayout) {
  const int64_t B = 2, H = 4, G = 2, T = 6, D = 4, W = (H + 2 * G) * D;
  Vec q = randomVec(B * H * T * D, 31), k = randomVec(B * G * T * D, 32),
      v = randomVec(B * G * T * D, 33), dO = randomVec(B * H * T * D, 34);
  namespace At = A::attention;
  namespace Ag = A::attention_grad;
  auto shape = [&](A::KernelId id, bool rows) {
    Named<int64_t> named = {{At::B, B}, {At::H, H}, {At::G, G}, {At::T, T},
                            {At::S, T}, {At::D, D}, {At::causal, 1}};
    if (rows)
      named.insert(named.end(), {{At::layout, A::kAttentionRows},
                                 {At::ld_q, W},
                                 {At::ld_k, W},
                                 {At::ld_v, W},
                                 {At::ld_o, H * D}});
    static_assert(int64_t(At::ld_o) == int64_t(Ag::ld_o), "shared ints");
    return packInts(id, named);
  };
  std::vector<double> scale =
      packFloats(Id::attention, {{At::f::scale, 0.5}});
  // Dense.
  Vec o(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<void *> fwd = bufs(q, k, v, o), bwd = bufs(q, k, v, dO, dq, dk, dv);
  std::vector<int64_t> fi = shape(Id::attention, false),
                       gi = shape(Id::attention_grad, false);
  SHARDC_LAUNCH(attention, &ctx, fwd, fi, scale, A::kComputeStream);
  SHARDC_LAUNCH(attention_grad, &ctx, bwd, gi, scale, A::kComputeStream);
  // Rows: element (b, h, t, d) of an operand of `heads` heads at column
  // `col` of rows of `ld`.
  auto at = [&](int64_t b, int64_t h, int64_t t, int64_t d, int64_t col,
                int64_t ld) { return (b * T + t) * ld + col + h * D + d; };
  auto dense = [&](int64_t b, int64_t h, int64_t t, int64_t d,
                   int64_t heads) { return ((b * heads + h) * T + t) * D + d; };
  Vec qkv(B * T * W), dOr(dO.size()), orows(o.size(), NAN),
      dqkv(B * T * W, NAN);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d) {
        for (int64_t h = 0; h < H; ++h) {
          qkv[at(b, h, t, d, 0, W)] = q[dense(b, h, t, d, H)];
          dOr[at(b, h, t, d, 0, H * D)] = dO[dense(b, h, t, d, H)];
        }
        for (int64_t g = 0; g < G; ++g) {
          qkv[at(b, g, t, d, H * D, W)] = k[dense(b, g, t, d, G)];
          qkv[at(b, g, t, d, (H + G) * D, W)] = v[dense(b, g, t, d, G)];
        }
      }
  float *kr = qkv.data() + H * D, *vr = qkv.data() + (H + G) * D;
  float *dkr = dqkv.data() + H * D, *dvr = dqkv.data() + (H + G) * D;
  std::vector<void *> rfwd = {qkv.data(), kr, vr, orows.data()},
                      rbwd = {qkv.data(), kr, vr, dOr.data(), dqkv.data(),
                              dkr, dvr};
  fi = shape(Id::attention, true);
  gi = shape(Id::attention_grad, true);
  SHARDC_LAUNCH(attention, &ctx, rfwd, fi, scale, A::kComputeStream);
  SHARDC_LAUNCH(attention_grad, &ctx, rbwd, gi, scale, A::kComputeStream);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d) {
        for (int64_t h = 0; h < H; ++h) {
          ASSERT_NEAR(orows[at(b, h, t, d, 0, H * D)], o[dense(b, h, t, d, H)], 1e-6);
          ASSERT_NEAR(dqkv[at(b, h, t, d, 0, W)], dq[dense(b, h, t, d, H)], 1e-6);
        }
        for (int64_t g = 0; g < G; ++g) {
          ASSERT_NEAR(dqkv[at(b, g, t, d, H * D, W)], dk[dense(b, g, t, d, G)], 1e-6);
          ASSERT_NEAR(dqkv[at(b, g, t, d, (H + G) * D, W)],
                      dv[dense(b, g, t, d, G)], 1e-6);
        }
      }
}

TEST(Kernels, SoftmaxMiddleAxis) {
  const int64_t O = 3, N = 5, I = 4;
  Vec x = randomVec(O * N * I, 18, 4.0f), y(x.size());
  std::vector<void *> b = bufs(x, y);
  namespace S = A::softmax;
  std::vector<int64_t> ints =
      packInts(Id::softmax, {{S::outer, O}, {S::n, N}, {S::inner, I}});
  SHARDC_LAUNCH(softmax, &ctx, b, ints, nullptr, A::kComputeStream);
  std::vector<double> want(x.size());
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i) {
      double sum = 0;
      for (int64_t n = 0; n < N; ++n)
        sum += std::exp(double(x[(o * N + n) * I + i]));
      for (int64_t n = 0; n < N; ++n)
        want[(o * N + n) * I + i] =
            std::exp(double(x[(o * N + n) * I + i])) / sum;
    }
  expectNear(y, want);
}

TEST(Kernels, Transpose0213) {
  const int64_t Ad = 2, Bd = 3, C = 4, D = 5;
  Vec x = randomVec(Ad * Bd * C * D, 19), y(x.size());
  std::vector<void *> b = bufs(x, y);
  // dims[4], then perm[4].
  std::vector<int64_t> ints = packInts(Id::transpose, {{A::transpose::R, 4}},
                                       {Ad, Bd, C, D, 0, 2, 1, 3});
  SHARDC_LAUNCH(transpose, &ctx, b, ints, nullptr, A::kComputeStream);
  std::vector<double> want;
  for (int64_t a = 0; a < Ad; ++a)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t bb = 0; bb < Bd; ++bb)
        for (int64_t d = 0; d < D; ++d)
          want.push_back(x[((a * Bd + bb) * C + c) * D + d]);
  expectNear(y, want, 0);
}

TEST(Kernels, Slice) {
  // [2, 6, 3] -> dim 1, start 2, size 3 -> [2, 3, 3]
  Vec x = randomVec(36, 20), y(18);
  std::vector<void *> b = bufs(x, y);
  namespace Sl = A::slice;
  std::vector<int64_t> ints = packInts(Id::slice, {{Sl::outer, 2},
                                                   {Sl::n, 6},
                                                   {Sl::start, 2},
                                                   {Sl::size, 3},
                                                   {Sl::inner, 3}});
  SHARDC_LAUNCH(slice, &ctx, b, ints, nullptr, A::kComputeStream);
  std::vector<double> want;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 2; j < 5; ++j)
      for (int64_t k = 0; k < 3; ++k)
        want.push_back(x[(i * 6 + j) * 3 + k]);
  expectNear(y, want, 0);
}

TEST(Kernels, CrossEntropyWithIgnoreIndex) {
  const int64_t N = 6, V = 9;
  Vec logits = randomVec(N * V, 21, 2.0f), loss(1);
  std::vector<int32_t> targets = {3, -100, 8, 0, -100, 5};
  std::vector<void *> b = bufs(logits, targets, loss);
  namespace CE = A::cross_entropy;
  std::vector<int64_t> ints = packInts(
      Id::cross_entropy, {{CE::N, N}, {CE::V, V}, {CE::ignore_index, -100}});
  SHARDC_LAUNCH(cross_entropy, &ctx, b, ints, nullptr, A::kComputeStream);
  double total = 0;
  int count = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] == -100)
      continue;
    double sum = 0;
    for (int64_t v = 0; v < V; ++v)
      sum += std::exp(double(logits[n * V + v]));
    total += std::log(sum) - logits[n * V + targets[n]];
    ++count;
  }
  expectNear(loss, {total / count});
}

TEST(Kernels, Copy) {
  Vec x = randomVec(10, 22), y(10);
  std::vector<void *> b = bufs(x, y);
  std::vector<int64_t> ints =
      packInts(Id::copy, {{A::copy::bytes, int64_t(x.size() * sizeof(float))}});
  SHARDC_LAUNCH(copy, &ctx, b, ints, nullptr, A::kComputeStream);
  EXPECT_EQ(x, y);
}

TEST(Kernels, HalfToFloatIsExact) {
  using shardc::runtime::halfToFloat;
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0xc100), -2.5f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);          // largest normal
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_EQ(halfToFloat(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(halfToFloat(0x8000)));
  EXPECT_EQ(halfToFloat(0xfc00), -INFINITY);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7e00)));
}

TEST(Kernels, FloatToHalfIsNearestEven) {
  using shardc::runtime::floatToHalf;
  using shardc::runtime::halfToFloat;
  // Every half converts back to itself (NaNs stay NaNs).
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float v = halfToFloat(uint16_t(h));
    if (std::isnan(v))
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(v)))) << h;
    else
      ASSERT_EQ(floatToHalf(v), h) << "half " << h;
  }
  // Random f32 bit patterns (every exponent) against the definition.
  std::mt19937 gen(7);
  for (int k = 0; k < 1 << 20; ++k) {
    uint32_t bits = uint32_t(gen());
    float x;
    std::memcpy(&x, &bits, 4);
    if (std::isnan(x))
      continue;
    double want = nearestInFormat(x, 11, -14, kHalfMax);
    float got = halfToFloat(floatToHalf(x));
    ASSERT_EQ(double(got), want) << "x = " << x << " (bits " << bits << ")";
    ASSERT_EQ(std::signbit(got), std::signbit(x)) << x;
  }
}

TEST(Kernels, CastBf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even.
  Vec x = {1.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f, 3.0e38f};
  std::vector<uint16_t> h(x.size());
  Vec back(x.size());
  std::vector<void *> b1 = {x.data(), h.data()}, b2 = {h.data(), back.data()};
  namespace Cs = A::cast;
  int64_t n = int64_t(x.size());
  std::vector<int64_t> toBf16 =
      packInts(Id::cast, {{Cs::n, n}, {Cs::from, A::kF32}, {Cs::to, A::kBF16}});
  std::vector<int64_t> toF32 =
      packInts(Id::cast, {{Cs::n, n}, {Cs::from, A::kBF16}, {Cs::to, A::kF32}});
  SHARDC_LAUNCH(cast, &ctx, b1, toBf16, nullptr, A::kComputeStream);
  SHARDC_LAUNCH(cast, &ctx, b2, toF32, nullptr, A::kComputeStream);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f);
  EXPECT_EQ(back[2], 1.0f + 4.0f / 256);
  EXPECT_EQ(back[3], -2.5f);
  for (size_t k = 0; k < x.size(); ++k)
    EXPECT_NEAR(back[k], x[k], std::fabs(x[k]) / 128) << k;
}

TEST(Context, LaunchesAreCountedPerStream) {
  shardc::runtime::Context c;
  Vec x = randomVec(4, 23), y(4);
  std::vector<void *> b = bufs(x, y);
  std::vector<int64_t> ints =
      packInts(Id::copy, {{A::copy::bytes, int64_t(x.size() * sizeof(float))}});
  SHARDC_LAUNCH(copy, &c, b, ints, nullptr, A::kCommStream);
  EXPECT_EQ(c.launched[A::kComputeStream], 0);
  EXPECT_EQ(c.launched[A::kCommStream], 1);
}

} // namespace
