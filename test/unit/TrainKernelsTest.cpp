//===- TrainKernelsTest.cpp - training kernels against naive references ---===//
//
// Backward kernels are also checked against finite differences through the
// compiler (GradCheckTest); here the reductions and the optimizer updates
// are compared with direct transcriptions of their definitions.
//
//===----------------------------------------------------------------------===//
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

TEST(TrainKernels, MatmulTransposes) {
  const int64_t M = 5, K = 7, N = 3;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Vec a = randomVec(M * K, 1), b = randomVec(K * N, 2), y(M * N);
      std::vector<void *> bs = bufs(a, b, y);
      namespace Mm = A::matmul;
      std::vector<int64_t> ints = packInts(Id::matmul, {{Mm::M, M},
                                                        {Mm::K, K},
                                                        {Mm::N, N},
                                                        {Mm::trans_a, ta},
                                                        {Mm::trans_b, tb}});
      SHARDC_LAUNCH(matmul, nullptr, bs, ints, nullptr, A::kComputeStream);
      expectNear(y, naiveMatmul(a.data(), b.data(), M, K, N, ta, tb));
    }
}

// matmul_bgrad is matmul then sum_to, bit for bit (the fusion changes no
// number on the CPU), and its db is the naive column sum of the summed
// operand: side 1 sums b[K, N] (dw = x^T dy, w stored [in, out]), side 0
// sums a[K, M] (dw = dy^T x, w stored [out, in]).
TEST(TrainKernels, MatmulBgradIsMatmulThenSumTo) {
  const int64_t M = 6, K = 37, N = 5;
  for (int64_t side : {0, 1}) {
    SCOPED_TRACE("side " + std::to_string(side));
    Vec a = randomVec(K * M, 40), b = randomVec(K * N, 41), y(M * N),
        db(side ? N : M), y2(M * N), db2(side ? N : M);
    namespace Mb = A::matmul_bgrad;
    std::vector<void *> fused = bufs(a, b, y, db);
    SHARDC_LAUNCH(matmul_bgrad, nullptr, fused,
                  packInts(Id::matmul_bgrad,
                           {{Mb::M, M}, {Mb::K, K}, {Mb::N, N},
                            {Mb::trans_a, 1}, {Mb::trans_b, 0},
                            {Mb::y_f32, 0}, {Mb::side, side}}),
                  nullptr, A::kComputeStream);
    namespace Mm = A::matmul;
    std::vector<void *> mm = bufs(a, b, y2);
    SHARDC_LAUNCH(matmul, nullptr, mm,
                  packInts(Id::matmul, {{Mm::M, M}, {Mm::K, K}, {Mm::N, N},
                                        {Mm::trans_a, 1}, {Mm::trans_b, 0},
                                        {Mm::y_f32, 0}}),
                  nullptr, A::kComputeStream);
    int64_t count = side ? N : M;
    Vec &x = side ? b : a;
    std::vector<void *> st = bufs(x, db2);
    SHARDC_LAUNCH(sum_to, nullptr, st,
                  packInts(Id::sum_to, {{A::sum_to::R, 2}, {A::sum_to::out_n, count}},
                           {K, count, 0, 1}),
                  nullptr, A::kComputeStream);
    EXPECT_EQ(0, std::memcmp(y.data(), y2.data(), y.size() * 4));
    EXPECT_EQ(0, std::memcmp(db.data(), db2.data(), db.size() * 4));
    std::vector<double> want(size_t(count), 0.0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < count; ++c)
        want[size_t(c)] += x[size_t(k * count + c)];
    expectNear(db, want);
  }
}

