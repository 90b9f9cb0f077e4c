//===- train_kernels.cu - CUDA backward, loss and rotary kernels ----------===//
//
// layer_norm_grad, rms_norm_grad, cross_entropy, cross_entropy_grad, rotary
// and rotary_table (runtime/abi/kernels.def); the CPU twins are
// runtime/cpu/train_kernels.cpp and runtime/cpu/kernels.cpp, whose
// arithmetic these follow step by step (double statistics and sums, the
// per-element math of runtime/math.h).
//
// No atomics: every sum has a fixed association, so results do not depend
// on block scheduling.
//  - Norm gradients: a warp a row computes the row's statistics and dx,
//    and keeps the statistics in scratch; the parameter gradients (column
//    sums over rows) are then partial sums over chunks of rows (128-bit
//    loads where the rows allow, else a thread a column; coalesced) and a
//    final sum of the chunks in order.
//  - Cross entropy: one block a row (max, then a double sum of exps), the
//    row losses in scratch, then one block for their mean.
//  - Rotary: the cos/sin table [T, D/2] is built once in scratch (as the
//    CPU kernel builds it), then the rotation is a grid-stride loop over
//    pairs.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/context.h"
#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/launch.h"
#include "runtime/math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace A = shardc::abi;
using namespace shardc::runtime;
using namespace shardc::runtime::cuda;

