//===- Pipelines.cpp - shardc pass pipelines ------------------------------===//
#include "compiler/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"

using namespace mlir;

void shardc::buildNNToRtPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createConvertNNToRt());
  pm.addNestedPass<func::FuncOp>(createRtPlanMemory());
}

void shardc::buildRtToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createConvertRtToLLVM());
  pm.addPass(createCanonicalizerPass());
}

void shardc::buildLoweringPipeline(OpPassManager &pm) {
  buildNNToRtPipeline(pm);
  buildRtToLLVMPipeline(pm);
}

void shardc::registerPipelines() {
  PassPipelineRegistration<>("shardc-lower-to-rt",
                             "Lower the nn forward graph to a planned rt step",
                             buildNNToRtPipeline);
  PassPipelineRegistration<>("shardc-lower-to-llvm",
                             "Lower rt step functions to the LLVM dialect",
                             buildRtToLLVMPipeline);
  PassPipelineRegistration<>("shardc-lower",
                             "Lower the nn forward graph to the LLVM dialect",
                             buildLoweringPipeline);
}
