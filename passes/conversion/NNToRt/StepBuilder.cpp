//===- StepBuilder.cpp - what convert-nn-to-rt's lowerings share ---------===//
#include "passes/conversion/NNToRt/StepBuilder.h"

using namespace mlir;
using namespace shardc;

namespace shardc::lower {

SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> shape, int64_t rank) {
  SmallVector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (int64_t i = rank - 1, j = int64_t(shape.size()) - 1; j >= 0; --i, --j) {
    strides[i] = shape[j] == 1 ? 0 : stride;
    stride *= shape[j];
  }
  return strides;
}

const LoweringTable &lowerings() {
  static const LoweringTable table = [] {
    LoweringTable t;
    addForwardLowerings(t);
    addBackwardLowerings(t);
    addTrainingLowerings(t);
    addCollectiveLowerings(t);
    addTensorLowerings(t);
    return t;
  }();
  return table;
}

Type computeType(Operation *op) {
  for (Type t : llvm::concat<Type>(op->getResultTypes(), op->getOperandTypes()))
    if (auto tensor = dyn_cast<RankedTensorType>(t))
      if (isa<FloatType>(tensor.getElementType()))
        return tensor.getElementType();
  return nullptr;
}

LogicalResult StepBuilder::lower(Operation *op) {
  const LoweringTable::Entry *entry = lowerings().find(op);
  if (!entry)
    return op->emitOpError("has no lowering to the rt dialect");
  if (failed(checkSupported(op, entry->typed)))
    return failure();
  current = op;
  return entry->fn(*this, op);
}

Value StepBuilder::define(Value result) {
  Value out = outputs.lookup(result);
  if (!out)
    out = rt::AllocOp::create(b, result.getLoc(), byteSize(result));
  buffers[result] = out;
  return out;
}

bool StepBuilder::onlyReadUpTo(Value buffer, Operation *op) {
  if (!buffer || !buffer.getDefiningOp<rt::AllocOp>())
    return false;
  for (auto &[tensor, bound] : buffers) {
    if (bound != buffer)
      continue;
    for (Operation *user : tensor.getUsers())
      if (user != op &&
          (user->getBlock() != op->getBlock() || !user->isBeforeInBlock(op)))
        return false;
  }
  return true;
}

void StepBuilder::kernel(Location loc, K id, ValueRange bufs,
                         ArrayRef<int64_t> ints, ArrayRef<double> floats) {
  for (Value buf : bufs) {
    auto it = pending.find(buf);
    if (it == pending.end())
      continue;
    rt::EventWaitOp::create(b, loc, ctx, it->second, /*stream=*/0);
    pending.erase(it);
  }
  // A typed kernel computes on the op's element type, passed as its dtype
  // integer (the last named one, before any variable part).
  const abi::KernelInfo &info = abi::kernelInfo(id);
  int64_t at = abi::dtypeArg(info);
  SmallVector<int64_t> args(ints);
  TypeAttr dtype;
  if (at >= 0) {
    Type type = current ? computeType(current) : Type();
    if (!type)
      type = b.getF32Type();
    args.insert(args.begin() + at, rt::dtypeCode(type));
    if (!type.isF32())
      dtype = TypeAttr::get(type);
  }
  rt::KernelOp::create(b, loc, ctx, info.name, bufs, args, floats,
                       abi::kComputeStream, dtype);
}

void StepBuilder::broadcastKernel(Operation *op, K id,
                                  ArrayRef<int64_t> extra) {
  Value res = op->getResult(0);
  ArrayRef<int64_t> out = tensorType(res).getShape();
  int64_t rank = out.size();
  // ints: [rank, out dims..., strides of each operand...] where a broadcast
  // dimension has stride 0.
  SmallVector<int64_t> ints = {rank};
  ints.append(out.begin(), out.end());
  SmallVector<Value> bufs;
  for (Value in : op->getOperands()) {
    ints.append(broadcastStrides(tensorType(in).getShape(), rank));
    bufs.push_back(buf(in));
  }
  bufs.push_back(define(res));
  ints.append(extra.begin(), extra.end());
  kernel(op->getLoc(), id, bufs, ints);
}

void StepBuilder::gather(Operation *op, Value input, Value result, int64_t axis,
                         int64_t subgroup) {
  Location loc = op->getLoc();
  Value in = buf(input);
  Value out = define(result);
  beforeCollective(loc);
  rt::AllGatherOp::create(b, loc, ctx, ValueRange{in}, ValueRange{out},
                          ValueRange{}, axis,
                          tensorType(input).getElementType(),
                          ArrayRef<int64_t>{tensorType(input).getNumElements()},
                          subgroup, groupOf(op), abi::kCommStream);
  afterCollective(loc, out);
}

void StepBuilder::beforeCollective(Location loc) {
  int64_t ready = nextEvent++;
  rt::EventRecordOp::create(b, loc, ctx, ready, abi::kComputeStream);
  rt::EventWaitOp::create(b, loc, ctx, ready, abi::kCommStream);
}

void StepBuilder::afterCollective(Location loc, Value out) {
  int64_t done = nextEvent++;
  rt::EventRecordOp::create(b, loc, ctx, done, abi::kCommStream);
  pending[out] = done;
}

IntegerAttr StepBuilder::groupOf(Operation *op) {
  return op->getAttrOfType<IntegerAttr>(attrs::kGroup);
}

FailureOr<int64_t> StepBuilder::axisOf(Operation *op, ArrayRef<int16_t> axes) {
  if (axes.size() != 1)
    return op->emitOpError("must act on exactly one grid axis");
  return int64_t(axes[0]);
}

LogicalResult StepBuilder::checkSupported(Operation *op, bool typed) {
  // Conversions and collectives move any float type; kernels compute in
  // the target's.
  if (isa<nn::CastOp, nn::ConstantOp, nn::EqualOp, shard::AllGatherOp,
          shard::ReduceScatterOp, shard::AllReduceOp, fsdp::ReshardOp,
          fsdp::GatherGroupOp>(op))
    return success();
  for (Type t :
       llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    Type elt = cast<RankedTensorType>(t).getElementType();
    int64_t code = rt::dtypeCode(elt);
    if (isa<FloatType>(elt) && !target.computes(code))
      return op->emitOpError("on ")
             << elt << " is not supported by the " << target.name
             << " target, which computes in " << target.computeTypeList();
    if (isa<FloatType>(elt) && !elt.isF32() && !typed)
      return op->emitOpError("on ")
             << elt << " has only f32 kernels (nn-propagate-dtype computes "
             << "it in f32)";
    if (isa<IntegerType>(elt) && !target.indexes(code) && !isa<nn::FillOp>(op))
      return op->emitOpError("on ")
             << elt << " is not supported by the " << target.name
             << " target (integer types: " << target.indexTypeList() << ")";
  }
  return success();
}

} // namespace shardc::lower
