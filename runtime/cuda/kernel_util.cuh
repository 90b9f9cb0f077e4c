//===- kernel_util.cuh - what the CUDA kernel files share ---------*- C++ -*-===//
//
// Stream lookup, grid-stride loops and their grid size, and block-wide
// reductions, for every file of runtime/cuda.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_KERNEL_UTIL_CUH
#define SHARDC_RUNTIME_CUDA_KERNEL_UTIL_CUH

#include "runtime/cuda/context.h"
#include "runtime/cuda/launch.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace shardc::runtime::cuda {

inline cudaStream_t streamOf(void *ctx, int64_t stream) {
  return static_cast<cuda::Context *>(ctx)->stream(stream);
}

inline float *F(void *p) { return static_cast<float *>(p); }

/// f32 math on an element of storage type T (f32 or bf16).
__device__ inline float toFloat(float x) { return x; }
__device__ inline float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ T fromFloat(float v);
template <> __device__ inline float fromFloat<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16(v); // round to nearest even, once
}

/// 128 bits of T: 4 f32 or 8 bf16, as f32 values.
template <typename T> struct Pack {
  static constexpr int kN = 16 / sizeof(T);
  float v[kN];
  __device__ void load(const T *p, int64_t k) {
    uint4 raw = reinterpret_cast<const uint4 *>(p)[k];
    const T *e = reinterpret_cast<const T *>(&raw);
    for (int j = 0; j < kN; ++j)
      v[j] = toFloat(e[j]);
  }
  __device__ void store(T *p, int64_t k) const {
    uint4 raw;
    T *e = reinterpret_cast<T *>(&raw);
    for (int j = 0; j < kN; ++j)
      e[j] = fromFloat<T>(v[j]);
    reinterpret_cast<uint4 *>(p)[k] = raw;
  }
};

/// fn(T()) with T the storage type of a typed kernel's dtype code (float
/// or __nv_bfloat16; isBf16 refuses any other, naming `kernel`).
template <typename Fn> void withDtype(int64_t dtype, const char *kernel, Fn fn) {
  if (isBf16(dtype, kernel))
    fn(__nv_bfloat16());
  else
    fn(float());
}

/// Whether every pointer allows 128-bit accesses (16-byte aligned; nulls
/// do).
template <typename... P> bool aligned16(const P *...p) {
  return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}

/// Whether rows of C elements of T starting at every pointer allow Pack<T>
/// accesses: C a multiple of Pack<T>::kN, each pointer 16-byte aligned
/// (nulls allowed). Decided on the host, uniform over a launch.
template <typename T, typename... P> bool packedRows(int64_t C, const P *...p) {
  return C % Pack<T>::kN == 0 && aligned16(p...);
}

/// The columns of a row of C that slot `first` of `step` slots owns:
/// fn(c0, n) for n = Pack<T>::kN columns from c0 (packs first, first +
/// step, ...) when `vec` (packedRows), for one column at a time (n = 1)
/// otherwise.
template <typename T, typename Fn>
__device__ inline void forStridedPacks(int64_t C, bool vec, int64_t first,
                                       int64_t step, Fn fn) {
  constexpr int kN = Pack<T>::kN;
  if (vec) {
    for (int64_t j = first; j < C / kN; j += step)
      fn(j * kN, kN);
    return;
  }
  for (int64_t c = first; c < C; c += step)
    fn(c, 1);
}

/// The columns of a row of C that the calling thread owns, block-strided
/// (forStridedPacks over the block's threads).
template <typename T, typename Fn>
__device__ inline void forRowPacks(int64_t C, bool vec, Fn fn) {
  forStridedPacks<T>(C, vec, threadIdx.x, blockDim.x, fn);
}

/// forRowPacks for one warp's row: the columns lane `lane` of 32 owns,
/// packs lane, lane + 32, ... when `vec` (packedRows), else columns.
template <typename T, typename Fn>
__device__ inline void forLanePacks(int64_t C, bool vec, int lane, Fn fn) {
  forStridedPacks<T>(C, vec, lane, 32, fn);
}

/// v[0, n) = row[c0, c0 + n) as f32: one 128-bit load when n is a pack.
template <typename T>
__device__ inline void loadCols(const T *row, int64_t c0, int n,
                                float (&v)[Pack<T>::kN]) {
  if (n == Pack<T>::kN) {
    Pack<T> q;
    q.load(row + c0, 0);
    for (int e = 0; e < Pack<T>::kN; ++e)
      v[e] = q.v[e];
  } else {
    v[0] = toFloat(row[c0]);
  }
}

