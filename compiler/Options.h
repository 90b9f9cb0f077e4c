//===- Options.h - the driver's options, bound once -------------*- C++ -*-===//
//
// Every `shardc` flag is a field of one of these structs, bound to the
// command line once (bindOptions) and checked once (validate), IREE-style:
// the passes receive parsed values and do not repeat the checks with their
// own messages.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_COMPILER_OPTIONS_H
#define SHARDC_COMPILER_OPTIONS_H

#include "compiler/Pipelines.h"
#include "target/Sharding.h"
#include "target/TargetDescription.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardc {

/// The model and its input shape; the ONNX importer's choices.
struct ModelOptions {
  /// A preset, a config.json (or its directory), or *.onnx.
  std::string model = "tiny";
  int64_t seqLen = 0;     ///< 0: the model's positions, at most 1024
  int64_t microBatch = 4; ///< sequences per micro-batch
  bool microBatchGiven = false;
  /// ONNX only.
  std::string loss = "cross_entropy";
  bool infer = false;
  std::map<std::string, std::string> bindings; ///< --bind NAME=FILE
  std::vector<std::string> frozen;             ///< --freeze
  std::string train;                           ///< --train REGEX
  bool fusePatterns = true;
  /// --allow-external-data-outside: external data files may lie outside
  /// the model's folder (after symlinks); still regular files only.
  bool allowExternalDataOutside = false;
  /// --fold-budget: MiB of values the ONNX importer may evaluate at compile
  /// time (ConstantOfShape, Expand, Range, ... on known inputs).
  int64_t foldBudgetMiB = 1024;
  /// --retie-head: a trained initializer that is another's transpose bit
  /// for bit (a tied head an exporter folded to a copy) is computed from it
  /// (=false: trained apart, as the file has it).
  bool retieHead = true;

  bool isOnnx() const;
};

/// The training step and the sharding plan (FSDP2's policy).
struct TrainingOptions {
  std::string optimizer = abi::kOptimizerAdamW;
  std::string recompute = "none";
  std::string mesh = "1";
  MeshShape meshShape; ///< parsed from `mesh` and `tp` by validate()
  /// --tp: tensor-parallel ranks (the mesh's innermost axis).
  int64_t tp = 1;
  /// --tp-vocab: the embedding and LM head "parallel" (by vocabulary rows,
  /// where tp divides the vocabulary) or "whole" on every tp rank.
  std::string tpVocab = "parallel";
  std::string wrap;
  std::string reshardAfterForward = "true";
  ReshardPolicy reshard; ///< parsed by validate()
  int64_t prefetchForward = 1, prefetchBackward = 1;
  /// Rows of logits per chunk of the LM head's loss (0: auto).
  int64_t lossChunkRows = 0;
  std::string paramDtype = "f32", reduceDtype = "f32", outputDtype = "f32";
  /// --float8: a torchao recipe (nn::kFloat8Recipes) or empty (off).
  std::string float8;
  /// --float8-all-gather: FSDP2's float8 all-gather under tensorwise (on
  /// unless turned off), and whether the flag was given.
  bool float8AllGather = true, float8AllGatherGiven = false;
  std::string gradSync = "every";
  /// --offload: abi::kOffloadNone or abi::kOffloadCpu (FSDP2's
  /// CPUOffloadPolicy, --target cuda).
  std::string offload = abi::kOffloadNone;
  /// --allow-tf32: the f32 GEMMs on TF32 tensor cores (--target cuda).
  bool allowTf32 = false;
  /// --fuse-epilogues: rt-fuse-epilogues (GELU and bias gradients as GEMM
  /// epilogues).
  bool fuseEpilogues = true;
  /// --fused-attention: rt-fused-attention (bf16 attention on cuDNN).
  bool fusedAttention = true;
  /// --deterministic-attention: cuDNN's deterministic SDPA backward (true)
  /// or the non-deterministic one, with far less workspace (false).
  bool deterministicAttention = true;
  /// --fuse-layout: the layout passes (rt-attention-layout, rt-fuse-casts,
  /// rt-concat-views, rt-slice-views, rt-group-elementwise) and bf16
  /// residual norms.
  bool fuseLayout = true;
};

enum class Emit { MLIR, Train, Rt, LLVM, Obj, Exe };

/// What to produce, for which target.
struct OutputOptions {
  Emit emit = Emit::Exe;
  std::string output; ///< empty: the default of `emit`
  std::string target = "cpu";
  /// --cuda-emulation: link the --target cuda executable against the
  /// emulated CUDA device instead of the CUDA runtime and cuBLASLt.
  bool cudaEmulation = false;
  const TargetDescription *targetDesc = nullptr; ///< set by validate()
  bool report = false;
  bool supportedOps = false;
};

/// The step-time prediction (--predict) and the search over plans
/// (--plan=auto).
struct PredictOptions {
  /// A bundled machine name or a calibration file; empty: no prediction.
  std::string machine;
  int64_t gpusPerNode = 0; ///< 0: the machine's
  /// The trainer's --grad-accum the prediction assumes (micro-steps a step).
  int64_t gradAccum = 1;
  /// "manual" or "auto".
  std::string plan = "manual";
  /// --memory-budget as given ("" : the machine's default); bytes, parsed.
  std::string memoryBudget;
  double memoryBudgetBytes = 0;
  /// --calibrate FILE: measure this machine into FILE, then exit.
  std::string calibrate;
};

struct DriverOptions {
  ModelOptions model;
  TrainingOptions training;
  OutputOptions output;
  PredictOptions predict;

  /// Registers every flag (in `category`) bound to these fields. Call once,
  /// before llvm::cl::ParseCommandLineOptions; the object must outlive it.
  void bindOptions();
  /// Checks every flag and parses the mesh and the reshard policy: an error
  /// names the flag and the value at fault.
  llvm::Error validate();
  /// --tp's refusals: the flags tensor parallelism does not compose with
  /// yet, each named (part of validate).
  llvm::Error checkTpSupported() const;
  /// The pass pipeline's options.
  PipelineOptions pipeline() const;
  /// The output file: -o, or the default of --emit.
  std::string outputPath() const;
};

} // namespace shardc

#endif // SHARDC_COMPILER_OPTIONS_H
