//===- checkpoint_io.cpp - weights in and out of the backend's memory -----===//
#include "runtime/checkpoint_io.h"

#include <algorithm>
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

} // namespace

void shardc::runtime::loadParameters(const Manifest &m, const std::string &path,
                                     Backend &backend, char *params,
                                     int64_t shardIndex) {
  std::map<std::string, LoadedTensor> file = readSafetensors(path);
  std::vector<float> shard;
  for (const TensorSlot &p : m.params) {
    auto it = file.find(p.name);
    if (it == file.end())
      it = file.find(withoutPrefix(p.name));
    if (it == file.end())
      throw std::runtime_error(path + ": missing parameter '" + p.name + "'");
    const std::vector<int64_t> &full = p.sharded() ? p.globalShape : p.shape;
    if (it->second.shape != full)
      throw std::runtime_error(path + ": parameter '" + p.name +
                               "' has shape " + shapeString(it->second.shape) +
                               ", expected " + shapeString(full));
    // This rank's rows; padding rows stay zero.
    int64_t rows = p.shape[0], first = p.sharded() ? shardIndex * rows : 0;
    int64_t count = std::max<int64_t>(0, std::min(rows, full[0] - first));
    shard.assign(size_t(p.bytes / 4), 0.0f);
    std::memcpy(shard.data(), it->second.data.data() + first * p.rowSize(),
                count * p.rowSize() * 4);
    backend.copyToDevice(params + p.offset, shard.data(), p.bytes);
  }
}

std::vector<NamedTensor>
shardc::runtime::gatherTensors(const Manifest &m, const Mesh &mesh,
                               Backend &backend, const char *region,
                               const std::string &prefix,
                               std::vector<std::vector<float>> &storage) {
  storage.assign(2 * m.params.size(), {});
  std::vector<NamedTensor> tensors;
  for (size_t k = 0; k < m.params.size(); ++k) {
    const TensorSlot &p = m.params[k];
    int64_t offset =
        prefix.empty() ? p.offset : m.stateSlot(prefix + p.name).offset;
    std::vector<float> &local = storage[2 * k];
    local.resize(size_t(p.numel()));
    backend.copyToHost(local.data(), region + offset, p.numel() * 4);
    if (!p.sharded()) {
      tensors.push_back({p.name, p.shape, local.data()});
      continue;
    }
    std::vector<float> &full = storage[2 * k + 1];
    full.resize(size_t(p.numel() * mesh.shards));
    int rc = MPI_Gather(local.data(), int(p.numel()), MPI_FLOAT, full.data(),
                        int(p.numel()), MPI_FLOAT, 0, mesh.shardComm());
    if (rc != MPI_SUCCESS)
      throw std::runtime_error("gathering '" + p.name + "' failed");
    tensors.push_back({p.name, p.globalShape, full.data()});
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
