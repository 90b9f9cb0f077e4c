//===- tensor_kernels.cu - CUDA generic tensor kernels --------------------===//
//
// transpose, slice, slice_grad, concat_part, sum_to, where, equal, unary,
// unary_grad, leaky_relu, leaky_relu_grad, trilu (runtime/abi/kernels.def),
// and the registration of batch_matmul (runtime/cuda/gemm.cu); the CPU twins
// are runtime/cpu/tensor_kernels.cpp, runtime/cpu/train_kernels.cpp and
// runtime/cpu/kernels.cpp.
//
//  - Shapes are simplified on the host before a launch: dimensions of size
//    1 dropped, neighbours that move together merged, so most launches index
//    a rank of 1 to 3.
//  - Data movement (slice, slice_grad, concat_part) moves 128-bit vectors
//    where every row offset and pointer allows, floats otherwise.
//  - transpose: a copy when the simplified permutation is the identity; a
//    gather in output order (both sides coalesced) when the innermost
//    dimension stays innermost; otherwise 32 x 32 tiles through shared
//    memory (reads coalesced along the input's innermost dimension, writes
//    along the output's).
//  - sum_to: no atomics, a fixed association. The rows of a [M, N] matrix
//    (a bias gradient) through columnSumsKernel: 128-bit loads, row lanes
//    added in order, chunks of rows. Otherwise a thread an output when the
//    kept dimensions are innermost (coalesced across outputs), a warp or a
//    block an output when the summed ones are; long sums are split into
//    chunks whose partial sums (scratch, double) are added in order.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/context.h"
#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/launch.h"
#include "runtime/math.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace A = shardc::abi;
using namespace shardc::runtime;
using namespace shardc::runtime::cuda;

/// batch_matmul runs through cuBLASLt with the GEMM plumbing of gemm.cu.
SHARDC_CUDA_KERNEL(batch_matmul);

namespace {

constexpr int kMaxRank = 8;


//===----------------------------------------------------------------------===//
// Broadcast element-wise kernels: where, equal
//===----------------------------------------------------------------------===//

/// A row-major result of rank `rank` and the element strides of N operands
/// at each of its dimensions (0 where an operand broadcasts), by value.
template <int N> struct Strided {
  int rank = 0;
  int64_t numel = 1;
  int64_t dims[kMaxRank];
  int64_t strides[N][kMaxRank];
};

/// The broadcast of kernel `name`'s integers: R, dims[R], then R strides per
/// operand; size-1 dimensions dropped and neighbours merged where every
/// operand's strides allow.
template <int N>
Strided<N> stridedOf(const int64_t *i, int64_t numInts, int64_t R,
                     const char *name) {
  const int64_t *dims = i + numInts;
  Strided<N> s;
  for (int64_t d = 0; d < R; ++d)
    s.numel *= dims[d];
  for (int64_t d = 0; d < R; ++d) {
    if (dims[d] == 1)
      continue;
    if (s.rank > 0) {
      // Merge into the previous kept dimension when, for every operand,
      // stepping it once is stepping this one dims[d] times.
      bool merge = true;
      for (int k = 0; k < N; ++k)
        merge &= s.strides[k][s.rank - 1] == dims[(k + 1) * R + d] * dims[d];
      if (merge) {
        s.dims[s.rank - 1] *= dims[d];
        for (int k = 0; k < N; ++k)
          s.strides[k][s.rank - 1] = dims[(k + 1) * R + d];
        continue;
      }
    }
    if (s.rank == kMaxRank)
      fatal("%s: a broadcast of rank %lld exceeds the CUDA backend's %d", name,
            (long long)R, kMaxRank);
    s.dims[s.rank] = dims[d];
    for (int k = 0; k < N; ++k)
      s.strides[k][s.rank] = dims[(k + 1) * R + d];
    ++s.rank;
  }
  return s;
}

/// Element offsets of each operand at result element e.
template <int N>
__device__ void offsetsOf(const Strided<N> &s, int64_t e, int64_t *off) {
  for (int k = 0; k < N; ++k)
    off[k] = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    int64_t idx = e % s.dims[d];
    e /= s.dims[d];
    for (int k = 0; k < N; ++k)
      off[k] += idx * s.strides[k][d];
  }
}

// c (bytes), a, b broadcast to y[dims] -> y = c ? a : b
__global__ void whereKernel(const uint8_t *c, const float *a, const float *b,
                            float *y, Strided<3> s) {
  FOR_EACH(e, s.numel) {
    int64_t off[3];
    offsetsOf(s, e, off);
    y[e] = c[off[0]] ? a[off[1]] : b[off[2]];
  }
}

// a, b broadcast to y[dims] (bool bytes) -> y = a == b, compared as T
template <typename T>
__global__ void equalKernel(const T *a, const T *b, uint8_t *y, Strided<2> s) {
  FOR_EACH(e, s.numel) {
    int64_t off[2];
    offsetsOf(s, e, off);
    y[e] = a[off[0]] == b[off[1]];
  }
}

//===----------------------------------------------------------------------===//
// Element-wise kernels
//===----------------------------------------------------------------------===//

// x[n] -> y[n] = fn(x) in double, rounded once (runtime/math.h)
__global__ void unaryKernel(const float *x, float *y, int64_t n, int64_t fn) {
  FOR_EACH(k, n) y[k] = float(unaryFn(fn, double(x[k])));
}

