//===- Linear.cpp - MatMul and Gemm ---------------------------------------===//
//
// MatMul (a linear layer when the right operand is a matrix, a batched
// matmul otherwise) and Gemm, as nn.linear.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/GraphImporter.h"
#include "frontends/onnx/OpRegistry.h"
#include "runtime/abi/abi.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::onnx_import;
using llvm::Error;
using llvm::Expected;

Error GraphImporter::matmul(const onnx::NodeProto &n) {
  // Of two tensors known at compile time (a rope table's inverse
  // frequencies times the positions): evaluated here.
  if (isConst(n.input(0)) && isConst(n.input(1))) {
    const HostTensor &x = constant(n.input(0)), &y = constant(n.input(1));
    auto shape = matMulShape(x.shape, y.shape);
    if (x.kind == Kind::Float && y.kind == Kind::Float && shape) {
      if (Error e = reserveFold(n, abi::checkedSize(*shape, 1)))
        return e;
      if (std::optional<HostTensor> r = evalMatMul(x, y)) {
        setConst(n.output(0), *r);
        return Error::success();
      }
    }
  }
  Expected<Value> a = floatValue(n, 0);
  if (!a)
    return a.takeError();
  Expected<Value> w = floatValue(n, 1);
  if (!w)
    return w.takeError();
  SmallVector<int64_t> as(shapeOf(*a)), bs(shapeOf(*w));
  if (as.empty() || bs.empty())
    return nodeError(n, "operands must have rank >= 1");
  // 1-D operands: a row vector on the left, a column vector on the right.
  bool vecA = as.size() == 1, vecB = bs.size() == 1;
  Value x = vecA ? reshape(*a, {1, as[0]}) : *a;
  Value y = vecB ? reshape(*w, {bs[0], 1}) : *w;
  as.assign(shapeOf(x).begin(), shapeOf(x).end());
  bs.assign(shapeOf(y).begin(), shapeOf(y).end());
  if (as.back() != bs[bs.size() - 2])
    return nodeError(n, "contraction sizes differ: " + llvm::Twine(as.back()) +
                            " and " + llvm::Twine(bs[bs.size() - 2]));
  Value out;
  if (bs.size() == 2) {
    // x [..., K] @ W [K, N]: a linear layer. A weight transposed by the
    // exporter (Transpose of [N, K]) is read in place.
    SmallVector<int64_t> shape(as);
    shape.back() = bs[1];
    auto t = y.getDefiningOp<nn::TransposeOp>();
    if (t && shapeOf(t.getInput()).size() == 2)
      out = nn::LinearOp::create(b, loc, type(shape), x, t.getInput(), Value(), false);
    else
      out = nn::LinearOp::create(b, loc, type(shape), x, y, Value(), true);
  } else {
    auto batch = broadcast(std::vector<int64_t>(as.begin(), as.end() - 2),
                           std::vector<int64_t>(bs.begin(), bs.end() - 2));
    if (!batch)
      return nodeError(n, "batch dimensions do not broadcast");
    SmallVector<int64_t> shape(batch->begin(), batch->end());
    shape.push_back(as[as.size() - 2]);
    shape.push_back(bs.back());
    out = nn::BatchMatmulOp::create(b, loc, type(shape), x, y, false, false);
  }
  SmallVector<int64_t> final(shapeOf(out));
  if (vecB)
    final.pop_back();
  if (vecA)
    final.erase(final.end() - (vecB ? 1 : 2));
  setValue(n.output(0), reshape(out, final));
  return Error::success();
}

Error GraphImporter::gemm(const onnx::NodeProto &n) {
  double alpha = attrFloat(n, "alpha", 1.0), beta = attrFloat(n, "beta", 1.0);
  bool transA = attrInt(n, "transA", 0), transB = attrInt(n, "transB", 0);
  Expected<Value> a = floatValue(n, 0);
  if (!a)
    return a.takeError();
  Expected<Value> w = floatValue(n, 1);
  if (!w)
    return w.takeError();
  if (shapeOf(*a).size() != 2 || shapeOf(*w).size() != 2)
    return nodeError(n, "A and B must be matrices");
  Value x = *a;
  if (transA)
    x = nn::TransposeOp::create(b, loc, type({shapeOf(x)[1], shapeOf(x)[0]}), x,
                                b.getDenseI64ArrayAttr({1, 0}));
  int64_t m = shapeOf(x)[0], k = shapeOf(x)[1];
  int64_t kb = shapeOf(*w)[transB ? 1 : 0], nOut = shapeOf(*w)[transB ? 0 : 1];
  if (k != kb)
    return nodeError(n, "contraction sizes differ: " + llvm::Twine(k) + " and " +
                            llvm::Twine(kb));
  Value bias;
  bool hasC = hasInput(n, 2);
  if (hasC && alpha == 1.0 && beta == 1.0 && shape_(n, 2) == std::vector<int64_t>{nOut}) {
    Expected<Value> c = floatValue(n, 2);
    if (!c)
      return c.takeError();
    bias = *c;
  }
  Value y = nn::LinearOp::create(b, loc, type({m, nOut}), x, *w, bias, !transB);
  if (alpha != 1.0)
    y = nn::MulOp::create(b, loc, type({m, nOut}), y, floatScalar(alpha));
  if (hasC && !bias) {
    Expected<Value> c = floatValue(n, 2);
    if (!c)
      return c.takeError();
    Value cv = *c;
    if (beta != 1.0)
      cv = nn::MulOp::create(b, loc, cv.getType(), cv, floatScalar(beta));
    // C broadcasts to the product's [M, N], not past it (a [3, N] C of a
    // one-row product is no Gemm's).
    auto shape = broadcast(shapeOf(cv).vec(), {m, nOut});
    if (!shape || *shape != std::vector<int64_t>{m, nOut}) {
      std::string dims;
      for (int64_t d : shapeOf(cv))
        dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      return nodeError(n, "C of shape [" + dims +
                              "] does not broadcast to [M, N] = [" +
                              llvm::Twine(m) + ", " + llvm::Twine(nOut) + "]");
    }
    y = nn::AddOp::create(b, loc, type({m, nOut}), y, cv);
  }
  setValue(n.output(0), y);
  return Error::success();
}

ArrayRef<OpInfo> shardc::onnx_import::linearOps() {
  // Op type, opsets, inputs, outputs, handler.
  // clang-format off
  static const OpInfo ops[] = {
      {"MatMul", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::matmul},
      {"Gemm", {13, 21}, {2, 3}, {1, 1}, &GraphImporter::gemm},
  };
  // clang-format on
  return ops;
}
