//===- HostTensor.cpp - compile-time evaluation of ONNX ops ---------------===//
#include "frontends/onnx/HostTensor.h"
#include "frontends/onnx/HostTensorDetail.h"
#include "runtime/math.h"

#include <algorithm>
#include <cmath>

using namespace shardc::onnx_import;
using namespace shardc::onnx_import::host_detail;

int64_t HostTensor::numel() const { return product(shape); }

bool HostTensor::isFinite() const {
  return std::all_of(f.begin(), f.end(), [](double v) { return std::isfinite(v); });
}

std::vector<int64_t> HostTensor::ints() const {
  std::vector<int64_t> r;
  for (int64_t k = 0; k < numel(); ++k)
    r.push_back(intAt(k));
  return r;
}

HostTensor HostTensor::floats(std::vector<int64_t> shape, std::vector<double> v) {
  HostTensor t;
  t.kind = Kind::Float;
  t.onnxType = 1;
  t.shape = std::move(shape);
  t.f = std::move(v);
  return t;
}

HostTensor HostTensor::integers(std::vector<int64_t> shape, std::vector<int64_t> v) {
  HostTensor t;
  t.kind = Kind::Int;
  t.onnxType = 7;
  t.shape = std::move(shape);
  t.i = std::move(v);
  return t;
}

HostTensor HostTensor::bools(std::vector<int64_t> shape, std::vector<int64_t> v) {
  HostTensor t = integers(std::move(shape), std::move(v));
  t.kind = Kind::Bool;
  t.onnxType = 9;
  return t;
}

std::optional<std::vector<int64_t>>
shardc::onnx_import::broadcast(const std::vector<int64_t> &a,
                               const std::vector<int64_t> &b) {
  std::vector<int64_t> r(std::max(a.size(), b.size()));
  for (size_t k = 0; k < r.size(); ++k) {
    int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1;
    int64_t y = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (x != y && x != 1 && y != 1)
      return std::nullopt;
    r[r.size() - 1 - k] = x == 1 ? y : x;
  }
  return r;
}

std::optional<HostTensor> shardc::onnx_import::evalBinary(const std::string &op,
                                                          const HostTensor &a,
                                                          const HostTensor &b) {
  auto shape = broadcast(a.shape, b.shape);
  if (!shape || (a.kind == Kind::Float) != (b.kind == Kind::Float))
    return std::nullopt;
  bool isFloat = a.kind == Kind::Float;
  HostTensor r = like(a, *shape);
  if (op == "Equal") {
    r.kind = Kind::Bool;
    r.onnxType = 9;
  }
  int64_t n = product(*shape);
  for (int64_t k = 0; k < n; ++k) {
    int64_t ia = sourceIndex(a.shape, *shape, k), ib = sourceIndex(b.shape, *shape, k);
    if (op == "Equal") {
      r.i.push_back(isFloat ? a.f[ia] == b.f[ib] : a.i[ia] == b.i[ib]);
      continue;
    }
    if (isFloat) {
      // f32 semantics (f64 for DOUBLE tensors): operands and the result are
      // values of that type.
      std::optional<double> z = a.onnxType == 11
                                    ? floatArith(op, a.f[ia], b.f[ib])
                                    : floatArith(op, float(a.f[ia]), float(b.f[ib]));
      if (!z)
        return std::nullopt;
      r.f.push_back(*z);
    } else {
      int64_t x = a.i[ia], y = b.i[ib];
      if (op == "Add")
        r.i.push_back(wrapAdd(x, y));
      else if (op == "Sub")
        r.i.push_back(wrapSub(x, y));
      else if (op == "Mul")
        r.i.push_back(wrapMul(x, y));
      else if (op == "Div") {
        if (y == 0)
          return std::nullopt;
        r.i.push_back(y == -1 ? wrapNeg(x) : x / y);
      } else if (op == "Pow")
        r.i.push_back(HostTensor::toInt64(std::pow(double(x), double(y))));
      else
        return std::nullopt;
    }
  }
  return r;
}

