//===- TestUtil.h - helpers of the kernel tests ------------------*- C++ -*-===//
#ifndef SHARDC_TEST_UNIT_TESTUTIL_H
#define SHARDC_TEST_UNIT_TESTUTIL_H

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace shardc::test {

using Vec = std::vector<float>;

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

/// The kernel ABI's buffer array.
template <typename... Bufs> std::vector<void *> bufs(Bufs &...b) {
  return {static_cast<void *>(b.data())...};
}

} // namespace shardc::test

#endif // SHARDC_TEST_UNIT_TESTUTIL_H
