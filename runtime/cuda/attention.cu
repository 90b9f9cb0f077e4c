//===- attention.cu - fused attention kernels of the runtime ABI ----------===//
//
// attention and attention_grad (runtime/abi/kernels.def) as FlashAttention-2
// style fused kernels in f32 on CUDA cores; the CPU twins are
// runtime/cpu/kernels.cpp and runtime/cpu/train_kernels.cpp.
//
// Every kernel is a block of 256 threads seen as 16 x 16: ty = tid / 16 owns
// RPT consecutive rows of the block's row tile (16 RPT rows), tx = tid % 16
// owns the columns tx + 16 j of the score tile (16 CPT columns) and of the
// head dimension (DMAX / 16 of them). The 16 threads of a row are half a
// warp, so row maxima and sums are shuffles among them. Tiles of queries and
// keys live in shared memory (rows padded to an odd length, so the threads
// of a half-warp reading 16 different rows hit 16 different banks); scores
// and probabilities live in registers, and a tile of them in shared memory
// only between its two products. No [T, S] matrix is ever in global memory.
//
//  - attention: a block per (query tile, head, batch); online softmax (a
//    running max and sum per row, in the log2 domain: exp2f of scores
//    scaled by scale * log2(e)) over the key tiles; o = acc / sum.
//  - attention_grad: three kernels, no atomics, deterministic:
//     1. the forward again per query tile, writing per row lse (log2
//        domain) and dsum = rowsum(dO * O) to scratch instead of O;
//     2. a block per (key tile, kv head, batch) accumulating dK and dV in
//        registers over the query heads of its group and their query tiles;
//     3. a block per (query tile, head, batch) accumulating dQ over the key
//        tiles.
//  - Causal (top-left aligned: query t sees keys s <= t): key tiles wholly
//    above the diagonal are never visited (forward, dQ: the key loop ends at
//    the tile's last query; dK/dV: the query loop starts at the tile holding
//    the first key); only tiles crossing the diagonal are masked. Query
//    tiles are issued longest first.
//  - Grouped-query heads: head h reads kv head h / (H / G); the dK/dV block
//    of kv head g sums over heads g H/G .. (g+1) H/G - 1 in order.
//
// Head dimensions up to kMaxHeadDim (256), beyond: a fatal error naming
// the kernel. Tile shapes by DMAX, the smallest of 64, 128, 256 at least D
// (Tiles below). Shared memory a block at D = DMAX, in bytes (forward and
// the lse/dsum pass, dK/dV, dQ): DMAX 64: 49920, 67072, 58368; 128: 82688,
// 116224, 107520; 256: 107136, 140288, 135808 -- within sm_80's (163 KiB)
// and sm_90's (227 KiB) opt-in limits, which each kernel asks for once.
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/launch.h"
#include "runtime/cuda/sdpa.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace A = shardc::abi;
using namespace shardc::runtime;
using namespace shardc::runtime::cuda;