namespace {


/// How normColumnPartialsKernel splits the column sums of a [M, C] gradient
/// (a thread a column): `chunks` chunks of `rows` rows each (the last may be
/// shorter), enough blocks of kThreads columns to fill the device, at least
/// kMinRows rows a chunk. (columnChunks is normColumnPacksKernel's.)
ColumnChunks rowChunks(int64_t M, int64_t C) {
  constexpr int64_t kMinRows = 16;
  int64_t colBlocks = std::max<int64_t>(1, blocksFor(C, kThreads));
  int64_t chunks = std::min((deviceBlocks() + colBlocks - 1) / colBlocks,
                            (M + kMinRows - 1) / kMinRows);
  chunks = std::clamp<int64_t>(chunks, 1, 65535);
  int64_t rows = std::max<int64_t>(1, (M + chunks - 1) / chunks);
  return {colBlocks, std::max<int64_t>(1, (M + rows - 1) / rows), rows};
}

/// Sum over the warp of a double per lane; valid in every lane.
__device__ inline double warpSum(double v) {
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The norm gradients' rows: a warp a row, kRowWarps rows a block (no
/// barrier: a warp past the last row returns).
constexpr int kRowWarps = kThreads / 32;

/// The columns [c0, c0 + n) of row m of x, dy (and w) as f32, n a pack
/// or 1 (forLanePacks).
template <typename T> struct NormCols {
  float x[Pack<T>::kN], dy[Pack<T>::kN], w[Pack<T>::kN];
};
template <typename T>
__device__ inline void loadNormCols(NormCols<T> &v, const T *xr, const T *dyr,
                                    const T *w, int64_t c0, int n) {
  loadCols(xr, c0, n, v.x);
  if (dyr)
    loadCols(dyr, c0, n, v.dy);
  if (w)
    loadCols(w, c0, n, v.w);
}

/// dx's columns [c0, c0 + n) from their f32 values g as the fused residual
/// add writes them: g rounded to T (as the unfused norm gradient's output
/// was), plus the residual gradient's (drr, or null), rounded again. drr
/// may be dx: each lane reads its columns before it writes them.
/// Returns the max |dx| of the columns as stored.
template <typename T>
__device__ inline float storeGrad(T *dxr, const T *drr, int64_t c0, int n,
                                  float (&g)[Pack<T>::kN]) {
  if (drr) {
    float r[Pack<T>::kN];
    loadCols(drr, c0, n, r);
    for (int j = 0; j < n; ++j)
      g[j] = toFloat(fromFloat<T>(g[j])) + r[j];
  }
  storeCols(dxr, c0, n, g);
  float m = 0.0f;
  for (int j = 0; j < n; ++j)
    m = fmaxf(m, storedAbs<T>(g[j]));
  return m;
}

// x[M,C], w[C], dy[M,C] (dr[M,C] or null) -> dx[M,C] (+ dr), stats[M,2] =
// (mean, rstd) of each row. A warp a row, kRowWarps rows a block; a lane's
// columns are 128-bit packs when `vec` (packedRows), else single columns
// (forLanePacks); double statistics, as the CPU kernel; the row's passes
// re-read it from the cache.
template <typename T>
__global__ void layerNormGradRowsKernel(const T *xp, const T *w, const T *dyp,
                                        const T *dr, T *dx, double *stats,
                                        int64_t M, int64_t C, double eps,
                                        bool vec, float *) {
  int64_t m = blockIdx.x * int64_t(kRowWarps) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (m >= M)
    return; // warp-uniform
  const T *xr = xp + m * C, *dyr = dyp + m * C, *drr = dr ? dr + m * C : nullptr;
  NormCols<T> v;
  double s = 0;
  forLanePacks<T>(C, vec, lane, [&](int64_t c0, int n) {
    loadNormCols<T>(v, xr, nullptr, nullptr, c0, n);
    for (int j = 0; j < n; ++j)
      s += v.x[j];
  });
  double mean = warpSum(s) / C;
  double q = 0;
  forLanePacks<T>(C, vec, lane, [&](int64_t c0, int n) {
    loadNormCols<T>(v, xr, nullptr, nullptr, c0, n);
    for (int j = 0; j < n; ++j)
      q += (v.x[j] - mean) * (v.x[j] - mean);
  });
  double rstd = 1.0 / sqrt(warpSum(q) / C + eps);
  double sumG = 0, sumGX = 0;
  forLanePacks<T>(C, vec, lane, [&](int64_t c0, int n) {
    loadNormCols<T>(v, xr, dyr, w, c0, n);
    for (int j = 0; j < n; ++j) {
      double xhat = (v.x[j] - mean) * rstd, g = double(v.dy[j]) * v.w[j];
      sumG += g;
      sumGX += g * xhat;
    }
  });
  double meanG = warpSum(sumG) / C, meanGX = warpSum(sumGX) / C;
  if (lane == 0) {
    stats[2 * m] = mean;
    stats[2 * m + 1] = rstd;
  }
  forLanePacks<T>(C, vec, lane, [&](int64_t c0, int n) {
    loadNormCols<T>(v, xr, dyr, w, c0, n);
    float g[Pack<T>::kN];
    for (int j = 0; j < n; ++j) {
      double xhat = (v.x[j] - mean) * rstd, gj = double(v.dy[j]) * v.w[j];
      g[j] = float(rstd * (gj - meanG - xhat * meanGX));
    }
    storeGrad<T>(dx + m * C, drr, c0, n, g);
  });
}

// x[M,C], w[C], dy[M,C] (dr[M,C] or null) -> dx[M,C] (+ dr), stats[M] =
// 1 / rms of each row (a warp a row as layerNormGradRowsKernel, double
// sums, as the CPU kernel); with amax (zeroed before the launch), amax[0]
// = max |dx| as stored too (a warp's max, one atomic a row)
template <typename T>
__global__ void rmsNormGradRowsKernel(const T *xp, const T *w, const T *dyp,
                                      const T *dr, T *dx, double *stats,
                                      int64_t M, int64_t C, double eps,
                                      bool vec, float *amax) {
  int64_t m = blockIdx.x * int64_t(kRowWarps) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (m >= M)
    return; // warp-uniform
  const T *xr = xp + m * C, *dyr = dyp + m * C, *drr = dr ? dr + m * C : nullptr;
  NormCols<T> v;
  double ss = 0, gx = 0;
  forLanePacks<T>(C, vec, lane, [&](int64_t c0, int n) {
    loadNormCols<T>(v, xr, dyr, w, c0, n);
    for (int j = 0; j < n; ++j) {
      ss += double(v.x[j]) * v.x[j];
      gx += double(v.dy[j]) * v.w[j] * v.x[j];
    }
  });
  double r = 1.0 / sqrt(warpSum(ss) / C + eps);
  gx = warpSum(gx);
  if (lane == 0)
    stats[m] = r;
  float mx = 0.0f;
  forLanePacks<T>(C, vec, lane, [&](int64_t c0, int n) {
    loadNormCols<T>(v, xr, dyr, w, c0, n);
    float g[Pack<T>::kN];
    for (int j = 0; j < n; ++j)
      g[j] = float(r * double(v.dy[j]) * v.w[j] - r * r * r * v.x[j] * gx / C);
    mx = fmaxf(mx, storeGrad<T>(dx + m * C, drr, c0, n, g));
  });
  if (amax) { // the same in the whole warp
    for (int o = 16; o > 0; o /= 2)
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (lane == 0)
      atomicMax(reinterpret_cast<int *>(amax), __float_as_int(mx));
  }
}

// x[M,C], dy[M,C], stats of the rows -> partial column sums over chunk
// blockIdx.y of `rows` rows: pw[chunks,C] (dw), pb[chunks,C] (db, layer
// norm only). A thread a column, rows in order.
template <bool Layer, typename T>
__global__ void normColumnPartialsKernel(const T *x, const T *dy,
                                         const double *stats, double *pw,
                                         double *pb, int64_t M, int64_t C,
                                         int64_t rows) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= C)
    return;
  int64_t m0 = blockIdx.y * rows, m1 = m0 + rows < M ? m0 + rows : M;
  double sw = 0, sb = 0;
  for (int64_t m = m0; m < m1; ++m) {
    float xv = toFloat(x[m * C + c]), g = toFloat(dy[m * C + c]);
    if (Layer) {
      double xhat = (xv - stats[2 * m]) * stats[2 * m + 1];
      sw += double(g) * xhat;
      sb += g;
    } else {
      sw += double(g) * xv * stats[m];
    }
  }
  pw[blockIdx.y * C + c] = sw;
  if (Layer)
    pb[blockIdx.y * C + c] = sb;
}