std::optional<HostTensor> shardc::onnx_import::evalUnary(const std::string &op,
                                                         const HostTensor &a) {
  HostTensor r = like(a, a.shape);
  if (a.kind != Kind::Float) {
    if (op != "Neg")
      return std::nullopt;
    for (int64_t v : a.i)
      r.i.push_back(wrapNeg(v));
    return r;
  }
  for (double v : a.f) {
    float x = float(v);
    double y;
    if (op == "Neg")
      y = -x;
    else if (op == "Sqrt")
      y = std::sqrt(x);
    else if (op == "Reciprocal")
      y = 1.0 / x;
    else if (op == "Erf")
      y = std::erf(x);
    else if (op == "Tanh")
      y = std::tanh(x);
    else if (op == "Sigmoid")
      y = 1.0 / (1.0 + std::exp(-double(x)));
    else if (op == "Exp")
      y = std::exp(x);
    else if (op == "Log")
      y = std::log(x);
    else if (op == "Relu")
      y = x > 0 ? x : 0.0f;
    else if (op == "Softplus")
      y = x > 20 ? double(x) : std::log1p(std::exp(double(x)));
    else
      return std::nullopt;
    r.f.push_back(double(float(y)));
  }
  return r;
}

HostTensor shardc::onnx_import::evalWhere(const HostTensor &c, const HostTensor &x,
                                          const HostTensor &y) {
  std::vector<int64_t> shape = *broadcast(*broadcast(c.shape, x.shape), y.shape);
  HostTensor r = like(x, shape);
  for (int64_t k = 0; k < product(shape); ++k) {
    bool pick = c.i[sourceIndex(c.shape, shape, k)] != 0;
    const HostTensor &src = pick ? x : y;
    push(r, src, sourceIndex(src.shape, shape, k));
  }
  return r;
}

HostTensor shardc::onnx_import::evalTranspose(const HostTensor &x,
                                              const std::vector<int64_t> &perm) {
  std::vector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(x.shape[p]);
  HostTensor r = like(x, shape);
  std::vector<int64_t> in = stridesOf(x.shape);
  for (int64_t k = 0; k < product(shape); ++k) {
    int64_t rest = k, src = 0;
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      src += (rest % shape[d]) * in[perm[d]];
      rest /= shape[d];
    }
    push(r, x, src);
  }
  return r;
}

/// a [..., M, K] and b [..., K, N] with 1-D operands promoted (a to
/// [1, K], b to [K, 1]), and their broadcast batch dims, or nullopt.
static std::optional<std::vector<int64_t>>
promotedBatch(std::vector<int64_t> &as, std::vector<int64_t> &bs) {
  if (as.empty() || bs.empty())
    return std::nullopt;
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  if (bs[bs.size() - 2] != as.back())
    return std::nullopt;
  return broadcast(std::vector<int64_t>(as.begin(), as.end() - 2),
                   std::vector<int64_t>(bs.begin(), bs.end() - 2));
}

std::optional<std::vector<int64_t>>
shardc::onnx_import::matMulShape(const std::vector<int64_t> &a,
                                 const std::vector<int64_t> &b) {
  std::vector<int64_t> as = a, bs = b;
  auto out = promotedBatch(as, bs);
  if (!out)
    return std::nullopt;
  // The promoted dims dropped again, as NumPy does.
  if (a.size() > 1)
    out->push_back(as[as.size() - 2]);
  if (b.size() > 1)
    out->push_back(bs.back());
  return out;
}

