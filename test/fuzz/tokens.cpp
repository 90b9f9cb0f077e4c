//===- tokens.cpp - fuzz target: llm.c token shards ------------------------===//
//
// Bytes -> up to three token shards on disk -> TokenData::open, as the
// trainer opens --data (runtime/formats/data.h), then batches read from
// them as training reads them, in order and shuffled.
//
// The input (FuzzInput.h): parts 0, 1, 2 are the shards
// shard-0.bin, shard-1.bin, shard-2.bin; mode & 3 picks how --data names
// them: 0 a comma-separated list, 1 their directory, 2 a glob, 3 the first
// file alone; mode >> 2 picks the vocabulary (1 + 1000 * (mode >> 2)), so
// that tokens past it are reached too.
//
// A reader error is a std::runtime_error naming the file: expected. Any
// other exception, a crash, a sanitizer report or more memory than
// libFuzzer's -rss_limit_mb is a finding.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "runtime/formats/data.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

using namespace shardc;

namespace {

constexpr int kShards = 3;

/// --data's spec for the shards written, as `form` names them.
std::string specOf(int form, int shards) {
  const std::string &dir = fuzz::scratchDir();
  if (form == 1)
    return dir;
  if (form == 2)
    return dir + "/shard-*.bin";
  std::string spec = dir + "/shard-0.bin";
  for (int k = 1; form == 0 && k < shards; ++k)
    spec += "," + dir + "/shard-" + std::to_string(k) + ".bin";
  return spec;
}

/// Two batches of two rows, as a step reads them (plain, then shuffled).
void readBatches(runtime::TokenData &data) {
  int64_t T = std::min<int64_t>(8, std::max<int64_t>(1, data.size() - 1));
  std::vector<int32_t> x(2 * size_t(T)), y(2 * size_t(T));
  for (bool shuffle : {false, true}) {
    data.setShuffle(shuffle, 7);
    for (int64_t step = 0; step < 2; ++step)
      data.batch(step, 2, 0, 2, T, x.data(), y.data());
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz::FuzzInput in = fuzz::splitInput(data, size);
  int shards = int(std::min<size_t>(in.parts.size(), kShards));
  for (int k = 0; k < kShards; ++k) {
    std::string name = "shard-" + std::to_string(k) + ".bin";
    if (k < shards)
      fuzz::writePart(name, in.parts[size_t(k)]);
    else
      fuzz::removePart(name);
  }
  int64_t vocab = 1 + 1000 * int64_t(in.mode >> 2);
  try {
    runtime::TokenData tokens =
        runtime::TokenData::open(specOf(in.mode & 3, shards), vocab);
    if (tokens.size() > 0)
      readBatches(tokens);
  } catch (const std::runtime_error &) {
  }
  return 0;
}