// normColumnPartialsKernel's sums with 128-bit loads (x and dy
// packAligned): kColSlots x kRowLanes threads a block over kColSlots * kN
// columns, each lane's rows in order, then the lanes in order (columnChunks)
template <bool Layer, typename T>
__global__ void normColumnPacksKernel(const T *x, const T *dy,
                                      const double *stats, double *pw,
                                      double *pb, int64_t M, int64_t C,
                                      int64_t rows) {
  constexpr int kN = Pack<T>::kN;
  int slot = threadIdx.x % kColSlots, lane = threadIdx.x / kColSlots;
  int64_t v = blockIdx.x * int64_t(kColSlots) + slot; // the pack in a row
  bool live = v * kN < C;
  int64_t m0 = blockIdx.y * rows, m1 = m0 + rows < M ? m0 + rows : M;
  double sw[kN] = {}, sb[kN] = {};
  if (live) {
#pragma unroll 2
    for (int64_t m = m0 + lane; m < m1; m += kRowLanes) {
      Pack<T> xp, gp;
      xp.load(x + m * C, v);
      gp.load(dy + m * C, v);
      for (int j = 0; j < kN; ++j) {
        if (Layer) {
          double xhat = (xp.v[j] - stats[2 * m]) * stats[2 * m + 1];
          sw[j] += double(gp.v[j]) * xhat;
          sb[j] += gp.v[j];
        } else {
          sw[j] += double(gp.v[j]) * xp.v[j] * stats[m];
        }
      }
    }
  }
  sumRowLanes<kN>(sw);
  if (Layer)
    sumRowLanes<kN>(sb);
  if (lane == 0 && live)
    for (int j = 0; j < kN; ++j) {
      pw[blockIdx.y * C + v * kN + j] = sw[j];
      if (Layer)
        pb[blockIdx.y * C + v * kN + j] = sb[j];
    }
}

// pw[chunks,C] (and pb) -> dw[C] (and db) = the chunks summed in order, in
// elements of W
template <typename W>
__global__ void sumChunksKernel(const double *pw, const double *pb, W *dw,
                                W *db, int64_t chunks, int64_t C) {
  FOR_EACH(c, C) {
    double sw = 0, sb = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      sw += pw[k * C + c];
      if (pb)
        sb += pb[k * C + c];
    }
    dw[c] = fromFloat<W>(float(sw));
    if (db)
      db[c] = fromFloat<W>(float(sb));
  }
}

/// The norm gradients: rows, then the parameter gradients' column sums.
/// Scratch: the row statistics, then the partial sums. dw and db are in
/// f32 whatever T when wbF32 (a cast fused in); `dr` (or null) is the
/// residual gradient added to dx.
template <typename T>
void normGrad(void *ctxPtr, int64_t stream, bool layer, void **b, int64_t M,
              int64_t C, double eps, const void *dr, bool wbF32 = false,
              float *amax = nullptr) {
  auto &ctx = *static_cast<cuda::Context *>(ctxPtr);
  cudaStream_t s = ctx.stream(stream);
  auto in = [&](int k) { return static_cast<const T *>(b[k]); };
  auto out = [&](int k) { return static_cast<T *>(b[k]); };
  const T *x = in(0), *w = in(1), *dy = in(2);
  T *dx = out(3);
  if (C == 0)
    return;
  bool packs = packAligned<T>(x, C) && packAligned<T>(dy, C);
  ColumnChunks rc = packs ? columnChunks(M, C, Pack<T>::kN) : rowChunks(M, C);
  int64_t statWords = (layer ? 2 : 1) * M;
  int64_t partials = rc.chunks * C;
  auto *stats = static_cast<double *>(ctx.scratch(
      size_t(statWords + (layer ? 2 : 1) * partials) * sizeof(double)));
  double *pw = stats + statWords, *pb = layer ? pw + partials : nullptr;
  if (M > 0) {
    auto *rows = layer ? &layerNormGradRowsKernel<T> : &rmsNormGradRowsKernel<T>;
    bool vec = packedRows<T>(C, x, w, dy, static_cast<const T *>(dr), dx);
    if (amax)
      CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), s));
    SHARDC_LAUNCH(rows, unsigned((M + kRowWarps - 1) / kRowWarps), kThreads,
                  0, s, x, w, dy, static_cast<const T *>(dr), dx, stats, M, C,
                  eps, vec, amax);
  }
  auto *columns = packs ? (layer ? &normColumnPacksKernel<true, T>
                                 : &normColumnPacksKernel<false, T>)
                        : (layer ? &normColumnPartialsKernel<true, T>
                                 : &normColumnPartialsKernel<false, T>);
  dim3 grid(unsigned(rc.colBlocks), unsigned(rc.chunks));
  SHARDC_LAUNCH(columns, grid, kThreads, 0, s, x, dy, stats, pw, pb, M, C,
                rc.rows);
  auto sums = [&](auto w) {
    using W = decltype(w);
    W *dw = static_cast<W *>(b[4]), *db = layer ? static_cast<W *>(b[5]) : nullptr;
    if (packs) {
      sumChunkColumns<W>(s, pw, pb, dw, db, rc.chunks, C);
      return;
    }
    auto *sum = &sumChunksKernel<W>;
    SHARDC_LAUNCH(sum, gridFor(C), kThreads, 0, s, pw, pb, dw, db, rc.chunks,
                  C);
  };
  if (wbF32)
    sums(float{});
  else
    sums(T{});
}

