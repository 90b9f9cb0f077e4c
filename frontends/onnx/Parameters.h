//===- Parameters.h - which initializers of an ONNX file are trained -*- C++ -*-===//
//
// Private to frontends/onnx. torch.onnx.export's dynamo exporter marks each
// graph value that came from the module's state: PARAMETER, BUFFER or
// CONSTANT_TENSOR (value metadata `pkg.torch.export.graph_signature.
// InputSpec.kind`), and its optimizer marks what it folded at export time
// (`pkg.onnxscript.optimizer.folded_from`: the values it was computed
// from), e.g. a weight it transposed once into a new initializer.
//
// These are metadata fields of onnx 1.16+ protos (ValueInfoProto field 4,
// GraphProto field 16); the onnx library shardc links may predate them, so
// they are read from the messages' unknown fields.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTENDS_ONNX_PARAMETERS_H
#define SHARDC_FRONTENDS_ONNX_PARAMETERS_H

#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace shardc::onnx_import {

struct ExporterMarks {
  /// Whether the file has any parameter marks at all.
  bool present = false;
  /// Value name -> PARAMETER, BUFFER, CONSTANT_TENSOR or USER_INPUT.
  std::map<std::string, std::string> kind;
  /// The module's parameters by their state-dict names (the export's
  /// graph signature), present in the file or not.
  std::set<std::string> parameters;
  /// Value name -> the values the exporter's optimizer folded it from.
  std::map<std::string, std::vector<std::string>> foldedFrom;

  /// The parameters `name` was folded from (empty if none, or not folded).
  std::vector<std::string> foldedParameters(const std::string &name) const;
};

ExporterMarks readExporterMarks(const onnx::GraphProto &graph);

} // namespace shardc::onnx_import

#endif // SHARDC_FRONTENDS_ONNX_PARAMETERS_H
