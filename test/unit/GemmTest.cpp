//===- GemmTest.cpp - the CPU GEMM wrapper against a naive reference ------===//
//
// runtime/cpu/gemm.h's sgemm (oneDNN) in every transpose, at odd sizes and
// padded leading dimensions, with alpha and beta, over reductions it splits, inside an OpenMP region
// as attention calls it; and the kernels that wrap it with epilogues
// (linear with bias, linear_gelu, linear_dgelu with the bias gradient),
// each against a direct double-precision transcription of its definition.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/gemm.h"
#include "runtime/kernels.h"
#include "runtime/math.h"
#include "runtime/runtime.h"

#include "test/unit/TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace {

using namespace shardc::test;
using shardc::runtime::cpu::sgemm;
namespace A = shardc::abi;
using Id = A::KernelId;

shardc::runtime::Context ctx;

struct Case {
  bool ta, tb;
  int64_t M, N, K;
};

/// sgemm with leading dimensions `pad` past the minimum, alpha 1.5 and
/// `beta` against alpha naive + beta c; c's padding columns must stay as
/// they were, and with beta 0 c's NaNs must not be read.
void checkSgemm(const Case &t, int64_t pad, float beta) {
  int64_t aRows = t.ta ? t.K : t.M, aCols = t.ta ? t.M : t.K;
  int64_t bRows = t.tb ? t.N : t.K, bCols = t.tb ? t.K : t.N;
  int64_t lda = aCols + pad, ldb = bCols + pad, ldc = t.N + pad;
  Vec a = randomVec(size_t(aRows * lda), 1), b = randomVec(size_t(bRows * ldb), 2);
  Vec c = randomVec(size_t(t.M * ldc), 3);
  if (beta == 0.0f)
    for (int64_t m = 0; m < t.M; ++m)
      for (int64_t n = 0; n < t.N; ++n)
        c[size_t(m * ldc + n)] = std::numeric_limits<float>::quiet_NaN();
  Vec before = c;
  // The reference reads the operands packed, as naiveMatmul expects.
  Vec pa(size_t(aRows * aCols)), pb(size_t(bRows * bCols));
  for (int64_t r = 0; r < aRows; ++r)
    std::memcpy(&pa[size_t(r * aCols)], &a[size_t(r * lda)], aCols * 4);
  for (int64_t r = 0; r < bRows; ++r)
    std::memcpy(&pb[size_t(r * bCols)], &b[size_t(r * ldb)], bCols * 4);
  std::vector<double> product =
      naiveMatmul(pa.data(), pb.data(), t.M, t.K, t.N, t.ta, t.tb);
  const float alpha = 1.5f;
  sgemm(t.ta, t.tb, t.M, t.N, t.K, alpha, a.data(), lda, b.data(), ldb, beta,
        c.data(), ldc);
  // f32 accumulation of K products of unit-variance terms: an error well
  // under 1e-6 K (a wrong transpose, stride or beta is off by O(sqrt K)).
  double tol = 1e-6 * double(t.K);
  for (int64_t m = 0; m < t.M; ++m)
    for (int64_t n = 0; n < ldc; ++n) {
      size_t at = size_t(m * ldc + n);
      if (n >= t.N) {
        ASSERT_EQ(c[at], before[at]) << "padding column " << n << " written";
        continue;
      }
      double want = alpha * product[size_t(m * t.N + n)] +
                    (beta != 0.0f ? beta * double(before[at]) : 0.0);
      ASSERT_NEAR(c[at], want, tol + 1e-6 * std::fabs(want))
          << (t.ta ? "T" : "N") << (t.tb ? "T" : "N") << " " << t.M << "x"
          << t.N << "x" << t.K << " pad " << pad << " beta " << beta
          << " at (" << m << ", " << n << ")";
    }
}

const Case kCases[] = {
    {false, false, 1, 1, 1},     {false, true, 7, 13, 5},
    {true, false, 33, 17, 65},   {true, true, 5, 31, 3},
    {false, true, 129, 67, 255}, {true, false, 67, 129, 255},
    {false, false, 300, 5, 1000}, {true, true, 3, 257, 129},
    // Reductions past gemm.cpp's chunk of 8192, in chunks of 6667 and 8193.
    {false, false, 5, 7, 20001},  {true, true, 9, 4, 16385},
};

TEST(Gemm, EveryTransposeOddSizes) {
  for (const Case &t : kCases)
    checkSgemm(t, 0, 0.0f);
}

TEST(Gemm, PaddedLeadingDimensionsAndBeta) {
  for (const Case &t : kCases) {
    checkSgemm(t, 3, 1.0f);
    checkSgemm(t, 16, 0.5f);
  }
}

