//===- Float8Test.cpp - fp8 rounding and the CPU float8 kernels -----------===//
//
// The fp8 formats against their definition, independently of
// runtime/math.h's bit arithmetic: every finite value of a format is
// enumerated from sign, exponent and mantissa in double, and a float's
// rounding must be the nearest of them (ties to the even mantissa),
// saturating at the largest. cast_fp8 and matmul_fp8 are then checked
// against naive transcriptions of torchao's casts and emulated GEMM.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels.h"
#include "runtime/math.h"
#include "runtime/runtime.h"

#include "test/unit/TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

using namespace shardc::test;
namespace A = shardc::abi;
namespace R = shardc::runtime;
using Id = A::KernelId;

shardc::runtime::Context ctx;

struct Format {
  int64_t code;
  int exponentBits, mantissaBits, bias;
  double max;
};
const Format kE4M3{A::kF8E4M3, 4, 3, 7, 448.0};
const Format kE5M2{A::kF8E5M2, 5, 2, 15, 57344.0};

/// Every finite non-negative value of `f` with its code, from the format's
/// definition: e4m3fn's top exponent holds normal numbers but its all-ones
/// mantissa is NaN; e5m2's top exponent is infinity and NaN, as IEEE's.
std::vector<std::pair<double, uint8_t>> finiteValues(const Format &f) {
  std::vector<std::pair<double, uint8_t>> out;
  int top = (1 << f.exponentBits) - 1;
  for (int e = 0; e <= top; ++e)
    for (int m = 0; m < (1 << f.mantissaBits); ++m) {
      if (f.code == A::kF8E5M2 && e == top)
        continue;
      if (f.code == A::kF8E4M3 && e == top && m == (1 << f.mantissaBits) - 1)
        continue;
      double frac = double(m) / double(1 << f.mantissaBits);
      double v = e == 0 ? std::ldexp(frac, 1 - f.bias)
                        : std::ldexp(1.0 + frac, e - f.bias);
      out.push_back({v, uint8_t((e << f.mantissaBits) | m)});
    }
  return out;
}

/// The code of x's nearest value (ties: even mantissa), saturated.
uint8_t nearestCode(double x, const Format &f) {
  uint8_t sign = x < 0 || std::signbit(x) ? 0x80 : 0;
  double a = std::min(std::fabs(x), f.max);
  double best = INFINITY;
  uint8_t code = 0;
  for (auto [v, c] : finiteValues(f)) {
    double d = std::fabs(v - a);
    if (d < best || (d == best && (c & 1) == 0)) {
      best = d;
      code = c;
    }
  }
  return uint8_t(sign | code);
}

TEST(Float8, DecodesEveryFiniteCode) {
  for (const Format &f : {kE4M3, kE5M2}) {
    auto values = finiteValues(f);
    EXPECT_EQ(values.back().first, f.max);
    for (auto [v, c] : values) {
      EXPECT_EQ(R::fp8ToFloat(c, f.code), float(v)) << int(c);
      EXPECT_EQ(R::fp8ToFloat(uint8_t(c | 0x80), f.code), -float(v));
      EXPECT_EQ(R::floatToFp8(float(v), f.code), c) << v;
    }
    EXPECT_EQ(R::fp8Max(f.code), float(f.max));
  }
}

TEST(Float8, RoundsToNearestEvenAndSaturates) {
  std::mt19937 gen(7);
  for (const Format &f : {kE4M3, kE5M2}) {
    std::vector<float> xs = {0.0f, -0.0f, 1e30f, -1e30f, float(f.max) * 1.06f};
    // Midpoints between neighbours, and random values over the range
    // (subnormals included).
    auto values = finiteValues(f);
    for (size_t k = 1; k < values.size(); ++k)
      xs.push_back(float((values[k - 1].first + values[k].first) / 2));
    std::uniform_real_distribution<double> logMag(
        -2.0 - f.bias - f.mantissaBits, std::log2(f.max) + 1);
    for (int k = 0; k < 20000; ++k)
      xs.push_back(float((k % 2 ? -1 : 1) * std::exp2(logMag(gen))));
    for (float x : xs)
      ASSERT_EQ(R::floatToFp8(x, f.code), nearestCode(x, f))
          << "x = " << x << " format " << f.code;
  }
}

TEST(Float8, ScaleAsTorchao) {
  // max / amax in double, rounded to f32; rowwise floors it to 2^k.
  EXPECT_EQ(R::fp8Scale(2.0f, A::kF8E4M3, false), 224.0f);
  EXPECT_EQ(R::fp8Scale(3.0f, A::kF8E4M3, false), float(448.0 / 3.0));
  EXPECT_EQ(R::fp8Scale(3.0f, A::kF8E4M3, true), 128.0f);
  EXPECT_EQ(R::fp8Scale(0.0f, A::kF8E5M2, false), float(57344.0 / 1e-12));
}