// x[n], y[n] = fn(x), dy[n] -> dx[n] = dy fn'(x), in double
__global__ void unaryGradKernel(const float *x, const float *y, const float *dy,
                                float *dx, int64_t n, int64_t fn) {
  FOR_EACH(k, n)
  dx[k] =
      float(double(dy[k]) * unaryFnDerivative(fn, double(x[k]), double(y[k])));
}

__device__ inline float leaky(float x, float alpha) {
  return x > 0 ? x : x * alpha;
}
__device__ inline float leakyGrad(float x, float dy, float alpha) {
  return x > 0 ? dy : dy * alpha;
}

// x[n] -> y[n] = x > 0 ? x : alpha x (f32, as PyTorch); n4 float4 vectors,
// then the tail
__global__ void leakyReluKernel(const float *x, float *y, int64_t n, int64_t n4,
                                float alpha) {
  const float4 *x4 = reinterpret_cast<const float4 *>(x);
  float4 *y4 = reinterpret_cast<float4 *>(y);
  FOR_EACH(k, n4) {
    float4 v = x4[k];
    y4[k] = make_float4(leaky(v.x, alpha), leaky(v.y, alpha), leaky(v.z, alpha),
                        leaky(v.w, alpha));
  }
  FOR_EACH(k, n - 4 * n4) y[4 * n4 + k] = leaky(x[4 * n4 + k], alpha);
}

// x[n], dy[n] -> dx[n] = x > 0 ? dy : alpha dy; n4 float4 vectors, then the
// tail
__global__ void leakyReluGradKernel(const float *x, const float *dy, float *dx,
                                    int64_t n, int64_t n4, float alpha) {
  const float4 *x4 = reinterpret_cast<const float4 *>(x);
  const float4 *dy4 = reinterpret_cast<const float4 *>(dy);
  float4 *dx4 = reinterpret_cast<float4 *>(dx);
  FOR_EACH(k, n4) {
    float4 v = x4[k], g = dy4[k];
    dx4[k] =
        make_float4(leakyGrad(v.x, g.x, alpha), leakyGrad(v.y, g.y, alpha),
                    leakyGrad(v.z, g.z, alpha), leakyGrad(v.w, g.w, alpha));
  }
  FOR_EACH(k, n - 4 * n4) {
    int64_t at = 4 * n4 + k;
    dx[at] = leakyGrad(x[at], dy[at], alpha);
  }
}

// x[batch,rows,cols] -> y: x where c - r >= k (upper) or c - r <= k, else 0
__global__ void triluKernel(const float *x, float *y, int64_t n, int64_t rows,
                            int64_t cols, bool upper, int64_t k) {
  FOR_EACH(e, n) {
    int64_t c = e % cols, r = e / cols % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    y[e] = keep ? x[e] : 0.0f;
  }
}

//===----------------------------------------------------------------------===//
// Data movement: slice, slice_grad, concat_part
//===----------------------------------------------------------------------===//

// dst[outer, dstRow] at dstOff + j = src[outer, srcRow] at srcOff + j, for j
// in [0, len); in units of V (float or float4)
template <typename V>
__global__ void copyRowsKernel(const V *src, V *dst, int64_t outer, int64_t len,
                               int64_t srcRow, int64_t srcOff, int64_t dstRow,
                               int64_t dstOff) {
  FOR_EACH(e, outer * len) {
    int64_t o = e / len, j = e % len;
    dst[o * dstRow + dstOff + j] = src[o * srcRow + srcOff + j];
  }
}

// dy[outer, len] -> dx[outer, row]: dy's row at off, zero elsewhere; in units
// of V (float or float4)
template <typename V>
__global__ void padRowsKernel(const V *dy, V *dx, int64_t outer, int64_t len,
                              int64_t row, int64_t off) {
  FOR_EACH(e, outer * row) {
    int64_t o = e / row, j = e % row - off;
    V zero{};
    dx[e] = j >= 0 && j < len ? dy[o * len + j] : zero;
  }
}

/// dst rows at dstOff = src rows at srcOff (counts in elements of
/// `elementBytes`: 4 for f32, 2 for bf16), as 128-bit units when every
/// count and both pointers allow, else one element at a time.
void copyRows(cudaStream_t s, const void *src, void *dst, int64_t elementBytes,
              int64_t outer, int64_t len, int64_t srcRow, int64_t srcOff,
              int64_t dstRow, int64_t dstOff) {
  if (outer * len == 0)
    return;
  int64_t per = 16 / elementBytes; // elements a 128-bit unit
  if ((len | srcRow | srcOff | dstRow | dstOff) % per == 0 && aligned16(src) &&
      aligned16(dst)) {
    SHARDC_LAUNCH(copyRowsKernel<float4>, gridFor(outer * len / per), kThreads,
                  0, s, static_cast<const float4 *>(src),
                  static_cast<float4 *>(dst), outer, len / per, srcRow / per,
                  srcOff / per, dstRow / per, dstOff / per);
    return;
  }
  if (elementBytes == 2) {
    SHARDC_LAUNCH(copyRowsKernel<uint16_t>, gridFor(outer * len), kThreads, 0,
                  s, static_cast<const uint16_t *>(src),
                  static_cast<uint16_t *>(dst), outer, len, srcRow, srcOff,
                  dstRow, dstOff);
    return;
  }
  SHARDC_LAUNCH(copyRowsKernel<float>, gridFor(outer * len), kThreads, 0, s,
                static_cast<const float *>(src), static_cast<float *>(dst),
                outer, len, srcRow, srcOff, dstRow, dstOff);
}

