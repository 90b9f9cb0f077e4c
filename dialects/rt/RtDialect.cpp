//===- RtDialect.cpp - the rt dialect -------------------------------------===//
#include "dialects/rt/RtDialect.h"

#include "runtime/abi/abi.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace shardc;
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

int64_t shardc::rt::dtypeCode(Type t) {
  if (t.isF32())
    return abi::kF32;
  if (t.isBF16())
    return abi::kBF16;
  if (t.isF16())
    return abi::kF16;
  if (t.isInteger(32))
    return abi::kI32;
  if (t.isInteger(1))
    return abi::kBool;
  if (t.isInteger(64))
    return abi::kI64;
  if (t.isF64())
    return abi::kF64;
  if (isa<Float8E4M3FNType>(t))
    return abi::kF8E4M3;
  if (isa<Float8E5M2Type>(t))
    return abi::kF8E5M2;
  return -1;
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
  if (std::optional<int64_t> size = getSize(); size && *size < 0)
    return emitOpError("size must be non-negative, got ") << *size;
  if (auto alloc = getBase().getDefiningOp<AllocOp>()) {
    int64_t end = offset + getSize().value_or(0);
    if (end > int64_t(alloc.getSize()))
      return emitOpError("spans bytes ")
             << offset << " to " << end << " of a buffer of "
             << alloc.getSize();
  }
  return success();
}

static LogicalResult verifyDtype(KernelOp op, const abi::KernelInfo &info);

LogicalResult KernelOp::verify() {
  if (int64_t(getStream()) < 0 || int64_t(getStream()) >= abi::kNumStreams)
    return emitOpError("stream ") << getStream() << " is not one of the "
                                  << int64_t(abi::kNumStreams) << " runtime streams";
  const abi::KernelInfo *info = abi::lookupKernel(getName().str());
  if (!info)
    return emitOpError("unknown kernel '")
           << getName() << "' (the kernels are listed in "
           << "runtime/abi/kernels.def)";
  ArrayRef<int64_t> ints = getInts();
  std::string wrong =
      abi::checkKernelArgs(*info, getBuffers().size(), ints.data(),
                           ints.size(), getFloats().size());
  if (!wrong.empty())
    return emitOpError("kernel '")
           << getName() << "' " << wrong << "; expected "
           << abi::kernelLayout(*info);
  return verifyDtype(*this, *info);
}

Type KernelOp::getComputeType() {
  if (std::optional<Type> t = getDtype())
    return *t;
  return Float32Type::get(getContext());
}

/// A typed kernel's dtype attribute and its `dtype` integer agree, on f32
/// or bf16; an untyped kernel has no dtype other than f32.
static LogicalResult verifyDtype(KernelOp op, const abi::KernelInfo &info) {
  Type type = op.getComputeType();
  int64_t at = abi::dtypeArg(info);
  if (at < 0) {
    if (!type.isF32())
      return op.emitOpError("kernel '")
             << op.getName() << "' is not typed (it has no dtype integer in "
             << "runtime/abi/kernels.def) and computes in f32, not " << type;
    return success();
  }
  if (!type.isF32() && !type.isBF16())
    return op.emitOpError("kernel '")
           << op.getName() << "' computes on f32 or bf16, not " << type;
  int64_t code = dtypeCode(type);
  if (op.getInts()[at] != code)
    return op.emitOpError("kernel '")
           << op.getName() << "' has dtype " << type << " (code " << code
           << ") but its dtype integer is " << op.getInts()[at];
  return success();
}

/// The runtime's code of a collective's element type: f32 or bf16, and for
/// an all-gather (`bytes`: it only moves them) also fp8 (f8E4M3FN, f8E5M2).
static LogicalResult verifyCollective(Operation *op, int64_t axis, Type dtype,
                                      int64_t stream, bool bytes = false) {
  if (axis < 0 || axis > 2)
    return op->emitOpError("axis must be 0, 1 or 2 (a mesh has at most "
                           "three: replicate, shard, tp), got ")
           << axis;
  bool fp8 = isa<Float8E4M3FNType, Float8E5M2Type>(dtype);
  if (!dtype.isF32() && !dtype.isBF16() && !(bytes && fp8))
    return op->emitOpError(bytes ? "moves f32, bf16 or fp8 (f8E4M3FN, "
                                   "f8E5M2) data, not "
                                 : "moves f32 or bf16 data, not ")
           << dtype;
  if (stream < 0 || stream >= abi::kNumStreams)
    return op->emitOpError("stream ") << stream << " is not one of the "
                                      << int64_t(abi::kNumStreams)
                                      << " runtime streams";
  return success();
}

LogicalResult AllGatherOp::verify() {
  if (failed(verifyCollective(*this, getAxis(), getDtype(), getStream(),
                              /*bytes=*/true)))
    return failure();
  size_t n = getInputs().size();
  if (n == 0 || getOutputs().size() != n || getCounts().size() != n)
    return emitOpError("needs one output and one count per input, got ")
           << n << " inputs, " << getOutputs().size() << " outputs and "
           << getCounts().size() << " counts";
  if (llvm::any_of(getCounts(), [](int64_t c) { return c <= 0; }))
    return emitOpError("counts must be positive");
  if (int64_t(getSubgroup()) < 0)
    return emitOpError("subgroup must be non-negative");
  size_t wantScratch = n > 1 ? 2 : 0;
  if (getScratch().size() != wantScratch)
    return emitOpError("gathering ")
           << n << " inputs needs " << wantScratch
           << " scratch buffers (pack, gathered), got " << getScratch().size();
  if (n > 1 && getSubgroup() != 0)
    return emitOpError("gathers one input within a subgroup");
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyCollective(*this, getAxis(), getDtype(), getStream())))
    return failure();
  if (getCount() <= 0)
    return emitOpError("count must be positive");
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (failed(verifyCollective(*this, getAxis(), getDtype(), getStream())))
    return failure();
  if (!getDtype().isF32())
    return emitOpError("sums f32 data only");
  if (getCount() <= 0)
    return emitOpError("count must be positive");
  return success();
}

#define GET_OP_CLASSES
#include "dialects/rt/RtOps.cpp.inc"
