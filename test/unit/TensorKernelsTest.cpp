//===- TensorKernelsTest.cpp - generic tensor kernels against references --===//
//
// The kernels of cpu/tensor_kernels.cpp (and the integer casts) on small
// random inputs, compared with direct transcriptions of the ops' definitions
// in double precision. Broadcast operands are read by multi-index (a size-1
// dimension reads index 0), independently of the stride arguments the
// kernels take.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels.h"
#include "runtime/runtime.h"

#include "test/unit/TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <cstdint>
#include <functional>
#include <vector>

namespace A = shardc::abi;

namespace {

using namespace shardc::test;
using Id = A::KernelId;
using Shape = std::vector<int64_t>;

shardc::runtime::Context ctx;

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// The row-major multi-index of element `flat` of `shape`.
Shape unflatten(int64_t flat, const Shape &shape) {
  Shape idx(shape.size());
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

/// The element of an operand of shape `in` (right-aligned with `out`,
/// NumPy broadcasting) read at output multi-index `idx`.
int64_t broadcastIndex(const Shape &idx, const Shape &in) {
  int64_t lead = int64_t(idx.size()) - int64_t(in.size()), flat = 0;
  for (size_t d = 0; d < in.size(); ++d)
    flat = flat * in[d] + (in[d] == 1 ? 0 : idx[lead + d]);
  return flat;
}

/// The kernel arguments' element strides of `in` broadcast to `out`.
std::vector<int64_t> strides(const Shape &in, const Shape &out) {
  std::vector<int64_t> s(out.size(), 0);
  int64_t lead = int64_t(out.size()) - int64_t(in.size()), step = 1;
  for (int64_t d = int64_t(in.size()) - 1; d >= 0; --d) {
    s[lead + d] = in[d] == 1 ? 0 : step;
    step *= in[d];
  }
  return s;
}

/// The integers of broadcasting kernel `id`, whose named integer `rank` is
/// R: dims[R] follow, then the strides of each operand.
std::vector<int64_t> broadcastArgs(Id id, int64_t rank, const Shape &out,
                                   std::initializer_list<Shape> ins) {
  std::vector<int64_t> tail(out.begin(), out.end());
  for (const Shape &in : ins) {
    std::vector<int64_t> s = strides(in, out);
    tail.insert(tail.end(), s.begin(), s.end());
  }
  return packInts(id, {{rank, int64_t(out.size())}}, tail);
}

Vec positive(Vec v) {
  for (float &x : v)
    x = std::fabs(x) + 0.25f;
  return v;
}

TEST(TensorKernels, SubDivPowBroadcast) {
  Shape out = {2, 3, 4}, as = {2, 3, 4}, cs = {3, 1};
  Vec a = positive(randomVec(24, 11)), c = randomVec(3, 12), y(24);
  c[1] = 2.0f; // the exact-square path of pow
  std::vector<void *> b = bufs(a, c, y);
  using Kernel = decltype(&shardc_k_sub);
  struct Case {
    Id id;
    int64_t rank; ///< the position of R
    Kernel kernel;
    std::function<double(double, double)> fn;
  } cases[] = {
      {Id::sub, A::sub::R, shardc_k_sub,
       [](double l, double r) { return l - r; }},
      {Id::div, A::div::R, shardc_k_div,
       [](double l, double r) { return l / r; }},
      {Id::pow, A::pow::R, shardc_k_pow,
       [](double l, double r) { return std::pow(l, r); }},
  };
  for (const Case &k : cases) {
    std::vector<int64_t> args = broadcastArgs(k.id, k.rank, out, {as, cs});
    shardc::test::launch(k.id, k.kernel, &ctx, b, args, nullptr,
                         A::kComputeStream);
    std::vector<double> want;
    for (int64_t e = 0; e < numel(out); ++e) {
      Shape idx = unflatten(e, out);
      want.push_back(
          k.fn(a[broadcastIndex(idx, as)], c[broadcastIndex(idx, cs)]));
    }
    expectNear(y, want);
  }
}

TEST(TensorKernels, WhereBroadcastsAllThree) {
  Shape out = {2, 3, 4}, cs = {3, 1}, xs = {2, 3, 4}, ys = {4};
  std::vector<uint8_t> cond = {1, 0, 1};
  Vec x = randomVec(24, 13), yv = randomVec(4, 14), o(24);
  std::vector<int64_t> args =
      broadcastArgs(Id::where, A::where::R, out, {cs, xs, ys});
  std::vector<void *> b = bufs(cond, x, yv, o);
  SHARDC_LAUNCH(where, &ctx, b, args, nullptr, A::kComputeStream);
  std::vector<double> want;
  for (int64_t e = 0; e < numel(out); ++e) {
    Shape idx = unflatten(e, out);
    want.push_back(cond[broadcastIndex(idx, cs)] ? x[broadcastIndex(idx, xs)]
                                                 : yv[broadcastIndex(idx, ys)]);
  }
  expectNear(o, want, 0);
}

template <typename T>
void checkEqual(std::vector<T> l, std::vector<T> r, int64_t dtype) {
  Shape out = {2, 3}, ls = {2, 3}, rs = {3};
  std::vector<uint8_t> y(6, 7);
  std::vector<int64_t> args =
      broadcastArgs(Id::equal, A::equal::R, out, {ls, rs});
  args.push_back(dtype); // trailing the strides
  std::vector<void *> b = bufs(l, r, y);
  SHARDC_LAUNCH(equal, &ctx, b, args, nullptr, A::kComputeStream);
  for (int64_t e = 0; e < 6; ++e) {
    Shape idx = unflatten(e, out);
    EXPECT_EQ(y[e], l[e] == r[broadcastIndex(idx, rs)] ? 1 : 0) << "at " << e;
  }
}

TEST(TensorKernels, EqualF32I32Bool) {
  checkEqual<float>({1.5f, -2.0f, 0.0f, 1.5f, 3.0f, -0.0f}, {1.5f, 3.0f, 0.0f},
                    A::kF32);
  checkEqual<int32_t>({4, 5, 6, 4, -5, 7}, {4, -5, 6}, A::kI32);
  checkEqual<uint8_t>({1, 0, 1, 0, 0, 1}, {1, 0, 0}, A::kBool);
}

/// The functions of abi::UnaryFn, in double.
double reference(int64_t fn, double x) {
  using F = A::UnaryFn;
  switch (F(fn)) {
  case F::sqrt: return std::sqrt(x);
  case F::erf: return std::erf(x);
  case F::tanh: return std::tanh(x);
  case F::sigmoid: return 1.0 / (1.0 + std::exp(-x));
  case F::neg: return -x;
  case F::reciprocal: return 1.0 / x;
  case F::exp: return std::exp(x);
  case F::log: return std::log(x);
  case F::relu: return x > 0 ? x : 0.0;
  // torch.nn.functional.softplus: beta 1, linear above the threshold 20.
  case F::softplus: return x > 20 ? x : std::log(1.0 + std::exp(x));
  case F::nan_to_zero: return std::isnan(x) ? 0.0 : x;
  case F::round_f16: return nearestInFormat(x, 11, -14, kHalfMax);
  case F::round_bf16: return nearestInFormat(x, 8, -126, kBf16Max);
  default: ADD_FAILURE() << "no reference for function code " << fn; return 0;
  }
}

TEST(TensorKernels, UnaryEveryFunction) {
  const int64_t n = 40;
  Vec x = positive(randomVec(n, 15)), y(n);
  for (int64_t fn = 0; fn < int64_t(A::UnaryFn::kNumFns); ++fn) {
    std::vector<void *> b = bufs(x, y);
    std::vector<int64_t> args =
        packInts(Id::unary, {{A::unary::n, n}, {A::unary::fn, fn}});
    SHARDC_LAUNCH(unary, &ctx, b, args, nullptr, A::kComputeStream);
    std::vector<double> want;
    for (float v : x)
      want.push_back(reference(fn, v));
    SCOPED_TRACE("function code " + std::to_string(fn));
    expectNear(y, want, 1e-6);
  }
}

TEST(TensorKernels, UnaryGradMatchesFiniteDifferences) {
  const int64_t n = 40;
  Vec x = positive(randomVec(n, 16)), dy = randomVec(n, 17), y(n), dx(n);
  for (int64_t fn = 0; fn < int64_t(A::UnaryFn::kNumFns); ++fn) {
    // The roundings are steps; their gradient is the cast's pass-through
    // (RoundToHalfAndBf16), not their derivative.
    if (fn == int64_t(A::UnaryFn::round_f16) || fn == int64_t(A::UnaryFn::round_bf16))
      continue;
    for (int64_t k = 0; k < n; ++k)
      y[k] = float(reference(fn, x[k]));
    std::vector<void *> b = bufs(x, y, dy, dx);
    std::vector<int64_t> args = packInts(
        Id::unary_grad, {{A::unary_grad::n, n}, {A::unary_grad::fn, fn}});
    SHARDC_LAUNCH(unary_grad, &ctx, b, args, nullptr, A::kComputeStream);
    std::vector<double> want;
    const double h = 1e-6;
    for (int64_t k = 0; k < n; ++k)
      want.push_back(dy[k] *
                     (reference(fn, x[k] + h) - reference(fn, x[k] - h)) /
                     (2 * h));
    SCOPED_TRACE("function code " + std::to_string(fn));
    // y is rounded to f32 and enters some derivatives (sqrt, tanh, ...).
    expectNear(dx, want, 1e-5);
  }
}

TEST(TensorKernels, ReluAndSoftplusOnBothSides) {
  // Negative, zero and positive inputs, and softplus past its threshold.
  Vec x = {-3.0f, -0.5f, 0.0f, 0.25f, 2.0f, 19.5f, 25.0f}, y(x.size()),
      dy(x.size(), 1.0f), dx(x.size());
  const int64_t n = int64_t(x.size());
  for (A::UnaryFn f : {A::UnaryFn::relu, A::UnaryFn::softplus}) {
    int64_t fn = int64_t(f);
    std::vector<void *> b = bufs(x, y);
    std::vector<int64_t> args =
        packInts(Id::unary, {{A::unary::n, n}, {A::unary::fn, fn}});
    SHARDC_LAUNCH(unary, &ctx, b, args, nullptr, A::kComputeStream);
    std::vector<double> want, slope;
    for (float v : x) {
      want.push_back(reference(fn, v));
      // PyTorch's derivatives: relu 0 at 0; softplus sigmoid(x), 1 above 20.
      slope.push_back(f == A::UnaryFn::relu ? (v > 0 ? 1.0 : 0.0)
                      : v > 20              ? 1.0
                                            : 1.0 / (1.0 + std::exp(-double(v))));
    }
    SCOPED_TRACE("function code " + std::to_string(fn));
    expectNear(y, want, 1e-6);
    std::vector<void *> g = bufs(x, y, dy, dx);
    std::vector<int64_t> gargs = packInts(
        Id::unary_grad, {{A::unary_grad::n, n}, {A::unary_grad::fn, fn}});
    SHARDC_LAUNCH(unary_grad, &ctx, g, gargs, nullptr, A::kComputeStream);
    expectNear(dx, slope, 1e-6);
  }
}

TEST(TensorKernels, LeakyReluAndItsGradient) {
  // torch.nn.functional.leaky_relu(x, 0.2) and its backward: slope 0.2 at
  // and below 0.
  Vec x = {-3.0f, -0.5f, 0.0f, 0.25f, 2.0f}, y(x.size()), dy = {1, 2, 3, 4, 5},
      dx(x.size());
  const int64_t n = int64_t(x.size());
  std::vector<void *> b = bufs(x, y);
  SHARDC_LAUNCH(leaky_relu, &ctx, b,
                packInts(Id::leaky_relu, {{A::leaky_relu::n, n}}),
                packFloats(Id::leaky_relu, {{A::leaky_relu::f::alpha, 0.2}}),
                A::kComputeStream);
  EXPECT_EQ(y, (Vec{-3.0f * 0.2f, -0.5f * 0.2f, 0.0f, 0.25f, 2.0f}));
  std::vector<void *> g = bufs(x, dy, dx);
  SHARDC_LAUNCH(leaky_relu_grad, &ctx, g,
                packInts(Id::leaky_relu_grad, {{A::leaky_relu_grad::n, n}}),
                packFloats(Id::leaky_relu_grad,
                           {{A::leaky_relu_grad::f::alpha, 0.2}}),
                A::kComputeStream);
  EXPECT_EQ(dx, (Vec{1 * 0.2f, 2 * 0.2f, 3 * 0.2f, 4.0f, 5.0f}));
}

TEST(TensorKernels, NanToZeroZeroesNaNsOnly) {
  // torch.where(isnan(x), 0, x) and its gradient: 1 where x is a number.
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  Vec x = {nan, -2.0f, 0.0f, inf, -inf, 3.5f, -nan}, y(x.size()),
      dy(x.size(), 2.0f), dx(x.size());
  const int64_t n = int64_t(x.size()),
                fn = int64_t(A::UnaryFn::nan_to_zero);
  std::vector<void *> b = bufs(x, y);
  std::vector<int64_t> args =
      packInts(Id::unary, {{A::unary::n, n}, {A::unary::fn, fn}});
  SHARDC_LAUNCH(unary, &ctx, b, args, nullptr, A::kComputeStream);
  EXPECT_EQ(y, (Vec{0.0f, -2.0f, 0.0f, inf, -inf, 3.5f, 0.0f}));
  std::vector<void *> g = bufs(x, y, dy, dx);
  std::vector<int64_t> gargs = packInts(
      Id::unary_grad, {{A::unary_grad::n, n}, {A::unary_grad::fn, fn}});
  SHARDC_LAUNCH(unary_grad, &ctx, g, gargs, nullptr, A::kComputeStream);
  EXPECT_EQ(dx, (Vec{0.0f, 2.0f, 2.0f, 2.0f, 2.0f, 2.0f, 0.0f}));
}

TEST(TensorKernels, RoundToHalfAndBf16) {
  // torch's x.half().float() and x.bfloat16().float(): nearest, ties to
  // even, overflow to infinity, subnormals and signed zeros kept; the
  // gradient passes through as the cast's does.
  const float inf = std::numeric_limits<float>::infinity();
  Vec x = {1.0f + 1.0f / 2048,   // f16 tie: down to 1 (even)
           1.0f + 3.0f / 2048,   // f16 tie: up to 1 + 2^-9 (even)
           65519.0f, 65520.0f,   // f16: largest finite, then infinity
           std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), // f16 subnormals
           std::ldexp(3.0f, -26), -0.0f, -1.0f / 3, 1e5f, -inf,
           1.0f + 1.0f / 256,    // bf16 tie: down to 1
           3.3895314e38f},       // bf16: rounds past the largest to infinity
      y(x.size()), dy = randomVec(x.size(), 31), dx(x.size());
  const int64_t n = int64_t(x.size());
  for (A::UnaryFn f : {A::UnaryFn::round_f16, A::UnaryFn::round_bf16}) {
    int64_t fn = int64_t(f);
    SCOPED_TRACE("function code " + std::to_string(fn));
    std::vector<void *> b = bufs(x, y);
    SHARDC_LAUNCH(unary, &ctx, b, packInts(Id::unary, {{A::unary::n, n}, {A::unary::fn, fn}}),
                  nullptr, A::kComputeStream);
    for (int64_t k = 0; k < n; ++k) {
      double want = reference(fn, x[k]);
      EXPECT_EQ(double(y[k]), want) << "x = " << x[k];
      EXPECT_EQ(std::signbit(y[k]), std::signbit(want)) << "x = " << x[k];
    }
    std::vector<void *> g = bufs(x, y, dy, dx);
    SHARDC_LAUNCH(unary_grad, &ctx, g,
                  packInts(Id::unary_grad, {{A::unary_grad::n, n}, {A::unary_grad::fn, fn}}),
                  nullptr, A::kComputeStream);
    EXPECT_EQ(dx, dy);
  }
  // A few values whose roundings are known by hand.
  std::vector<void *> b = bufs(x, y);
  SHARDC_LAUNCH(unary, &ctx, b,
                packInts(Id::unary, {{A::unary::n, n},
                                     {A::unary::fn, int64_t(A::UnaryFn::round_f16)}}),
                nullptr, A::kComputeStream);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f + 1.0f / 512);
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_EQ(y[3], inf);
  EXPECT_EQ(y[5], 0.0f); // 2^-25 ties to even: zero
  EXPECT_EQ(y[6], std::ldexp(1.0f, -24)); // 1.5 * 2^-25 rounds up
}

