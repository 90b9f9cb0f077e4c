//===- Machine.h - what --predict plays a schedule out on -------*- C++ -*-===//
//
// A machine for the step-time prediction (`shardc --report --predict M`):
// one of the bundled GPUs, with its published figures and the efficiencies
// the model assumes, or a calibration file measured by `shardc --calibrate`
// (target/Calibration.h) on the machine it ran on. No MLIR dependency.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TARGET_MACHINE_H
#define SHARDC_TARGET_MACHINE_H

#include <cstdint>
#include <string>
#include <vector>

namespace shardc {

/// A measured GEMM: throughput of an m x n x k product in `dtype` (a host
/// calibration's are f32; a GPU's f32, tf32, bf16 or fp8).
struct GemmPoint {
  int64_t m, n, k;
  double flopsPerS;
  std::string dtype = "f32";
};

/// cuDNN's fused attention measured on a GPU (sdpa, sdpa_grad; bf16,
/// causal) at head dimension D and length T: forward and backward FLOP/s.
struct SdpaPoint {
  int64_t headDim, seq;
  double flopsPerS, gradFlopsPerS;
};

/// A GEMM with a cuBLASLt epilogue (`epilogue`: "bgrad", matmul_bgrad)
/// beside the plain GEMM of its shape, measured on a GPU.
struct EpiloguePoint {
  std::string epilogue, dtype;
  int64_t m, n, k;
  double flopsPerS, plainFlopsPerS;
};

struct Machine {
  std::string name;    ///< the bundled name, or the calibration's
  std::string summary; ///< one line: the device and where its figures are from
  /// A host calibration (the CPU backend: measured GEMMs and attention,
  /// in-order streams, a measured ring between local ranks).
  bool calibrated = false;
  int64_t threads = 0; ///< a calibration's thread count
  /// A GPU calibration (`shardc --calibrate FILE --target cuda`): GEMMs by
  /// dtype and shape (gemms), cuDNN's attention (sdpa, as the fused
  /// fractions of the bf16 peak), bandwidth and launches measured; the
  /// peaks (for MFU) and the links those of the bundled GPU of its name
  /// (Machine.cpp). Otherwise played out as a bundled GPU.
  bool measuredGpu = false;
  bool emulated = false; ///< a GPU calibration of the emulated device
  std::vector<SdpaPoint> sdpa;
  std::vector<EpiloguePoint> epilogues;
  /// Seconds a kernel costs replayed from a CUDA graph, beyond its work (a
  /// GPU calibration's; launchSeconds is then this).
  double graphLaunchSeconds = 0;

  // Compute, per device (GPU or process).
  /// Peak dense FLOP/s: f32 (no TF32) and bf16 (tensor cores).
  double peakF32 = 0, peakBf16 = 0;
  /// Dense TF32 tensor-core peak (f32 GEMMs under --allow-tf32).
  double peakTf32 = 0;
  /// Dense FP8 tensor-core peak (--float8's GEMMs; 0: the device has no
  /// FP8 tensor cores), and the share of gemmEfficiency an FP8 GEMM keeps.
  double peakFp8 = 0, fp8GemmShare = 1;
  /// The fraction of peak a large GEMM attains (bundled machines; a
  /// calibration measures GEMMs by shape instead), and attention's.
  double gemmEfficiency = 0, attentionEfficiency = 0;
  /// cuDNN's fused bf16 attention (sdpa, sdpa_grad) as a fraction of the
  /// bf16 peak, forward and backward, at head dimensions of 128 and more
  /// and below 128 (bundled GPUs; Machine.cpp says where each is from).
  double fusedAttention = 0, fusedAttentionGrad = 0;
  double fusedAttentionShort = 0, fusedAttentionGradShort = 0;
  /// Calibrated: f32 GEMM throughput by shape; attention's and its
  /// gradient's FLOP/s.
  std::vector<GemmPoint> gemms;
  double attentionFlops = 0, attentionGradFlops = 0;
  /// Memory: bytes, bandwidth (B/s) and the fraction of it a streaming
  /// kernel attains.
  double memoryBytes = 0, memoryBandwidth = 0, memoryEfficiency = 1;
  /// Seconds a kernel launch costs beyond its work.
  double launchSeconds = 0;

  // Communication.
  /// Within a node (NVLink, per GPU, one direction) and across nodes (the
  /// node's network, shared by its GPUs), bytes/s; the latency of one step
  /// of a ring.
  double intraNodeBandwidth = 0, interNodeBandwidth = 0;
  double collectiveLatency = 0;
  /// The fraction of the link's bandwidth a collective attains (NCCL's bus
  /// bandwidth over the link's).
  double collectiveEfficiency = 1;
  int64_t gpusPerNode = 8;
  /// --gpus-per-node N (N > 0) applied: a bundled machine's GPUs a node
  /// become N; a calibrated host keeps its own (it measured them).
  void setGpusPerNode(int64_t n) {
    if (n > 0 && !calibrated)
      gpusPerNode = n;
  }
  /// Whether the communication stream runs beside the compute stream (a
  /// GPU's streams); the CPU backend runs its streams in order.
  bool concurrentStreams = true;

  /// Memory a plan may use by default: the device's, less the reserve the
  /// runtime and its libraries take (stated in Machine.cpp).
  double defaultBudget() const;
  /// Peak FLOP/s of the dtype GEMMs run in ("f32" or "bf16").
  double peak(const std::string &dtype) const;
  /// Seconds of an f32/tf32/bf16/fp8 GEMM of m x n x k (2mnk FLOPs) at the
  /// shape's attained throughput (a calibration's: interpolated in its
  /// grid, a GPU's in the dtype's).
  double gemmSeconds(int64_t m, int64_t n, int64_t k,
                     const std::string &dtype) const;
};

/// The bundled machines (h100-sxm, h200, a100-sxm-80, b200).
const std::vector<Machine> &bundledMachines();
/// "h100-sxm, h200, ...".
std::string bundledMachineNames();

/// `spec` is a bundled name or a calibration file. Errors name the file or
/// list the known names; a calibration of another version is refused,
/// naming it.
bool loadMachine(const std::string &spec, Machine &machine,
                 std::string &error);

} // namespace shardc

#endif // SHARDC_TARGET_MACHINE_H
