//===- ModelConfig.cpp - transformer configs and presets ------------------===//
#include "frontends/meta/ModelConfig.h"
#include "runtime/formats/files.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <optional>
#include <set>

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

#define TRY_ASSIGN(lhs, expr)                                            \
  do {                                                                         \
    auto value_ = (expr);                                                      \
    if (!value_)                                                               \
      return value_.takeError();                                               \
    lhs = *value_;                                                             \
  } while (false)

/// Reads typed fields of a config object, naming the file and key in errors.
class Reader {
public:
  Reader(const llvm::json::Object &obj, StringRef origin)
      : obj(obj), origin(origin.str()) {}

  /// A positive integer no larger than `limit` (bounds no real model
  /// reaches, so that a typo or a hostile file cannot make the compiler
  /// run away).
  Expected<int64_t> positive(StringRef key, std::optional<int64_t> fallback = {},
                             int64_t limit = kDimLimit) {
    Expected<int64_t> v = positiveUnbounded(key, fallback);
    if (v && *v > limit)
      return error(origin + ": '" + key + "' is " + llvm::Twine(*v) +
                   ", above the limit of " + llvm::Twine(limit) +
                   " that shardc accepts");
    return v;
  }

  Expected<int64_t> positiveUnbounded(StringRef key,
                                      std::optional<int64_t> fallback) {
    used.insert(key.str());
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
    used.insert(key.str());
    const llvm::json::Value *v = obj.get(key);
    if (!v || v->kind() == llvm::json::Value::Null)
      return fallback;
    std::optional<double> d = v->getAsNumber();
    if (!d || !(*d > 0))
      return error(origin + ": '" + key + "' must be a positive number");
    return *d;
  }

  Expected<bool> boolean(StringRef key, bool fallback) {
    used.insert(key.str());
    const llvm::json::Value *v = obj.get(key);
    if (!v)
      return fallback;
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      return error(origin + ": '" + key + "' must be true or false");
    return *b;
  }

  Expected<std::string> string(StringRef key, StringRef fallback) {
    used.insert(key.str());
    const llvm::json::Value *v = obj.get(key);
    if (!v)
      return fallback.str();
    std::optional<StringRef> s = v->getAsString();
    if (!s)
      return error(origin + ": '" + key + "' must be a string");
    return s->str();
  }

  /// A number that may be zero (dropout probabilities).
  Expected<double> nonNegative(StringRef key) {
    used.insert(key.str());
    const llvm::json::Value *v = obj.get(key);
    if (!v || v->kind() == llvm::json::Value::Null)
      return 0.0;
    std::optional<double> d = v->getAsNumber();
    if (!d || *d < 0)
      return error(origin + ": '" + key + "' must be a non-negative number");
    return *d;
  }

  /// Marks keys as read without reading them (they do not change the math).
  void neutral(std::initializer_list<const char *> keys) {
    for (const char *k : keys)
      used.insert(k);
  }

  /// The first key that nothing read: it may change the math, so it is an
  /// error (keys starting with "_" are bookkeeping and pass).
  llvm::Error unread() const {
    for (const auto &kv : obj) {
      std::string key = kv.first.str();
      if (used.count(key) || key.rfind('_', 0) == 0)
        continue;
      return error(origin + ": config key '" + key +
                   "' is not implemented by shardc and may change the "
                   "model's math; remove it if it does not");
    }
    return llvm::Error::success();
  }

  const llvm::json::Object &obj;
  std::string origin;
  std::set<std::string> used;
  static constexpr int64_t kDimLimit = int64_t(1) << 24;
  static constexpr int64_t kLayerLimit = 10000;
};

/// Keys every transformers config may carry that do not change the math of
/// a causal LM's training step (ids, generation defaults, bookkeeping).
const std::initializer_list<const char *> kGenericKeys = {
    "architectures", "model_type", "transformers_version", "torch_dtype",
    "dtype", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id",
    "sep_token_id", "decoder_start_token_id", "initializer_range",
    "id2label", "label2id", "num_labels", "problem_type", "return_dict",
    "output_hidden_states", "output_attentions", "torchscript",
    "tokenizer_class", "prefix", "task_specific_params", "finetuning_task",
    "is_encoder_decoder", "is_decoder", "add_cross_attention",
    "tie_encoder_decoder", "chunk_size_feed_forward", "pruned_heads",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams",
    "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p",
    "typical_p", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate",
    "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens",
    "begin_suppress_tokens", "tf_legacy_loss", "use_bfloat16",
    "cross_attention_hidden_size", "output_router_logits",
    "gradient_checkpointing", "output_past"};

