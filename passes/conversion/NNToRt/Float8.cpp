//===- Float8.cpp - convert-nn-to-rt: float8 GEMMs ------------------------===//
//
// A GEMM with a `float8` recipe (nn.linear, nn.matmul: nn-float8-linears)
// becomes a cast_fp8 per operand and one matmul_fp8 (kernels.def). The
// FP8 GEMM reads both operands K-major (TN, as Hopper's cuBLASLt requires),
// so an operand stored the other way round is transposed by its cast,
// not by a kernel of its own. What each operand is cast to, and how it is
// scaled, is the recipe's (dialects/nn/Float8.h). A tensor cast alike for
// several GEMMs is cast once.
//
//===----------------------------------------------------------------------===//
#include "dialects/nn/Float8.h"
#include "passes/conversion/NNToRt/StepBuilder.h"

using namespace mlir;
using namespace shardc;

namespace shardc::lower {
namespace {

/// Casts `op` (stored [rows, cols], the reduction axis its columns unless
/// `kFirst`) to fp8 laid out [other, K]; returns the fp8 buffer and its
/// scales, those of an earlier cast of the same tensor alike if any.
std::pair<Value, Value> castOperand(StepBuilder &s, Location loc,
                                    const Float8Operand &op,
                                    StringRef recipe) {
  bool rowwise = nn::float8Rowwise(recipe);
  int64_t format = nn::float8Format(recipe, op.isGrad);
  Value root = op.value;
  while (auto reshape = root.getDefiningOp<nn::ReshapeOp>())
    root = reshape.getInput();
  StepBuilder::Float8CastKey key{root,   op.rows,      op.cols,
                                 format, rowwise ? 1 : 0, op.kFirst ? 1 : 0};
  if (auto it = s.float8Casts.find(key); it != s.float8Casts.end())
    return it->second;
  int64_t outer = op.kFirst ? op.cols : op.rows;
  Value q = rt::AllocOp::create(s.b, loc, op.rows * op.cols);
  Value scale =
      rt::AllocOp::create(s.b, loc, (rowwise ? outer : 1) * int64_t(4));
  s.kernel(loc, K::cast_fp8, {s.buf(op.value), q, scale},
           {op.rows, op.cols, format, rowwise ? 1 : 0, op.kFirst ? 1 : 0});
  return s.float8Casts[key] = {q, scale};
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
  auto [qa, sa] = castOperand(s, loc, a, recipe);
  auto [qb, sb] = castOperand(s, loc, b, recipe);
  SmallVector<Value> bufs = {qa, qb, sa, sb};
  if (bias)
    bufs.push_back(s.buf(bias));
  bufs.push_back(s.define(result));
  s.kernel(loc, K::matmul_fp8, bufs,
           {m, k, n, nn::float8Format(recipe, a.isGrad),
            nn::float8Format(recipe, b.isGrad),
            nn::float8Rowwise(recipe) ? 1 : 0, bias ? 1 : 0});
  return success();
}

} // namespace shardc::lower
