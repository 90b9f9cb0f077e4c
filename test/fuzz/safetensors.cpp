//===- safetensors.cpp - fuzz target: Hugging Face checkpoints -------------===//
//
// Bytes -> a Hugging Face checkpoint on disk -> HfCheckpoint, the reader
// --init-from uses (runtime/formats/hf_checkpoint.h), and then every
// tensor read by element range as the loader reads a shard's rows.
//
// The input (FuzzInput.h): mode & 1 == 0: part 0 is model.safetensors; mode
// & 1 == 1: part 0 is model.safetensors.index.json, parts 1 and 2 are the
// files model-00001-of-00002.safetensors and model-00002-of-00002.safetensors
// it may name (a part that is absent is no file).
//
// A reader error is a std::runtime_error naming the file: expected. Any
// other exception, a crash, a sanitizer report or more memory than
// libFuzzer's -rss_limit_mb is a finding.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "runtime/formats/hf_checkpoint.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

using namespace shardc;

namespace {

/// Reads every tensor of `file` as the loader would: its first and last
/// elements by range (at most 4096 of each, so that memory stays bounded
/// by the input, as the loader's is by a shard's rows).
void readTensors(const runtime::SafetensorsFile &file) {
  std::vector<float> buf;
  for (const auto &[name, entry] : file.entries()) {
    int64_t n = entry.numel();
    int64_t take = std::min<int64_t>(n, 4096);
    buf.resize(size_t(take));
    file.readF32(name, 0, take, buf.data());
    file.readF32(name, n - take, take, buf.data());
  }
}

void runCheckpoint(const std::string &path) {
  runtime::HfCheckpoint checkpoint(path);
  for (const auto &[name, file] : checkpoint.files())
    readTensors(*file);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz::FuzzInput in = fuzz::splitInput(data, size);
  const char *shards[] = {"model-00001-of-00002.safetensors",
                          "model-00002-of-00002.safetensors"};
  std::string path;
  if ((in.mode & 1) == 0) {
    for (const char *s : shards)
      fuzz::removePart(s);
    fuzz::removePart(runtime::kHfIndexFile);
    path = fuzz::writePart(runtime::kHfSingleFile, in.parts[0]);
    try {
      runtime::SafetensorsFile file(path);
      readTensors(file);
    } catch (const std::runtime_error &) {
    }
  } else {
    fuzz::removePart(runtime::kHfSingleFile);
    path = fuzz::writePart(runtime::kHfIndexFile, in.parts[0]);
    for (size_t k = 0; k < 2; ++k) {
      if (k + 1 < in.parts.size())
        fuzz::writePart(shards[k], in.parts[k + 1]);
      else
        fuzz::removePart(shards[k]);
    }
  }
  try {
    runCheckpoint(path);
  } catch (const std::runtime_error &) {
  }
  return 0;
}