/// Bytes of an element of a layout kernel's dtype: 4 (f32) or 2 (bf16).
int64_t elementBytesOf(int64_t dtype, const char *kernel) {
  return isBf16(dtype, kernel) ? 2 : 4;
}

//===----------------------------------------------------------------------===//
// transpose
//===----------------------------------------------------------------------===//

/// A transpose after simplification: the output's dims and, per output
/// dimension, the input's element stride.
struct Permuted {
  int rank = 0;
  int64_t numel = 1;
  int64_t dims[kMaxRank];
  int64_t inStride[kMaxRank];
};

/// The transpose of x[dims[R]] by perm, with size-1 dimensions dropped and
/// dimensions that stay neighbours (in order) merged.
Permuted simplifyTranspose(int64_t R, const int64_t *dims,
                           const int64_t *perm) {
  // The input's dimensions kept (size != 1), renumbered.
  std::vector<int64_t> index(R, -1), kept;
  for (int64_t d = 0; d < R; ++d)
    if (dims[d] != 1) {
      index[d] = int64_t(kept.size());
      kept.push_back(dims[d]);
    }
  std::vector<int64_t> p;
  for (int64_t d = 0; d < R; ++d)
    if (perm[d] >= 0 && perm[d] < R && index[perm[d]] >= 0)
      p.push_back(index[perm[d]]);
  // Runs of consecutive input dimensions in output order: [lo, hi].
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t d : p) {
    if (!runs.empty() && runs.back().second + 1 == d)
      runs.back().second = d;
    else
      runs.push_back({d, d});
  }
  if (runs.size() > size_t(kMaxRank))
    fatal("transpose: rank %lld exceeds the CUDA backend's %d", (long long)R,
          kMaxRank);
  // The merged input: runs in input order; its row-major strides.
  std::vector<size_t> order(runs.size());
  for (size_t k = 0; k < order.size(); ++k)
    order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return runs[a].first < runs[b].first; });
  std::vector<int64_t> size(runs.size()), stride(runs.size());
  for (size_t k = 0; k < runs.size(); ++k) {
    size[k] = 1;
    for (int64_t d = runs[k].first; d <= runs[k].second; ++d)
      size[k] *= kept[d];
  }
  int64_t s = 1;
  for (size_t k = order.size(); k-- > 0;) {
    stride[order[k]] = s;
    s *= size[order[k]];
  }
  Permuted t;
  t.rank = int(runs.size());
  for (int k = 0; k < t.rank; ++k) {
    t.dims[k] = size[k];
    t.inStride[k] = stride[k];
    t.numel *= size[k];
  }
  for (int64_t d = 0; d < R; ++d)
    if (dims[d] == 0)
      t.numel = 0;
  return t;
}

// x -> y[dims] in output order: y[e] = x at the input offset of e (writes
// coalesced; reads coalesced when the innermost dimension stays innermost)
template <typename T>
__global__ void transposeGatherKernel(const T *x, T *y, Permuted t) {
  FOR_EACH(e, t.numel) {
    int64_t rest = e, off = 0;
    for (int d = t.rank - 1; d >= 0; --d) {
      off += rest % t.dims[d] * t.inStride[d];
      rest /= t.dims[d];
    }
    y[e] = x[off];
  }
}

/// The tiles of a transpose whose innermost input dimension (output
/// dimension q, length A) is not the output's innermost (length B, input
/// stride xStrideB): tiles of 32 x 32 over (A, B) for each index of the other
/// output dimensions (the batch).
struct Tiles {
  int64_t A, B, tilesA, tilesB, tiles;
  int64_t xStrideB, yStrideA;
  int batchRank = 0;
  int64_t batchDims[kMaxRank], batchX[kMaxRank], batchY[kMaxRank];
};

constexpr int kTile = 32;

// x -> y by tiles of 32 x 32 (Tiles): a block of 256 threads a tile (grid-
// stride over tiles), read along A (x's innermost), written along B (y's
// innermost), through shared memory padded against bank conflicts
template <typename T>
__global__ void transposeTiledKernel(const T *x, T *y, Tiles t) {
  __shared__ T tile[kTile][kTile + 1];
  int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  int rowsPerPass = blockDim.x / kTile;
  for (int64_t at = blockIdx.x; at < t.tiles; at += gridDim.x) {
    int64_t tb = at % t.tilesB, rest = at / t.tilesB;
    int64_t a0 = rest % t.tilesA * kTile, b0 = tb * kTile;
    int64_t bi = rest / t.tilesA, xo = 0, yo = 0;
    for (int d = t.batchRank - 1; d >= 0; --d) {
      int64_t idx = bi % t.batchDims[d];
      bi /= t.batchDims[d];
      xo += idx * t.batchX[d];
      yo += idx * t.batchY[d];
    }
    for (int r = ty; r < kTile; r += rowsPerPass) {
      int64_t a = a0 + tx, b = b0 + r;
      if (a < t.A && b < t.B)
        tile[r][tx] = x[xo + a + b * t.xStrideB];
    }
    __syncthreads();
    for (int r = ty; r < kTile; r += rowsPerPass) {
      int64_t a = a0 + r, b = b0 + tx;
      if (a < t.A && b < t.B)
        y[yo + a * t.yStrideA + b] = tile[tx][r];
    }
    __syncthreads();
  }
}