TEST(TrainKernels, SumToReducesBroadcastDims) {
  // [2, 3, 4] -> [3, 1]: sum over dims 0 and 2.
  Vec x = randomVec(24, 3), y(3);
  std::vector<void *> bs = bufs(x, y);
  // dims[3] of x, then the element strides of y (0 where summed).
  std::vector<int64_t> ints =
      packInts(Id::sum_to, {{A::sum_to::R, 3}, {A::sum_to::out_n, 3}},
               {2, 3, 4, 0, 1, 0});
  SHARDC_LAUNCH(sum_to, nullptr, bs, ints, nullptr, A::kComputeStream);
  std::vector<double> want(3, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        want[j] += x[i * 12 + j * 4 + k];
  expectNear(y, want);
}

TEST(TrainKernels, AccumulateOverwritesThenAdds) {
  Vec acc = {1e30f, NAN, 3.0f}, g = {1.0f, 2.0f, 3.0f}, out(3);
  Vec ctl = {0.0f, 0.5f};
  std::vector<void *> bs = bufs(acc, g, ctl, out);
  std::vector<int64_t> ints = packInts(Id::accumulate, {{A::accumulate::n, 3}});
  SHARDC_LAUNCH(accumulate, nullptr, bs, ints, nullptr, A::kComputeStream);
  EXPECT_EQ(out, (Vec{0.5f, 1.0f, 1.5f})); // stale values never leak in
  ctl[0] = 1.0f;
  std::vector<void *> again = bufs(out, g, ctl, out);
  SHARDC_LAUNCH(accumulate, nullptr, again, ints, nullptr, A::kComputeStream);
  EXPECT_EQ(out, (Vec{1.0f, 2.0f, 3.0f}));
}

TEST(TrainKernels, SquaredNormAndClipCoef) {
  Vec x = randomVec(100, 4), s(1);
  std::vector<void *> bs = bufs(x, s);
  std::vector<int64_t> ints =
      packInts(Id::squared_norm, {{A::squared_norm::n, 100}});
  SHARDC_LAUNCH(squared_norm, nullptr, bs, ints, nullptr, A::kComputeStream);
  double want = 0;
  for (float v : x)
    want += double(v) * v;
  expectNear(s, {want});
  // torch.nn.utils.clip_grad_norm_: min(1, max / (norm + 1e-6)); 0 is off.
  for (float maxNorm : {0.0f, 1.0f, 1e6f}) {
    Vec m = {maxNorm}, c(1);
    std::vector<void *> cb = bufs(s, m, c);
    SHARDC_LAUNCH(clip_coef, nullptr, cb, packInts(Id::clip_coef, {}), nullptr,
                  0);
    double coef =
        maxNorm > 0 ? std::min(1.0, maxNorm / (std::sqrt(want) + 1e-6)) : 1.0;
    expectNear(c, {coef});
  }
}

TEST(TrainKernels, FusedCrossEntropyEqualsSeparateKernels) {
  const int64_t N = 6, V = 11;
  Vec logits = randomVec(N * V, 12, 3.0f), loss1(1), loss2(1), one = {1.0f};
  Vec g1(N * V), g2(N * V);
  std::vector<int32_t> t = {3, -100, 10, 0, 7, 7};
  namespace CE = A::cross_entropy;
  namespace CG = A::cross_entropy_grad;
  namespace CW = A::cross_entropy_with_grad;
  std::vector<void *> a = bufs(logits, t, loss1), b = bufs(logits, t, one, g1),
                      c = bufs(logits, t, loss2, g2);
  SHARDC_LAUNCH(cross_entropy, nullptr, a,
                packInts(Id::cross_entropy,
                         {{CE::N, N}, {CE::V, V}, {CE::ignore_index, -100}}),
                nullptr, A::kComputeStream);
  SHARDC_LAUNCH(cross_entropy_grad, nullptr, b,
                packInts(Id::cross_entropy_grad,
                         {{CG::N, N}, {CG::V, V}, {CG::ignore_index, -100}}),
                nullptr, A::kComputeStream);
  SHARDC_LAUNCH(cross_entropy_with_grad, nullptr, c,
                packInts(Id::cross_entropy_with_grad,
                         {{CW::N, N}, {CW::V, V}, {CW::ignore_index, -100}}),
                nullptr, A::kComputeStream);
  EXPECT_EQ(loss1, loss2);
  EXPECT_EQ(g1, g2);
  // In place (dlogits over logits, as convert-nn-to-rt lowers the loss
  // when nothing reads the logits after it): the same loss and gradient.
  Vec inPlace = logits, loss3(1);
  std::vector<void *> d = bufs(inPlace, t, loss3, inPlace);
  SHARDC_LAUNCH(cross_entropy_with_grad, nullptr, d,
                packInts(Id::cross_entropy_with_grad,
                         {{CW::N, N}, {CW::V, V}, {CW::ignore_index, -100}}),
                nullptr, A::kComputeStream);
  EXPECT_EQ(loss3, loss2);
  EXPECT_EQ(inPlace, g2);
}

/// The vocabulary-parallel loss (--tp): tp ranks each holding V columns of
/// [N, tp V] logits, their row statistics gathered, give each rank the loss
/// the whole-vocabulary kernels give on its tokens, and their gradients'
/// columns put together are the whole kernels' gradient of every rank's
/// loss. And vocab_part against its definition.
TEST(TrainKernels, VocabParallelLossEqualsWholeLoss) {
  const int64_t tp = 3, V = 7, W = tp * V, seq = 6, N = 2 * seq,
                ignore = -100;
  Vec logits = randomVec(N * W, 41, 3.0f);
  std::vector<int32_t> t(N);
  std::mt19937 gen(42);
  for (int32_t &v : t)
    v = int32_t(gen() % W);
  t[1] = int32_t(ignore);
  t[8] = int32_t(W - 1);
  auto owner = [&](int64_t n) { return (n % seq) / (seq / tp); };
  // Each rank's columns and statistics, gathered rank by rank.
  std::vector<Vec> parts(tp, Vec(N * V));
  Vec all(tp * N * 2);
  for (int64_t r = 0; r < tp; ++r) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = 0; v < V; ++v)
        parts[r][n * V + v] = logits[n * W + r * V + v];
    std::vector<int32_t> rank = {int32_t(r)};
    Vec stats(N * 2);
    std::vector<void *> b = bufs(parts[r], t, rank, stats);
    SHARDC_LAUNCH(vocab_ce_stats, nullptr, b,
                  packInts(Id::vocab_ce_stats,
                           {{A::vocab_ce_stats::N, N}, {A::vocab_ce_stats::V, V}}),
                  nullptr, A::kComputeStream);
    std::copy(stats.begin(), stats.end(), all.begin() + r * N * 2);
  }
  Vec dWhole(N * W), dloss = {0.7f};
  for (int64_t r = 0; r < tp; ++r) {
    SCOPED_TRACE("tp rank " + std::to_string(r));
    std::vector<int32_t> rank = {int32_t(r)};
    // The whole kernels on this rank's rows.
    Vec mine, ref(1), refGrad;
    std::vector<int32_t> mineT;
    for (int64_t n = 0; n < N; ++n)
      if (owner(n) == r) {
        mine.insert(mine.end(), logits.begin() + n * W,
                    logits.begin() + (n + 1) * W);
        mineT.push_back(t[n]);
      }
    int64_t M = int64_t(mineT.size());
    refGrad.resize(M * W);
    std::vector<void *> rb = bufs(mine, mineT, ref), gb = bufs(mine, mineT, dloss, refGrad);
    SHARDC_LAUNCH(cross_entropy, nullptr, rb,
                  packInts(Id::cross_entropy, {{A::cross_entropy::N, M},
                                               {A::cross_entropy::V, W},
                                               {A::cross_entropy::ignore_index, ignore}}),
                  nullptr, A::kComputeStream);
    SHARDC_LAUNCH(cross_entropy_grad, nullptr, gb,
                  packInts(Id::cross_entropy_grad,
                           {{A::cross_entropy_grad::N, M},
                            {A::cross_entropy_grad::V, W},
                            {A::cross_entropy_grad::ignore_index, ignore}}),
                  nullptr, A::kComputeStream);
    for (int64_t n = 0, m = 0; n < N; ++n)
      if (owner(n) == r) {
        for (int64_t v = 0; v < W; ++v)
          dWhole[n * W + v] = refGrad[m * W + v];
        ++m;
      }
    namespace K = A::vocab_ce;
    Vec loss(1);
    std::vector<void *> lb = bufs(t, all, rank, loss);
    SHARDC_LAUNCH(vocab_ce, nullptr, lb,
                  packInts(Id::vocab_ce, {{K::N, N}, {K::seq, seq}, {K::tp, tp},
                                          {K::ignore_index, ignore}}),
                  nullptr, A::kComputeStream);
    expectNear(loss, {double(ref[0])}, 1e-6);
  }
  // Every rank's columns of the gradient, each seeded with dloss.
  for (int64_t r = 0; r < tp; ++r) {
    SCOPED_TRACE("tp rank " + std::to_string(r));
    std::vector<int32_t> rank = {int32_t(r)};
    namespace K = A::vocab_ce_grad;
    Vec grad(N * V);
    std::vector<void *> b = bufs(parts[r], t, all, rank, dloss, grad);
    SHARDC_LAUNCH(vocab_ce_grad, nullptr, b,
                  packInts(Id::vocab_ce_grad,
                           {{K::N, N}, {K::V, V}, {K::seq, seq}, {K::tp, tp},
                            {K::ignore_index, ignore}}),
                  nullptr, A::kComputeStream);
    std::vector<double> want;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = 0; v < V; ++v)
        want.push_back(dWhole[n * W + r * V + v]);
    expectNear(grad, want, 1e-6);
  }
  // vocab_part: rank 1 of 25-row parts.
  std::vector<int32_t> ids = {0, 24, 25, 26, 49, 50, 74, 3}, rank = {1},
                       local(ids.size());
  Vec mask(ids.size());
  std::vector<void *> b = bufs(ids, rank, local, mask);
  SHARDC_LAUNCH(vocab_part, nullptr, b,
                packInts(Id::vocab_part, {{A::vocab_part::N, int64_t(ids.size())},
                                          {A::vocab_part::rows, 25}}),
                nullptr, A::kComputeStream);
  EXPECT_EQ(local, (std::vector<int32_t>{0, 0, 0, 1, 24, 0, 0, 0}));
  EXPECT_EQ(mask, (Vec{0, 0, 1, 1, 1, 0, 0, 0}));
}

