//===- RtFlops.h - the floating-point work of a compiled program -*- C++ -*-===//
//
// FLOPs of the program's GEMMs and attention, counted from the kernels'
// integer arguments (runtime/abi/kernels.def): what the report prints and
// the manifest keeps, so that the trainer reports TFLOP/s. Everything else
// (norms, element-wise kernels, the optimizer) is left out, as model-FLOP
// counts do. Also the GEMMs' shapes and the collectives' bytes, which the
// report and rt-predict both read.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_RTFLOPS_H
#define SHARDC_PASSES_RTFLOPS_H

#include "dialects/rt/RtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "runtime/abi/abi.h"

#include <optional>

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

/// The shape of a GEMM launch: `batch` products of m x k by k x n.
struct GemmShape {
  int64_t batch, m, n, k;
};

/// The shape of `k` if it is a GEMM (linear, its fused GELU forms, matmul,
/// matmul_fp8, batch_matmul); nullopt otherwise.
inline std::optional<GemmShape> gemmShape(rt::KernelOp k) {
  const abi::KernelInfo *info = abi::lookupKernel(k.getName());
  if (!info)
    return std::nullopt;
  llvm::ArrayRef<int64_t> i = k.getInts();
  switch (abi::kernelId(*info)) {
  case abi::KernelId::linear:
    return GemmShape{1, i[abi::linear::M], i[abi::linear::N], i[abi::linear::K]};
  case abi::KernelId::linear_gelu:
    return GemmShape{1, i[abi::linear_gelu::M], i[abi::linear_gelu::N],
                     i[abi::linear_gelu::K]};
  case abi::KernelId::linear_dgelu:
    return GemmShape{1, i[abi::linear_dgelu::M], i[abi::linear_dgelu::N],
                     i[abi::linear_dgelu::K]};
  case abi::KernelId::matmul:
  case abi::KernelId::matmul_bgrad: // matmul's ints lead
    return GemmShape{1, i[abi::matmul::M], i[abi::matmul::N], i[abi::matmul::K]};
  case abi::KernelId::matmul_fp8:
    return GemmShape{1, i[abi::matmul_fp8::M], i[abi::matmul_fp8::N],
                     i[abi::matmul_fp8::K]};
  case abi::KernelId::batch_matmul: {
    int64_t batch = 1;
    for (int64_t r = 0; r < i[abi::batch_matmul::R]; ++r)
      batch *= i[abi::batch_matmul::kNumInts + r];
    return GemmShape{batch, i[abi::batch_matmul::M], i[abi::batch_matmul::N],
                     i[abi::batch_matmul::K]};
  }
  default:
    return std::nullopt;
  }
}

/// FLOPs of one launch: a GEMM 2*M*K*N (a batched one times its batch);
/// attention 4*B*H*D per kept pair (scores and the weighted sum), its
/// gradient 10*B*H*D (the scores again and four products); 0 otherwise.
inline int64_t kernelFlops(rt::KernelOp k) {
  if (std::optional<GemmShape> g = gemmShape(k))
    return 2 * g->batch * g->m * g->k * g->n;
  const abi::KernelInfo *info = abi::lookupKernel(k.getName());
  if (!info)
    return 0;
  llvm::ArrayRef<int64_t> i = k.getInts();
  switch (abi::kernelId(*info)) {
  case abi::KernelId::linear_cross_entropy:
    // The head's GEMM and its two gradient GEMMs, chunked: 3 x 2NCV.
    return 6 * i[abi::linear_cross_entropy::N] *
           i[abi::linear_cross_entropy::C] * i[abi::linear_cross_entropy::V];
  case abi::KernelId::attention:
  case abi::KernelId::attention_grad:
  case abi::KernelId::sdpa:
  case abi::KernelId::sdpa_grad: {
    // sdpa's ints are attention's (then ws_bytes: rt-fused-attention).
    namespace a = abi::attention;
    abi::KernelId id = abi::kernelId(*info);
    int64_t perPair =
        id == abi::KernelId::attention || id == abi::KernelId::sdpa ? 4 : 10;
    return perPair * i[a::B] * i[a::H] * i[a::D] *
           attentionPairs(i[a::T], i[a::S], i[a::causal] != 0);
  }
  default:
    return 0;
  }
}

/// What a collective moves: its kind, axis and stream, the ranks it spans
/// and the bytes of the full buffer each rank takes part in (the gathered
/// result, the reduced input, the all-reduced buffer).
struct CollectiveTraffic {
  llvm::StringRef kind;
  int64_t axis, stream, ranks, bytes;
  /// The axis's name ("replicate", "shard", "tp") and the world-rank
  /// distance between its neighbours (abi::MeshGrid).
  const char *axisName;
  int64_t stride;
};

/// The traffic of `op` if it is a collective on `mesh`; nullopt otherwise.
inline std::optional<CollectiveTraffic>
collectiveTraffic(mlir::Operation *op, const abi::MeshGrid &mesh) {
  auto ranksOn = [&](int64_t axis) { return mesh.axisSize(axis); };
  auto bytesOf = [](mlir::Type dtype) {
    return abi::dtypeBytes(rt::dtypeCode(dtype));
  };
  auto make = [&](llvm::StringRef kind, int64_t axis, int64_t stream,
                  int64_t ranks, int64_t bytes) {
    return CollectiveTraffic{kind,  axis,  stream,
                             ranks, bytes, mesh.axisName(axis),
                             mesh.axisStride(axis)};
  };
  if (auto g = llvm::dyn_cast<rt::AllGatherOp>(op)) {
    int64_t elements = 0;
    for (int64_t n : g.getCounts())
      elements += n;
    int64_t ranks = g.getSubgroup() ? g.getSubgroup() : ranksOn(g.getAxis());
    return make("all_gather", g.getAxis(), g.getStream(), ranks,
                elements * bytesOf(g.getDtype()) * ranks);
  }
  if (auto r = llvm::dyn_cast<rt::ReduceScatterOp>(op))
    return make("reduce_scatter", r.getAxis(), r.getStream(),
                ranksOn(r.getAxis()),
                r.getCount() * bytesOf(r.getDtype()) * ranksOn(r.getAxis()));
  if (auto r = llvm::dyn_cast<rt::AllReduceOp>(op))
    return make("all_reduce", r.getAxis(), r.getStream(), ranksOn(r.getAxis()),
                r.getCount() * bytesOf(r.getDtype()));
  return std::nullopt;
}

/// FLOPs of one run of step function `fn`.
inline int64_t entryFlops(mlir::func::FuncOp fn) {
  int64_t flops = 0;
  fn.walk([&](rt::KernelOp k) { flops += kernelFlops(k); });
  return flops;
}

} // namespace shardc

#endif // SHARDC_PASSES_RTFLOPS_H