/// fn(v, row[v]) for the elements of row[0, V) the calling thread owns in a
/// block-strided loop, read as float4 when `vec` (V a multiple of 4, the
/// row 16-byte aligned; block-uniform).
template <typename Fn>
__device__ inline void forRow(const float *row, int64_t V, bool vec, Fn fn) {
  if (vec) {
    const float4 *r4 = reinterpret_cast<const float4 *>(row);
    for (int64_t j = threadIdx.x; j < V / 4; j += blockDim.x) {
      float4 q = r4[j];
      fn(4 * j, q.x);
      fn(4 * j + 1, q.y);
      fn(4 * j + 2, q.z);
      fn(4 * j + 3, q.w);
    }
    return;
  }
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    fn(v, row[v]);
}

/// The max of a row and the double sum of fastExp(row - max), as the CPU's
/// rowMax and expSum (every thread of the block calls it; the sum is valid
/// in thread 0).
__device__ inline void rowMaxExpSum(const float *row, int64_t V, bool vec,
                                    float &mx, double &sum) {
  float m = -INFINITY;
  forRow(row, V, vec, [&](int64_t, float x) { m = fmaxf(m, x); });
  mx = blockMax(m);
  double s = 0;
  float shift = mx;
  forRow(row, V, vec, [&](int64_t, float x) { s += fastExp(x - shift); });
  sum = blockSum(s);
}

// logits[N,V], t[N] -> rowLoss[N] = logsumexp(logits[n]) - logits[n, t[n]]
// (0 for ignored rows); one block a row: the max, then a double sum of
// fastExp as the CPU's expSum; a target outside [0, V) sets *bad to V
__global__ void crossEntropyLossRowsKernel(const float *logits,
                                           const int32_t *targets, int64_t V,
                                           int64_t ignore, bool vec,
                                           double *rowLoss, int64_t *bad) {
  int64_t n = blockIdx.x, t = targets[n];
  const float *row = logits + n * V;
  bool outside = t < 0 || t >= V;
  double loss = 0;
  if (t != ignore && outside) {
    if (threadIdx.x == 0)
      *bad = V;
  } else if (t != ignore) { // block-uniform: every thread meets the barriers
    float mx;
    double sum;
    rowMaxExpSum(row, V, vec, mx, sum);
    loss = log(sum) + mx - row[t];
  }
  if (threadIdx.x == 0)
    rowLoss[n] = loss;
}

// rowLoss[N], t[N] -> loss[] = mean of rowLoss over the rows not ignored, NaN
// if none (one block of kOneBlockThreads; a fixed association, so
// deterministic)
__global__ void __launch_bounds__(kOneBlockThreads)
    meanRowLossKernel(const double *rowLoss, const int32_t *targets, int64_t N,
                      int64_t ignore, float *loss) {
  double total = 0, count = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x)
    if (targets[n] != ignore) {
      total += rowLoss[n];
      count += 1;
    }
  total = blockSum(total);
  count = blockSum(count);
  if (threadIdx.x == 0)
    loss[0] = count != 0 ? float(total / int64_t(count)) : NAN;
}

