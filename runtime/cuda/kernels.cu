//===- kernels.cu - CUDA kernels of the runtime ABI -----------------------===//
//
// Each kernel takes its arguments as runtime/abi/kernels.def defines them
// (through the per-kernel enums of abi.h) and launches on the stream the
// compiled schedule names. The per-element math is runtime/math.h's, shared
// with the CPU kernels. Reductions accumulate in double, as the CPU kernels
// do, so f32 curves can be compared with the CPU's.
//
// Kernels of the ABI without a CUDA implementation here are null in
// kKernels (the end of this file); the backend refuses a program that
// launches one, naming it.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/context.h"
#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/launch.h"
#include "runtime/math.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace A = shardc::abi;
using namespace shardc::runtime;
using namespace shardc::runtime::cuda;

namespace {

/// The element-wise functions, y = op(x...) per element.
struct FillOp {
  float value;
  __device__ float operator()() const { return value; }
};
struct GeluOp {
  bool tanhForm;
  __device__ float operator()(float x) const { return gelu(x, tanhForm); }
};
struct GeluGradOp { // (x, dy) -> dx
  bool tanhForm;
  __device__ float operator()(float x, float dy) const {
    return dy * geluGrad(x, tanhForm);
  }
};
struct SiluOp {
  __device__ float operator()(float x) const { return silu(x); }
};
struct SiluGradOp { // (x, dy) -> dx, in the CPU kernel's association
  __device__ float operator()(float x, float dy) const {
    return siluBackward(dy, x);
  }
};
struct SwigluOp { // (g, u) -> silu(g) u, rounded as the unfused kernels
  bool bf16;
  __device__ float operator()(float g, float u) const {
    return swiglu(g, u, bf16);
  }
};
struct ScaleOp { // g -> ctl[1] g: accumulate where ctl[0] is 0
  const float *ctl;
  __device__ float operator()(float g) const { return ctl[1] * g; }
};
struct AddScaledOp { // (acc, g) -> acc + ctl[1] g: accumulate where ctl[0] is not 0
  const float *ctl;
  __device__ float operator()(float acc, float g) const {
    return acc + ctl[1] * g;
  }
};

/// op of element e of each pack.
template <typename Op, typename P, size_t... I>
__device__ float applyAt(const Op &op, const P *in, int e,
                         std::index_sequence<I...>) {
  return op(in[I].v[e]...);
}

/// x_j[n] -> y[n] = op(x_j[k]...), in f32 on elements of storage type T
/// (one rounding per output): grid-stride, 128-bit loads and stores (4 f32
/// or 8 bf16) when every pointer is 16-byte aligned (`vec`; the tail by the
/// first threads), one element at a time otherwise. Returns the max |y|
/// of the thread's elements as stored (an amax, where a caller wants one).
template <typename T, typename Op, typename... X>
__device__ float mapElements(Op op, T *y, int64_t n, bool vec,
                             const X *...x) {
  constexpr int kN = Pack<T>::kN;
  int64_t start = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  int64_t done = 0;
  float m = 0.0f;
  if (vec) {
    int64_t packs = n / kN;
    for (int64_t k = start; k < packs; k += step) {
      Pack<T> in[sizeof...(X) + 1], out;
      int j = 0;
      ((in[j++].load(x, k)), ...);
      for (int e = 0; e < kN; ++e) {
        out.v[e] = applyAt(op, in, e, std::index_sequence_for<X...>{});
        m = fmaxf(m, storedAbs<T>(out.v[e]));
      }
      out.store(y, k);
    }
    done = packs * kN;
  }
  for (int64_t k = done + start; k < n; k += step) {
    float v = op(toFloat(x[k])...);
    y[k] = fromFloat<T>(v);
    m = fmaxf(m, storedAbs<T>(v));
  }
  return m;
}

// x_j[n] -> y[n] = op(x_1[k], ...)
template <typename Op, typename T>
__global__ void map0Kernel(Op op, T *y, int64_t n, bool vec) {
  mapElements(op, y, n, vec);
}
template <typename Op, typename T>
__global__ void map1Kernel(Op op, const T *x, T *y, int64_t n, bool vec) {
  mapElements(op, y, n, vec, x);
}
template <typename Op, typename T>
__global__ void map2Kernel(Op op, const T *x, const T *z, T *y, int64_t n,
                           bool vec) {
  mapElements(op, y, n, vec, x, z);
}
// map2Kernel, and amax[0] = max(amax[0], max |y|) (zeroed before the
// launch): a producer of a float8 cast's input (rt-fuse-amax).
template <typename Op, typename T>
__global__ void map2AmaxKernel(Op op, const T *x, const T *z, T *y, int64_t n,
                               bool vec, float *amax) {
  blockAmaxInto(amax, mapElements(op, y, n, vec, x, z));
}

// acc[n], g[n], ctl[2] -> out[n] (out may be acc) = ctl[0] ? acc + ctl[1] g
// : ctl[1] g, the branch taken once a thread (ctl is the same for all):
// where ctl[0] is 0 (a step's first micro-batch, every one under
// --grad-accum 1) acc is not read, a third of the kernel's traffic.
__global__ void accumulateKernel(const float *acc, const float *g,
                                 const float *ctl, float *out, int64_t n,
                                 bool vec) {
  if (ctl[0] != 0.0f)
    mapElements(AddScaledOp{ctl}, out, n, vec, acc, g);
  else
    mapElements(ScaleOp{ctl}, out, n, vec, g);
}

/// Launches map<sizeof...(x)>Kernel of `op` over n elements of the typed
/// kernel's dtype (f32 or bf16): y = op(x...).
template <typename Op, typename... P>
void launchMap(void *ctx, int64_t stream, int64_t dtype, const char *kernel,
               Op op, int64_t n, void *y, P... x);

template <typename Op, typename T>
void launchMap2(cudaStream_t s, Op op, int64_t n, T *y, const T *x,
                const T *z) {
  auto *kernel = &map2Kernel<Op, T>;
  SHARDC_LAUNCH(kernel, gridFor(n / Pack<T>::kN + 1), kThreads, 0, s, op, x, z,
                y, n, aligned16(x, z, y));
}

template <typename T, typename Op, typename... P>
void launchMapOf(cudaStream_t s, Op op, int64_t n, void *y, P... x) {
  unsigned grid = gridFor(n / Pack<T>::kN + 1);
  bool vec = aligned16(y, x...);
  if constexpr (sizeof...(P) == 0) {
    auto *kernel = &map0Kernel<Op, T>;
    SHARDC_LAUNCH(kernel, grid, kThreads, 0, s, op, static_cast<T *>(y), n,
                  vec);
  } else if constexpr (sizeof...(P) == 1) {
    auto *kernel = &map1Kernel<Op, T>;
    SHARDC_LAUNCH(kernel, grid, kThreads, 0, s, op,
                  static_cast<const T *>(x)..., static_cast<T *>(y), n, vec);
  }
  else
    launchMap2<Op, T>(s, op, n, static_cast<T *>(y),
                      static_cast<const T *>(x)...);
}

template <typename Op, typename... P>
void launchMap(void *ctx, int64_t stream, int64_t dtype, const char *kernel,
               Op op, int64_t n, void *y, P... x) {
  cudaStream_t s = streamOf(ctx, stream);
  withDtype(dtype, kernel, [&](auto t) {
    launchMapOf<decltype(t)>(s, op, n, y, x...);
  });
}

// g[n], u[n], dy[n] -> dg[n], du[n] of SwiGLU (runtime::swigluGrad), in f32
// on elements of T: grid-stride, 128-bit loads and stores where every
// pointer is 16-byte aligned (`vec`; the tail by the first threads). With
// amax (rt-fuse-amax; both zeroed before the launch) also amax[0] = max
// |dg| and amaxDu[0] = max |du| as stored.
template <typename T>
__global__ void swigluGradKernel(const T *g, const T *u, const T *dy, T *dg,
                                 T *du, int64_t n, bool vec, float *amax,
                                 float *amaxDu) {
  constexpr int kN = Pack<T>::kN;
  constexpr bool bf16 = sizeof(T) == 2;
  int64_t start = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  int64_t done = 0;
  float mg = 0.0f, mu = 0.0f;
  if (vec) {
    int64_t packs = n / kN;
    for (int64_t k = start; k < packs; k += step) {
      Pack<T> pg, pu, pdy, pdg, pdu;
      pg.load(g, k);
      pu.load(u, k);
      pdy.load(dy, k);
      for (int e = 0; e < kN; ++e) {
        swigluGrad(pg.v[e], pu.v[e], pdy.v[e], bf16, pdg.v[e], pdu.v[e]);
        mg = fmaxf(mg, storedAbs<T>(pdg.v[e]));
        mu = fmaxf(mu, storedAbs<T>(pdu.v[e]));
      }
      pdg.store(dg, k);
      pdu.store(du, k);
    }
    done = packs * kN;
  }
  for (int64_t k = done + start; k < n; k += step) {
    float a, c;
    swigluGrad(toFloat(g[k]), toFloat(u[k]), toFloat(dy[k]), bf16, a, c);
    dg[k] = fromFloat<T>(a);
    du[k] = fromFloat<T>(c);
    mg = fmaxf(mg, storedAbs<T>(a));
    mu = fmaxf(mu, storedAbs<T>(c));
  }
  if (amax) { // the same in every thread
    blockAmaxInto(amax, mg);
    blockAmaxInto(amaxDu, mu);
  }
}

// y[N,C] = table[ids[N], :] (elements of T: f32 or bf16, copied); an id
// outside [0, V) sets *bad to V
template <typename T>
__global__ void embeddingKernel(const int32_t *ids, const T *table, T *y,
                                int64_t N, int64_t V, int64_t C,
                                int64_t *bad) {
  FOR_EACH(k, N * C) {
    int64_t n = k / C, c = k % C;
    int64_t id = ids[n];
    if (id < 0 || id >= V) {
      *bad = V;
      continue;
    }
    y[k] = table[id * C + c];
  }
}

/// The double sum of the squares of a float4's elements, in order.
__device__ inline double squares(float4 v) {
  return double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z +
         double(v.w) * v.w;
}

// x[n] -> part[gridDim.x]: each block's sum of x^2 over its grid-stride
// share, in double; 128-bit loads (x is 16-byte aligned: every buffer is
// kBufferAlignment-aligned), the n % 4 tail by block 0
__global__ void squaredNormPartialKernel(const float *x, int64_t n,
                                         double *part) {
  double s = 0;
  const float4 *x4 = reinterpret_cast<const float4 *>(x);
  int64_t n4 = n / 4;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n4;
       k += int64_t(gridDim.x) * blockDim.x) {
    s += squares(x4[k]);
  }
  if (blockIdx.x == 0 && threadIdx.x < n - n4 * 4) {
    float v = x[n4 * 4 + threadIdx.x];
    s += double(v) * v;
  }
  s = blockSum(s);
  if (threadIdx.x == 0)
    part[blockIdx.x] = s;
}

