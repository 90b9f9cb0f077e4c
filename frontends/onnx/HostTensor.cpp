//===- HostTensor.cpp - compile-time evaluation of ONNX ops ---------------===//
#include "frontends/onnx/HostTensor.h"
#include "runtime/math.h"

#include <algorithm>
#include <cmath>

using namespace shardc::onnx_import;

namespace {

int64_t product(const std::vector<int64_t> &s) {
  int64_t p = 1;
  for (int64_t d : s)
    p *= d;
  return p;
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = int64_t(s.size()) - 2; d >= 0; --d)
    st[d] = st[d + 1] * s[d + 1];
  return st;
}

/// The element of `x` (broadcast to `out`) at flat output index `k`.
int64_t sourceIndex(const std::vector<int64_t> &xs, const std::vector<int64_t> &out,
                    int64_t k) {
  int64_t idx = 0, stride = 1;
  for (int64_t d = int64_t(out.size()) - 1, e = int64_t(xs.size()) - 1; d >= 0;
       --d, --e) {
    int64_t coord = k % out[d];
    k /= out[d];
    if (e >= 0) {
      if (xs[e] != 1)
        idx += coord * stride;
      stride *= xs[e];
    }
  }
  return idx;
}

HostTensor like(const HostTensor &x, std::vector<int64_t> shape) {
  HostTensor r;
  r.kind = x.kind;
  r.onnxType = x.onnxType;
  r.shape = std::move(shape);
  // The result's storage at once: a shape too large to hold fails here
  // (std::length_error or std::bad_alloc, which shardc's main reports as
  // one line) instead of growing element by element into a runaway.
  uint64_t n = 1;
  for (int64_t d : r.shape)
    n = d <= 0 ? 0 : n > UINT64_MAX / uint64_t(d) ? UINT64_MAX : n * uint64_t(d);
  size_t want = n > SIZE_MAX ? SIZE_MAX : size_t(n);
  if (r.kind == Kind::Float)
    r.f.reserve(want);
  else
    r.i.reserve(want);
  return r;
}

void push(HostTensor &r, const HostTensor &x, int64_t k) {
  if (x.kind == Kind::Float)
    r.f.push_back(x.f[k]);
  else
    r.i.push_back(x.i[k]);
}

/// int64 arithmetic that wraps in two's complement, as ONNX Runtime's does
/// on every machine it runs on (C++ leaves signed overflow undefined: a
/// CumSum of large values, found by fuzzing, test/fuzz/regressions/onnx).
int64_t wrapAdd(int64_t x, int64_t y) { return int64_t(uint64_t(x) + uint64_t(y)); }
int64_t wrapSub(int64_t x, int64_t y) { return int64_t(uint64_t(x) - uint64_t(y)); }
int64_t wrapMul(int64_t x, int64_t y) { return int64_t(uint64_t(x) * uint64_t(y)); }
int64_t wrapNeg(int64_t x) { return int64_t(uint64_t(0) - uint64_t(x)); }

/// `x op y` rounded to T (float or double); Pow is computed in double.
template <typename T>
std::optional<double> floatArith(const std::string &op, T x, T y) {
  if (op == "Add")
    return double(T(x + y));
  if (op == "Sub")
    return double(T(x - y));
  if (op == "Mul")
    return double(T(x * y));
  if (op == "Div")
    return double(T(x / y));
  if (op == "Pow")
    return double(T(std::pow(double(x), double(y))));
  return std::nullopt;
}

} // namespace

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

