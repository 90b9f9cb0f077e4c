//===- Float8.cpp - convert-nn-to-rt: float8 GEMMs ------------------------===//
//
// A GEMM with a `float8` recipe (nn.linear, nn.matmul: nn-float8-linears)
// becomes a cast_fp8 per operand and one matmul_fp8 (kernels.def). The
// FP8 GEMM reads both operands K-major (TN, as Hopper's cuBLASLt requires),
// so an operand stored the other way round is transposed by its cast,
// not by a kernel of its own. What each operand is cast to, and how it is
// scaled, is the recipe's (dialects/nn/Float8.h). A tensor cast alike for
// several GEMMs is cast once; under tensorwise, an activation or gradient
// that GEMMs read in both layouts (a linear's input: the forward's x and
// the weight gradient's x^T; an output gradient: the input gradient's dy and
// the weight gradient's dy^T) is cast once into both, from one read of it.
// A weight is not: its transposed copy would live from forward to backward.
//
//===----------------------------------------------------------------------===//
#include "dialects/nn/Float8.h"
#include "passes/conversion/NNToRt/StepBuilder.h"

using namespace mlir;
using namespace shardc;

namespace shardc::lower {
namespace {

/// The tensor `v` is, under its reshapes (which keep its bytes).
Value castRoot(Value v) {
  while (auto reshape = v.getDefiningOp<nn::ReshapeOp>())
    v = reshape.getInput();
  return v;
}

/// Makes `cast` (a tensorwise cast_fp8 of [rows, cols], either layout) write
/// both layouts, the other one into a new buffer; returns that buffer.
Value castBothLayouts(StepBuilder &s, rt::KernelOp cast, int64_t rows,
                      int64_t cols) {
  namespace C = abi::cast_fp8;
  OpBuilder::InsertionGuard guard(s.b);
  s.b.setInsertionPoint(cast);
  Value other = rt::AllocOp::create(s.b, cast.getLoc(), rows * cols);
  bool wasTransposed = cast.getInts()[C::trans] != 0;
  SmallVector<Value> bufs(cast.getBuffers());
  // x q scale qt: q [rows, cols], qt [cols, rows].
  Value q = wasTransposed ? other : bufs[1];
  Value qt = wasTransposed ? bufs[1] : other;
  cast.getBuffersMutable().assign(ValueRange{bufs[0], q, bufs[2], qt});
  SmallVector<int64_t> ints(cast.getInts());
  ints[C::trans] = 0;
  ints[C::both] = 1;
  cast.setInts(ints);
  return other;
}

/// Casts `op` (stored [rows, cols], the reduction axis its columns unless
/// `kFirst`) to fp8 laid out [other, K]; returns the fp8 buffer and its
/// scales: those of an earlier cast of the same tensor alike if any, or,
/// tensorwise, the other layout of an earlier cast of an activation or a
/// gradient in the other layout, which then writes both.
std::pair<Value, Value> castOperand(StepBuilder &s, Location loc,
                                    const Float8Operand &op,
                                    StringRef recipe) {
  bool rowwise = nn::float8Rowwise(recipe);
  int64_t format = nn::float8Format(recipe, op.isGrad);
  Value root = castRoot(op.value);
  auto key = [&](bool kFirst) {
    return StepBuilder::Float8CastKey{root,   op.rows,        op.cols,
                                      format, rowwise ? 1 : 0, kFirst ? 1 : 0};
  };
  if (auto it = s.float8Casts.find(key(op.kFirst)); it != s.float8Casts.end())
    return {it->second.q, it->second.scale};
  if (!rowwise && !s.float8Weights.contains(root))
    if (auto it = s.float8Casts.find(key(!op.kFirst));
        it != s.float8Casts.end()) {
      StepBuilder::Float8Cast earlier = it->second;
      Value q = castBothLayouts(s, cast<rt::KernelOp>(earlier.kernel), op.rows,
                                op.cols);
      s.float8Casts[key(op.kFirst)] = {q, earlier.scale, earlier.kernel};
      return {q, earlier.scale};
    }
  int64_t outer = op.kFirst ? op.cols : op.rows;
  Value q = rt::AllocOp::create(s.b, loc, op.rows * op.cols);
  // Tensorwise: {s, 1/s}; rowwise a scale a row of q.
  Value scale = rt::AllocOp::create(s.b, loc, (rowwise ? outer : 2) * 4);
  s.kernel(loc, K::cast_fp8, {s.buf(op.value), q, scale},
           {op.rows, op.cols, format, rowwise ? 1 : 0, op.kFirst ? 1 : 0,
            /*both=*/0});
  Operation *kernel = &*std::prev(s.b.getInsertionPoint());
  s.float8Casts[key(op.kFirst)] = {q, scale, kernel};
  return {q, scale};
}

} // namespace

LogicalResult lowerFloat8Gemm(StepBuilder &s, Operation *gemm, StringRef recipe,
                              const Float8Operand &a, const Float8Operand &b,
                              Value bias, Value result) {
  Location loc = gemm->getLoc();
  // y[M,N] = a[M,K] b[N,K]^T once both are K-major.
  int64_t m = a.kFirst ? a.cols : a.rows, k = a.kFirst ? a.rows : a.cols;
  int64_t n = b.kFirst ? b.cols : b.rows;
  if ((b.kFirst ? b.rows : b.cols) != k)
    return gemm->emitOpError("float8: operands of reduction sizes ")
           << k << " and " << (b.kFirst ? b.rows : b.cols);
  for (const Float8Operand *op : {&a, &b})
    if (op->isWeight)
      s.float8Weights.insert(castRoot(op->value));
  auto [qa, sa] = castOperand(s, loc, a, recipe);
  auto [qb, sb] = castOperand(s, loc, b, recipe);
  SmallVector<Value> bufs = {qa, qb, sa, sb};
  if (bias)
    bufs.push_back(s.buf(bias));
  bufs.push_back(s.define(result));
  s.kernel(loc, K::matmul_fp8, bufs,
           {m, k, n, nn::float8Format(recipe, a.isGrad),
            nn::float8Format(recipe, b.isGrad),
            nn::float8Rowwise(recipe) ? 1 : 0, bias ? 1 : 0, /*y_f32=*/0});
  return success();
}

} // namespace shardc::lower
