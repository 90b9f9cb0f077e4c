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

#include <cmath>
#include <cstdint>

namespace shardc::runtime::cuda {

inline cudaStream_t streamOf(void *ctx, int64_t stream) {
  return static_cast<cuda::Context *>(ctx)->stream(stream);
}

inline float *F(void *p) { return static_cast<float *>(p); }

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
