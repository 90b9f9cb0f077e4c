//===- data.cpp - token files and batches ---------------------------------===//
#include "runtime/formats/data.h"
#include "runtime/program/model.h"

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>

using namespace shardc::runtime;

namespace {

constexpr int kHeaderInts = 256;
constexpr int64_t kHeaderBytes = sizeof(int32_t) * kHeaderInts;

struct Format {
  int32_t magic, version, tokenBytes;
  const char *name;
};
constexpr Format kFormats[] = {{20240520, 1, 2, "GPT-2 (uint16 tokens)"},
                               {20240801, 7, 4, "Llama 3 (uint32 tokens)"}};

bool isDirectory(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// The files `spec` names: comma-separated items, each a file, a glob (its
/// matches in name order) or a directory (its *.bin files in name order).
std::vector<std::string> resolve(const std::string &spec) {
  std::vector<std::string> files;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string item =
        spec.substr(start, comma == std::string::npos ? std::string::npos
                                                      : comma - start);
    start = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (item.empty())
      throw std::runtime_error("--data '" + spec + "': an empty item in the list");
    if (item.find_first_of("*?[") != std::string::npos) {
      glob_t g;
      int rc = glob(item.c_str(), 0, nullptr, &g);
      std::vector<std::string> matched;
      if (rc == 0)
        for (size_t k = 0; k < g.gl_pathc; ++k)
          matched.push_back(g.gl_pathv[k]);
      globfree(&g);
      if (matched.empty())
        throw std::runtime_error("--data '" + item +
                                 "': the pattern matches no file");
      std::sort(matched.begin(), matched.end());
      files.insert(files.end(), matched.begin(), matched.end());
    } else if (isDirectory(item)) {
      std::vector<std::string> found;
      if (DIR *d = opendir(item.c_str())) {
        while (dirent *e = readdir(d)) {
          std::string name = e->d_name;
          if (name.size() > 4 && name.compare(name.size() - 4, 4, ".bin") == 0)
            found.push_back(item + (item.back() == '/' ? "" : "/") + name);
        }
        closedir(d);
      }
      if (found.empty())
        throw std::runtime_error(item + ": a directory with no .bin token "
                                        "files");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(item);
    }
  }
  return files;
}

/// A keyed permutation of [0, n): a 4-round Feistel network over the
/// smallest power-of-two domain holding n, walked until it lands in range.
int64_t permute(int64_t x, int64_t n, uint64_t key) {
  if (n <= 1)
    return 0;
  int bits = 1;
  while ((int64_t(1) << bits) < n)
    ++bits;
  int left = (bits + 1) / 2, right = bits - left;
  uint64_t leftMask = (uint64_t(1) << left) - 1,
           rightMask = (uint64_t(1) << right) - 1;
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  uint64_t v = uint64_t(x);
  do {
    uint64_t l = v >> right, r = v & rightMask;
    for (uint64_t round = 0; round < 4; ++round) {
      // Alternate halves of unequal width: (l, r) -> (r', l') keeps widths
      // by mixing into the half of the same width each round.
      if (round % 2 == 0)
        l = (l ^ mix(key ^ (round << 56) ^ r)) & leftMask;
      else
        r = (r ^ mix(key ^ (round << 56) ^ l)) & rightMask;
    }
    v = (l << right) | r;
  } while (int64_t(v) >= n);
  return int64_t(v);
}

} // namespace

const char *TokenData::format() const {
  return synthetic_.empty() ? kFormats[tokenBytes_ == 4 ? 1 : 0].name
                            : "synthetic";
}

