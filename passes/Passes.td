//===- Passes.td - shardc passes -----------------------------*- tablegen -*-===//
#ifndef SHARDC_PASSES
#define SHARDC_PASSES

include "mlir/Pass/PassBase.td"

def ConvertNNToRt : Pass<"convert-nn-to-rt", "mlir::ModuleOp"> {
  let summary = "Lower the nn forward graph to an rt step function";
  let description = [{
    Turns the model function (arguments tagged `nn.param` or `nn.input`, one
    scalar loss result) into `shardc_step(ctx, params, io, arena)`: parameters
    and inputs/outputs become views at fixed byte offsets of their regions,
    every intermediate tensor an `rt.alloc`, every nn op one or more
    `rt.kernel` calls of the CPU/CUDA backend ABI. Reshapes alias their
    input's buffer. The layout of the regions is recorded in the step
    function's `rt.manifest` attribute, which the runtime reads.
  }];
  let dependentDialects = ["::shardc::rt::RtDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"entryName", "entry", "std::string", "\"forward\"",
           "name of the nn model function to lower">,
  ];
}

def RtPlanMemory : Pass<"rt-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Place transient buffers in one arena by liveness";
  let description = [{
    Replaces every `rt.alloc` of a step function by an `rt.view` of its
    arena argument (the last argument) at an offset chosen so that buffers
    whose live ranges overlap never share bytes (greedy, largest first,
    lowest fitting offset, 64-byte aligned). Records the arena size in the
    manifest as `arena_bytes`: the planned peak of transient memory.
  }];
}

def ConvertRtToLLVM : Pass<"convert-rt-to-llvm", "mlir::ModuleOp"> {
  let summary = "Lower rt step functions to the LLVM dialect";
  let description = [{
    Buffers and the context become `!llvm.ptr`; views become byte GEPs;
    kernels become calls `shardc_k_<name>(ctx, buffers, ints, floats, stream)` with
    the buffers in a stack array and the constant arguments in private
    globals; events become calls of `shardc_event_record/wait`. The
    manifest becomes the NUL-terminated JSON global `shardc_manifest`.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // SHARDC_PASSES