/// x rounded to ONNX float type `onnxType`: DOUBLE keeps it, FLOAT16 and
/// BFLOAT16 round to their values (through f32, as the runtime does), every
/// other type to f32.
static double roundToType(int32_t onnxType, double x) {
  switch (onnxType) {
  case 11: // DOUBLE
    return x;
  case 10: // FLOAT16
    return shardc::runtime::roundToHalf(float(x));
  case 16: // BFLOAT16
    return shardc::runtime::roundToBf16(float(x));
  default:
    return double(float(x));
  }
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

namespace {

HostTensor boolLike(std::vector<int64_t> shape) {
  HostTensor r;
  r.kind = Kind::Bool;
  r.onnxType = 9; // BOOL
  r.shape = std::move(shape);
  return r;
}

} // namespace

std::optional<HostTensor>
shardc::onnx_import::evalFolded(const std::string &op,
                                const std::vector<const HostTensor *> &in,
                                const FoldAttrs &attrs, std::string &why) {
  auto need = [&](size_t k) -> const HostTensor * {
    if (k >= in.size() || !in[k]) {
      why = "input " + std::to_string(k) + " is missing";
      return nullptr;
    }
    return in[k];
  };
  // Elementwise over broadcast inputs.
  auto elementwise = [&](auto &&fn, HostTensor r) -> std::optional<HostTensor> {
    std::vector<int64_t> shape = in.front()->shape;
    for (const HostTensor *t : in) {
      auto s = broadcast(shape, t->shape);
      if (!s) {
        why = "operand shapes do not broadcast";
        return std::nullopt;
      }
      shape = *s;
    }
    r.shape = shape;
    int64_t n = product(shape);
    for (int64_t k = 0; k < n; ++k) {
      std::vector<int64_t> src;
      for (const HostTensor *t : in)
        src.push_back(sourceIndex(t->shape, shape, k));
      fn(r, src);
    }
    return r;
  };
  for (size_t k = 0; k < in.size(); ++k)
    if (!in[k] && op != "CumSum") {
      why = "input " + std::to_string(k) + " is missing";
      return std::nullopt;
    }
  if (in.empty()) {
    why = "it has no inputs";
    return std::nullopt;
  }

  if (op == "Less" || op == "LessOrEqual" || op == "Greater" ||
      op == "GreaterOrEqual") {
    const HostTensor &a = *in[0], &b = *in[1];
    if (a.kind == Kind::Bool || b.kind == Kind::Bool) {
      why = "comparisons take numbers, not booleans";
      return std::nullopt;
    }
    return elementwise(
        [&](HostTensor &r, const std::vector<int64_t> &s) {
          double x = a.at(s[0]), y = b.at(s[1]);
          bool v = op == "Less"          ? x < y
                   : op == "LessOrEqual" ? x <= y
                   : op == "Greater"     ? x > y
                                         : x >= y;
          r.i.push_back(v);
        },
        boolLike({}));
  }
  if (op == "Not" || op == "And" || op == "Or" || op == "Xor") {
    for (const HostTensor *t : in)
      if (t->kind != Kind::Bool) {
        why = op + " takes booleans";
        return std::nullopt;
      }
    return elementwise(
        [&](HostTensor &r, const std::vector<int64_t> &s) {
          bool x = in[0]->i[s[0]] != 0;
          if (op == "Not") {
            r.i.push_back(!x);
            return;
          }
          bool y = in[1]->i[s[1]] != 0;
          r.i.push_back(op == "And" ? (x && y) : op == "Or" ? (x || y) : (x != y));
        },
        boolLike({}));
  }
  if (op == "ReduceMax") {
    const HostTensor &a = *in[0];
    if (a.kind == Kind::Bool) {
      why = "ReduceMax takes numbers";
      return std::nullopt;
    }
    int64_t rank = int64_t(a.shape.size());
    std::vector<int64_t> axes = attrs.axes.value_or(std::vector<int64_t>{});
    if (in.size() > 1 && in[1])
      axes = in[1]->i;
    if (axes.empty()) {
      if (attrs.noopWithEmptyAxes)
        return a;
      for (int64_t d = 0; d < rank; ++d)
        axes.push_back(d);
    }
    std::vector<bool> reduced(size_t(rank), false);
    for (int64_t d : axes) {
      if (d < -rank || d >= rank) {
        why = "axis " + std::to_string(d) + " is out of range for rank " +
              std::to_string(rank);
        return std::nullopt;
      }
      reduced[size_t(d < 0 ? d + rank : d)] = true;
    }
    std::vector<int64_t> kept; // the result's shape with keepdims
    for (int64_t d = 0; d < rank; ++d)
      kept.push_back(reduced[size_t(d)] ? 1 : a.shape[size_t(d)]);
    int64_t n = product(kept);
    if (product(a.shape) == 0 && n > 0) {
      why = "it reduces an empty tensor, which has no maximum";
      return std::nullopt;
    }
    std::vector<double> best(size_t(n), -INFINITY);
    std::vector<bool> seen(size_t(n), false);
    for (int64_t k = 0, total = product(a.shape); k < total; ++k) {
      int64_t rest = k, out = 0, stride = 1;
      for (int64_t d = rank - 1; d >= 0; --d) {
        int64_t idx = rest % a.shape[size_t(d)];
        rest /= a.shape[size_t(d)];
        if (!reduced[size_t(d)])
          out += idx * stride;
        stride *= kept[size_t(d)];
      }
      double v = a.at(k);
      double &b = best[size_t(out)];
      if (std::isnan(v) || std::isnan(b))
        b = std::nan("");
      else if (!seen[size_t(out)] || v > b)
        b = v;
      seen[size_t(out)] = true;
    }
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < rank; ++d)
      if (!reduced[size_t(d)] || attrs.keepDims)
        shape.push_back(kept[size_t(d)]);
    HostTensor r = like(a, shape);
    for (double v : best) {
      if (a.kind == Kind::Float)
        r.f.push_back(v);
      else
        r.i.push_back(HostTensor::toInt64(v));
    }
    return r;
  }
  if (op == "Cos" || op == "Sin") {
    const HostTensor &a = *in[0];
    if (a.kind != Kind::Float) {
      why = op + " takes floating-point values";
      return std::nullopt;
    }
    HostTensor r = like(a, a.shape);
    for (double v : a.f) {
      double x = roundToType(a.onnxType, v);
      r.f.push_back(roundToType(a.onnxType, op == "Cos" ? std::cos(x) : std::sin(x)));
    }
    return r;
  }
  if (op == "Max" || op == "Min") {
    for (const HostTensor *t : in)
      if (t->kind != in[0]->kind || t->kind == Kind::Bool) {
        why = op + " takes numbers of one type";
        return std::nullopt;
      }
    bool isFloat = in[0]->kind == Kind::Float;
    return elementwise(
        [&](HostTensor &r, const std::vector<int64_t> &s) {
          if (isFloat) {
            double best = in[0]->f[s[0]];
            for (size_t j = 1; j < in.size(); ++j) {
              double v = in[j]->f[s[j]];
              if (std::isnan(v) || std::isnan(best))
                best = std::nan("");
              else
                best = op == "Max" ? std::max(best, v) : std::min(best, v);
            }
            r.f.push_back(best);
          } else {
            int64_t best = in[0]->i[s[0]];
            for (size_t j = 1; j < in.size(); ++j)
              best = op == "Max" ? std::max(best, in[j]->i[s[j]])
                                 : std::min(best, in[j]->i[s[j]]);
            r.i.push_back(best);
          }
        },
        like(*in[0], {}));
  }
  if (op == "CumSum") {
    const HostTensor *x = need(0), *axisT = need(1);
    if (!x || !axisT)
      return std::nullopt;
    if (axisT->kind != Kind::Int || axisT->numel() != 1) {
      why = "the axis must be one integer";
      return std::nullopt;
    }
    int64_t rank = int64_t(x->shape.size()), axis = axisT->i[0];
    if (rank == 0 || axis < -rank || axis >= rank) {
      why = "axis " + std::to_string(axis) + " is out of range for rank " +
            std::to_string(rank);
      return std::nullopt;
    }
    if (axis < 0)
      axis += rank;
    HostTensor r = like(*x, x->shape);
    if (x->kind == Kind::Float)
      r.f.assign(size_t(x->numel()), 0.0);
    else
      r.i.assign(size_t(x->numel()), 0);
    int64_t inner = 1;
    for (int64_t d = axis + 1; d < rank; ++d)
      inner *= x->shape[size_t(d)];
    int64_t len = x->shape[size_t(axis)], outer = x->numel() / std::max<int64_t>(1, len * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in0 = 0; in0 < inner; ++in0) {
        double facc = 0;
        int64_t iacc = 0;
        for (int64_t step = 0; step < len; ++step) {
          int64_t j = attrs.reverse ? len - 1 - step : step;
          int64_t k = (o * len + j) * inner + in0;
          if (x->kind == Kind::Float) {
            if (attrs.exclusive) {
              r.f[size_t(k)] = facc;
              facc = roundToType(x->onnxType, facc + x->f[size_t(k)]);
            } else {
              facc = roundToType(x->onnxType, facc + x->f[size_t(k)]);
              r.f[size_t(k)] = facc;
            }
          } else {
            if (attrs.exclusive) {
              r.i[size_t(k)] = iacc;
              iacc = wrapAdd(iacc, x->i[size_t(k)]);
            } else {
              iacc = wrapAdd(iacc, x->i[size_t(k)]);
              r.i[size_t(k)] = iacc;
            }
          }
        }
      }
    return r;
  }
  if (op == "GatherND") {
    const HostTensor &data = *in[0], &idx = *in[1];
    int64_t r = int64_t(data.shape.size()), q = int64_t(idx.shape.size());
    int64_t b = attrs.batchDims;
    if (idx.kind != Kind::Int || q < 1 || r < 1 || b < 0 || b >= std::min(r, q)) {
      why = "indices must be integers of rank >= 1 and batch_dims < both ranks";
      return std::nullopt;
    }
    int64_t k = idx.shape.back();
    if (k < 1 || k > r - b) {
      why = "the last dimension of the indices (" + std::to_string(k) +
            ") must be between 1 and " + std::to_string(r - b);
      return std::nullopt;
    }
    for (int64_t d = 0; d < b; ++d)
      if (idx.shape[size_t(d)] != data.shape[size_t(d)]) {
        why = "the batch dimensions of data and indices differ";
        return std::nullopt;
      }
    std::vector<int64_t> outShape(idx.shape.begin(), idx.shape.end() - 1);
    outShape.insert(outShape.end(), data.shape.begin() + b + k, data.shape.end());
    HostTensor out = like(data, outShape);
    int64_t slice = 1;
    for (int64_t d = b + k; d < r; ++d)
      slice *= data.shape[size_t(d)];
    int64_t batch = 1;
    for (int64_t d = 0; d < b; ++d)
      batch *= data.shape[size_t(d)];
    int64_t perBatchData = data.numel() / std::max<int64_t>(1, batch);
    int64_t tuples = idx.numel() / k, perBatchTuples = tuples / std::max<int64_t>(1, batch);
    std::vector<int64_t> strides = stridesOf(data.shape);
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t bi = perBatchTuples ? t / perBatchTuples : 0;
      int64_t offset = bi * perBatchData;
      for (int64_t j = 0; j < k; ++j) {
        int64_t dim = data.shape[size_t(b + j)], v = idx.i[size_t(t * k + j)];
        if (v < -dim || v >= dim) {
          why = "index " + std::to_string(v) + " is out of range for a dimension of " +
                std::to_string(dim);
          return std::nullopt;
        }
        offset += (v < 0 ? v + dim : v) * strides[size_t(b + j)];
      }
      for (int64_t e = 0; e < slice; ++e)
        push(out, data, offset + e);
    }
    return out;
  }
  why = "no compile-time evaluation of " + op;
  return std::nullopt;
}