// logits[N,V], t[N] -> dl[N,V] = scale (softmax - onehot(t)), zero for
// ignored rows (one block a row; float4 loads and stores with vec); a
// target outside [0, V) sets *bad to V
__global__ void crossEntropyGradRowsKernel(const float *logits,
                                           const int32_t *targets, int64_t V,
                                           int64_t ignore, bool vec,
                                           const float *scalePtr, float *dl,
                                           int64_t *bad) {
  int64_t n = blockIdx.x, t = targets[n];
  const float *row = logits + n * V;
  float *out = dl + n * V;
  if (t == ignore || t < 0 || t >= V) { // block-uniform, no barrier
    if (t != ignore && threadIdx.x == 0)
      *bad = V;
    for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
      out[v] = 0.0f;
    return;
  }
  float scale = *scalePtr;
  float mx;
  double sum;
  rowMaxExpSum(row, V, vec, mx, sum);
  __shared__ double total;
  if (threadIdx.x == 0)
    total = sum;
  __syncthreads();
  float factor = float(scale / total);
  // The exps again rather than a store and a reload: the same values.
  auto grad = [&](int64_t v, float x) {
    float p = fastExp(x - mx) * factor;
    return v == t ? p - scale : p;
  };
  if (vec) {
    const float4 *r4 = reinterpret_cast<const float4 *>(row);
    float4 *o4 = reinterpret_cast<float4 *>(out);
    for (int64_t j = threadIdx.x; j < V / 4; j += blockDim.x) {
      float4 q = r4[j];
      o4[j] = make_float4(grad(4 * j, q.x), grad(4 * j + 1, q.y),
                          grad(4 * j + 2, q.z), grad(4 * j + 3, q.w));
    }
    return;
  }
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    out[v] = grad(v, row[v]);
}

// cosT[T,half], sinT[T,half] of position t and pair k (sin negated with
// inverse), as the CPU kernel builds them
__global__ void rotaryTableKernel(float *cosT, float *sinT, int64_t T,
                                  int64_t D, double theta, bool inverse) {
  int64_t half = D / 2;
  FOR_EACH(e, T * half) {
    int64_t t = e / half, k = e % half;
    float angle = rotaryAngle(t, rotaryInvFreq(theta, k, D));
    float s = sinf(angle);
    cosT[e] = cosf(angle);
    sinT[e] = inverse ? -s : s;
  }
}

// x[B,H,T,D] (layout 1: [B,T,H,D]), cos[T,D/2], sin[T,D/2] -> y as x:
// each pair (k, k + D/2) of a row of D rotated by its position's angles
// (sin negated with negateSin); a thread a pair, consecutive threads
// consecutive k (coalesced)
template <typename X, typename Tab>
__global__ void rotateKernel(const X *x, const Tab *cosT, const Tab *sinT,
                             X *y, int64_t rows, int64_t T, int64_t H,
                             int64_t D, int64_t layout, bool negateSin,
                             float *amax) {
  int64_t half = D / 2;
  float m = 0.0f;
  FOR_EACH(e, rows * half) {
    int64_t row = e / half, k = e % half;
    int64_t at = rotaryPosition(row, T, H, layout) * half + k;
    float c = toFloat(cosT[at]), s = toFloat(sinT[at]);
    if (negateSin)
      s = -s;
    const X *xr = x + row * D;
    X *yr = y + row * D;
    float lo, hi;
    rotatePair(toFloat(xr[k]), toFloat(xr[k + half]), c, s, lo, hi);
    yr[k] = fromFloat<X>(lo);
    yr[k + half] = fromFloat<X>(hi);
    m = fmaxf(m, fmaxf(storedAbs<X>(lo), storedAbs<X>(hi)));
  }
  if (amax) // the same in every thread
    blockAmaxInto(amax, m);
}

// ids[N], tp_index[1] -> local[N] = id - r rows, mask[N] = 1 where that is
// in [0, rows), else 0 and 0 (a thread an id)
__global__ void vocabPartKernel(const int32_t *ids, const int32_t *tpIndex,
                                int64_t N, int64_t rows, int32_t *local,
                                float *mask) {
  int64_t first = int64_t(tpIndex[0]) * rows;
  FOR_EACH(n, N) {
    int64_t k = int64_t(ids[n]) - first;
    bool mine = k >= 0 && k < rows;
    local[n] = mine ? int32_t(k) : 0;
    mask[n] = mine ? 1.0f : 0.0f;
  }
}

// logits[N,V] (columns [r V, (r + 1) V) of the whole), t[N], tp_index[1] ->
// stats[N,2] = (logsumexp of the row, the target's logit where the target is
// one of this rank's columns, else 0); one block a row, as the CPU's sums
__global__ void vocabStatsRowsKernel(const float *logits,
                                     const int32_t *targets,
                                     const int32_t *tpIndex, int64_t V,
                                     bool vec, float *stats) {
  int64_t n = blockIdx.x;
  const float *row = logits + n * V;
  float mx;
  double sum;
  rowMaxExpSum(row, V, vec, mx, sum);
  if (threadIdx.x == 0) {
    int64_t t = int64_t(targets[n]) - int64_t(tpIndex[0]) * V;
    stats[2 * n] = float(log(sum) + mx);
    stats[2 * n + 1] = t >= 0 && t < V ? row[t] : 0.0f;
  }
}


