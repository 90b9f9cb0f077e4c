//===- checkpoint_load.cpp - resuming from a checkpoint -------------------===//
//
// A load in named steps: read the metadata; check it against the compiled
// program (format, optimizer, data order, every tensor's name, dtype and
// shape); note what differs but may (the data file, the seed); plan which
// byte ranges of which shard files hold this rank's rows, opening and
// size-checking each file; read them, checking each hashed chunk; return
// the data position. Nothing is copied into the backend before every check
// has passed but the hashes of the chunks still to read.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/checkpoint.h"
#include "runtime/formats/checkpoint_format.h"
#include "runtime/formats/files.h"
#include "runtime/formats/safetensors.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

using namespace shardc;
using namespace shardc::runtime;
using namespace shardc::runtime::checkpoint_format;
using nlohmann::json;

namespace {

/// A checkpoint's metadata.json, parsed, with its tensors and files by name.
struct Stored {
  std::string metaPath;
  json meta;
  std::map<std::string, json> tensors;
  std::map<std::string, int64_t> fileBytes;

  /// An error about the metadata, naming its file.
  std::runtime_error bad(const std::string &why) const {
    return std::runtime_error(metaPath + ": " + why);
  }
};

/// Whether `j` is an integer of int64_t's range. nlohmann's get<int64_t>
/// casts a float, which is undefined past the range (the checkpoint fuzz
/// target's first finding): every integer of the metadata is read through
/// intOf, intsOf or uintsOf.
bool isInt64(const json &j) {
  return j.is_number_integer() &&
         !(j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX));
}

/// `j` as an integer; anything else is malformed metadata naming `what`.
int64_t intOf(const Stored &s, const json &j, const std::string &what) {
  if (!isInt64(j))
    throw s.bad("malformed checkpoint metadata: " + what + " is " + j.dump() +
                ", not an integer");
  return j.get<int64_t>();
}

/// `j` as a non-negative integer; otherwise malformed, naming `what`.
uint64_t uintOf(const Stored &s, const json &j, const std::string &what) {
  if (!j.is_number_unsigned())
    throw s.bad("malformed checkpoint metadata: " + what + " is " + j.dump() +
                ", not a non-negative integer");
  return j.get<uint64_t>();
}

/// An array of integers (non-negative ones if `unsignedOnly`); otherwise
/// malformed, naming `what`.
template <typename T>
std::vector<T> arrayOf(const Stored &s, const json &j, const std::string &what,
                       bool unsignedOnly) {
  if (!j.is_array())
    throw s.bad("malformed checkpoint metadata: " + what + " is " + j.dump() +
                ", not an array");
  std::vector<T> out;
  for (const json &v : j) {
    if (unsignedOnly ? !v.is_number_unsigned() : !isInt64(v))
      throw s.bad("malformed checkpoint metadata: " + what + " holds " +
                  v.dump() + ", not " +
                  (unsignedOnly ? "a non-negative integer" : "an integer"));
    out.push_back(v.get<T>());
  }
  return out;
}

std::vector<int64_t> intsOf(const Stored &s, const json &j,
                            const std::string &what) {
  return arrayOf<int64_t>(s, j, what, /*unsignedOnly=*/false);
}

std::vector<uint64_t> uintsOf(const Stored &s, const json &j,
                              const std::string &what) {
  return arrayOf<uint64_t>(s, j, what, /*unsignedOnly=*/true);
}

/// Reads and parses `path`/metadata.json.
Stored readMetadata(const std::string &path) {
  Stored s;
  s.metaPath = path + "/" + kMetadata;
  try {
    s.meta = json::parse(readTextFile(s.metaPath));
  } catch (const json::exception &e) {
    throw std::runtime_error(s.metaPath + ": not valid JSON: " + e.what());
  }
  return s;
}

