//===- Elementwise.cpp - elementwise ONNX ops -----------------------------===//
//
// Add, Sub, Mul, Div, Pow and Equal (broadcasting), the unary math ops,
// Cast and Where: folded when their inputs are known at compile time,
// nn ops otherwise.
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

Error GraphImporter::binary(const onnx::NodeProto &n) {
  const std::string &op = n.op_type();
  if (isConst(n.input(0)) && isConst(n.input(1))) {
    if (auto r = evalBinary(op, constant(n.input(0)), constant(n.input(1)))) {
      setConst(n.output(0), *r);
      return Error::success();
    }
  }
  auto shape = broadcast(shape_(n, 0), shape_(n, 1));
  if (!shape)
    return nodeError(n, "operand shapes do not broadcast");
  if (op == "Equal") {
    Expected<Value> l = value(n.input(0)), r = value(n.input(1));
    if (!l || !r)
      return l ? r.takeError() : l.takeError();
    if (kindOf(*l) != kindOf(*r))
      return nodeError(n, "the operands differ in element type (ONNX's T is one type)");
    setValue(n.output(0), nn::EqualOp::create(b, loc, type(*shape, Kind::Bool), *l, *r));
    return Error::success();
  }
  Expected<Value> l = floatValue(n, 0);
  if (!l)
    return l.takeError();
  Expected<Value> r = floatValue(n, 1);
  if (!r)
    return r.takeError();
  RankedTensorType t = type(*shape);
  Value y;
  if (op == "Add")
    y = nn::AddOp::create(b, loc, t, *l, *r);
  else if (op == "Sub")
    y = nn::SubOp::create(b, loc, t, *l, *r);
  else if (op == "Mul")
    y = nn::MulOp::create(b, loc, t, *l, *r);
  else if (op == "Div")
    y = nn::DivOp::create(b, loc, t, *l, *r);
  else
    y = nn::PowOp::create(b, loc, t, *l, *r);
  setValue(n.output(0), y);
  return Error::success();
}

Error GraphImporter::unary(const onnx::NodeProto &n) {
  const std::string &op = n.op_type();
  bool allConst = allInputsConst(n);
  if (allConst)
    if (auto r = evalUnary(op, constant(n.input(0)))) {
      setConst(n.output(0), *r);
      return Error::success();
    }
  Expected<Value> x = floatValue(n, 0);
  if (!x)
    return x.takeError();
  Type t = x->getType();
  Value y = op == "Neg"          ? Value(nn::NegOp::create(b, loc, t, *x))
            : op == "Sqrt"       ? Value(nn::SqrtOp::create(b, loc, t, *x))
            : op == "Reciprocal" ? Value(nn::ReciprocalOp::create(b, loc, t, *x))
            : op == "Erf"        ? Value(nn::ErfOp::create(b, loc, t, *x))
            : op == "Tanh"       ? Value(nn::TanhOp::create(b, loc, t, *x))
            : op == "Relu"       ? Value(nn::ReluOp::create(b, loc, t, *x))
            : op == "Softplus"   ? Value(nn::SoftplusOp::create(b, loc, t, *x))
                                 : Value(nn::SigmoidOp::create(b, loc, t, *x));
  setValue(n.output(0), y);
  return Error::success();
}

// LeakyRelu: x > 0 ? x : alpha x (alpha 0.01 by default), as nn.leaky_relu;
// on a constant, evaluated with the same f32 arithmetic.
Error GraphImporter::leakyRelu(const onnx::NodeProto &n) {
  float alpha = float(attrFloat(n, "alpha", 0.01));
  if (allInputsConst(n) && constant(n.input(0)).kind == Kind::Float) {
    HostTensor r = constant(n.input(0));
    for (double &v : r.f) {
      float x = float(v);
      v = x > 0 ? x : x * alpha;
    }
    setConst(n.output(0), std::move(r));
    return Error::success();
  }
  Expected<Value> x = floatValue(n, 0);
  if (!x)
    return x.takeError();
  setValue(n.output(0), nn::LeakyReluOp::create(b, loc, x->getType(), *x,
                                                b.getF64FloatAttr(alpha)));
  return Error::success();
}

// Gelu (opset 20): approximate "none" (erf) or "tanh", as nn.gelu.
Error GraphImporter::geluNode(const onnx::NodeProto &n) {
  std::string approximate = attrString(n, "approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return nodeError(n, "approximate '" + approximate +
                            "' is not one of none, tanh");
  Expected<Value> x = floatValue(n, 0);
  if (!x)
    return x.takeError();
  setValue(n.output(0),
           nn::GeluOp::create(b, loc, x->getType(), *x, approximate));
  return Error::success();
}

