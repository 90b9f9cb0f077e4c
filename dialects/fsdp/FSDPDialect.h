//===- FSDPDialect.h - the fsdp dialect -------------------------*- C++ -*-===//
#ifndef SHARDC_DIALECTS_FSDP_FSDPDIALECT_H
#define SHARDC_DIALECTS_FSDP_FSDPDIALECT_H

#include "dialects/nn/NNDialect.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectRegistry.h"

#include "dialects/fsdp/FSDPDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/fsdp/FSDPOps.h.inc"

namespace shardc::fsdp {
/// Gives upstream shard collectives the nn autodiff interface: the gradient
/// of an all-gather is a reduce-scatter (sum) over the same grid axes.
void registerShardAutodiffModels(mlir::DialectRegistry &registry);
} // namespace shardc::fsdp

#endif // SHARDC_DIALECTS_FSDP_FSDPDIALECT_H