/// x[R,C] cast as cast_fp8's definition says, naively.
void naiveCast(const Vec &x, int64_t Rn, int64_t C, const Format &f,
               bool rowwise, bool trans, std::vector<uint8_t> &q,
               std::vector<float> &scale) {
  int64_t rows = trans ? C : Rn;
  auto at = [&](int64_t r, int64_t c) {
    return trans ? x[c * C + r] : x[r * C + c];
  }; // element c of q's row r
  int64_t cols = trans ? Rn : C;
  scale.assign(rowwise ? rows : 1, 0.0f);
  std::vector<double> amax(scale.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double &m = amax[rowwise ? r : 0];
      m = std::max(m, std::fabs(double(at(r, c))));
    }
  for (size_t k = 0; k < scale.size(); ++k) {
    float s = float(f.max / std::max(amax[k], 1e-12));
    scale[k] = rowwise ? std::exp2(std::floor(std::log2(s))) : s;
  }
  q.assign(rows * cols, 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      q[r * cols + c] =
          nearestCode(at(r, c) * scale[rowwise ? r : 0], f);
}

void checkCast(const Format &f, bool rowwise, bool trans) {
  const int64_t Rn = 7, C = 12;
  Vec x = randomVec(Rn * C, 11, 3.0f);
  x[5] = 40.0f; // one outlier: most elements far below amax
  std::vector<uint8_t> q(Rn * C);
  std::vector<float> scale(rowwise ? (trans ? C : Rn) : 1);
  std::vector<void *> b = {x.data(), q.data(), scale.data()};
  namespace K = A::cast_fp8;
  SHARDC_LAUNCH(cast_fp8, &ctx, b,
                packInts(Id::cast_fp8, {{K::R, Rn},
                                        {K::C, C},
                                        {K::format, f.code},
                                        {K::rowwise, rowwise},
                                        {K::trans, trans}}),
                nullptr, A::kComputeStream);
  std::vector<uint8_t> wantQ;
  std::vector<float> wantScale;
  naiveCast(x, Rn, C, f, rowwise, trans, wantQ, wantScale);
  EXPECT_EQ(scale, wantScale);
  EXPECT_EQ(q, wantQ);
}

TEST(Float8, CastTensorwiseE4M3) { checkCast(kE4M3, false, false); }
TEST(Float8, CastTensorwiseE5M2Transposed) { checkCast(kE5M2, false, true); }
TEST(Float8, CastRowwise) { checkCast(kE4M3, true, false); }
TEST(Float8, CastRowwiseTransposed) { checkCast(kE4M3, true, true); }

void checkMatmul(bool rowwise, bool bias) {
  const int64_t M = 5, K = 16, N = 3;
  std::mt19937 gen(3);
  std::vector<uint8_t> a(M * K), w(N * K);
  for (auto &v : a)
    v = uint8_t(gen() % 0x7e); // finite, non-negative codes
  for (auto &v : w)
    v = uint8_t(0x80 | (gen() % 0x7b));
  std::vector<float> sa(rowwise ? M : 1), sb(rowwise ? N : 1);
  for (auto &s : sa)
    s = 0.5f + float(gen() % 100);
  for (auto &s : sb)
    s = 1.0f / (1.0f + float(gen() % 7));
  Vec bv = randomVec(N, 5), y(M * N);
  std::vector<void *> b = {a.data(), w.data(), sa.data(), sb.data()};
  if (bias)
    b.push_back(bv.data());
  b.push_back(y.data());
  namespace K8 = A::matmul_fp8;
  SHARDC_LAUNCH(matmul_fp8, &ctx, b,
                packInts(Id::matmul_fp8, {{K8::M, M},
                                          {K8::K, K},
                                          {K8::N, N},
                                          {K8::format_a, A::kF8E4M3},
                                          {K8::format_b, A::kF8E5M2},
                                          {K8::rowwise, rowwise},
                                          {K8::has_bias, bias}}),
                nullptr, A::kComputeStream);
  auto value = [](uint8_t c, const Format &f) {
    for (auto [v, code] : finiteValues(f))
      if (code == (c & 0x7f))
        return (c & 0x80) ? -v : v;
    return double(NAN);
  };
  std::vector<double> want;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += value(a[m * K + k], kE4M3) / sa[rowwise ? m : 0] *
             (value(w[n * K + k], kE5M2) / sb[rowwise ? n : 0]);
      want.push_back(s + (bias ? bv[n] : 0.0));
    }
  expectNear(y, want);
}