/// The format, its version and the optimizer are this program's.
void checkFormat(const Stored &s, const Manifest &m) {
  auto version = s.meta.find("version");
  if (s.meta.value("format", std::string()) != kFormat ||
      version == s.meta.end() || !isInt64(*version) ||
      version->get<int64_t>() != kVersion)
    throw s.bad(std::string("not a ") + kFormat + " version " +
                std::to_string(kVersion) + " checkpoint");
  std::string optimizer = s.meta.at("optimizer").get<std::string>();
  if (optimizer != m.optimizer)
    throw s.bad("checkpoint of another model: its optimizer is " + optimizer +
                ", this model's is " + m.optimizer);
}

/// The data order it was written with is this run's (older checkpoints:
/// unshuffled).
void checkDataOrder(const Stored &s, const Options &o) {
  const json &data = s.meta.at("data");
  json shuffle = data.contains("shuffle") ? data.at("shuffle") : json();
  if (shuffle.is_null() != !o.shuffle ||
      (o.shuffle && uintOf(s, shuffle, "data.shuffle") != o.shuffleSeed))
    throw s.bad(std::string("it was written ") +
                (shuffle.is_null() ? "without --shuffle"
                                   : "with --shuffle=" + shuffle.dump()) +
                ", and this run reads the data " +
                (o.shuffle ? "with --shuffle=" + std::to_string(o.shuffleSeed)
                           : "unshuffled") +
                ": resume with the same data order");
}

/// Every tensor of the program is there, in F32 and its global shape, and
/// there are no others: another model or precision is named by what
/// differs.
void checkTensors(const Stored &s, const std::vector<CheckpointTensor> &mine) {
  for (const CheckpointTensor &t : mine) {
    auto it = s.tensors.find(t.key);
    if (it == s.tensors.end())
      throw s.bad("checkpoint of another model: it has no tensor '" + t.key +
                  "'");
    std::string dtype = it->second.at("dtype").get<std::string>();
    if (dtype != "F32")
      throw s.bad("checkpoint of another precision: tensor '" + t.key +
                  "' is " + dtype + ", this model keeps F32");
    auto shape = intsOf(s, it->second.at("shape"), "the shape of '" + t.key + "'");
    if (shape != t.globalShape)
      throw s.bad("checkpoint of another model: tensor '" + t.key +
                  "' has shape " + shapeString(shape) + " there, " +
                  shapeString(t.globalShape) + " here");
  }
  if (s.tensors.size() == mine.size())
    return;
  std::set<std::string> keys;
  for (const CheckpointTensor &t : mine)
    keys.insert(t.key);
  for (const auto &[key, t] : s.tensors)
    if (!keys.count(key))
      throw s.bad("checkpoint of another model: it has tensor '" + key +
                  "', which this model does not");
}

/// Checks the metadata against the compiled program, in the order the
/// errors are reported, and returns the run's progress: the step and the
/// data position (whole sequences of this program's length).
TrainProgress checkAgainstProgram(Stored &s, const Manifest &m,
                                  const std::vector<CheckpointTensor> &mine,
                                  const Options &o) {
  TrainProgress progress;
  try {
    checkFormat(s, m);
    progress.step = intOf(s, s.meta.at("step"), "step");
    int64_t tokens =
        intOf(s, s.meta.at("data").at("tokens_consumed"), "tokens_consumed");
    if (progress.step < 0 || tokens < 0)
      throw s.bad("its step (" + std::to_string(progress.step) +
                  ") or data position (" + std::to_string(tokens) +
                  " tokens) is negative");
    progress.dataRow = tokens / m.seqLen;
    checkDataOrder(s, o);
    for (auto &[key, t] : s.meta.at("tensors").items())
      s.tensors[key] = t;
    for (auto &[file, f] : s.meta.at("files").items())
      s.fileBytes[file] = intOf(s, f.at("bytes"), "the bytes of " + file);
    checkTensors(s, mine);
    int64_t seqLen = intOf(s, s.meta.at("data").at("seq_len"), "seq_len");
    int64_t product = 0;
    if (__builtin_mul_overflow(seqLen, progress.dataRow, &product) ||
        product != tokens)
      throw s.bad("its data position (" + std::to_string(tokens) +
                  " tokens) is not a whole number of sequences of " +
                  std::to_string(m.seqLen) + " tokens");
  } catch (const json::exception &e) {
    throw s.bad(std::string("malformed checkpoint metadata: ") + e.what());
  }
  return progress;
}

