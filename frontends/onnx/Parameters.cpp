//===- Parameters.cpp - the exporter's parameter marks --------------------===//
#include "frontends/onnx/Parameters.h"

#include <google/protobuf/unknown_field_set.h>

using namespace shardc::onnx_import;

namespace {

constexpr const char *kKindKey = "pkg.torch.export.graph_signature.InputSpec.kind";
constexpr const char *kFoldedKey = "pkg.onnxscript.optimizer.folded_from";
constexpr const char *kSignatureKey = "pkg.torch.export.ExportedProgram.graph_signature";

/// The metadata_props entries (StringStringEntryProto: key 1, value 2) held
/// as unknown field `field` of `message`.
std::vector<std::pair<std::string, std::string>>
metadataOf(const google::protobuf::Message &message, int field) {
  std::vector<std::pair<std::string, std::string>> out;
  const google::protobuf::UnknownFieldSet &unknown =
      message.GetReflection()->GetUnknownFields(message);
  for (int k = 0; k < unknown.field_count(); ++k) {
    const google::protobuf::UnknownField &f = unknown.field(k);
    if (f.number() != field || f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(f.length_delimited()))
      out.emplace_back(entry.key(), entry.value());
  }
  return out;
}

/// The quoted strings of a Python list's repr: "['a', 'b']" -> a, b.
std::vector<std::string> quotedStrings(const std::string &s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\'' && s[i] != '"')
      continue;
    size_t end = s.find(s[i], i + 1);
    if (end == std::string::npos)
      break;
    out.push_back(s.substr(i + 1, end - i - 1));
    i = end;
  }
  return out;
}

} // namespace

std::vector<std::string>
ExporterMarks::foldedParameters(const std::string &name) const {
  std::vector<std::string> out;
  auto it = foldedFrom.find(name);
  if (it == foldedFrom.end())
    return out;
  for (const std::string &source : it->second)
    if (parameters.count(source))
      out.push_back(source);
  return out;
}

ExporterMarks shardc::onnx_import::readExporterMarks(const onnx::GraphProto &graph) {
  ExporterMarks marks;
  auto read = [&](const onnx::ValueInfoProto &v) {
    for (const auto &[key, value] : metadataOf(v, /*metadata_props=*/4)) {
      if (key == kKindKey) {
        marks.present = true;
        marks.kind[v.name()] = value;
        if (value == "PARAMETER")
          marks.parameters.insert(v.name());
      } else if (key == kFoldedKey) {
        marks.foldedFrom[v.name()] = quotedStrings(value);
      }
    }
  };
  for (const onnx::ValueInfoProto &v : graph.input())
    read(v);
  for (const onnx::ValueInfoProto &v : graph.value_info())
    read(v);
  // The signature names every parameter, also those the optimizer folded
  // away: lines "p_name: PARAMETER target='model.x.weight'".
  for (const auto &[key, value] : metadataOf(graph, /*metadata_props=*/16)) {
    if (key != kSignatureKey)
      continue;
    marks.present = true;
    size_t pos = 0;
    while ((pos = value.find(": PARAMETER target=", pos)) != std::string::npos) {
      pos += std::string(": PARAMETER target=").size();
      size_t end = value.find('\n', pos);
      std::vector<std::string> target = quotedStrings(value.substr(pos, end - pos));
      if (!target.empty())
        marks.parameters.insert(target[0]);
    }
  }
  return marks;
}