//===----------------------------------------------------------------------===//
// sum_to
//===----------------------------------------------------------------------===//

/// A sum_to after simplification: the kept dimensions (y is row-major over
/// them, in x's order) and the summed ones, each with x's element strides;
/// size-1 dimensions dropped, neighbours of one kind merged.
struct SumShape {
  int64_t outN = 1, redN = 1;
  int keptRank = 0, redRank = 0;
  int64_t keptDims[kMaxRank], keptX[kMaxRank];
  int64_t redDims[kMaxRank], redX[kMaxRank];
};

/// x's element offset of output k's first summand.
__device__ inline int64_t keptOffset(const SumShape &s, int64_t k) {
  int64_t off = 0;
  for (int d = s.keptRank - 1; d >= 0; --d) {
    off += k % s.keptDims[d] * s.keptX[d];
    k /= s.keptDims[d];
  }
  return off;
}

/// x's element offset (from an output's first summand) of summand r.
__device__ inline int64_t summandOffset(const SumShape &s, int64_t r) {
  int64_t off = 0;
  for (int d = s.redRank - 1; d >= 0; --d) {
    off += r % s.redDims[d] * s.redX[d];
    r /= s.redDims[d];
  }
  return off;
}

// x -> y[outN] (or partial[chunk, outN]): a thread an output (coalesced when
// the kept dimensions are innermost), summands [chunk * len, +len) of it in
// x's order, in double
template <typename T, typename Y = T>
__global__ void sumToThreadsKernel(const T *x, Y *y, double *partial,
                                   SumShape s, int64_t len) {
  int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= s.outN)
    return;
  int64_t r0 = blockIdx.y * len, r1 = r0 + len < s.redN ? r0 + len : s.redN;
  const T *base = x + keptOffset(s, k);
  // An odometer over the summed dimensions, from r0.
  int64_t idx[kMaxRank], off = 0, rest = r0;
  for (int d = s.redRank - 1; d >= 0; --d) {
    idx[d] = rest % s.redDims[d];
    rest /= s.redDims[d];
    off += idx[d] * s.redX[d];
  }
  double acc = 0;
  for (int64_t r = r0; r < r1; ++r) {
    acc += toFloat(base[off]);
    for (int d = s.redRank - 1; d >= 0; --d) {
      off += s.redX[d];
      if (++idx[d] < s.redDims[d])
        break;
      off -= s.redX[d] * s.redDims[d];
      idx[d] = 0;
    }
  }
  if (partial)
    partial[blockIdx.y * s.outN + k] = acc;
  else
    y[k] = fromFloat<Y>(float(acc));
}

// x -> y[outN]: a warp an output (grid-stride over outputs by warp), its
// lanes striding over the summands, in double; for short sums over the
// innermost dimensions
template <typename T, typename Y = T>
__global__ void sumToWarpsKernel(const T *x, Y *y, SumShape s) {
  int lane = threadIdx.x % 32;
  int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t k = warp; k < s.outN; k += warps) { // warp-uniform
    const T *base = x + keptOffset(s, k);
    double acc = 0;
    for (int64_t r = lane; r < s.redN; r += 32)
      acc += toFloat(base[summandOffset(s, r)]);
    for (int o = 16; o > 0; o /= 2)
      acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0)
      y[k] = fromFloat<Y>(float(acc));
  }
}

// x -> y[outN] (or partial[chunk, outN]): a block an (output, chunk) pair
// (grid-stride), its threads striding over summands [chunk * len, +len), in
// double; for long sums over the innermost dimensions
template <typename T, typename Y = T>
__global__ void sumToBlocksKernel(const T *x, Y *y, double *partial,
                                  SumShape s, int64_t chunks, int64_t len) {
  for (int64_t at = blockIdx.x; at < s.outN * chunks; at += gridDim.x) {
    int64_t k = at % s.outN, chunk = at / s.outN; // block-uniform
    int64_t r0 = chunk * len, r1 = r0 + len < s.redN ? r0 + len : s.redN;
    const T *base = x + keptOffset(s, k);
    double acc = 0;
    for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x)
      acc += toFloat(base[summandOffset(s, r)]);
    acc = blockSum(acc);
    if (threadIdx.x == 0) {
      if (partial)
        partial[chunk * s.outN + k] = acc;
      else
        y[k] = fromFloat<Y>(float(acc));
    }
  }
}

// partial[chunks, n] -> y[n] = the chunks summed in order
template <typename T, typename Y = T>
__global__ void sumPartialsKernel(const double *partial, Y *y,
                                  int64_t chunks, int64_t n) {
  FOR_EACH(k, n) {
    double acc = 0;
    for (int64_t c = 0; c < chunks; ++c)
      acc += partial[c * n + k];
    y[k] = fromFloat<Y>(float(acc));
  }
}

