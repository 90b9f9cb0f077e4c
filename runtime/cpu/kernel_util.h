//===- kernel_util.h - shared pieces of the CPU kernels ----------*- C++ -*-===//
#ifndef SHARDC_RUNTIME_CPU_KERNEL_UTIL_H
#define SHARDC_RUNTIME_CPU_KERNEL_UTIL_H

#include "runtime/abi/abi.h"
#include "runtime/runtime.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace shardc::runtime::cpu {

inline float *F(void *p) { return static_cast<float *>(p); }
inline const int32_t *I32(void *p) { return static_cast<const int32_t *>(p); }

inline void launchedAs(void *ctx, int64_t stream, const char *kernel) {
  if (ctx)
    static_cast<Context *>(ctx)->countLaunch(stream, kernel);
}

/// max |x[0, n)| over f32 elements, or bf16 ones when `bf16`
/// (runtime/cpu/float8.cpp): amax_group's, and the `amax` a producer fused
/// with a float8 cast's writes (kernels.def, rt-fuse-amax).
float amaxOf(const void *x, bool bf16, int64_t n);

/// The row of kernel `id` in runtime/abi/kernels.def, at compile time.
constexpr const abi::KernelInfo &abiRow(abi::KernelId id) {
  return abi::kKernels[int64_t(id)];
}

/// The position of kernel `id`'s first integer after its named ones and its
/// variable tail (`trailing` in kernels.def), for the launch's integers `i`.
constexpr int64_t trailingStart(abi::KernelId id, const int64_t *i) {
  const abi::KernelInfo &k = abiRow(id);
  return k.numInts + k.tailPer * (k.count >= 0 ? i[k.count] : 0);
}

/// Walks the row-major result of broadcasting kernel `Id` (its integers:
/// the named rank R, then dims[R], then R element strides per operand, 0
/// where it broadcasts) one innermost row at a time: `row(out, off, step, n)`
/// handles the n results from element `out`, where operand k's elements
/// start at off[k] and advance by step[k].
template <abi::KernelId Id, typename Row>
void broadcastRows(const int64_t *i, Row row) {
  constexpr const abi::KernelInfo &info = abiRow(Id);
  // The tail is dims[R] then one stride list per operand.
  constexpr int N = int(info.tailPer) - 1;
  static_assert(info.count >= 0 && N >= 1, "not a broadcasting kernel");
  int64_t R = i[info.count];
  const int64_t *dims = i + info.numInts;
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

/// Element-wise loops split across the OpenMP threads from this many
/// elements on (below, a parallel region costs more than it saves).
constexpr int64_t kParallelMin = int64_t(1) << 15;

/// As broadcastRows, with the rows split across threads when there are
/// enough elements: each row's offsets are computed from its index, so
/// `row` runs concurrently on disjoint rows and must write only its own.
template <abi::KernelId Id, typename Row>
void broadcastRowsParallel(const int64_t *i, Row row) {
  constexpr const abi::KernelInfo &info = abiRow(Id);
  constexpr int N = int(info.tailPer) - 1;
  int64_t R = i[info.count];
  const int64_t *dims = i + info.numInts;
  int64_t total = 1;
  for (int64_t d = 0; d < R; ++d)
    total *= dims[d];
  if (R == 0 || total < kParallelMin || dims[R - 1] < 16) {
    broadcastRows<Id>(i, row);
    return;
  }
  int64_t inner = dims[R - 1], outer = total / inner;
  int64_t step[N];
  for (int k = 0; k < N; ++k)
    step[k] = dims[(k + 1) * R + R - 1];
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off[N] = {};
    for (int64_t d = R - 2, rest = o; d >= 0; --d) {
      int64_t id = rest % dims[d];
      rest /= dims[d];
      for (int k = 0; k < N; ++k)
        off[k] += id * dims[(k + 1) * R + d];
    }
    row(o * inner, off, step, inner);
  }
}

