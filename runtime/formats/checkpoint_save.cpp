//===- checkpoint_save.cpp - writing and publishing a checkpoint ----------===//
//
// A save in four steps: clear the leftovers of killed saves and make the
// temporary directory; each shard rank of replica 0 writes its shard file;
// rank 0 writes the metadata from every rank's fragment; rank 0 publishes
// it with one rename, points `latest` at it and drops the oldest.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/checkpoint.h"
#include "runtime/formats/checkpoint_format.h"
#include "runtime/formats/checkpoint_io.h"
#include "runtime/formats/files.h"
#include "runtime/formats/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

using namespace shardc;
using namespace shardc::runtime;
using namespace shardc::runtime::checkpoint_format;
using nlohmann::json;

namespace {

/// Removes what saves killed before they were published left under `dir`,
/// and makes the temporary directory `tmp` of this save.
void prepareDirectory(const std::string &dir, const std::string &tmp) {
  makeDirectories(dir);
  for (const std::string &entry : listDirectory(dir))
    if (entry.rfind(kTmpPrefix, 0) == 0 ||
        entry.rfind(std::string(kLatest) + ".tmp.", 0) == 0)
      removeTree(dir + "/" + entry);
  makeDirectories(tmp);
}

/// The run's state besides its tensors, as metadata.json records it.
json progressMetadata(const Manifest &m, const TrainProgress &progress,
                      const Options &o) {
  json meta;
  meta["format"] = kFormat;
  meta["version"] = kVersion;
  meta["step"] = progress.step;
  meta["data"] = {{"rows_consumed", progress.dataRow},
                  {"seq_len", m.seqLen},
                  {"tokens_consumed", progress.dataRow * m.seqLen},
                  {"file", o.data.empty() ? "synthetic" : o.data},
                  {"shuffle", o.shuffle ? json(o.shuffleSeed) : json()}};
  meta["seed"] = o.seed;
  meta["schedule"] = {{"name", o.schedule},
                      {"lr", o.lr},
                      {"warmup_steps", o.warmupSteps},
                      {"steps", o.steps}};
  meta["optimizer"] = m.optimizer;
  meta["model"] = {{"source", m.source}, {"family", m.family}};
  meta["model_hash"] = modelHash(m);
  meta["program_hash"] = programFingerprint(m);
  meta["mesh"] = {m.replicas, m.shards};
  meta["tp"] = m.tp;
  return meta;
}

/// metadata.json: the progress, then every tensor with the shards the
/// writing ranks' `fragments` list, and the files.
json metadata(const Manifest &m, const std::vector<CheckpointTensor> &all,
              const TrainProgress &progress, const Options &o,
              const std::vector<std::string> &fragments) {
  json meta = progressMetadata(m, progress, o);
  json files = json::object(), tensors = json::object();
  for (const CheckpointTensor &t : all)
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
  return meta;
}

/// Keeps the newest `keep` published checkpoints under `dir` (never
/// `name`, the one just published).
void dropOldest(const std::string &dir, const std::string &name, int64_t keep) {
  std::vector<std::pair<int64_t, std::string>> steps;
  for (const std::string &entry : listDirectory(dir))
    if (stepOf(entry) >= 0 && isDirectory(dir + "/" + entry))
      steps.push_back({stepOf(entry), entry});
  std::sort(steps.begin(), steps.end());
  for (size_t k = 0; k + size_t(keep) < steps.size(); ++k)
    if (steps[k].second != name)
      removeTree(dir + "/" + steps[k].second);
}

/// Publishes `tmp` as DIR/`name` with one rename (a checkpoint of the same
/// step, from a run resumed from an older one, is replaced), points
/// `latest` at it, and only then drops the oldest (keep > 0).
void publish(const std::string &dir, const std::string &tmp,
             const std::string &name, int64_t keep) {
  const std::string published = dir + "/" + name;
  if (pathExists(published)) {
    std::string old = dir + "/" + kTmpPrefix + "old-" + name;
    removeTree(old);
    if (std::rename(published.c_str(), old.c_str()) != 0)
      throw std::runtime_error(published + ": cannot move the older "
                                           "checkpoint of this step aside");
  }
  if (std::rename(tmp.c_str(), published.c_str()) != 0)
    throw std::runtime_error(published +
                             ": cannot publish the checkpoint "
                             "(rename from " +
                             tmp + " failed)");
  syncDirectory(dir);
  writeFileDurably(dir + "/" + kLatest, name + "\n");
  if (keep > 0)
    dropOldest(dir, name, keep);
  for (const std::string &entry : listDirectory(dir))
    if (entry.rfind(std::string(kTmpPrefix) + "old-", 0) == 0)
      removeTree(dir + "/" + entry);
}

} // namespace