// x[M,N] (row-major, packAligned) -> partial[chunks, N]: the column sums
// of chunk blockIdx.y's rows, kColSlots x kRowLanes threads a block over
// kColSlots * kN columns (columnChunks), in double
template <typename T>
__global__ void columnSumsKernel(const T *x, double *partial, int64_t M,
                                 int64_t N, int64_t rows) {
  constexpr int kN = Pack<T>::kN;
  int slot = threadIdx.x % kColSlots, lane = threadIdx.x / kColSlots;
  int64_t v = blockIdx.x * int64_t(kColSlots) + slot; // x's pack in a row
  bool live = v * kN < N;
  int64_t m0 = blockIdx.y * rows, m1 = m0 + rows < M ? m0 + rows : M;
  double acc[kN] = {};
  if (live) {
#pragma unroll 4
    for (int64_t m = m0 + lane; m < m1; m += kRowLanes) {
      Pack<T> p;
      p.load(x + m * N, v);
      for (int j = 0; j < kN; ++j)
        acc[j] += p.v[j];
    }
  }
  sumRowLanes<kN>(acc);
  if (lane == 0 && live)
    for (int j = 0; j < kN; ++j)
      partial[blockIdx.y * N + v * kN + j] = acc[j];
}

/// The CPU kernel's walk, for strides sum_to's fast paths do not read (y
/// not row-major over the kept dimensions): one thread, acc[outN] in double.
struct SumToGeneral {
  int64_t rank, outN, total;
  int64_t dims[kMaxRank], ystr[kMaxRank];
};

// x[dims] -> y[outN] as the CPU kernel walks it (a single thread)
template <typename T, typename Y = T>
__global__ void sumToSerialKernel(const T *x, Y *y, double *acc,
                                  SumToGeneral g) {
  for (int64_t k = 0; k < g.outN; ++k)
    acc[k] = 0;
  int64_t idx[kMaxRank] = {}, off = 0;
  for (int64_t n = 0; n < g.total; ++n) {
    acc[off] += toFloat(x[n]);
    for (int64_t d = g.rank - 1; d >= 0; --d) {
      ++idx[d];
      off += g.ystr[d];
      if (idx[d] < g.dims[d])
        break;
      off -= g.ystr[d] * g.dims[d];
      idx[d] = 0;
    }
  }
  for (int64_t k = 0; k < g.outN; ++k)
    y[k] = fromFloat<Y>(float(acc[k]));
}

} // namespace

namespace {
// x[dims[R]] -> y, whose dimension d is x's dimension perm[d]; elements of
// T (float, or uint16_t: bf16 bits)
template <typename T>
void transposeOf(cudaStream_t s, const T *x, T *y, int64_t R,
                 const int64_t *dims, const int64_t *perm) {
  Permuted t = simplifyTranspose(R, dims, perm);
  if (t.numel == 0)
    return;
  if (t.rank <= 1) { // the identity, once neighbours are merged
    CUDA_CHECK(cudaMemcpyAsync(y, x, size_t(t.numel) * sizeof(T),
                               cudaMemcpyDeviceToDevice, s));
    return;
  }
  int last = t.rank - 1;
  if (t.inStride[last] == 1) {
    auto *gather = &transposeGatherKernel<T>;
    SHARDC_LAUNCH(gather, gridFor(t.numel), kThreads, 0, s, x, y, t);
    return;
  }
  // Output dimension q is the input's innermost (stride 1).
  int q = 0;
  while (t.inStride[q] != 1)
    ++q;
  Tiles tl;
  tl.A = t.dims[q];
  tl.B = t.dims[last];
  tl.xStrideB = t.inStride[last];
  int64_t yStride[kMaxRank];
  for (int d = last; d >= 0; --d)
    yStride[d] = d == last ? 1 : yStride[d + 1] * t.dims[d + 1];
  tl.yStrideA = yStride[q];
  int64_t batch = 1;
  for (int d = 0; d < last; ++d) {
    if (d == q)
      continue;
    tl.batchDims[tl.batchRank] = t.dims[d];
    tl.batchX[tl.batchRank] = t.inStride[d];
    tl.batchY[tl.batchRank] = yStride[d];
    ++tl.batchRank;
    batch *= t.dims[d];
  }
  tl.tilesA = (tl.A + kTile - 1) / kTile;
  tl.tilesB = (tl.B + kTile - 1) / kTile;
  tl.tiles = batch * tl.tilesA * tl.tilesB;
  unsigned grid = unsigned(std::min<int64_t>(tl.tiles, deviceBlocks()));
  auto *tiled = &transposeTiledKernel<T>;
  SHARDC_LAUNCH(tiled, grid, kThreads, 0, s, x, y, tl);
}
} // namespace

// x[dims[R]] -> y, whose dimension d is x's dimension perm[d] (f32, or
// bf16 moved as its bits)
SHARDC_CUDA_KERNEL(transpose) {
  int64_t R = i[A::transpose::R];
  const int64_t *dims = i + A::transpose::kNumInts, *perm = dims + R;
  cudaStream_t s = streamOf(ctx, stream);
  if (elementBytesOf(i[A::transpose::dtype], "transpose") == 2)
    transposeOf(s, static_cast<const uint16_t *>(b[0]),
                static_cast<uint16_t *>(b[1]), R, dims, perm);
  else
    transposeOf(s, static_cast<const float *>(b[0]), static_cast<float *>(b[1]),
                R, dims, perm);
}

// x[outer,n,inner] -> y[outer,size,inner] = x[:, start:start+size, :]
SHARDC_CUDA_KERNEL(slice) {
  namespace K = A::slice;
  int64_t outer = i[K::outer], n = i[K::n], start = i[K::start],
          size = i[K::size], inner = i[K::inner];
  copyRows(streamOf(ctx, stream), b[0], b[1],
           elementBytesOf(i[K::dtype], "slice"), outer, size * inner,
           n * inner, start * inner, size * inner, 0);
}

