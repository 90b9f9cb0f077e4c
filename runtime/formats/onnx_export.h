//===- onnx_export.h - trained weights back into the ONNX graph -*- C++ -*-===//
#ifndef SHARDC_RUNTIME_FORMATS_ONNX_EXPORT_H
#define SHARDC_RUNTIME_FORMATS_ONNX_EXPORT_H

#include <string>
#include <vector>

namespace shardc::runtime {

struct ExportTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float *data;
};

/// Writes the model in `graphTemplate` (an ONNX file whose trained
/// initializers have no data) to `path` with `weights` as those
/// initializers' data (f32). With `externalData`, or when the model would
/// reach protobuf's 2 GB limit, the weights go to `path.data` beside it
/// (ONNX external data: location, offset, length). Throws
/// std::runtime_error naming the problem.
void exportOnnx(const std::string &graphTemplate, const std::string &path,
                const std::vector<ExportTensor> &weights,
                bool externalData = false);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_FORMATS_ONNX_EXPORT_H
