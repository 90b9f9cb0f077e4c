//===- onnx_export.cpp - trained weights back into the ONNX graph ---------===//
#include "runtime/onnx_export.h"

#include <onnx/onnx_pb.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>

void shardc::runtime::exportOnnx(const std::string &graphTemplate,
                                 const std::string &path,
                                 const std::vector<ExportTensor> &weights) {
  std::ifstream in(graphTemplate, std::ios::binary);
  onnx::ModelProto model;
  if (!in || !model.ParseFromIstream(&in))
    throw std::runtime_error(graphTemplate +
                             ": cannot read the model's graph template (it "
                             "is written next to the executable by shardc)");
  std::map<std::string, const ExportTensor *> byName;
  for (const ExportTensor &w : weights)
    byName[w.name] = &w;
  size_t filled = 0;
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
    auto it = byName.find(t.name());
    if (it == byName.end())
      continue;
    const ExportTensor &w = *it->second;
    int64_t n = 1;
    t.clear_dims();
    for (int64_t d : w.shape) {
      t.add_dims(d);
      n *= d;
    }
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.clear_float_data();
    t.set_raw_data(std::string(reinterpret_cast<const char *>(w.data),
                               size_t(n) * sizeof(float)));
    ++filled;
  }
  if (filled != weights.size())
    throw std::runtime_error(graphTemplate + ": " +
                             std::to_string(weights.size() - filled) +
                             " trained weights have no initializer in the graph");
  if (model.ByteSizeLong() > size_t(INT32_MAX))
    throw std::runtime_error(path + ": the model is over 2 GB; writing it as "
                                    "external data is not supported yet");
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !model.SerializeToOstream(&out))
      throw std::runtime_error(path + ": cannot write the ONNX model");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(path + ": cannot write the ONNX model");
}
