//===- Pipelines.h - shardc pass pipelines ----------------------*- C++ -*-===//
#ifndef SHARDC_COMPILER_PIPELINES_H
#define SHARDC_COMPILER_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "runtime/abi/abi.h"

#include <string>

namespace shardc {

struct PipelineOptions {
  /// Build the training step (autodiff and optimizer); otherwise lower the
  /// forward function as it is.
  bool training = true;
  /// Rewrite decomposed GELU, layer norm and attention into the fused ops.
  bool fusePatterns = true;
  /// Activations recomputed in backward: "none" or "block".
  std::string recompute = "none";
  /// abi::kOptimizerAdamW or abi::kOptimizerSGD.
  std::string optimizer = abi::kOptimizerAdamW;
  /// FSDP: the device mesh ("1": no sharding, "N", "RxS" for HSDP), the
  /// wrap policy (empty: one group per transformer block), resharding and
  /// prefetch depths.
  std::string mesh = "1";
  /// --tp: tensor-parallel ranks, the mesh's innermost axis (tp-partition).
  int64_t tp = 1;
  /// --tp-vocab: "parallel" or "whole" (tp-partition's vocab option).
  std::string tpVocab = "parallel";
  std::string wrap;
  std::string reshardAfterForward = "true";
  int64_t prefetchForward = 1;
  int64_t prefetchBackward = 1;
  /// Under gradient accumulation, reduce gradients once per optimizer step
  /// (on the last micro-batch) instead of after every micro-batch.
  bool gradSyncOnce = false;
  /// The target (target/TargetDescription.h): "cpu".
  std::string target = "cpu";
  /// Mixed precision: "f32" or "bf16".
  std::string paramDtype = "f32";
  std::string reduceDtype = "f32";
  /// --float8: the block linears' torchao recipe (nn-float8-linears), or
  /// empty.
  std::string float8;
  /// --float8-all-gather under tensorwise (rt-float8-all-gather).
  bool float8AllGather = false;
  /// abi::kOffloadNone, or abi::kOffloadCpu: the optimizer step on the
  /// host, host copies around the device's reads of the host regions.
  std::string offload = abi::kOffloadNone;
  /// --allow-tf32: f32 GEMMs on TF32 tensor cores (a target with tf32).
  bool allowTf32 = false;
  /// rt-fuse-epilogues (where the target's GEMMs have epilogues).
  bool fuseEpilogues = true;
  /// rt-fused-attention (where the target has fused attention).
  bool fusedAttention = true;
  /// rt-fused-attention's `deterministic` (--deterministic-attention).
  bool deterministicAttention = true;
  /// The layout passes (rt-attention-layout, rt-fuse-casts,
  /// rt-concat-views, rt-slice-views, rt-group-elementwise) and
  /// rt-fuse-residual-norm on bf16.
  bool fuseLayout = true;
  /// Rows of logits per chunk of the LM head's loss (rt-chunk-loss-head;
  /// 0: as many as fit 256 MiB).
  int64_t lossChunkRows = 0;
  /// rt-predict: the machine (a bundled name or a calibration file; empty:
  /// no prediction) and its GPUs a node (0: the machine's).
  std::string predict;
  int64_t gpusPerNode = 0;
};

/// The nn forward graph simplified (canonicalized, fused ops recognised),
/// then the training functions in nn (autodiff, optimizer) when
/// `options.training`.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const PipelineOptions &options);
/// nn model functions -> rt step functions with a memory plan, for the
/// target of `options`.
void buildNNToRtPipeline(mlir::OpPassManager &pm,
                         const PipelineOptions &options);
/// rt step functions -> LLVM dialect, ready for translation to LLVM IR.
void buildRtToLLVMPipeline(mlir::OpPassManager &pm);
/// All of the above, in order: what `shardc` runs on a frontend's module.
void buildLoweringPipeline(mlir::OpPassManager &pm,
                           const PipelineOptions &options);

/// Registers `shardc-train`, `shardc-lower-to-rt`, `shardc-lower-to-llvm`
/// and `shardc-lower` (default options) for shardc-opt.
void registerPipelines();

} // namespace shardc

#endif // SHARDC_COMPILER_PIPELINES_H