// part[blocks] -> y[] = their sum, in block order (one block): the result
// depends on n only, never on scheduling
__global__ void sumPartialsKernel(const double *part, int blocks, float *y) {
  double s = 0;
  for (int k = threadIdx.x; k < blocks; k += blockDim.x)
    s += part[k];
  s = blockSum(s);
  if (threadIdx.x == 0)
    y[0] = float(s);
}

/// The tensors of a grouped optimizer launch, passed by value (at most
/// kMaxGroup: 2.1 KB of kernel parameters).
constexpr int kMaxGroup = 32;
struct TensorGroup {
  int k = 0;
  int64_t n[kMaxGroup];
  const float *p[kMaxGroup], *g[kMaxGroup], *m[kMaxGroup], *v[kMaxGroup];
  float *p2[kMaxGroup], *m2[kMaxGroup], *v2[kMaxGroup];
  bool is1D[kMaxGroup];
};

/// squared_norm_group's work: chunks of kNormChunk elements (a block a
/// chunk: 16 float4 loads a thread), so that a large tensor (GPT-2's token
/// embedding, 38.6M elements) takes its share of the blocks, not those of
/// the group's largest count shared by all (a 32-block cap left it to 32
/// SMs: 0.7 ms a step on an H100, 4x a single squared_norm of all the
/// gradients).
constexpr int64_t kNormChunk = int64_t(kThreads) * 4 * 16;

/// The chunks of a pass's tensors: tensor j's are [first[j], first[j + 1]).
struct NormChunks {
  int64_t first[kMaxGroup + 1];
};

// x_j[n_j] (j of the pass's TensorGroup) -> part[c] for each chunk c of the
// pass (a block a chunk): the double sum of x^2 over the chunk, float4
// loads where x is 16-byte aligned, the chunk's n % 4 tail by its first
// threads
__global__ void squaredNormChunksKernel(TensorGroup t, NormChunks chunks,
                                        double *part) {
  int64_t c = blockIdx.x;
  int j = 0;
  while (j + 1 < t.k && chunks.first[j + 1] <= c)
    ++j;
  const float *x = t.g[j];
  int64_t k0 = (c - chunks.first[j]) * kNormChunk;
  int64_t k1 = t.n[j] < k0 + kNormChunk ? t.n[j] : k0 + kNormChunk;
  bool vec = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  int64_t body = vec ? k0 + (k1 - k0) / 4 * 4 : k0;
  double s = 0;
  for (int64_t k = k0 + 4 * int64_t(threadIdx.x); k < body;
       k += 4 * int64_t(blockDim.x)) {
    s += squares(*reinterpret_cast<const float4 *>(x + k));
  }
  for (int64_t k = body + threadIdx.x; k < k1; k += blockDim.x)
    s += double(x[k]) * x[k];
  s = blockSum(s);
  if (threadIdx.x == 0)
    part[c] = s;
}

// part[chunks of the pass] -> sq[j] for the pass's tensor j = blockIdx.x:
// its chunks' sums in order (a block a tensor)
__global__ void squaredNormTensorSumsKernel(const double *part,
                                            NormChunks chunks, double *sq) {
  int j = blockIdx.x;
  double s = 0;
  for (int64_t c = chunks.first[j] + threadIdx.x; c < chunks.first[j + 1];
       c += blockDim.x)
    s += part[c];
  s = blockSum(s);
  if (threadIdx.x == 0)
    sq[j] = s;
}

// sq[k] -> y[] = ((float(sq_1) + float(sq_2)) + ...) in f32 (one thread; the
// chain of squared_norm and add kernels it replaces, rounded as they round)
__global__ void squaredNormChainKernel(const double *sq, int k, float *y) {
  float total = 0.0f;
  for (int j = 0; j < k; ++j)
    total = j == 0 ? float(sq[j]) : total + float(sq[j]);
  y[0] = total;
}

// per tensor j (blockIdx.y): p', m', v' [n_j] = AdamW(p, g * c[], m, v)
__global__ void adamwGroupKernel(TensorGroup t, const float *hyper,
                                 const float *coef) {
  __shared__ AdamWScalars s;
  int j = blockIdx.y;
  if (threadIdx.x == 0)
    s = adamwScalars(hyper, t.is1D[j]);
  __syncthreads();
  float c = coef[0];
  const float *p = t.p[j], *g = t.g[j], *m = t.m[j], *v = t.v[j];
  float *p2 = t.p2[j], *m2 = t.m2[j], *v2 = t.v2[j];
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < t.n[j];
       k += int64_t(gridDim.x) * blockDim.x) {
    float pk = p[k], mk = m[k], vk = v[k];
    adamwUpdate(s, g[k] * c, pk, mk, vk);
    p2[k] = pk;
    m2[k] = mk;
    v2[k] = vk;
  }
}

// y[] = min(1, max / (sqrt(sq) + 1e-6)), 1 when max <= 0
__global__ void clipCoefKernel(const float *sq, const float *maxNorm,
                               float *y) {
  float coef = 1.0f;
  if (maxNorm[0] > 0.0f)
    coef = fminf(1.0f, maxNorm[0] / (sqrtf(sq[0]) + 1e-6f));
  y[0] = coef;
}

// p', m', v' [n] = AdamW(p, g * c[], m, v) with hyper[kHyperSize]; the
// scalars are computed once per block from the device's hyper buffer (no
// host round trip)
__global__ void adamwKernel(const float *p, const float *g, const float *m,
                            const float *v, const float *hyper,
                            const float *coef, float *p2, float *m2, float *v2,
                            int64_t n, bool is1D) {
  __shared__ AdamWScalars s;
  if (threadIdx.x == 0)
    s = adamwScalars(hyper, is1D);
  __syncthreads();
  float c = coef[0];
  FOR_EACH(k, n) {
    float pk = p[k], mk = m[k], vk = v[k];
    adamwUpdate(s, g[k] * c, pk, mk, vk);
    p2[k] = pk;
    m2[k] = mk;
    v2[k] = vk;
  }
}

/// The row of a norm's input: x's, or (residual fused, x null) the sum
/// ra + rb written to s (rounded to T) by this block first. Each thread
/// later reads only what it wrote itself (the same forRowPacks walk), so no
/// barrier is needed.
template <typename T>
__device__ inline const T *normRow(const T *x, const T *ra, const T *rb, T *s,
                                   int64_t C, bool vec) {
  int64_t base = blockIdx.x * C;
  if (x)
    return x + base;
  forRowPacks<T>(C, vec, [&](int64_t c0, int n) {
    float a[Pack<T>::kN], v[Pack<T>::kN];
    loadCols(ra + base, c0, n, a);
    loadCols(rb + base, c0, n, v);
    for (int e = 0; e < Pack<T>::kN; ++e)
      v[e] += a[e];
    storeCols(s + base, c0, n, v);
  });
  return s + base;
}

/// The statistics of a norm's row, as the CPU kernels take them (double
/// sums of the f32 values): the mean (layer norm; 0 for rms) and 1/std.
template <typename T>
__device__ inline void normStats(const T *row, int64_t C, bool vec, bool layer,
                                 double eps, double &mean, float &rstd) {
  constexpr int kN = Pack<T>::kN;
  __shared__ double sMean, sRstd;
  double s = 0;
  if (layer) {
    forRowPacks<T>(C, vec, [&](int64_t c0, int n) {
      float v[kN];
      loadCols(row, c0, n, v);
      for (int e = 0; e < kN; ++e)
        if (e < n)
          s += v[e];
    });
    s = blockSum(s);
    if (threadIdx.x == 0)
      sMean = s / C;
    __syncthreads();
  }
  double m = layer ? sMean : 0.0;
  double q = 0;
  forRowPacks<T>(C, vec, [&](int64_t c0, int n) {
    float v[kN];
    loadCols(row, c0, n, v);
    for (int e = 0; e < kN; ++e)
      if (e < n)
        q += layer ? (v[e] - m) * (v[e] - m) : double(v[e]) * v[e];
  });
  q = blockSum(q);
  if (threadIdx.x == 0)
    sRstd = 1.0 / sqrt(q / C + eps);
  __syncthreads();
  mean = m;
  rstd = float(sRstd);
}

