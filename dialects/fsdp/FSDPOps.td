//===- FSDPOps.td - the fsdp dialect -------------------------*- tablegen -*-===//
#ifndef SHARDC_FSDP_OPS
#define SHARDC_FSDP_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialects/nn/NNInterfaces.td"

def FSDP_Dialect : Dialect {
  let name = "fsdp";
  let summary = "FSDP parameter lifecycle on a shard.grid";
  let description = [{
    What upstream `shard` lacks for FSDP: ops whose gradient is a collective
    (the parameter lifecycle is otherwise expressed with `shard.all_gather`,
    `shard.reduce_scatter` and `shard.all_reduce`).
  }];
  let cppNamespace = "::shardc::fsdp";
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def FSDP_SyncGradOp : Op<FSDP_Dialect, "sync_grad",
    [Pure, SameOperandsAndResultType,
     DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "identity whose gradient is all-reduced over grid axes";
  let description = [{
    Forward: the input. Backward: the gradient summed over the devices of
    `grid_axes` (`shard.all_reduce`). Marks a parameter replicated over
    those axes (the replicate axis of HSDP), so that its gradients agree.

    Example:
    ```mlir
    %p = fsdp.sync_grad %shard on @mesh grid_axes = [0] : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($input)
  }];
}

#endif // SHARDC_FSDP_OPS
