//===- peaks.h - GPUs' peak FLOP/s, by device name ----------------*- C++ -*-===//
//
// For the step line's mfu: the dense peak of a GPU by the name its driver
// reports (cudaDeviceProp::name), from NVIDIA's data sheets at boost clock.
// mfu is against the peak of what the program's GEMMs compute in (the
// manifest's compute_dtype): f32 without TF32 (runtime/cuda/gemm.cu's
// default), TF32 (--allow-tf32) or bf16 (--param-dtype bf16).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_TRAINER_PEAKS_H
#define SHARDC_RUNTIME_TRAINER_PEAKS_H

#include <string>

namespace shardc::runtime {

struct DevicePeak {
  const char *match; ///< a substring of the device name
  const char *model; ///< the name the step header prints
  double f32, tf32, bf16; ///< dense FLOP/s
  /// The peak of compute dtype `dtype` ("f32", "tf32" or "bf16").
  double of(const std::string &dtype) const {
    return dtype == "bf16" ? bf16 : dtype == "tf32" ? tf32 : f32;
  }
};

/// The peak of device `name`, or null for a device the table lacks (the
/// emulated device, a CPU). The first match wins: specific names first.
inline const DevicePeak *devicePeak(const std::string &name) {
  static const DevicePeak table[] = {
      {"GH200", "GH200", 66.9e12, 494.7e12, 989.4e12},
      {"H100 PCIe", "H100 PCIe", 51.2e12, 378.0e12, 756.0e12},
      {"H100 NVL", "H100 NVL", 60.0e12, 417.5e12, 835.0e12},
      {"H100", "H100 SXM", 66.9e12, 494.7e12, 989.4e12},
      {"H200", "H200", 66.9e12, 494.7e12, 989.4e12},
      {"A100", "A100", 19.5e12, 156.0e12, 312.0e12},
      {"B200", "B200", 75.0e12, 1100.0e12, 2250.0e12},
  };
  if (name.empty())
    return nullptr;
  for (const DevicePeak &p : table)
    if (name.find(p.match) != std::string::npos)
      return &p;
  return nullptr;
}

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_TRAINER_PEAKS_H