// x[M,C] -> y[M,C] (elements of T, f32 math, y rounded once): layer norm of
// each row (one block a row, double statistics), times w[C], plus b[C] if
// given; with x null, of the residual sum s[M,C] = ra[M,C] + rb[M,C],
// written too. `vec`: 128-bit accesses (packedRows).
template <typename T>
__global__ void layerNormKernel(const T *x, const T *w, const T *bias, T *y,
                                int64_t C, float eps, const T *ra, const T *rb,
                                T *rs, bool vec) {
  constexpr int kN = Pack<T>::kN;
  const T *row = normRow(x, ra, rb, rs, C, vec);
  double mean;
  float r;
  normStats(row, C, vec, true, eps, mean, r);
  T *out = y + blockIdx.x * C;
  forRowPacks<T>(C, vec, [&](int64_t c0, int n) {
    float v[kN], wv[kN], bv[kN] = {};
    loadCols(row, c0, n, v);
    loadCols(w, c0, n, wv);
    if (bias)
      loadCols(bias, c0, n, bv);
    for (int e = 0; e < kN; ++e) {
      v[e] = float(v[e] - mean) * r * wv[e];
      if (bias)
        v[e] += bv[e];
    }
    storeCols(out, c0, n, v);
  });
}

// x[M,C] -> y[M,C] = w[C] * x / rms(x) (elements of T; one block a row);
// with x null, of the residual sum s[M,C] = ra + rb, written too; with
// amax (zeroed before the launch), amax[0] = max |y| as stored too
template <typename T>
__global__ void rmsNormKernel(const T *x, const T *w, T *y, int64_t C,
                              float eps, const T *ra, const T *rb, T *rs,
                              bool vec, float *amax) {
  constexpr int kN = Pack<T>::kN;
  const T *row = normRow(x, ra, rb, rs, C, vec);
  double unused;
  float rstd;
  normStats(row, C, vec, false, eps, unused, rstd);
  T *out = y + blockIdx.x * C;
  float m = 0.0f;
  forRowPacks<T>(C, vec, [&](int64_t c0, int n) {
    float v[kN], wv[kN];
    loadCols(row, c0, n, v);
    loadCols(w, c0, n, wv);
    for (int e = 0; e < kN; ++e) {
      v[e] = wv[e] * (v[e] * rstd);
      if (e < n)
        m = fmaxf(m, storedAbs<T>(v[e]));
    }
    storeCols(out, c0, n, v);
  });
  if (amax) // the same in every thread
    blockAmaxInto(amax, m);
}

/// Softmax of one column of T (stride `inner`), as runtime/math.h's
/// softmaxColumn computes it (max, a double sum of fastExp, then the
/// scale), with each exp recomputed rather than kept in y, so that y is
/// rounded once.
template <typename T>
__device__ inline void softmaxColumnOf(const T *xs, T *ys, int64_t n,
                                       int64_t inner) {
  float mx = toFloat(xs[0]);
  for (int64_t k = 1; k < n; ++k)
    mx = fmaxf(mx, toFloat(xs[k * inner]));
  double sum = 0;
  for (int64_t k = 0; k < n; ++k)
    sum += fastExp(toFloat(xs[k * inner]) - mx);
  float inv = float(1.0 / sum);
  for (int64_t k = 0; k < n; ++k)
    ys[k * inner] = fromFloat<T>(fastExp(toFloat(xs[k * inner]) - mx) * inv);
}

/// The softmax gradient of one column of T: dx = y (dy - sum y dy).
template <typename T>
__device__ inline void softmaxGradColumnOf(const T *y, const T *dy, T *dx,
                                           int64_t n, int64_t inner) {
  double dot = 0;
  for (int64_t k = 0; k < n; ++k)
    dot += double(toFloat(y[k * inner])) * toFloat(dy[k * inner]);
  for (int64_t k = 0; k < n; ++k)
    dx[k * inner] = fromFloat<T>(
        float(toFloat(y[k * inner]) * (toFloat(dy[k * inner]) - dot)));
}

// y[outer,n,inner] = softmax over n of x (one thread per (outer, inner)
// column; max, then exp and a double sum, then the scale, as the CPU does)
template <typename T>
__global__ void softmaxKernel(const T *x, T *y, int64_t outer, int64_t n,
                              int64_t inner) {
  FOR_EACH(col, outer * inner) {
    int64_t base = (col / inner) * n * inner + col % inner;
    softmaxColumnOf(x + base, y + base, n, inner);
  }
}

// dx = y (dy - sum_n y dy) over n of [outer,n,inner]
template <typename T>
__global__ void softmaxGradKernel(const T *y, const T *dy, T *dx,
                                  int64_t outer, int64_t n, int64_t inner) {
  FOR_EACH(col, outer * inner) {
    int64_t base = (col / inner) * n * inner + col % inner;
    softmaxGradColumnOf(y + base, dy + base, dx + base, n, inner);
  }
}

/// out[V, ld) = 0: the padding columns of a row of stride ld, which the
/// GEMMs after the loss read as zero terms.
template <typename T>
__device__ inline void zeroPadding(T *out, int64_t V, int64_t ld) {
  for (int64_t v = V + threadIdx.x; v < ld; v += blockDim.x)
    out[v] = fromFloat<T>(0.0f);
}

/// The online softmax's running max and sum of one thread: x seen, the sum
/// rescaled when the max grows.
struct OnlineSoftmax {
  float max = -INFINITY;
  double sum = 0;
  /// Values whose max is `top` (a pack's, or x itself).
  __device__ void grow(float top) {
    if (top > max) {
      sum *= fastExp(max - top);
      max = top;
    }
  }
  __device__ void see(float x) { sum += fastExp(x - max); }
};

// logits[N,V] (row stride ld, elements of T: f32, or a bf16 head's output),
// t[N] -> dl[N,ld] (the same stride and type) = scale (softmax - onehot(t))
// (zero for ignored rows and the padding columns [V, ld)), rowLoss[N] =
// logsumexp - logit[t]; one block a row: the max and the double sum of exps
// in one pass, then each gradient element from its exp recomputed (two
// reads of the row and one write), computed in f32 and rounded once; a
// target outside [0, V) sets *bad to V. dl may be logits: the gradient in
// place (each thread rewrites only the elements it reads). With `vec` (the
// rows 16-byte aligned: host-decided) the row's first V / kN * kN elements
// are 128-bit packs (kN = 8 bf16 or 4 f32), a thread a pack in turn, the
// rest one element a thread.
template <typename T>
__global__ void crossEntropyRowsKernel(const T *logits,
                                       const int32_t *targets, int64_t V,
                                       int64_t ld, int64_t ignore,
                                       const float *scalePtr, T *dl,
                                       double *rowLoss, int64_t *bad,
                                       bool vec) {
  constexpr int kN = Pack<T>::kN;
  int64_t n = blockIdx.x;
  float scale = *scalePtr;
  const T *row = logits + n * ld;
  T *out = dl + n * ld;
  int64_t t = targets[n];
  if (t == ignore || t < 0 || t >= V) {
    if (t != ignore && threadIdx.x == 0)
      *bad = V;
    for (int64_t v = threadIdx.x; v < ld; v += blockDim.x)
      out[v] = fromFloat<T>(0.0f);
    if (threadIdx.x == 0)
      rowLoss[n] = 0.0;
    return;
  }
  // The target's logit, read before any thread writes.
  float target = threadIdx.x == 0 ? toFloat(row[t]) : 0.0f;
  int64_t packs = vec ? V / kN : 0, rest = packs * kN;
  // The max and the sum of exps in one read (online softmax, as llm.c's
  // classifier), then the thread's sum to the row's max.
  OnlineSoftmax mine;
#pragma unroll 4
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    Pack<T> x;
    x.load(row, p);
    float top = x.v[0];
    for (int j = 1; j < kN; ++j)
      top = fmaxf(top, x.v[j]);
    mine.grow(top);
    for (int j = 0; j < kN; ++j)
      mine.see(x.v[j]);
  }
  for (int64_t v = rest + threadIdx.x; v < V; v += blockDim.x) {
    float x = toFloat(row[v]);
    mine.grow(x);
    mine.see(x);
  }
  float mx = blockMax(mine.max);
  double sum = mine.sum != 0 ? mine.sum * fastExp(mine.max - mx) : 0.0;
  __shared__ double total;
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    total = sum;
  __syncthreads();
  float factor = float(scale / total);
#pragma unroll 4
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    Pack<T> x;
    x.load(row, p);
    for (int j = 0; j < kN; ++j)
      x.v[j] = fastExp(x.v[j] - mx) * factor - (p * kN + j == t ? scale : 0.0f);
    x.store(out, p);
  }
  for (int64_t v = rest + threadIdx.x; v < V; v += blockDim.x) {
    float g = fastExp(toFloat(row[v]) - mx) * factor;
    if (v == t)
      g -= scale;
    out[v] = fromFloat<T>(g);
  }
  if (threadIdx.x == 0)
    rowLoss[n] = log(total) + mx - target;
  zeroPadding(out, V, ld);
}