namespace {

constexpr int kAttnThreads = 256; ///< 16 rows of 16 threads
constexpr int kLanes = 16;        ///< threads of a row, half a warp
constexpr int kMaxHeadDim = 256;

/// Threads per rows (RPT) and columns (CPT) of each kernel's tiles, by the
/// head dimension bound DMAX: row tile 16 RPT, column tile 16 CPT.
///   forward, lse/dsum:  rows = queries, columns = keys
///   dK/dV:              rows = keys,    columns = queries
///   dQ:                 rows = queries, columns = keys
template <int DMAX> struct Tiles;
template <> struct Tiles<64> {
  static constexpr int kFwdRpt = 4, kFwdCpt = 4, kKvRpt = 4, kKvCpt = 2,
                       kQRpt = 4, kQCpt = 2;
};
template <> struct Tiles<128> {
  static constexpr int kFwdRpt = 4, kFwdCpt = 4, kKvRpt = 4, kKvCpt = 2,
                       kQRpt = 4, kQCpt = 2;
};
template <> struct Tiles<256> {
  static constexpr int kFwdRpt = 4, kFwdCpt = 2, kKvRpt = 2, kKvCpt = 2,
                       kQRpt = 2, kQCpt = 2;
};

/// Row stride of a [rows, D] tile in shared memory: odd, so 16 threads
/// reading one element of 16 different rows use 16 different banks.
__host__ __device__ inline int tileStride(int D) { return D | 1; }

// Shared memory of each kernel, in floats (the kernels carve it in this
// order).
__host__ __device__ inline int forwardSharedFloats(int rows, int cols, int D) {
  return (rows + cols) * tileStride(D) + rows * (cols + 1);
}
__host__ __device__ inline int gradKVSharedFloats(int rows, int cols, int D) {
  return 2 * (rows + cols) * tileStride(D) + 2 * rows * (cols + 1) + 2 * cols;
}
__host__ __device__ inline int gradQSharedFloats(int rows, int cols, int D) {
  return 2 * (rows + cols) * tileStride(D) + rows * (cols + 1);
}

/// Element strides of q, k, v and o in global memory (dO as o, dq as q,
/// dk as k, dv as v): abi::attentionStrides of the kernels' layout.
struct Layout {
  A::AttentionStrides q, k, v, o;
};

/// dst[r, d] (row stride ld) = src[(row0 + r) * stride + d] for r < rows,
/// d < D; rows at or past `limit` are zero (so a masked probability of 0
/// never meets a stale NaN). Coalesced within a row: consecutive threads
/// read consecutive elements.
template <typename E>
__device__ inline void loadRows(float *dst, int ld, const E *src, int row0,
                                int rows, int limit, int D, int64_t stride) {
  for (int e = threadIdx.x; e < rows * D; e += kAttnThreads) {
    int r = e / D, d = e - r * D;
    dst[r * ld + d] = row0 + r < limit
                          ? toFloat(src[int64_t(row0 + r) * stride + d])
                          : 0.0f;
  }
}

/// Max and sum over the 16 threads of a row (xor butterfly: every thread
/// of the row ends with the same bits).
__device__ inline float rowMax16(float v) {
  for (int o = kLanes / 2; o > 0; o /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ inline float rowSum16(float v) {
  for (int o = kLanes / 2; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// s[i, j] = a[ty RPT + i, :] . b[tx + 16 j, :] over D (rows of stride ld).
template <int RPT, int CPT>
__device__ inline void tileDot(float (&s)[RPT][CPT], const float *a,
                               const float *b, int ld, int D) {
  int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
#pragma unroll
  for (int r = 0; r < RPT; ++r)
#pragma unroll
    for (int c = 0; c < CPT; ++c)
      s[r][c] = 0.0f;
  for (int k = 0; k < D; ++k) {
    float av[RPT], bv[CPT];
#pragma unroll
    for (int r = 0; r < RPT; ++r)
      av[r] = a[(ty * RPT + r) * ld + k];
#pragma unroll
    for (int c = 0; c < CPT; ++c)
      bv[c] = b[(tx + kLanes * c) * ld + k];
#pragma unroll
    for (int r = 0; r < RPT; ++r)
#pragma unroll
      for (int c = 0; c < CPT; ++c)
        s[r][c] += av[r] * bv[c];
  }
}

/// Two products in one pass over D: s = a b^T and t = a2 b2^T, per thread
/// as tileDot.
template <int RPT, int CPT>
__device__ inline void tileDot2(float (&s)[RPT][CPT], float (&t)[RPT][CPT],
                                const float *a, const float *b, const float *a2,
                                const float *b2, int ld, int D) {
  int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
#pragma unroll
  for (int r = 0; r < RPT; ++r)
#pragma unroll
    for (int c = 0; c < CPT; ++c)
      s[r][c] = t[r][c] = 0.0f;
  for (int k = 0; k < D; ++k) {
    float av[RPT], bv[CPT], a2v[RPT], b2v[CPT];
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      av[r] = a[(ty * RPT + r) * ld + k];
      a2v[r] = a2[(ty * RPT + r) * ld + k];
    }
#pragma unroll
    for (int c = 0; c < CPT; ++c) {
      bv[c] = b[(tx + kLanes * c) * ld + k];
      b2v[c] = b2[(tx + kLanes * c) * ld + k];
    }
#pragma unroll
    for (int r = 0; r < RPT; ++r)
#pragma unroll
      for (int c = 0; c < CPT; ++c) {
        s[r][c] += av[r] * bv[c];
        t[r][c] += a2v[r] * b2v[c];
      }
  }
}

/// acc[i, jd] += sum_{c < n} p[ty RPT + i, c] v[c, tx + 16 jd] for the head
/// dimensions tx + 16 jd < D (p of row stride ldp, v of row stride ld).
template <int RPT, int DJ>
__device__ inline void tileAccumulate(float (&acc)[RPT][DJ], const float *p,
                                      int ldp, const float *v, int ld, int n,
                                      int D) {
  int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
  for (int c = 0; c < n; ++c) {
    float pv[RPT];
#pragma unroll
    for (int r = 0; r < RPT; ++r)
      pv[r] = p[(ty * RPT + r) * ldp + c];
#pragma unroll
    for (int j = 0; j < DJ; ++j) {
      int d = tx + kLanes * j;
      if (d < D) {
        float x = v[c * ld + d];
#pragma unroll
        for (int r = 0; r < RPT; ++r)
          acc[r][j] += pv[r] * x;
      }
    }
  }
}

/// The keys a query tile [r0, r0 + rows) can see: all S, or with causal
/// masking those up to its last query (tiles beyond are skipped).
__device__ inline int keysSeen(int r0, int rows, int T, int S, bool causal) {
  if (!causal)
    return S;
  int last = r0 + rows < T ? r0 + rows : T; // one past the tile's last query
  return last < S ? last : S;
}

// q[B,H,T,D], k[B,G,S,D], v[B,G,S,D] -> o[B,H,T,D], o = softmax(scale q k^T
// + causal mask) v, head h reading kv head h / (H/G).
// With kStats (attention_grad's first pass) also dO[B,H,T,D] in, and instead
// of o: lse[B,H,T] = log2 sum_s exp2(scaleLog2 q.k_s) and
// dsum[B,H,T] = rowsum(dO * o).
// Grid (query tiles, H, B); block kAttnThreads; shared memory
// forwardSharedFloats(16 RPT, 16 CPT, D) floats.
template <int DMAX, int RPT, int CPT, bool kStats, typename E>
__global__ void __launch_bounds__(kAttnThreads)
    attentionForwardKernel(const E *q, const E *k, const E *v, const E *dOut,
                           E *o, float *lse, float *dsum,
                           int H, int G, int T, int S, int D, bool causal,
                           float scaleLog2, Layout L) {
  constexpr int BR = kLanes * RPT, BC = kLanes * CPT, DJ = DMAX / kLanes;
  const int ld = tileStride(D), ldp = BC + 1;
  SHARDC_DYNAMIC_SHARED(float, smem, forwardSharedFloats(BR, BC, D));
  float *sQ = smem, *sKV = sQ + BR * ld, *sP = sKV + BC * ld;
  const int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
  const int h = blockIdx.y, b = blockIdx.z, kvh = h / (H / G);
  const int64_t bh = int64_t(b) * H + h;
  const int64_t qOff = b * L.q.b + h * L.q.h, oOff = b * L.o.b + h * L.o.h,
                kOff = b * L.k.b + kvh * L.k.h, vOff = b * L.v.b + kvh * L.v.h;
  // Longest (causal) tiles first.
  const int r0 = (gridDim.x - 1 - blockIdx.x) * BR;

  loadRows(sQ, ld, q + qOff, r0, BR, T, D, L.q.t);
  float m[RPT], l[RPT], acc[RPT][DJ];
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int j = 0; j < DJ; ++j)
      acc[r][j] = 0.0f;
  }
  const int kEnd = keysSeen(r0, BR, T, S, causal);
  for (int c0 = 0; c0 < kEnd; c0 += BC) {
    __syncthreads(); // sQ loaded; the previous tile's sKV and sP are free
    loadRows(sKV, ld, k + kOff, c0, BC, S, D, L.k.t);
    __syncthreads();
    float s[RPT][CPT];
    tileDot(s, sQ, sKV, ld, D);
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      int t = r0 + ty * RPT + r;
      float mx = -INFINITY;
      bool seen[CPT];
#pragma unroll
      for (int c = 0; c < CPT; ++c) {
        int key = c0 + tx + kLanes * c;
        seen[c] = key < S && !(causal && key > t);
        if (seen[c])
          mx = fmaxf(mx, s[r][c] * scaleLog2);
      }
      float mNew = fmaxf(m[r], rowMax16(mx));
      float base = mNew == -INFINITY ? 0.0f : mNew; // a row with no key yet
      float alpha = exp2f(m[r] - base), sum = 0.0f;
#pragma unroll
      for (int c = 0; c < CPT; ++c) {
        // One rounding for the exponent (fmaf), as on the GPU's FMA.
        s[r][c] = seen[c] ? exp2f(fmaf(s[r][c], scaleLog2, -base)) : 0.0f;
        sum += s[r][c];
      }
      l[r] = l[r] * alpha + rowSum16(sum);
      m[r] = mNew;
#pragma unroll
      for (int j = 0; j < DJ; ++j)
        acc[r][j] *= alpha;
    }
    __syncthreads(); // every thread is done with the keys in sKV
#pragma unroll
    for (int r = 0; r < RPT; ++r)
#pragma unroll
      for (int c = 0; c < CPT; ++c)
        sP[(ty * RPT + r) * ldp + tx + kLanes * c] = s[r][c];
    loadRows(sKV, ld, v + vOff, c0, BC, S, D, L.v.t);
    __syncthreads();
    int n = kEnd - c0 < BC ? kEnd - c0 : BC;
    tileAccumulate(acc, sP, ldp, sKV, ld, n, D);
  }

#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    int t = r0 + ty * RPT + r;
    float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f; // S == 0: o = 0, as the CPU
    if constexpr (!kStats) {
      if (t < T)
#pragma unroll
        for (int j = 0; j < DJ; ++j) {
          int d = tx + kLanes * j;
          if (d < D)
            o[oOff + int64_t(t) * L.o.t + d] = fromFloat<E>(acc[r][j] * inv);
        }
    } else {
      float dot = 0.0f;
      if (t < T)
#pragma unroll
        for (int j = 0; j < DJ; ++j) {
          int d = tx + kLanes * j;
          if (d < D)
            dot += toFloat(dOut[oOff + int64_t(t) * L.o.t + d]) *
                   (acc[r][j] * inv);
        }
      dot = rowSum16(dot);
      if (tx == 0 && t < T) {
        lse[bh * T + t] = l[r] > 0.0f ? m[r] + log2f(l[r]) : INFINITY;
        dsum[bh * T + t] = dot;
      }
    }
  }
}

