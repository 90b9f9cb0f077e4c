//===- HostTensor.h - compile-time tensors of the ONNX importer -*- C++ -*-===//
//
// Values the importer knows at compile time (initializers, Constant nodes,
// shapes) and the evaluation of the ops that compute on them, so that shape
// subgraphs (Shape, Gather, Concat feeding Reshape, ...) fold away once the
// input shapes are static.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTENDS_ONNX_HOSTTENSOR_H
#define SHARDC_FRONTENDS_ONNX_HOSTTENSOR_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardc::onnx_import {

/// The element kinds the importer distinguishes.
enum class Kind { Float, Int, Bool };

struct HostTensor {
  Kind kind = Kind::Float;
  /// The ONNX data type it came with (onnx::TensorProto::DataType).
  int32_t onnxType = 1;
  std::vector<int64_t> shape;
  std::vector<double> f;  // Kind::Float
  std::vector<int64_t> i; // Kind::Int and Kind::Bool (0/1)

  int64_t numel() const;
  double at(int64_t k) const { return kind == Kind::Float ? f[k] : double(i[k]); }
  /// Element k as an integer (floats truncate, as toInt64).
  int64_t intAt(int64_t k) const {
    return kind == Kind::Float ? toInt64(f[k]) : i[k];
  }
  /// v truncated to int64; NaN and values out of range are INT64_MIN, as
  /// x86's cvttsd2si gives them (C++ leaves the conversion undefined:
  /// found by fuzzing).
  static int64_t toInt64(double v) {
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
      return INT64_MIN;
    return int64_t(v);
  }
  bool isFinite() const;
  /// All values of an integer tensor (shape-like use).
  std::vector<int64_t> ints() const;

  static HostTensor floats(std::vector<int64_t> shape, std::vector<double> v);
  static HostTensor integers(std::vector<int64_t> shape, std::vector<int64_t> v);
  static HostTensor bools(std::vector<int64_t> shape, std::vector<int64_t> v);
};

/// NumPy broadcast of two shapes, or nullopt.
std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t> &a,
                                              const std::vector<int64_t> &b);

/// Elementwise binary op `op` ("Add", "Sub", "Mul", "Div", "Pow", "Equal")
/// with broadcasting; integer division truncates as ONNX Runtime does.
std::optional<HostTensor> evalBinary(const std::string &op, const HostTensor &a,
                                     const HostTensor &b);
/// Elementwise unary op ("Neg", "Sqrt", "Reciprocal", "Erf", "Tanh",
/// "Sigmoid", "Exp", "Log").
std::optional<HostTensor> evalUnary(const std::string &op, const HostTensor &a);
HostTensor evalWhere(const HostTensor &c, const HostTensor &x, const HostTensor &y);
HostTensor evalTranspose(const HostTensor &x, const std::vector<int64_t> &perm);
/// The shape of NumPy's matmul of shapes a and b, or nullopt.
std::optional<std::vector<int64_t>> matMulShape(const std::vector<int64_t> &a,
                                                const std::vector<int64_t> &b);
/// NumPy's matmul of two float tensors (1-D operands promoted, batch dims
/// broadcast), each sum over K in f32 order rounded to a's type, or nullopt
/// where the shapes do not multiply.
std::optional<HostTensor> evalMatMul(const HostTensor &a, const HostTensor &b);
/// Gathers along `axis` (indices already normalized to be non-negative).
HostTensor evalGather(const HostTensor &data, const HostTensor &indices, int64_t axis);
HostTensor evalConcat(const std::vector<const HostTensor *> &inputs, int64_t axis);
/// Elements start..end-1 (step 1) or the strided range of dimension `axis`.
HostTensor evalSlice(const HostTensor &x, int64_t axis, int64_t start,
                     int64_t end, int64_t step);
HostTensor evalExpand(const HostTensor &x, const std::vector<int64_t> &shape);
HostTensor evalTrilu(const HostTensor &x, bool upper, int64_t k);
HostTensor evalCast(const HostTensor &x, int32_t onnxType);

/// Attributes of the ops evalFolded evaluates.
struct FoldAttrs {
  bool axisFromInput = false;
  int64_t exclusive = 0, reverse = 0, batchDims = 0;
  /// ReduceMax: the axes attribute (opsets below 18; from 18 the second
  /// input), keepdims and noop_with_empty_axes.
  std::optional<std::vector<int64_t>> axes;
  int64_t keepDims = 1, noopWithEmptyAxes = 0;
};

/// Evaluates an op of ops/Folded.cpp (comparisons, logic, Cos, Sin, Max,
/// Min, ReduceMax, CumSum, GatherND) on known inputs (null: an omitted optional
/// input); nullopt with `why` set when the inputs do not fit the op.
std::optional<HostTensor> evalFolded(const std::string &op,
                                     const std::vector<const HostTensor *> &in,
                                     const FoldAttrs &attrs, std::string &why);

} // namespace shardc::onnx_import

#endif // SHARDC_FRONTENDS_ONNX_HOSTTENSOR_H