/// An elementwise binary op on f32 with broadcasting (add, mul, sub, ...):
/// a, b broadcast to y[dims] -> y = op(a, b). Rows whose operands are
/// contiguous or broadcast scalars take loops the compiler vectorizes.
template <abi::KernelId Id, typename Op>
void broadcastBinary(void **b, const int64_t *i, Op op) {
  static_assert(abiRow(Id).tailPer == 3, "two operands");
  const float *x = F(b[0]), *y = F(b[1]);
  float *out = F(b[2]);
  broadcastRowsParallel<Id>(
      i, [&](int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
        const float *xr = x + off[0], *yr = y + off[1];
        int64_t sa = st[0], sb = st[1];
        float *row = out + o;
        if (sa == 1 && sb == 1) {
          for (int64_t k = 0; k < n; ++k)
            row[k] = op(xr[k], yr[k]);
        } else if (sa == 1 && sb == 0) {
          float c = yr[0];
          for (int64_t k = 0; k < n; ++k)
            row[k] = op(xr[k], c);
        } else if (sa == 0 && sb == 1) {
          float c = xr[0];
          for (int64_t k = 0; k < n; ++k)
            row[k] = op(c, yr[k]);
        } else {
          for (int64_t k = 0; k < n; ++k)
            row[k] = op(xr[k * sa], yr[k * sb]);
        }
      });
}

/// y[c] = the sum over rows r of x[r, c] for x [rows, cols], each column
/// accumulated in double in row order (as a serial loop would), columns
/// split across threads: the result does not depend on the thread count.
inline void columnSums(const float *x, int64_t rows, int64_t cols, float *y) {
  constexpr int64_t kBlock = 64;
  int64_t blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    int64_t c0 = blk * kBlock, w = std::min(kBlock, cols - c0);
    double acc[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * cols + c0;
      for (int64_t c = 0; c < w; ++c)
        acc[c] += xr[c];
    }
    for (int64_t c = 0; c < w; ++c)
      y[c0 + c] = float(acc[c]);
  }
}

/// The mean and the (biased) variance of row[0, C), in double: what
/// layer_norm and its gradient normalize by.
inline std::pair<double, double> rowMoments(const float *row, int64_t C) {
  double mean = 0, var = 0;
#pragma omp simd reduction(+ : mean)
  for (int64_t c = 0; c < C; ++c)
    mean += row[c];
  mean /= C;
#pragma omp simd reduction(+ : var)
  for (int64_t c = 0; c < C; ++c)
    var += (row[c] - mean) * (row[c] - mean);
  return {mean, var / C};
}

/// Elements per block of the blocked sums below: fixed, so that their
/// association (and result) does not depend on the thread count.
constexpr int64_t kSumBlock = int64_t(1) << 16;

/// The sum of f(x[k]) over [0, n) in double: blocks of kSumBlock in
/// parallel, each over independent chains, then the blocks' sums in order.
template <typename Fn>
double blockedSum(const float *x, int64_t n, Fn f) {
  constexpr int64_t kChains = 8;
  int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> part(size_t(std::max<int64_t>(blocks, 1)), 0.0);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t j = 0; j < blocks; ++j) {
    int64_t k = j * kSumBlock, hi = std::min(n, k + kSumBlock);
    double acc[kChains] = {};
    for (; k + kChains <= hi; k += kChains)
      for (int64_t c = 0; c < kChains; ++c)
        acc[c] += f(double(x[k + c]));
    for (; k < hi; ++k)
      acc[0] += f(double(x[k]));
    double s = 0;
    for (int64_t c = 0; c < kChains; ++c)
      s += acc[c];
    part[size_t(j)] = s;
  }
  double s = 0;
  for (double p : part)
    s += p;
  return s;
}

} // namespace shardc::runtime::cpu

// Every kernel ends with launched(ctx, stream): counted, and timed when
// profiling, under its own name (its function name less "shardc_k_").
#define launched(ctx, stream)                                                  \
  ::shardc::runtime::cpu::launchedAs(ctx, stream, __func__ + 9)

#endif // SHARDC_RUNTIME_CPU_KERNEL_UTIL_H