/// row[c0, c0 + n) = v[0, n), each rounded to T once.
template <typename T>
__device__ inline void storeCols(T *row, int64_t c0, int n,
                                 const float (&v)[Pack<T>::kN]) {
  if (n == Pack<T>::kN) {
    Pack<T> q;
    for (int e = 0; e < Pack<T>::kN; ++e)
      q.v[e] = v[e];
    q.store(row + c0, 0);
  } else {
    row[c0] = fromFloat<T>(v[0]);
  }
}

/// Grid-stride loop over [0, n).
#define FOR_EACH(k, n)                                                         \
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < (n);   \
       k += int64_t(gridDim.x) * blockDim.x)

constexpr int kThreads = 256;
/// Blocks of kThreads for a grid-stride loop over n elements: enough to
/// fill the device (8 blocks of 256 threads per multiprocessor, full
/// occupancy), no more; each thread then strides.
inline unsigned gridFor(int64_t n) {
  static const unsigned cap = [] {
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    return unsigned(sms > 0 ? sms : 1) * 8u;
  }();
  unsigned blocks = blocksFor(n, kThreads);
  return blocks < cap ? (blocks ? blocks : 1u) : cap;
}

/// Blocks that fill the device (gridFor's cap).
inline int64_t deviceBlocks() { return int64_t(gridFor(int64_t(1) << 30)); }

/// Column sums of a row-major [M, N] matrix (bias and norm-weight
/// gradients): a block of kThreads threads is kColSlots column slots (one
/// warp; a slot owns Pack<T>::kN consecutive columns, one 128-bit load a
/// row) times kRowLanes row lanes (lane l sums rows l, l + kRowLanes, ...
/// of its chunk); the lanes are then added in lane order, the chunks after
/// that: a fixed association, no atomics.
constexpr int kColSlots = 32, kRowLanes = kThreads / kColSlots;

/// How a column-sum kernel splits [M, N] with kN columns a slot: colBlocks
/// blocks across (x) times chunks of `rows` rows (y), about two blocks a
/// multiprocessor (each thread then has rows enough to keep loads in
/// flight, and the partial sums stay few), at least 64 rows a chunk.
struct ColumnChunks {
  int64_t colBlocks, chunks, rows;
};
inline ColumnChunks columnChunks(int64_t M, int64_t N, int kN) {
  int64_t colBlocks = std::max<int64_t>(1, (N + kColSlots * kN - 1) / (kColSlots * kN));
  int64_t want = std::max<int64_t>(1, deviceBlocks() / 4);
  int64_t chunks = std::min((want + colBlocks - 1) / colBlocks, (M + 63) / 64);
  chunks = std::clamp<int64_t>(chunks, 1, 65535);
  int64_t rows = std::max<int64_t>(1, (M + chunks - 1) / chunks);
  return {colBlocks, std::max<int64_t>(1, (M + rows - 1) / rows), rows};
}

/// acc (each thread's kN sums) added over the block's row lanes in lane
/// order; the result is valid in lane 0 (threads [0, kColSlots)). Every
/// thread of the block calls it; it may be called again at once (its
/// shared memory is read before it returns: compute-sanitizer's racecheck
/// found the second call's writes racing the first's reads on an H100).
template <int kN> __device__ inline void sumRowLanes(double (&acc)[kN]) {
  __shared__ double part[kRowLanes - 1][kColSlots * kN];
  int slot = threadIdx.x % kColSlots, lane = threadIdx.x / kColSlots;
  if (lane > 0)
    for (int j = 0; j < kN; ++j)
      part[lane - 1][slot * kN + j] = acc[j];
  __syncthreads();
  if (lane == 0)
    for (int l = 0; l < kRowLanes - 1; ++l)
      for (int j = 0; j < kN; ++j)
        acc[j] += part[l][slot * kN + j];
  __syncthreads();
}