TEST(TensorKernels, BroadcastTo) {
  Shape out = {2, 3, 4}, xs = {3, 1};
  Vec x = randomVec(3, 18), y(24);
  std::vector<int64_t> args =
      broadcastArgs(Id::broadcast, A::broadcast::R, out, {xs});
  std::vector<void *> b = bufs(x, y);
  SHARDC_LAUNCH(broadcast, &ctx, b, args, nullptr, A::kComputeStream);
  std::vector<double> want;
  for (int64_t e = 0; e < numel(out); ++e)
    want.push_back(x[broadcastIndex(unflatten(e, out), xs)]);
  expectNear(y, want, 0);
}

/// c[batch] = op(a) op(b) with the batch dimensions of a and b broadcast.
void checkBatchMatmul(Shape batch, Shape aBatch, Shape bBatch, bool ta,
                      bool tb) {
  const int64_t M = 3, K = 4, N = 5;
  int64_t R = batch.size();
  Vec a = randomVec(numel(aBatch) * M * K, 19),
      bm = randomVec(numel(bBatch) * K * N, 20), c(numel(batch) * M * N);
  std::vector<int64_t> tail(batch.begin(), batch.end());
  for (const Shape &s : {aBatch, bBatch}) {
    std::vector<int64_t> st = strides(s, batch); // in matrices
    tail.insert(tail.end(), st.begin(), st.end());
  }
  namespace BM = A::batch_matmul;
  std::vector<int64_t> args = packInts(Id::batch_matmul,
                                       {{BM::M, M},
                                        {BM::K, K},
                                        {BM::N, N},
                                        {BM::ta, ta},
                                        {BM::tb, tb},
                                        {BM::R, R}},
                                       tail);
  std::vector<void *> b = bufs(a, bm, c);
  SHARDC_LAUNCH(batch_matmul, &ctx, b, args, nullptr, A::kComputeStream);
  std::vector<double> want;
  for (int64_t p = 0; p < numel(batch); ++p) {
    Shape idx = unflatten(p, batch);
    std::vector<double> product = naiveMatmul(
        a.data() + broadcastIndex(idx, aBatch) * M * K,
        bm.data() + broadcastIndex(idx, bBatch) * K * N, M, K, N, ta, tb);
    want.insert(want.end(), product.begin(), product.end());
  }
  expectNear(c, want);
}

