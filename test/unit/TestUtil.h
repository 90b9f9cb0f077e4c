//===- TestUtil.h - helpers of the kernel tests ------------------*- C++ -*-===//
#ifndef SHARDC_TEST_UNIT_TESTUTIL_H
#define SHARDC_TEST_UNIT_TESTUTIL_H

#include "runtime/abi/abi.h"
#include "runtime/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <string_view>
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

/// Values set by name: {position, value} pairs, as {abi::linear::M, 4}.
template <typename T>
using Named = std::vector<std::pair<int64_t, T>>;

/// `count` arguments of kernel `k` (its `what`), each set by name exactly
/// once; a test that misses or repeats one fails, naming the layout.
template <typename T>
std::vector<T> packNamed(const abi::KernelInfo &k, const char *what,
                         int64_t count, Named<T> named) {
  std::vector<T> args(static_cast<size_t>(count));
  std::vector<bool> set(size_t(count), false);
  for (const auto &[at, value] : named) {
    if (at < 0 || at >= count || set[size_t(at)]) {
      ADD_FAILURE() << k.name << ": " << what << " " << at
                    << " is out of range or set twice; expected "
                    << abi::kernelLayout(k);
      continue;
    }
    args[size_t(at)] = value;
    set[size_t(at)] = true;
  }
  for (int64_t at = 0; at < count; ++at)
    if (!set[size_t(at)])
      ADD_FAILURE() << k.name << ": " << what << " " << at
                    << " is not set; expected " << abi::kernelLayout(k);
  return args;
}

/// Kernel `id`'s integer arguments: its named ones set by name, then
/// `tail` (the variable part and trailing integers of kernels.def):
///   packInts(abi::KernelId::linear, {{abi::linear::M, 4}, ...})
inline std::vector<int64_t> packInts(abi::KernelId id, Named<int64_t> named,
                                     const std::vector<int64_t> &tail = {}) {
  const abi::KernelInfo &k = abi::kernelInfo(id);
  // A typed kernel computes in f32 unless the test names its dtype; the
  // integers whose 0 is the default (a dense attention layout, outputs in
  // the kernel's dtype) are 0 unless named.
  auto unnamed = [&](int64_t at) {
    return at >= 0 && std::none_of(named.begin(), named.end(),
                                   [&](auto &arg) { return arg.first == at; });
  };
  int64_t dtype = abi::dtypeArg(k);
  if (unnamed(dtype))
    named.push_back({dtype, abi::kF32});
  std::string_view names = k.ints;
  int64_t index = 0;
  for (size_t at = 0; at < names.size(); ++index) {
    while (at < names.size() && (names[at] == '(' || names[at] == ' '))
      ++at;
    size_t end = names.find(',', at);
    if (end == std::string_view::npos)
      break;
    std::string_view name = names.substr(at, end - at);
    for (std::string_view zero :
         {"layout", "ld_q", "ld_k", "ld_v", "ld_o", "y_f32", "wb_f32",
          "add_dr", "amax"})
      if (name == zero && unnamed(index))
        named.push_back({index, 0});
    at = end + 1;
  }
  std::vector<int64_t> ints = packNamed(k, "integer", k.numInts, named);
  ints.insert(ints.end(), tail.begin(), tail.end());
  return ints;
}

/// Kernel `id`'s float arguments, set by name:
///   packFloats(abi::KernelId::layer_norm, {{abi::layer_norm::f::eps, 1e-5}})
inline std::vector<double> packFloats(abi::KernelId id, Named<double> named) {
  const abi::KernelInfo &k = abi::kernelInfo(id);
  return packNamed(k, "float", k.numFloats, named);
}

/// The optimizer's hyper-parameter input (abi::Hyper), set by name; the
/// ones not named are 0.
inline std::vector<float> packHyper(Named<float> named) {
  std::vector<float> h(size_t(abi::kHyperSize), 0.0f);
  for (const auto &[at, value] : named)
    h.at(size_t(at)) = value;
  return h;
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
inline std::vector<double> naiveMatmul(const float *a, const float *b,
                                       int64_t M, int64_t K, int64_t N, bool ta,
                                       bool tb) {
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

/// x rounded to the nearest value of a binary float format with
/// `precision` significant bits, least normal exponent `emin` and largest
/// finite value `max`, ties to even; beyond max (after rounding) infinity.
/// A reference for f16 (11, -14, 65504) and bf16 (8, -126, 0x1.fep127)
/// written from the definition, in double (std::nearbyint rounds to even).
inline double nearestInFormat(double x, int precision, int emin, double max) {
  if (std::isnan(x) || std::isinf(x) || x == 0)
    return x;
  int e;
  std::frexp(x, &e); // |x| = m * 2^e, m in [0.5, 1): exponent e - 1
  int exponent = std::max(e - 1, emin); // subnormals share emin's spacing
  double ulp = std::ldexp(1.0, exponent - (precision - 1));
  double v = std::nearbyint(x / ulp) * ulp;
  if (std::fabs(v) > max)
    return std::copysign(INFINITY, x);
  return v;
}
constexpr double kHalfMax = 65504.0, kBf16Max = 0x1.fep127;

} // namespace shardc::test

#endif // SHARDC_TEST_UNIT_TESTUTIL_H