/// Dropout is not applied in training; a non-zero probability is said once.
llvm::Error dropout(Reader &r, ModelConfig &c,
                    std::initializer_list<const char *> keys) {
  for (const char *key : keys) {
    double p;
    TRY_ASSIGN(p, r.nonNegative(key));
    if (p > 0)
      c.notes.push_back(std::string(key) + " " + std::to_string(p).substr(0, 6) +
                        ": shardc trains without dropout");
  }
  return llvm::Error::success();
}


llvm::Error readGPT2(Reader &r, ModelConfig &c) {
  c.family = Family::GPT2;
  TRY_ASSIGN(c.vocabSize, r.positive("vocab_size"));
  TRY_ASSIGN(c.hiddenSize, r.positive("n_embd"));
  TRY_ASSIGN(c.numLayers, r.positive("n_layer", {}, Reader::kLayerLimit));
  TRY_ASSIGN(c.numHeads, r.positive("n_head"));
  TRY_ASSIGN(c.maxPositions, r.positive("n_positions", int64_t(1024)));
  TRY_ASSIGN(c.intermediateSize, r.positive("n_inner", 4 * c.hiddenSize));
  TRY_ASSIGN(c.normEps, r.number("layer_norm_epsilon", 1e-5));
  TRY_ASSIGN(c.tieEmbeddings, r.boolean("tie_word_embeddings", true));
  TRY_ASSIGN(c.activation, r.string("activation_function", "gelu_new"));
  TRY_ASSIGN(c.scaleAttnWeights, r.boolean("scale_attn_weights", true));
  TRY_ASSIGN(c.scaleAttnByLayer,
             r.boolean("scale_attn_by_inverse_layer_idx", false));
  // Upcasting attention to f32 changes nothing in f32 training; n_ctx is
  // the legacy name of n_positions; the summary_* keys configure the
  // double-heads model's classifier, not the LM.
  r.neutral({"reorder_and_upcast_attn", "n_ctx", "summary_type",
             "summary_use_proj", "summary_activation",
             "summary_proj_to_labels", "summary_first_dropout"});
  if (llvm::Error e = dropout(r, c, {"attn_pdrop", "embd_pdrop", "resid_pdrop"}))
    return e;
  c.numKVHeads = c.numHeads;
  if (c.activation != "gelu_new" && c.activation != "gelu" &&
      c.activation != "gelu_pytorch_tanh")
    return error(r.origin + ": activation_function '" + c.activation +
                 "' is not supported (gelu_new, gelu_pytorch_tanh, gelu)");
  return llvm::Error::success();
}

/// The rotary embedding's parameters: transformers 5's `rope_parameters`,
/// or transformers 4's top-level `rope_theta` and `rope_scaling`.
llvm::Error readRope(Reader &r, ModelConfig &c) {
  TRY_ASSIGN(c.ropeTheta, r.number("rope_theta", 10000.0));
  const llvm::json::Object *scaling = nullptr;
  std::string where;
  for (const char *key : {"rope_parameters", "rope_scaling"}) {
    r.used.insert(key);
    const llvm::json::Value *v = r.obj.get(key);
    if (!v || v->kind() == llvm::json::Value::Null)
      continue;
    if (!v->getAsObject())
      return error(r.origin + ": '" + key + "' must be an object");
    if (scaling) {
      // The same object under both names says one thing.
      if (llvm::json::Value(llvm::json::Object(*scaling)) == *v)
        continue;
      return error(r.origin + ": 'rope_parameters' and 'rope_scaling' "
                              "differ; keep one");
    }
    scaling = v->getAsObject();
    where = key;
  }
  if (!scaling)
    return llvm::Error::success();
  Reader s(*scaling, r.origin + ": " + where);
  TRY_ASSIGN(c.ropeTheta, s.number("rope_theta", c.ropeTheta));
  std::string type;
  TRY_ASSIGN(type, s.string("rope_type", "default"));
  if (scaling->get("type")) {
    std::string legacy;
    TRY_ASSIGN(legacy, s.string("type", type));
    if (!scaling->get("rope_type"))
      type = legacy;
  }
  if (type == "default") {
    if (auto *f = scaling->get("factor"))
      if (f->getAsNumber() && *f->getAsNumber() != 1.0)
        return error(s.origin + ": 'factor' with rope_type default");
    s.neutral({"factor"});
  } else if (type == "llama3") {
    // transformers reads all four (a missing one is a KeyError there):
    // no default is guessed here either.
    for (const char *key : {"factor", "low_freq_factor", "high_freq_factor",
                            "original_max_position_embeddings"}) {
      const llvm::json::Value *v = scaling->get(key);
      if (!v || v->kind() == llvm::json::Value::Null)
        return error(s.origin + ": rope_type llama3 needs '" + key + "'");
    }
    double factor, low, high;
    int64_t original;
    TRY_ASSIGN(factor, s.number("factor", 8.0));
    TRY_ASSIGN(low, s.number("low_freq_factor", 1.0));
    TRY_ASSIGN(high, s.number("high_freq_factor", 4.0));
    TRY_ASSIGN(original, s.positive("original_max_position_embeddings",
                                    int64_t(8192)));
    if (!(high > low))
      return error(s.origin + ": high_freq_factor must exceed low_freq_factor");
    c.ropeScaling = {factor, low, high, double(original)};
  } else {
    return error(s.origin + ": rope_type '" + type +
                 "' is not implemented (default, llama3)");
  }
  return s.unread();
}

