//===- Float8Test.cpp - fp8 rounding and the CPU float8 kernels -----------===//
//
// The fp8 formats against their definition, independently of
// runtime/math.h's bit arithmetic: every finite value of a format is
// enumerated from sign, exponent and mantissa in double, and a float's
// rounding must be the nearest of them (ties to the even mantissa),
// saturating at the largest. cast_fp8 and matmul_fp8 are then checked
// against naive transcriptions of torchao's casts (q, its transpose with
// both, the {s, 1/s} scale pairs) and of the GEMMs (tensorwise as
// cuBLASLt's scale pointers scale, rowwise as torchao's emulation).
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

/// x[R,C] cast as cast_fp8's definition says, naively: q (transposed when
/// trans), qt = q transposed when both, scale[2] = {s, 1/s} (tensorwise)
/// or q's rows' scales.
void naiveCast(const Vec &x, int64_t Rn, int64_t C, const Format &f,
               bool rowwise, bool trans, bool both, std::vector<uint8_t> &q,
               std::vector<float> &scale, std::vector<uint8_t> &qt) {
  int64_t rows = trans ? C : Rn;
  auto at = [&](int64_t r, int64_t c) {
    return trans ? x[c * C + r] : x[r * C + c];
  }; // element c of q's row r
  int64_t cols = trans ? Rn : C;
  std::vector<double> amax(rowwise ? rows : 1, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double &m = amax[rowwise ? r : 0];
      m = std::max(m, std::fabs(double(at(r, c))));
    }
  scale.clear();
  for (double m : amax) {
    float s = float(f.max / std::max(m, 1e-12));
    scale.push_back(rowwise ? std::exp2(std::floor(std::log2(s))) : s);
  }
  if (!rowwise)
    scale.push_back(float(1.0 / double(scale[0]))); // 1/s rounded once
  q.assign(rows * cols, 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      q[r * cols + c] =
          nearestCode(at(r, c) * scale[rowwise ? r : 0], f);
  qt.clear();
  if (both)
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t r = 0; r < rows; ++r)
        qt.push_back(q[r * cols + c]);
}

/// x rounded to bf16, as a bf16 buffer and as its values.
std::vector<uint16_t> toBf16(Vec &x) {
  std::vector<uint16_t> h;
  for (float &v : x) {
    h.push_back(R::floatToBf16(v));
    v = R::bf16ToFloat(h.back());
  }
  return h;
}

void checkCast(const Format &f, bool rowwise, bool trans, bool both = false,
               bool bf16 = false) {
  const int64_t Rn = 7, C = 12;
  Vec x = randomVec(Rn * C, 11, 3.0f);
  x[5] = 40.0f; // one outlier: most elements far below amax
  std::vector<uint16_t> xh = bf16 ? toBf16(x) : std::vector<uint16_t>();
  std::vector<uint8_t> q(Rn * C), qt(both ? Rn * C : 0);
  std::vector<float> scale(rowwise ? (trans ? C : Rn) : 2);
  std::vector<void *> b = {bf16 ? static_cast<void *>(xh.data()) : x.data(),
                           q.data(), scale.data()};
  if (both)
    b.push_back(qt.data());
  namespace K = A::cast_fp8;
  SHARDC_LAUNCH(cast_fp8, &ctx, b,
                packInts(Id::cast_fp8, {{K::R, Rn},
                                        {K::C, C},
                                        {K::dtype, bf16 ? A::kBF16 : A::kF32},
                                        {K::format, f.code},
                                        {K::rowwise, rowwise},
                                        {K::trans, trans},
                                        {K::both, both}}),
                nullptr, A::kComputeStream);
  std::vector<uint8_t> wantQ, wantQt;
  std::vector<float> wantScale;
  naiveCast(x, Rn, C, f, rowwise, trans, both, wantQ, wantScale, wantQt);
  EXPECT_EQ(scale, wantScale);
  EXPECT_EQ(q, wantQ);
  EXPECT_EQ(qt, wantQt);
}

TEST(Float8, CastTensorwiseE4M3) { checkCast(kE4M3, false, false); }
TEST(Float8, CastTensorwiseE5M2Transposed) { checkCast(kE5M2, false, true); }
TEST(Float8, CastRowwise) { checkCast(kE4M3, true, false); }
TEST(Float8, CastRowwiseTransposed) { checkCast(kE4M3, true, true); }
TEST(Float8, CastBoth) {
  checkCast(kE4M3, false, false, /*both=*/true);
  checkCast(kE5M2, false, false, /*both=*/true, /*bf16=*/true);
}