// loss[] = mean of rowLoss over the rows not ignored, summed in row order
__global__ void meanLossKernel(const double *rowLoss, const int32_t *targets,
                               int64_t N, int64_t ignore, float *loss) {
  double total = 0;
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n)
    if (targets[n] != ignore) {
      total += rowLoss[n];
      ++count;
    }
  loss[0] = count ? float(total / count) : NAN;
}

// The embedding gradient sums, for each row v of the table, the rows of dy
// whose id is v, in increasing position as the CPU kernel does, without
// atomics on the sums: the positions are first sorted by id, stably (a
// counting sort: idCountKernel, idStartsKernel, idOrderKernel), and then a
// warp a table row sums its positions' rows of dy (embeddingRowsKernel).
// Ids outside [0, V) are skipped by every step.
constexpr int kEmbTile = 2048, kEmbSortThreads = 1024, kEmbRowWarps = 8;

// ids[N] -> count[id] += 1 (count[V] zeroed before; integer atomics, so
// the counts do not depend on the order)
__global__ void idCountKernel(const int32_t *ids, int32_t *count, int64_t N,
                              int64_t V) {
  FOR_EACH(n, N) {
    int32_t id = ids[n];
    if (id >= 0 && id < V)
      atomicAdd(&count[id], 1);
  }
}

// count[V] -> start[V+1] = its exclusive prefix sums (start[V] = the
// count of valid ids); count zeroed again (idOrderKernel's running
// counts). One block of kEmbSortThreads threads, a contiguous range of
// ids each, the ranges' totals scanned in shared memory.
__global__ void idStartsKernel(int32_t *count, int32_t *start, int64_t V) {
  __shared__ int32_t part[2][kEmbSortThreads];
  int t = threadIdx.x;
  int64_t per = (V + kEmbSortThreads - 1) / kEmbSortThreads;
  int64_t v0 = std::min<int64_t>(V, t * per), v1 = std::min<int64_t>(V, v0 + per);
  int32_t sum = 0;
  for (int64_t v = v0; v < v1; ++v)
    sum += count[v];
  int in = 0;
  part[in][t] = sum;
  __syncthreads();
  for (int d = 1; d < kEmbSortThreads; d *= 2) { // inclusive scan
    part[1 - in][t] = part[in][t] + (t >= d ? part[in][t - d] : 0);
    in = 1 - in;
    __syncthreads();
  }
  int32_t base = part[in][t] - sum;
  for (int64_t v = v0; v < v1; ++v) {
    start[v] = base;
    base += count[v];
    count[v] = 0;
  }
  if (t == kEmbSortThreads - 1)
    start[V] = base;
}

// key[kEmbTile] sorted ascending in shared memory (bitonic; every thread
// of the block calls it)
__device__ inline void bitonicSort(uint64_t *key) {
  for (int size = 2; size <= kEmbTile; size *= 2)
    for (int stride = size / 2; stride > 0; stride /= 2) {
      for (int k = threadIdx.x; k < kEmbTile; k += blockDim.x) {
        int p = k ^ stride;
        if (p <= k)
          continue;
        uint64_t lo = key[k], hi = key[p];
        if ((lo > hi) == ((k & size) == 0)) {
          key[k] = hi;
          key[p] = lo;
        }
      }
      __syncthreads();
    }
}

// The first place in the sorted key[kEmbTile] whose id is `id`.
__device__ inline int firstOfId(const uint64_t *key, uint32_t id) {
  uint64_t want = uint64_t(id) << 32;
  int lo = 0, hi = kEmbTile;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (key[mid] < want)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// ids[N], start[V+1], run[V] (zeroed) -> order[start[id] + r] = the r-th
// position of id, positions in increasing order. One block of
// kEmbSortThreads threads walks the ids a tile of kEmbTile at a time: the
// tile's (id, place) keys are sorted in shared memory, a key's rank among
// its id's is its place less the id's first, after the run[id] positions
// of the earlier tiles; the id's last key then adds the tile's count.
__global__ void idOrderKernel(const int32_t *ids, const int32_t *start,
                              int32_t *run, int32_t *order, int64_t N,
                              int64_t V) {
  __shared__ uint64_t key[kEmbTile];
  constexpr uint64_t kNone = ~uint64_t(0); // sorts last
  for (int64_t n0 = 0; n0 < N; n0 += kEmbTile) {
    int64_t len = std::min<int64_t>(kEmbTile, N - n0);
    for (int k = threadIdx.x; k < kEmbTile; k += blockDim.x) {
      int32_t id = k < len ? ids[n0 + k] : -1;
      key[k] = id >= 0 && id < V ? uint64_t(id) << 32 | uint32_t(k) : kNone;
    }
    __syncthreads();
    bitonicSort(key);
    // This thread's keys k = threadIdx.x + j * kEmbSortThreads (the
    // block's size): each one's rank among its id's, found once for both
    // loops.
    int rank[kEmbTile / kEmbSortThreads];
    for (int j = 0, k = threadIdx.x; k < kEmbTile; ++j, k += kEmbSortThreads)
      if (key[k] != kNone) {
        uint32_t id = uint32_t(key[k] >> 32);
        rank[j] = k - firstOfId(key, id);
        order[start[id] + run[id] + rank[j]] =
            int32_t(n0 + (key[k] & 0xffffffffu));
      }
    __syncthreads(); // every run[] read before the tile's counts land
    for (int j = 0, k = threadIdx.x; k < kEmbTile; ++j, k += kEmbSortThreads) {
      uint32_t id = uint32_t(key[k] >> 32);
      bool last = k + 1 == kEmbTile || uint32_t(key[k + 1] >> 32) != id;
      if (key[k] != kNone && last)
        run[id] += rank[j] + 1;
    }
    __syncthreads();
  }
}

/// acc[0, n) += the rows order[e0, e1) of dy at columns [c0, c0 + n), in
/// that order, kEmbAhead rows' 128-bit loads in flight at a time where n is
/// a pack: a frequent token's row sums a thousand rows or more, and one
/// load at a time its latency was the kernel's (1.4 ms on an H100 for
/// Zipf-distributed ids: tools/bench/results/h100-2026-11-26-run5.log).
constexpr int kEmbAhead = 16;
template <typename T>
__device__ inline void sumRowsInOrder(const T *dy, const int32_t *order,
                                      int32_t e0, int32_t e1, int64_t C,
                                      int64_t c0, int n,
                                      float (&acc)[Pack<T>::kN]) {
  constexpr int kN = Pack<T>::kN;
  int32_t e = e0;
  if (n == kN)
    for (; e + kEmbAhead <= e1; e += kEmbAhead) {
      uint4 raw[kEmbAhead];
#pragma unroll
      for (int a = 0; a < kEmbAhead; ++a)
        raw[a] = *reinterpret_cast<const uint4 *>(
            dy + int64_t(order[e + a]) * C + c0);
#pragma unroll
      for (int a = 0; a < kEmbAhead; ++a) {
        const T *v = reinterpret_cast<const T *>(&raw[a]);
        for (int j = 0; j < kN; ++j)
          acc[j] += toFloat(v[j]);
      }
    }
  for (; e < e1; ++e) {
    float g[kN];
    loadCols(dy + int64_t(order[e]) * C, c0, n, g);
    for (int j = 0; j < n; ++j)
      acc[j] += g[j];
  }
}

// dy[N,C], order[], start[V+1] -> table[V,C]: row v = the rows
// order[start[v], start[v+1]) of dy summed in f32 in that order (zeros
// where none), rounded to T once. A warp a row's 32 column slots (a lane a
// 128-bit pack when `vec`, else a column), kEmbRowWarps warps a block: a
// long row's slots are summed by several warps at once.
template <typename T>
__global__ void embeddingRowsKernel(const T *dy, const int32_t *order,
                                    const int32_t *start, T *table, int64_t V,
                                    int64_t C, bool vec) {
  // A warp a (row, group of 32 column slots): a slot is a pack when vec,
  // else a column.
  int64_t slots = vec ? C / Pack<T>::kN : C, groups = (slots + 31) / 32;
  int64_t w = blockIdx.x * int64_t(kEmbRowWarps) + threadIdx.x / 32;
  int64_t v = w / groups, slot = w % groups * 32 + threadIdx.x % 32;
  if (v >= V || slot >= slots)
    return; // past the table, or the last group's idle lanes
  int n = vec ? Pack<T>::kN : 1;
  int64_t c0 = slot * n;
  float acc[Pack<T>::kN] = {};
  sumRowsInOrder(dy, order, start[v], start[v + 1], C, c0, n, acc);
  storeCols(table + v * C, c0, n, acc);
}

// p', buf' [n] = SGD with momentum and (L2) weight decay, torch.optim,
// with hyper[kHyperSize] read on the device
__global__ void sgdKernel(const float *p, const float *g, const float *buf,
                          const float *hyper, const float *coef, float *p2,
                          float *buf2, int64_t n, bool is1D) {
  SGDScalars s = sgdScalars(hyper, is1D);
  float c = coef[0];
  FOR_EACH(k, n) sgdUpdate(s, g[k] * c, p[k], buf[k], p2[k], buf2[k]);
}

/// A broadcast over a row-major result of rank R (ints: R, the kernel's
/// other named integers, then dims[R] and R element strides per operand, 0
/// where it broadcasts), by value.
constexpr int kMaxRank = 8;
template <int N> struct Broadcast {
  int64_t rank, numel;
  int64_t dims[kMaxRank];
  int64_t strides[N][kMaxRank];
};

template <int N>
Broadcast<N> broadcastOf(A::KernelId id, const int64_t *i, const char *kernel) {
  Broadcast<N> bc;
  bc.rank = i[0];
  if (bc.rank > kMaxRank)
    fatal("%s: rank %lld exceeds the CUDA backend's %d", kernel,
          (long long)bc.rank, kMaxRank);
  const int64_t *dims = i + A::kernelInfo(id).numInts;
  bc.numel = 1;
  for (int64_t d = 0; d < bc.rank; ++d) {
    bc.dims[d] = dims[d];
    bc.numel *= dims[d];
    for (int k = 0; k < N; ++k)
      bc.strides[k][d] = dims[(k + 1) * bc.rank + d];
  }
  return bc;
}

/// Element offsets of each operand at result element e.
template <int N>
__device__ void offsetsOf(const Broadcast<N> &bc, int64_t e, int64_t *off) {
  for (int k = 0; k < N; ++k)
    off[k] = 0;
  for (int64_t d = bc.rank - 1; d >= 0; --d) {
    int64_t idx = e % bc.dims[d];
    e /= bc.dims[d];
    for (int k = 0; k < N; ++k)
      off[k] += idx * bc.strides[k][d];
  }
}

enum class BinaryOp { Add, Mul, Sub, Div, Pow };

/// The binary kernels' math, in f32 (one rounding of the result after).
template <BinaryOp Op> struct BinaryFn {
  __device__ float operator()(float x, float z) const {
    if (Op == BinaryOp::Add)
      return x + z;
    if (Op == BinaryOp::Mul)
      return x * z;
    if (Op == BinaryOp::Sub)
      return x - z;
    if (Op == BinaryOp::Div)
      return x / z;
    // x^2 exact, as the CPU kernel (and PyTorch) does
    return z == 2.0f ? x * x : float(pow(double(x), double(z)));
  }
};

// y[dims] = a[broadcast] op b[broadcast], in f32 on elements of T (f32, or
// bf16 for the typed add and mul)
template <BinaryOp Op, typename T>
__global__ void binaryKernel(const T *a, const T *b, T *y, Broadcast<2> bc) {
  FOR_EACH(e, bc.numel) {
    int64_t off[2];
    offsetsOf(bc, e, off);
    y[e] = fromFloat<T>(BinaryFn<Op>()(toFloat(a[off[0]]), toFloat(b[off[1]])));
  }
}

/// Whether both operands are dense in y's order (no broadcast): then the
/// binary kernel is an elementwise map (128-bit loads, no index math).
template <int N> bool denseOperands(const Broadcast<N> &bc) {
  int64_t stride = 1;
  for (int64_t d = bc.rank - 1; d >= 0; --d) {
    for (int k = 0; k < N; ++k)
      if (bc.dims[d] != 1 && bc.strides[k][d] != stride)
        return false;
    stride *= bc.dims[d];
  }
  return true;
}

// y[dims] = x[broadcast]
__global__ void broadcastKernel(const float *x, float *y, Broadcast<1> bc) {
  FOR_EACH(e, bc.numel) {
    int64_t off[1];
    offsetsOf(bc, e, off);
    y[e] = x[off[0]];
  }
}

/// n elements of `from` at x converted to `to` at y (abi dtype codes).
__global__ void castKernel(const void *x, void *y, int64_t n, int64_t from,
                           int64_t to) {
  FOR_EACH(k, n) {
    float v = 0.0f;
    switch (from) {
    case A::kF32:
      v = static_cast<const float *>(x)[k];
      break;
    case A::kBF16:
      v = bf16ToFloat(static_cast<const uint16_t *>(x)[k]);
      break;
    case A::kI32:
      v = float(static_cast<const int32_t *>(x)[k]);
      break;
    case A::kBool:
      v = float(static_cast<const uint8_t *>(x)[k]);
      break;
    }
    switch (to) {
    case A::kF32:
      static_cast<float *>(y)[k] = v;
      break;
    case A::kBF16:
      static_cast<uint16_t *>(y)[k] = floatToBf16(v);
      break;
    case A::kI32:
      static_cast<int32_t *>(y)[k] = int32_t(v);
      break;
    case A::kBool:
      static_cast<uint8_t *>(y)[k] = v != 0.0f;
      break;
    }
  }
}

bool castable(int64_t code) {
  return code == A::kF32 || code == A::kBF16 || code == A::kI32 ||
         code == A::kBool;
}

} // namespace

