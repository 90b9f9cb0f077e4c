//===- safetensors.h - reading and writing safetensors files ----*- C++ -*-===//
#ifndef SHARDC_RUNTIME_FORMATS_SAFETENSORS_H
#define SHARDC_RUNTIME_FORMATS_SAFETENSORS_H

#include "runtime/formats/files.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardc::runtime {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float *data; // f32, numel(shape) elements
};

/// Writes f32 tensors in the safetensors format (Hugging Face names kept),
/// durably (runtime/files.h: a temporary file, fsync, rename), so an existing
/// file is never left half-written and a failed write leaves nothing
/// behind. Returns the file offset of each tensor's first byte. Throws
/// std::runtime_error on I/O failure.
std::vector<uint64_t>
writeSafetensors(const std::string &path,
                 const std::vector<NamedTensor> &tensors,
                 const std::map<std::string, std::string> &metadata = {});

/// The same, streamed: tensor k's bytes are asked of `data(k)` when they
/// are written, in order (the tensors' own `data` is not read), so a writer
/// holds one tensor at a time.
std::vector<uint64_t>
writeSafetensors(const std::string &path,
                 const std::vector<NamedTensor> &tensors,
                 const std::map<std::string, std::string> &metadata,
                 const std::function<const float *(size_t)> &data);

struct LoadedTensor {
  std::vector<int64_t> shape;
  std::vector<float> data; // converted to f32 from F32, F16 or BF16
};

/// One tensor of a safetensors file: its dtype ("F32", "F16", "BF16"),
/// shape and the file offsets of its bytes [begin, end).
struct SafetensorsEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
  int64_t elementBytes = 4;
  int64_t numel() const;
};

/// A safetensors file opened for reading parts of it: the one reader of the
/// format (--init-from, checkpoint shards, ONNX weights). The header is read
/// and held to the format's rules when it is opened, as the reference
/// implementation does (safetensors.cpp); tensor bytes are read on demand,
/// by element range. Throws std::runtime_error, one line naming the file,
/// the tensor and the rule broken.
class SafetensorsFile {
public:
  explicit SafetensorsFile(const std::string &path);
  const std::string &path() const { return path_; }
  const std::map<std::string, SafetensorsEntry> &entries() const {
    return entries_;
  }
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// The entry of `name`, or null.
  const SafetensorsEntry *find(const std::string &name) const;
  /// Elements [first, first + count) of tensor `name` (row-major), as f32.
  void readF32(const std::string &name, int64_t first, int64_t count,
               float *dst) const;
  /// Raw bytes [begin, end) of the file.
  void readBytes(uint64_t begin, uint64_t end, void *dst) const;

private:
  std::string path_;
  std::shared_ptr<FileHandle> file_;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// Reads every tensor of a safetensors file. Throws std::runtime_error naming
/// the file and the problem (truncated, bad header, unsupported dtype).
std::map<std::string, LoadedTensor> readSafetensors(const std::string &path);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_FORMATS_SAFETENSORS_H
