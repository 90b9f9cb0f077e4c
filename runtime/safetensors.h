//===- safetensors.h - reading and writing safetensors files ----*- C++ -*-===//
#ifndef SHARDC_RUNTIME_SAFETENSORS_H
#define SHARDC_RUNTIME_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardc::runtime {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float *data; // f32, numel(shape) elements
};

/// Writes f32 tensors in the safetensors format (Hugging Face names kept).
/// Throws std::runtime_error on I/O failure; writes to a temporary file and
/// renames it, so an existing file is never left half-written.
void writeSafetensors(const std::string &path,
                      const std::vector<NamedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

struct LoadedTensor {
  std::vector<int64_t> shape;
  std::vector<float> data; // converted to f32 from F32, F16 or BF16
};

/// Reads every tensor of a safetensors file. Throws std::runtime_error naming
/// the file and the problem (truncated, bad header, unsupported dtype).
std::map<std::string, LoadedTensor> readSafetensors(const std::string &path);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_SAFETENSORS_H
