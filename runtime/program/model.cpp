//===- model.cpp - manifest parsing and parameter initialization ----------===//
#include "runtime/program/model.h"
#include "runtime/abi/abi.h"
#include "runtime/math.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

using namespace shardc::runtime;
using nlohmann::json;

static TensorSlot parseSlot(const json &j) {
  TensorSlot s;
  s.name = j.at("name").get<std::string>();
  s.dtype = j.at("dtype").get<std::string>();
  s.fileDtype = j.value("file_dtype", std::string());
  s.shape = j.at("shape").get<std::vector<int64_t>>();
  s.offset = j.at("offset").get<int64_t>();
  s.bytes = j.at("bytes").get<int64_t>();
  s.init = j.value("init", std::string("normal"));
  s.std = j.value("std", 0.0);
  if (j.contains("global_shape"))
    s.globalShape = j.at("global_shape").get<std::vector<int64_t>>();
  s.group = j.value("group", int64_t(-1));
  s.tpDim = j.value("tp_dim", int64_t(-1));
  s.tpBlocks = j.value("tp_blocks", int64_t(1));
  return s;
}

Manifest Manifest::parse(const char *text) {
  try {
    json j = json::parse(text);
    Manifest m;
    int64_t format = j.value("format", int64_t(0));
    if (format != shardc::abi::kFormatVersion)
      throw std::runtime_error(
          "the compiled program has format " + std::to_string(format) +
          " but this runtime reads format " +
          std::to_string(shardc::abi::kFormatVersion) +
          ": recompile it with the shardc of this runtime");
    const json &model = j.at("model");
    m.family = model.value("family", std::string("?"));
    m.source = model.value("source", std::string("?"));
    m.vocabSize = model.at("vocab_size").get<int64_t>();
    m.microBatch = model.at("micro_batch").get<int64_t>();
    m.seqLen = model.at("seq_len").get<int64_t>();
    m.numLayers = model.value("num_layers", int64_t(0));
    m.initFile = model.value("init_file", std::string());
    m.graphFile = model.value("graph_file", std::string());
    m.hfConfig = model.value("hf_config", std::string());
    for (const json &p : j.at("params"))
      m.params.push_back(parseSlot(p));
    for (const json &p : j.at("state"))
      m.state.push_back(parseSlot(p));
    for (const json &p : j.at("io"))
      m.io.push_back(parseSlot(p));
    m.entries = j.at("entries").get<std::vector<std::string>>();
    if (j.contains("mesh")) {
      auto mesh = j.at("mesh").get<std::vector<int64_t>>();
      m.replicas = mesh.at(0);
      m.shards = mesh.at(1);
      m.tp = mesh.size() > 2 ? mesh.at(2) : 1;
    }
    m.paramBytes = j.at("param_bytes").get<int64_t>();
    m.stateBytes = j.at("state_bytes").get<int64_t>();
    m.ioBytes = j.at("io_bytes").get<int64_t>();
    m.arenaBytes = j.at("arena_bytes").get<int64_t>();
    m.constantsBytes = j.value("constants_bytes", int64_t(0));
    m.optimizer = model.value("optimizer", std::string());
    m.target = j.value("target", std::string("cpu"));
    m.offload = j.value("offload", std::string(shardc::abi::kOffloadNone));
    m.allowTf32 = j.value(shardc::abi::kManifestAllowTf32, false);
    m.computeDtype =
        j.value(shardc::abi::kManifestComputeDtype, std::string("f32"));
    m.tpWholeTokens = j.value(shardc::abi::kManifestTpWholeTokens, false);
    if (m.offload != shardc::abi::kOffloadNone &&
        m.offload != shardc::abi::kOffloadCpu)
      throw std::runtime_error("the manifest's offload '" + m.offload +
                               "' is neither 'none' nor 'cpu'");
    // Per entry its arena; an entry marked "host" runs on the host, over the
    // host arena (the largest of theirs).
    if (j.contains("arenas"))
      for (const json &a : j.at("arenas")) {
        if (a.contains("entry") && a.contains("flops"))
          m.entryFlops.push_back({a.at("entry").get<std::string>(),
                                  a.at("flops").get<int64_t>()});
        if (a.value("host", false)) {
          m.hostEntries.push_back(a.at("entry").get<std::string>());
          m.hostArenaBytes =
              std::max(m.hostArenaBytes, a.at("arena_bytes").get<int64_t>());
        }
      }
    if (!m.hostEntries.empty() && !m.offloaded())
      throw std::runtime_error("the manifest runs entries on the host without "
                               "--offload=cpu");
    // The runtime multiplies shapes and adds offsets: each slot's size is
    // its shape times its element size, and lies inside its region.
    auto check = [](const std::vector<TensorSlot> &slots, int64_t regionBytes,
                    const char *region) {
      if (regionBytes < 0 || regionBytes > shardc::abi::kMaxRegionBytes)
        throw std::runtime_error(std::string("the ") + region + " region has " +
                                 std::to_string(regionBytes) + " bytes");
      for (const TensorSlot &s : slots) {
        int64_t elementBytes =
            shardc::abi::dtypeBytes(shardc::abi::dtypeCode(s.dtype));
        int64_t n = elementBytes == 0 ? -1 // an unknown dtype
                                      : shardc::abi::checkedSize(s.shape, elementBytes);
        if (n != s.bytes || s.offset < 0 || s.offset > regionBytes - s.bytes)
          throw std::runtime_error(std::string(region) + " slot '" + s.name +
                                   "' (" + s.dtype + " " + shapeString(s.shape) +
                                   ", " + std::to_string(s.bytes) + " bytes at " +
                                   std::to_string(s.offset) +
                                   ") does not fit its shape or its region");
      }
    };
    check(m.params, m.paramBytes, "parameter");
    check(m.state, m.stateBytes, "state");
    check(m.io, m.ioBytes, "io");
    return m;
  } catch (const json::exception &e) {
    throw std::runtime_error(std::string("malformed model manifest: ") +
                             e.what());
  }
}

