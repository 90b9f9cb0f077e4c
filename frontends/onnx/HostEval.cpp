//===- HostEval.cpp - a folded node evaluated by its op type --------------===//
//
// evalFolded: a node whose inputs are all known at compile time, evaluated
// by its op type and attributes with the evaluators of HostTensor.cpp, one
// helper an op family (comparisons, logic, ReduceMax, Cos/Sin, Max/Min,
// CumSum, GatherND); `why` says why one cannot be.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/HostTensor.h"
#include "frontends/onnx/HostTensorDetail.h"
#include "runtime/math.h"

#include <algorithm>
#include <cmath>

using namespace shardc::onnx_import;
using namespace shardc::onnx_import::host_detail;

namespace {

HostTensor boolLike(std::vector<int64_t> shape) {
  HostTensor r;
  r.kind = Kind::Bool;
  r.onnxType = 9; // BOOL
  r.shape = std::move(shape);
  return r;
}

/// Input `k`, or null with `why` set when it is missing.
const HostTensor *needInput(const std::vector<const HostTensor *> &in, size_t k,
                            std::string &why) {
  if (k >= in.size() || !in[k]) {
    why = "input " + std::to_string(k) + " is missing";
    return nullptr;
  }
  return in[k];
}

/// Elementwise over broadcast inputs: `fn(r, src)` appends to `r` the
/// element whose source indices in the inputs are `src`.
template <typename Fn>
std::optional<HostTensor> elementwise(const std::vector<const HostTensor *> &in,
                                      std::string &why, Fn &&fn, HostTensor r) {
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
}

/// Less, LessOrEqual, Greater and GreaterOrEqual: numbers compared elementwise
/// into booleans.
std::optional<HostTensor>
evalComparison(const std::string &op, const std::vector<const HostTensor *> &in,
               std::string &why) {
  const HostTensor &a = *in[0], &b = *in[1];
  if (a.kind == Kind::Bool || b.kind == Kind::Bool) {
    why = "comparisons take numbers, not booleans";
    return std::nullopt;
  }
  return elementwise(
      in, why,
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

/// Not, And, Or and Xor: booleans combined elementwise.
std::optional<HostTensor> evalLogical(const std::string &op,
                                      const std::vector<const HostTensor *> &in,
                                      std::string &why) {
  for (const HostTensor *t : in)
    if (t->kind != Kind::Bool) {
      why = op + " takes booleans";
      return std::nullopt;
    }
  return elementwise(
      in, why,
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

/// ReduceMax over the axes of the attribute or the second input (all of them
/// when none are given, unless noop_with_empty_axes); NaN wins.
std::optional<HostTensor>
evalReduceMax(const std::vector<const HostTensor *> &in, const FoldAttrs &attrs,
              std::string &why) {
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

/// Cos and Sin of floating-point values, rounded to their type.
std::optional<HostTensor> evalTrig(const std::string &op,
                                   const std::vector<const HostTensor *> &in,
                                   std::string &why) {
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

/// Max and Min over broadcast inputs of one numeric type; NaN wins.
std::optional<HostTensor> evalMinMax(const std::string &op,
                                     const std::vector<const HostTensor *> &in,
                                     std::string &why) {
  for (const HostTensor *t : in)
    if (t->kind != in[0]->kind || t->kind == Kind::Bool) {
      why = op + " takes numbers of one type";
      return std::nullopt;
    }
  bool isFloat = in[0]->kind == Kind::Float;
  return elementwise(
      in, why,
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

/// CumSum along the axis of the second input, exclusive and reversed as the
/// attributes say; integers wrap.
std::optional<HostTensor> evalCumSum(const std::vector<const HostTensor *> &in,
                                     const FoldAttrs &attrs, std::string &why) {
  const HostTensor *x = needInput(in, 0, why), *axisT = needInput(in, 1, why);
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

/// GatherND: slices of the data at the index tuples of the second input,
/// after batch_dims leading dimensions that both share.
std::optional<HostTensor>
evalGatherND(const std::vector<const HostTensor *> &in, const FoldAttrs &attrs,
             std::string &why) {
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

} // namespace

std::optional<HostTensor>
shardc::onnx_import::evalFolded(const std::string &op,
                                const std::vector<const HostTensor *> &in,
                                const FoldAttrs &attrs, std::string &why) {
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
      op == "GreaterOrEqual")
    return evalComparison(op, in, why);
  if (op == "Not" || op == "And" || op == "Or" || op == "Xor")
    return evalLogical(op, in, why);
  if (op == "ReduceMax")
    return evalReduceMax(in, attrs, why);
  if (op == "Cos" || op == "Sin")
    return evalTrig(op, in, why);
  if (op == "Max" || op == "Min")
    return evalMinMax(op, in, why);
  if (op == "CumSum")
    return evalCumSum(in, attrs, why);
  if (op == "GatherND")
    return evalGatherND(in, attrs, why);
  why = "no compile-time evaluation of " + op;
  return std::nullopt;
}