// t[N], stats[tp,N,2], tp_index[1] -> loss[] = the mean over this rank's
// tokens not ignored of lse - target logit, NaN if none (one block of
// kOneBlockThreads; a fixed association)
__global__ void __launch_bounds__(kOneBlockThreads)
    vocabLossKernel(const int32_t *targets, const float *stats,
                    const int32_t *tpIndex, int64_t N, int64_t seq,
                    int64_t tp, int64_t ignore, float *loss) {
  int64_t rank = tpIndex[0];
  double total = 0, count = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    if (vocabOwner(n, seq, tp) != rank || targets[n] == ignore)
      continue;
    double lse, target;
    vocabWholeRow(stats, N, tp, n, lse, target);
    total += lse - target;
    count += 1;
  }
  total = blockSum(total);
  count = blockSum(count);
  if (threadIdx.x == 0)
    loss[0] = count != 0 ? float(total / int64_t(count)) : NAN;
}

// t[N], dloss[] -> scale[tp] = dloss / (rank r's targets not ignored), 0 if
// none; a target outside [0, whole) sets *bad to whole (one block of
// kOneBlockThreads)
__global__ void __launch_bounds__(kOneBlockThreads)
    vocabScalesKernel(const int32_t *targets, int64_t N, int64_t seq,
                      int64_t tp, int64_t ignore, int64_t whole,
                      const float *dloss, float *scale, int64_t *bad) {
  for (int64_t r = 0; r < tp; ++r) {
    double count = 0;
    for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
      int64_t t = targets[n];
      if (t != ignore && (t < 0 || t >= whole))
        *bad = whole;
      count += t != ignore && vocabOwner(n, seq, tp) == r;
    }
    count = blockSum(count);
    if (threadIdx.x == 0)
      scale[r] = count != 0 ? dloss[0] / float(int64_t(count)) : 0.0f;
  }
}

// logits[N,V], t[N], stats[tp,N,2], tp_index[1], scale[tp] -> dl[N,V] =
// scale[owner] (exp(logits - lse) - onehot) on this rank's columns, zero for
// ignored rows (one block a row)
__global__ void vocabGradRowsKernel(const float *logits, const int32_t *targets,
                                    const float *stats, const int32_t *tpIndex,
                                    const float *scale, int64_t N, int64_t V,
                                    int64_t seq, int64_t tp, int64_t ignore,
                                    float *dl) {
  int64_t n = blockIdx.x;
  const float *row = logits + n * V;
  float *out = dl + n * V;
  if (targets[n] == ignore) {
    for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
      out[v] = 0.0f;
    return;
  }
  double lse, target;
  vocabWholeRow(stats, N, tp, n, lse, target);
  float shift = float(lse), s = scale[vocabOwner(n, seq, tp)];
  int64_t t = int64_t(targets[n]) - int64_t(tpIndex[0]) * V;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    float p = fastExp(row[v] - shift) * s;
    out[v] = v == t ? p - s : p;
  }
}

} // namespace

// x[M,C], w[C], dy[M,C] (dr[M,C]) -> dx[M,C] (+ dr), dw[C], db[C] of
// layer_norm (f32 or bf16; wb_f32: dw and db in f32)
SHARDC_CUDA_KERNEL(layer_norm_grad) {
  namespace K = A::layer_norm_grad;
  withDtype(i[K::dtype], "layer_norm_grad", [&](auto t) {
    normGrad<decltype(t)>(ctx, stream, /*layer=*/true, b, i[K::M], i[K::C],
                          f[K::f::eps], i[K::add_dr] ? b[6] : nullptr,
                          i[K::wb_f32] != 0);
  });
}

// x[M,C], w[C], dy[M,C] (dr[M,C]) -> dx[M,C] (+ dr), dw[C] of rms_norm
// (f32 or bf16)
SHARDC_CUDA_KERNEL(rms_norm_grad) {
  namespace K = A::rms_norm_grad;
  withDtype(i[K::dtype], "rms_norm_grad", [&](auto t) {
    normGrad<decltype(t)>(ctx, stream, /*layer=*/false, b, i[K::M], i[K::C],
                          f[K::f::eps], i[K::add_dr] ? b[5] : nullptr,
                          /*wbF32=*/false,
                          i[K::add_dr] == 2 ? static_cast<float *>(b[6])
                                            : nullptr);
  });
}

