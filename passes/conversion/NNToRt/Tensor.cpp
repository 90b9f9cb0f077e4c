//===- Tensor.cpp
//------------------------------------------------------------===//
//
// convert-nn-to-rt: the generic tensor ops of imported ONNXmodels.
//
// One lowering function per op (passes/conversion/NNToRt/StepBuilder.h): each reads the
// op's operand shapes and writes rt.kernel calls whose arguments follow
// runtime/abi/kernels.def.
//
//===----------------------------------------------------------------------===//
#include "passes/conversion/NNToRt/StepBuilder.h"

using namespace mlir;
using namespace shardc;

namespace shardc::lower {
namespace {

LogicalResult lowerSub(StepBuilder &s, nn::SubOp op) {
  s.broadcastKernel(op, K::sub);
  return success();
}

LogicalResult lowerDiv(StepBuilder &s, nn::DivOp op) {
  s.broadcastKernel(op, K::div);
  return success();
}

LogicalResult lowerPow(StepBuilder &s, nn::PowOp op) {
  s.broadcastKernel(op, K::pow);
  return success();
}

LogicalResult lowerWhere(StepBuilder &s, nn::WhereOp op) {
  s.broadcastKernel(op, K::where);
  return success();
}

LogicalResult lowerEqual(StepBuilder &s, nn::EqualOp op) {
  s.broadcastKernel(op, K::equal,
                    {rt::dtypeCode(tensorType(op.getLhs()).getElementType())});
  return success();
}

/// The elementwise functions of the unary kernel, by name.
LogicalResult lowerUnary(StepBuilder &s, Operation *op) {
  Location loc = op->getLoc();
  Value x = s.buf(op->getOperand(0));
  s.kernel(loc, K::unary, {x, s.define(op->getResult(0))},
           {tensorType(op->getResult(0)).getNumElements(),
            abi::unaryFnCode(op->getName().stripDialect())});
  return success();
}

LogicalResult lowerBroadcastTo(StepBuilder &s, nn::BroadcastToOp op) {
  s.broadcastKernel(op, K::broadcast);
  return success();
}

LogicalResult lowerBatchMatmul(StepBuilder &s, nn::BatchMatmulOp mm) {
  Location loc = mm.getLoc();
  // ints: [M, K, N, trans_a, trans_b, R, batch dims[R], a matrix
  // strides[R], b matrix strides[R]] (0 where broadcast).
  ArrayRef<int64_t> a = tensorType(mm.getLhs()).getShape();
  ArrayRef<int64_t> c = tensorType(mm.getResult()).getShape();
  int64_t m = c[c.size() - 2], n = c[c.size() - 1];
  int64_t k = a[a.size() - (mm.getTransposeA() ? 2 : 1)];
  ArrayRef<int64_t> batch = c.drop_back(2);
  int64_t rank = batch.size();
  SmallVector<int64_t> ints = {
      m, k, n, mm.getTransposeA() ? 1 : 0, mm.getTransposeB() ? 1 : 0, rank};
  ints.append(batch.begin(), batch.end());
  for (Value v : {mm.getLhs(), mm.getRhs()})
    ints.append(broadcastStrides(tensorType(v).getShape().drop_back(2), rank));
  Value l = s.buf(mm.getLhs()), r = s.buf(mm.getRhs());
  s.kernel(loc, K::batch_matmul, {l, r, s.define(mm.getResult())}, ints);
  return success();
}

LogicalResult lowerConcat(StepBuilder &s, nn::ConcatOp cat) {
  Location loc = cat.getLoc();
  ArrayRef<int64_t> out = tensorType(cat.getResult()).getShape();
  int64_t dim = cat.getDim(), start = 0;
  Value y = s.define(cat.getResult());
  for (Value in : cat.getInputs()) {
    int64_t size = tensorType(in).getDimSize(dim);
    s.kernel(loc, K::concat_part, {s.buf(in), y},
             {product(out.take_front(dim)), size, out[dim], start,
              product(out.drop_front(dim + 1))});
    start += size;
  }
  return success();
}

LogicalResult lowerTrilu(StepBuilder &s, nn::TriluOp t) {
  Location loc = t.getLoc();
  ArrayRef<int64_t> shape = tensorType(t.getInput()).getShape();
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  Value x = s.buf(t.getInput());
  s.kernel(loc, K::trilu, {x, s.define(t.getResult())},
           {product(shape.drop_back(2)), rows, cols, t.getUpper() ? 1 : 0,
            t.getK()});
  return success();
}

LogicalResult lowerLeakyRelu(StepBuilder &s, nn::LeakyReluOp r) {
  Location loc = r.getLoc();
  Value x = s.buf(r.getInput());
  s.kernel(loc, K::leaky_relu, {x, s.define(r.getResult())},
           {tensorType(r.getInput()).getNumElements()},
           {r.getAlpha().convertToDouble()});
  return success();
}

} // namespace

void addTensorLowerings(LoweringTable &table) {
  table.add(lowerSub);
  table.add(lowerDiv);
  table.add(lowerPow);
  table.add(lowerWhere);
  table.add(lowerEqual);
  table
      .addAll<nn::SqrtOp, nn::ErfOp, nn::TanhOp, nn::SigmoidOp, nn::NegOp,
              nn::ReciprocalOp, nn::ExpOp, nn::LogOp, nn::ReluOp,
              nn::SoftplusOp, nn::NanToZeroOp, nn::RoundF16Op, nn::RoundBf16Op>(
          lowerUnary);
  table.add(lowerBroadcastTo);
  table.add(lowerBatchMatmul);
  table.addTyped(lowerConcat);
  table.add(lowerTrilu);
  table.add(lowerLeakyRelu);
}

} // namespace shardc::lower
