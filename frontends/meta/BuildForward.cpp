//===- BuildForward.cpp - the nn forward graph of a GPT-2 or Llama --------===//
//
// Emits `func.func @forward(tokens, targets, params...) -> loss` with the
// parameters named and laid out as in the Hugging Face state dicts of
// GPT2LMHeadModel and LlamaForCausalLM.
//
//===----------------------------------------------------------------------===//
#include "frontends/meta/ModelConfig.h"

#include "dialects/nn/NNDialect.h"
#include "target/Attrs.h"
#include "runtime/abi/abi.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/JSON.h"

#include <cmath>

using namespace mlir;
using namespace shardc;
using namespace shardc::meta;

namespace {

/// The config.json that --export-hf writes: the keys the source config had,
/// with the values shardc used written out (so that transformers' defaults,
/// where a key was missing, cannot differ from shardc's), `architectures`
/// and `torch_dtype` (the exported tensors are f32).
std::string exportedConfig(const ModelConfig &c) {
  llvm::json::Object obj;
  if (llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(c.json)) {
    if (llvm::json::Object *o = parsed->getAsObject())
      obj = std::move(*o);
  } else {
    llvm::consumeError(parsed.takeError());
  }
  obj["model_type"] = c.modelType;
  obj["vocab_size"] = c.vocabSize;
  obj["tie_word_embeddings"] = c.tieEmbeddings;
  if (c.family == Family::GPT2) {
    obj["architectures"] = llvm::json::Array{"GPT2LMHeadModel"};
    obj["n_embd"] = c.hiddenSize;
    obj["n_layer"] = c.numLayers;
    obj["n_head"] = c.numHeads;
    obj["n_positions"] = c.maxPositions;
    obj["n_inner"] = c.intermediateSize;
    obj["layer_norm_epsilon"] = c.normEps;
    obj["activation_function"] = c.activation;
    obj["scale_attn_weights"] = c.scaleAttnWeights;
    obj["scale_attn_by_inverse_layer_idx"] = c.scaleAttnByLayer;
  } else {
    const char *arch = c.modelType == "mistral" ? "MistralForCausalLM"
                       : c.modelType == "qwen2" ? "Qwen2ForCausalLM"
                                                : "LlamaForCausalLM";
    obj["architectures"] = llvm::json::Array{arch};
    obj["hidden_size"] = c.hiddenSize;
    obj["num_hidden_layers"] = c.numLayers;
    obj["num_attention_heads"] = c.numHeads;
    obj["num_key_value_heads"] = c.numKVHeads;
    obj["head_dim"] = c.headDim;
    obj["intermediate_size"] = c.intermediateSize;
    obj["max_position_embeddings"] = c.maxPositions;
    obj["rms_norm_eps"] = c.normEps;
    obj["hidden_act"] = c.activation;
    // transformers 5 keeps rope_theta inside rope_parameters.
    if (!obj.get("rope_parameters"))
      obj["rope_theta"] = c.ropeTheta;
    if (c.modelType == "llama") {
      obj["attention_bias"] = c.qkvBias;
      obj["mlp_bias"] = c.mlpBias;
    }
    if (c.modelType == "mistral" && !c.slidingWindow)
      obj["sliding_window"] = nullptr; // MistralConfig's default is 4096
  }
  obj["torch_dtype"] = "float32";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(obj));
  return text;
}

/// Builds the body in a free-standing block whose arguments (the inputs and
/// parameters) are added as the graph first uses them.
class GraphBuilder {
public:
  GraphBuilder(MLIRContext &ctx, const ModelConfig &c, int64_t batch,
               int64_t seq)
      : b(&ctx), c(c), B(batch), T(seq), f32(b.getF32Type()), loc(b.getUnknownLoc()) {
    block = std::make_unique<Block>();
    b.setInsertionPointToStart(block.get());
  }