/// The LM head and its loss over row chunks against the four kernels it
/// replaces (linear, cross_entropy_with_grad, the dh linear and the dw
/// matmul), with chunks that do not divide the rows and an ignored target.
TEST(TrainKernels, LinearCrossEntropyEqualsUnchunked) {
  const int64_t N = 10, C = 6, V = 37;
  Vec h = randomVec(N * C, 50), w = randomVec(V * C, 51, 0.5f);
  std::vector<int32_t> t = {3, 36, -100, 0, 7, 7, 20, 1, 35, 2};
  // Unchunked.
  Vec logits(N * V), loss1(1), dh1(N * C), dw1(V * C);
  std::vector<void *> l = bufs(h, w, logits), ce = bufs(logits, t, loss1, logits),
                      g1 = bufs(logits, w, dh1), g2 = bufs(logits, h, dw1);
  namespace Li = A::linear;
  namespace Mm = A::matmul;
  SHARDC_LAUNCH(linear, nullptr, l,
                packInts(Id::linear, {{Li::M, N}, {Li::K, C}, {Li::N, V},
                                      {Li::in_out, 0}, {Li::has_bias, 0}}),
                nullptr, A::kComputeStream);
  SHARDC_LAUNCH(cross_entropy_with_grad, nullptr, ce,
                packInts(Id::cross_entropy_with_grad,
                         {{A::cross_entropy_with_grad::N, N},
                          {A::cross_entropy_with_grad::V, V},
                          {A::cross_entropy_with_grad::ignore_index, -100}}),
                nullptr, A::kComputeStream);
  SHARDC_LAUNCH(linear, nullptr, g1,
                packInts(Id::linear, {{Li::M, N}, {Li::K, V}, {Li::N, C},
                                      {Li::in_out, 1}, {Li::has_bias, 0}}),
                nullptr, A::kComputeStream);
  SHARDC_LAUNCH(matmul, nullptr, g2,
                packInts(Id::matmul, {{Mm::M, V}, {Mm::K, N}, {Mm::N, C},
                                      {Mm::trans_a, 1}, {Mm::trans_b, 0}}),
                nullptr, A::kComputeStream);
  for (int64_t R : {3, 4, 10}) {
    Vec loss2(1), dh2(N * C, NAN), dw2(V * C, NAN), scratch(R * A::lossHeadRowStride(V));
    std::vector<void *> f = bufs(h, w, t, loss2, dh2, dw2, scratch);
    namespace LC = A::linear_cross_entropy;
    SHARDC_LAUNCH(linear_cross_entropy, nullptr, f,
                  packInts(Id::linear_cross_entropy,
                           {{LC::N, N}, {LC::C, C}, {LC::V, V}, {LC::R, R},
                            {LC::ignore_index, -100}}),
                  nullptr, A::kComputeStream);
    SCOPED_TRACE("R = " + std::to_string(R));
    // The loss sums the same row losses in the same order.
    EXPECT_EQ(loss2, loss1);
    expectNear(dh2, std::vector<double>(dh1.begin(), dh1.end()), 1e-6);
    expectNear(dw2, std::vector<double>(dw1.begin(), dw1.end()), 1e-6);
  }
}

