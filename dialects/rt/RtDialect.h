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

namespace shardc::rt {
/// The runtime ABI's code of an element type (runtime/abi/abi.h): f32, bf16,
/// f16, i32, i1 (bool, one byte) and i64; -1 for any other.
int64_t dtypeCode(mlir::Type type);
} // namespace shardc::rt

#endif // SHARDC_DIALECTS_RT_RTDIALECT_H