  Value input(StringRef name, ArrayRef<int64_t> shape) {
    Value v = block->addArgument(
        RankedTensorType::get(shape, b.getI32Type()), loc);
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(shardc::attrs::kInput, b.getStringAttr(name))));
    return v;
  }

  /// A parameter; `init` is "normal" (std), "zeros" or "ones".
  Value param(const Twine &name, ArrayRef<int64_t> shape,
              StringRef init = "normal", double std = 0.02) {
    Value v = block->addArgument(RankedTensorType::get(shape, f32), loc);
    SmallVector<NamedAttribute> attrs = {
        b.getNamedAttr(shardc::attrs::kParam, b.getStringAttr(name)),
        b.getNamedAttr(shardc::attrs::kInit, b.getStringAttr(init))};
    if (init == "normal")
      attrs.push_back(b.getNamedAttr(shardc::attrs::kInitStd, b.getF64FloatAttr(std)));
    argAttrs.push_back(b.getDictionaryAttr(attrs));
    return v;
  }

  RankedTensorType type(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, f32);
  }
  ArrayRef<int64_t> shapeOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }

  /// x [..., K] times a weight stored [N, K], or [K, N] when `inOut`.
  Value linear(Value x, Value w, Value bias, bool inOut) {
    SmallVector<int64_t> shape(shapeOf(x));
    shape.back() = shapeOf(w)[inOut ? 1 : 0];
    return nn::LinearOp::create(b, loc, type(shape), x, w, bias, inOut);
  }
  Value add(Value x, Value y) {
    return nn::AddOp::create(b, loc, x.getType(), x, y);
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    return nn::ReshapeOp::create(b, loc, type(shape), x);
  }
  Value transpose0213(Value x) {
    ArrayRef<int64_t> s = shapeOf(x);
    return nn::TransposeOp::create(b, loc, type({s[0], s[2], s[1], s[3]}), x,
                                   b.getDenseI64ArrayAttr({0, 2, 1, 3}));
  }
  /// [B, T, H*D] -> [B, H, T, D]
  Value splitHeads(Value x, int64_t heads) {
    return transpose0213(reshape(x, {B, T, heads, c.headDim}));
  }
  /// [B, H, T, D] -> [B, T, H*D]
  Value mergeHeads(Value x) {
    ArrayRef<int64_t> s = shapeOf(x);
    return reshape(transpose0213(x), {B, T, s[1] * s[3]});
  }
  Value slice(Value x, int64_t dim, int64_t start, int64_t size) {
    SmallVector<int64_t> shape(shapeOf(x));
    shape[dim] = size;
    return nn::SliceOp::create(b, loc, type(shape), x, dim, start);
  }
  /// Causal attention; `scale` 0: the default 1/sqrt(head dim).
  Value attention(Value q, Value k, Value v, double scale = 0) {
    FloatAttr s = scale > 0 ? b.getF64FloatAttr(scale) : FloatAttr();
    return nn::AttentionOp::create(b, loc, q.getType(), q, k, v,
                                   /*causal=*/true, s);
  }
  Value loss(Value logits, Value targets) {
    return nn::CrossEntropyOp::create(
        b, loc, RankedTensorType::get({}, f32), logits, targets);
  }

  /// Tags the ops built since `begin()` with `nn.block = layer`: the unit
  /// of activation checkpointing.
  void beginBlock() { blockStart = block->empty() ? nullptr : &block->back(); }
  void endBlock(int64_t layer) {
    auto it = blockStart ? std::next(Block::iterator(blockStart)) : block->begin();
    for (Operation &op : llvm::make_range(it, block->end()))
      op.setAttr(shardc::attrs::kBlock, b.getI64IntegerAttr(layer));
  }

  /// The residual projections' init std, scaled as in GPT-2.
  double residualStd() const { return 0.02 / std::sqrt(2.0 * c.numLayers); }

  Value gpt2();
  Value llama();

  OwningOpRef<ModuleOp> finish(Value loss);

private:
  OpBuilder b;
  const ModelConfig &c;
  int64_t B, T;
  Type f32;
  Location loc;
  std::unique_ptr<Block> block;
  Operation *blockStart = nullptr;
  SmallVector<Attribute> argAttrs;
};