/// torch.optim.AdamW's update, transcribed in double.
TEST(TrainKernels, AdamWMatchesTorchAlgorithm) {
  const int64_t n = 50;
  Vec p = randomVec(n, 5), g = randomVec(n, 6), m = randomVec(n, 7, 0.1f),
      v(n);
  for (int64_t k = 0; k < n; ++k)
    v[k] = std::fabs(randomVec(n, 8, 0.01f)[k]);
  double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, coef = 0.5;
  for (int64_t is1D : {0, 1}) {
    for (float step : {1.0f, 7.0f}) {
      Vec h = packHyper({{A::kLr, float(lr)},
                         {A::kBeta1, float(b1)},
                         {A::kBeta2, float(b2)},
                         {A::kEps, float(eps)},
                         {A::kWeightDecay, float(wd)},
                         {A::kWeightDecay1D, 0.0f},
                         {A::kStep, step}});
      Vec c = {float(coef)}, p2(n), m2(n), v2(n);
      std::vector<void *> bs = bufs(p, g, m, v, h, c, p2, m2, v2);
      std::vector<int64_t> ints =
          packInts(Id::adamw, {{A::adamw::n, n}, {A::adamw::is_1d, is1D}});
      SHARDC_LAUNCH(adamw, nullptr, bs, ints, nullptr, A::kComputeStream);
      std::vector<double> wp, wm, wv;
      double w = is1D ? 0.0 : wd;
      for (int64_t k = 0; k < n; ++k) {
        double gk = double(g[k]) * coef;
        double pk = p[k] * (1 - lr * w);
        double mk = b1 * m[k] + (1 - b1) * gk;
        double vk = b2 * v[k] + (1 - b2) * gk * gk;
        double denom = std::sqrt(vk) / std::sqrt(1 - std::pow(b2, step)) + eps;
        wp.push_back(pk - lr / (1 - std::pow(b1, step)) * mk / denom);
        wm.push_back(mk);
        wv.push_back(vk);
      }
      expectNear(p2, wp, 1e-5);
      expectNear(m2, wm, 1e-5);
      expectNear(v2, wv, 1e-5);
    }
  }
}

/// torch.optim.SGD with momentum and (coupled) weight decay.
TEST(TrainKernels, SGDMomentumMatchesTorchAlgorithm) {
  const int64_t n = 20;
  Vec p = randomVec(n, 9), g = randomVec(n, 10), buf = randomVec(n, 11);
  double lr = 0.1, mom = 0.9, wd = 0.01;
  for (float step : {1.0f, 2.0f}) {
    Vec h = packHyper({{A::kLr, float(lr)},
                       {A::kBeta1, float(mom)}, // momentum
                       {A::kBeta2, 0.0f},
                       {A::kEps, 0.0f},
                       {A::kWeightDecay, float(wd)},
                       {A::kWeightDecay1D, float(wd)},
                       {A::kStep, step}});
    Vec c = {1.0f}, p2(n), b2(n);
    std::vector<void *> bs = bufs(p, g, buf, h, c, p2, b2);
    std::vector<int64_t> ints =
        packInts(Id::sgd, {{A::sgd::n, n}, {A::sgd::is_1d, 0}});
    SHARDC_LAUNCH(sgd, nullptr, bs, ints, nullptr, A::kComputeStream);
    std::vector<double> wp, wb;
    for (int64_t k = 0; k < n; ++k) {
      double d = double(g[k]) + wd * p[k];
      double b = step == 1.0f ? d : mom * buf[k] + d; // torch: buf = d at first
      wb.push_back(b);
      wp.push_back(p[k] - lr * b);
    }
    expectNear(p2, wp);
    expectNear(b2, wb);
  }
}


