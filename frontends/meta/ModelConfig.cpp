//===- ModelConfig.cpp - transformer configs and presets ------------------===//
#include "frontends/meta/ModelConfig.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace shardc::meta;
using llvm::Expected;
using llvm::StringRef;

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The presets as config.json texts, so that they take the same path (and
/// the same checks) as a user's file.
const std::vector<std::pair<std::string, std::string>> &presets() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"tiny", R"({"model_type": "gpt2", "vocab_size": 50257, "n_embd": 64,
                   "n_layer": 2, "n_head": 4, "n_positions": 64,
                   "layer_norm_epsilon": 1e-5,
                   "activation_function": "gelu_new"})"},
      {"gpt2-124m", R"({"model_type": "gpt2", "vocab_size": 50257,
                        "n_embd": 768, "n_layer": 12, "n_head": 12,
                        "n_positions": 1024, "layer_norm_epsilon": 1e-5,
                        "activation_function": "gelu_new"})"},
      {"llama3-8b", R"({"model_type": "llama", "vocab_size": 128256,
                        "hidden_size": 4096, "num_hidden_layers": 32,
                        "num_attention_heads": 32, "num_key_value_heads": 8,
                        "intermediate_size": 14336,
                        "max_position_embeddings": 8192,
                        "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
                        "tie_word_embeddings": false,
                        "hidden_act": "silu"})"},
  };
  return table;
}

/// Reads typed fields of a config object, naming the file and key in errors.
class Reader {
public:
  Reader(const llvm::json::Object &obj, StringRef origin)
      : obj(obj), origin(origin.str()) {}

  Expected<int64_t> positive(StringRef key, std::optional<int64_t> fallback = {}) {
    const llvm::json::Value *v = obj.get(key);
    if (!v || v->kind() == llvm::json::Value::Null) {
      if (fallback)
        return *fallback;
      return error(origin + ": missing '" + key + "'");
    }
    std::optional<int64_t> i = v->getAsInteger();
    if (!i || *i <= 0)
      return error(origin + ": '" + key + "' must be a positive integer");
    return *i;
  }

  Expected<double> number(StringRef key, double fallback) {
    const llvm::json::Value *v = obj.get(key);
    if (!v || v->kind() == llvm::json::Value::Null)
      return fallback;
    std::optional<double> d = v->getAsNumber();
    if (!d || !(*d > 0))
      return error(origin + ": '" + key + "' must be a positive number");
    return *d;
  }

  Expected<bool> boolean(StringRef key, bool fallback) {
    const llvm::json::Value *v = obj.get(key);
    if (!v)
      return fallback;
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      return error(origin + ": '" + key + "' must be true or false");
    return *b;
  }

  Expected<std::string> string(StringRef key, StringRef fallback) {
    const llvm::json::Value *v = obj.get(key);
    if (!v)
      return fallback.str();
    std::optional<StringRef> s = v->getAsString();
    if (!s)
      return error(origin + ": '" + key + "' must be a string");
    return s->str();
  }

  const llvm::json::Object &obj;
  std::string origin;
};

#define TRY_ASSIGN(lhs, expr)                                                  \
  do {                                                                         \
    auto value_ = (expr);                                                      \
    if (!value_)                                                               \
      return value_.takeError();                                               \
    lhs = *value_;                                                             \
  } while (false)

llvm::Error readGPT2(Reader &r, ModelConfig &c) {
  c.family = Family::GPT2;
  TRY_ASSIGN(c.vocabSize, r.positive("vocab_size"));
  TRY_ASSIGN(c.hiddenSize, r.positive("n_embd"));
  TRY_ASSIGN(c.numLayers, r.positive("n_layer"));
  TRY_ASSIGN(c.numHeads, r.positive("n_head"));
  TRY_ASSIGN(c.maxPositions, r.positive("n_positions", int64_t(1024)));
  TRY_ASSIGN(c.intermediateSize, r.positive("n_inner", 4 * c.hiddenSize));
  TRY_ASSIGN(c.normEps, r.number("layer_norm_epsilon", 1e-5));
  TRY_ASSIGN(c.tieEmbeddings, r.boolean("tie_word_embeddings", true));
  TRY_ASSIGN(c.activation, r.string("activation_function", "gelu_new"));
  c.numKVHeads = c.numHeads;
  if (c.activation != "gelu_new" && c.activation != "gelu" &&
      c.activation != "gelu_pytorch_tanh")
    return error(r.origin + ": activation_function '" + c.activation +
                 "' is not supported (gelu_new, gelu_pytorch_tanh, gelu)");
  return llvm::Error::success();
}

