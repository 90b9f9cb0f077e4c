//===- hf_io.h - Hugging Face checkpoints in and out -------------*- C++ -*-===//
//
// What transformers' save_pretrained writes and from_pretrained reads: one
// `model.safetensors`, or several `model-0000k-of-0000n.safetensors` with a
// `model.safetensors.index.json` ({"metadata": {"total_size": bytes},
// "weight_map": {tensor: file}}), and a `config.json`.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_FORMATS_HF_IO_H
#define SHARDC_RUNTIME_FORMATS_HF_IO_H

#include "runtime/backend.h"
#include "runtime/mesh.h"
#include "runtime/trainer/model.h"
#include "runtime/formats/safetensors.h"

#include <map>
#include <memory>
#include <string>

namespace shardc::runtime {

/// The tensors of a Hugging Face checkpoint: `path` is a .safetensors file,
/// a directory holding model.safetensors or model.safetensors.index.json,
/// or such an index. Every file is opened and its header checked up front;
/// tensors are then read by element range. Throws std::runtime_error naming
/// the file and the problem (a file the index names that is missing, a
/// tensor the index maps to a file that lacks it).
class HfCheckpoint {
public:
  explicit HfCheckpoint(const std::string &path);
  /// The file holding tensor `name`, or null.
  const SafetensorsFile *find(const std::string &name) const;
  /// What `path` turned out to be, for messages.
  const std::string &where() const { return where_; }

private:
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile *> tensors_;
  std::string where_;
};

/// Bytes from "5GB", "500MB", "10KB" (powers of 1000, as transformers
/// reads them), "2GiB" (powers of 1024) or a plain number; throws naming
/// `flag` otherwise.
int64_t parseByteSize(const std::string &flag, const std::string &text);

/// Writes the parameters (gathered tensor by tensor from the shards) under
/// `dir` as save_pretrained does: files of at most `maxShardBytes` (a
/// tensor larger than that gets a file of its own), their index when there
/// are several, and the model's config.json when it has one. Every rank
/// calls it; rank 0 writes. Returns the number of files written.
int64_t exportHf(const Manifest &m, const Mesh &mesh, Backend &backend,
                 const char *params, const std::string &dir,
                 int64_t maxShardBytes);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_FORMATS_HF_IO_H
