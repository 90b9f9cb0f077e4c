//===- onnx_export.cpp - trained weights back into the ONNX graph ---------===//
#include "runtime/formats/onnx_export.h"

#include <onnx/onnx_pb.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>

namespace {

/// Protobuf cannot serialize a message of 2 GB or more: past this size the
/// weights go to a file beside the model.
constexpr size_t kInlineLimit = size_t(INT32_MAX) - (size_t(64) << 20);

size_t byteSize(const shardc::runtime::ExportTensor &w) {
  size_t n = sizeof(float);
  for (int64_t d : w.shape)
    n *= size_t(d);
  return n;
}

std::string baseName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void writeAtomically(const std::string &path,
                     const std::function<bool(std::ostream &)> &write) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !write(out) || !out.flush())
      throw std::runtime_error(path + ": cannot write");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(path + ": cannot write");
}

} // namespace

void shardc::runtime::exportOnnx(const std::string &graphTemplate,
                                 const std::string &path,
                                 const std::vector<ExportTensor> &weights,
                                 bool externalData) {
  std::ifstream in(graphTemplate, std::ios::binary);
  onnx::ModelProto model;
  if (!in || !model.ParseFromIstream(&in))
    throw std::runtime_error(graphTemplate +
                             ": cannot read the model's graph template (it "
                             "is written next to the executable by shardc)");
  std::map<std::string, const ExportTensor *> byName;
  for (const ExportTensor &w : weights)
    byName[w.name] = &w;
  size_t filled = 0, weightBytes = 0;
  for (const ExportTensor &w : weights)
    weightBytes += byteSize(w);
  externalData |= model.ByteSizeLong() + weightBytes > kInlineLimit;
  // External data (the ONNX convention): one file beside the model, named
  // in each initializer with its byte offset and length.
  std::string dataName = baseName(path) + ".data";
  std::string dataPath = path.substr(0, path.size() - baseName(path).size()) + dataName;
  std::vector<const ExportTensor *> external;
  size_t offset = 0;
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
    auto it = byName.find(t.name());
    if (it == byName.end())
      continue;
    const ExportTensor &w = *it->second;
    t.clear_dims();
    for (int64_t d : w.shape)
      t.add_dims(d);
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.clear_float_data();
    t.clear_raw_data();
    t.clear_external_data();
    size_t bytes = byteSize(w);
    if (externalData) {
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      auto entry = [&](const char *key, const std::string &value) {
        onnx::StringStringEntryProto *e = t.add_external_data();
        e->set_key(key);
        e->set_value(value);
      };
      entry("location", dataName);
      entry("offset", std::to_string(offset));
      entry("length", std::to_string(bytes));
      external.push_back(&w);
      offset += bytes;
    } else {
      t.set_data_location(onnx::TensorProto::DEFAULT);
      t.set_raw_data(std::string(reinterpret_cast<const char *>(w.data), bytes));
    }
    ++filled;
  }
  if (filled != weights.size())
    throw std::runtime_error(graphTemplate + ": " +
                             std::to_string(weights.size() - filled) +
                             " trained weights have no initializer in the graph");
  if (model.ByteSizeLong() > kInlineLimit)
    throw std::runtime_error(path + ": the graph without its trained weights "
                                    "is over 2 GB (its constants)");
  if (externalData)
    writeAtomically(dataPath, [&](std::ostream &out) {
      for (const ExportTensor *w : external)
        out.write(reinterpret_cast<const char *>(w->data),
                  std::streamsize(byteSize(*w)));
      return bool(out);
    });
  writeAtomically(path, [&](std::ostream &out) {
    return model.SerializeToOstream(&out);
  });
}