// partial[chunks, n] (and partial2, or null) -> y[n] (y2): each column's
// chunks summed, kColSlots columns a block (coalesced), lane l of
// kRowLanes summing chunks l, l + kRowLanes, ..., the lanes then in order
// (sumRowLanes): a fixed association, the latency of chunks / kRowLanes
// loads instead of `chunks` (a thread a column took about 25 us over 88
// chunks on an H100)
template <typename Y>
__global__ void sumChunkColumnsKernel(const double *partial,
                                      const double *partial2, Y *y, Y *y2,
                                      int64_t chunks, int64_t n) {
  int slot = threadIdx.x % kColSlots, lane = threadIdx.x / kColSlots;
  int64_t c = blockIdx.x * int64_t(kColSlots) + slot;
  double acc[2] = {0.0, 0.0};
  if (c < n)
    for (int64_t k = lane; k < chunks; k += kRowLanes) {
      acc[0] += partial[k * n + c];
      if (partial2)
        acc[1] += partial2[k * n + c];
    }
  sumRowLanes<2>(acc);
  if (lane == 0 && c < n) {
    y[c] = fromFloat<Y>(float(acc[0]));
    if (y2)
      y2[c] = fromFloat<Y>(float(acc[1]));
  }
}

/// Launches sumChunkColumnsKernel over n columns on stream s.
template <typename Y>
void sumChunkColumns(cudaStream_t s, const double *partial,
                     const double *partial2, Y *y, Y *y2, int64_t chunks,
                     int64_t n) {
  auto *kernel = &sumChunkColumnsKernel<Y>;
  SHARDC_LAUNCH(kernel, unsigned((n + kColSlots - 1) / kColSlots), kThreads, 0,
                s, partial, partial2, y, y2, chunks, n);
}

/// Whether p and a row stride of n elements of T allow 128-bit loads.
template <typename T> inline bool packAligned(const void *p, int64_t n) {
  return n % Pack<T>::kN == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// Sum over the block of a double per thread (blockDim.x a power of two,
/// at most 1024); the result is valid in thread 0.
__device__ inline double blockSum(double v) {
  __shared__ double part[32];
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_down_sync(0xffffffffu, v, o);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    part[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? part[lane] : 0.0;
  if (warp == 0)
    for (int o = 16; o > 0; o /= 2)
      v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads();
  return v;
}

/// Max over the block of a float per thread; valid in every thread.
__device__ inline float blockMax(float v) {
  __shared__ float part[32];
  __shared__ float result;
  for (int o = 16; o > 0; o /= 2)
    v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    part[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? part[lane] : -INFINITY;
  if (warp == 0)
    for (int o = 16; o > 0; o /= 2)
      v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  if (threadIdx.x == 0)
    result = v;
  __syncthreads();
  return result;
}

/// amax[0] = max(amax[0], the block's max of m): an atomic max on the bits
/// (m >= 0, so the int order is the float order; amax zeroed before the
/// launch). Every thread of the block calls it. The float8 amaxes, and the
/// producers rt-fuse-amax gives a float8 cast's amax (kernels.def).
__device__ inline void blockAmaxInto(float *amax, float m) {
  m = blockMax(m);
  if (threadIdx.x == 0)
    atomicMax(reinterpret_cast<int *>(amax), __float_as_int(m));
}

/// |v| as an element of T stores it (rounded once), for an amax of what
/// a kernel writes.
template <typename T> __device__ inline float storedAbs(float v) {
  return fabsf(toFloat(fromFloat<T>(v)));
}

/// The threads of the one-block reduction kernels (lossScaleKernel,
/// meanRowLossKernel): their launches and their __launch_bounds__, so that
/// a build never gives them more registers than 1024 threads can have.
constexpr int kOneBlockThreads = 1024;

// t[N], dloss[]? -> *scale = (dloss ? dloss[0] : 1) / (rows of t not
// ignored), 0 if none (one block of kOneBlockThreads): the mean's scale of
// the losses and their gradients
static __global__ void __launch_bounds__(kOneBlockThreads)
    lossScaleKernel(const int32_t *targets, int64_t N, int64_t ignore,
                    const float *dloss, float *scale) {
  double count = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x)
    count += targets[n] != ignore;
  count = blockSum(count);
  if (threadIdx.x == 0)
    *scale = count != 0 ? (dloss ? dloss[0] : 1.0f) / float(int64_t(count))
                        : 0.0f;
}

} // namespace shardc::runtime::cuda

#endif // SHARDC_RUNTIME_CUDA_KERNEL_UTIL_CUH
