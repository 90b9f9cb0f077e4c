//===- data.h - token files and batches ----------------------------*- C++ -*-===//
//
// llm.c's token files, in both of its formats, chosen by the header (256
// int32, then the tokens):
//  - GPT-2: magic 20240520, version 1, uint16 tokens;
//  - Llama 3: magic 20240801, version 7, uint32 tokens.
// `--data` names one file, a glob ('data/fineweb_train_*.bin'), a directory
// (its *.bin files) or a comma-separated list; the shards are read in name
// order as one stream of tokens, exactly as if concatenated. Only the
// headers are read at start-up; each batch's tokens are read where they are
// (positioned reads of its rows) and checked as they are read, so memory is
// bounded by the batch, not the dataset.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_FORMATS_DATA_H
#define SHARDC_RUNTIME_FORMATS_DATA_H

#include "runtime/formats/files.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardc::runtime {

class TokenData {
public:
  /// Opens the shards `spec` names and checks their headers (format, the
  /// count each declares against its size, one format for all). Throws
  /// std::runtime_error naming the file and the problem.
  static TokenData open(const std::string &spec, int64_t vocabSize);
  /// Seeded uniform tokens in [0, vocabSize), enough for `steps` batches.
  static TokenData synthetic(uint64_t seed, int64_t vocabSize, int64_t count);

  /// Tokens in the stream.
  int64_t size() const { return total_; }
  /// The shards, in stream order, and their format ("GPT-2 (uint16)", ...).
  const std::vector<std::string> &files() const { return names_; }
  const char *format() const;

  /// Reads the stream's seq-len windows in a seeded permutation per pass
  /// over the data (--shuffle), as llm.c's loader does: a function of the
  /// row index, so a resumed run reads what the uninterrupted one did.
  void setShuffle(bool on, uint64_t seed) {
    shuffle_ = on;
    shuffleSeed_ = seed;
  }

  /// Fills inputs x and targets y, both [rows, T] int32, with global batch
  /// rows `firstRow .. firstRow + rows - 1` of step `step` for a global batch
  /// of `globalRows`: row i = step * globalRows + r is the stream's window
  /// i % W of W = (size() - 1) / T windows (permuted per pass with
  /// --shuffle), starting at token window * T; y is x shifted by one.
  /// Throws std::runtime_error naming the file and position of a token
  /// outside the vocabulary, or a failed read.
  void batch(int64_t step, int64_t globalRows, int64_t firstRow, int64_t rows,
             int64_t T, int32_t *x, int32_t *y) const;

private:
  struct Shard {
    std::string path;
    std::shared_ptr<FileHandle> file;
    int64_t first = 0, count = 0; ///< its tokens in the stream
  };
  /// Tokens [first, first + n) of the stream into `out`, checked.
  void read(int64_t first, int64_t n, uint32_t *out) const;
  /// The window read for stream row `row` (of `windows`).
  int64_t window(int64_t row, int64_t windows) const;

  std::vector<Shard> shards_;
  std::vector<std::string> names_;
  int tokenBytes_ = 2;
  int64_t total_ = 0, vocab_ = 0;
  std::vector<uint32_t> synthetic_; ///< synthetic(): the tokens themselves
  bool shuffle_ = false;
  uint64_t shuffleSeed_ = 0;
};

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_FORMATS_DATA_H
