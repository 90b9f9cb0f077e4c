//===- checkpoint_format.h - a checkpoint's names and layout -*- C++ -*-===//
//
// What checkpoint.cpp, checkpoint_save.cpp and checkpoint_load.cpp share:
// the names of a checkpoint's files and directories (docs/checkpoints-and-hf.md,
// "Checkpoints"), the chunks its shards are hashed in, and which rows of a
// tensor a shard holds. Internal to the checkpointer.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_FORMATS_CHECKPOINT_FORMAT_H
#define SHARDC_RUNTIME_FORMATS_CHECKPOINT_FORMAT_H

#include "runtime/formats/checkpoint.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace shardc::runtime::checkpoint_format {

inline constexpr const char *kFormat = "shardc-checkpoint";
inline constexpr int64_t kVersion = 1;
inline constexpr const char *kMetadata = "metadata.json";
inline constexpr const char *kLatest = "latest";
inline constexpr const char *kStepPrefix = "step-";
inline constexpr const char *kTmpPrefix = ".tmp-";
/// Bytes per hashed chunk of a shard's tensor.
inline constexpr uint64_t kChunkBytes = uint64_t(4) << 20;

/// `v` as 16 hex digits.
std::string hex64(uint64_t v);
/// "step-XXXXXXXX".
std::string stepName(int64_t step);
/// The step of a "step-XXXXXXXX" name, or -1.
int64_t stepOf(const std::string &name);
/// "shard-SSSSS-of-NNNNN.safetensors".
std::string shardFileName(int64_t shard, int64_t shards);
/// The XXH3-64 of each kChunkBytes chunk of `bytes` bytes at `data`.
std::vector<std::string> chunkHashes(const char *data, uint64_t bytes);
/// Seconds since `since`.
double secondsSince(std::chrono::steady_clock::time_point since);
/// The rows of dim 0 that shard `index` holds of a tensor: [first, end).
std::pair<int64_t, int64_t> shardRows(const CheckpointTensor &t, int64_t index);

} // namespace shardc::runtime::checkpoint_format

#endif // SHARDC_RUNTIME_FORMATS_CHECKPOINT_FORMAT_H