// dy[outer,size,inner] -> dx[outer,n,inner], zero outside start:start+size
SHARDC_CUDA_KERNEL(slice_grad) {
  namespace K = A::slice_grad;
  int64_t outer = i[K::outer], n = i[K::n], start = i[K::start],
          size = i[K::size], inner = i[K::inner];
  int64_t len = size * inner, row = n * inner, off = start * inner;
  if (outer * row == 0)
    return;
  cudaStream_t s = streamOf(ctx, stream);
  int64_t bytes = elementBytesOf(i[K::dtype], "slice_grad"), per = 16 / bytes;
  if ((len | row | off) % per == 0 && aligned16(b[0]) && aligned16(b[1])) {
    SHARDC_LAUNCH(padRowsKernel<float4>, gridFor(outer * row / per), kThreads,
                  0, s, static_cast<const float4 *>(b[0]),
                  static_cast<float4 *>(b[1]), outer, len / per, row / per,
                  off / per);
    return;
  }
  if (bytes == 2) { // bf16 bits: +0.0 is all zeros
    SHARDC_LAUNCH(padRowsKernel<uint16_t>, gridFor(outer * row), kThreads, 0, s,
                  static_cast<const uint16_t *>(b[0]),
                  static_cast<uint16_t *>(b[1]), outer, len, row, off);
    return;
  }
  SHARDC_LAUNCH(padRowsKernel<float>, gridFor(outer * row), kThreads, 0, s,
                F(b[0]), F(b[1]), outer, len, row, off);
}

// x[outer,n_x,inner] -> y[outer,n_y,inner] at start:start+n_x of dimension 1
// (the rest of y untouched)
SHARDC_CUDA_KERNEL(concat_part) {
  namespace K = A::concat_part;
  int64_t outer = i[K::outer], nx = i[K::n_x], ny = i[K::n_y],
          start = i[K::start], inner = i[K::inner];
  copyRows(streamOf(ctx, stream), b[0], b[1],
           elementBytesOf(i[K::dtype], "concat_part"), outer, nx * inner,
           nx * inner, 0, ny * inner, start * inner);
}

/// sum_to of a simplified shape that is x[redN, outN] with its rows summed
/// (a bias gradient): 128-bit loads, the partial sums of chunks of rows,
/// then the chunks in order. False (nothing launched) for other shapes.
template <typename T, typename Y>
bool sumMatrixRows(cuda::Context &c, cudaStream_t st, const T *x, Y *y,
                   const SumShape &s) {
  int64_t outN = s.outN;
  if (s.keptRank != 1 || s.redRank != 1 || s.keptX[0] != 1 ||
      s.redX[0] != outN || !packAligned<T>(x, outN))
    return false;
  ColumnChunks cc = columnChunks(s.redN, outN, Pack<T>::kN);
  auto *partial =
      static_cast<double *>(c.scratch(size_t(cc.chunks * outN) * 8));
  dim3 grid{unsigned(cc.colBlocks), unsigned(cc.chunks)};
  auto *columnSumsKernelOf = &columnSumsKernel<T>;
  SHARDC_LAUNCH(columnSumsKernelOf, grid, kThreads, 0, st, x, partial, s.redN,
                outN, cc.rows);
  sumChunkColumns<Y>(st, partial, nullptr, y, nullptr, cc.chunks, outN);
  return true;
}

