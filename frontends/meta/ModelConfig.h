//===- ModelConfig.h - transformer configs and presets ----------*- C++ -*-===//
//
// The shape-only description of a GPT-2 or Llama model, read from a Hugging
// Face config.json or named by a preset, and the forward graph built from it.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTENDS_META_MODELCONFIG_H
#define SHARDC_FRONTENDS_META_MODELCONFIG_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace shardc::meta {

enum class Family { GPT2, Llama };

struct ModelConfig {
  Family family = Family::GPT2;
  std::string source; // the preset name or the config file it came from
  /// The config.json text it was read from (for --export-hf's config.json).
  std::string json;
  int64_t vocabSize = 0;
  int64_t hiddenSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKVHeads = 0;
  int64_t headDim = 0;
  int64_t intermediateSize = 0;
  int64_t maxPositions = 0;
  double normEps = 1e-5;
  double ropeTheta = 10000.0;
  bool tieEmbeddings = true;
  /// GPT-2: "gelu_new" (tanh form) or "gelu" (erf form); Llama: "silu".
  std::string activation;
  /// The config's model_type (gpt2, llama, mistral, qwen2).
  std::string modelType;
  /// Llama family: the rotary inverse frequencies when a rope scaling
  /// (llama3) changes them from theta^(-2i/D); empty otherwise.
  std::vector<double> ropeInvFreq;
  /// llama3 rope scaling as read: factor, low_freq_factor,
  /// high_freq_factor, original_max_position_embeddings (empty: none).
  std::vector<double> ropeScaling;
  /// Llama family: biases of the q, k, v projections, of o_proj, and of
  /// the MLP's gate, up and down projections.
  bool qkvBias = false, outputBias = false, mlpBias = false;
  /// Mistral: attention within this many positions (0: none).
  int64_t slidingWindow = 0;
  /// GPT-2: scores scaled by 1/sqrt(head dim), and further by 1/(layer+1).
  bool scaleAttnWeights = true, scaleAttnByLayer = false;
  /// What the compiler says once about the config (dropout not applied).
  std::vector<std::string> notes;
};

/// The preset names, in the order `--help` lists them.
const std::vector<std::string> &presetNames();

/// Resolves a preset name, a config.json path, or a directory holding one.
llvm::Expected<ModelConfig> loadModelConfig(llvm::StringRef spec);

/// Parses a Hugging Face config.json; `origin` names it in errors.
llvm::Expected<ModelConfig> parseConfigJSON(llvm::StringRef text,
                                            llvm::StringRef origin);

/// Builds the forward graph `forward(tokens, targets, params...) -> loss` in
/// the nn dialect for a micro-batch of `batch` sequences of `seqLen` tokens.
/// Parameters carry their Hugging Face state-dict names.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildForwardModule(mlir::MLIRContext &context, const ModelConfig &config,
                   int64_t batch, int64_t seqLen);

} // namespace shardc::meta

#endif // SHARDC_FRONTENDS_META_MODELCONFIG_H