Error GraphImporter::castNode(const onnx::NodeProto &n) {
  bool allConst = allInputsConst(n);
  int64_t to = attrInt(n, "to", 1);
  if (allConst) {
    setConst(n.output(0), evalCast(constant(n.input(0)), int32_t(to)));
    return Error::success();
  }
  Expected<Value> x = value(n.input(0));
  if (!x)
    return x.takeError();
  // f64, f16 and bf16 values are held in f32: a cast to DOUBLE keeps the
  // f32 value, one to FLOAT16 or BFLOAT16 rounds it to what that type keeps.
  int64_t asFloat = fileFloatDtype(int32_t(to));
  Kind target;
  if (to == onnx::TensorProto::FLOAT || asFloat >= 0)
    target = Kind::Float;
  else if (to == onnx::TensorProto::INT32 || to == onnx::TensorProto::INT64)
    target = Kind::Int;
  else if (to == onnx::TensorProto::BOOL)
    target = Kind::Bool;
  else
    return nodeError(n, "a runtime cast to " + typeName(int32_t(to)) +
                            " is not supported (float, double, float16, "
                            "bfloat16, int32/int64, bool)");
  Value y = *x;
  if (kindOf(y) != target)
    y = nn::CastOp::create(b, loc, type(shapeOf(y), target), y, TypeAttr());
  if (asFloat == shardc::abi::kF16)
    y = nn::RoundF16Op::create(b, loc, y.getType(), y);
  else if (asFloat == shardc::abi::kBF16)
    y = nn::RoundBf16Op::create(b, loc, y.getType(), y);
  setValue(n.output(0), y);
  return Error::success();
}

Error GraphImporter::isNan(const onnx::NodeProto &n) {
  if (isConst(n.input(0))) {
    const HostTensor &x = constant(n.input(0));
    HostTensor r;
    r.kind = Kind::Bool;
    r.shape = x.shape;
    for (double v : x.f)
      r.i.push_back(std::isnan(v));
    if (x.kind != Kind::Float)
      r.i.assign(x.numel(), 0);
    setConst(n.output(0), std::move(r));
    return Error::success();
  }
  if (kind(n.input(0)) != Kind::Float)
    return nodeError(n, "the input must be a floating-point tensor");
  isNanOf[n.output(0)] = n.input(0);
  return Error::success();
}

Error GraphImporter::where(const onnx::NodeProto &n) {
  // Where(IsNaN(x), 0, x): x with its NaNs zeroed (the dynamo exporter's
  // scaled_dot_product_attention, after the softmax).
  if (auto nan = isNanOf.find(n.input(0)); nan != isNanOf.end()) {
    bool zero = isConst(n.input(1)) && constant(n.input(1)).kind == Kind::Float &&
                llvm::all_of(constant(n.input(1)).f, [](double v) { return v == 0; });
    if (n.input(2) != nan->second || !zero || shape_(n, 1).size() > shape_(n, 2).size())
      return nodeError(n, "IsNaN of a tensor computed at runtime is supported only as "
                          "Where(IsNaN(x), 0, x)");
    Expected<Value> x = floatValue(n, 2);
    if (!x)
      return x.takeError();
    setValue(n.output(0), nn::NanToZeroOp::create(b, loc, x->getType(), *x));
    return Error::success();
  }
  if (kind(n.input(0)) != Kind::Bool)
    return nodeError(n, "the condition must be bool");
  bool allConst = allInputsConst(n);
  if (allConst && kind(n.input(1)) == kind(n.input(2))) {
    auto s = broadcast(shape_(n, 0), shape_(n, 1));
    if (!s || !broadcast(*s, shape_(n, 2)))
      return nodeError(n, "operand shapes do not broadcast");
    setConst(n.output(0), evalWhere(constant(n.input(0)), constant(n.input(1)),
                                    constant(n.input(2))));
    return Error::success();
  }
  auto s = broadcast(shape_(n, 0), shape_(n, 1));
  if (!s || !(s = broadcast(*s, shape_(n, 2))))
    return nodeError(n, "operand shapes do not broadcast");
  Expected<Value> c = value(n.input(0));
  if (!c)
    return c.takeError();
  Expected<Value> x = floatValue(n, 1);
  if (!x)
    return x.takeError();
  Expected<Value> y = floatValue(n, 2);
  if (!y)
    return y.takeError();
  setValue(n.output(0), nn::WhereOp::create(b, loc, type(*s), *c, *x, *y));
  return Error::success();
}

ArrayRef<OpInfo> shardc::onnx_import::elementwiseOps() {
  // Op type, opsets, inputs, outputs, handler.
  // clang-format off
  static const OpInfo ops[] = {
      {"Add", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::binary},
      {"Sub", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::binary},
      {"Mul", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::binary},
      {"Div", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::binary},
      {"Pow", {7, 21}, {2, 2}, {1, 1}, &GraphImporter::binary},
      {"Equal", {13, 21}, {2, 2}, {1, 1}, &GraphImporter::binary},
      {"Neg", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::unary},
      {"Sqrt", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::unary},
      {"Reciprocal", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::unary},
      {"Erf", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::unary},
      {"Tanh", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::unary},
      {"Sigmoid", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::unary},
      {"Relu", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::unary},
      {"Softplus", {1, 21}, {1, 1}, {1, 1}, &GraphImporter::unary},
      {"LeakyRelu", {6, 21}, {1, 1}, {1, 1}, &GraphImporter::leakyRelu},
      {"IsNaN", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::isNan},
      {"Gelu", {20, 21}, {1, 1}, {1, 1}, &GraphImporter::geluNode},
      {"Cast", {13, 21}, {1, 1}, {1, 1}, &GraphImporter::castNode},
      {"Where", {13, 21}, {3, 3}, {1, 1}, &GraphImporter::where},
  };
  // clang-format on
  return ops;
}
