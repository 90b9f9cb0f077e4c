//===- kernel_util.h - shared pieces of the CPU kernels ----------*- C++ -*-===//
#ifndef SHARDC_RUNTIME_CPU_KERNEL_UTIL_H
#define SHARDC_RUNTIME_CPU_KERNEL_UTIL_H

#include "runtime/runtime.h"

#include <cstdint>

namespace shardc::runtime::cpu {

inline float *F(void *p) { return static_cast<float *>(p); }
inline const int32_t *I32(void *p) { return static_cast<const int32_t *>(p); }

inline void launchedAs(void *ctx, int64_t stream, const char *kernel) {
  if (ctx)
    static_cast<Context *>(ctx)->countLaunch(stream, kernel);
}

} // namespace shardc::runtime::cpu

// Every kernel ends with launched(ctx, stream): counted, and timed when
// profiling, under its own name (its function name less "shardc_k_").
#define launched(ctx, stream)                                                  \
  ::shardc::runtime::cpu::launchedAs(ctx, stream, __func__ + 9)

#endif // SHARDC_RUNTIME_CPU_KERNEL_UTIL_H