TEST(Gemm, DeterministicAndSameInsideAParallelRegion) {
  // Attention calls sgemm per head inside an OpenMP loop: each call then
  // runs on its own thread, and must compute the same product.
  const int64_t M = 96, N = 80, K = 200, heads = 6;
  Vec a = randomVec(size_t(heads * M * K), 4), b = randomVec(size_t(K * N), 5);
  Vec outside(size_t(heads * M * N)), again(outside.size()),
      inside(outside.size());
  for (int64_t h = 0; h < heads; ++h)
    sgemm(false, false, M, N, K, 1.0f, a.data() + h * M * K, K, b.data(), N,
          0.0f, outside.data() + h * M * N, N);
  for (int64_t h = 0; h < heads; ++h)
    sgemm(false, false, M, N, K, 1.0f, a.data() + h * M * K, K, b.data(), N,
          0.0f, again.data() + h * M * N, N);
  EXPECT_EQ(std::memcmp(outside.data(), again.data(), outside.size() * 4), 0)
      << "two identical calls differ";
#pragma omp parallel for
  for (int64_t h = 0; h < heads; ++h)
    sgemm(false, false, M, N, K, 1.0f, a.data() + h * M * K, K, b.data(), N,
          0.0f, inside.data() + h * M * N, N);
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<double> want =
        naiveMatmul(a.data() + h * M * K, b.data(), M, K, N, false, false);
    Vec got(inside.begin() + h * M * N, inside.begin() + (h + 1) * M * N);
    expectNear(got, want, 2e-5);
  }
}

TEST(Gemm, NamesItsLibraryAndIsa) {
  std::string lib = shardc::runtime::cpu::gemmLibrary();
  EXPECT_EQ(lib.rfind("oneDNN ", 0), 0u) << lib;
  EXPECT_NE(lib.find('('), std::string::npos) << lib;
  EXPECT_EQ(lib.find("cpu_isa_"), std::string::npos) << lib;
}

/// A line of /proc/self/status in bytes ("VmHWM", "VmRSS").
int64_t statusBytes(const char *key) {
  FILE *f = std::fopen("/proc/self/status", "r");
  char line[256];
  int64_t kib = -1;
  size_t n = std::strlen(key);
  while (f && std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, key, n) == 0 && line[n] == ':')
      kib = std::atoll(line + n + 1);
  if (f)
    std::fclose(f);
  return kib * 1024;
}

TEST(Gemm, AllocatesLittleAndOnlyOncePerShape) {
  // The peak resident set reset to the current one (Linux's clear_refs 5),
  // then sgemm at shapes of oneDNN's largest blockings, in every transpose,
  // three times each: the primitives and scratchpads of the first calls
  // are all that stays (dnnl_sgemm allocated up to 18 MiB a thread per
  // call, and glibc kept 64 MiB of them here), and later calls add nothing.
  FILE *reset = std::fopen("/proc/self/clear_refs", "w");
  if (!reset || std::fputs("5", reset) < 0 || std::fclose(reset) != 0)
    GTEST_SKIP() << "cannot reset the peak resident set here";
  const int64_t M = 256, K = 1024, maxN = 16384;
  Vec a = randomVec(size_t(M * K), 12), b = randomVec(size_t(K * maxN), 13),
      c(size_t(M * maxN));
  auto calls = [&] {
    for (int64_t N : {int64_t(8192), maxN, int64_t(1000)})
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          sgemm(ta, tb, M, N, K, 1.0f, a.data(), ta ? M : K, b.data(),
                tb ? K : N, 0.0f, c.data(), N);
  };
  int64_t before = statusBytes("VmRSS");
  calls();
  int64_t first = statusBytes("VmHWM") - before;
  calls();
  calls();
  int64_t again = statusBytes("VmHWM") - before - first;
  EXPECT_LE(first, int64_t(8) << 20) << "the first calls kept too much";
  EXPECT_LE(again, int64_t(256) << 10) << "calls of known shapes allocated";
  std::printf("first calls kept %lld KiB, later calls %lld KiB\n",
              (long long)(first >> 10), (long long)(again >> 10));
}

double geluTanh(double v) {
  return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}
double geluTanhGrad(double v) {
  double t = std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
  return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * 0.7978845608028654 *
                               (1.0 + 3.0 * 0.044715 * v * v);
}

