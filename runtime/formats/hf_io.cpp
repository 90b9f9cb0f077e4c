//===- hf_io.cpp - Hugging Face checkpoints in and out --------------------===//
#include "runtime/formats/hf_io.h"
#include "runtime/formats/checkpoint_io.h"
#include "runtime/formats/files.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>
#include <stdexcept>

using namespace shardc::runtime;
using nlohmann::json;

int64_t shardc::runtime::parseByteSize(const std::string &flag,
                                       const std::string &text) {
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) ||
          text[digits] == '.'))
    ++digits;
  std::string unit = text.substr(digits);
  for (char &ch : unit)
    ch = char(std::toupper(static_cast<unsigned char>(ch)));
  static const std::pair<const char *, double> units[] = {
      {"", 1},          {"B", 1},          {"KB", 1e3},
      {"MB", 1e6},      {"GB", 1e9},       {"TB", 1e12},
      {"KIB", 1024.0},  {"MIB", 1048576.0}, {"GIB", 1073741824.0}};
  double scale = 0;
  for (const auto &[name, factor] : units)
    if (unit == name)
      scale = factor;
  double value = 0;
  try {
    value = digits ? std::stod(text.substr(0, digits)) : -1;
  } catch (const std::exception &) {
    value = -1;
  }
  if (!scale || !(value > 0) || value * scale > 1e18)
    throw std::runtime_error(flag + " expects a size such as 5GB, 500MB or "
                             "1048576, got '" + text + "'");
  return int64_t(value * scale);
}

int64_t shardc::runtime::exportHf(const Manifest &m, const Mesh &mesh,
                                  Backend &backend, const char *params,
                                  const std::string &dir,
                                  int64_t maxShardBytes) {
  const bool leader = mesh.rank == 0;
  // Files as save_pretrained splits them: in order, a new file when the
  // next tensor would pass the limit.
  std::vector<std::vector<const TensorSlot *>> plan(1);
  int64_t current = 0, total = 0;
  for (const TensorSlot &p : m.params) {
    std::vector<int64_t> shape = wholeShape(p, m.tp);
    int64_t bytes = 4;
    for (int64_t d : shape)
      bytes *= d;
    if (!plan.back().empty() && current + bytes > maxShardBytes) {
      plan.emplace_back();
      current = 0;
    }
    plan.back().push_back(&p);
    current += bytes;
    total += bytes;
  }
  if (leader)
    makeDirectories(dir);
  const size_t n = plan.size();
  std::vector<std::string> names;
  for (size_t k = 0; k < n; ++k) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", k + 1,
                  n);
    names.push_back(n == 1 ? std::string(kHfSingleFile) : std::string(buf));
  }
  json weightMap = json::object();
  for (size_t k = 0; k < n; ++k) {
    // This file's tensors, gathered one by one onto rank 0.
    std::vector<std::vector<float>> full;
    std::vector<NamedTensor> tensors;
    for (const TensorSlot *p : plan[k]) {
      std::vector<int64_t> shape = wholeShape(*p, m.tp);
      full.push_back(gatherParameter(*p, mesh, backend, params + p->offset));
      tensors.push_back({p->name, shape, nullptr});
      weightMap[p->name] = names[k];
    }
    if (!leader)
      continue;
    for (size_t t = 0; t < tensors.size(); ++t)
      tensors[t].data = full[t].data();
    writeSafetensors(dir + "/" + names[k], tensors, {{"format", "pt"}});
  }
  if (!leader)
    return int64_t(n);
  if (n > 1)
    writeFileDurably(dir + "/" + kHfIndexFile,
                     json({{"metadata", {{"total_size", total}}},
                           {"weight_map", weightMap}})
                             .dump(2) +
                         "\n");
  // An export of another split left in DIR would shadow or confuse this
  // one (transformers reads model.safetensors before an index).
  std::set<std::string> written(names.begin(), names.end());
  if (n > 1)
    written.insert(kHfIndexFile);
  for (const std::string &entry : listDirectory(dir))
    if ((entry == kHfSingleFile || entry == kHfIndexFile ||
         (entry.rfind("model-", 0) == 0 && endsWith(entry, ".safetensors"))) &&
        !written.count(entry))
      removeTree(dir + "/" + entry);
  if (!m.hfConfig.empty()) {
    json config;
    try {
      config = json::parse(m.hfConfig);
    } catch (const json::exception &e) {
      throw std::runtime_error(std::string("--export-hf: the compiled "
                                           "config.json is not JSON: ") +
                               e.what());
    }
    if (!config.contains("architectures")) {
      std::string type = config.value("model_type", std::string());
      const char *arch = type == "gpt2"      ? "GPT2LMHeadModel"
                         : type == "mistral" ? "MistralForCausalLM"
                         : type == "qwen2"   ? "Qwen2ForCausalLM"
                                             : "LlamaForCausalLM";
      config["architectures"] = {arch};
    }
    writeFileDurably(dir + "/config.json", config.dump(2) + "\n");
  } else {
    std::printf("export-hf: no config.json written: the model was not "
                "compiled from a config.json or preset\n");
  }
  return int64_t(n);
}