TEST(TensorKernels, BatchMatmulPlain) {
  checkBatchMatmul({2}, {2}, {2}, false, false);
}
TEST(TensorKernels, BatchMatmulTransposedBroadcast) {
  checkBatchMatmul({2}, {2}, {1}, true, true);
}
TEST(TensorKernels, BatchMatmulTwoBatchDimsBroadcast) {
  checkBatchMatmul({2, 3}, {2, 1}, {1, 3}, false, true);
}

TEST(TensorKernels, ConcatPartWritesOnlyItsSlot) {
  // x [2, 3, 4] into y [2, 7, 4] at position 2 of dimension 1.
  Vec x = randomVec(24, 21), y(2 * 7 * 4, 99.0f);
  std::vector<void *> b = bufs(x, y);
  namespace CP = A::concat_part;
  std::vector<int64_t> args = packInts(Id::concat_part, {{CP::outer, 2},
                                                         {CP::n_x, 3},
                                                         {CP::n_y, 7},
                                                         {CP::start, 2},
                                                         {CP::inner, 4}});
  SHARDC_LAUNCH(concat_part, &ctx, b, args, nullptr, A::kComputeStream);
  std::vector<double> want;
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t j = 0; j < 7; ++j)
      for (int64_t k = 0; k < 4; ++k)
        want.push_back(j >= 2 && j < 5 ? x[(o * 3 + j - 2) * 4 + k] : 99.0);
  expectNear(y, want, 0);
}

