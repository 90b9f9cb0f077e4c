//===- PropagateDtype.cpp - compute in bf16 from the bf16 parameters on ---===//
//
// nn-propagate-dtype: in the model function, in order, every op with a bf16
// operand computes in bf16 where the target's lowering of it is typed, and
// in f32 (its bf16 operands cast up) where it is not. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/conversion/NNToRt/StepBuilder.h"
#include "target/Attrs.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_NNPROPAGATEDTYPE
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

RankedTensorType floatTensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && isa<FloatType>(tensor.getElementType()) ? tensor : nullptr;
}

/// `v` as a tensor of `elt`: a constant converted at compile time (rounded
/// to nearest even), or an nn.cast before `at`.
Value convert(OpBuilder &b, Operation *at, Value v, Type elt) {
  auto type = cast<RankedTensorType>(v.getType()).clone(elt);
  if (auto c = v.getDefiningOp<nn::ConstantOp>())
    if (auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue())) {
      const llvm::fltSemantics &sem = cast<FloatType>(elt).getFloatSemantics();
      auto converted = dense.mapValues(elt, [&](const APFloat &x) {
        APFloat y = x;
        bool lost;
        y.convert(sem, APFloat::rmNearestTiesToEven, &lost);
        return y.bitcastToAPInt();
      });
      b.setInsertionPointAfter(c);
      return nn::ConstantOp::create(b, c.getLoc(), type, converted);
    }
  b.setInsertionPoint(at);
  return nn::CastOp::create(b, at->getLoc(), type, v, TypeAttr());
}

/// Whether `op` moves or converts any float type itself: casts, constants,
/// collectives, and ops without a lowering (left to convert-nn-to-rt's
/// error).
bool keepsItsTypes(Operation *op) {
  return isa<nn::CastOp, nn::ConstantOp>(op) ||
         op->getDialect()->getNamespace() != "nn";
}

/// Whether a float operand or result of `op` is bf16 (a result may be
/// while its operands have become f32).
bool touchesBf16(Operation *op) {
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
    if (RankedTensorType tensor = floatTensor(t))
      if (tensor.getElementType().isBF16())
        return true;
  return false;
}

/// A collective of activations follows its input: an all-gather moves the
/// input's type; a reduce-scatter sums in its kSumDtype (the input cast to
/// it; without one, in the input's type).
void propagateThroughCollective(OpBuilder &b, Operation *op) {
  if (op->getNumOperands() != 1 || op->getNumResults() != 1)
    return;
  RankedTensorType in = floatTensor(op->getOperand(0).getType());
  RankedTensorType out = floatTensor(op->getResult(0).getType());
  if (!in || !out)
    return;
  Type elt = in.getElementType();
  if (isa<shard::ReduceScatterOp>(op))
    if (auto sum = op->getAttrOfType<TypeAttr>(attrs::kSumDtype))
      elt = sum.getValue();
  if (elt == in.getElementType()) {
    op->getResult(0).setType(out.clone(elt));
    return;
  }
  // Summed in the reduce dtype, the activation goes on in its own: a bf16
  // model's residual stream stays bf16 whether a reduce-scatter starts it
  // (the vocabulary-parallel embedding's) or adds to it (a row-parallel
  // projection's, whose add rounds it anyway).
  op->setOperand(0, convert(b, op, op->getOperand(0), elt));
  Value sum = op->getResult(0);
  sum.setType(out.clone(elt));
  b.setInsertionPointAfter(op);
  auto back = nn::CastOp::create(b, op->getLoc(), out.clone(in.getElementType()),
                                 sum, TypeAttr());
  if (Attribute block = op->getAttr(attrs::kBlock))
    back->setAttr(attrs::kBlock, block);
  sum.replaceAllUsesExcept(back, back);
}

/// Results returned in bf16 where the function says f32 are cast back.
void restoreResultTypes(OpBuilder &b, func::FuncOp fn, Operation *ret) {
  ArrayRef<Type> want = fn.getFunctionType().getResults();
  for (OpOperand &operand : ret->getOpOperands()) {
    Type t = want[operand.getOperandNumber()];
    if (operand.get().getType() != t)
      operand.set(convert(b, ret, operand.get(),
                          cast<RankedTensorType>(t).getElementType()));
  }
}

struct NNPropagateDtypePass
    : public shardc::impl::NNPropagateDtypeBase<NNPropagateDtypePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const TargetDescription *desc = lookupTarget(target);
    if (!desc) {
      module.emitError("unknown target '")
          << target << "' (this shardc has: " << targetNames() << ")";
      return signalPassFailure();
    }
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal())
        propagateComputeDtype(fn, *desc);
  }
};

} // namespace

void shardc::propagateComputeDtype(func::FuncOp fn,
                                   const TargetDescription &target) {
  MLIRContext *ctx = fn.getContext();
  Type bf16 = BFloat16Type::get(ctx), f32 = Float32Type::get(ctx);
  bool computesBf16 = target.computes(abi::kBF16);
  OpBuilder b(ctx);
  fn.walk([&](Operation *op) {
    if (isa<func::ReturnOp>(op)) {
      restoreResultTypes(b, fn, op);
      return;
    }
    if (isa<shard::AllGatherOp, shard::ReduceScatterOp>(op) &&
        touchesBf16(op)) {
      propagateThroughCollective(b, op);
      return;
    }
    if (keepsItsTypes(op) || !touchesBf16(op))
      return;
    const lower::LoweringTable::Entry *entry = lower::lowerings().find(op);
    bool typed = computesBf16 && entry && entry->typed;
    Type elt = typed ? bf16 : f32;
    for (OpOperand &operand : op->getOpOperands()) {
      RankedTensorType t = floatTensor(operand.get().getType());
      if (t && t.getElementType() != elt)
        operand.set(convert(b, op, operand.get(), elt));
    }
    for (OpResult r : op->getResults())
      if (RankedTensorType t = floatTensor(r.getType()))
        r.setType(t.clone(elt));
  });
}
