//===- sdpa.h - cuDNN's fused attention for the CUDA backend -----*- C++ -*-===//
//
// The sdpa and sdpa_grad kernels of the ABI (runtime/abi/kernels.def) on
// cuDNN 9's fused scaled-dot-product attention, through cudnn-frontend's
// graph API (sdpa.cpp; the graphs themselves: sdpa_graph.h). Plain C++ on
// the cuDNN and CUDA runtime APIs, so the emulated device (runtime/cuda_emu,
// whose cudnn.cpp implements the backend API) runs the same code.
//
// A shape's forward and backward graphs are built together, once, on the
// first (uncaptured) launch, and cached. If cuDNN declines either, the
// shape takes the f32-math kernels of attention.cu on its bf16 data, both
// ways, with a one-line note naming it.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_SDPA_H
#define SHARDC_RUNTIME_CUDA_SDPA_H

#include <cstdint>

namespace shardc::runtime::cuda {

struct Context;

/// What a caller of sdpaForward / sdpaBackward learns: whether cuDNN ran it
/// (false: the shape was declined, nothing was launched).
enum class SdpaPath { Cudnn, Declined };

/// One attention: q[B,H,T,D], k and v [B,G,S,D], o [B,H,T,D], all bf16,
/// dense (row-major) or, under layout abi::kAttentionRows, rows of ld_q,
/// ld_k, ld_v and ld_o elements (abi::attentionStrides; dO, dq, dk and dv
/// as o, q, k and v); lse [B,H,T] f32, dense (the natural log of each
/// row's sum of exp(scale q.k)); causal is top-left aligned (query t sees
/// keys s <= t).
struct SdpaShape {
  int64_t B, H, G, T, S, D;
  bool causal;
  float scale;
  int64_t layout = 0, ld_q = 0, ld_k = 0, ld_v = 0, ld_o = 0;
  /// The backward's algorithm (sdpa_grad's `deterministic`): cuDNN's
  /// deterministic one (set_deterministic_algorithm(true), a dP workspace
  /// O(T S)), or the non-deterministic one (dQ accumulated in f32 in any
  /// order, O(T D) workspace). The forward is the same either way.
  bool deterministic = true;
};

/// q, k, v -> o, lse on `stream`, with `workspaceBytes` of device workspace.
SdpaPath sdpaForward(Context &c, const SdpaShape &s, const void *q,
                     const void *k, const void *v, void *o, float *lse,
                     void *workspace, int64_t workspaceBytes, int64_t stream);

/// q, k, v, o, lse, do -> dq, dk (summed over each group's query heads), dv.
/// With s.deterministic, the same bits run after run; without, dq, dk and
/// dv may differ in their last bits from run to run.
SdpaPath sdpaBackward(Context &c, const SdpaShape &s, const void *q,
                      const void *k, const void *v, const void *o,
                      const float *lse, const void *dO, void *dq, void *dk,
                      void *dv, void *workspace, int64_t workspaceBytes,
                      int64_t stream);

/// The cuDNN version the process runs on (cudnnGetVersion), for notes.
int64_t cudnnVersion();

/// Drops the cached graphs and `c`'s cuDNN handle (Context::destroy).
void sdpaRelease(Context &c);

} // namespace shardc::runtime::cuda

#endif