// x[dims[R]] -> y[out_n], summed over the dimensions where ystr is 0
/// sum_to on elements of T (sums in double, y rounded once).
template <typename T, typename Y = T>
void sumTo(cuda::Context &c, int64_t stream, const T *x, Y *y,
           const int64_t *i) {
  namespace K = A::sum_to;
  int64_t R = i[K::R], outN = i[K::out_n];
  const int64_t *dims = i + K::kNumInts, *ystr = dims + R;
  cudaStream_t st = c.stream(stream);
  if (outN == 0)
    return;
  // Kept (ystr != 0) and summed dimensions, size 1 dropped, neighbours of
  // one kind merged; x's row-major strides.
  SumShape s;
  bool general = false; // y not row-major over the kept dimensions
  int64_t xStride = 1, expectY = 1;
  int lastKind = -1; // the kind of the last dimension entered (inner)
  for (int64_t d = R - 1; d >= 0 && !general; --d) {
    int64_t n = dims[d];
    if (n == 1)
      continue;
    int kind = ystr[d] != 0 ? 1 : 0;
    if (kind == 1) {
      general |= ystr[d] != expectY; // y row-major over the kept dimensions
      expectY *= n;
    }
    int &rank = kind ? s.keptRank : s.redRank;
    int64_t *sizes = kind ? s.keptDims : s.redDims;
    int64_t *strides = kind ? s.keptX : s.redX;
    if (kind == lastKind) {
      sizes[rank - 1] *= n; // merged with its inner neighbour
    } else {
      if (rank == kMaxRank) {
        general = true;
        break;
      }
      sizes[rank] = n;
      strides[rank] = xStride;
      ++rank;
    }
    lastKind = kind;
    xStride *= n;
  }
  general |= expectY != outN;
  if (general) {
    if (R > kMaxRank)
      fatal("sum_to: rank %lld exceeds the CUDA backend's %d", (long long)R,
            kMaxRank);
    SumToGeneral g;
    g.rank = R;
    g.outN = outN;
    g.total = 1;
    for (int64_t d = 0; d < R; ++d) {
      g.dims[d] = dims[d];
      g.ystr[d] = ystr[d];
      g.total *= dims[d];
    }
    auto *acc = static_cast<double *>(c.scratch(size_t(outN) * 8));
    auto *sumToSerialKernelOf = &sumToSerialKernel<T, Y>;
    SHARDC_LAUNCH(sumToSerialKernelOf, 1, 1, 0, st, x, y, acc, g);
    return;
  }
  // Built innermost first: reverse to x's order.
  std::reverse(s.keptDims, s.keptDims + s.keptRank);
  std::reverse(s.keptX, s.keptX + s.keptRank);
  std::reverse(s.redDims, s.redDims + s.redRank);
  std::reverse(s.redX, s.redX + s.redRank);
  s.outN = outN;
  for (int d = 0; d < s.redRank; ++d)
    s.redN *= s.redDims[d];
  bool innermostKept = s.redRank == 0 || s.redX[s.redRank - 1] != 1;
  if (sumMatrixRows(c, st, x, y, s))
    return;
  int64_t cap = deviceBlocks();
  if (innermostKept || s.redN <= 1) {
    // A thread an output; the sums split into chunks of rows while that
    // leaves the device idle.
    int64_t colBlocks = blocksFor(outN, kThreads);
    int64_t chunks =
        std::min((cap + colBlocks - 1) / colBlocks, (s.redN + 15) / 16);
    chunks = std::clamp<int64_t>(chunks, 1, 65535);
    int64_t len = std::max<int64_t>(1, (s.redN + chunks - 1) / chunks);
    chunks = std::max<int64_t>(1, (s.redN + len - 1) / len);
    double *partial =
        chunks > 1 ? static_cast<double *>(c.scratch(size_t(chunks * outN) * 8))
                   : nullptr;
    dim3 grid{unsigned(colBlocks), unsigned(chunks)};
    auto *sumToThreadsKernelOf = &sumToThreadsKernel<T, Y>;
    SHARDC_LAUNCH(sumToThreadsKernelOf, grid, kThreads, 0, st, x, y, partial, s,
                  len);
    if (partial) {
      auto *sumPartialsKernelOf = &sumPartialsKernel<T, Y>;
      SHARDC_LAUNCH(sumPartialsKernelOf, gridFor(outN), kThreads, 0, st, partial,
                    y, chunks, outN);
    }
    return;
  }
  if (s.redN < 1024) {
    // A warp an output.
    unsigned grid =
        unsigned(std::min<int64_t>(blocksFor(outN * 32, kThreads), cap));
    auto *sumToWarpsKernelOf = &sumToWarpsKernel<T, Y>;
    SHARDC_LAUNCH(sumToWarpsKernelOf, grid, kThreads, 0, st, x, y, s);
    return;
  }
  // A block an output, long sums split into chunks of at least 4096
  // summands while that leaves the device idle.
  int64_t chunks = std::min((cap + outN - 1) / outN, (s.redN + 4095) / 4096);
  chunks = std::max<int64_t>(1, chunks);
  int64_t len = (s.redN + chunks - 1) / chunks;
  chunks = (s.redN + len - 1) / len;
  double *partial =
      chunks > 1 ? static_cast<double *>(c.scratch(size_t(chunks * outN) * 8))
                 : nullptr;
  unsigned grid = unsigned(std::min<int64_t>(outN * chunks, cap));
  auto *sumToBlocksKernelOf = &sumToBlocksKernel<T, Y>;
  SHARDC_LAUNCH(sumToBlocksKernelOf, grid, kThreads, 0, st, x, y, partial, s,
                chunks, len);
  if (partial) {
    auto *sumPartialsKernelOf = &sumPartialsKernel<T, Y>;
    SHARDC_LAUNCH(sumPartialsKernelOf, gridFor(outN), kThreads, 0, st, partial, y,
                  chunks, outN);
  }
}

// (y_f32: y in f32 whatever x's dtype, a cast fused in)
SHARDC_CUDA_KERNEL(sum_to) {
  auto &c = *static_cast<cuda::Context *>(ctx);
  bool yF32 = i[A::sum_to::y_f32] != 0;
  withDtype(i[A::sum_to::dtype], "sum_to", [&](auto t) {
    using T = decltype(t);
    if (yF32)
      sumTo<T, float>(c, stream, static_cast<const T *>(b[0]),
                      static_cast<float *>(b[1]), i);
    else
      sumTo<T>(c, stream, static_cast<const T *>(b[0]),
               static_cast<T *>(b[1]), i);
  });
}

// c (one byte per bool), a, b broadcast to y[dims] -> y = c ? a : b
SHARDC_CUDA_KERNEL(where) {
  namespace K = A::where;
  Strided<3> s = stridedOf<3>(i, K::kNumInts, i[K::R], "where");
  if (s.numel == 0)
    return;
  SHARDC_LAUNCH(whereKernel, gridFor(s.numel), kThreads, 0,
                streamOf(ctx, stream), static_cast<const uint8_t *>(b[0]),
                F(b[1]), F(b[2]), F(b[3]), s);
}