// q[B,H,T,D], k[B,G,S,D], v[B,G,S,D], dO[B,H,T,D], lse[B,H,T],
// dsum[B,H,T] -> dk[B,G,S,D], dv[B,G,S,D]:
//   dv = sum_h P_h^T dO_h, dk = scale sum_h dS_h^T Q_h over the H/G query
//   heads h of kv head g, P = exp2(scaleLog2 q k^T - lse) (masked),
//   dS = P (dO v^T - dsum).
// Grid (key tiles, G, B); block kAttnThreads; shared memory
// gradKVSharedFloats(16 RPT, 16 CPT, D) floats.
template <int DMAX, int RPT, int CPT, typename E>
__global__ void __launch_bounds__(kAttnThreads)
    attentionGradKVKernel(const E *q, const E *k, const E *v, const E *dOut,
                          const float *lse, const float *dsum, E *dk, E *dv,
                          int H, int G,
                          int T, int S, int D, bool causal, float scaleLog2,
                          float scale, Layout L) {
  constexpr int BK = kLanes * RPT, BQ = kLanes * CPT, DJ = DMAX / kLanes;
  const int ld = tileStride(D), ldp = BQ + 1;
  SHARDC_DYNAMIC_SHARED(float, smem, gradKVSharedFloats(BK, BQ, D));
  float *sK = smem, *sV = sK + BK * ld, *sQ = sV + BK * ld, *sdO = sQ + BQ * ld,
        *sP = sdO + BQ * ld, *sdS = sP + BK * ldp, *sL = sdS + BK * ldp,
        *sDs = sL + BQ;
  const int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
  const int g = blockIdx.y, b = blockIdx.z, group = H / G;
  const int64_t kOff = b * L.k.b + g * L.k.h, vOff = b * L.v.b + g * L.v.h;
  const int c0 = blockIdx.x * BK;

  loadRows(sK, ld, k + kOff, c0, BK, S, D, L.k.t);
  loadRows(sV, ld, v + vOff, c0, BK, S, D, L.v.t);
  float aK[RPT][DJ], aV[RPT][DJ];
#pragma unroll
  for (int r = 0; r < RPT; ++r)
#pragma unroll
    for (int j = 0; j < DJ; ++j)
      aK[r][j] = aV[r][j] = 0.0f;
  // Causal: queries before the tile's first key see none of it.
  const int qStart = causal ? c0 / BQ * BQ : 0;
  for (int h = g * group; h < (g + 1) * group; ++h) {
    const int64_t bh = int64_t(b) * H + h, qOff = b * L.q.b + h * L.q.h,
                  oOff = b * L.o.b + h * L.o.h;
    for (int r0 = qStart; r0 < T; r0 += BQ) {
      __syncthreads(); // the previous tile's sQ, sdO, sP, sdS are free
      loadRows(sQ, ld, q + qOff, r0, BQ, T, D, L.q.t);
      loadRows(sdO, ld, dOut + oOff, r0, BQ, T, D, L.o.t);
      for (int x = threadIdx.x; x < BQ; x += kAttnThreads) {
        bool in = r0 + x < T;
        sL[x] = in ? lse[bh * T + r0 + x] : INFINITY;
        sDs[x] = in ? dsum[bh * T + r0 + x] : 0.0f;
      }
      __syncthreads();
      float s[RPT][CPT], dp[RPT][CPT];
      tileDot2(s, dp, sK, sQ, sV, sdO, ld, D); // k q^T, v dO^T
#pragma unroll
      for (int r = 0; r < RPT; ++r)
#pragma unroll
        for (int c = 0; c < CPT; ++c) {
          int key = c0 + ty * RPT + r, col = tx + kLanes * c, t = r0 + col;
          bool seen = key < S && t < T && !(causal && key > t);
          float p = seen ? exp2f(fmaf(s[r][c], scaleLog2, -sL[col])) : 0.0f;
          sP[(ty * RPT + r) * ldp + col] = p;
          sdS[(ty * RPT + r) * ldp + col] = p * (dp[r][c] - sDs[col]);
        }
      __syncthreads();
      int n = T - r0 < BQ ? T - r0 : BQ;
      tileAccumulate(aV, sP, ldp, sdO, ld, n, D);
      tileAccumulate(aK, sdS, ldp, sQ, ld, n, D);
    }
  }
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    int key = c0 + ty * RPT + r;
    if (key < S)
#pragma unroll
      for (int j = 0; j < DJ; ++j) {
        int d = tx + kLanes * j;
        if (d < D) {
          dk[kOff + int64_t(key) * L.k.t + d] = fromFloat<E>(aK[r][j] * scale);
          dv[vOff + int64_t(key) * L.v.t + d] = fromFloat<E>(aV[r][j]);
        }
      }
  }
}