std::string Checkpointer::writeShard(const std::string &tmp, int64_t step,
                                     uint64_t &written) const {
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
    const char *src = static_cast<const char *>(regions_[t.region]) + t.offset;
    int64_t elements = (end - first) * t.rowElements;
    if (!backend_.hostMemory()) {
      staging.emplace_back(size_t(elements));
      backend_.copyToHost(staging.back().data(), src, elements * 4);
      src = reinterpret_cast<const char *>(staging.back().data());
    }
    tensors.push_back({t.key, shape, reinterpret_cast<const float *>(src)});
    which.push_back(&t);
  }
  std::vector<uint64_t> offsets =
      writeSafetensors(tmp + "/" + file, tensors,
                       {{"format", kFormat}, {"step", std::to_string(step)}});
  json entries = json::object();
  for (size_t k = 0; k < tensors.size(); ++k) {
    const CheckpointTensor &t = *which[k];
    auto [first, end] = shardRows(t, shard);
    uint64_t bytes = uint64_t((end - first) * t.rowElements * 4);
    entries[t.key] = {
        {"file", file},
        {"rows", {first, end}},
        {"byte_range", {offsets[k], offsets[k] + bytes}},
        {"xxh3",
         chunkHashes(reinterpret_cast<const char *>(tensors[k].data), bytes)}};
    written += bytes;
  }
  std::string filePath = tmp + "/" + file;
  uint64_t fileBytes =
      uint64_t(fileSize(openRegularForRead(filePath).fd(), filePath));
  json fragment = {{"file", file},
                   {"bytes", fileBytes},
                   {"rank", mesh_.rank},
                   {"mesh_coords", {mesh_.replicaIndex(), shard}},
                   {"tensors", entries}};
  return fragment.dump();
}

