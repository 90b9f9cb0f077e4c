//===- Calibration.h - the format of `shardc --calibrate` files -*- C++ -*-===//
//
// The one definition of a calibration file: its version and its keys. The
// calibration tool (tools/shardc-calibrate, which measures with the
// runtime's own kernels) writes it; target/Machine.cpp reads it for
// `--predict FILE`. No dependency: both sides include this header.
//
// A calibration file is one JSON object:
//
//   {"format": "shardc-calibration", "version": 1,
//    "name": "...", "threads": 2, "memory_bytes": 25769803776,
//    "gemm": [{"m": 256, "n": 384, "k": 384, "flops_per_s": 9.1e10}, ...],
//    "attention_flops_per_s": 2.1e10, "attention_grad_flops_per_s": 1.5e10,
//    "memory_bytes_per_s": 1.2e10, "launch_s": 2.0e-6,
//    "collective_latency_s": 4.0e-6, "collective_bytes_per_s": 5.0e9}
//
// GEMM throughput is by shape (m, n, k: the runtime's matmul of an [m,k]
// and a [n,k] matrix, m x n out), for f32, the dtype the CPU computes in.
// The collective figures are the alpha and beta of a ring between two
// local ranks (time = latency + bytes / bandwidth per step).
//
// A GPU's file (`shardc --calibrate FILE --target cuda`, written by
// tools/shardc-calibrate/shardc-calibrate-cuda.cpp) is the same version
// with "device": "cuda" (a file without "device" is a CPU host's):
//
//   {"format": "shardc-calibration", "version": 1, "device": "cuda",
//    "name": "NVIDIA H200", "emulated": false, "memory_bytes": 1.5e11,
//    "gemm": [{"dtype": "bf16", "m": 256, "n": 256, "k": 256,
//              "flops_per_s": 4.1e13}, ...],
//    "gemm_epilogue": [{"epilogue": "bgrad", "dtype": "bf16", "m": 4096,
//                       "n": 4096, "k": 8192, "flops_per_s": 6.0e14,
//                       "plain_flops_per_s": 6.3e14}, ...],
//    "sdpa": [{"head_dim": 64, "seq": 1024, "flops_per_s": 2.7e14,
//              "grad_flops_per_s": 2.0e14}, ...],
//    "memory_bytes_per_s": 4.1e12, "launch_s": 2.5e-6,
//    "graph_launch_s": 1.1e-6}
//
// Its GEMMs are by dtype ("f32", "tf32": f32 under --allow-tf32, "bf16",
// "fp8": matmul_fp8, e4m3, tensorwise, bf16 out), each on a full grid of
// m x n x k (kCudaGemmRows x kCudaGemmDims on a GPU, the quick grid on the
// emulated device; the reader takes the grid from the entries). "sdpa" is
// cuDNN's fused attention (sdpa, sdpa_grad; bf16, causal) by head
// dimension and length. "gemm_epilogue" is matmul_bgrad (the bias
// gradient in cuBLASLt's epilogue) beside the plain matmul of its shape.
// A GPU has no second device to measure collectives against: --predict
// takes them from the bundled GPU of the same name (target/Machine.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TARGET_CALIBRATION_H
#define SHARDC_TARGET_CALIBRATION_H

#include <cstdint>

namespace shardc::calibration {

inline constexpr const char *kFormat = "shardc-calibration";
inline constexpr int64_t kVersion = 1;

// Keys.
inline constexpr const char *kKeyFormat = "format";
inline constexpr const char *kKeyVersion = "version";
inline constexpr const char *kKeyName = "name";
inline constexpr const char *kKeyThreads = "threads";
inline constexpr const char *kKeyMemoryBytes = "memory_bytes";
inline constexpr const char *kKeyGemm = "gemm";
inline constexpr const char *kKeyM = "m";
inline constexpr const char *kKeyN = "n";
inline constexpr const char *kKeyK = "k";
inline constexpr const char *kKeyFlopsPerS = "flops_per_s";
inline constexpr const char *kKeyAttention = "attention_flops_per_s";
inline constexpr const char *kKeyAttentionGrad = "attention_grad_flops_per_s";
inline constexpr const char *kKeyMemoryBandwidth = "memory_bytes_per_s";
inline constexpr const char *kKeyLaunch = "launch_s";
inline constexpr const char *kKeyCollectiveLatency = "collective_latency_s";
inline constexpr const char *kKeyCollectiveBandwidth =
    "collective_bytes_per_s";

// A GPU's keys (see above).
inline constexpr const char *kKeyDevice = "device";
inline constexpr const char *kDeviceCpu = "cpu";
inline constexpr const char *kDeviceCuda = "cuda";
inline constexpr const char *kKeyEmulated = "emulated";
inline constexpr const char *kKeyDtype = "dtype";
inline constexpr const char *kKeyGemmEpilogue = "gemm_epilogue";
inline constexpr const char *kKeyEpilogue = "epilogue";
inline constexpr const char *kEpilogueBgrad = "bgrad";
inline constexpr const char *kKeyPlainFlopsPerS = "plain_flops_per_s";
inline constexpr const char *kKeySdpa = "sdpa";
inline constexpr const char *kKeyHeadDim = "head_dim";
inline constexpr const char *kKeySeq = "seq";
inline constexpr const char *kKeyGradFlopsPerS = "grad_flops_per_s";
inline constexpr const char *kKeyGraphLaunch = "graph_launch_s";

/// The GEMM shapes measured: every (m, n, k) of these, m the token rows.
inline constexpr int64_t kGemmRows[] = {64, 256, 1024, 4096};
inline constexpr int64_t kGemmDims[] = {64, 256, 1024, 4096};

/// A GPU's GEMM grid, its dtypes, and the quick grid of the emulated
/// device (or --quick): multiples of 16, as FP8 GEMMs need.
inline constexpr int64_t kCudaGemmRows[] = {256, 1024, 4096, 8192};
inline constexpr int64_t kCudaGemmDims[] = {256, 1024, 4096, 8192};
inline constexpr int64_t kCudaQuickGemmRows[] = {32, 128};
inline constexpr int64_t kCudaQuickGemmDims[] = {32, 128};
inline constexpr const char *kCudaGemmDtypes[] = {"f32", "tf32", "bf16",
                                                  "fp8"};

} // namespace shardc::calibration

#endif // SHARDC_TARGET_CALIBRATION_H