// q[B,H,T,D], k[B,G,S,D], v[B,G,S,D], dO[B,H,T,D], lse[B,H,T],
// dsum[B,H,T] -> dq[B,H,T,D] = scale dS k, dS as in attentionGradKVKernel.
// Grid (query tiles, H, B); block kAttnThreads; shared memory
// gradQSharedFloats(16 RPT, 16 CPT, D) floats.
template <int DMAX, int RPT, int CPT, typename E>
__global__ void __launch_bounds__(kAttnThreads)
    attentionGradQKernel(const E *q, const E *k, const E *v, const E *dOut,
                         const float *lse, const float *dsum, E *dq, int H,
                         int G, int T, int S, int D, bool causal,
                         float scaleLog2, float scale, Layout L) {
  constexpr int BQ = kLanes * RPT, BK = kLanes * CPT, DJ = DMAX / kLanes;
  const int ld = tileStride(D), ldp = BK + 1;
  SHARDC_DYNAMIC_SHARED(float, smem, gradQSharedFloats(BQ, BK, D));
  float *sQ = smem, *sdO = sQ + BQ * ld, *sK = sdO + BQ * ld,
        *sV = sK + BK * ld, *sdS = sV + BK * ld;
  const int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
  const int h = blockIdx.y, b = blockIdx.z, kvh = h / (H / G);
  const int64_t bh = int64_t(b) * H + h;
  const int64_t qOff = b * L.q.b + h * L.q.h, oOff = b * L.o.b + h * L.o.h,
                kOff = b * L.k.b + kvh * L.k.h, vOff = b * L.v.b + kvh * L.v.h;
  const int r0 = (gridDim.x - 1 - blockIdx.x) * BQ; // longest tiles first

  loadRows(sQ, ld, q + qOff, r0, BQ, T, D, L.q.t);
  loadRows(sdO, ld, dOut + oOff, r0, BQ, T, D, L.o.t);
  float rowLse[RPT], rowDsum[RPT], acc[RPT][DJ];
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    int t = r0 + ty * RPT + r;
    rowLse[r] = t < T ? lse[bh * T + t] : INFINITY;
    rowDsum[r] = t < T ? dsum[bh * T + t] : 0.0f;
#pragma unroll
    for (int j = 0; j < DJ; ++j)
      acc[r][j] = 0.0f;
  }
  const int kEnd = keysSeen(r0, BQ, T, S, causal);
  for (int c0 = 0; c0 < kEnd; c0 += BK) {
    __syncthreads(); // sQ, sdO loaded; the previous tile's sK, sV, sdS free
    loadRows(sK, ld, k + kOff, c0, BK, S, D, L.k.t);
    loadRows(sV, ld, v + vOff, c0, BK, S, D, L.v.t);
    __syncthreads();
    float s[RPT][CPT], dp[RPT][CPT];
    tileDot2(s, dp, sQ, sK, sdO, sV, ld, D); // q k^T, dO v^T
#pragma unroll
    for (int r = 0; r < RPT; ++r)
#pragma unroll
      for (int c = 0; c < CPT; ++c) {
        int t = r0 + ty * RPT + r, key = c0 + tx + kLanes * c;
        bool seen = key < S && t < T && !(causal && key > t);
        float p = seen ? exp2f(fmaf(s[r][c], scaleLog2, -rowLse[r])) : 0.0f;
        sdS[(ty * RPT + r) * ldp + tx + kLanes * c] =
            p * (dp[r][c] - rowDsum[r]);
      }
    __syncthreads();
    int n = kEnd - c0 < BK ? kEnd - c0 : BK;
    tileAccumulate(acc, sdS, ldp, sK, ld, n, D);
  }
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    int t = r0 + ty * RPT + r;
    if (t < T)