/// Rank 0 notes what differs from the run that wrote it but may.
void noteDifferences(const Stored &s, const Options &o) {
  std::string data = o.data.empty() ? "synthetic" : o.data;
  const json &written = s.meta.at("data");
  auto file = written.find("file");
  std::string theirs = file == written.end() ? "?"
                       : file->is_string()   ? file->get<std::string>()
                                             : file->dump();
  if (theirs != data)
    std::printf("checkpoint: note: it was trained on %s; this run reads %s\n",
                theirs.c_str(), data.c_str());
  auto seed = s.meta.find("seed");
  if (seed != s.meta.end() && seed->is_number_unsigned() &&
      seed->get<uint64_t>() != o.seed)
    std::printf("checkpoint: note: it was written with --seed %llu; this "
                "run has --seed %llu\n",
                (unsigned long long)seed->get<uint64_t>(),
                (unsigned long long)o.seed);
}

/// A shard file's rows of one tensor that this rank reads.
struct Piece {
  const SafetensorsFile *file;
  int64_t first, end; // global rows in the shard
  uint64_t begin;     // file offset of the shard's row `first`
  std::vector<std::string> hashes;
};

/// The shard files this rank reads, opened and size-checked, and the
/// pieces of each tensor.
struct ShardPlan {
  std::map<std::string, SafetensorsFile> open;
  std::vector<std::vector<Piece>> pieces;
  /// Each tensor's stored rows [first, end) that this rank reads.
  std::vector<std::pair<int64_t, int64_t>> rows;
};

/// Shard file `file` of checkpoint `path`, opened once and checked against
/// the size its metadata records.
const SafetensorsFile &openShard(ShardPlan &plan, const Stored &s,
                                 const std::string &path,
                                 const std::string &file, int64_t expected) {
  auto it = plan.open.find(file);
  if (it != plan.open.end())
    return it->second;
  std::string filePath = path + "/" + file;
  if (!pathExists(filePath))
    throw std::runtime_error(filePath + ": missing shard file of checkpoint " +
                             path);
  FileHandle h = openRegularForRead(filePath);
  int64_t size = fileSize(h.fd(), filePath);
  if (size != expected)
    throw std::runtime_error(
        filePath + ": truncated or altered shard: " + std::to_string(size) +
        " bytes, the checkpoint's metadata says " + std::to_string(expected));
  return plan.open.emplace(file, SafetensorsFile(filePath)).first->second;
}

/// Throws unless `pieces` (sorted here by their first row) cover rows
/// [want, wantEnd) of tensor `t` once each: two shards that overlap there
/// would leave other rows unread while their count added up.
void checkCoverage(const Stored &s, const CheckpointTensor &t,
                   std::vector<Piece> &pieces, int64_t want, int64_t wantEnd) {
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece &a, const Piece &b) { return a.first < b.first; });
  int64_t covered = want; // rows [want, covered) are held
  const Piece *previous = nullptr;
  for (const Piece &p : pieces) {
    if (previous && p.first < previous->end)
      throw s.bad("the shards of '" + t.key + "' overlap at row " +
                  std::to_string(p.first));
    if (p.first > covered)
      break; // a gap
    covered = std::min(p.end, wantEnd);
    previous = &p;
  }
  if (covered != wantEnd)
    throw s.bad("the shards of '" + t.key + "' do not cover rows [" +
                std::to_string(want) + ", " + std::to_string(wantEnd) + ")");
}