// y[n] = value
SHARDC_CUDA_KERNEL(fill) {
  int64_t n = i[A::fill::n];
  launchMap(ctx, stream, i[A::fill::dtype], "fill",
            FillOp{float(f[A::fill::f::value])}, n, b[0]);
}

// x[bytes] -> y[bytes]; either may be pinned host memory (the host copies
// of --offload=cpu on the copy stream): the direction is the pointers'.
SHARDC_CUDA_KERNEL(copy) {
  CUDA_CHECK(cudaMemcpyAsync(b[1], b[0], size_t(i[A::copy::bytes]),
                             cudaMemcpyDefault, streamOf(ctx, stream)));
}

SHARDC_CUDA_KERNEL(cast) {
  int64_t n = i[A::cast::n], from = i[A::cast::from], to = i[A::cast::to];
  if (!castable(from) || !castable(to))
    fatal("cast: dtype codes %lld to %lld are not supported on the CUDA "
          "backend (f32, bf16, i32, bool)",
          (long long)from, (long long)to);
  SHARDC_LAUNCH(castKernel, gridFor(n), kThreads, 0, streamOf(ctx, stream), b[0], b[1], n, from, to);
}

// x[n] -> y[n] = gelu(x) (tanh form or erf)
SHARDC_CUDA_KERNEL(gelu) {
  launchMap(ctx, stream, i[A::gelu::dtype], "gelu",
            GeluOp{i[A::gelu::tanh] != 0}, i[A::gelu::n], b[1],
            static_cast<const void *>(b[0]));
}

// x[n], dy[n] -> dx[n] = dy gelu'(x)
SHARDC_CUDA_KERNEL(gelu_grad) {
  launchMap(ctx, stream, i[A::gelu_grad::dtype], "gelu_grad",
            GeluGradOp{i[A::gelu_grad::tanh] != 0}, i[A::gelu_grad::n], b[2],
            static_cast<const void *>(b[0]), static_cast<const void *>(b[1]));
}

// x[n] -> y[n] = silu(x)
SHARDC_CUDA_KERNEL(silu) {
  launchMap(ctx, stream, i[A::silu::dtype], "silu", SiluOp{}, i[A::silu::n],
            b[1], static_cast<const void *>(b[0]));
}

// g[n], u[n] -> y[n] = silu(g) u (on bf16 silu(g) rounded first); with
// amax, amax[0] = max |y| too
SHARDC_CUDA_KERNEL(swiglu) {
  namespace K = A::swiglu;
  bool bf16 = i[K::dtype] == A::kBF16;
  int64_t n = i[K::n];
  if (!i[K::amax]) {
    launchMap(ctx, stream, i[K::dtype], "swiglu", SwigluOp{bf16}, n, b[2],
              static_cast<const void *>(b[0]),
              static_cast<const void *>(b[1]));
    return;
  }
  cudaStream_t s = streamOf(ctx, stream);
  float *amax = static_cast<float *>(b[3]);
  CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), s));
  withDtype(i[K::dtype], "swiglu", [&](auto t) {
    using T = decltype(t);
    auto *kernel = &map2AmaxKernel<SwigluOp, T>;
    SHARDC_LAUNCH(kernel, gridFor(n / Pack<T>::kN + 1), kThreads, 0, s,
                  SwigluOp{bf16}, static_cast<const T *>(b[0]),
                  static_cast<const T *>(b[1]), static_cast<T *>(b[2]), n,
                  aligned16(b[0], b[1], b[2]), amax);
  });
}

// g[n], u[n], dy[n] -> dg[n] = silu'(g) (dy u), du[n] = dy silu(g)
SHARDC_CUDA_KERNEL(swiglu_grad) {
  namespace K = A::swiglu_grad;
  int64_t n = i[K::n];
  if (n == 0)
    return;
  cudaStream_t s = streamOf(ctx, stream);
  float *amax = i[K::amax] ? static_cast<float *>(b[5]) : nullptr;
  float *amaxDu = i[K::amax] ? static_cast<float *>(b[6]) : nullptr;
  if (amax) {
    CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), s));
    CUDA_CHECK(cudaMemsetAsync(amaxDu, 0, sizeof(float), s));
  }
  withDtype(i[K::dtype], "swiglu_grad", [&](auto t) {
    using T = decltype(t);
    auto *kernel = &swigluGradKernel<T>;
    auto in = [&](int k) { return static_cast<const T *>(b[k]); };
    auto out = [&](int k) { return static_cast<T *>(b[k]); };
    SHARDC_LAUNCH(kernel, gridFor(n / Pack<T>::kN + 1), kThreads, 0, s, in(0),
                  in(1), in(2), out(3), out(4), n,
                  aligned16(b[0], b[1], b[2], b[3], b[4]), amax, amaxDu);
  });
}

// x[n], dy[n] -> dx[n] = dy silu'(x)
SHARDC_CUDA_KERNEL(silu_grad) {
  launchMap(ctx, stream, i[A::silu_grad::dtype], "silu_grad", SiluGradOp{},
            i[A::silu_grad::n], b[2], static_cast<const void *>(b[0]),
            static_cast<const void *>(b[1]));
}