Value GraphBuilder::gpt2() {
  int64_t C = c.hiddenSize, H = c.numHeads;
  Value tokens = input(abi::kIoTokens, {B, T});
  Value targets = input(abi::kIoTargets, {B, T});
  auto layerNorm = [&](Value x, const Twine &prefix) {
    Value w = param(prefix + ".weight", {C}, "ones");
    Value bias = param(prefix + ".bias", {C}, "zeros");
    return Value(nn::LayerNormOp::create(b, loc, x.getType(), x, w, bias,
                                         llvm::APFloat(c.normEps)));
  };
  auto conv1d = [&](Value x, const Twine &prefix, int64_t out, double std) {
    Value w = param(prefix + ".weight", {shapeOf(x).back(), out}, "normal", std);
    Value bias = param(prefix + ".bias", {out}, "zeros");
    return linear(x, w, bias, /*inOut=*/true);
  };

  Value wte = param("transformer.wte.weight", {c.vocabSize, C});
  Value wpe = param("transformer.wpe.weight", {c.maxPositions, C});
  Value x = nn::EmbeddingOp::create(b, loc, type({B, T, C}), tokens, wte);
  x = add(x, slice(wpe, 0, 0, T));
  for (int64_t l = 0; l < c.numLayers; ++l) {
    std::string p = "transformer.h." + std::to_string(l);
    beginBlock();
    Value h = layerNorm(x, p + ".ln_1");
    Value qkv = conv1d(h, p + ".attn.c_attn", 3 * C, 0.02);
    Value q = splitHeads(slice(qkv, 2, 0, C), H);
    Value k = splitHeads(slice(qkv, 2, C, C), H);
    Value v = splitHeads(slice(qkv, 2, 2 * C, C), H);
    // GPT-2's scale_attn_weights and scale_attn_by_inverse_layer_idx.
    // (0: the attention op's default, 1/sqrt(head dim)).
    double scale = 0;
    if (!c.scaleAttnWeights || c.scaleAttnByLayer) {
      scale = c.scaleAttnWeights ? 1.0 / std::sqrt(double(c.headDim)) : 1.0;
      if (c.scaleAttnByLayer)
        scale /= double(l + 1);
    }
    Value a = mergeHeads(attention(q, k, v, scale));
    x = add(x, conv1d(a, p + ".attn.c_proj", C, residualStd()));
    h = layerNorm(x, p + ".ln_2");
    h = conv1d(h, p + ".mlp.c_fc", c.intermediateSize, 0.02);
    Value gelu = nn::GeluOp::create(b, loc, h.getType(), h,
                                    c.activation == "gelu" ? "none" : "tanh");
    h = conv1d(gelu, p + ".mlp.c_proj", C, residualStd());
    x = add(x, h);
    endBlock(l);
  }
  x = layerNorm(x, "transformer.ln_f");
  Value head = c.tieEmbeddings ? wte : param("lm_head.weight", {c.vocabSize, C});
  Value logits = linear(x, head, Value(), /*inOut=*/false);
  return loss(logits, targets);
}

Value GraphBuilder::llama() {
  int64_t C = c.hiddenSize, H = c.numHeads, Hkv = c.numKVHeads,
          D = c.headDim, I = c.intermediateSize;
  Value tokens = input(abi::kIoTokens, {B, T});
  Value targets = input(abi::kIoTargets, {B, T});
  auto rmsNorm = [&](Value x, const Twine &name) {
    Value w = param(name, {C}, "ones");
    return Value(nn::RMSNormOp::create(b, loc, x.getType(), x, w,
                                       llvm::APFloat(c.normEps)));
  };
  // `name` is the projection's prefix (".weight", ".bias" appended).
  auto proj = [&](Value x, const Twine &name, int64_t out, bool bias,
                  double std = 0.02) {
    Value w = param(name + ".weight", {out, shapeOf(x).back()}, "normal", std);
    Value bv = bias ? param(name + ".bias", {out}, "zeros") : Value();
    return linear(x, w, bv, /*inOut=*/false);
  };
  // Scaled rope (llama3): cos and sin tables [T, D/2] of the scaled
  // frequencies, computed here in f32 as transformers' rotary embedding
  // computes the angles, for nn.rotary_table.
  Value cosTable, sinTable;
  if (!c.ropeInvFreq.empty()) {
    std::vector<float> cosv(size_t(T * D / 2)), sinv(size_t(T * D / 2));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < D / 2; ++i) {
        float angle = float(t) * float(c.ropeInvFreq[size_t(i)]);
        cosv[size_t(t * D / 2 + i)] = std::cos(angle);
        sinv[size_t(t * D / 2 + i)] = std::sin(angle);
      }
    auto table = [&](ArrayRef<float> values) {
      auto t = type({T, D / 2});
      return Value(nn::ConstantOp::create(
          b, loc, t, DenseElementsAttr::get(t, values)));
    };
    cosTable = table(cosv);
    sinTable = table(sinv);
  }
  auto rotary = [&](Value x) {
    if (cosTable)
      return Value(nn::RotaryTableOp::create(b, loc, x.getType(), x, cosTable,
                                             sinTable, /*inverse=*/false));
    return Value(nn::RotaryOp::create(b, loc, x.getType(), x,
                                      llvm::APFloat(c.ropeTheta)));
  };

  Value embed = param("model.embed_tokens.weight", {c.vocabSize, C});
  Value x = nn::EmbeddingOp::create(b, loc, type({B, T, C}), tokens, embed);
  for (int64_t l = 0; l < c.numLayers; ++l) {
    std::string p = "model.layers." + std::to_string(l);
    beginBlock();
    Value h = rmsNorm(x, p + ".input_layernorm.weight");
    Value q = rotary(splitHeads(
        proj(h, p + ".self_attn.q_proj", H * D, c.qkvBias), H));
    Value k = rotary(splitHeads(
        proj(h, p + ".self_attn.k_proj", Hkv * D, c.qkvBias), Hkv));
    Value v = splitHeads(proj(h, p + ".self_attn.v_proj", Hkv * D, c.qkvBias),
                         Hkv);
    Value a = mergeHeads(attention(q, k, v));
    x = add(x, proj(a, p + ".self_attn.o_proj", C, c.outputBias,
                    residualStd()));
    h = rmsNorm(x, p + ".post_attention_layernorm.weight");
    Value gate = proj(h, p + ".mlp.gate_proj", I, c.mlpBias);
    Value up = proj(h, p + ".mlp.up_proj", I, c.mlpBias);
    Value act = nn::SiluOp::create(b, loc, gate.getType(), gate);
    Value m = nn::MulOp::create(b, loc, act.getType(), act, up);
    x = add(x, proj(m, p + ".mlp.down_proj", C, c.mlpBias, residualStd()));
    endBlock(l);
  }
  x = rmsNorm(x, "model.norm.weight");
  Value head = c.tieEmbeddings ? embed : param("lm_head.weight", {c.vocabSize, C});
  Value logits = linear(x, head, Value(), /*inOut=*/false);
  return loss(logits, targets);
}

