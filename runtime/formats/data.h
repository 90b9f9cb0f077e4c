//===- data.h - token files and batches ----------------------------*- C++ -*-===//
#ifndef SHARDC_RUNTIME_FORMATS_DATA_H
#define SHARDC_RUNTIME_FORMATS_DATA_H

#include <cstdint>
#include <string>
#include <vector>

namespace shardc::runtime {

/// The tokens of an llm.c / nanoGPT token file: a header of 256 int32
/// (magic 20240520, version 1, token count), then uint16 tokens.
class TokenData {
public:
  /// Reads and validates a token file; every token must be < vocabSize.
  /// Throws std::runtime_error naming the file and the problem.
  static TokenData load(const std::string &path, int64_t vocabSize);
  /// Seeded uniform tokens in [0, vocabSize), enough for `steps` batches.
  static TokenData synthetic(uint64_t seed, int64_t vocabSize, int64_t count);

  int64_t size() const { return int64_t(tokens.size()); }

  /// Fills inputs x and targets y, both [rows, T] int32, with global batch
  /// rows `firstRow .. firstRow + rows - 1` of step `step` for a global batch
  /// of `globalRows`: row r of step s starts at token (s * globalRows + r) * T
  /// and y is x shifted by one. Rows past the end wrap around the file.
  void batch(int64_t step, int64_t globalRows, int64_t firstRow, int64_t rows,
             int64_t T, int32_t *x, int32_t *y) const;

private:
  std::vector<uint32_t> tokens; // widened: synthetic vocabularies may pass 65535
};

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_FORMATS_DATA_H