// The threaded and vectorized paths of the CPU kernels (taken from
// runtime/cpu/kernel_util.h's kParallelMin elements on) against naive
// references, at sizes above that threshold.
namespace parallel {

constexpr int64_t P = 64, Q = 48, R = 32; // x [P, Q, R]: 98304 elements

TEST(ParallelKernels, SumToLeadingAndGeneral) {
  Vec x = randomVec(P * Q * R, 31), lead(Q * R), mid(Q);
  // [P, Q, R] -> [Q, R] (a bias gradient: column sums) and -> [Q, 1].
  std::vector<void *> b1 = bufs(x, lead), b2 = bufs(x, mid);
  SHARDC_LAUNCH(sum_to, nullptr, b1,
                packInts(Id::sum_to, {{A::sum_to::R, 3}, {A::sum_to::out_n, Q * R}},
                         {P, Q, R, 0, R, 1}),
                nullptr, A::kComputeStream);
  SHARDC_LAUNCH(sum_to, nullptr, b2,
                packInts(Id::sum_to, {{A::sum_to::R, 3}, {A::sum_to::out_n, Q}},
                         {P, Q, R, 0, 1, 0}),
                nullptr, A::kComputeStream);
  std::vector<double> wantLead(Q * R, 0.0), wantMid(Q, 0.0);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t q = 0; q < Q; ++q)
      for (int64_t r = 0; r < R; ++r) {
        wantLead[q * R + r] += x[(p * Q + q) * R + r];
        wantMid[q] += x[(p * Q + q) * R + r];
      }
  expectNear(lead, wantLead);
  expectNear(mid, wantMid, 1e-4);
}

TEST(ParallelKernels, AddBroadcastsAndContiguous) {
  Vec a = randomVec(P * Q * R, 32), c = randomVec(P * Q * R, 33),
      bias = randomVec(R, 34), col = randomVec(Q, 35), y(P * Q * R);
  struct Case {
    Vec *rhs;
    std::vector<int64_t> rstr;
  } cases[] = {{&c, {Q * R, R, 1}}, {&bias, {0, 0, 1}}, {&col, {0, 1, 0}}};
  for (const Case &cs : cases) {
    std::vector<void *> b = bufs(a, *cs.rhs, y);
    std::vector<int64_t> tail = {P, Q, R, Q * R, R, 1};
    tail.insert(tail.end(), cs.rstr.begin(), cs.rstr.end());
    SHARDC_LAUNCH(add, nullptr, b, packInts(Id::add, {{A::add::R, 3}}, tail),
                  nullptr, A::kComputeStream);
    std::vector<double> want;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q)
        for (int64_t r = 0; r < R; ++r)
          want.push_back(a[(p * Q + q) * R + r] + // the f32 sum
                         (*cs.rhs)[p * cs.rstr[0] + q * cs.rstr[1] + r * cs.rstr[2]]);
    expectNear(y, want, 0);
  }
}

TEST(ParallelKernels, TransposeKeepingRows) {
  // [B, T, H, D] -> [B, H, T, D], as attention's heads.
  const int64_t B = 4, T = 64, H = 6, D = 64;
  Vec x = randomVec(B * T * H * D, 36), y(x.size());
  std::vector<void *> b = bufs(x, y);
  SHARDC_LAUNCH(transpose, nullptr, b,
                packInts(Id::transpose, {{A::transpose::R, 4}},
                         {B, T, H, D, 0, 2, 1, 3}),
                nullptr, A::kComputeStream);
  std::vector<double> want;
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d)
          want.push_back(x[((bi * T + t) * H + h) * D + d]);
  expectNear(y, want, 0);
}

namespace {

/// The elements of `v` in `dtype`: f32, or bf16 bits.
std::vector<char> typedBuffer(const Vec &v, int64_t dtype) {
  bool bf16 = dtype == A::kBF16;
  std::vector<char> out(v.size() * (bf16 ? 2 : 4));
  for (size_t k = 0; k < v.size(); ++k) {
    if (bf16) {
      uint16_t h = shardc::runtime::floatToBf16(v[k]);
      std::memcpy(out.data() + 2 * k, &h, 2);
    } else {
      std::memcpy(out.data() + 4 * k, &v[k], 4);
    }
  }
  return out;
}

/// The layer or RMS norm gradient of x, w, dy in `dtype` (f32 or bf16 bits
/// in a float-sized slot each, for one code path) with the residual
/// gradient r: fused (add_dr, dr aliasing the output when `inPlace`) or as
/// the two kernels the fusion replaces; dx as f32 values.
std::vector<float> normGradPlusResidual(bool layer, int64_t dtype, bool fused,
                                        bool inPlace, int64_t M, int64_t C,
                                        const Vec &x, const Vec &w,
                                        const Vec &dy, const Vec &r) {
  bool bf16 = dtype == A::kBF16;
  auto typed = [&](const Vec &v) { return typedBuffer(v, dtype); };
  auto values = [&](const std::vector<char> &v, int64_t n) {
    std::vector<float> out(n);
    for (int64_t k = 0; k < n; ++k) {
      if (bf16) {
        uint16_t h;
        std::memcpy(&h, v.data() + 2 * k, 2);
        out[k] = shardc::runtime::bf16ToFloat(h);
      } else {
        std::memcpy(&out[k], v.data() + 4 * k, 4);
      }
    }
    return out;
  };
  std::vector<char> tx = typed(x), tw = typed(w), tdy = typed(dy),
                    tr = typed(r), dx = typed(Vec(M * C)), dw = typed(Vec(C)),
                    db = typed(Vec(C)), sum = typed(Vec(M * C));
  std::vector<void *> b = {tx.data(), tw.data(), tdy.data(), dx.data(),
                           dw.data()};
  if (layer)
    b.push_back(db.data());
  if (fused) {
    if (inPlace)
      b[3] = tr.data();
    b.push_back(tr.data());
  }
  int64_t addDr = fused ? 1 : 0;
  if (layer) {
    namespace K = A::layer_norm_grad;
    SHARDC_LAUNCH(layer_norm_grad, nullptr, b,
                  packInts(Id::layer_norm_grad, {{K::M, M}, {K::C, C},
                                                 {K::dtype, dtype},
                                                 {K::add_dr, addDr}}),
                  packFloats(Id::layer_norm_grad, {{K::f::eps, 1e-5}}),
                  A::kComputeStream);
  } else {
    namespace K = A::rms_norm_grad;
    SHARDC_LAUNCH(rms_norm_grad, nullptr, b,
                  packInts(Id::rms_norm_grad, {{K::M, M}, {K::C, C},
                                               {K::dtype, dtype},
                                               {K::add_dr, addDr}}),
                  packFloats(Id::rms_norm_grad, {{K::f::eps, 1e-6}}),
                  A::kComputeStream);
  }
  if (fused)
    return values(inPlace ? tr : dx, M * C);
  namespace Ad = A::add;
  std::vector<void *> ab = {tr.data(), dx.data(), sum.data()};
  SHARDC_LAUNCH(add, nullptr, ab,
                packInts(Id::add, {{Ad::R, 2}, {Ad::dtype, dtype}},
                         {M, C, C, 1, C, 1}),
                nullptr, A::kComputeStream);
  return values(sum, M * C);
}

} // namespace

