//===- NNDialect.h - the nn dialect -----------------------------*- C++ -*-===//
#ifndef SHARDC_DIALECTS_NN_NNDIALECT_H
#define SHARDC_DIALECTS_NN_NNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/nn/NNDialect.h.inc"
#include "dialects/nn/NNInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/nn/NNOps.h.inc"

namespace shardc::nn {
/// The runtime code of an elementwise math function (runtime/kernels.h:
/// unary), or -1 for an unknown name.
int64_t unaryCode(llvm::StringRef fn);
} // namespace shardc::nn

#endif // SHARDC_DIALECTS_NN_NNDIALECT_H
