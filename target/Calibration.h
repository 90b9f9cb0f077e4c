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

/// The GEMM shapes measured: every (m, n, k) of these, m the token rows.
inline constexpr int64_t kGemmRows[] = {64, 256, 1024, 4096};
inline constexpr int64_t kGemmDims[] = {64, 256, 1024, 4096};

} // namespace shardc::calibration

#endif // SHARDC_TARGET_CALIBRATION_H
