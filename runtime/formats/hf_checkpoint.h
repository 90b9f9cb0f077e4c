//===- hf_checkpoint.h - reading Hugging Face checkpoints --------*- C++ -*-===//
//
// The reader of what transformers' save_pretrained writes: one
// `model.safetensors`, or several `model-0000k-of-0000n.safetensors` with a
// `model.safetensors.index.json` ({"metadata": {"total_size": bytes},
// "weight_map": {tensor: file}}). On its own (no backend, mesh or MPI): the
// trainer's --init-from and the fuzz target test/fuzz/safetensors.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_FORMATS_HF_CHECKPOINT_H
#define SHARDC_RUNTIME_FORMATS_HF_CHECKPOINT_H

#include "runtime/formats/safetensors.h"

#include <map>
#include <memory>
#include <string>

namespace shardc::runtime {

/// The file names of a Hugging Face checkpoint's single file and index.
constexpr const char *kHfSingleFile = "model.safetensors";
constexpr const char *kHfIndexFile = "model.safetensors.index.json";

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
  /// The files opened, by path.
  const std::map<std::string, std::unique_ptr<SafetensorsFile>> &
  files() const {
    return files_;
  }
  /// What `path` turned out to be, for messages.
  const std::string &where() const { return where_; }

private:
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile *> tensors_;
  std::string where_;
};

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_FORMATS_HF_CHECKPOINT_H
