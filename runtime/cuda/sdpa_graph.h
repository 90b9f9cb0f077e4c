//===- sdpa_graph.h - the cuDNN graphs of shardc's attention -----*- C++ -*-===//
//
// The cudnn-frontend graphs sdpa.cpp runs: forward with stats, and the
// backward, deterministic or not by SdpaShape::deterministic. Separate from sdpa.h so that a test can build the
// very same graphs for a described device (device-less compilation) or on
// the emulated device.
//
//   forward:  Q[B,H,T,D] K[B,G,S,D] V[B,G,S,D] -> O[B,H,T,D] (bf16),
//             Stats[B,H,T,1] (f32: log-sum-exp of each row's scores)
//   backward: Q K V O dO[B,H,T,D] Stats -> dQ[B,H,T,D] dK dV[B,G,S,D]
//
// bf16 in and out, f32 intermediates and compute; causal is cuDNN's
// top-left diagonal with right bound 0.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_SDPA_GRAPH_H
#define SHARDC_RUNTIME_CUDA_SDPA_GRAPH_H

#include "runtime/cuda/sdpa.h"

#include <cudnn_frontend.h>

#include <memory>
#include <string>

namespace shardc::runtime::cuda {

/// The tensor uids of the variant packs.
enum SdpaUid : int64_t {
  kUidQ = 1,
  kUidK,
  kUidV,
  kUidO,
  kUidStats,
  kUidDO,
  kUidDQ,
  kUidDK,
  kUidDV,
};

/// A shape's two graphs, built through to execution plans.
struct SdpaGraphs {
  std::shared_ptr<cudnn_frontend::graph::Graph> forward, backward;
  int64_t forwardWorkspace = 0, backwardWorkspace = 0;
};

/// Builds `s`'s graphs on `handle`; with `device` set (device-less
/// compilation), for that described device instead. Returns "" or why cuDNN
/// declined (the frontend's message).
std::string buildSdpaGraphs(
    const SdpaShape &s, cudnnHandle_t handle,
    std::shared_ptr<const cudnn_frontend::DeviceProperties> device,
    SdpaGraphs &out);

} // namespace shardc::runtime::cuda

#endif
