//===- checkpoint.cpp - training checkpoints: sharded save, resume --------===//
#include "runtime/formats/checkpoint.h"
#include "runtime/formats/files.h"
#include "runtime/trainer/program.h"
#include "runtime/runtime.h"
#include "runtime/formats/safetensors.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

using namespace shardc;
using namespace shardc::runtime;
using nlohmann::json;

namespace {

constexpr const char *kFormat = "shardc-checkpoint";
constexpr int64_t kVersion = 1;
constexpr const char *kMetadata = "metadata.json";
constexpr const char *kLatest = "latest";
constexpr const char *kStepPrefix = "step-";
constexpr const char *kTmpPrefix = ".tmp-";
/// Bytes per hashed chunk of a shard's tensor.
constexpr uint64_t kChunkBytes = uint64_t(4) << 20;

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)v);
  return buf;
}

std::string stepName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s%08lld", kStepPrefix, (long long)step);
  return buf;
}

/// The step of a "step-XXXXXXXX" name, or -1.
int64_t stepOf(const std::string &name) {
  if (name.rfind(kStepPrefix, 0) != 0)
    return -1;
  std::string digits = name.substr(std::strlen(kStepPrefix));
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoll(digits);
}

std::string shardFileName(int64_t shard, int64_t shards) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "shard-%05lld-of-%05lld.safetensors",
                (long long)shard, (long long)shards);
  return buf;
}

std::vector<std::string> chunkHashes(const char *data, uint64_t bytes) {
  std::vector<std::string> out;
  for (uint64_t at = 0; at < bytes; at += kChunkBytes)
    out.push_back(
        hex64(XXH3_64bits(data + at, std::min(kChunkBytes, bytes - at))));
  return out;
}

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       since)
      .count();
}

/// The rows of dim 0 that shard `index` holds of a tensor: [first, end).
std::pair<int64_t, int64_t> shardRows(const CheckpointTensor &t,
                                      int64_t index) {
  int64_t global = t.globalShape.empty() ? 1 : t.globalShape[0];
  if (!t.sharded)
    return {0, global};
  int64_t first = std::min(global, index * t.localRows);
  return {first, std::min(global, first + t.localRows)};
}

} // namespace

std::vector<CheckpointTensor>
shardc::runtime::checkpointTensors(const Manifest &m) {
  std::vector<CheckpointTensor> out;
  std::map<std::string, const TensorSlot *> byName;
  auto describe = [](CheckpointTensor &t, const TensorSlot &shape) {
    t.globalShape = shape.sharded() ? shape.globalShape : shape.shape;
    t.sharded = shape.sharded();
    t.localRows = shape.shape.empty() ? 1 : shape.shape[0];
    t.rowElements = shape.shape.empty() ? 1 : shape.rowSize();
  };
  for (const TensorSlot &p : m.params) {
    byName[p.name] = &p;
    CheckpointTensor t;
    t.key = p.name;
    t.kind = "param";
    t.region = abi::kRegionParams;
    t.offset = p.offset;
    describe(t, p);
    out.push_back(std::move(t));
  }
  for (const TensorSlot &s : m.state) {
    // Gradient accumulators are rewritten by the first micro-batch of a
    // step; working copies are the parameters, rounded.
    if (s.name.rfind(abi::kStateGrad, 0) == 0 ||
        s.name.rfind(abi::kStateWork, 0) == 0)
      continue;
    CheckpointTensor t;
    t.key = s.name;
    t.kind = "optimizer";
    t.region = abi::kRegionState;
    t.offset = s.offset;
    size_t dot = s.name.find('.');
    auto p = dot == std::string::npos ? byName.end()
                                      : byName.find(s.name.substr(dot + 1));
    // State of a parameter is sharded like it; other state is replicated.
    describe(t, p != byName.end() && p->second->shape == s.shape ? *p->second
                                                                 : s);
    out.push_back(std::move(t));
  }
  return out;
}

std::string shardc::runtime::programFingerprint(const Manifest &m) {
  XXH3_state_t *state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, shardc_manifest, std::strlen(shardc_manifest));
  int64_t regionBytes[shardc::abi::kNumRegions] = {m.paramBytes, m.stateBytes,
                                           m.ioBytes, m.arenaBytes,
                                           m.constantsBytes};
  for (const int64_t *program :
       {shardc_program_micro_step, shardc_program_micro_step_nosync,
        shardc_program_opt_step, shardc_program_refresh})
    if (program && validateProgram(program, regionBytes).empty())
      XXH3_64bits_update(state, program,
                         size_t(programWords(program)) * sizeof(int64_t));
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                (unsigned long long)XXH3_64bits_digest(state));
  XXH3_freeState(state);
  return buf;
}