llvm::Error readLlama(Reader &r, ModelConfig &c) {
  c.family = Family::Llama;
  TRY_ASSIGN(c.vocabSize, r.positive("vocab_size"));
  TRY_ASSIGN(c.hiddenSize, r.positive("hidden_size"));
  TRY_ASSIGN(c.numLayers, r.positive("num_hidden_layers"));
  TRY_ASSIGN(c.numHeads, r.positive("num_attention_heads"));
  TRY_ASSIGN(c.numKVHeads, r.positive("num_key_value_heads", c.numHeads));
  TRY_ASSIGN(c.intermediateSize, r.positive("intermediate_size"));
  TRY_ASSIGN(c.maxPositions, r.positive("max_position_embeddings", int64_t(2048)));
  TRY_ASSIGN(c.normEps, r.number("rms_norm_eps", 1e-6));
  TRY_ASSIGN(c.ropeTheta, r.number("rope_theta", 10000.0));
  TRY_ASSIGN(c.tieEmbeddings, r.boolean("tie_word_embeddings", false));
  TRY_ASSIGN(c.activation, r.string("hidden_act", "silu"));
  if (c.activation != "silu")
    return error(r.origin + ": hidden_act '" + c.activation +
                 "' is not supported (silu)");
  if (const llvm::json::Value *v = r.obj.get("rope_scaling"))
    if (v->kind() != llvm::json::Value::Null)
      return error(r.origin + ": rope_scaling is not supported yet");
  for (StringRef key : {"attention_bias", "mlp_bias"}) {
    bool bias;
    TRY_ASSIGN(bias, r.boolean(key, false));
    if (bias)
      return error(r.origin + ": '" + key + "' true is not supported yet");
  }
  if (c.numHeads % c.numKVHeads != 0)
    return error(r.origin + ": num_attention_heads " +
                 llvm::Twine(c.numHeads) +
                 " is not a multiple of num_key_value_heads " +
                 llvm::Twine(c.numKVHeads));
  return llvm::Error::success();
}

} // namespace

const std::vector<std::string> &shardc::meta::presetNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto &[name, json] : presets())
      out.push_back(name);
    return out;
  }();
  return names;
}

Expected<ModelConfig> shardc::meta::parseConfigJSON(StringRef text,
                                                    StringRef origin) {
  Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return error(origin + ": invalid JSON: " +
                 llvm::toString(parsed.takeError()));
  const llvm::json::Object *obj = parsed->getAsObject();
  if (!obj)
    return error(origin + ": expected a JSON object");
  Reader r(*obj, origin);
  ModelConfig c;
  c.source = origin.str();
  c.json = text.str();
  std::optional<StringRef> type = obj->getString("model_type");
  if (!type)
    return error(origin + ": missing 'model_type' (gpt2 or llama)");
  llvm::Error err = *type == "gpt2"    ? readGPT2(r, c)
                    : *type == "llama" ? readLlama(r, c)
                                       : error(origin + ": model_type '" +
                                               *type +
                                               "' is not supported (gpt2, llama)");
  if (err)
    return std::move(err);
  if (c.family == Family::GPT2 || !obj->get("head_dim")) {
    if (c.hiddenSize % c.numHeads != 0)
      return error(origin + ": hidden size " + llvm::Twine(c.hiddenSize) +
                   " is not a multiple of the " + llvm::Twine(c.numHeads) +
                   " attention heads");
    c.headDim = c.hiddenSize / c.numHeads;
  } else {
    TRY_ASSIGN(c.headDim, r.positive("head_dim"));
  }
  if (c.family == Family::Llama && c.headDim % 2 != 0)
    return error(origin + ": head dimension " + llvm::Twine(c.headDim) +
                 " must be even for rotary embedding");
  return c;
}

Expected<ModelConfig> shardc::meta::loadModelConfig(StringRef spec) {
  for (const auto &[name, json] : presets())
    if (spec == name)
      return parseConfigJSON(json, name);
  llvm::SmallString<256> path(spec);
  if (llvm::sys::fs::is_directory(path))
    llvm::sys::path::append(path, "config.json");
  if (!llvm::sys::fs::exists(path)) {
    std::string known;
    for (const std::string &name : presetNames())
      known += (known.empty() ? "" : ", ") + name;
    return error("unknown model '" + spec + "': not a preset (" + known +
                 ") nor an existing config.json file or directory");
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return error(path + ": cannot read: " + file.getError().message());
  return parseConfigJSON((*file)->getBuffer(), path);
}
