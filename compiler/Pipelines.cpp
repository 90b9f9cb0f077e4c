//===- Pipelines.cpp - shardc pass pipelines ------------------------------===//
#include "compiler/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"

using namespace mlir;

void shardc::buildTrainingPipeline(OpPassManager &pm,
                                   const PipelineOptions &options) {
  // Simplify the forward graph only: after autodiff, CSE would merge the
  // ops recomputed for backward with their forward originals. Then the
  // fused ops replace the decomposed forms exporters write.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.fusePatterns)
    pm.addPass(createNNFusePatterns());
  if (!options.training)
    return;
  bool fsdp = options.mesh != "1" || options.tp > 1 ||
              options.paramDtype != "f32" || options.reduceDtype != "f32";
  if (options.tp > 1) {
    TPPartitionOptions tp;
    tp.mesh = options.mesh;
    tp.tp = options.tp;
    tp.vocab = options.tpVocab;
    pm.addPass(createTPPartition(tp));
  }
  if (!options.float8.empty()) {
    NNFloat8LinearsOptions float8;
    float8.recipe = options.float8;
    pm.addPass(createNNFloat8Linears(float8));
  }
  if (fsdp) {
    FSDPShardParametersOptions shard;
    shard.mesh = options.mesh;
    shard.tp = options.tp;
    shard.target = options.target;
    shard.paramDtype = options.paramDtype;
    shard.reduceDtype = options.reduceDtype;
    if (!options.wrap.empty())
      shard.wrap = options.wrap;
    pm.addPass(createFSDPShardParameters(shard));
  }
  NNAutodiffOptions autodiff;
  autodiff.recompute = options.recompute;
  pm.addPass(createNNAutodiff(autodiff));
  NNBuildOptimizerOptions optimizer;
  optimizer.optimizer = options.optimizer;
  pm.addPass(createNNBuildOptimizer(optimizer));
  pm.addPass(createNNFuseLossGrad());
  if (fsdp) {
    FSDPReshardOptions reshard;
    reshard.reshardAfterForward = options.reshardAfterForward;
    pm.addPass(createFSDPReshard(reshard));
    FSDPPrefetchOptions prefetch;
    prefetch.prefetchForward = options.prefetchForward;
    prefetch.prefetchBackward = options.prefetchBackward;
    pm.addPass(createFSDPPrefetch(prefetch));
    if (options.gradSyncOnce)
      pm.addPass(createFSDPSyncOnce());
    pm.addPass(createFSDPBucketGradients());
    pm.addPass(createFSDPShardOptimizer());
  }
}

void shardc::buildNNToRtPipeline(OpPassManager &pm,
                                 const PipelineOptions &options) {
  ConvertNNToRtOptions lower;
  lower.target = options.target;
  lower.allowTf32 = options.allowTf32;
  pm.addPass(createConvertNNToRt(lower));
  if (options.fuseEpilogues) {
    RtFuseEpiloguesOptions epilogues;
    epilogues.target = options.target;
    pm.addNestedPass<func::FuncOp>(createRtFuseEpilogues(epilogues));
  }
  if (options.fusedAttention) {
    RtFusedAttentionOptions attention;
    attention.target = options.target;
    attention.deterministic = options.deterministicAttention;
    pm.addNestedPass<func::FuncOp>(createRtFusedAttention(attention));
  }
  if (options.fuseLayout)
    pm.addNestedPass<func::FuncOp>(createRtAttentionLayout());
  RtFuseResidualNormOptions residual;
  residual.target = options.target;
  residual.bf16 = options.fuseLayout;
  pm.addNestedPass<func::FuncOp>(createRtFuseResidualNorm(residual));
  if (options.fuseLayout) {
    RtFuseSwigluOptions swiglu;
    swiglu.target = options.target;
    pm.addNestedPass<func::FuncOp>(createRtFuseSwiglu(swiglu));
    RtFuseNormGradAddOptions gradAdd;
    gradAdd.target = options.target;
    pm.addNestedPass<func::FuncOp>(createRtFuseNormGradAdd(gradAdd));
  }
  RtChunkLossHeadOptions lossHead;
  lossHead.target = options.target;
  lossHead.rows = options.lossChunkRows;
  pm.addNestedPass<func::FuncOp>(createRtChunkLossHead(lossHead));
  if (options.fuseLayout) {
    pm.addNestedPass<func::FuncOp>(createRtFuseCasts());
    pm.addNestedPass<func::FuncOp>(createRtConcatViews());
    pm.addNestedPass<func::FuncOp>(createRtSliceViews());
  }
  if (options.fuseEpilogues) {
    RtFuseBiasGradOptions biasGrad;
    biasGrad.target = options.target;
    pm.addNestedPass<func::FuncOp>(createRtFuseBiasGrad(biasGrad));
  }
  RtGroupOptimizerOptions group;
  group.target = options.target;
  pm.addNestedPass<func::FuncOp>(createRtGroupOptimizer(group));
  if (options.float8AllGather)
    pm.addNestedPass<func::FuncOp>(createRtFloat8AllGather());
  if (options.float8 == "tensorwise" && options.tp > 1)
    pm.addNestedPass<func::FuncOp>(createRtFloat8TpScales());
  if (options.float8 == "tensorwise")
    pm.addNestedPass<func::FuncOp>(createRtFuseAmax());
  pm.addNestedPass<func::FuncOp>(createRtCoalesceCollectives());
  if (options.offload == abi::kOffloadCpu)
    pm.addPass(createRtOffloadToHost());
  else
    pm.addPass(createRtWorkingCopy());
  if (options.fuseLayout)
    pm.addNestedPass<func::FuncOp>(createRtGroupElementwise());
  if (!options.predict.empty()) {
    RtPredictOptions predict;
    predict.machine = options.predict;
    predict.gpusPerNode = options.gpusPerNode;
    pm.addPass(createRtPredict(predict));
  }
  pm.addNestedPass<func::FuncOp>(createRtPlanMemory());
}

void shardc::buildRtToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createConvertRtToLLVM());
}

void shardc::buildLoweringPipeline(OpPassManager &pm,
                                   const PipelineOptions &options) {
  buildTrainingPipeline(pm, options);
  buildNNToRtPipeline(pm, options);
  buildRtToLLVMPipeline(pm);
}

void shardc::registerPipelines() {
  PassPipelineRegistration<>(
      "shardc-train", "Build the training step (autodiff, AdamW) in nn",
      [](OpPassManager &pm) { buildTrainingPipeline(pm, PipelineOptions()); });
  PassPipelineRegistration<>(
      "shardc-lower-to-rt", "Lower nn model functions to planned rt steps",
      [](OpPassManager &pm) { buildNNToRtPipeline(pm, PipelineOptions()); });
  PassPipelineRegistration<>("shardc-lower-to-llvm",
                             "Lower rt step functions to the LLVM dialect",
                             buildRtToLLVMPipeline);
  PassPipelineRegistration<>(
      "shardc-lower", "Train and lower the nn forward graph to LLVM",
      [](OpPassManager &pm) { buildLoweringPipeline(pm, PipelineOptions()); });
}
