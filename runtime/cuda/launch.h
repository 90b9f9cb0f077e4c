//===- launch.h - the one kernel launch of the CUDA backend --------*- C++ -*-===//
//
// Every kernel launch of runtime/cuda goes through SHARDC_LAUNCH, so the
// same sources build for a GPU (nvcc: the <<<...>>> launch) and for the
// emulated device (host C++: runtime/cuda_emu runs the grid). Each launch is
// checked (CUDA_LAUNCHED). Dynamic shared memory is declared with
// SHARDC_DYNAMIC_SHARED, which on the emulated device checks that the launch
// asked for at least `count` elements.
//
//   SHARDC_LAUNCH(kernel, grid, block, sharedBytes, stream, args...);
//   SHARDC_DYNAMIC_SHARED(float, tile, 2 * 64 * 64);
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_LAUNCH_H
#define SHARDC_RUNTIME_CUDA_LAUNCH_H

#include "runtime/cuda/check.h"

#ifdef SHARDC_CUDA_EMULATION
#include "runtime/cuda_emu/device.h"

#define SHARDC_LAUNCH(kernel, grid, block, smem, stream, ...)                  \
  do {                                                                         \
    ::shardc::emu::launch(#kernel, kernel, grid, block, smem, stream,          \
                          __VA_ARGS__);                                        \
    CUDA_LAUNCHED();                                                           \
  } while (0)
#define SHARDC_DYNAMIC_SHARED(T, name, count)                                  \
  T *name = static_cast<T *>(                                                  \
      ::shardc::emu::dynamicShared(sizeof(T) * size_t(count)))
#else
#define SHARDC_LAUNCH(kernel, grid, block, smem, stream, ...)                  \
  do {                                                                         \
    kernel<<<grid, block, smem, stream>>>(__VA_ARGS__);                        \
    CUDA_LAUNCHED();                                                           \
  } while (0)
#define SHARDC_DYNAMIC_SHARED(T, name, count)                                  \
  extern __shared__ __align__(16) unsigned char name##_bytes_[];               \
  T *name = reinterpret_cast<T *>(name##_bytes_)
#endif

#endif // SHARDC_RUNTIME_CUDA_LAUNCH_H