#pragma unroll
      for (int j = 0; j < DJ; ++j) {
        int d = tx + kLanes * j;
        if (d < D)
          dq[qOff + int64_t(t) * L.q.t + d] = fromFloat<E>(acc[r][j] * scale);
      }
  }
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

/// The integer and float arguments shared by attention and attention_grad.
struct Shape {
  int B, H, G, T, S, D;
  bool causal;
  float scale, scaleLog2;
  int64_t layout;
  int64_t ld_q, ld_k, ld_v, ld_o; ///< row strides under abi::kAttentionRows
  Layout L;
};

/// Where attention's and attention_grad's arguments are (abi.h's enums).
struct ArgIndex {
  int64_t B, H, G, T, S, D, causal, scale, layout, ld_q, ld_k, ld_v, ld_o;
};

/// The ArgIndex of the kernel whose enum namespace is K (attention,
/// attention_grad, sdpa or sdpa_grad).
#define SHARDC_ARG_INDEX(K)                                                    \
  ArgIndex {                                                                   \
    K::B, K::H, K::G, K::T, K::S, K::D, K::causal, K::f::scale, K::layout,     \
        K::ld_q, K::ld_k, K::ld_v, K::ld_o                                     \
  }

/// The arguments of `kernel`, checked against what these kernels handle.
Shape shapeOf(const char *kernel, const ArgIndex &at, const int64_t *i,
              const double *f) {
  int64_t B = i[at.B], H = i[at.H], G = i[at.G], T = i[at.T], S = i[at.S],
          D = i[at.D];
  if (D < 1 || D > kMaxHeadDim)
    fatal("%s: head dimension D = %lld is outside the CUDA kernel's range 1 "
          "to %d",
          kernel, (long long)D, kMaxHeadDim);
  if (G < 1 || H < G || H % G != 0)
    fatal("%s: %lld query heads are not a multiple of %lld key/value heads",
          kernel, (long long)H, (long long)G);
  if (B < 0 || T < 0 || S < 0 || B > 65535 || H > 65535)
    fatal("%s: batch %lld and heads %lld must be in 0 to 65535 (grid), T = "
          "%lld and S = %lld non-negative",
          kernel, (long long)B, (long long)H, (long long)T, (long long)S);
  if (T * D > INT32_MAX || S * D > INT32_MAX)
    fatal("%s: a head of %lld x %lld or %lld x %lld elements exceeds 2^31",
          kernel, (long long)T, (long long)D, (long long)S, (long long)D);
  Shape s;
  s.B = int(B);
  s.H = int(H);
  s.G = int(G);
  s.T = int(T);
  s.S = int(S);
  s.D = int(D);
  s.causal = i[at.causal] != 0;
  s.scale = float(f[at.scale]);
  s.scaleLog2 = float(double(s.scale) * 1.4426950408889634);
  s.layout = i[at.layout];
  s.ld_q = i[at.ld_q];
  s.ld_k = i[at.ld_k];
  s.ld_v = i[at.ld_v];
  s.ld_o = i[at.ld_o];
  if (s.layout != A::kAttentionBHTD && s.layout != A::kAttentionRows)
    fatal("%s: layout code %lld is not one of the ABI's", kernel,
          (long long)s.layout);
  if (s.layout == A::kAttentionRows &&
      (s.ld_q < H * D || s.ld_o < H * D || s.ld_k < G * D || s.ld_v < G * D))
    fatal("%s: row strides %lld %lld %lld %lld are shorter than a row of "
          "heads",
          kernel, (long long)s.ld_q, (long long)s.ld_k, (long long)s.ld_v,
          (long long)s.ld_o);
  s.L = {A::attentionStrides(s.layout, H, T, D, s.ld_q),
         A::attentionStrides(s.layout, G, S, D, s.ld_k),
         A::attentionStrides(s.layout, G, S, D, s.ld_v),
         A::attentionStrides(s.layout, H, T, D, s.ld_o)};
  return s;
}