OwningOpRef<ModuleOp> GraphBuilder::finish(Value lossValue) {
  func::ReturnOp::create(b, loc, lossValue);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  auto fnType = b.getFunctionType(block->getArgumentTypes(), lossValue.getType());
  OpBuilder mb(module->getBodyRegion());
  auto fn = func::FuncOp::create(mb, loc, "forward", fnType);
  fn.getBody().push_back(block.release());
  fn.setAllArgAttrs(argAttrs);

  SmallVector<NamedAttribute> model = {
      b.getNamedAttr("family", b.getStringAttr(c.family == Family::GPT2 ? "gpt2" : "llama")),
      b.getNamedAttr("source", b.getStringAttr(c.source)),
      b.getNamedAttr("vocab_size", b.getI64IntegerAttr(c.vocabSize)),
      b.getNamedAttr("hidden_size", b.getI64IntegerAttr(c.hiddenSize)),
      b.getNamedAttr("num_layers", b.getI64IntegerAttr(c.numLayers)),
      b.getNamedAttr("num_heads", b.getI64IntegerAttr(c.numHeads)),
      b.getNamedAttr("num_kv_heads", b.getI64IntegerAttr(c.numKVHeads)),
      b.getNamedAttr("micro_batch", b.getI64IntegerAttr(B)),
      b.getNamedAttr("seq_len", b.getI64IntegerAttr(T)),
      b.getNamedAttr("tied_embeddings", b.getBoolAttr(c.tieEmbeddings)),
      b.getNamedAttr("hf_config", b.getStringAttr(exportedConfig(c))),
  };
  (*module)->setAttr("nn.model", b.getDictionaryAttr(model));
  return module;
}

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>>
shardc::meta::buildForwardModule(MLIRContext &context, const ModelConfig &c,
                                 int64_t batch, int64_t seqLen) {
  context.getOrLoadDialect<nn::NNDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  if (batch <= 0)
    return llvm::createStringError("--micro-batch must be positive");
  if (seqLen <= 0)
    return llvm::createStringError("--seq-len must be positive");
  if (c.family == Family::GPT2 && seqLen > c.maxPositions)
    return llvm::createStringError(
        "--seq-len " + std::to_string(seqLen) + " exceeds the " +
        std::to_string(c.maxPositions) + " positions of " + c.source);
  // The largest activation is the logits, [batch, seq-len, vocabulary] in
  // f32; its bytes must stay exact in the planner's arithmetic.
  double logitBytes = 4.0 * double(batch) * double(seqLen) * double(c.vocabSize);
  if (logitBytes > 9007199254740992.0)
    return llvm::createStringError(
        "micro-batch x seq-len x vocabulary x 4 bytes (" +
        std::to_string(batch) + " x " + std::to_string(seqLen) + " x " +
        std::to_string(c.vocabSize) + " x 4) exceeds 2^53 bytes");
  if (c.slidingWindow > 0 && seqLen > c.slidingWindow)
    return llvm::createStringError(
        c.source + ": sliding_window " + std::to_string(c.slidingWindow) +
        " is shorter than the sequence of " + std::to_string(seqLen) +
        " tokens: sliding-window attention is not implemented");
  GraphBuilder g(context, c, batch, seqLen);
  Value loss = c.family == Family::GPT2 ? g.gpt2() : g.llama();
  OwningOpRef<ModuleOp> module = g.finish(loss);
  if (failed(verify(*module)))
    return llvm::createStringError("internal error: the forward graph of " +
                                   c.source + " does not verify");
  return module;
}