// a, b broadcast to y[dims] (bool) -> y = a == b, compared as `dtype`
SHARDC_CUDA_KERNEL(equal) {
  namespace K = A::equal;
  int64_t R = i[K::R];
  // The dtype code follows the tail dims[R] astr[R] bstr[R].
  int64_t dtype = i[K::kNumInts + 3 * R];
  Strided<2> s = stridedOf<2>(i, K::kNumInts, R, "equal");
  cudaStream_t st = streamOf(ctx, stream);
  auto *y = static_cast<uint8_t *>(b[2]);
  if (dtype != A::kF32 && dtype != A::kI32 && dtype != A::kBool)
    fatal("equal: dtype code %lld is not supported", (long long)dtype);
  if (s.numel == 0)
    return;
  if (dtype == A::kF32)
    SHARDC_LAUNCH(equalKernel<float>, gridFor(s.numel), kThreads, 0, st,
                  F(b[0]), F(b[1]), y, s);
  else if (dtype == A::kI32)
    SHARDC_LAUNCH(equalKernel<int32_t>, gridFor(s.numel), kThreads, 0, st,
                  static_cast<const int32_t *>(b[0]),
                  static_cast<const int32_t *>(b[1]), y, s);
  else
    SHARDC_LAUNCH(equalKernel<uint8_t>, gridFor(s.numel), kThreads, 0, st,
                  static_cast<const uint8_t *>(b[0]),
                  static_cast<const uint8_t *>(b[1]), y, s);
}

// y[n] = fn(x[n]), fn an abi::UnaryFn code
SHARDC_CUDA_KERNEL(unary) {
  int64_t n = i[A::unary::n], fn = i[A::unary::fn];
  if (!isUnaryFn(fn))
    fatal("unary: unknown function code %lld", (long long)fn);
  if (n == 0)
    return;
  SHARDC_LAUNCH(unaryKernel, gridFor(n), kThreads, 0, streamOf(ctx, stream),
                F(b[0]), F(b[1]), n, fn);
}

// x[n], y[n] = fn(x), dy[n] -> dx[n] = dy fn'(x)
SHARDC_CUDA_KERNEL(unary_grad) {
  int64_t n = i[A::unary_grad::n], fn = i[A::unary_grad::fn];
  if (!isUnaryFn(fn))
    fatal("unary_grad: unknown function code %lld", (long long)fn);
  if (n == 0)
    return;
  SHARDC_LAUNCH(unaryGradKernel, gridFor(n), kThreads, 0, streamOf(ctx, stream),
                F(b[0]), F(b[1]), F(b[2]), F(b[3]), n, fn);
}

// x[n] -> y[n] = x > 0 ? x : alpha x
SHARDC_CUDA_KERNEL(leaky_relu) {
  int64_t n = i[A::leaky_relu::n];
  if (n == 0)
    return;
  int64_t n4 = aligned16(b[0]) && aligned16(b[1]) ? n / 4 : 0;
  SHARDC_LAUNCH(leakyReluKernel, gridFor(std::max<int64_t>(n4, n - 4 * n4)),
                kThreads, 0, streamOf(ctx, stream), F(b[0]), F(b[1]), n, n4,
                float(f[A::leaky_relu::f::alpha]));
}

// x[n], dy[n] -> dx[n] = x > 0 ? dy : alpha dy
SHARDC_CUDA_KERNEL(leaky_relu_grad) {
  int64_t n = i[A::leaky_relu_grad::n];
  if (n == 0)
    return;
  int64_t n4 =
      aligned16(b[0]) && aligned16(b[1]) && aligned16(b[2]) ? n / 4 : 0;
  SHARDC_LAUNCH(leakyReluGradKernel, gridFor(std::max<int64_t>(n4, n - 4 * n4)),
                kThreads, 0, streamOf(ctx, stream), F(b[0]), F(b[1]), F(b[2]),
                n, n4, float(f[A::leaky_relu_grad::f::alpha]));
}

// x[batch,rows,cols] -> y, x where c - r >= k (upper) or c - r <= k, else 0
SHARDC_CUDA_KERNEL(trilu) {
  namespace K = A::trilu;
  int64_t n = i[K::batch] * i[K::rows] * i[K::cols];
  if (n == 0)
    return;
  SHARDC_LAUNCH(triluKernel, gridFor(n), kThreads, 0, streamOf(ctx, stream),
                F(b[0]), F(b[1]), n, i[K::rows], i[K::cols], i[K::upper] != 0,
                i[K::k]);
}

void shardc::runtime::cuda::addTensorKernels(KernelFn *table) {
  table[int64_t(A::KernelId::transpose)] = &shardc_cuda_k_transpose;
  table[int64_t(A::KernelId::slice)] = &shardc_cuda_k_slice;
  table[int64_t(A::KernelId::slice_grad)] = &shardc_cuda_k_slice_grad;
  table[int64_t(A::KernelId::concat_part)] = &shardc_cuda_k_concat_part;
  table[int64_t(A::KernelId::sum_to)] = &shardc_cuda_k_sum_to;
  table[int64_t(A::KernelId::where)] = &shardc_cuda_k_where;
  table[int64_t(A::KernelId::equal)] = &shardc_cuda_k_equal;
  table[int64_t(A::KernelId::unary)] = &shardc_cuda_k_unary;
  table[int64_t(A::KernelId::unary_grad)] = &shardc_cuda_k_unary_grad;
  table[int64_t(A::KernelId::leaky_relu)] = &shardc_cuda_k_leaky_relu;
  table[int64_t(A::KernelId::leaky_relu_grad)] = &shardc_cuda_k_leaky_relu_grad;
  table[int64_t(A::KernelId::trilu)] = &shardc_cuda_k_trilu;
  table[int64_t(A::KernelId::batch_matmul)] = &shardc_cuda_k_batch_matmul;
}