/// The pieces of tensor `t` that hold rows [want, wantEnd); throws unless
/// they cover them.
std::vector<Piece> planTensor(ShardPlan &plan, const Stored &s,
                              const std::string &path,
                              const CheckpointTensor &t, int64_t want,
                              int64_t wantEnd) {
  std::vector<Piece> pieces;
  const int64_t globalRows = t.globalShape.empty() ? 1 : t.globalShape[0];
  try {
    for (const json &shard : s.tensors.at(t.key).at("shards")) {
      auto rows = intsOf(s, shard.at("rows"), "the rows of '" + t.key + "'");
      if (rows.size() != 2 || rows[0] < 0 || rows[0] >= rows[1] ||
          rows[1] > globalRows)
        throw s.bad("a shard of '" + t.key + "' has rows " +
                    shapeString(rows) + ", not [first, end) within its " +
                    std::to_string(globalRows) + " rows");
      if (rows[1] <= want || rows[0] >= wantEnd)
        continue;
      std::string file = shard.at("file").get<std::string>();
      if (file.find('/') != std::string::npos || file.rfind("..", 0) == 0)
        throw s.bad("shard file name '" + file + "' is not a plain name");
      auto expected = s.fileBytes.find(file);
      if (expected == s.fileBytes.end())
        throw s.bad("tensor '" + t.key + "' names shard " + file +
                    ", which the file list lacks");
      const SafetensorsFile &f =
          openShard(plan, s, path, file, expected->second);
      auto range = uintsOf(s, shard.at("byte_range"),
                           "the byte range of '" + t.key + "'");
      uint64_t bytes =
          uint64_t((rows[1] - rows[0]) * t.storedRowElements * 4);
      if (range.size() != 2 || range[1] - range[0] != bytes ||
          range[1] > uint64_t(expected->second))
        throw s.bad("shard of '" + t.key + "' in " + file +
                    " has a byte range that does not match its rows");
      pieces.push_back({&f, rows[0], rows[1], range[0],
                        shard.at("xxh3").get<std::vector<std::string>>()});
    }
  } catch (const json::exception &e) {
    throw s.bad("malformed shard list of '" + t.key + "': " + e.what());
  }
  checkCoverage(s, t, pieces, want, wantEnd);
  return pieces;
}

/// Reads stored rows [from, to) of piece `p` of tensor `t` into `local`
/// (which holds stored rows from `want` on), widened to whole hashed
/// chunks, each checked; returns the bytes read.
uint64_t readPiece(const Stored &s, const CheckpointTensor &t, const Piece &p,
                   int64_t want, int64_t wantEnd, std::vector<char> &chunk,
                   std::vector<char> &local) {
  const uint64_t rowBytes = uint64_t(t.storedRowElements) * 4;
  int64_t from = std::max(p.first, want), to = std::min(p.end, wantEnd);
  uint64_t lo = uint64_t(from - p.first) * rowBytes,
           hi = uint64_t(to - p.first) * rowBytes,
           total = uint64_t(p.end - p.first) * rowBytes;
  uint64_t c0 = lo / kChunkBytes, c1 = (hi + kChunkBytes - 1) / kChunkBytes;
  if (p.hashes.size() != (total + kChunkBytes - 1) / kChunkBytes)
    throw s.bad("shard of '" + t.key + "' in " + p.file->path() +
                " has the wrong number of chunk hashes");
  uint64_t a = c0 * kChunkBytes, b = std::min(total, c1 * kChunkBytes);
  chunk.resize(size_t(b - a));
  p.file->readBytes(p.begin + a, p.begin + b, chunk.data());
  for (uint64_t c = c0; c < c1; ++c) {
    uint64_t at = c * kChunkBytes - a,
             n = std::min(kChunkBytes, total - c * kChunkBytes);
    if (hex64(XXH3_64bits(chunk.data() + at, n)) != p.hashes[c])
      throw std::runtime_error(
          p.file->path() + ": checksum mismatch in tensor '" + t.key +
          "' (bytes " + std::to_string(p.begin + c * kChunkBytes) + ".." +
          std::to_string(p.begin + c * kChunkBytes + n) +
          "): the shard is corrupt");
  }
  std::memcpy(local.data() + uint64_t(from - want) * rowBytes,
              chunk.data() + (lo - a), size_t(hi - lo));
  return b - a;
}

