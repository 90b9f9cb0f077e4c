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

def FSDP_ReshardOp : Op<FSDP_Dialect, "reshard", [Pure]> {
  let summary = "keep this rank's 1/N of a gathered parameter";
  let description = [{
    FSDP2's `reshard_after_forward=N`: of the gathered `input` [rows, ...]
    (dim 0 split in N equal chunks), the result is chunk `k` where `k` is
    this rank's index on the shard axis modulo N: the ranks of each group of
    N consecutive ranks together hold the whole parameter.

    Example:
    ```mlir
    %kept = fsdp.reshard %full on @mesh grid_axes = [0] group_size = 2 : tensor<8x6xf32> -> tensor<4x6xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes, I64Attr:$group_size);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes `group_size` `=` $group_size
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_GatherGroupOp : Op<FSDP_Dialect, "gather_group", [Pure]> {
  let summary = "all-gather within groups of N consecutive ranks";
  let description = [{
    The inverse of `fsdp.reshard`: concatenates on dim 0 the chunks of the
    N ranks of this rank's group (consecutive on the shard axis), giving the
    gathered parameter back without leaving the group (intra-node).

    Example:
    ```mlir
    %full = fsdp.gather_group %kept on @mesh grid_axes = [0] group_size = 2 : tensor<4x6xf32> -> tensor<8x6xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes, I64Attr:$group_size);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes `group_size` `=` $group_size
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // SHARDC_FSDP_OPS