std::string shardc::runtime::modelHash(const Manifest &m) {
  std::string text = "optimizer=" + m.optimizer + ";";
  for (const CheckpointTensor &t : checkpointTensors(m))
    text += t.key + ":F32" + shapeString(t.globalShape) + ";";
  return hex64(XXH3_64bits(text.data(), text.size()));
}

Checkpointer::Checkpointer(const Manifest &m, const Mesh &mesh,
                           Backend &backend,
                           void *const regions[abi::kNumRegions])
    : m_(m), mesh_(mesh), backend_(backend), regions_(regions),
      tensors_(checkpointTensors(m)) {}

void Checkpointer::save(const std::string &dir, const TrainProgress &progress,
                        const Options &o, int64_t keep) {
  auto start = std::chrono::steady_clock::now();
  const bool leader = mesh_.rank == 0;
  const std::string name = stepName(progress.step);
  const std::string tmp = dir + "/" + kTmpPrefix + name;
  const std::string published = dir + "/" + name;
  if (leader) {
    makeDirectories(dir);
    // Leftovers of saves that were killed before they were published.
    for (const std::string &entry : listDirectory(dir))
      if (entry.rfind(kTmpPrefix, 0) == 0 ||
          entry.rfind(std::string(kLatest) + ".tmp.", 0) == 0)
        removeTree(dir + "/" + entry);
    makeDirectories(tmp);
  }
  mesh_.barrier();

  // Replica 0 writes: the other replicas hold the same values.
  json fragment = json::object();
  uint64_t written = 0;
  if (mesh_.replicaIndex() == 0) {
    const int64_t shard = mesh_.shardIndex();
    const std::string file = shardFileName(shard, mesh_.shards);
    std::vector<NamedTensor> tensors;
    std::vector<const CheckpointTensor *> which;
    std::vector<std::vector<float>> staging;
    for (const CheckpointTensor &t : tensors_) {
      if (!t.sharded && shard != 0)
        continue;
      auto [first, end] = shardRows(t, shard);
      if (end <= first)
        continue; // only padding here
      std::vector<int64_t> shape = t.globalShape;
      if (!shape.empty())
        shape[0] = end - first;
      const char *src =
          static_cast<const char *>(regions_[t.region]) + t.offset;
      int64_t elements = (end - first) * t.rowElements;
      if (!backend_.hostMemory()) {
        staging.emplace_back(size_t(elements));
        backend_.copyToHost(staging.back().data(), src, elements * 4);
        src = reinterpret_cast<const char *>(staging.back().data());
      }
      tensors.push_back({t.key, shape, reinterpret_cast<const float *>(src)});
      which.push_back(&t);
    }
    std::vector<uint64_t> offsets = writeSafetensors(
        tmp + "/" + file, tensors,
        {{"format", kFormat}, {"step", std::to_string(progress.step)}});
    json entries = json::object();
    for (size_t k = 0; k < tensors.size(); ++k) {
      const CheckpointTensor &t = *which[k];
      auto [first, end] = shardRows(t, shard);
      uint64_t bytes = uint64_t((end - first) * t.rowElements * 4);
      entries[t.key] = {
          {"file", file},
          {"rows", {first, end}},
          {"byte_range", {offsets[k], offsets[k] + bytes}},
          {"xxh3", chunkHashes(reinterpret_cast<const char *>(tensors[k].data),
                               bytes)}};
      written += bytes;
    }
    std::string filePath = tmp + "/" + file;
    uint64_t fileBytes =
        uint64_t(fileSize(openRegularForRead(filePath).fd(), filePath));
    fragment = {{"file", file},
                {"bytes", fileBytes},
                {"rank", mesh_.rank},
                {"mesh_coords", {mesh_.replicaIndex(), shard}},
                {"tensors", entries}};
  }
  std::vector<std::string> fragments = mesh_.gatherStrings(fragment.dump());

  if (leader) {
    json meta;
    meta["format"] = kFormat;
    meta["version"] = kVersion;
    meta["step"] = progress.step;
    meta["data"] = {{"rows_consumed", progress.dataRow},
                    {"seq_len", m_.seqLen},
                    {"tokens_consumed", progress.dataRow * m_.seqLen},
                    {"file", o.data.empty() ? "synthetic" : o.data},
                    {"shuffle", o.shuffle ? json(o.shuffleSeed) : json()}};
    meta["seed"] = o.seed;
    meta["schedule"] = {{"name", o.schedule},
                        {"lr", o.lr},
                        {"warmup_steps", o.warmupSteps},
                        {"steps", o.steps}};
    meta["optimizer"] = m_.optimizer;
    meta["model"] = {{"source", m_.source}, {"family", m_.family}};
    meta["model_hash"] = modelHash(m_);
    meta["program_hash"] = programFingerprint(m_);
    meta["mesh"] = {m_.replicas, m_.shards};
    json files = json::object(), tensors = json::object();
    for (const CheckpointTensor &t : tensors_)
      tensors[t.key] = {{"kind", t.kind},
                        {"dtype", "F32"},
                        {"shape", t.globalShape},
                        {"shards", json::array()}};
    for (const std::string &text : fragments) {
      json f = json::parse(text);
      if (f.empty())
        continue;
      files[f["file"].get<std::string>()] = {{"bytes", f["bytes"]},
                                             {"rank", f["rank"]},
                                             {"mesh_coords", f["mesh_coords"]}};
      for (auto &[key, entry] : f["tensors"].items())
        tensors[key]["shards"].push_back(entry);
    }
    meta["chunk_bytes"] = kChunkBytes;
    meta["files"] = files;
    meta["tensors"] = tensors;
    writeFileDurably(tmp + "/" + kMetadata, meta.dump(1) + "\n");
    syncDirectory(tmp);
    // Publish: one rename. A checkpoint of the same step (a run resumed
    // from an older one) is replaced.
    if (pathExists(published)) {
      std::string old = dir + "/" + kTmpPrefix + "old-" + name;
      removeTree(old);
      if (std::rename(published.c_str(), old.c_str()) != 0)
        throw std::runtime_error(published + ": cannot move the older "
                                 "checkpoint of this step aside");
    }
    if (std::rename(tmp.c_str(), published.c_str()) != 0)
      throw std::runtime_error(published + ": cannot publish the checkpoint "
                               "(rename from " + tmp + " failed)");
    syncDirectory(dir);
    writeFileDurably(dir + "/" + kLatest, name + "\n");
    // Only now, with the new one published, the oldest go.
    if (keep > 0) {
      std::vector<std::pair<int64_t, std::string>> steps;
      for (const std::string &entry : listDirectory(dir))
        if (stepOf(entry) >= 0 && isDirectory(dir + "/" + entry))
          steps.push_back({stepOf(entry), entry});
      std::sort(steps.begin(), steps.end());
      for (size_t k = 0; k + size_t(keep) < steps.size(); ++k)
        if (steps[k].second != name)
          removeTree(dir + "/" + steps[k].second);
    }
    for (const std::string &entry : listDirectory(dir))
      if (entry.rfind(std::string(kTmpPrefix) + "old-", 0) == 0)
        removeTree(dir + "/" + entry);
  }
  double total = mesh_.sumAll(double(written));
  mesh_.barrier();
  double s = seconds(start);
  if (leader)
    std::printf("checkpoint: saved step %lld to %s: %.1f MB in %.3f s "
                "(%.1f MB/s per writing rank)\n",
                (long long)progress.step, published.c_str(), total / 1e6, s,
                total / 1e6 / s / double(m_.shards));
}

