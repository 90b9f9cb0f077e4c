//===- kernels.h - the backend kernels' C declarations ------------*- C++ -*-===//
//
// Every kernel of the ABI (runtime/abi/kernels.def, where each one's buffers,
// integer and float arguments are defined) as an extern "C" function
//   void shardc_k_<name>(void *ctx, void **b, const int64_t *i,
//                        const double *f, int64_t stream);
// A backend defines each of them; kernels read their arguments through the
// per-kernel enums of runtime/abi/abi.h (`i[abi::linear::M]`).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_KERNELS_H
#define SHARDC_RUNTIME_KERNELS_H

#include "runtime/abi/abi.h"

#include <cstdint>

#define SHARDC_KERNEL(name) extern "C" SHARDC_ABI_KERNEL_SIGNATURE(name)

#define SHARDC_ABI_KERNEL(name, ...) SHARDC_KERNEL(name);
#include "runtime/abi/kernels.def"

#endif // SHARDC_RUNTIME_KERNELS_H