std::optional<HostTensor> shardc::onnx_import::evalMatMul(const HostTensor &a,
                                                          const HostTensor &b) {
  std::vector<int64_t> as = a.shape, bs = b.shape;
  auto batch = promotedBatch(as, bs);
  auto out = matMulShape(a.shape, b.shape);
  if (a.kind != Kind::Float || b.kind != Kind::Float || !batch || !out)
    return std::nullopt;
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  HostTensor r = like(a, *out);
  int64_t batches = product(*batch);
  for (int64_t t = 0; t < batches; ++t) {
    int64_t ao = sourceIndex(ab, *batch, t) * M * K;
    int64_t bo = sourceIndex(bb, *batch, t) * K * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        float sum = 0; // in f32, k in order
        for (int64_t k = 0; k < K; ++k)
          sum += float(a.f[ao + m * K + k]) * float(b.f[bo + k * N + n]);
        r.f.push_back(roundToType(a.onnxType, sum));
      }
  }
  return r;
}

HostTensor shardc::onnx_import::evalGather(const HostTensor &data,
                                           const HostTensor &indices, int64_t axis) {
  std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  HostTensor r = like(data, shape);
  int64_t outer = 1, inner = 1, n = data.shape[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= data.shape[d];
  for (size_t d = axis + 1; d < data.shape.size(); ++d)
    inner *= data.shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < indices.numel(); ++j)
      for (int64_t in = 0; in < inner; ++in)
        push(r, data, (o * n + indices.i[j]) * inner + in);
  return r;
}

HostTensor shardc::onnx_import::evalConcat(const std::vector<const HostTensor *> &inputs,
                                           int64_t axis) {
  std::vector<int64_t> shape = inputs[0]->shape;
  shape[axis] = 0;
  for (const HostTensor *t : inputs)
    shape[axis] += t->shape[axis];
  HostTensor r = like(*inputs[0], shape);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor *t : inputs) {
      int64_t block = t->numel() / std::max<int64_t>(outer, 1);
      for (int64_t k = 0; k < block; ++k)
        push(r, *t, o * block + k);
    }
  return r;
}

HostTensor shardc::onnx_import::evalSlice(const HostTensor &x, int64_t axis,
                                          int64_t start, int64_t end, int64_t step) {
  std::vector<int64_t> idx;
  for (int64_t k = start; step > 0 ? k < end : k > end; k += step)
    idx.push_back(k);
  HostTensor indices = HostTensor::integers({int64_t(idx.size())}, idx);
  return evalGather(x, indices, axis);
}

HostTensor shardc::onnx_import::evalExpand(const HostTensor &x,
                                           const std::vector<int64_t> &target) {
  std::vector<int64_t> shape = *broadcast(x.shape, target);
  HostTensor r = like(x, shape);
  for (int64_t k = 0; k < product(shape); ++k)
    push(r, x, sourceIndex(x.shape, shape, k));
  return r;
}

HostTensor shardc::onnx_import::evalTrilu(const HostTensor &x, bool upper, int64_t k) {
  HostTensor r = x;
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  for (int64_t e = 0; e < x.numel(); ++e) {
    int64_t c = e % cols, row = (e / cols) % rows;
    bool keep = upper ? c - row >= k : c - row <= k;
    if (!keep) {
      if (r.kind == Kind::Float)
        r.f[e] = 0.0;
      else
        r.i[e] = 0;
    }
  }
  return r;
}

HostTensor shardc::onnx_import::evalCast(const HostTensor &x, int32_t onnxType) {
  HostTensor r;
  r.shape = x.shape;
  r.onnxType = onnxType;
  bool toFloat = onnxType == 1 || onnxType == 10 || onnxType == 11 || onnxType == 16;
  bool toBool = onnxType == 9;
  r.kind = toFloat ? Kind::Float : toBool ? Kind::Bool : Kind::Int;
  for (int64_t k = 0; k < x.numel(); ++k) {
    double v = x.at(k);
    if (toFloat)
      r.f.push_back(roundToType(onnxType, v));
    else if (toBool)
      r.i.push_back(v != 0.0);
    else
      r.i.push_back(x.kind == Kind::Float ? HostTensor::toInt64(v) : x.i[k]);
  }
  return r;
}
