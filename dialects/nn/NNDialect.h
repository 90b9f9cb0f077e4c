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

#endif // SHARDC_DIALECTS_NN_NNDIALECT_H