// acc[n], g[n], ctl[2] -> out[n] = ctl[0] ? acc + ctl[1] g : ctl[1] g
SHARDC_CUDA_KERNEL(accumulate) {
  int64_t n = i[A::accumulate::n];
  const float *acc = F(b[0]), *g = F(b[1]);
  float *out = F(b[3]);
  SHARDC_LAUNCH(accumulateKernel, gridFor(n / Pack<float>::kN + 1), kThreads,
                0, streamOf(ctx, stream), acc, g, F(b[2]), out, n,
                aligned16(acc, g, out));
}

SHARDC_CUDA_KERNEL(embedding) {
  int64_t N = i[A::embedding::N], V = i[A::embedding::V],
          C = i[A::embedding::C];
  auto &c = *static_cast<cuda::Context *>(ctx);
  // A bad id is reported after the run (Context::checkErrors).
  int64_t *bad = c.errors + int64_t(A::KernelId::embedding);
  const int32_t *ids = static_cast<const int32_t *>(b[0]);
  withDtype(i[A::embedding::dtype], "embedding", [&](auto t) {
    using T = decltype(t);
    auto *kernel = &embeddingKernel<T>;
    SHARDC_LAUNCH(kernel, gridFor(N * C), kThreads, 0, c.stream(stream), ids,
                  static_cast<const T *>(b[1]), static_cast<T *>(b[2]), N, V,
                  C, bad);
  });
}

// x[n] -> y[] = sum x^2: a multi-block reduction (blocks by n alone, at
// most Context::kNormBlocks), then one block over the partials.
SHARDC_CUDA_KERNEL(squared_norm) {
  auto &c = *static_cast<cuda::Context *>(ctx);
  int64_t n = i[A::squared_norm::n];
  int64_t perBlock = int64_t(kThreads) * 16;
  int blocks = int(std::min<int64_t>(cuda::Context::kNormBlocks,
                                     std::max<int64_t>(1, (n + perBlock - 1) /
                                                              perBlock)));
  SHARDC_LAUNCH(squaredNormPartialKernel, blocks, kThreads, 0,
                c.stream(stream), F(b[0]), n, c.normPartials);
  SHARDC_LAUNCH(sumPartialsKernel, 1, kThreads, 0, c.stream(stream),
                c.normPartials, blocks, F(b[1]));
}

/// Blocks each of a group's k tensors (n[j] elements) gets: enough for the
/// largest (at most `cap`).
unsigned groupBlocks(const int64_t *n, int64_t k, unsigned cap) {
  int64_t most = 1;
  for (int64_t j = 0; j < k; ++j)
    most = std::max(most, n[j]);
  return unsigned(std::min<int64_t>(cap, (most + kThreads - 1) / kThreads));
}

// x_1..x_k -> y[]: the squared norms of k tensors summed as the chain of
// squared_norm and add kernels sums them; kMaxGroup tensors a pass: a sum
// per chunk of kNormChunk elements (into the context's scratch), then a
// block a tensor over its chunks in order; then one thread over the
// tensors in order (deterministic: no atomics, the same sums whatever the
// scheduling)
SHARDC_CUDA_KERNEL(squared_norm_group) {
  auto &c = *static_cast<cuda::Context *>(ctx);
  int64_t k = i[A::squared_norm_group::k];
  const int64_t *n = i + A::squared_norm_group::kNumInts;
  if (k < 1 || k > (int64_t(1) << 20))
    fatal("squared_norm_group: %lld tensors (1 to 2^20)", (long long)k);
  // Per pass of kMaxGroup tensors, its tensors and their chunks.
  std::vector<std::pair<TensorGroup, NormChunks>> passes;
  int64_t most = 1; // the chunks of the largest pass
  for (int64_t j0 = 0; j0 < k; j0 += kMaxGroup) {
    auto &[t, chunks] = passes.emplace_back();
    t.k = int(std::min<int64_t>(kMaxGroup, k - j0));
    chunks.first[0] = 0;
    for (int j = 0; j < t.k; ++j) {
      t.g[j] = F(b[j0 + j]);
      t.n[j] = n[j0 + j];
      chunks.first[j + 1] =
          chunks.first[j] + (t.n[j] + kNormChunk - 1) / kNormChunk;
    }
    most = std::max(most, chunks.first[t.k]);
  }
  auto *sq = static_cast<double *>(
      c.scratch(size_t(k + most) * sizeof(double)));
  double *part = sq + k; // [most]: a pass's chunk sums
  cudaStream_t s = c.stream(stream);
  for (size_t pass = 0; pass < passes.size(); ++pass) {
    const auto &[t, chunks] = passes[pass];
    if (chunks.first[t.k] > 0)
      SHARDC_LAUNCH(squaredNormChunksKernel, unsigned(chunks.first[t.k]),
                    kThreads, 0, s, t, chunks, part);
    SHARDC_LAUNCH(squaredNormTensorSumsKernel, unsigned(t.k), kThreads, 0, s,
                  part, chunks, sq + int64_t(pass) * kMaxGroup);
  }
  SHARDC_LAUNCH(squaredNormChainKernel, 1, 1, 0, s, sq, int(k), F(b[k]));
}

// hyper, c, then per tensor p g m v p' m' v': AdamW of k tensors in one
// launch (blockIdx.y the tensor)
SHARDC_CUDA_KERNEL(adamw_group) {
  int64_t k = i[A::adamw_group::k];
  const int64_t *tail = i + A::adamw_group::kNumInts;
  if (k < 1 || k > kMaxGroup)
    fatal("adamw_group: %lld tensors (1 to %d)", (long long)k, kMaxGroup);
  TensorGroup t;
  t.k = int(k);
  for (int64_t j = 0; j < k; ++j) {
    void **x = b + 2 + 7 * j;
    t.p[j] = F(x[0]);
    t.g[j] = F(x[1]);
    t.m[j] = F(x[2]);
    t.v[j] = F(x[3]);
    t.p2[j] = F(x[4]);
    t.m2[j] = F(x[5]);
    t.v2[j] = F(x[6]);
    t.n[j] = tail[2 * j];
    t.is1D[j] = tail[2 * j + 1] != 0;
  }
  SHARDC_LAUNCH(adamwGroupKernel, dim3(groupBlocks(t.n, t.k, gridFor(1 << 30)), unsigned(k)),
                kThreads, 0, streamOf(ctx, stream), t, F(b[0]), F(b[1]));
}

SHARDC_CUDA_KERNEL(clip_coef) {
  SHARDC_LAUNCH(clipCoefKernel, 1, 1, 0, streamOf(ctx, stream), F(b[0]), F(b[1]), F(b[2]));
}

SHARDC_CUDA_KERNEL(adamw) {
  int64_t n = i[A::adamw::n];
  bool is1D = i[A::adamw::is_1d] != 0;
  SHARDC_LAUNCH(adamwKernel, gridFor(n), kThreads, 0, streamOf(ctx, stream), F(b[0]), F(b[1]), F(b[2]), F(b[3]), F(b[4]), F(b[5]), F(b[6]), F(b[7]), F(b[8]), n, is1D);
}

/// A norm launch, one block a row, on T: x (null with the residual fused:
/// ra + rb written to rs), w, bias (null: none) -> y; and on rms, amax
/// (null: none) = max |y|.
template <typename T>
void launchNorm(cudaStream_t s, bool layer, int64_t M, int64_t C, double eps,
                void *x, void *w, void *bias, void *y, void *ra = nullptr,
                void *rb = nullptr, void *rs = nullptr,
                float *amax = nullptr) {
  auto p = [](void *q) { return static_cast<T *>(q); };
  bool vec = packedRows<T>(C, p(x), p(w), p(bias), p(y), p(ra), p(rb), p(rs));
  if (layer) {
    auto *kernel = &layerNormKernel<T>;
    SHARDC_LAUNCH(kernel, unsigned(M), kThreads, 0, s, p(x), p(w), p(bias),
                  p(y), C, float(eps), p(ra), p(rb), p(rs), vec);
  } else {
    auto *kernel = &rmsNormKernel<T>;
    if (amax)
      CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), s));
    SHARDC_LAUNCH(kernel, unsigned(M), kThreads, 0, s, p(x), p(w), p(y), C,
                  float(eps), p(ra), p(rb), p(rs), vec, amax);
  }
}

// x[M,C], w[C], b[C]? -> y[M,C] (f32 or bf16)
SHARDC_CUDA_KERNEL(layer_norm) {
  namespace K = A::layer_norm;
  bool hasBias = i[K::has_bias] != 0;
  withDtype(i[K::dtype], "layer_norm", [&](auto t) {
    launchNorm<decltype(t)>(streamOf(ctx, stream), true, i[K::M], i[K::C],
                            f[K::f::eps], b[0], b[1],
                            hasBias ? b[2] : nullptr, b[hasBias ? 3 : 2]);
  });
}

// a[M,C], b[M,C], w[C], bias[C]? -> s = a + b, y = layer_norm(s): the
// residual add fused with the norm after it (one read of the sum saved, one
// launch; f32 or bf16, where the norm reads s as stored: rounded)
SHARDC_CUDA_KERNEL(add_layer_norm) {
  namespace K = A::add_layer_norm;
  bool hasBias = i[K::has_bias] != 0;
  int out = hasBias ? 4 : 3;
  withDtype(i[K::dtype], "add_layer_norm", [&](auto t) {
    launchNorm<decltype(t)>(streamOf(ctx, stream), true, i[K::M], i[K::C],
                            f[K::f::eps], nullptr, b[2],
                            hasBias ? b[3] : nullptr, b[out + 1], b[0], b[1],
                            b[out]);
  });
}

