//===- checkpoint.cpp - what a checkpoint holds; finding one -------------===//
//
// The tensors of a checkpoint, the hashes that say which runs and programs
// it fits, and where the one to resume from is. Saving is in
// checkpoint_save.cpp, loading in checkpoint_load.cpp.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/checkpoint.h"
#include "runtime/formats/checkpoint_format.h"
#include "runtime/formats/files.h"
#include "runtime/runtime.h"
#include "runtime/program/program.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>

using namespace shardc;
using namespace shardc::runtime;
using namespace shardc::runtime::checkpoint_format;

std::string checkpoint_format::hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)v);
  return buf;
}

std::string checkpoint_format::stepName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s%08lld", kStepPrefix, (long long)step);
  return buf;
}

int64_t checkpoint_format::stepOf(const std::string &name) {
  if (name.rfind(kStepPrefix, 0) != 0)
    return -1;
  std::string digits = name.substr(std::strlen(kStepPrefix));
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoll(digits);
}

std::string checkpoint_format::shardFileName(int64_t shard, int64_t shards) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "shard-%05lld-of-%05lld.safetensors",
                (long long)shard, (long long)shards);
  return buf;
}

std::vector<std::string> checkpoint_format::chunkHashes(const char *data,
                                                        uint64_t bytes) {
  std::vector<std::string> out;
  for (uint64_t at = 0; at < bytes; at += kChunkBytes)
    out.push_back(
        hex64(XXH3_64bits(data + at, std::min(kChunkBytes, bytes - at))));
  return out;
}

double
checkpoint_format::secondsSince(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

std::pair<int64_t, int64_t>
checkpoint_format::shardRows(const CheckpointTensor &t, int64_t index) {
  int64_t global = t.partRows;
  if (!t.sharded)
    return {0, global};
  int64_t first = std::min(global, index * t.localRows);
  return {first, std::min(global, first + t.localRows)};
}

std::vector<CheckpointTensor>
shardc::runtime::checkpointTensors(const Manifest &m) {
  std::vector<CheckpointTensor> out;
  std::map<std::string, const TensorSlot *> byName;
  auto describe = [&m](CheckpointTensor &t, const TensorSlot &shape) {
    const std::vector<int64_t> &part =
        shape.sharded() ? shape.globalShape : shape.shape;
    t.slot = &shape;
    t.globalShape = wholeShape(shape, m.tp);
    t.storedRowElements = wholeRowElements(shape, m.tp);
    t.partRows = part.empty() ? 1 : part[0];
    t.sharded = shape.sharded();
    t.tpSplit = m.tp > 1 && shape.tpDim >= 0;
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
    describe(t,
             p != byName.end() && p->second->shape == s.shape ? *p->second : s);
    out.push_back(std::move(t));
  }
  return out;
}

std::string shardc::runtime::programFingerprint(const Manifest &m) {
  XXH3_state_t *state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, shardc_manifest, std::strlen(shardc_manifest));
  int64_t regionBytes[shardc::abi::kNumRegions] = {
      m.paramBytes, m.stateBytes, m.ioBytes, m.arenaBytes, m.constantsBytes};
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
      throw std::runtime_error(latest + ": names " + name + ", which has no " +
                               kMetadata);
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