/// Calls fn with std::integral_constant<int, DMAX>: the smallest tile
/// configuration (Tiles) holding head dimension D.
template <typename Fn> void withHeadDim(int D, Fn &&fn) {
  if (D <= 64)
    fn(std::integral_constant<int, 64>{});
  else if (D <= 128)
    fn(std::integral_constant<int, 128>{});
  else
    fn(std::integral_constant<int, 256>{});
}

/// Lets `Kernel` use `maxBytes` of dynamic shared memory (once per kernel:
/// the first, uncaptured run of a program sets it), after checking the
/// device allows that much.
template <auto Kernel>
void allowSharedMemory(const char *name, size_t maxBytes) {
  static const bool done = [&] {
    int device = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(
        &optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (maxBytes > size_t(optin))
      fatal("%s: its tiles need %zu bytes of shared memory, the device "
            "allows %d a block",
            name, maxBytes, optin);
    CUDA_CHECK(cudaFuncSetAttribute(
        Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(maxBytes)));
    return true;
  }();
  (void)done;
}

unsigned tilesOf(int n, int tile) { return unsigned((n + tile - 1) / tile); }

/// The forward kernel (kStats: attention_grad's lse/dsum pass) for T > 0.
template <int DMAX, bool kStats, typename T>
void launchForward(const char *name, const Shape &s, const T *q, const T *k,
                   const T *v, const T *dOut, T *o, float *lse, float *dsum,
                   cudaStream_t stream) {
  constexpr int RPT = Tiles<DMAX>::kFwdRpt, CPT = Tiles<DMAX>::kFwdCpt;
  constexpr auto kernel = &attentionForwardKernel<DMAX, RPT, CPT, kStats, T>;
  allowSharedMemory<kernel>(
      name,
      sizeof(float) * forwardSharedFloats(kLanes * RPT, kLanes * CPT, DMAX));
  auto *attentionForward = kernel;
  size_t bytes =
      sizeof(float) * forwardSharedFloats(kLanes * RPT, kLanes * CPT, s.D);
  dim3 grid(tilesOf(s.T, kLanes * RPT), unsigned(s.H), unsigned(s.B));
  SHARDC_LAUNCH(attentionForward, grid, kAttnThreads, bytes, stream, q, k, v,
                dOut, o, lse, dsum, s.H, s.G, s.T, s.S, s.D, s.causal,
                s.scaleLog2, s.L);
}

} // namespace

