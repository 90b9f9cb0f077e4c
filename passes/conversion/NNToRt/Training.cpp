//===- Training.cpp
//----------------------------------------------------------===//
//
// convert-nn-to-rt: gradient accumulation, clipping and theoptimizers.
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

LogicalResult lowerAccumulate(StepBuilder &s, nn::AccumulateOp a) {
  Location loc = a.getLoc();
  Value acc = s.buf(a.getAcc()), g = s.buf(a.getGrad()),
        ctl = s.buf(a.getControl());
  s.kernel(loc, K::accumulate, {acc, g, ctl, s.define(a.getResult())},
           {tensorType(a.getAcc()).getNumElements()});
  return success();
}

LogicalResult lowerSquaredNorm(StepBuilder &s, nn::SquaredNormOp sq) {
  Location loc = sq.getLoc();
  Value x = s.buf(sq.getInput());
  s.kernel(loc, K::squared_norm, {x, s.define(sq.getResult())},
           {tensorType(sq.getInput()).getNumElements()});
  return success();
}

LogicalResult lowerClipCoef(StepBuilder &s, nn::ClipCoefOp c) {
  Location loc = c.getLoc();
  Value sq = s.buf(c.getSquaredNorm()), mx = s.buf(c.getMaxNorm());
  s.kernel(loc, K::clip_coef, {sq, mx, s.define(c.getResult())}, {});
  return success();
}

LogicalResult lowerAdamW(StepBuilder &s, nn::AdamWOp a) {
  Location loc = a.getLoc();
  RankedTensorType t = tensorType(a.getParam());
  SmallVector<Value> bufs = {s.buf(a.getParam()),  s.buf(a.getGrad()),
                             s.buf(a.getExpAvg()), s.buf(a.getExpAvgSq()),
                             s.buf(a.getHyper()),  s.buf(a.getGradScale())};
  bufs.push_back(s.define(a.getNewParam()));
  bufs.push_back(s.define(a.getNewExpAvg()));
  bufs.push_back(s.define(a.getNewExpAvgSq()));
  s.kernel(loc, K::adamw, bufs, {t.getNumElements(), t.getRank() == 1 ? 1 : 0});
  return success();
}

LogicalResult lowerSGD(StepBuilder &s, nn::SGDOp a) {
  Location loc = a.getLoc();
  RankedTensorType t = tensorType(a.getParam());
  SmallVector<Value> bufs = {s.buf(a.getParam()), s.buf(a.getGrad()),
                             s.buf(a.getMomentumBuffer()), s.buf(a.getHyper()),
                             s.buf(a.getGradScale())};
  bufs.push_back(s.define(a.getNewParam()));
  bufs.push_back(s.define(a.getNewMomentumBuffer()));
  s.kernel(loc, K::sgd, bufs, {t.getNumElements(), t.getRank() == 1 ? 1 : 0});
  return success();
}

} // namespace

void addTrainingLowerings(LoweringTable &table) {
  table.add(lowerAccumulate);
  table.add(lowerSquaredNorm);
  table.add(lowerClipCoef);
  table.add(lowerAdamW);
  table.add(lowerSGD);
}

} // namespace shardc::lower
