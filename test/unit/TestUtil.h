//===- TestUtil.h - helpers of the kernel tests ------------------*- C++ -*-===//
#ifndef SHARDC_TEST_UNIT_TESTUTIL_H
#define SHARDC_TEST_UNIT_TESTUTIL_H

#include "runtime/abi/abi.h"
#include "runtime/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace shardc::test {

using Vec = std::vector<float>;

/// A kernel's arguments of one kind as the tests hold them: an array, a
/// vector, or none; with their count.
template <typename T> struct Args {
  const T *data = nullptr;
  size_t size = 0;
  Args(std::nullptr_t) {}
  template <size_t N> Args(const T (&a)[N]) : data(a), size(N) {}
  template <size_t N> Args(T (&a)[N]) : data(a), size(N) {}
  Args(const std::vector<T> &v) : data(v.data()), size(v.size()) {}
};

/// Launches kernel `fn` (the ABI's kernel `id`) after checking the packed
/// arguments against the one definition (runtime/abi/kernels.def): a test
/// that packs a layout the ABI does not have fails, naming the layout.
template <typename Bufs>
void launch(abi::KernelId id,
            void (*fn)(void *, void **, const int64_t *, const double *,
                       int64_t),
            void *ctx, Bufs &bufs, Args<int64_t> ints, Args<double> floats,
            int64_t stream) {
  const abi::KernelInfo &k = abi::kernelInfo(id);
  size_t numBuffers = std::size(bufs);
  std::string wrong = abi::checkKernelArgs(k, int64_t(numBuffers), ints.data,
                                           int64_t(ints.size),
                                           int64_t(floats.size));
  ASSERT_TRUE(wrong.empty()) << k.name << " " << wrong << "; expected "
                             << abi::kernelLayout(k);
  fn(ctx, std::data(bufs), ints.data, floats.data, stream);
}

/// SHARDC_LAUNCH(silu, ctx, buffers, ints, floats, stream).
#define SHARDC_LAUNCH(name, ctx, bufs, ints, floats, stream)                   \
  ::shardc::test::launch(::shardc::abi::KernelId::name, &shardc_k_##name, ctx, \
                         bufs, ints, floats, stream)

/// n normal values of standard deviation `scale`, from `seed`.
inline Vec randomVec(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  Vec v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

/// got[k] within tol * (1 + |want[k]|) of want[k], for every k.
inline void expectNear(const Vec &got, const std::vector<double> &want,
                       double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    ASSERT_NEAR(got[k], want[k], tol * (1.0 + std::fabs(want[k])))
        << "at element " << k;
}

/// op(a) op(b) in double for a [M, K] (stored [K, M] with `ta`) and b
/// [K, N] (stored [N, K] with `tb`), row-major [M, N].
inline std::vector<double> naiveMatmul(const float *a, const float *b, int64_t M,
                                       int64_t K, int64_t N, bool ta, bool tb) {
  std::vector<double> c;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += double(ta ? a[k * M + m] : a[m * K + k]) *
             (tb ? b[n * K + k] : b[k * N + n]);
      c.push_back(s);
    }
  return c;
}

/// The kernel ABI's buffer array.
template <typename... Bufs> std::vector<void *> bufs(Bufs &...b) {
  return {static_cast<void *>(b.data())...};
}

} // namespace shardc::test

#endif // SHARDC_TEST_UNIT_TESTUTIL_H