// q[B,H,T,D], k[B,G,S,D], v[B,G,S,D] -> o[B,H,T,D] (f32, or bf16 read and
// written with f32 math)
SHARDC_CUDA_KERNEL(attention) {
  namespace K = A::attention;
  Shape s = shapeOf(
      "attention", SHARDC_ARG_INDEX(K),
      i, f);
  if (int64_t(s.B) * s.H * s.T == 0)
    return; // o is empty
  cudaStream_t st = streamOf(ctx, stream);
  withDtype(i[K::dtype], "attention", [&](auto t) {
    using T = decltype(t);
    auto in = [&](int k) { return static_cast<const T *>(b[k]); };
    withHeadDim(s.D, [&](auto dmax) {
      launchForward<decltype(dmax)::value, false, T>(
          "attention", s, in(0), in(1), in(2), nullptr, static_cast<T *>(b[3]),
          nullptr, nullptr, st);
    });
  });
}

namespace {
/// Zeroes an operand of `heads` heads of `rows` rows under s's layout:
/// dense, or B * rows rows of heads * D elements ld apart.
template <typename T>
void zeroOperand(const Shape &s, T *p, int heads, int rows, int64_t ld,
                 cudaStream_t st) {
  size_t row = sizeof(T) * size_t(heads) * s.D;
  if (s.layout == A::kAttentionBHTD)
    CUDA_CHECK(cudaMemsetAsync(p, 0, row * size_t(s.B) * rows, st));
  else if (int64_t(s.B) * rows > 0)
    CUDA_CHECK(cudaMemset2DAsync(p, sizeof(T) * size_t(ld), 0, row,
                                 size_t(s.B) * rows, st));
}

/// attention_grad on elements of T: the lse/dsum pass, dK and dV, dQ.
template <typename T>
void attentionGrad(cuda::Context &c, cudaStream_t st, const Shape &s,
                   void **b) {
  auto in = [&](int k) { return static_cast<const T *>(b[k]); };
  auto out = [&](int k) { return static_cast<T *>(b[k]); };
  const T *q = in(0), *k = in(1), *v = in(2), *dOut = in(3);
  T *dq = out(4), *dk = out(5), *dv = out(6);
  int64_t rows = int64_t(s.B) * s.H * s.T;
  if (s.B == 0)
    return; // every output is empty
  if (rows == 0 || s.S == 0) {
    // No query or no key: every gradient is zero, as the CPU's.
    zeroOperand<T>(s, dk, s.G, s.S, s.ld_k, st);
    zeroOperand<T>(s, dv, s.G, s.S, s.ld_v, st);
    zeroOperand<T>(s, dq, s.H, s.T, s.ld_q, st);
    return;
  }
  auto *lse = static_cast<float *>(c.scratch(2 * sizeof(float) * rows));
  float *dsum = lse + rows;
  withHeadDim(s.D, [&](auto dmax) {
    constexpr int DMAX = decltype(dmax)::value;
    using Cfg = Tiles<DMAX>;
    launchForward<DMAX, true, T>("attention_grad", s, q, k, v, dOut, nullptr,
                                 lse, dsum, st);

    constexpr int kvR = Cfg::kKvRpt * kLanes, kvC = Cfg::kKvCpt * kLanes;
    constexpr auto kvKernel =
        &attentionGradKVKernel<DMAX, Cfg::kKvRpt, Cfg::kKvCpt, T>;
    allowSharedMemory<kvKernel>(
        "attention_grad", sizeof(float) * gradKVSharedFloats(kvR, kvC, DMAX));
    auto *attentionGradKV = kvKernel;
    SHARDC_LAUNCH(
        attentionGradKV, dim3(tilesOf(s.S, kvR), unsigned(s.G), unsigned(s.B)),
        kAttnThreads, sizeof(float) * gradKVSharedFloats(kvR, kvC, s.D), st, q,
        k, v, dOut, lse, dsum, dk, dv, s.H, s.G, s.T, s.S, s.D, s.causal,
        s.scaleLog2, s.scale, s.L);

    constexpr int qR = Cfg::kQRpt * kLanes, qC = Cfg::kQCpt * kLanes;
    constexpr auto qKernel =
        &attentionGradQKernel<DMAX, Cfg::kQRpt, Cfg::kQCpt, T>;
    allowSharedMemory<qKernel>("attention_grad",
                               sizeof(float) * gradQSharedFloats(qR, qC, DMAX));
    auto *attentionGradQ = qKernel;
    SHARDC_LAUNCH(attentionGradQ,
                  dim3(tilesOf(s.T, qR), unsigned(s.H), unsigned(s.B)),
                  kAttnThreads, sizeof(float) * gradQSharedFloats(qR, qC, s.D),
                  st, q, k, v, dOut, lse, dsum, dq, s.H, s.G, s.T, s.S, s.D,
                  s.causal, s.scaleLog2, s.scale, s.L);
  });
}
} // namespace