// cast_fp8_scaled with its scale pair given: q (and qt with both, or q
// transposed with trans) as the naive cast with that scale.
TEST(Float8, CastScaledBoth) {
  const int64_t Rn = 5, C = 9;
  Vec x = randomVec(Rn * C, 13, 2.0f);
  float s = 37.5f;
  std::vector<float> pair = {s, 1.0f / s};
  for (int64_t trans : {0, 1})
    for (int64_t both : {0, 1}) {
      if (trans && both)
        continue;
      std::vector<uint8_t> q(Rn * C), qt(both ? Rn * C : 0);
      std::vector<void *> b = {x.data(), pair.data(), q.data()};
      if (both)
        b.push_back(qt.data());
      namespace CS = A::cast_fp8_scaled;
      SHARDC_LAUNCH(cast_fp8_scaled, &ctx, b,
                    packInts(Id::cast_fp8_scaled, {{CS::R, Rn},
                                                   {CS::C, C},
                                                   {CS::format, A::kF8E4M3},
                                                   {CS::trans, trans},
                                                   {CS::both, both}}),
                    nullptr, A::kComputeStream);
      for (int64_t r = 0; r < Rn; ++r)
        for (int64_t c = 0; c < C; ++c) {
          uint8_t want = nearestCode(x[r * C + c] * s, kE4M3);
          EXPECT_EQ(q[trans ? c * Rn + r : r * C + c], want) << r << " " << c;
          if (both) {
            EXPECT_EQ(qt[c * Rn + r], want) << r << " " << c;
          }
        }
    }
}

// `both` is a tensorwise cast's without trans: anything else is fatal,
// naming the kernel.
TEST(Float8DeathTest, BothNeedsTensorwiseUntransposed) {
  Vec x(12, 1.0f), pair = {1.0f, 1.0f};
  std::vector<uint8_t> q(12), qt(12);
  std::vector<float> scale(4);
  namespace K = A::cast_fp8;
  std::vector<void *> b = {x.data(), q.data(), scale.data(), qt.data()};
  for (auto [rowwise, trans] : {std::pair{1, 0}, std::pair{0, 1}})
    EXPECT_DEATH(SHARDC_LAUNCH(cast_fp8, &ctx, b,
                               packInts(Id::cast_fp8, {{K::R, 3},
                                                       {K::C, 4},
                                                       {K::format, A::kF8E4M3},
                                                       {K::rowwise, rowwise},
                                                       {K::trans, trans},
                                                       {K::both, 1}}),
                               nullptr, A::kComputeStream),
                 "cast_fp8: both");
  namespace CS = A::cast_fp8_scaled;
  std::vector<void *> sb = {x.data(), pair.data(), q.data(), qt.data()};
  EXPECT_DEATH(
      SHARDC_LAUNCH(cast_fp8_scaled, &ctx, sb,
                    packInts(Id::cast_fp8_scaled, {{CS::R, 3},
                                                   {CS::C, 4},
                                                   {CS::format, A::kF8E4M3},
                                                   {CS::trans, 1},
                                                   {CS::both, 1}}),
                    nullptr, A::kComputeStream),
      "cast_fp8_scaled: both");
}

