//===- checkpoint_io.h - weights in and out of the backend's memory -*- C++ -*-===//
#ifndef SHARDC_RUNTIME_FORMATS_CHECKPOINT_IO_H
#define SHARDC_RUNTIME_FORMATS_CHECKPOINT_IO_H

#include "runtime/backend.h"
#include "runtime/mesh.h"
#include "runtime/program/model.h"
#include "runtime/formats/safetensors.h"

#include <string>
#include <vector>

namespace shardc::runtime {

/// Loads every parameter from a Hugging Face checkpoint (a safetensors
/// file, a directory, or a model.safetensors.index.json:
/// runtime/formats/hf_checkpoint.h;
/// names with or without the transformer./model. prefix) into the
/// parameter region `params` of `backend`: this shard's rows only, read by
/// range, padding rows zero. Every parameter is found and checked before
/// any is read. A NaN or infinity in the rows read is an error naming the
/// file, the tensor and how many, unless `allowNonfinite`
/// (--allow-nonfinite-init). Under --tp, tp rank `tpIndex`'s part of each
/// split tensor (the whole tensor is read, then its part kept).
void loadParameters(const Manifest &m, const std::string &path,
                    Backend &backend, char *params, int64_t shardIndex,
                    bool allowNonfinite = false, int64_t tpIndex = 0);

/// Parameter `p`'s values at `src` in the backend's memory (this rank's
/// shard of p.numel() f32), gathered over the shard axis onto its rank
/// `rootShard` (in each replica and tp index) with the padding rows dropped
/// (empty on the other ranks); an unsharded parameter's own values on every
/// rank. Under --tp, a split tensor's parts are then gathered over the tp
/// axis into the whole tensor, on tp rank `rootTp` of shard `rootShard`
/// (by default rank 0 of each replica).
std::vector<float> gatherParameter(const TensorSlot &p, const Mesh &mesh,
                                   Backend &backend, const char *src,
                                   int64_t rootShard = 0, int64_t rootTp = 0);

/// One tensor per parameter, read from `region` at the slot of `prefix +
/// name` (params: no prefix; gradients: abi::kStateGrad). Sharded tensors
/// are gathered on the shard axis into `storage` (complete on rank 0).
std::vector<NamedTensor> gatherTensors(const Manifest &m, const Mesh &mesh,
                                       Backend &backend, const char *region,
                                       const std::string &prefix,
                                       std::vector<std::vector<float>> &storage);

/// Writes the tensors gatherTensors reads as a safetensors file (rank 0).
void saveTensors(const Manifest &m, const Mesh &mesh, Backend &backend,
                 const std::string &path, const char *region,
                 const std::string &prefix);

/// A file that shardc wrote next to the executable.
std::string besideExecutable(const std::string &name);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_FORMATS_CHECKPOINT_IO_H