/// Llama and the model types that share its math: mistral (without a
/// sliding window shorter than the sequence), qwen2 (q, k, v biases).
llvm::Error readLlama(Reader &r, ModelConfig &c) {
  c.family = Family::Llama;
  TRY_ASSIGN(c.vocabSize, r.positive("vocab_size"));
  TRY_ASSIGN(c.hiddenSize, r.positive("hidden_size"));
  TRY_ASSIGN(c.numLayers,
             r.positive("num_hidden_layers", {}, Reader::kLayerLimit));
  TRY_ASSIGN(c.numHeads, r.positive("num_attention_heads"));
  // Without the key, transformers' MistralConfig has 8 kv heads and
  // Qwen2Config 32; with null, or in LlamaConfig, as many as attention heads.
  int64_t kvDefault = r.obj.get("num_key_value_heads") ? c.numHeads
                      : c.modelType == "mistral"        ? 8
                      : c.modelType == "qwen2"          ? 32
                                                        : c.numHeads;
  TRY_ASSIGN(c.numKVHeads, r.positive("num_key_value_heads", kvDefault));
  TRY_ASSIGN(c.intermediateSize, r.positive("intermediate_size"));
  TRY_ASSIGN(c.maxPositions, r.positive("max_position_embeddings", int64_t(2048)));
  TRY_ASSIGN(c.normEps, r.number("rms_norm_eps", 1e-6));
  TRY_ASSIGN(c.tieEmbeddings, r.boolean("tie_word_embeddings", false));
  TRY_ASSIGN(c.activation, r.string("hidden_act", "silu"));
  if (c.activation != "silu")
    return error(r.origin + ": hidden_act '" + c.activation +
                 "' is not supported (silu)");
  if (llvm::Error e = readRope(r, c))
    return e;
  if (c.modelType == "qwen2") {
    // Qwen2 has biases on q, k and v only.
    c.qkvBias = true;
    bool window;
    TRY_ASSIGN(window, r.boolean("use_sliding_window", false));
    if (window)
      return error(r.origin + ": 'use_sliding_window' true is not "
                              "implemented");
    r.neutral({"sliding_window", "max_window_layers"});
  } else {
    bool bias;
    TRY_ASSIGN(bias, r.boolean("attention_bias", false));
    if (c.modelType == "llama")
      c.qkvBias = c.outputBias = bias;
    else if (bias)
      return error(r.origin + ": 'attention_bias' true is not implemented "
                              "for model_type " + c.modelType +
                   " (transformers' " + c.modelType +
                   " attention has no biases)");
  }
  TRY_ASSIGN(c.mlpBias, r.boolean("mlp_bias", false));
  if (c.mlpBias && c.modelType != "llama")
    return error(r.origin + ": 'mlp_bias' true is not implemented for "
                            "model_type " + c.modelType +
                 " (transformers' " + c.modelType + " MLP has no biases)");
  if (c.modelType == "mistral") {
    // MistralConfig's default window is 4096 positions; null: none.
    r.used.insert("sliding_window");
    const llvm::json::Value *v = r.obj.get("sliding_window");
    if (!v)
      c.slidingWindow = 4096;
    else if (v->kind() != llvm::json::Value::Null)
      TRY_ASSIGN(c.slidingWindow, r.positive("sliding_window"));
  }
  // transformers 5 (and late 4) write each layer's attention kind; only
  // full causal attention is implemented.
  r.used.insert("layer_types");
  if (const llvm::json::Value *v = r.obj.get("layer_types");
      v && v->kind() != llvm::json::Value::Null) {
    const llvm::json::Array *kinds = v->getAsArray();
    if (!kinds)
      return error(r.origin + ": 'layer_types' must be a list");
    for (const llvm::json::Value &kind : *kinds)
      if (kind.getAsString() != std::optional<StringRef>("full_attention"))
        return error(r.origin + ": 'layer_types' entry " +
                     (kind.getAsString() ? "'" + kind.getAsString()->str() + "'"
                                         : std::string("that is not a string")) +
                     " is not implemented (full_attention)");
  }
  // pretraining_tp > 1 splits the projections' matmuls into slices: the
  // same math.
  r.neutral({"pretraining_tp"});
  if (llvm::Error e = dropout(r, c, {"attention_dropout"}))
    return e;
  if (c.numHeads % c.numKVHeads != 0)
    return error(r.origin + ": num_attention_heads " +
                 llvm::Twine(c.numHeads) +
                 " is not a multiple of num_key_value_heads " +
                 llvm::Twine(c.numKVHeads));
  return llvm::Error::success();
}