// logits[N,V], t[N] (int32) -> loss[] = mean over rows with t != ignore of
// logsumexp(logits[n]) - logits[n, t[n]]
SHARDC_CUDA_KERNEL(cross_entropy) {
  namespace K = A::cross_entropy;
  int64_t N = i[K::N], V = i[K::V], ignore = i[K::ignore_index];
  auto &c = *static_cast<cuda::Context *>(ctx);
  cudaStream_t s = c.stream(stream);
  const int32_t *targets = static_cast<const int32_t *>(b[1]);
  // Scratch: the row losses.
  auto *rowLoss =
      static_cast<double *>(c.scratch(size_t(std::max<int64_t>(N, 1)) * 8));
  // A bad target is reported after the run (Context::checkErrors).
  bool vec = V % 4 == 0 && aligned16(b[0]);
  if (N > 0)
    SHARDC_LAUNCH(crossEntropyLossRowsKernel, unsigned(N), kThreads, 0, s,
                  F(b[0]), targets, V, ignore, vec, rowLoss,
                  c.errors + int64_t(A::KernelId::cross_entropy));
  SHARDC_LAUNCH(meanRowLossKernel, 1, kOneBlockThreads, 0, s, rowLoss, targets,
                N, ignore, F(b[2]));
}

// logits[N,V], t[N] (int32), dloss[] -> dlogits[N,V] of cross_entropy
SHARDC_CUDA_KERNEL(cross_entropy_grad) {
  namespace K = A::cross_entropy_grad;
  int64_t N = i[K::N], V = i[K::V], ignore = i[K::ignore_index];
  if (N == 0)
    return;
  auto &c = *static_cast<cuda::Context *>(ctx);
  cudaStream_t s = c.stream(stream);
  const int32_t *targets = static_cast<const int32_t *>(b[1]);
  // Scratch: the scale dloss / count.
  auto *scale = static_cast<float *>(c.scratch(16));
  SHARDC_LAUNCH(lossScaleKernel, 1, kOneBlockThreads, 0, s, targets, N, ignore,
                F(b[2]), scale);
  // A bad target is reported after the run (Context::checkErrors).
  bool vec = V % 4 == 0 && aligned16(b[0]) && aligned16(b[3]);
  SHARDC_LAUNCH(crossEntropyGradRowsKernel, unsigned(N), kThreads, 0, s,
                F(b[0]), targets, V, ignore, vec, scale, F(b[3]),
                c.errors + int64_t(A::KernelId::cross_entropy_grad));
}

// x[B,H,T,D] -> y[B,H,T,D] (layout 1: [B,T,H,D]): the halves of D rotated
// by position t (by -t with inverse)
SHARDC_CUDA_KERNEL(rotary) {
  namespace K = A::rotary;
  int64_t B = i[K::B], H = i[K::H], T = i[K::T], D = i[K::D], half = D / 2;
  int64_t rows = B * H * T;
  if (rows * half == 0)
    return;
  auto &c = *static_cast<cuda::Context *>(ctx);
  cudaStream_t s = c.stream(stream);
  // Scratch: the cos and sin tables [T, D/2].
  auto *cosT = static_cast<float *>(c.scratch(size_t(2 * T * half) * 4));
  float *sinT = cosT + T * half;
  SHARDC_LAUNCH(rotaryTableKernel, gridFor(T * half), kThreads, 0, s, cosT,
                sinT, T, D, f[K::f::theta], i[K::inverse] != 0);
  float *amax = i[K::amax] ? static_cast<float *>(b[2]) : nullptr;
  if (amax)
    CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), s));
  withDtype(i[K::dtype], "rotary", [&](auto t) {
    using X = decltype(t);
    auto *kernel = &rotateKernel<X, float>;
    SHARDC_LAUNCH(kernel, gridFor(rows * half), kThreads, 0, s,
                  static_cast<const X *>(b[0]), cosT, sinT,
                  static_cast<X *>(b[1]), rows, T, H, D, i[K::layout], false,
                  amax);
  });
}

// x[B,H,T,D], cos[T,D/2], sin[T,D/2] -> y[B,H,T,D] (layout 1: x and y
// [B,T,H,D]): the halves of D rotated by the tables' angles (their
// opposites with inverse)
SHARDC_CUDA_KERNEL(rotary_table) {
  namespace K = A::rotary_table;
  int64_t B = i[K::B], H = i[K::H], T = i[K::T], D = i[K::D];
  int64_t rows = B * H * T;
  if (rows * (D / 2) == 0)
    return;
  withDtype(i[K::dtype], "rotary_table", [&](auto t) {
    using X = decltype(t);
    auto *kernel = &rotateKernel<X, X>;
    auto in = [&](int k) { return static_cast<const X *>(b[k]); };
    SHARDC_LAUNCH(kernel, gridFor(rows * (D / 2)), kThreads, 0,
                  streamOf(ctx, stream), in(0), in(1), in(2),
                  static_cast<X *>(b[3]), rows, T, H, D, i[K::layout],
                  i[K::inverse] != 0, static_cast<float *>(nullptr));
  });
}