TEST(Float8, MatmulTensorwise) { checkMatmul(false, false); }
TEST(Float8, MatmulRowwiseBias) { checkMatmul(true, true); }

// The float8 all-gather (rt-float8-all-gather): two weights, each sharded
// by rows over P = 2 ranks. Each rank's amax_group over its shards, the
// ranks' amaxes gathered [P, k], fp8_scales, each shard cast with its
// weight's scale and the shards concatenated (the gather) give
// cast_fp8's bytes and scale of the whole weight, bit for bit; and
// transpose_fp8 of those bytes gives the transposed cast's. Then with the
// weights in bf16 (the gathered dtype) and the amaxes of their f32
// masters rounded by fp8_scales.
void checkAllGather(bool bf16) {
  const int64_t P = 2, k = 2, Rn = 8, C = 12, n = Rn * C / P;
  std::vector<Vec> w = {randomVec(Rn * C, 31, 2.0f), randomVec(Rn * C, 32)};
  w[1][70] = -9.0f; // the amax on rank 1's shard
  // What the gather moves: the weights as the gathered dtype holds them.
  std::vector<std::vector<uint16_t>> wb(k);
  for (int64_t j = 0; j < k; ++j)
    for (float v : w[j])
      wb[j].push_back(R::floatToBf16(v));
  namespace AG = A::amax_group;
  std::vector<float> amaxes(P * k);
  for (int64_t p = 0; p < P; ++p) {
    std::vector<void *> b = {w[0].data() + p * n, w[1].data() + p * n,
                             amaxes.data() + p * k};
    SHARDC_LAUNCH(amax_group, &ctx, b,
                  packInts(Id::amax_group, {{AG::k, k}}, {n, n}), nullptr,
                  A::kComputeStream);
  }
  std::vector<float> scales(k);
  namespace FS = A::fp8_scales;
  std::vector<void *> sb = {amaxes.data(), scales.data()};
  SHARDC_LAUNCH(fp8_scales, &ctx, sb,
                packInts(Id::fp8_scales, {{FS::P, P},
                                          {FS::k, k},
                                          {FS::format, A::kF8E4M3},
                                          {FS::amax_dtype,
                                           bf16 ? A::kBF16 : A::kF32}}),
                nullptr, A::kComputeStream);
  for (int64_t j = 0; j < k; ++j) {
    void *whole = bf16 ? static_cast<void *>(wb[j].data()) : w[j].data();
    int64_t eb = bf16 ? 2 : 4, dtype = bf16 ? A::kBF16 : A::kF32;
    std::vector<uint8_t> gathered(Rn * C);
    namespace CS = A::cast_fp8_scaled;
    for (int64_t p = 0; p < P; ++p) {
      std::vector<void *> b = {static_cast<char *>(whole) + p * n * eb,
                               &scales[j], gathered.data() + p * n};
      SHARDC_LAUNCH(cast_fp8_scaled, &ctx, b,
                    packInts(Id::cast_fp8_scaled, {{CS::R, 1},
                                                   {CS::C, n},
                                                   {CS::dtype, dtype},
                                                   {CS::format, A::kF8E4M3},
                                                   {CS::trans, 0}}),
                    nullptr, A::kComputeStream);
    }
    std::vector<uint8_t> transposed(Rn * C);
    std::vector<void *> tb = {gathered.data(), transposed.data()};
    SHARDC_LAUNCH(transpose_fp8, &ctx, tb,
                  packInts(Id::transpose_fp8,
                           {{A::transpose_fp8::R, Rn}, {A::transpose_fp8::C, C}}),
                  nullptr, A::kComputeStream);
    for (int64_t trans : {0, 1}) {
      std::vector<uint8_t> q(Rn * C);
      float scale = 0.0f;
      std::vector<void *> b = {whole, q.data(), &scale};
      namespace K = A::cast_fp8;
      SHARDC_LAUNCH(cast_fp8, &ctx, b,
                    packInts(Id::cast_fp8, {{K::R, Rn},
                                            {K::C, C},
                                            {K::dtype, dtype},
                                            {K::format, A::kF8E4M3},
                                            {K::rowwise, 0},
                                            {K::trans, trans}}),
                    nullptr, A::kComputeStream);
      EXPECT_EQ(scales[j], scale) << "weight " << j;
      EXPECT_EQ(trans ? transposed : gathered, q) << "weight " << j;
    }
  }
}

TEST(Float8, AllGatherF32) { checkAllGather(false); }
TEST(Float8, AllGatherBf16) { checkAllGather(true); }

} // namespace