// The norm gradients with the residual gradient's add fused in
// (rt-fuse-norm-grad-add): the same bits as the norm gradient and the add,
// on f32 and bf16 (the norm's gradient rounded to bf16 before the add, as
// the unfused kernel wrote it), also with dr the output itself.
TEST(Kernels, NormGradAddsResidualAsTheAdd) {
  const int64_t M = 70, C = 96;
  Vec x = randomVec(M * C, 51, 2.0f), w = randomVec(C, 52),
      dy = randomVec(M * C, 53), r = randomVec(M * C, 54);
  for (bool layer : {true, false})
    for (int64_t dtype : {A::kF32, A::kBF16}) {
      SCOPED_TRACE(std::string(layer ? "layer" : "rms") +
                   (dtype == A::kBF16 ? " bf16" : " f32"));
      std::vector<float> want = normGradPlusResidual(
          layer, dtype, false, false, M, C, x, w, dy, r);
      for (bool inPlace : {false, true}) {
        std::vector<float> got = normGradPlusResidual(layer, dtype, true,
                                                      inPlace, M, C, x, w, dy, r);
        ASSERT_EQ(got.size(), want.size());
        for (size_t k = 0; k < want.size(); ++k)
          ASSERT_EQ(got[k], want[k]) << "element " << k;
      }
    }
}

/// SwiGLU forward and backward over n elements in `dtype`: as the fused
/// kernels (swiglu, swiglu_grad) or as the kernels convert-nn-to-rt emits
/// (silu, mul; mul, silu_grad, mul); the bytes of y, dg and du.
std::vector<std::vector<char>> swigluRun(bool fused, int64_t dtype, int64_t n,
                                         const Vec &g, const Vec &u,
                                         const Vec &dy) {
  std::vector<char> tg = typedBuffer(g, dtype), tu = typedBuffer(u, dtype),
                    tdy = typedBuffer(dy, dtype), y = typedBuffer(Vec(n), dtype),
                    dg = typedBuffer(Vec(n), dtype),
                    du = typedBuffer(Vec(n), dtype),
                    s = typedBuffer(Vec(n), dtype),
                    t = typedBuffer(Vec(n), dtype);
  if (fused) {
    std::vector<void *> f = {tg.data(), tu.data(), y.data()};
    SHARDC_LAUNCH(swiglu, nullptr, f,
                  packInts(Id::swiglu, {{A::swiglu::n, n},
                                        {A::swiglu::dtype, dtype},
                                        {A::swiglu::amax, 0}}),
                  nullptr, A::kComputeStream);
    std::vector<void *> bk = {tg.data(), tu.data(), tdy.data(), dg.data(),
                              du.data()};
    SHARDC_LAUNCH(swiglu_grad, nullptr, bk,
                  packInts(Id::swiglu_grad, {{A::swiglu_grad::n, n},
                                             {A::swiglu_grad::dtype, dtype},
                                             {A::swiglu_grad::amax, 0}}),
                  nullptr, A::kComputeStream);
    return {y, dg, du};
  }
  std::vector<int64_t> silu =
      packInts(Id::silu, {{A::silu::n, n}, {A::silu::dtype, dtype}});
  // A dense mul of [n]: R 1, the dtype, dims and both strides.
  std::vector<int64_t> mul = {1, dtype, n, 1, 1};
  auto run = [](std::vector<void *> b, const std::vector<int64_t> &ints,
                Id id) {
    if (id == Id::silu)
      SHARDC_LAUNCH(silu, nullptr, b, ints, nullptr, A::kComputeStream);
    else if (id == Id::mul)
      SHARDC_LAUNCH(mul, nullptr, b, ints, nullptr, A::kComputeStream);
    else
      SHARDC_LAUNCH(silu_grad, nullptr, b, ints, nullptr, A::kComputeStream);
  };
  run({tg.data(), s.data()}, silu, Id::silu);
  run({s.data(), tu.data(), y.data()}, mul, Id::mul);
  run({tdy.data(), tu.data(), t.data()}, mul, Id::mul);
  run({tg.data(), t.data(), dg.data()}, silu, Id::silu_grad);
  run({tdy.data(), s.data(), du.data()}, mul, Id::mul);
  return {y, dg, du};
}