/// How deep a config.json may nest objects and arrays (Hugging Face
/// configs nest 2 or 3 levels).
constexpr int kMaxJsonNesting = 64;

/// The offset of the first '[' or '{' that opens level `limit` + 1, outside
/// strings, or none when the text stays within `limit` levels. Malformed
/// text is the parser's to report.
std::optional<size_t> exceedsJsonNesting(StringRef text, int limit) {
  int depth = 0;
  bool inString = false;
  for (size_t k = 0; k < text.size(); ++k) {
    char c = text[k];
    if (inString) {
      if (c == '\\')
        ++k;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit)
        return k;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
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
  // llvm::json's parser recurses once per nesting level: a deep file
  // (50,000 '[' in 100 KB) would overflow the stack. Refused before it.
  if (std::optional<size_t> at = exceedsJsonNesting(text, kMaxJsonNesting))
    return error(origin + ": JSON nested deeper than " +
                 llvm::Twine(kMaxJsonNesting) + " levels (at byte " +
                 llvm::Twine(uint64_t(*at)) +
                 ")");
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
  c.modelType = type->str();
  r.neutral(kGenericKeys);
  llvm::Error err =
      *type == "gpt2" ? readGPT2(r, c)
      : (*type == "llama" || *type == "mistral" || *type == "qwen2")
          ? readLlama(r, c)
          : error(origin + ": model_type '" + *type +
                  "' is not supported (gpt2, llama, mistral, qwen2)");
  if (err)
    return std::move(err);
  r.used.insert("head_dim");
  if (c.family == Family::GPT2 || !obj->get("head_dim") ||
      (*obj->get("head_dim")).kind() == llvm::json::Value::Null) {
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
  if (llvm::Error unknown = r.unread())
    return std::move(unknown);
  if (c.family == Family::Llama && !c.ropeScaling.empty()) {
    // transformers' _compute_llama3_parameters: long wavelengths slowed by
    // `factor`, short ones kept, the band between interpolated.
    double factor = c.ropeScaling[0], low = c.ropeScaling[1],
           high = c.ropeScaling[2], original = c.ropeScaling[3];
    double lowWavelen = original / low, highWavelen = original / high;
    for (int64_t i = 0; i < c.headDim / 2; ++i) {
      double f = std::pow(c.ropeTheta, -2.0 * double(i) / double(c.headDim));
      double wavelen = 2 * M_PI / f;
      if (wavelen > lowWavelen) {
        f /= factor;
      } else if (!(wavelen < highWavelen)) {
        double smooth = (original / wavelen - low) / (high - low);
        f = (1 - smooth) * f / factor + smooth * f;
      }
      c.ropeInvFreq.push_back(f);
    }
  }
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
  std::string text, failure;
  if (!runtime::readInputFile(
          std::string(path), runtime::kMaxConfigJsonBytes,
          "the " + runtime::formatBytes(runtime::kMaxConfigJsonBytes) +
              " a config.json may have",
          text, failure))
    return error(failure);
  return parseConfigJSON(text, path);
}