// x[M,C], w[C] -> y[M,C] (f32 or bf16)
SHARDC_CUDA_KERNEL(rms_norm) {
  namespace K = A::rms_norm;
  withDtype(i[K::dtype], "rms_norm", [&](auto t) {
    launchNorm<decltype(t)>(streamOf(ctx, stream), false, i[K::M], i[K::C],
                            f[K::f::eps], b[0], b[1], nullptr, b[2]);
  });
}

// a[M,C], b[M,C], w[C] -> s = a + b, y = rms_norm(s) (f32 or bf16, as
// add_layer_norm); with amax, amax[0] = max |y| too
SHARDC_CUDA_KERNEL(add_rms_norm) {
  namespace K = A::add_rms_norm;
  float *amax = i[K::amax] ? static_cast<float *>(b[5]) : nullptr;
  withDtype(i[K::dtype], "add_rms_norm", [&](auto t) {
    launchNorm<decltype(t)>(streamOf(ctx, stream), false, i[K::M], i[K::C],
                            f[K::f::eps], nullptr, b[2], nullptr, b[4], b[0],
                            b[1], b[3], amax);
  });
}

// x[outer,n,inner] -> y: softmax over n (f32 or bf16)
SHARDC_CUDA_KERNEL(softmax) {
  namespace K = A::softmax;
  int64_t outer = i[K::outer], n = i[K::n], inner = i[K::inner];
  withDtype(i[K::dtype], "softmax", [&](auto t) {
    using T = decltype(t);
    auto *kernel = &softmaxKernel<T>;
    SHARDC_LAUNCH(kernel, gridFor(outer * inner), kThreads, 0,
                  streamOf(ctx, stream), static_cast<const T *>(b[0]),
                  static_cast<T *>(b[1]), outer, n, inner);
  });
}

// y, dy [outer,n,inner] -> dx (f32 or bf16)
SHARDC_CUDA_KERNEL(softmax_grad) {
  namespace K = A::softmax_grad;
  int64_t outer = i[K::outer], n = i[K::n], inner = i[K::inner];
  withDtype(i[K::dtype], "softmax_grad", [&](auto t) {
    using T = decltype(t);
    auto *kernel = &softmaxGradKernel<T>;
    SHARDC_LAUNCH(kernel, gridFor(outer * inner), kThreads, 0,
                  streamOf(ctx, stream), static_cast<const T *>(b[0]),
                  static_cast<const T *>(b[1]), static_cast<T *>(b[2]), outer,
                  n, inner);
  });
}

SHARDC_CUDA_KERNEL(cross_entropy_with_grad) {
  namespace K = A::cross_entropy_with_grad;
  int64_t N = i[K::N], V = i[K::V], ignore = i[K::ignore_index];
  auto &c = *static_cast<cuda::Context *>(ctx);
  cudaStream_t s = c.stream(stream);
  const int32_t *targets = static_cast<const int32_t *>(b[1]);
  // Scratch: the row losses, then the mean's scale.
  auto *rowLoss = static_cast<double *>(c.scratch(N * sizeof(double) + 8));
  auto *scale = reinterpret_cast<float *>(rowLoss + N);
  SHARDC_LAUNCH(lossScaleKernel, 1, kOneBlockThreads, 0, s, targets, N, ignore,
                static_cast<const float *>(nullptr), scale);
  // A bad target is reported after the run (Context::checkErrors).
  auto *rowsKernel = &crossEntropyRowsKernel<float>;
  bool vec = packedRows<float>(V, F(b[0]), F(b[3]));
  SHARDC_LAUNCH(rowsKernel, unsigned(N), kThreads, 0, s,
                F(b[0]), targets, V, V, ignore, scale, F(b[3]), rowLoss,
                c.errors + int64_t(A::KernelId::cross_entropy_with_grad), vec);
  SHARDC_LAUNCH(meanLossKernel, 1, 1, 0, s, rowLoss, targets, N, ignore, F(b[2]));
}

// h[N,C], w[V,C], t[N] -> loss[], dh[N,C], dw[V,C], through scratch[R,Vp]
// (Vp = lossHeadRowStride(V), V rounded up to 64): per chunk of R rows,
// logits[R,Vp] = h[r0:] wp^T (cuBLASLt), their cross-entropy gradient in
// place (one block a row, each row's loss kept, the padding columns zeroed),
// dh[r0:] = dlogits wp and dw (+)= dlogits^T h[r0:] (cuBLASLt, beta 1 from
// the second chunk); the mean loss as cross_entropy_with_grad's. The [N,V]
// logits are never whole.
//
// wp[Vp,C] is w with zero rows past V (a copy in the context's scratch when
// V is not a multiple of 64): cuBLASLt's fast kernels need the vocabulary
// dimension aligned (GPT-2's 50257-wide head GEMM ran at 125 TFLOP/s on an
// H100, the 3072-wide ones at 358: tools/bench/results/h100-2026-11-26-run1.log).
// The padding adds zero terms to dh's sums; dw's rows are split at
// V0 = V rounded down to 64, so that its aligned rows take the fast kernels.
//
// On bf16 (h, w, dh, dw and the scratch): the logits are cuBLASLt's bf16 D,
// the f32 product of the bf16 operands rounded once (a bf16 head's output);
// their gradient, computed in f32, is rounded to bf16 in place and is the
// bf16 operand of the two backward GEMMs. dh is written once per chunk; dw,
// summed over several chunks, is summed in f32 in the context's scratch
// ([V,C], outside the memory plan) and rounded once.
SHARDC_CUDA_KERNEL(linear_cross_entropy) {
  namespace L = A::linear_cross_entropy;
  int64_t N = i[L::N], C = i[L::C], V = i[L::V], R = i[L::R],
          ignore = i[L::ignore_index];
  if (R < 1)
    fatal("linear_cross_entropy: chunks of %lld rows", (long long)R);
  auto &c = *static_cast<cuda::Context *>(ctx);
  cudaStream_t s = c.stream(stream);
  bool bf16 = isBf16(i[L::dtype], "linear_cross_entropy");
  int64_t elem = bf16 ? 2 : 4;
  const char *h = static_cast<const char *>(b[0]);
  const int32_t *targets = static_cast<const int32_t *>(b[2]);
  char *dh = static_cast<char *>(b[4]);
  void *logits = b[6]; // [R, Vp] of the dtype: each row 128-byte aligned
  int64_t Vp = A::lossHeadRowStride(V), V0 = V / 64 * 64;
  bool accumulate = bf16 && N > R; // dw over several chunks, in f32
  size_t lossBytes = (size_t(N) * sizeof(double) + 8 + 255) / 256 * 256;
  size_t dwBytes = accumulate ? (size_t(V * C) * 4 + 255) / 256 * 256 : 0;
  size_t padBytes = Vp != V ? size_t(Vp * C * elem) : 0;
  char *scratch =
      static_cast<char *>(c.scratch(lossBytes + dwBytes + padBytes));
  auto *rowLoss = reinterpret_cast<double *>(scratch);
  auto *scale = reinterpret_cast<float *>(rowLoss + N);
  char *dw = accumulate ? scratch + lossBytes : static_cast<char *>(b[5]);
  int64_t dwElem = accumulate ? 4 : elem;
  const void *wp = b[1]; // [Vp, C]: w, then zero rows
  if (padBytes) {
    char *pad = scratch + lossBytes + dwBytes;
    CUDA_CHECK(cudaMemcpyAsync(pad, b[1], size_t(V * C * elem),
                               cudaMemcpyDeviceToDevice, s));
    CUDA_CHECK(cudaMemsetAsync(pad + V * C * elem, 0,
                               size_t((Vp - V) * C * elem), s));
    wp = pad;
  }
  SHARDC_LAUNCH(lossScaleKernel, 1, kOneBlockThreads, 0, s, targets, N, ignore,
                static_cast<const float *>(nullptr), scale);
  int64_t *bad = c.errors + int64_t(A::KernelId::linear_cross_entropy);
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    int64_t rows = std::min(R, N - r0);
    const char *hr = h + r0 * C * elem;
    // logits[rows,Vp] = h[r0:r0+rows, C] wp[Vp,C]^T, in the dtype
    RowGemm fwd{rows, Vp, C, false, true, hr, wp, logits};
    fwd.bf16 = bf16;
    gemmRows(c, stream, fwd);
    withDtype(i[L::dtype], "linear_cross_entropy", [&](auto e) {
      using T = decltype(e);
      auto *rowsKernel = &crossEntropyRowsKernel<T>;
      bool vec = packedRows<T>(Vp, static_cast<const T *>(logits));
      SHARDC_LAUNCH(rowsKernel, unsigned(rows), kThreads, 0, s,
                    static_cast<const T *>(logits), targets + r0, V, Vp,
                    ignore, scale, static_cast<T *>(logits), rowLoss + r0, bad,
                    vec);
    });
    // dh[r0:, C] = dlogits[rows,Vp] wp[Vp,C]
    RowGemm dx{rows, C, Vp, false, false, logits, wp, dh + r0 * C * elem};
    dx.bf16 = bf16;
    gemmRows(c, stream, dx);
    // dw[V0:V1, C] (+)= dlogits[rows, V0:V1]^T h[r0:, C], for the aligned
    // rows [0, V0) and the rest [V0, V)
    for (int64_t v0 : {int64_t(0), V0}) {
      int64_t v1 = v0 ? V : V0;
      if (v1 == v0)
        continue;
      RowGemm dW{v1 - v0, C, rows, true, false,
                 static_cast<const char *>(logits) + v0 * elem, hr,
                 dw + v0 * C * dwElem};
      dW.lda = Vp;
      dW.beta = r0 ? 1.0f : 0.0f;
      dW.bf16 = bf16;
      dW.f32Out = accumulate;
      gemmRows(c, stream, dW);
    }
  }
  if (accumulate) // dw rounded to bf16 once
    SHARDC_LAUNCH(castKernel, gridFor(V * C), kThreads, 0, s, dw, b[5], V * C,
                  int64_t(A::kF32), int64_t(A::kBF16));
  SHARDC_LAUNCH(meanLossKernel, 1, 1, 0, s, rowLoss, targets, N, ignore,
                F(b[3]));
}