// ids[N], tp_index[1] -> local[N], mask[N] (the vocabulary-parallel
// embedding's rows)
SHARDC_CUDA_KERNEL(vocab_part) {
  namespace K = A::vocab_part;
  int64_t N = i[K::N];
  if (N == 0)
    return;
  SHARDC_LAUNCH(vocabPartKernel, gridFor(N), kThreads, 0,
                streamOf(ctx, stream), static_cast<const int32_t *>(b[0]),
                static_cast<const int32_t *>(b[1]), N, i[K::rows],
                static_cast<int32_t *>(b[2]), F(b[3]));
}

// logits[N,V], t[N], tp_index[1] -> stats[N,2]
SHARDC_CUDA_KERNEL(vocab_ce_stats) {
  namespace K = A::vocab_ce_stats;
  int64_t N = i[K::N], V = i[K::V];
  if (N == 0)
    return;
  bool vec = V % 4 == 0 && aligned16(b[0]);
  SHARDC_LAUNCH(vocabStatsRowsKernel, unsigned(N), kThreads, 0,
                streamOf(ctx, stream), F(b[0]),
                static_cast<const int32_t *>(b[1]),
                static_cast<const int32_t *>(b[2]), V, vec, F(b[3]));
}

// t[N], stats[tp,N,2], tp_index[1] -> loss[] (this rank's tokens' mean)
SHARDC_CUDA_KERNEL(vocab_ce) {
  namespace K = A::vocab_ce;
  SHARDC_LAUNCH(vocabLossKernel, 1, kOneBlockThreads, 0, streamOf(ctx, stream),
                static_cast<const int32_t *>(b[0]), F(b[1]),
                static_cast<const int32_t *>(b[2]), i[K::N], i[K::seq],
                i[K::tp], i[K::ignore_index], F(b[3]));
}

// logits[N,V], t[N], stats[tp,N,2], tp_index[1], dloss[] -> dlogits[N,V]
SHARDC_CUDA_KERNEL(vocab_ce_grad) {
  namespace K = A::vocab_ce_grad;
  int64_t N = i[K::N], V = i[K::V], seq = i[K::seq], tp = i[K::tp],
          ignore = i[K::ignore_index];
  if (N == 0)
    return;
  auto &c = *static_cast<cuda::Context *>(ctx);
  cudaStream_t s = c.stream(stream);
  const auto *targets = static_cast<const int32_t *>(b[1]);
  // Scratch: each owner rank's scale dloss / count.
  auto *scale = static_cast<float *>(c.scratch(size_t(tp) * 4));
  // A bad target is reported after the run (Context::checkErrors).
  SHARDC_LAUNCH(vocabScalesKernel, 1, kOneBlockThreads, 0, s, targets, N, seq,
                tp, ignore, V * tp, F(b[4]), scale,
                c.errors + int64_t(A::KernelId::vocab_ce_grad));
  SHARDC_LAUNCH(vocabGradRowsKernel, unsigned(N), kThreads, 0, s, F(b[0]),
                targets, F(b[2]), static_cast<const int32_t *>(b[3]), scale,
                N, V, seq, tp, ignore, F(b[5]));
}

void shardc::runtime::cuda::addTrainKernels(KernelFn *table) {
  table[int64_t(A::KernelId::layer_norm_grad)] = &shardc_cuda_k_layer_norm_grad;
  table[int64_t(A::KernelId::rms_norm_grad)] = &shardc_cuda_k_rms_norm_grad;
  table[int64_t(A::KernelId::cross_entropy)] = &shardc_cuda_k_cross_entropy;
  table[int64_t(A::KernelId::cross_entropy_grad)] =
      &shardc_cuda_k_cross_entropy_grad;
  table[int64_t(A::KernelId::rotary)] = &shardc_cuda_k_rotary;
  table[int64_t(A::KernelId::rotary_table)] = &shardc_cuda_k_rotary_table;
  table[int64_t(A::KernelId::vocab_part)] = &shardc_cuda_k_vocab_part;
  table[int64_t(A::KernelId::vocab_ce_stats)] = &shardc_cuda_k_vocab_ce_stats;
  table[int64_t(A::KernelId::vocab_ce)] = &shardc_cuda_k_vocab_ce;
  table[int64_t(A::KernelId::vocab_ce_grad)] = &shardc_cuda_k_vocab_ce_grad;
}