// q[B,H,T,D], k[B,G,S,D], v[B,G,S,D], dO[B,H,T,D] -> dq[B,H,T,D],
// dk[B,G,S,D], dv[B,G,S,D] (f32, or bf16 with f32 math); scratch: lse[B,H,T],
// dsum[B,H,T]
SHARDC_CUDA_KERNEL(attention_grad) {
  namespace K = A::attention_grad;
  Shape s = shapeOf(
      "attention_grad",
      SHARDC_ARG_INDEX(K), i, f);
  auto &c = *static_cast<cuda::Context *>(ctx);
  withDtype(i[K::dtype], "attention_grad", [&](auto t) {
    attentionGrad<decltype(t)>(c, c.stream(stream), s, b);
  });
}

namespace {
/// sdpa's and sdpa_grad's shape (their ints are attention's, then
/// ws_bytes), checked as attention's; bf16 only.
Shape sdpaShapeOf(const char *kernel, const int64_t *i, const double *f,
                  SdpaShape &out) {
  namespace K = A::sdpa;
  static_assert(int64_t(K::B) == int64_t(A::sdpa_grad::B) &&
                    int64_t(K::ws_bytes) == int64_t(A::sdpa_grad::ws_bytes) &&
                    int64_t(K::layout) == int64_t(A::sdpa_grad::layout) &&
                    int64_t(K::ld_o) == int64_t(A::sdpa_grad::ld_o),
                "sdpa and sdpa_grad share their ints");
  Shape s = shapeOf(
      kernel, SHARDC_ARG_INDEX(K), i,
      f);
  if (!isBf16(i[K::dtype], kernel))
    fatal("%s: fused attention computes on bf16, not f32", kernel);
  out = {s.B, s.H, s.G, s.T, s.S, s.D, s.causal, s.scale,
         s.layout, s.ld_q, s.ld_k, s.ld_v, s.ld_o};
  return s;
}
} // namespace

// q[B,H,T,D], k[B,G,S,D], v[B,G,S,D] -> o[B,H,T,D], lse[B,H,T] (f32); bf16,
// through cuDNN (sdpa.cpp); a shape cuDNN declines takes attention's kernel
// (lse unwritten: sdpa_grad declines it too, and recomputes).
SHARDC_CUDA_KERNEL(sdpa) {
  SdpaShape ds;
  Shape s = sdpaShapeOf("sdpa", i, f, ds);
  if (int64_t(s.B) * s.H * s.T == 0)
    return;
  auto &c = *static_cast<cuda::Context *>(ctx);
  using T = __nv_bfloat16;
  if (s.S > 0 && sdpaForward(c, ds, b[0], b[1], b[2], b[3],
                             static_cast<float *>(b[4]), b[5],
                             i[A::sdpa::ws_bytes], stream) == SdpaPath::Cudnn)
    return;
  withHeadDim(s.D, [&](auto dmax) {
    launchForward<decltype(dmax)::value, false, T>(
        "sdpa", s, static_cast<const T *>(b[0]), static_cast<const T *>(b[1]),
        static_cast<const T *>(b[2]), nullptr, static_cast<T *>(b[3]), nullptr,
        nullptr, c.stream(stream));
  });
}

// q, k, v, o, lse, dO -> dq[B,H,T,D], dk[B,G,S,D], dv[B,G,S,D]; bf16,
// through cuDNN, or attention_grad's kernels where cuDNN declined the shape.
SHARDC_CUDA_KERNEL(sdpa_grad) {
  SdpaShape ds;
  Shape s = sdpaShapeOf("sdpa_grad", i, f, ds);
  ds.deterministic = i[A::sdpa_grad::deterministic] != 0;
  auto &c = *static_cast<cuda::Context *>(ctx);
  if (int64_t(s.B) * s.H * s.T > 0 && s.S > 0 &&
      sdpaBackward(c, ds, b[0], b[1], b[2], b[3],
                   static_cast<const float *>(b[4]), b[5], b[6], b[7], b[8],
                   b[9], i[A::sdpa_grad::ws_bytes],
                   stream) == SdpaPath::Cudnn)
    return;
  void *grad[] = {b[0], b[1], b[2], b[5], b[6], b[7], b[8]};
  attentionGrad<__nv_bfloat16>(c, c.stream(stream), s, grad);
}

void shardc::runtime::cuda::addAttentionKernels(KernelFn *table) {
  table[int64_t(A::KernelId::sdpa)] = &shardc_cuda_k_sdpa;
  table[int64_t(A::KernelId::sdpa_grad)] = &shardc_cuda_k_sdpa_grad;
  table[int64_t(A::KernelId::attention)] = &shardc_cuda_k_attention;
  table[int64_t(A::KernelId::attention_grad)] = &shardc_cuda_k_attention_grad;
}