// ids[N], dy[N,C] -> dtable[V,C] (f32 or bf16): each row the rows of dy of
// its id summed in f32 in increasing position, rounded once (the
// embedding gradient's kernels above). Scratch: count[V], start[V+1],
// order[N] (int32).
SHARDC_CUDA_KERNEL(embedding_grad) {
  namespace K = A::embedding_grad;
  int64_t N = i[K::N], V = i[K::V], C = i[K::C];
  if (V == 0 || C == 0)
    return;
  auto &c = *static_cast<cuda::Context *>(ctx);
  cudaStream_t s = c.stream(stream);
  auto *count = static_cast<int32_t *>(
      c.scratch(size_t(2 * V + 1 + N) * sizeof(int32_t)));
  int32_t *start = count + V, *order = start + V + 1;
  CUDA_CHECK(cudaMemsetAsync(count, 0, size_t(V) * sizeof(int32_t), s));
  const auto *ids = static_cast<const int32_t *>(b[0]);
  SHARDC_LAUNCH(idCountKernel, gridFor(N), kThreads, 0, s, ids, count, N, V);
  SHARDC_LAUNCH(idStartsKernel, 1, kEmbSortThreads, 0, s, count, start, V);
  SHARDC_LAUNCH(idOrderKernel, 1, kEmbSortThreads, 0, s, ids, start, count,
                order, N, V);
  withDtype(i[K::dtype], "embedding_grad", [&](auto t) {
    using T = decltype(t);
    const auto *dy = static_cast<const T *>(b[1]);
    auto *table = static_cast<T *>(b[2]);
    auto *rows = &embeddingRowsKernel<T>;
    bool vec = packedRows<T>(C, dy, table);
    int64_t slots = vec ? C / Pack<T>::kN : C, warps = V * ((slots + 31) / 32);
    SHARDC_LAUNCH(rows, unsigned((warps + kEmbRowWarps - 1) / kEmbRowWarps),
                  32 * kEmbRowWarps, 0, s, dy, order, start, table, V, C, vec);
  });
}

SHARDC_CUDA_KERNEL(sgd) {
  int64_t n = i[A::sgd::n];
  bool is1D = i[A::sgd::is_1d] != 0;
  SHARDC_LAUNCH(sgdKernel, gridFor(n), kThreads, 0, streamOf(ctx, stream), F(b[0]), F(b[1]), F(b[2]), F(b[3]), F(b[4]), F(b[5]), F(b[6]), n, is1D);
}

template <BinaryOp Op, typename T>
void binaryOf(cudaStream_t s, void **b, const Broadcast<2> &bc) {
  if (denseOperands(bc)) { // a residual add: y[n] = a[n] op b[n]
    launchMap2(s, BinaryFn<Op>(), bc.numel, static_cast<T *>(b[2]),
               static_cast<const T *>(b[0]), static_cast<const T *>(b[1]));
    return;
  }
  auto *kernel = &binaryKernel<Op, T>;
  SHARDC_LAUNCH(kernel, gridFor(bc.numel), kThreads, 0, s,
                static_cast<const T *>(b[0]), static_cast<const T *>(b[1]),
                static_cast<T *>(b[2]), bc);
}

/// A broadcasting binary kernel: add and mul are typed (f32 or bf16, their
/// dtype integer `dtype`), sub, div and pow f32.
template <BinaryOp Op>
void binary(A::KernelId id, void *ctx, void **b, const int64_t *i,
            int64_t stream, int64_t dtype = A::kF32) {
  const char *name = A::kernelInfo(id).name;
  Broadcast<2> bc = broadcastOf<2>(id, i, name);
  cudaStream_t s = streamOf(ctx, stream);
  withDtype(dtype, name,
            [&](auto t) { binaryOf<Op, decltype(t)>(s, b, bc); });
}

SHARDC_CUDA_KERNEL(add) {
  binary<BinaryOp::Add>(A::KernelId::add, ctx, b, i, stream, i[A::add::dtype]);
}
SHARDC_CUDA_KERNEL(mul) {
  binary<BinaryOp::Mul>(A::KernelId::mul, ctx, b, i, stream, i[A::mul::dtype]);
}
SHARDC_CUDA_KERNEL(sub) {
  binary<BinaryOp::Sub>(A::KernelId::sub, ctx, b, i, stream);
}
SHARDC_CUDA_KERNEL(div) {
  binary<BinaryOp::Div>(A::KernelId::div, ctx, b, i, stream);
}
SHARDC_CUDA_KERNEL(pow) {
  binary<BinaryOp::Pow>(A::KernelId::pow, ctx, b, i, stream);
}

SHARDC_CUDA_KERNEL(broadcast) {
  Broadcast<1> bc = broadcastOf<1>(A::KernelId::broadcast, i, "broadcast");
  SHARDC_LAUNCH(broadcastKernel, gridFor(bc.numel), kThreads, 0, streamOf(ctx, stream), F(b[0]), F(b[1]), bc);
}

const KernelFn *shardc::runtime::cuda::kernelTable() {
  static const std::array<KernelFn, A::kNumKernels> table = [] {
    std::array<KernelFn, A::kNumKernels> t{};
    auto set = [&](A::KernelId id, KernelFn fn) { t[int64_t(id)] = fn; };
    set(A::KernelId::fill, &shardc_cuda_k_fill);
    set(A::KernelId::copy, &shardc_cuda_k_copy);
    set(A::KernelId::cast, &shardc_cuda_k_cast);
    set(A::KernelId::gelu, &shardc_cuda_k_gelu);
    set(A::KernelId::gelu_grad, &shardc_cuda_k_gelu_grad);
    set(A::KernelId::silu, &shardc_cuda_k_silu);
    set(A::KernelId::silu_grad, &shardc_cuda_k_silu_grad);
    set(A::KernelId::accumulate, &shardc_cuda_k_accumulate);
    set(A::KernelId::embedding, &shardc_cuda_k_embedding);
    set(A::KernelId::squared_norm, &shardc_cuda_k_squared_norm);
    set(A::KernelId::clip_coef, &shardc_cuda_k_clip_coef);
    set(A::KernelId::adamw, &shardc_cuda_k_adamw);
    set(A::KernelId::squared_norm_group, &shardc_cuda_k_squared_norm_group);
    set(A::KernelId::adamw_group, &shardc_cuda_k_adamw_group);
    set(A::KernelId::layer_norm, &shardc_cuda_k_layer_norm);
    set(A::KernelId::rms_norm, &shardc_cuda_k_rms_norm);
    set(A::KernelId::add_layer_norm, &shardc_cuda_k_add_layer_norm);
    set(A::KernelId::add_rms_norm, &shardc_cuda_k_add_rms_norm);
    set(A::KernelId::swiglu, &shardc_cuda_k_swiglu);
    set(A::KernelId::swiglu_grad, &shardc_cuda_k_swiglu_grad);
    set(A::KernelId::add, &shardc_cuda_k_add);
    set(A::KernelId::mul, &shardc_cuda_k_mul);
    set(A::KernelId::sub, &shardc_cuda_k_sub);
    set(A::KernelId::div, &shardc_cuda_k_div);
    set(A::KernelId::pow, &shardc_cuda_k_pow);
    set(A::KernelId::broadcast, &shardc_cuda_k_broadcast);
    set(A::KernelId::softmax, &shardc_cuda_k_softmax);
    set(A::KernelId::softmax_grad, &shardc_cuda_k_softmax_grad);
    set(A::KernelId::cross_entropy_with_grad,
        &shardc_cuda_k_cross_entropy_with_grad);
    set(A::KernelId::linear_cross_entropy,
        &shardc_cuda_k_linear_cross_entropy);
    set(A::KernelId::embedding_grad, &shardc_cuda_k_embedding_grad);
    set(A::KernelId::sgd, &shardc_cuda_k_sgd);
    set(A::KernelId::linear, &shardc_cuda_k_linear);
    set(A::KernelId::matmul, &shardc_cuda_k_matmul);
    set(A::KernelId::matmul_bgrad, &shardc_cuda_k_matmul_bgrad);
    set(A::KernelId::matmul_fp8, &shardc_cuda_k_matmul_fp8);
    set(A::KernelId::linear_gelu, &shardc_cuda_k_linear_gelu);
    set(A::KernelId::linear_dgelu, &shardc_cuda_k_linear_dgelu);
    addAttentionKernels(t.data());
    addTensorKernels(t.data());
    addTrainKernels(t.data());
    addFloat8Kernels(t.data());
    addCollectives(t.data());
    return t;
  }();
  return table.data();
}