/// linear(x, w) + bias in double: x [M,K], w [N,K] or [K,N] (inOut).
std::vector<double> naiveLinear(const Vec &x, const Vec &w, const Vec *bias,
                                int64_t M, int64_t K, int64_t N, bool inOut) {
  std::vector<double> y = naiveMatmul(x.data(), w.data(), M, K, N, false, !inOut);
  if (bias)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        y[size_t(m * N + n)] += (*bias)[size_t(n)];
  return y;
}

TEST(Gemm, LinearGeluEpilogueOddSizes) {
  for (bool inOut : {false, true}) {
    const int64_t M = 37, K = 129, N = 19;
    Vec x = randomVec(M * K, 6, 0.2f), w = randomVec(K * N, 7, 0.2f),
        bv = randomVec(N, 8), pre(M * N), y(M * N);
    std::vector<void *> b = bufs(x, w, bv, pre, y);
    namespace L = A::linear_gelu;
    SHARDC_LAUNCH(linear_gelu, &ctx, b,
                  packInts(Id::linear_gelu, {{L::M, M},
                                             {L::K, K},
                                             {L::N, N},
                                             {L::in_out, inOut},
                                             {L::has_bias, 1}}),
                  nullptr, A::kComputeStream);
    std::vector<double> want = naiveLinear(x, w, &bv, M, K, N, inOut), act;
    expectNear(pre, want, 2e-5);
    for (double v : want)
      act.push_back(geluTanh(v));
    expectNear(y, act, 2e-5);
  }
}

TEST(Gemm, LinearDgeluEpilogueWithBiasGradient) {
  for (bool inOut : {false, true}) {
    const int64_t M = 41, K = 23, N = 65;
    Vec dy = randomVec(M * K, 9), w = randomVec(K * N, 10, 0.3f),
        pre = randomVec(M * N, 11), dx(M * N), db(N);
    std::vector<void *> b = bufs(dy, w, pre, dx, db);
    namespace L = A::linear_dgelu;
    SHARDC_LAUNCH(linear_dgelu, &ctx, b,
                  packInts(Id::linear_dgelu, {{L::M, M},
                                              {L::K, K},
                                              {L::N, N},
                                              {L::in_out, inOut},
                                              {L::has_bias, 1}}),
                  nullptr, A::kComputeStream);
    std::vector<double> want = naiveLinear(dy, w, nullptr, M, K, N, inOut);
    std::vector<double> sums(size_t(N), 0.0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double &v = want[size_t(m * N + n)];
        v *= geluTanhGrad(pre[size_t(m * N + n)]);
        sums[size_t(n)] += v;
      }
    expectNear(dx, want, 2e-5);
    expectNear(db, sums, 1e-4);
  }
}

} // namespace

namespace {

/// gemmBf16 in every transpose, over a split reduction, with beta: its
/// products of bf16 operands are exact in f32, so it must equal the
/// double-precision product of the same (bf16) values to f32 summation
/// error, whatever instructions the cores use.
TEST(GemmBf16, EqualsTheProductOfItsBf16Values) {
  using shardc::runtime::bf16ToFloat;
  using shardc::runtime::floatToBf16;
  for (const Case &t : {Case{false, false, 7, 9, 33}, Case{true, false, 5, 8, 17},
                        Case{false, true, 16, 3, 40}, Case{true, true, 4, 6, 9000}}) {
    int64_t aRows = t.ta ? t.K : t.M, aCols = t.ta ? t.M : t.K;
    int64_t bRows = t.tb ? t.N : t.K, bCols = t.tb ? t.K : t.N;
    Vec a = randomVec(size_t(aRows * aCols), 4), b = randomVec(size_t(bRows * bCols), 5);
    std::vector<uint16_t> ah(a.size()), bh(b.size());
    for (size_t k = 0; k < a.size(); ++k)
      a[k] = bf16ToFloat(ah[k] = floatToBf16(a[k]));
    for (size_t k = 0; k < b.size(); ++k)
      b[k] = bf16ToFloat(bh[k] = floatToBf16(b[k]));
    std::vector<double> want =
        naiveMatmul(a.data(), b.data(), t.M, t.K, t.N, t.ta, t.tb);
    Vec c = randomVec(size_t(t.M * t.N), 6), c0 = c;
    shardc::runtime::cpu::gemmBf16(t.ta, t.tb, t.M, t.N, t.K, 1.0f, ah.data(),
                                   aCols, bh.data(), bCols, 0.5f, c.data(), t.N);
    for (size_t k = 0; k < c.size(); ++k)
      ASSERT_NEAR(c[k], want[k] + 0.5 * c0[k], 1e-5 * (1.0 + std::sqrt(double(t.K))))
          << "at " << k << " of " << t.M << "x" << t.N << "x" << t.K;
  }
}

} // namespace
