//===- data.cpp - token files and batches ---------------------------------===//
#include "runtime/formats/data.h"
#include "runtime/trainer/model.h"

#include "runtime/formats/files.h"

#include <climits>
#include <stdexcept>

using namespace shardc::runtime;

static constexpr int32_t kMagic = 20240520;
static constexpr int kHeaderInts = 256;

TokenData TokenData::load(const std::string &path, int64_t vocabSize) {
  // A regular file (a FIFO or a device would block or never end), at most
  // what the header's int32 token count can declare.
  constexpr uint64_t kMaxBytes = sizeof(int32_t) * kHeaderInts + 2 * uint64_t(INT32_MAX);
  std::string error;
  uint64_t size = 0;
  FileHandle file = openInputFile(path, kMaxBytes,
                                  "the " + formatBytes(kMaxBytes) +
                                      " of an llm.c token file (2^31-1 tokens)",
                                  error, &size);
  if (!file)
    throw std::runtime_error(error);
  int64_t fileSize = int64_t(size);
  int32_t header[kHeaderInts];
  if (fileSize < int64_t(sizeof(header)))
    throw std::runtime_error(path + ": bad header: file is shorter than the "
                                    "1024-byte token file header");
  readAt(file.fd(), path, 0, header, sizeof(header));
  if (header[0] != kMagic)
    throw std::runtime_error(path + ": bad header: magic " +
                             std::to_string(header[0]) + ", expected " +
                             std::to_string(kMagic) + " (llm.c token file)");
  if (header[1] != 1)
    throw std::runtime_error(path + ": bad header: version " +
                             std::to_string(header[1]) + ", expected 1");
  int64_t count = header[2];
  if (count < 0 || int64_t(sizeof(header)) + 2 * count != fileSize)
    throw std::runtime_error(
        path + ": bad header: it declares " + std::to_string(count) +
        " tokens but the file holds " +
        std::to_string((fileSize - int64_t(sizeof(header))) / 2));
  std::vector<uint16_t> raw(count);
  readAt(file.fd(), path, sizeof(header), raw.data(), uint64_t(2 * count));
  TokenData d;
  d.tokens.assign(raw.begin(), raw.end());
  for (int64_t k = 0; k < count; ++k)
    if (d.tokens[k] >= vocabSize)
      throw std::runtime_error(path + ": token " + std::to_string(d.tokens[k]) +
                               " at position " + std::to_string(k) +
                               " is outside the model's vocabulary of " +
                               std::to_string(vocabSize));
  return d;
}

TokenData TokenData::synthetic(uint64_t seed, int64_t vocabSize, int64_t count) {
  TokenData d;
  d.tokens.resize(count);
  uint64_t key = streamKey(seed, "synthetic-tokens");
  for (int64_t k = 0; k < count; ++k)
    d.tokens[k] = uint32_t(counterUniform(key, uint64_t(k)) * double(vocabSize));
  return d;
}

void TokenData::batch(int64_t step, int64_t globalRows, int64_t firstRow,
                      int64_t rows, int64_t T, int32_t *x, int32_t *y) const {
  int64_t available = (size() - 1) / T; // whole rows with a next token
  if (available < 1)
    throw std::runtime_error("the token data holds " + std::to_string(size()) +
                             " tokens, fewer than one sequence of " +
                             std::to_string(T + 1));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t row = (step * globalRows + firstRow + r) % available;
    const uint32_t *src = tokens.data() + row * T;
    for (int64_t t = 0; t < T; ++t) {
      x[r * T + t] = int32_t(src[t]);
      y[r * T + t] = int32_t(src[t + 1]);
    }
  }
}
