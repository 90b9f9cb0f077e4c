//===- HostTensorDetail.h - helpers of compile-time evaluation --*- C++ -*-===//
//
// Index arithmetic and element helpers that HostTensor.cpp (the tensor and
// the evaluation of each op family) and HostEval.cpp (a node's evaluation
// by op type) share.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTENDS_ONNX_HOSTTENSORDETAIL_H
#define SHARDC_FRONTENDS_ONNX_HOSTTENSORDETAIL_H

#include "frontends/onnx/HostTensor.h"
#include "runtime/math.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace shardc::onnx_import::host_detail {

inline int64_t product(const std::vector<int64_t> &s) {
  int64_t p = 1;
  for (int64_t d : s)
    p *= d;
  return p;
}

inline std::vector<int64_t> stridesOf(const std::vector<int64_t> &s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = int64_t(s.size()) - 2; d >= 0; --d)
    st[d] = st[d + 1] * s[d + 1];
  return st;
}

/// The element of `x` (broadcast to `out`) at flat output index `k`.
inline int64_t sourceIndex(const std::vector<int64_t> &xs, const std::vector<int64_t> &out,
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

inline HostTensor like(const HostTensor &x, std::vector<int64_t> shape) {
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

inline void push(HostTensor &r, const HostTensor &x, int64_t k) {
  if (x.kind == Kind::Float)
    r.f.push_back(x.f[k]);
  else
    r.i.push_back(x.i[k]);
}

/// int64 arithmetic that wraps in two's complement, as ONNX Runtime's does
/// on every machine it runs on (C++ leaves signed overflow undefined: a
/// CumSum of large values, found by fuzzing, test/fuzz/regressions/onnx).
inline int64_t wrapAdd(int64_t x, int64_t y) { return int64_t(uint64_t(x) + uint64_t(y)); }
inline int64_t wrapSub(int64_t x, int64_t y) { return int64_t(uint64_t(x) - uint64_t(y)); }
inline int64_t wrapMul(int64_t x, int64_t y) { return int64_t(uint64_t(x) * uint64_t(y)); }
inline int64_t wrapNeg(int64_t x) { return int64_t(uint64_t(0) - uint64_t(x)); }

/// `x op y` rounded to T (float or double); Pow is computed in double.
template <typename T>
inline std::optional<double> floatArith(const std::string &op, T x, T y) {
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


/// x rounded to ONNX float type `onnxType`: DOUBLE keeps it, FLOAT16 and
/// BFLOAT16 round to their values (through f32, as the runtime does), every
/// other type to f32.
inline double roundToType(int32_t onnxType, double x) {
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

} // namespace shardc::onnx_import::host_detail

#endif // SHARDC_FRONTENDS_ONNX_HOSTTENSORDETAIL_H