TokenData TokenData::open(const std::string &spec, int64_t vocabSize) {
  TokenData d;
  d.vocab_ = vocabSize;
  const Format *first = nullptr;
  std::string firstPath;
  for (const std::string &path : resolve(spec)) {
    // A regular file (a FIFO or a device would block or never end), at
    // most what the header's int32 token count can declare.
    constexpr uint64_t kMaxBytes = kHeaderBytes + 4 * uint64_t(INT32_MAX);
    std::string error;
    uint64_t size = 0;
    FileHandle file = openInputFile(path, kMaxBytes,
                                    "the " + formatBytes(kMaxBytes) +
                                        " of an llm.c token file (2^31-1 "
                                        "tokens)",
                                    error, &size);
    if (!file)
      throw std::runtime_error(error);
    int32_t header[kHeaderInts];
    if (size < uint64_t(kHeaderBytes))
      throw std::runtime_error(path + ": bad header: file is shorter than the "
                                      "1024-byte token file header");
    readAt(file.fd(), path, 0, header, sizeof(header));
    const Format *format = nullptr;
    for (const Format &f : kFormats)
      if (header[0] == f.magic && header[1] == f.version)
        format = &f;
    if (!format)
      throw std::runtime_error(
          path + ": bad header: magic " + std::to_string(header[0]) +
          ", version " + std::to_string(header[1]) +
          "; expected llm.c's GPT-2 format (20240520, version 1) or its "
          "Llama 3 format (20240801, version 7)");
    if (first && format != first)
      throw std::runtime_error(
          path + " is in the " + format->name + " format but " + firstPath +
          " in the " + first->name + " format: the shards of one --data "
          "must share one format");
    if (!first) {
      first = format;
      firstPath = path;
    }
    int64_t count = header[2];
    int64_t holds = (int64_t(size) - kHeaderBytes) / format->tokenBytes;
    if (count < 0 || kHeaderBytes + format->tokenBytes * count != int64_t(size))
      throw std::runtime_error(
          path + ": bad header: it declares " + std::to_string(count) +
          " tokens but the file holds " + std::to_string(holds) +
          ((int64_t(size) - kHeaderBytes) % format->tokenBytes
               ? " and a part of one"
               : "") +
          " (truncated or not a token file)");
    d.shards_.push_back(
        {path, std::make_shared<FileHandle>(std::move(file)), d.total_, count});
    d.names_.push_back(path);
    d.total_ += count;
  }
  d.tokenBytes_ = first->tokenBytes;
  return d;
}

TokenData TokenData::synthetic(uint64_t seed, int64_t vocabSize, int64_t count) {
  TokenData d;
  d.vocab_ = vocabSize;
  d.synthetic_.resize(size_t(count));
  uint64_t key = streamKey(seed, "synthetic-tokens");
  for (int64_t k = 0; k < count; ++k)
    d.synthetic_[size_t(k)] =
        uint32_t(counterUniform(key, uint64_t(k)) * double(vocabSize));
  d.total_ = count;
  return d;
}

void TokenData::read(int64_t first, int64_t n, uint32_t *out) const {
  if (!synthetic_.empty()) {
    std::copy(synthetic_.begin() + first, synthetic_.begin() + first + n, out);
    return;
  }
  // The shard holding `first`, then on across shard boundaries.
  auto it = std::upper_bound(
      shards_.begin(), shards_.end(), first,
      [](int64_t pos, const Shard &s) { return pos < s.first; });
  size_t k = size_t(it - shards_.begin()) - 1;
  std::vector<uint16_t> narrow;
  while (n > 0) {
    const Shard &s = shards_[k];
    int64_t local = first - s.first, take = std::min(n, s.count - local);
    if (take <= 0) {
      ++k;
      continue;
    }
    uint64_t offset = uint64_t(kHeaderBytes + local * tokenBytes_);
    if (tokenBytes_ == 4) {
      readAt(s.file->fd(), s.path, offset, out, uint64_t(4 * take));
    } else {
      narrow.resize(size_t(take));
      readAt(s.file->fd(), s.path, offset, narrow.data(), uint64_t(2 * take));
      std::copy(narrow.begin(), narrow.end(), out);
    }
    for (int64_t j = 0; j < take; ++j)
      if (int64_t(out[j]) >= vocab_)
        throw std::runtime_error(s.path + ": token " + std::to_string(out[j]) +
                                 " at position " + std::to_string(local + j) +
                                 " is outside the model's vocabulary of " +
                                 std::to_string(vocab_));
    out += take;
    first += take;
    n -= take;
    ++k;
  }
}

int64_t TokenData::window(int64_t row, int64_t windows) const {
  if (!shuffle_)
    return row % windows;
  // A fresh permutation for each pass over the data.
  uint64_t pass = uint64_t(row / windows);
  uint64_t key = streamKey(shuffleSeed_, "shuffle") ^
                 (pass * 0x9e3779b97f4a7c15ull);
  return permute(row % windows, windows, key);
}

void TokenData::batch(int64_t step, int64_t globalRows, int64_t firstRow,
                      int64_t rows, int64_t T, int32_t *x, int32_t *y) const {
  int64_t windows = (size() - 1) / T; // whole rows with a next token
  if (windows < 1)
    throw std::runtime_error("the token data holds " + std::to_string(size()) +
                             " tokens, fewer than one sequence of " +
                             std::to_string(T + 1));
  std::vector<uint32_t> tokens(size_t(T + 1));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t w = window(step * globalRows + firstRow + r, windows);
    read(w * T, T + 1, tokens.data());
    for (int64_t t = 0; t < T; ++t) {
      x[r * T + t] = int32_t(tokens[size_t(t)]);
      y[r * T + t] = int32_t(tokens[size_t(t + 1)]);
    }
  }
}
