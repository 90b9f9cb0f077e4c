//===- checkpoint_io.cpp - weights in and out of the backend's memory -----===//
#include "runtime/formats/checkpoint_io.h"
#include "runtime/formats/hf_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <unistd.h>

using namespace shardc::runtime;

namespace {

/// The checkpoint name of a parameter without its model prefix, if any.
std::string withoutPrefix(const std::string &name) {
  for (const char *prefix : {"transformer.", "model."})
    if (name.rfind(prefix, 0) == 0)
      return name.substr(std::strlen(prefix));
  return name;
}

/// Rows [first, first + count) of tp rank `tpIndex`'s part of `p` (rows
/// of the part, FSDP's global shape), read from the whole tensor `key`:
/// the span of whole rows that holds them, then the part's elements.
void readPartRows(const SafetensorsFile &f, const std::string &key,
                  const TensorSlot &p, int64_t tp, int64_t tpIndex,
                  int64_t first, int64_t count, float *out) {
  if (p.tpDim < 0 || tp == 1) {
    f.readF32(key, first * p.rowSize(), count * p.rowSize(), out);
    return;
  }
  int64_t begin = first * p.rowSize(), end = (first + count) * p.rowSize();
  auto [lo, hi] = tpWholeRows(p, tp, tpIndex, begin, end);
  int64_t rowElements = wholeRowElements(p, tp);
  std::vector<float> rows(size_t((hi - lo) * rowElements));
  f.readF32(key, lo * rowElements, (hi - lo) * rowElements, rows.data());
  tpTakePart(p, tp, tpIndex, begin, end, rows.data(), lo * rowElements, out);
}

} // namespace

void shardc::runtime::loadParameters(const Manifest &m, const std::string &path,
                                     Backend &backend, char *params,
                                     int64_t shardIndex, bool allowNonfinite,
                                     int64_t tpIndex) {
  HfCheckpoint file(path);
  const std::string &where = file.where();
  // Every parameter is found and its shape checked before any is read.
  std::vector<std::pair<const SafetensorsFile *, std::string>> found;
  for (const TensorSlot &p : m.params) {
    std::string key = p.name;
    const SafetensorsFile *f = file.find(key);
    if (!f)
      f = file.find(key = withoutPrefix(p.name));
    if (!f)
      throw std::runtime_error(where + ": missing parameter '" + p.name + "'");
    const std::vector<int64_t> full = wholeShape(p, m.tp);
    const SafetensorsEntry &e = *f->find(key);
    if (e.shape != full)
      throw std::runtime_error(f->path() + ": parameter '" + p.name +
                               "' has shape " + shapeString(e.shape) +
                               ", expected " + shapeString(full));
    found.push_back({f, key});
  }
  // This rank's rows only; padding rows stay zero.
  std::vector<float> shard;
  for (size_t k = 0; k < m.params.size(); ++k) {
    const TensorSlot &p = m.params[k];
    const std::vector<int64_t> &full = p.sharded() ? p.globalShape : p.shape;
    int64_t rows = p.shape.empty() ? 1 : p.shape[0];
    int64_t globalRows = full.empty() ? 1 : full[0];
    int64_t first = p.sharded() ? shardIndex * rows : 0;
    int64_t count = std::max<int64_t>(0, std::min(rows, globalRows - first));
    shard.assign(size_t(p.bytes / 4), 0.0f);
    if (count > 0)
      readPartRows(*found[k].first, found[k].second, p, m.tp, tpIndex, first,
                   count, shard.data());
    // The one pass over what this rank read: no NaN or infinity.
    int64_t nonfinite = 0, read = count * p.rowSize();
    for (int64_t e = 0; e < read; ++e)
      nonfinite += !std::isfinite(shard[size_t(e)]);
    if (nonfinite > 0 && !allowNonfinite)
      throw std::runtime_error(
          found[k].first->path() + ": tensor '" + found[k].second + "' holds " +
          std::to_string(nonfinite) + " non-finite value" +
          (nonfinite == 1 ? "" : "s") + " (NaN or infinity)" +
          (p.sharded() ? " in the rows this rank reads" : "") +
          "; --allow-nonfinite-init loads it anyway");
    backend.copyToDevice(params + p.offset, shard.data(), p.bytes);
  }
}

std::vector<float> shardc::runtime::gatherParameter(const TensorSlot &p,
                                                   const Mesh &mesh,
                                                   Backend &backend,
                                                   const char *src,
                                                   int64_t rootShard,
                                                   int64_t rootTp) {
  std::vector<float> local(size_t(p.numel()));
  backend.copyToHost(local.data(), src, p.numel() * 4);
  if (!p.sharded() && (p.tpDim < 0 || mesh.tp == 1))
    return local;
  int64_t elements = 1;
  for (int64_t d : p.sharded() ? p.globalShape : p.shape)
    elements *= d;
  // The root of each shard communicator (of a replica and tp index).
  const bool root = mesh.shardIndex() == rootShard;
  std::vector<float> full(root ? size_t(p.numel() * mesh.shards) : 0);
  if (!mesh.gatherShards(local.data(), p.numel(), full.data(), rootShard))
    throw std::runtime_error("gathering '" + p.name + "' failed");
  full.resize(root ? size_t(elements) : 0); // padding rows dropped
  if (p.tpDim < 0 || mesh.tp == 1 || !root)
    return full;
  // The tp parts of shard `rootShard`, joined on tp rank `rootTp`.
  std::vector<float> parts(mesh.tpIndex() == rootTp ? size_t(elements * mesh.tp)
                                                    : 0);
  if (!mesh.gatherTp(full.data(), elements, parts.data(), rootTp))
    throw std::runtime_error("gathering '" + p.name + "' over tp failed");
  std::vector<float> whole(parts.size());
  for (int64_t t = 0; t < int64_t(parts.size()) / elements; ++t)
    for (int64_t k = 0; k < elements; ++k)
      whole[size_t(tpWholeIndex(p, mesh.tp, t, k))] = parts[size_t(t * elements + k)];
  return whole;
}

std::vector<NamedTensor>
shardc::runtime::gatherTensors(const Manifest &m, const Mesh &mesh,
                               Backend &backend, const char *region,
                               const std::string &prefix,
                               std::vector<std::vector<float>> &storage) {
  storage.assign(m.params.size(), {});
  std::vector<NamedTensor> tensors;
  for (size_t k = 0; k < m.params.size(); ++k) {
    const TensorSlot &p = m.params[k];
    int64_t offset =
        prefix.empty() ? p.offset : m.stateSlot(prefix + p.name).offset;
    storage[k] = gatherParameter(p, mesh, backend, region + offset);
    tensors.push_back({p.name, wholeShape(p, m.tp), storage[k].data()});
  }
  return tensors;
}

void shardc::runtime::saveTensors(const Manifest &m, const Mesh &mesh,
                                  Backend &backend, const std::string &path,
                                  const char *region,
                                  const std::string &prefix) {
  std::vector<std::vector<float>> storage;
  std::vector<NamedTensor> tensors =
      gatherTensors(m, mesh, backend, region, prefix, storage);
  if (mesh.rank == 0)
    writeSafetensors(path, tensors, {{"format", "pt"}, {"producer", "shardc"}});
}

std::string shardc::runtime::besideExecutable(const std::string &name) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return name;
  std::string exe(buf, size_t(n));
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? name : exe.substr(0, slash + 1) + name;
}