TEST(TensorKernels, TriluUpperAndLower) {
  const int64_t B = 2, R = 3, C = 4;
  Vec x = randomVec(B * R * C, 22), y(B * R * C);
  for (auto [upper, k] :
       {std::pair<int64_t, int64_t>{1, 1}, {0, -1}, {1, -2}}) {
    std::vector<void *> b = bufs(x, y);
    namespace Tr = A::trilu;
    std::vector<int64_t> args = packInts(Id::trilu, {{Tr::batch, B},
                                                     {Tr::rows, R},
                                                     {Tr::cols, C},
                                                     {Tr::upper, upper},
                                                     {Tr::k, k}});
    SHARDC_LAUNCH(trilu, &ctx, b, args, nullptr, A::kComputeStream);
    std::vector<double> want;
    for (int64_t p = 0; p < B; ++p)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) {
          // numpy.triu(x, k) keeps c >= r + k; numpy.tril(x, k) c <= r + k.
          bool keep = upper ? c >= r + k : c <= r + k;
          want.push_back(keep ? x[(p * R + r) * C + c] : 0.0);
        }
    expectNear(y, want, 0);
  }
}

TEST(TensorKernels, CastIntegersAndBools) {
  Vec f = {-1.7f, -0.2f, 0.0f, 0.9f, 2.5f, 7.0f};
  std::vector<int32_t> i(6);
  std::vector<uint8_t> bl(6);
  Vec back(6);
  auto cast = [](void *in, void *out, int64_t from, int64_t to) {
    void *b[] = {in, out};
    std::vector<int64_t> args = packInts(
        Id::cast, {{A::cast::n, 6}, {A::cast::from, from}, {A::cast::to, to}});
    SHARDC_LAUNCH(cast, &ctx, b, args, nullptr, A::kComputeStream);
  };
  cast(f.data(), i.data(), A::kF32, A::kI32);
  EXPECT_EQ(i, (std::vector<int32_t>{-1, 0, 0, 0, 2, 7})); // toward zero
  cast(f.data(), bl.data(), A::kF32, A::kBool);
  EXPECT_EQ(bl, (std::vector<uint8_t>{1, 1, 0, 1, 1, 1}));
  cast(i.data(), back.data(), A::kI32, A::kF32);
  expectNear(back, {-1, 0, 0, 0, 2, 7}, 0);
  cast(bl.data(), back.data(), A::kBool, A::kF32);
  expectNear(back, {1, 1, 0, 1, 1, 1}, 0);
  cast(bl.data(), i.data(), A::kBool, A::kI32);
  EXPECT_EQ(i, (std::vector<int32_t>{1, 1, 0, 1, 1, 1}));
}

} // namespace