/// matmul_fp8 against its definition: tensorwise, the sum of the raw
/// values' products times sa[1] sb[1] (their f32 product); rowwise, the
/// sum of (a / sa[m]) (b / sb[n]); rounded to bf16 on bf16 unless yF32,
/// then the bias added (and rounded again on bf16 unless yF32).
void checkMatmul(bool rowwise, bool bias, bool bf16 = false,
                 bool yF32 = false) {
  const int64_t M = 5, K = 16, N = 3;
  std::mt19937 gen(3);
  std::vector<uint8_t> a(M * K), w(N * K);
  for (auto &v : a)
    v = uint8_t(gen() % 0x7e); // finite, non-negative codes
  for (auto &v : w)
    v = uint8_t(0x80 | (gen() % 0x7b));
  // Rowwise: the casts' scales; tensorwise: {s, 1/s} pairs.
  std::vector<float> sa, sb;
  if (rowwise) {
    for (int64_t m = 0; m < M; ++m)
      sa.push_back(0.5f + float(gen() % 100));
    for (int64_t n = 0; n < N; ++n)
      sb.push_back(1.0f / (1.0f + float(gen() % 7)));
  } else {
    float s = 0.5f + float(gen() % 100), t = 1.0f / (1.0f + float(gen() % 7));
    sa = {s, 1.0f / s};
    sb = {t, 1.0f / t};
  }
  Vec bv = randomVec(N, 5);
  std::vector<uint16_t> bh = bf16 ? toBf16(bv) : std::vector<uint16_t>();
  Vec y(M * N);
  std::vector<uint16_t> yh(M * N);
  bool yBf16 = bf16 && !yF32;
  std::vector<void *> b = {a.data(), w.data(), sa.data(), sb.data()};
  if (bias)
    b.push_back(bf16 ? static_cast<void *>(bh.data()) : bv.data());
  b.push_back(yBf16 ? static_cast<void *>(yh.data()) : y.data());
  namespace K8 = A::matmul_fp8;
  SHARDC_LAUNCH(
      matmul_fp8, &ctx, b,
      packInts(Id::matmul_fp8, {{K8::M, M},
                                {K8::K, K},
                                {K8::N, N},
                                {K8::format_a, A::kF8E4M3},
                                {K8::format_b, A::kF8E5M2},
                                {K8::rowwise, rowwise},
                                {K8::has_bias, bias},
                                {K8::dtype, bf16 ? A::kBF16 : A::kF32},
                                {K8::y_f32, yF32}}),
      nullptr, A::kComputeStream);
  if (yBf16)
    for (int64_t k = 0; k < M * N; ++k)
      y[k] = R::bf16ToFloat(yh[k]);
  auto value = [](uint8_t c, const Format &f) {
    for (auto [v, code] : finiteValues(f))
      if (code == (c & 0x7f))
        return (c & 0x80) ? -v : v;
    return double(NAN);
  };
  double product = double(sa[rowwise ? 0 : 1] * sb[rowwise ? 0 : 1]);
  std::vector<double> want;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += rowwise ? value(a[m * K + k], kE4M3) / sa[m] *
                           (value(w[n * K + k], kE5M2) / sb[n])
                     : value(a[m * K + k], kE4M3) * value(w[n * K + k], kE5M2);
      if (!rowwise)
        s *= product;
      if (yBf16)
        s = R::roundToBf16(float(s));
      s += bias ? bv[n] : 0.0;
      want.push_back(yBf16 ? R::roundToBf16(float(s)) : s);
    }
  // On bf16, the f32 sum may round to the neighbour of the double's.
  expectNear(y, want, yBf16 ? 1e-2 : 1e-5);
}

TEST(Float8, MatmulTensorwise) { checkMatmul(false, false); }
TEST(Float8, MatmulTensorwiseBias) { checkMatmul(false, true); }
TEST(Float8, MatmulRowwiseBias) { checkMatmul(true, true); }
TEST(Float8, MatmulBf16) {
  checkMatmul(false, true, /*bf16=*/true);
  checkMatmul(true, false, /*bf16=*/true);
}
TEST(Float8, MatmulYF32) {
  checkMatmul(false, true, /*bf16=*/true, /*yF32=*/true);
  checkMatmul(true, true, /*bf16=*/true, /*yF32=*/true);
  checkMatmul(false, false, /*bf16=*/false, /*yF32=*/true);
}

// The tensorwise product exactly: products of fp8 values that are exact
// in f32 and sums of few of them exact too, so y is exactly the sum times
// sa[1] sb[1] rounded once (and not, say, (sum * sa[1]) * sb[1], nor the
// sum divided by sa[0] sb[0]).
TEST(Float8, MatmulTensorwiseExact) {
  const int64_t M = 2, K = 4, N = 2;
  std::vector<uint8_t> a(M * K), w(N * K);
  for (int64_t k = 0; k < M * K; ++k)
    a[k] = R::floatToFp8(float(k % 5) - 1.5f, A::kF8E4M3);
  for (int64_t k = 0; k < N * K; ++k)
    w[k] = R::floatToFp8(0.25f * float(k + 1), A::kF8E4M3);
  float s = 3.0f, t = 7.0f;
  std::vector<float> sa = {s, 1.0f / s}, sb = {t, 1.0f / t};
  Vec y(M * N);
  std::vector<void *> b = {a.data(), w.data(), sa.data(), sb.data(), y.data()};
  namespace K8 = A::matmul_fp8;
  SHARDC_LAUNCH(matmul_fp8, &ctx, b,
                packInts(Id::matmul_fp8, {{K8::M, M},
                                          {K8::K, K},
                                          {K8::N, N},
                                          {K8::format_a, A::kF8E4M3},
                                          {K8::format_b, A::kF8E4M3},
                                          {K8::rowwise, 0},
                                          {K8::has_bias, 0}}),
                nullptr, A::kComputeStream);
  float product = sa[1] * sb[1];
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k)
        acc += R::fp8ToFloat(a[m * K + k], A::kF8E4M3) *
               R::fp8ToFloat(w[n * K + k], A::kF8E4M3);
      EXPECT_EQ(y[m * N + n], acc * product) << m << " " << n;
    }
}