std::string shardc::runtime::findCheckpoint(const std::string &dir) {
  if (pathExists(dir + "/" + kMetadata))
    return dir;
  if (!isDirectory(dir))
    return "";
  std::string latest = dir + "/" + kLatest;
  if (pathExists(latest)) {
    std::string name = readTextFile(latest);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
      name.pop_back();
    if (stepOf(name) < 0)
      throw std::runtime_error(latest + ": names '" + name +
                               "', not a step-NNNNNNNN checkpoint");
    if (!pathExists(dir + "/" + name + "/" + kMetadata))
      throw std::runtime_error(latest + ": names " + name +
                               ", which has no " + kMetadata);
    return dir + "/" + name;
  }
  // Killed between the publishing rename and `latest`: the newest one.
  std::string best;
  int64_t bestStep = -1;
  for (const std::string &entry : listDirectory(dir))
    if (stepOf(entry) > bestStep &&
        pathExists(dir + "/" + entry + "/" + kMetadata)) {
      bestStep = stepOf(entry);
      best = dir + "/" + entry;
    }
  return best;
}

TrainProgress Checkpointer::load(const std::string &path, const Options &o) {
  auto start = std::chrono::steady_clock::now();
  const std::string metaPath = path + "/" + kMetadata;
  json meta;
  try {
    meta = json::parse(readTextFile(metaPath));
  } catch (const json::exception &e) {
    throw std::runtime_error(metaPath + ": not valid JSON: " + e.what());
  }
  auto bad = [&](const std::string &why) {
    return std::runtime_error(metaPath + ": " + why);
  };
  TrainProgress progress;
  std::map<std::string, json> stored;
  std::map<std::string, int64_t> fileBytes;
  try {
    if (meta.value("format", std::string()) != kFormat ||
        meta.value("version", int64_t(0)) != kVersion)
      throw bad(std::string("not a ") + kFormat + " version " +
                std::to_string(kVersion) + " checkpoint");
    std::string optimizer = meta.at("optimizer").get<std::string>();
    if (optimizer != m_.optimizer)
      throw bad("checkpoint of another model: its optimizer is " + optimizer +
                ", this model's is " + m_.optimizer);
    progress.step = meta.at("step").get<int64_t>();
    int64_t tokens = meta.at("data").at("tokens_consumed").get<int64_t>();
    progress.dataRow = tokens / m_.seqLen;
    // The data order it was written with (older checkpoints: unshuffled).
    const json &data = meta.at("data");
    json shuffle = data.contains("shuffle") ? data.at("shuffle") : json();
    if (shuffle.is_null() != !o.shuffle ||
        (o.shuffle && shuffle.get<uint64_t>() != o.shuffleSeed))
      throw bad(std::string("it was written ") +
                (shuffle.is_null() ? "without --shuffle"
                                   : "with --shuffle=" + shuffle.dump()) +
                ", and this run reads the data " +
                (o.shuffle ? "with --shuffle=" + std::to_string(o.shuffleSeed)
                           : "unshuffled") +
                ": resume with the same data order");
    for (auto &[key, t] : meta.at("tensors").items())
      stored[key] = t;
    for (auto &[file, f] : meta.at("files").items())
      fileBytes[file] = f.at("bytes").get<int64_t>();
    // Another model or precision: what differs, by name.
    for (const CheckpointTensor &t : tensors_) {
      auto it = stored.find(t.key);
      if (it == stored.end())
        throw bad("checkpoint of another model: it has no tensor '" + t.key +
                  "'");
      std::string dtype = it->second.at("dtype").get<std::string>();
      if (dtype != "F32")
        throw bad("checkpoint of another precision: tensor '" + t.key +
                  "' is " + dtype + ", this model keeps F32");
      auto shape = it->second.at("shape").get<std::vector<int64_t>>();
      if (shape != t.globalShape)
        throw bad("checkpoint of another model: tensor '" + t.key +
                  "' has shape " + shapeString(shape) + " there, " +
                  shapeString(t.globalShape) + " here");
    }
    if (stored.size() != tensors_.size()) {
      std::set<std::string> mine;
      for (const CheckpointTensor &t : tensors_)
        mine.insert(t.key);
      for (const auto &[key, t] : stored)
        if (!mine.count(key))
          throw bad("checkpoint of another model: it has tensor '" + key +
                    "', which this model does not");
    }
    if (meta.at("data").at("seq_len").get<int64_t>() * progress.dataRow !=
        tokens)
      throw bad("its data position (" + std::to_string(tokens) +
                " tokens) is not a whole number of sequences of " +
                std::to_string(m_.seqLen) + " tokens");
  } catch (const json::exception &e) {
    throw bad(std::string("malformed checkpoint metadata: ") + e.what());
  }
  if (mesh_.rank == 0) {
    std::string data = o.data.empty() ? "synthetic" : o.data;
    std::string theirs = meta["data"].value("file", std::string("?"));
    if (theirs != data)
      std::printf("checkpoint: note: it was trained on %s; this run reads %s\n",
                  theirs.c_str(), data.c_str());
    if (meta.value("seed", o.seed) != o.seed)
      std::printf("checkpoint: note: it was written with --seed %llu; this "
                  "run has --seed %llu\n",
                  (unsigned long long)meta.value("seed", o.seed),
                  (unsigned long long)o.seed);
  }

  // The shards this rank reads, opened and size-checked before any tensor
  // is read: a missing or truncated file fails before anything is loaded.
  std::map<std::string, SafetensorsFile> open;
  struct Piece {
    const SafetensorsFile *file;
    int64_t first, end;   // global rows in the shard
    uint64_t begin;       // file offset of the shard's row `first`
    std::vector<std::string> hashes;
  };
  std::vector<std::vector<Piece>> plan(tensors_.size());
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const CheckpointTensor &t = tensors_[k];
    auto [want, wantEnd] = shardRows(t, t.sharded ? mesh_.shardIndex() : 0);
    int64_t covered = 0;
    try {
      for (const json &s : stored[t.key].at("shards")) {
        auto rows = s.at("rows").get<std::vector<int64_t>>();
        if (rows.size() != 2 || rows[1] <= want || rows[0] >= wantEnd)
          continue;
        std::string file = s.at("file").get<std::string>();
        if (file.find('/') != std::string::npos || file.rfind("..", 0) == 0)
          throw bad("shard file name '" + file + "' is not a plain name");
        auto expected = fileBytes.find(file);
        if (expected == fileBytes.end())
          throw bad("tensor '" + t.key + "' names shard " + file +
                    ", which the file list lacks");
        auto it = open.find(file);
        if (it == open.end()) {
          std::string filePath = path + "/" + file;
          if (!pathExists(filePath))
            throw std::runtime_error(filePath + ": missing shard file of "
                                     "checkpoint " + path);
          FileHandle h = openRegularForRead(filePath);
          int64_t size = fileSize(h.fd(), filePath);
          if (size != expected->second)
            throw std::runtime_error(
                filePath + ": truncated or altered shard: " +
                std::to_string(size) + " bytes, the checkpoint's metadata "
                "says " + std::to_string(expected->second));
          it = open.emplace(file, SafetensorsFile(filePath)).first;
        }
        auto range = s.at("byte_range").get<std::vector<uint64_t>>();
        uint64_t bytes = uint64_t((rows[1] - rows[0]) * t.rowElements * 4);
        if (range.size() != 2 || range[1] - range[0] != bytes ||
            range[1] > uint64_t(expected->second))
          throw bad("shard of '" + t.key + "' in " + file +
                    " has a byte range that does not match its rows");
        plan[k].push_back({&it->second, rows[0], rows[1], range[0],
                           s.at("xxh3").get<std::vector<std::string>>()});
        covered += std::min(rows[1], wantEnd) - std::max(rows[0], want);
      }
    } catch (const json::exception &e) {
      throw bad("malformed shard list of '" + t.key + "': " + e.what());
    }
    if (covered != wantEnd - want)
      throw bad("the shards of '" + t.key + "' do not cover rows [" +
                std::to_string(want) + ", " + std::to_string(wantEnd) + ")");
  }

  // Read each needed row range, widened to whole hashed chunks, check them,
  // then copy this rank's rows into the backend (padding rows zero).
  uint64_t read = 0;
  std::vector<char> chunk, local;
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const CheckpointTensor &t = tensors_[k];
    auto [want, wantEnd] = shardRows(t, t.sharded ? mesh_.shardIndex() : 0);
    const uint64_t rowBytes = uint64_t(t.rowElements) * 4;
    local.assign(size_t(t.localRows * rowBytes), 0);
    for (const Piece &p : plan[k]) {
      int64_t from = std::max(p.first, want), to = std::min(p.end, wantEnd);
      uint64_t lo = uint64_t(from - p.first) * rowBytes,
               hi = uint64_t(to - p.first) * rowBytes,
               total = uint64_t(p.end - p.first) * rowBytes;
      uint64_t c0 = lo / kChunkBytes, c1 = (hi + kChunkBytes - 1) / kChunkBytes;
      if (p.hashes.size() != (total + kChunkBytes - 1) / kChunkBytes)
        throw bad("shard of '" + t.key + "' in " + p.file->path() +
                  " has the wrong number of chunk hashes");
      uint64_t a = c0 * kChunkBytes, b = std::min(total, c1 * kChunkBytes);
      chunk.resize(size_t(b - a));
      p.file->readBytes(p.begin + a, p.begin + b, chunk.data());
      read += b - a;
      for (uint64_t c = c0; c < c1; ++c) {
        uint64_t s = c * kChunkBytes - a,
                 n = std::min(kChunkBytes, total - c * kChunkBytes);
        if (hex64(XXH3_64bits(chunk.data() + s, n)) != p.hashes[c])
          throw std::runtime_error(
              p.file->path() + ": checksum mismatch in tensor '" + t.key +
              "' (bytes " + std::to_string(p.begin + c * kChunkBytes) + ".." +
              std::to_string(p.begin + c * kChunkBytes + n) +
              "): the shard is corrupt");
      }
      std::memcpy(local.data() + uint64_t(from - want) * rowBytes,
                  chunk.data() + (lo - a), size_t(hi - lo));
    }
    backend_.copyToDevice(static_cast<char *>(regions_[t.region]) + t.offset,
                          local.data(), int64_t(local.size()));
  }
  double total = mesh_.sumAll(double(read));
  double s = seconds(start);
  if (mesh_.rank == 0)
    std::printf("checkpoint: resumed from %s at step %lld: read %.1f MB in "
                "%.3f s (%.1f MB/s per rank)\n",
                path.c_str(), (long long)progress.step, total / 1e6, s,
                total / 1e6 / s / double(mesh_.world));
  return progress;
}
