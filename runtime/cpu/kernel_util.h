//===- kernel_util.h - shared pieces of the CPU kernels ----------*- C++ -*-===//
#ifndef SHARDC_RUNTIME_CPU_KERNEL_UTIL_H
#define SHARDC_RUNTIME_CPU_KERNEL_UTIL_H

#include "runtime/runtime.h"

#include <cstdint>
#include <vector>

namespace shardc::runtime::cpu {

inline float *F(void *p) { return static_cast<float *>(p); }
inline const int32_t *I32(void *p) { return static_cast<const int32_t *>(p); }

inline void launchedAs(void *ctx, int64_t stream, const char *kernel) {
  if (ctx)
    static_cast<Context *>(ctx)->countLaunch(stream, kernel);
}

/// Walks a row-major result of rank R (ints: R, dims[R], then R element
/// strides per operand, 0 where it broadcasts) one innermost row at a time:
/// `row(out, off, step, n)` handles the n results from element `out`, where
/// operand k's elements start at off[k] and advance by step[k].
template <int N, typename Row>
void broadcastRows(const int64_t *i, Row row) {
  // The broadcasting kernels' layout: R, then dims[R], then R strides per
  // operand (runtime/abi/kernels.def).
  namespace A = shardc::abi;
  static_assert(A::add::R == 0 && A::add::kNumInts == 1 &&
                    A::where::kNumInts == 1 && A::broadcast::kNumInts == 1 &&
                    A::equal::kNumInts == 1,
                "broadcasting kernels start with R");
  int64_t R = i[A::add::R];
  const int64_t *dims = i + A::add::kNumInts;
  int64_t off[N] = {}, step[N] = {};
  if (R == 0) {
    row(int64_t(0), off, step, int64_t(1));
    return;
  }
  const int64_t *strides[N];
  for (int k = 0; k < N; ++k) {
    strides[k] = dims + (k + 1) * R;
    step[k] = strides[k][R - 1];
  }
  int64_t inner = dims[R - 1], outer = 1;
  for (int64_t d = 0; d < R - 1; ++d)
    outer *= dims[d];
  std::vector<int64_t> idx(R, 0);
  for (int64_t o = 0; o < outer; ++o) {
    row(o * inner, off, step, inner);
    // Advance the outer index (dims 0..R-2), carrying like an odometer.
    for (int64_t d = R - 2; d >= 0; --d) {
      ++idx[d];
      for (int k = 0; k < N; ++k)
        off[k] += strides[k][d];
      if (idx[d] < dims[d])
        break;
      for (int k = 0; k < N; ++k)
        off[k] -= strides[k][d] * dims[d];
      idx[d] = 0;
    }
  }
}

/// An elementwise binary op on f32 with broadcasting (add, mul, sub, ...).
template <typename Op>
void broadcastBinary(void **b, const int64_t *i, Op op) {
  const float *x = F(b[0]), *y = F(b[1]);
  float *out = F(b[2]);
  broadcastRows<2>(i, [&](int64_t o, const int64_t *off, const int64_t *st,
                          int64_t n) {
    const float *xr = x + off[0], *yr = y + off[1];
    int64_t sa = st[0], sb = st[1];
    float *row = out + o;
    for (int64_t k = 0; k < n; ++k)
      row[k] = op(xr[k * sa], yr[k * sb]);
  });
}

} // namespace shardc::runtime::cpu

// Every kernel ends with launched(ctx, stream): counted, and timed when
// profiling, under its own name (its function name less "shardc_k_").
#define launched(ctx, stream)                                                  \
  ::shardc::runtime::cpu::launchedAs(ctx, stream, __func__ + 9)

#endif // SHARDC_RUNTIME_CPU_KERNEL_UTIL_H
