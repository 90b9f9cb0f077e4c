//===- device.h - CUDA's execution model for host C++ -------------*- C++ -*-===//
//
// What a `.cu` kernel source sees when it is compiled as host C++ for the
// emulated CUDA device (SHARDC_CUDA_EMULATION): the built-in variables
// (threadIdx, blockIdx, blockDim, gridDim), barriers, warp shuffles and
// votes, atomics, `__shared__` memory, and the device intrinsics the
// backend's kernels use. The real CUDA headers come first, so dim3,
// cudaStream_t and the runtime's declarations are NVIDIA's own.
//
// The model kept (runtime/cuda_emu/scheduler.cpp runs it):
//  - every block of the grid runs; blocks spread over OpenMP threads;
//  - the threads of a block are fibers on one OS thread that meet at
//    __syncthreads(); a barrier that not every thread of the block reaches
//    is an error naming the kernel;
//  - the 32 lanes of a warp exchange values only at a shuffle or vote,
//    which every lane of its mask must reach;
//  - `__shared__` is `static thread_local`: one copy per OS thread, which
//    runs one block at a time, so one copy per running block;
//  - atomics are atomic across OS threads.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_EMU_DEVICE_H
#define SHARDC_RUNTIME_CUDA_EMU_DEVICE_H

#ifndef SHARDC_CUDA_EMULATION
#error "runtime/cuda_emu/device.h is for the emulated CUDA device only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace shardc::emu {

/// The thread the calling fiber is: set by the scheduler on every switch.
struct ThreadState {
  dim3 thread, block, blockDim_, gridDim_; ///< threadIdx, blockIdx, ...
  int lane = 0;   ///< threadIdx's linear index % 32
  int linear = 0; ///< threadIdx's linear index in the block
};
extern thread_local ThreadState tls;

/// A block barrier (__syncthreads); an error naming the kernel when not
/// every thread of the block reaches it.
void syncthreads();
/// The lanes of `mask` meet; each contributes `value`; the returned array
/// holds every lane's value (lanes outside the mask or the block: 0).
const uint64_t *warpExchange(unsigned mask, uint64_t value, const char *what);
/// Dynamic shared memory of the running block: at least `bytes`, or an
/// error naming the kernel if the launch asked for less.
void *dynamicShared(size_t bytes);

/// Enqueues a launch of `body` (the kernel `entry` applied to its
/// arguments) on `stream`; checks the configuration (a block over 1024
/// threads, a grid over the device's limits, dynamic shared memory over
/// 48 KiB that cudaFuncSetAttribute did not allow) and reports a bad one
/// through cudaGetLastError, naming `kernel`.
void launchKernel(const char *kernel, const void *entry, dim3 grid,
                  dim3 block, size_t smem, cudaStream_t stream,
                  std::function<void()> body);

/// The kernel call `kernel(args...)`, arguments converted to the kernel's
/// parameter types and copied, as a launch copies them.
template <typename... P, typename... Args>
void launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block,
            size_t smem, cudaStream_t stream, Args &&...args) {
  static_assert(sizeof...(P) == sizeof...(Args),
                "a kernel launch passes one argument per parameter");
  std::tuple<std::decay_t<P>...> params(std::forward<Args>(args)...);
  launchKernel(name, reinterpret_cast<const void *>(kernel), grid, block,
               smem, stream,
               [kernel, params]() { std::apply(kernel, params); });
}

template <typename T> uint64_t toBits(T v) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <typename T> T fromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

/// An atomic read-modify-write of *p by `op`, across OS threads.
template <typename T, typename Op> T atomicUpdate(T *p, Op op) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics of 4 or 8 bytes");
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  U *bits = reinterpret_cast<U *>(p);
  U old = __atomic_load_n(bits, __ATOMIC_RELAXED);
  for (;;) {
    T next = op(fromBits<T>(old));
    U nextBits = U(toBits(next));
    if (__atomic_compare_exchange_n(bits, &old, nextBits, false,
                                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
      return fromBits<T>(old);
  }
}

} // namespace shardc::emu

/// The C++ overload nvcc's cuda_runtime.h declares for kernels (it is
/// guarded by __CUDACC__ there).
template <class T>
cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void *>(entry), attr,
                                value);
}