/// The stored rows (of the whole tensor) that this rank reads of `t`:
/// its shard's rows, or under --tp the span of whole rows that holds its
/// part's elements there.
std::pair<int64_t, int64_t> storedRows(const CheckpointTensor &t,
                                       const Mesh &mesh, int64_t tp) {
  auto [want, wantEnd] = shardRows(t, t.sharded ? mesh.shardIndex() : 0);
  if (!t.tpSplit || want >= wantEnd)
    return {want, wantEnd};
  return tpWholeRows(*t.slot, tp, mesh.tpIndex(), want * t.rowElements,
                     wantEnd * t.rowElements);
}

/// This rank's part of `t` out of the stored rows from `first` on in
/// `stored`, into `local` (its shard's rows of the part; padding stays).
void keepPart(const CheckpointTensor &t, const Mesh &mesh, int64_t tp,
              int64_t first, const std::vector<char> &stored,
              std::vector<char> &local) {
  auto [want, wantEnd] = shardRows(t, t.sharded ? mesh.shardIndex() : 0);
  tpTakePart(*t.slot, tp, mesh.tpIndex(), want * t.rowElements,
             wantEnd * t.rowElements,
             reinterpret_cast<const float *>(stored.data()),
             first * t.storedRowElements, reinterpret_cast<float *>(local.data()));
}

} // namespace

TrainProgress Checkpointer::load(const std::string &path, const Options &o) {
  auto start = std::chrono::steady_clock::now();
  Stored stored = readMetadata(path);
  TrainProgress progress = checkAgainstProgram(stored, m_, tensors_, o);
  if (mesh_.rank == 0)
    noteDifferences(stored, o);
  // Every shard this rank reads is opened and size-checked before any
  // tensor is read: a missing or truncated file fails before anything is
  // loaded.
  ShardPlan plan;
  for (const CheckpointTensor &t : tensors_) {
    auto [want, wantEnd] = storedRows(t, mesh_, m_.tp);
    plan.rows.push_back({want, wantEnd});
    plan.pieces.push_back(planTensor(plan, stored, path, t, want, wantEnd));
  }
  // This rank's rows of each tensor into the backend (padding rows zero);
  // under --tp, its part of the whole rows read.
  uint64_t read = 0;
  std::vector<char> chunk, local, whole;
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const CheckpointTensor &t = tensors_[k];
    auto [want, wantEnd] = plan.rows[k];
    local.assign(size_t(t.localRows * uint64_t(t.rowElements) * 4), 0);
    std::vector<char> &into = t.tpSplit ? whole : local;
    if (t.tpSplit)
      whole.assign(size_t(std::max<int64_t>(0, wantEnd - want) *
                          uint64_t(t.storedRowElements) * 4),
                   0);
    for (const Piece &p : plan.pieces[k])
      read += readPiece(stored, t, p, want, wantEnd, chunk, into);
    if (t.tpSplit)
      keepPart(t, mesh_, m_.tp, want, whole, local);
    backend_.copyToDevice(static_cast<char *>(regions_[t.region]) + t.offset,
                          local.data(), int64_t(local.size()));
  }
  double total = mesh_.sumAll(double(read));
  double s = secondsSince(start);
  if (mesh_.rank == 0)
    std::printf("checkpoint: resumed from %s at step %lld: read %.1f MB in "
                "%.3f s (%.1f MB/s per rank)\n",
                path.c_str(), (long long)progress.step, total / 1e6, s,
                total / 1e6 / s / double(mesh_.world));
  return progress;
}