std::string Checkpointer::writeGathered(const std::string &tmp, int64_t step,
                                        uint64_t &written) const {
  // The ranks of replica 0 (world ranks 0 .. S*T-1) write in rounds: in
  // round r, tensor r*W + w is gathered whole onto writer w (shard w / T,
  // tp index w % T: over the shard axis, then tp), and every writer then
  // writes its tensor into its own file at once. Each rank holds one whole
  // tensor at a time; the other replicas hold the same values and skip.
  if (mesh_.replicaIndex() != 0)
    return json::object().dump();
  const int64_t writers = mesh_.shards * mesh_.tp;
  const int64_t self = mesh_.shardIndex() * mesh_.tp + mesh_.tpIndex();
  std::vector<size_t> mine;
  for (size_t k = size_t(self); k < tensors_.size(); k += size_t(writers))
    mine.push_back(k);
  std::vector<float> whole;
  size_t next = 0; // the next tensor to gather, in the order every rank keeps
  // Joins the gathers of tensors [next, end), keeping `keep`'s.
  auto gatherUpTo = [&](size_t end, size_t keep) {
    for (end = std::min(end, tensors_.size()); next < end; ++next) {
      const CheckpointTensor &t = tensors_[next];
      int64_t owner = int64_t(next) % writers;
      std::vector<float> values = gatherParameter(
          *t.slot, mesh_, backend_,
          static_cast<const char *>(regions_[t.region]) + t.offset,
          owner / mesh_.tp, owner % mesh_.tp);
      if (next == keep)
        whole = std::move(values);
    }
  };
  // A round's gathers all end before its writers write, so that they write
  // at once (each rank joins every gather of its replica).
  auto gatherRoundOf = [&](size_t k) -> const float * {
    gatherUpTo((k / size_t(writers) + 1) * size_t(writers), k);
    return whole.data();
  };
  if (mine.empty()) {
    gatherUpTo(tensors_.size(), tensors_.size());
    return json::object().dump();
  }
  const std::string file = shardFileName(self, writers);
  std::vector<NamedTensor> headers;
  for (size_t k : mine)
    headers.push_back({tensors_[k].key, tensors_[k].globalShape, nullptr});
  std::vector<std::vector<std::string>> hashes;
  std::vector<uint64_t> offsets = writeSafetensors(
      tmp + "/" + file, headers,
      {{"format", kFormat}, {"step", std::to_string(step)}},
      [&](size_t j) -> const float * {
        const float *data = gatherRoundOf(mine[j]);
        hashes.push_back(chunkHashes(reinterpret_cast<const char *>(data),
                                     uint64_t(whole.size()) * 4));
        return data;
      });
  // The rounds after this rank's last tensor.
  gatherUpTo(tensors_.size(), tensors_.size());
  json entries = json::object();
  for (size_t j = 0; j < mine.size(); ++j) {
    const CheckpointTensor &t = tensors_[mine[j]];
    int64_t rows = t.globalShape.empty() ? 1 : t.globalShape[0];
    uint64_t bytes = uint64_t(rows * t.storedRowElements * 4);
    entries[t.key] = {{"file", file},
                      {"rows", {0, rows}},
                      {"byte_range", {offsets[j], offsets[j] + bytes}},
                      {"xxh3", hashes[j]}};
    written += bytes;
  }
  std::string filePath = tmp + "/" + file;
  json fragment = {
      {"file", file},
      {"bytes", uint64_t(fileSize(openRegularForRead(filePath).fd(), filePath))},
      {"rank", mesh_.rank},
      {"mesh_coords", {0, mesh_.shardIndex(), mesh_.tpIndex()}},
      {"tensors", entries}};
  return fragment.dump();
}

void Checkpointer::save(const std::string &dir, const TrainProgress &progress,
                        const Options &o, int64_t keep) {
  auto start = std::chrono::steady_clock::now();
  const bool leader = mesh_.rank == 0;
  const std::string name = stepName(progress.step);
  const std::string tmp = dir + "/" + kTmpPrefix + name;
  if (leader)
    prepareDirectory(dir, tmp);
  mesh_.barrier();
  // Replica 0 writes: the other replicas hold the same values. Under --tp
  // each of its ranks writes whole tensors, in rounds.
  uint64_t written = 0;
  std::string fragment =
      m_.tp > 1 ? writeGathered(tmp, progress.step, written)
      : mesh_.replicaIndex() == 0 ? writeShard(tmp, progress.step, written)
                                  : json::object().dump();
  std::vector<std::string> fragments = mesh_.gatherStrings(fragment);
  if (leader) {
    json meta = metadata(m_, tensors_, progress, o, fragments);
    writeFileDurably(tmp + "/" + kMetadata, meta.dump(1) + "\n");
    syncDirectory(tmp);
    publish(dir, tmp, name, keep);
  }
  double total = mesh_.sumAll(double(written));
  mesh_.barrier();
  double s = secondsSince(start);
  if (leader)
    std::printf("checkpoint: saved step %lld to %s: %.1f MB in %.3f s "
                "(%.1f MB/s per writing rank)\n",
                (long long)progress.step, (dir + "/" + name).c_str(),
                total / 1e6, s,
                total / 1e6 / s / double(m_.shards * m_.tp));
}