// The float8 all-gather (rt-float8-all-gather): two weights, each sharded
// by rows over P = 2 ranks. Each rank's amax_group over its shards, the
// ranks' amaxes gathered [P, k], fp8_scales, each shard cast with its
// weight's scale and the shards concatenated (the gather) give
// cast_fp8's bytes and scale pair of the whole weight, bit for bit; and
// transpose_fp8 of those bytes gives the transposed cast's (and the qt of
// cast_fp8's both, and of cast_fp8_scaled's on the whole weight). Then
// with the weights in bf16 (the gathered dtype) and the amaxes of their
// f32 masters rounded by fp8_scales.
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
  std::vector<float> scales(k * 2); // [k, 2]: {s, 1/s} a weight
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
    EXPECT_EQ(scales[2 * j + 1], 1.0f / scales[2 * j]) << "weight " << j;
    void *whole = bf16 ? static_cast<void *>(wb[j].data()) : w[j].data();
    int64_t eb = bf16 ? 2 : 4, dtype = bf16 ? A::kBF16 : A::kF32;
    std::vector<uint8_t> gathered(Rn * C);
    namespace CS = A::cast_fp8_scaled;
    for (int64_t p = 0; p < P; ++p) {
      std::vector<void *> b = {static_cast<char *>(whole) + p * n * eb,
                               &scales[2 * j], gathered.data() + p * n};
      SHARDC_LAUNCH(cast_fp8_scaled, &ctx, b,
                    packInts(Id::cast_fp8_scaled, {{CS::R, 1},
                                                   {CS::C, n},
                                                   {CS::dtype, dtype},
                                                   {CS::format, A::kF8E4M3},
                                                   {CS::trans, 0},
                                                   {CS::both, 0}}),
                    nullptr, A::kComputeStream);
    }
    std::vector<uint8_t> transposed(Rn * C);
    std::vector<void *> tb = {gathered.data(), transposed.data()};
    SHARDC_LAUNCH(transpose_fp8, &ctx, tb,
                  packInts(Id::transpose_fp8,
                           {{A::transpose_fp8::R, Rn}, {A::transpose_fp8::C, C}}),
                  nullptr, A::kComputeStream);
    // cast_fp8_scaled on the whole weight with both: q and qt at once.
    std::vector<uint8_t> sq(Rn * C), sqt(Rn * C);
    std::vector<void *> scb = {whole, &scales[2 * j], sq.data(), sqt.data()};
    SHARDC_LAUNCH(cast_fp8_scaled, &ctx, scb,
                  packInts(Id::cast_fp8_scaled, {{CS::R, Rn},
                                                 {CS::C, C},
                                                 {CS::dtype, dtype},
                                                 {CS::format, A::kF8E4M3},
                                                 {CS::trans, 0},
                                                 {CS::both, 1}}),
                  nullptr, A::kComputeStream);
    EXPECT_EQ(gathered, sq) << "weight " << j;
    EXPECT_EQ(transposed, sqt) << "weight " << j;
    for (auto [trans, both] : {std::pair{0, 0}, {1, 0}, {0, 1}}) {
      std::vector<uint8_t> q(Rn * C), qt(Rn * C);
      std::vector<float> scale(2);
      std::vector<void *> b = {whole, q.data(), scale.data()};
      if (both)
        b.push_back(qt.data());
      namespace K = A::cast_fp8;
      SHARDC_LAUNCH(cast_fp8, &ctx, b,
                    packInts(Id::cast_fp8, {{K::R, Rn},
                                            {K::C, C},
                                            {K::dtype, dtype},
                                            {K::format, A::kF8E4M3},
                                            {K::rowwise, 0},
                                            {K::trans, trans},
                                            {K::both, both}}),
                    nullptr, A::kComputeStream);
      EXPECT_EQ(scales[2 * j], scale[0]) << "weight " << j;
      EXPECT_EQ(scales[2 * j + 1], scale[1]) << "weight " << j;
      EXPECT_EQ(trans ? transposed : gathered, q) << "weight " << j;
      if (both) {
        EXPECT_EQ(transposed, qt) << "weight " << j;
      }
    }
  }
}

TEST(Float8, AllGatherF32) { checkAllGather(false); }
TEST(Float8, AllGatherBf16) { checkAllGather(true); }

} // namespace