int64_t Manifest::flopsOf(const std::string &entry) const {
  for (const auto &[name, flops] : entryFlops)
    if (name == entry)
      return flops;
  return 0;
}

bool Manifest::runsOnHost(const std::string &entry) const {
  return std::find(hostEntries.begin(), hostEntries.end(), entry) !=
         hostEntries.end();
}

std::string shardc::runtime::shapeString(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

/// The dtype code of `slot`'s file: its own dtype, or a float file type of
/// an f32 slot.
static int64_t fileDtypeCode(const TensorSlot &slot) {
  if (!slot.convertsFile())
    return shardc::abi::dtypeCode(slot.dtype);
  int64_t code = shardc::abi::dtypeCode(slot.fileDtype);
  if (slot.dtype != "f32" ||
      (code != shardc::abi::kF64 && code != shardc::abi::kF16 && code != shardc::abi::kBF16))
    throw std::runtime_error("io slot '" + slot.name + "' of " + slot.dtype +
                             " has a file of " + slot.fileDtype +
                             "; the runtime converts f32 slots from and to "
                             "f64, f16 and bf16 files only");
  return code;
}

int64_t shardc::runtime::fileBytes(const TensorSlot &slot) {
  int64_t code = fileDtypeCode(slot);
  if (code == shardc::abi::dtypeCode(slot.dtype))
    return slot.bytes;
  return slot.numel() * shardc::abi::dtypeBytes(code);
}

void shardc::runtime::decodeFile(const TensorSlot &slot, const char *file,
                                 float *values) {
  int64_t code = fileDtypeCode(slot), n = slot.numel();
  for (int64_t k = 0; k < n; ++k) {
    if (code == shardc::abi::kF64) {
      double v;
      std::memcpy(&v, file + 8 * k, 8);
      values[k] = float(v);
    } else {
      uint16_t h;
      std::memcpy(&h, file + 2 * k, 2);
      values[k] = code == shardc::abi::kF16 ? halfToFloat(h) : bf16ToFloat(h);
    }
  }
}

void shardc::runtime::encodeFile(const TensorSlot &slot, const float *values,
                                 char *file) {
  int64_t code = fileDtypeCode(slot), n = slot.numel();
  for (int64_t k = 0; k < n; ++k) {
    if (code == shardc::abi::kF64) {
      double v = values[k];
      std::memcpy(file + 8 * k, &v, 8);
    } else {
      uint16_t h = code == shardc::abi::kF16 ? floatToHalf(values[k])
                                     : floatToBf16(values[k]);
      std::memcpy(file + 2 * k, &h, 2);
    }
  }
}

static const TensorSlot &find(const std::vector<TensorSlot> &slots,
                              const std::string &name, const char *what) {
  for (const TensorSlot &s : slots)
    if (s.name == name)
      return s;
  throw std::runtime_error(std::string("the compiled model has no ") + what +
                           " '" + name + "'");
}

const TensorSlot &Manifest::ioSlot(const std::string &name) const {
  return find(io, name, "input or output");
}
const TensorSlot &Manifest::stateSlot(const std::string &name) const {
  return find(state, name, "state");
}
bool Manifest::hasState(const std::string &name) const {
  for (const TensorSlot &s : state)
    if (s.name == name)
      return true;
  return false;
}

int64_t Manifest::numParams() const {
  int64_t n = 0;
  for (const TensorSlot &p : params)
    n += p.numel();
  return n;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t shardc::runtime::streamKey(uint64_t seed, const std::string &name) {
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (unsigned char c : name)
    h = (h ^ c) * 1099511628211ull;
  return splitmix64(splitmix64(seed) ^ h);
}

double shardc::runtime::counterUniform(uint64_t key, uint64_t counter) {
  uint64_t bits = splitmix64(key ^ splitmix64(counter));
  // 53 random bits, shifted off zero: a uniform in (0, 1).
  return (double(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double shardc::runtime::counterNormal(uint64_t key, uint64_t counter) {
  double u1 = counterUniform(key, 2 * counter);
  double u2 = counterUniform(key, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::vector<int64_t> shardc::runtime::wholeShape(const TensorSlot &p,
                                                 int64_t tp) {
  std::vector<int64_t> shape = p.sharded() ? p.globalShape : p.shape;
  if (p.tpDim >= 0 && size_t(p.tpDim) < shape.size())
    shape[size_t(p.tpDim)] *= tp;
  return shape;
}

int64_t shardc::runtime::wholeRowElements(const TensorSlot &p, int64_t tp) {
  std::vector<int64_t> whole = wholeShape(p, tp);
  int64_t elements = 1;
  for (size_t d = 1; d < whole.size(); ++d)
    elements *= whole[d];
  return elements;
}

int64_t shardc::runtime::tpWholeIndex(const TensorSlot &p, int64_t tp,
                                      int64_t tpIndex, int64_t k) {
  if (p.tpDim < 0 || tp == 1)
    return k;
  const std::vector<int64_t> &part = p.sharded() ? p.globalShape : p.shape;
  // k = (outer * part[d] + mid) * inner + in; the whole tensor has
  // part[d] * tp along d, this rank's part starting at tpIndex * part[d].
  int64_t inner = 1;
  for (size_t d = size_t(p.tpDim) + 1; d < part.size(); ++d)
    inner *= part[d];
  // Along d, the part is `blocks` blocks of `block`; the whole tensor's
  // blocks are tp times longer, this rank's part of each at tpIndex.
  int64_t along = part[size_t(p.tpDim)];
  int64_t blocks = std::max<int64_t>(1, p.tpBlocks), block = along / blocks;
  int64_t in = k % inner, mid = (k / inner) % along, outer = k / (inner * along);
  int64_t wholeMid = (mid / block) * block * tp + tpIndex * block + mid % block;
  return ((outer * along * tp) + wholeMid) * inner + in;
}

std::pair<int64_t, int64_t> shardc::runtime::tpWholeRows(const TensorSlot &p,
                                                        int64_t tp,
                                                        int64_t tpIndex,
                                                        int64_t begin,
                                                        int64_t end) {
  if (begin >= end)
    return {0, 0};
  int64_t rowElements = wholeRowElements(p, tp);
  int64_t lo = tpWholeIndex(p, tp, tpIndex, begin);
  int64_t hi = tpWholeIndex(p, tp, tpIndex, end - 1);
  return {lo / rowElements, hi / rowElements + 1};
}

void shardc::runtime::tpTakePart(const TensorSlot &p, int64_t tp,
                                 int64_t tpIndex, int64_t begin, int64_t end,
                                 const float *whole, int64_t wholeBegin,
                                 float *out) {
  for (int64_t e = begin; e < end; ++e)
    out[e - begin] = whole[tpWholeIndex(p, tp, tpIndex, e) - wholeBegin];
}

void shardc::runtime::initParameters(const Manifest &m, uint64_t seed,
                                     char *params, int64_t shardIndex,
                                     int64_t tpIndex) {
  for (const TensorSlot &p : m.params) {
    if (p.init == "file")
      continue; // loaded from the model's initial weights by the trainer
    if (p.init != "normal" && p.init != "zeros" && p.init != "ones")
      throw std::runtime_error("parameter '" + p.name +
                               "' has unknown init '" + p.init + "'");
    float *data = reinterpret_cast<float *>(params + p.offset);
    // Local element k is global element first + k; the generator is indexed
    // by the whole tensor's element, so every mesh draws the same weights.
    int64_t rows = p.shape.empty() ? 1 : p.shape[0];
    int64_t globalRows = p.sharded() ? p.globalShape[0] : rows;
    int64_t rowSize = p.rowSize();
    int64_t firstRow = p.sharded() ? shardIndex * rows : 0;
    uint64_t key = streamKey(seed, p.name);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t g = firstRow + r;
      for (int64_t c = 0; c < rowSize; ++c) {
        float v = 0.0f; // padding rows
        if (g < globalRows)
          v = p.init == "ones"    ? 1.0f
              : p.init == "zeros" ? 0.0f
                                  : float(p.std *
                                          counterNormal(
                                              key, uint64_t(tpWholeIndex(
                                                       p, m.tp, tpIndex,
                                                       g * rowSize + c))));
        data[r * rowSize + c] = v;
      }
    }
  }
}