// The qualifiers: host functions, `__shared__` one per running block.
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#undef __restrict__
#define __global__
#define __device__
#define __host__
#define __shared__ static thread_local
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __restrict__ __restrict

#define threadIdx (::shardc::emu::tls.thread)
#define blockIdx (::shardc::emu::tls.block)
#define blockDim (::shardc::emu::tls.blockDim_)
#define gridDim (::shardc::emu::tls.gridDim_)
#ifndef warpSize
#define warpSize 32
#endif

inline void __syncthreads() { ::shardc::emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::shardc::emu::warpExchange(mask, 0, "__syncwarp");
}

template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const uint64_t *all =
      ::shardc::emu::warpExchange(mask, ::shardc::emu::toBits(v), "__shfl_sync");
  int lane = ::shardc::emu::tls.lane;
  int base = lane - lane % width;
  return ::shardc::emu::fromBits<T>(all[base + ((src % width) + width) % width]);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const uint64_t *all = ::shardc::emu::warpExchange(
      mask, ::shardc::emu::toBits(v), "__shfl_down_sync");
  int lane = ::shardc::emu::tls.lane;
  int src = lane + int(delta);
  // Beyond the segment of `width` lanes: the caller's own value, as CUDA.
  if (src / width != lane / width || src >= 32)
    return v;
  return ::shardc::emu::fromBits<T>(all[src]);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const uint64_t *all = ::shardc::emu::warpExchange(
      mask, ::shardc::emu::toBits(v), "__shfl_up_sync");
  int lane = ::shardc::emu::tls.lane;
  int src = lane - int(delta);
  if (src < 0 || src / width != lane / width)
    return v;
  return ::shardc::emu::fromBits<T>(all[src]);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int laneMask, int width = 32) {
  const uint64_t *all = ::shardc::emu::warpExchange(
      mask, ::shardc::emu::toBits(v), "__shfl_xor_sync");
  int lane = ::shardc::emu::tls.lane;
  int src = lane ^ laneMask;
  if (src / width != lane / width || src >= 32)
    return v;
  return ::shardc::emu::fromBits<T>(all[src]);
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  const uint64_t *all =
      ::shardc::emu::warpExchange(mask, pred != 0, "__ballot_sync");
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l)
    if ((mask >> l & 1u) && all[l])
      bits |= 1u << l;
  return bits;
}
inline int __any_sync(unsigned mask, int pred) {
  return __ballot_sync(mask, pred) != 0;
}
inline int __all_sync(unsigned mask, int pred) {
  return __ballot_sync(mask, pred) == (mask & __ballot_sync(mask, 1));
}

template <typename T> T atomicAdd(T *p, T v) {
  return ::shardc::emu::atomicUpdate(p, [v](T old) { return T(old + v); });
}
template <typename T> T atomicMax(T *p, T v) {
  return ::shardc::emu::atomicUpdate(p,
                                     [v](T old) { return old < v ? v : old; });
}
template <typename T> T atomicMin(T *p, T v) {
  return ::shardc::emu::atomicUpdate(p,
                                     [v](T old) { return v < old ? v : old; });
}
template <typename T> T atomicExch(T *p, T v) {
  return ::shardc::emu::atomicUpdate(p, [v](T) { return v; });
}
template <typename T> T atomicCAS(T *p, T compare, T v) {
  return ::shardc::emu::atomicUpdate(
      p, [compare, v](T old) { return old == compare ? v : old; });
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// Device intrinsics as host math.
template <typename T> T __ldg(const T *p) { return *p; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0 ? 0 : x > 1 ? 1 : x; }
inline uint32_t __float_as_uint(float v) {
  return ::shardc::emu::fromBits<uint32_t>(::shardc::emu::toBits(v));
}
inline float __uint_as_float(uint32_t v) {
  return ::shardc::emu::fromBits<float>(::shardc::emu::toBits(v));
}
inline int __float_as_int(float v) { return int(__float_as_uint(v)); }
inline float __int_as_float(int v) { return __uint_as_float(uint32_t(v)); }

#endif // SHARDC_RUNTIME_CUDA_EMU_DEVICE_H
