//===- RtFlops.h - the floating-point work of a compiled program -*- C++ -*-===//
//
// FLOPs of the program's GEMMs and attention, counted from the kernels'
// integer arguments (runtime/abi/kernels.def): what the report prints and
// the manifest keeps, so that the trainer reports TFLOP/s. Everything else
// (norms, element-wise kernels, the optimizer) is left out, as model-FLOP
// counts do.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_RTFLOPS_H
#define SHARDC_PASSES_RTFLOPS_H

#include "dialects/rt/RtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "runtime/abi/abi.h"

namespace shardc {

/// (query, key) pairs of attention over T queries and S keys that the mask
/// keeps: all, or with `causal` the keys up to each query's position (the
/// queries being the last T of the S positions).
inline int64_t attentionPairs(int64_t T, int64_t S, bool causal) {
  if (!causal)
    return T * S;
  int64_t pairs = 0;
  for (int64_t t = 0; t < T; ++t)
    pairs += std::min(S, std::max<int64_t>(0, S - T + t + 1));
  return pairs;
}

/// FLOPs of one launch: a GEMM 2*M*K*N (a batched one times its batch);
/// attention 4*B*H*D per kept pair (scores and the weighted sum), its
/// gradient 10*B*H*D (the scores again and four products); 0 otherwise.
inline int64_t kernelFlops(rt::KernelOp k) {
  const abi::KernelInfo *info = abi::lookupKernel(k.getName());
  if (!info)
    return 0;
  llvm::ArrayRef<int64_t> i = k.getInts();
  switch (abi::kernelId(*info)) {
  case abi::KernelId::linear:
    return 2 * i[abi::linear::M] * i[abi::linear::K] * i[abi::linear::N];
  case abi::KernelId::linear_gelu:
    return 2 * i[abi::linear_gelu::M] * i[abi::linear_gelu::K] *
           i[abi::linear_gelu::N];
  case abi::KernelId::linear_dgelu:
    return 2 * i[abi::linear_dgelu::M] * i[abi::linear_dgelu::K] *
           i[abi::linear_dgelu::N];
  case abi::KernelId::matmul:
    return 2 * i[abi::matmul::M] * i[abi::matmul::K] * i[abi::matmul::N];
  case abi::KernelId::linear_cross_entropy:
    // The head's GEMM and its two gradient GEMMs, chunked: 3 x 2NCV.
    return 6 * i[abi::linear_cross_entropy::N] *
           i[abi::linear_cross_entropy::C] * i[abi::linear_cross_entropy::V];
  case abi::KernelId::batch_matmul: {
    int64_t batch = 1;
    for (int64_t r = 0; r < i[abi::batch_matmul::R]; ++r)
      batch *= i[abi::batch_matmul::kNumInts + r];
    return 2 * batch * i[abi::batch_matmul::M] * i[abi::batch_matmul::K] *
           i[abi::batch_matmul::N];
  }
  case abi::KernelId::attention:
  case abi::KernelId::attention_grad: {
    namespace a = abi::attention;
    int64_t perPair = abi::kernelId(*info) == abi::KernelId::attention ? 4 : 10;
    return perPair * i[a::B] * i[a::H] * i[a::D] *
           attentionPairs(i[a::T], i[a::S], i[a::causal] != 0);
  }
  default:
    return 0;
  }
}

/// FLOPs of one run of step function `fn`.
inline int64_t entryFlops(mlir::func::FuncOp fn) {
  int64_t flops = 0;
  fn.walk([&](rt::KernelOp k) { flops += kernelFlops(k); });
  return flops;
}

} // namespace shardc

#endif // SHARDC_PASSES_RTFLOPS_H