// The fused SwiGLU kernels (rt-fuse-swiglu) write the unfused kernels'
// bytes, on f32 and bf16 (dy u and silu(g) rounded to bf16 where the mul
// and silu kernels wrote them); on f32 they are the naive double formulas.
TEST(TrainKernels, SwigluIsItsUnfusedKernels) {
  const int64_t n = 1003;
  Vec g = randomVec(n, 61, 4.0f), u = randomVec(n, 62), dy = randomVec(n, 63);
  for (int64_t dtype : {A::kF32, A::kBF16}) {
    SCOPED_TRACE(dtype == A::kBF16 ? "bf16" : "f32");
    std::vector<std::vector<char>> want = swigluRun(false, dtype, n, g, u, dy),
                                   got = swigluRun(true, dtype, n, g, u, dy);
    for (int o = 0; o < 3; ++o)
      ASSERT_EQ(got[o], want[o]) << "output " << o;
    if (dtype != A::kF32)
      continue;
    std::vector<double> y(n), dg(n), du(n);
    for (int64_t k = 0; k < n; ++k) {
      double sig = 1.0 / (1.0 + std::exp(-double(g[k])));
      y[k] = g[k] * sig * u[k];
      dg[k] = double(dy[k]) * u[k] * sig * (1.0 + g[k] * (1.0 - sig));
      du[k] = double(dy[k]) * g[k] * sig;
    }
    auto floatsOf = [&](const std::vector<char> &b) {
      Vec v(n);
      std::memcpy(v.data(), b.data(), size_t(n) * 4);
      return v;
    };
    expectNear(floatsOf(got[0]), y, 1e-5);
    expectNear(floatsOf(got[1]), dg, 1e-5);
    expectNear(floatsOf(got[2]), du, 1e-5);
  }
}

/// max |v| over the elements of a typed buffer (f32, or bf16 bits), by a
/// plain loop: the amax a fused producer must write.
float naiveAmax(const std::vector<char> &v, int64_t dtype) {
  float m = 0.0f;
  bool bf16 = dtype == A::kBF16;
  for (size_t k = 0; k < v.size() / (bf16 ? 2 : 4); ++k) {
    float x;
    if (bf16) {
      uint16_t h;
      std::memcpy(&h, v.data() + 2 * k, 2);
      x = shardc::runtime::bf16ToFloat(h);
    } else {
      std::memcpy(&x, v.data() + 4 * k, 4);
    }
    m = std::max(m, std::fabs(x));
  }
  return m;
}

// rt-fuse-amax: add_rms_norm, swiglu, swiglu_grad and rotary with `amax`
// (rms_norm_grad with add_dr 2 rather than 1) write the bytes they write
// without it, and the max |y| of each output as stored (a plain loop over
// those bytes), on f32 and bf16.
TEST(TrainKernels, FusedAmaxIsTheOutputsMax) {
  const int64_t M = 8, C = 144, n = M * C;
  Vec g = randomVec(n, 71, 4.0f), u = randomVec(n, 72), dy = randomVec(n, 73),
      w = randomVec(C, 74);
  for (int64_t dtype : {A::kF32, A::kBF16}) {
    SCOPED_TRACE(dtype == A::kBF16 ? "bf16" : "f32");
    auto typed = [&](const Vec &v) { return typedBuffer(v, dtype); };
    std::vector<char> tg = typed(g), tu = typed(u), tdy = typed(dy),
                      tw = typed(w);
    std::vector<std::vector<char>> unfused; // the outputs without amax
    for (int64_t amax : {0, 1}) {
      std::vector<char> y = typed(Vec(n)), dg = typed(Vec(n)),
                        du = typed(Vec(n)), s = typed(Vec(n)),
                        yn = typed(Vec(n));
      float a[6] = {-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f};
      // The amax buffers only with amax, as kernels.def counts them.
      auto with = [&](std::vector<void *> b, std::vector<float *> extra) {
        if (amax)
          b.insert(b.end(), extra.begin(), extra.end());
        return b;
      };
      std::vector<void *> f = with({tg.data(), tu.data(), y.data()}, {&a[0]});
      SHARDC_LAUNCH(swiglu, nullptr, f,
                    packInts(Id::swiglu, {{A::swiglu::n, n},
                                          {A::swiglu::dtype, dtype},
                                          {A::swiglu::amax, amax}}),
                    nullptr, A::kComputeStream);
      std::vector<void *> bk = with(
          {tg.data(), tu.data(), tdy.data(), dg.data(), du.data()},
          {&a[1], &a[2]});
      SHARDC_LAUNCH(swiglu_grad, nullptr, bk,
                    packInts(Id::swiglu_grad, {{A::swiglu_grad::n, n},
                                               {A::swiglu_grad::dtype, dtype},
                                               {A::swiglu_grad::amax, amax}}),
                    nullptr, A::kComputeStream);
      std::vector<void *> nb = with(
          {tg.data(), tdy.data(), tw.data(), s.data(), yn.data()}, {&a[3]});
      namespace AR = A::add_rms_norm;
      SHARDC_LAUNCH(add_rms_norm, nullptr, nb,
                    packInts(Id::add_rms_norm, {{AR::M, M},
                                                {AR::C, C},
                                                {AR::dtype, dtype},
                                                {AR::amax, amax}}),
                    packFloats(Id::add_rms_norm, {{AR::f::eps, 1e-5}}),
                    A::kComputeStream);
      std::vector<char> ry = typed(Vec(n)), dx = typed(Vec(n)),
                        dw = typed(Vec(C));
      std::vector<void *> rb = with({tg.data(), ry.data()}, {&a[4]});
      namespace Ro = A::rotary;
      // [B 1, H 8, T 9, D 16]: n elements.
      SHARDC_LAUNCH(rotary, nullptr, rb,
                    packInts(Id::rotary, {{Ro::B, 1},
                                          {Ro::H, 8},
                                          {Ro::T, 9},
                                          {Ro::D, 16},
                                          {Ro::inverse, 1},
                                          {Ro::dtype, dtype},
                                          {Ro::layout, 0},
                                          {Ro::amax, amax}}),
                    packFloats(Id::rotary, {{Ro::f::theta, 10000.0}}),
                    A::kComputeStream);
      std::vector<void *> gb = {tg.data(), tw.data(), tdy.data(), dx.data(),
                                dw.data(), tu.data()};
      if (amax)
        gb.push_back(&a[5]);
      namespace RG = A::rms_norm_grad;
      SHARDC_LAUNCH(rms_norm_grad, nullptr, gb,
                    packInts(Id::rms_norm_grad, {{RG::M, M},
                                                 {RG::C, C},
                                                 {RG::dtype, dtype},
                                                 {RG::add_dr, 1 + amax}}),
                    packFloats(Id::rms_norm_grad, {{RG::f::eps, 1e-5}}),
                    A::kComputeStream);
      std::vector<std::vector<char>> outs = {y, dg, du, yn, ry, dx};
      if (!amax) {
        unfused = outs;
        for (float v : a)
          EXPECT_EQ(v, -1.0f) << "an amax written without amax";
        continue;
      }
      for (int o = 0; o < 6; ++o) {
        EXPECT_EQ(outs[o], unfused[o]) << "output " << o;
        EXPECT_EQ(a[o], naiveAmax(outs[o], dtype)) << "amax " << o;
        EXPECT_GT(a[o], 0.0f);
      }
    }
  }
}

