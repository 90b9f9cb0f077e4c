//===- RtDialect.h - the rt dialect -----------------------------*- C++ -*-===//
#ifndef SHARDC_DIALECTS_RT_RTDIALECT_H
#define SHARDC_DIALECTS_RT_RTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/rt/RtDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/rt/RtTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/rt/RtOps.h.inc"

#endif // SHARDC_DIALECTS_RT_RTDIALECT_H
