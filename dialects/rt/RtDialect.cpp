//===- RtDialect.cpp - the rt dialect -------------------------------------===//
#include "dialects/rt/RtDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace shardc::rt;

#include "dialects/rt/RtDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/rt/RtTypes.cpp.inc"

void RtDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/rt/RtTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/rt/RtOps.cpp.inc"
      >();
}

LogicalResult AllocOp::verify() {
  int64_t size = getSize();
  if (size <= 0)
    return emitOpError("size must be positive, got ") << size;
  return success();
}

LogicalResult ViewOp::verify() {
  int64_t offset = getOffset();
  if (offset < 0)
    return emitOpError("offset must be non-negative, got ") << offset;
  return success();
}

LogicalResult KernelOp::verify() {
  if (getName().empty())
    return emitOpError("needs a kernel name");
  for (char c : getName())
    if (!llvm::isAlnum(c) && c != '_')
      return emitOpError("kernel name '")
             << getName() << "' must be an identifier";
  if (int64_t(getStream()) < 0)
    return emitOpError("stream must be non-negative");
  return success();
}

#define GET_OP_CLASSES
#include "dialects/rt/RtOps.cpp.inc"