TEST(ParallelKernels, LayerNormGradBlocks) {
  // 300 rows: blocks of 32 rows and a partial last one.
  const int64_t M = 300, C = 200;
  Vec x = randomVec(M * C, 37), w = randomVec(C, 38), dy = randomVec(M * C, 39),
      dx(M * C), dw(C), db(C);
  std::vector<void *> b = bufs(x, w, dy, dx, dw, db);
  namespace LG = A::layer_norm_grad;
  SHARDC_LAUNCH(layer_norm_grad, nullptr, b,
                packInts(Id::layer_norm_grad, {{LG::M, M}, {LG::C, C}}),
                packFloats(Id::layer_norm_grad, {{LG::f::eps, 1e-5}}),
                A::kComputeStream);
  std::vector<double> wantDx, wantDw(C, 0.0), wantDb(C, 0.0);
  for (int64_t m = 0; m < M; ++m) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c)
      mean += x[m * C + c] / double(C);
    for (int64_t c = 0; c < C; ++c)
      var += std::pow(x[m * C + c] - mean, 2) / double(C);
    double rstd = 1 / std::sqrt(var + 1e-5), sg = 0, sgx = 0;
    for (int64_t c = 0; c < C; ++c) {
      double xh = (x[m * C + c] - mean) * rstd, g = double(dy[m * C + c]) * w[c];
      sg += g / C;
      sgx += g * xh / C;
      wantDw[c] += dy[m * C + c] * xh;
      wantDb[c] += dy[m * C + c];
    }
    for (int64_t c = 0; c < C; ++c) {
      double xh = (x[m * C + c] - mean) * rstd, g = double(dy[m * C + c]) * w[c];
      wantDx.push_back(rstd * (g - sg - xh * sgx));
    }
  }
  expectNear(dx, wantDx, 1e-4);
  expectNear(dw, wantDw, 1e-3);
  expectNear(db, wantDb, 1e-3);
}

TEST(ParallelKernels, SquaredNormBlocks) {
  const int64_t n = 200001; // blocks of 2^16 and a partial last one
  Vec x = randomVec(n, 40), y(1);
  std::vector<void *> b = bufs(x, y);
  SHARDC_LAUNCH(squared_norm, nullptr, b,
                packInts(Id::squared_norm, {{A::squared_norm::n, n}}), nullptr,
                A::kComputeStream);
  double want = 0;
  for (float v : x)
    want += double(v) * v;
  EXPECT_NEAR(y[0], want, want * 1e-6);
}

TEST(ParallelKernels, SliceGradZerosOutside) {
  const int64_t O = 64, N = 96, start = 40, size = 32, I = 32;
  Vec dy = randomVec(O * size * I, 41), dx(O * N * I, 7.0f);
  std::vector<void *> b = bufs(dy, dx);
  namespace S = A::slice_grad;
  SHARDC_LAUNCH(slice_grad, nullptr, b,
                packInts(Id::slice_grad, {{S::outer, O},
                                          {S::n, N},
                                          {S::start, start},
                                          {S::size, size},
                                          {S::inner, I}}),
                nullptr, A::kComputeStream);
  std::vector<double> want;
  for (int64_t o = 0; o < O; ++o)
    for (int64_t k = 0; k < N; ++k)
      for (int64_t i = 0; i < I; ++i)
        want.push_back(k >= start && k < start + size
                           ? dy[(o * size + k - start) * I + i]
                           : 0.0);
  expectNear(dx, want, 0);
}

} // namespace parallel

} // namespace
