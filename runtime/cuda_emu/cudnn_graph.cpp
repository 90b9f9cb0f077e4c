//===- cudnn_graph.cpp - the emulated cuDNN engine: graphs on the host ----===//
//
// The one engine of the emulated cuDNN: it runs any operation graph made of
// the operations below, op by op in topological order, each tensor a dense
// row-major array of f32 values (its declared strides matter only where the
// data is: graph inputs and outputs in device memory, and reshape, which is
// a view of its input's memory). Every op computes in f32 and rounds its
// output to the output's declared type (bf16 and f16 to nearest even, ints
// toward zero, booleans to 0 or 1), virtual outputs included: a bf16
// virtual operand of a matmul is what a fused kernel converts to bf16 for
// its tensor cores.
//
//   pointwise  y = op(alpha1 x, alpha2 b) (t: BINARY_SELECT's mask); each
//              input broadcasts onto y's dims where its dim divides y's:
//              a dim of 1 is broadcast, a dim g of G heads serves y's H
//              heads in groups of H / g (head h reads h / (H / g));
//   matmul     C[..., M, N] = sum_k A[..., M, k] B[..., k, N] (f32 sums, the
//              CPU backend's sgemm), A's and B's batch dims broadcast onto
//              C's by the same rule; with GEMM M/N/K overrides (tensors
//              [B,1,...,1] of INT32 or INT64 in device memory, indexed by
//              C's leading dim, the SDPA graphs' sequence lengths), batch
//              entry b computes only C's first M_b rows and N_b columns,
//              summing over the first K_b of the reduction, and the rest of
//              C is the matmul's padding value (CUDNN_ATTR_MATMUL_PADDING_
//              VALUE, 0 unless set); a length outside [0, dim], which
//              cuDNN does not define, is taken for a fault (the sticky
//              cudaErrorIllegalAddress);
//   reduction  y[i] = reduce over the x[j] with j_d / (x_d / y_d) = i_d:
//              where y's dim is 1, the whole dim; where it divides x's, the
//              groups (dK and dV of grouped-query heads);
//   reshape    y is x's memory read at y's strides (cuDNN's view-only
//              reshape, e.g. a transpose by strides).
//
// Pointwise modes: ADD ADD_SQUARE SUB MUL DIV MIN MAX POW MOD ABS CEIL FLOOR
// NEG EXP LOG SQRT RSQRT RECIPROCAL SIN COS TAN ERF ATAN2 IDENTITY TANH_FWD
// SIGMOID_FWD RELU_FWD (no clips) CMP_* LOGICAL_* GEN_INDEX BINARY_SELECT;
// the other activations and every *_BWD mode are refused by name.
// Reductions: all of cudnnReduceTensorOp_t. Types: f32, f64 (computed in
// f32), f16, bf16, int8, uint8, int32, int64, and virtual booleans.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda_emu/cudnn_graph.h"

#include "runtime/cpu/gemm.h"
#include "runtime/cuda_emu/emu.h"
#include "runtime/math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

namespace shardc::emu::cudnn {

using shardc::runtime::bf16ToFloat;
using shardc::runtime::floatToBf16;
using shardc::runtime::floatToHalf;
using shardc::runtime::halfToFloat;

struct Tensor {
  TensorInfo info;
  int producer = -1; ///< the step that writes it, -1 for a graph input
  int lastUse = -1;  ///< the last step that reads it
};

struct Step {
  OpInfo op;
  std::vector<int> in; ///< tensor indices, in port order
  int out = -1;
  int overrides[3] = {-1, -1, -1}; ///< matmul: M, N, K override tensors

  /// Every tensor the step reads: its inputs and override tensors.
  std::vector<int> reads() const {
    std::vector<int> r = in;
    for (int t : overrides)
      if (t >= 0)
        r.push_back(t);
    return r;
  }
};

struct Program {
  std::vector<Tensor> tensors;
  std::map<int64_t, int> byUid;
  std::vector<Step> steps; ///< in topological order
  std::string unsupported;
};

const std::string &unsupportedReason(const Program &p) {
  return p.unsupported;
}

namespace {

//===----------------------------------------------------------------------===//
// Shapes and element types
//===----------------------------------------------------------------------===//

using Dims = std::vector<int64_t>;

int64_t numel(const Dims &dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

std::string show(const Dims &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string describe(const TensorInfo &t) {
  return "tensor uid " + std::to_string(t.uid) + " " + show(t.dims) + " " +
         enumName("CUDNN_DATA_", t.type);
}

/// Row-major strides of `dims` (the layout of every value here).
Dims denseStrides(const Dims &dims) {
  Dims s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;)
    s[i - 1] = s[i] * dims[i];
  return s;
}

/// The memory offset (in elements) of each element of `t`, in row-major
/// order of its dims.
std::vector<int64_t> offsets(const Dims &dims, const Dims &strides) {
  std::vector<int64_t> out(size_t(numel(dims)));
  Dims idx(dims.size(), 0);
  int64_t off = 0;
  for (int64_t &o : out) {
    o = off;
    for (size_t d = dims.size(); d-- > 0;) {
      off += strides[d];
      if (++idx[d] < dims[d])
        break;
      off -= strides[d] * dims[d];
      idx[d] = 0;
    }
  }
  return out;
}

/// Bytes of one element of `type`; 0 if the emulated engine has no memory
/// layout for it.
size_t elementBytes(cudnnDataType_t type) {
  switch (type) {
  case CUDNN_DATA_FLOAT:
  case CUDNN_DATA_INT32:
    return 4;
  case CUDNN_DATA_DOUBLE:
  case CUDNN_DATA_INT64:
    return 8;
  case CUDNN_DATA_HALF:
  case CUDNN_DATA_BFLOAT16:
    return 2;
  case CUDNN_DATA_INT8:
  case CUDNN_DATA_UINT8:
    return 1;
  default:
    return 0;
  }
}

float load(const char *p, cudnnDataType_t type) {
  switch (type) {
  case CUDNN_DATA_FLOAT:
    return *reinterpret_cast<const float *>(p);
  case CUDNN_DATA_DOUBLE:
    return float(*reinterpret_cast<const double *>(p));
  case CUDNN_DATA_HALF:
    return halfToFloat(*reinterpret_cast<const uint16_t *>(p));
  case CUDNN_DATA_BFLOAT16:
    return bf16ToFloat(*reinterpret_cast<const uint16_t *>(p));
  case CUDNN_DATA_INT32:
    return float(*reinterpret_cast<const int32_t *>(p));
  case CUDNN_DATA_INT64:
    return float(*reinterpret_cast<const int64_t *>(p));
  case CUDNN_DATA_INT8:
    return float(*reinterpret_cast<const int8_t *>(p));
  case CUDNN_DATA_UINT8:
    return float(*reinterpret_cast<const uint8_t *>(p));
  default:
    return 0;
  }
}

/// `v` as `type` keeps it: rounded to nearest even (f16, bf16), toward zero
/// and saturated (ints), 0 or 1 (booleans).
float roundTo(float v, cudnnDataType_t type) {
  auto toInt = [v](double lo, double hi) {
    return std::isnan(v) ? 0.0f : float(std::clamp(std::trunc(double(v)), lo, hi));
  };
  switch (type) {
  case CUDNN_DATA_HALF:
    return shardc::runtime::roundToHalf(v);
  case CUDNN_DATA_BFLOAT16:
    return shardc::runtime::roundToBf16(v);
  case CUDNN_DATA_INT32:
    return toInt(-2147483648.0, 2147483647.0);
  case CUDNN_DATA_INT64:
    return toInt(-9.2e18, 9.2e18);
  case CUDNN_DATA_INT8:
    return toInt(-128, 127);
  case CUDNN_DATA_UINT8:
    return toInt(0, 255);
  case CUDNN_DATA_BOOLEAN:
    return v != 0 ? 1.0f : 0.0f;
  default:
    return v;
  }
}

/// Stores `v`, already rounded to `type`.
void store(char *p, cudnnDataType_t type, float v) {
  switch (type) {
  case CUDNN_DATA_FLOAT:
    *reinterpret_cast<float *>(p) = v;
    break;
  case CUDNN_DATA_DOUBLE:
    *reinterpret_cast<double *>(p) = v;
    break;
  case CUDNN_DATA_HALF:
    *reinterpret_cast<uint16_t *>(p) = floatToHalf(v);
    break;
  case CUDNN_DATA_BFLOAT16:
    *reinterpret_cast<uint16_t *>(p) = floatToBf16(v);
    break;
  case CUDNN_DATA_INT32:
    *reinterpret_cast<int32_t *>(p) = int32_t(v);
    break;
  case CUDNN_DATA_INT64:
    *reinterpret_cast<int64_t *>(p) = int64_t(v);
    break;
  case CUDNN_DATA_INT8:
    *reinterpret_cast<int8_t *>(p) = int8_t(v);
    break;
  case CUDNN_DATA_UINT8:
    *reinterpret_cast<uint8_t *>(p) = uint8_t(v);
    break;
  default:
    break;
  }
}

//===----------------------------------------------------------------------===//
// Broadcasting: one dense index space onto another
//===----------------------------------------------------------------------===//

/// Maps each element of a dense `from` space onto a dense `to` space whose
/// dims divide `from`'s (or that has one element): coordinate i of a dim
/// goes to i / (from / to). Pointwise inputs map from the output; a
/// reduction maps its input onto its output.
struct IndexMap {
  Dims from, toStrides; ///< toStrides: per from-dim, 0 where broadcast
  Dims ratio;
  std::vector<int64_t> inner; ///< the last dim's offsets, precomputed

  IndexMap(const Dims &fromDims, const Dims &toDims) : from(fromDims) {
    size_t r = from.size();
    toStrides.assign(r, 0);
    ratio.assign(r, 1);
    if (numel(toDims) != 1) {
      Dims dense = denseStrides(toDims);
      for (size_t d = 0; d < r; ++d) {
        ratio[d] = from[d] / toDims[d];
        toStrides[d] = dense[d];
      }
    }
    int64_t last = r ? from[r - 1] : 1;
    inner.resize(size_t(last));
    for (int64_t j = 0; j < last; ++j)
      inner[j] = r ? (j / ratio[r - 1]) * toStrides[r - 1] : 0;
  }

  /// The `to` offset of row `row` (every dim but the last) of `from`.
  int64_t rowBase(int64_t row) const {
    int64_t off = 0;
    for (size_t d = from.size() - 1; d-- > 0;) {
      int64_t i = row % from[d];
      row /= from[d];
      off += (i / ratio[d]) * toStrides[d];
    }
    return off;
  }
};

/// Whether `in` broadcasts onto `out` (IndexMap's rule).
bool mapsOnto(const Dims &in, const Dims &out) {
  if (numel(in) == 1)
    return true;
  if (in.size() != out.size())
    return false;
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] < 1 || out[d] % in[d] != 0)
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Pointwise math
//===----------------------------------------------------------------------===//

enum class Arity { Unary, Binary, Select, Unsupported };

Arity arity(cudnnPointwiseMode_t mode) {
  switch (mode) {
  case CUDNN_POINTWISE_ADD:
  case CUDNN_POINTWISE_ADD_SQUARE:
  case CUDNN_POINTWISE_SUB:
  case CUDNN_POINTWISE_MUL:
  case CUDNN_POINTWISE_DIV:
  case CUDNN_POINTWISE_MIN:
  case CUDNN_POINTWISE_MAX:
  case CUDNN_POINTWISE_POW:
  case CUDNN_POINTWISE_MOD:
  case CUDNN_POINTWISE_ATAN2:
  case CUDNN_POINTWISE_CMP_EQ:
  case CUDNN_POINTWISE_CMP_NEQ:
  case CUDNN_POINTWISE_CMP_GT:
  case CUDNN_POINTWISE_CMP_GE:
  case CUDNN_POINTWISE_CMP_LT:
  case CUDNN_POINTWISE_CMP_LE:
  case CUDNN_POINTWISE_LOGICAL_AND:
  case CUDNN_POINTWISE_LOGICAL_OR:
    return Arity::Binary;
  case CUDNN_POINTWISE_ABS:
  case CUDNN_POINTWISE_CEIL:
  case CUDNN_POINTWISE_FLOOR:
  case CUDNN_POINTWISE_NEG:
  case CUDNN_POINTWISE_EXP:
  case CUDNN_POINTWISE_LOG:
  case CUDNN_POINTWISE_SQRT:
  case CUDNN_POINTWISE_RSQRT:
  case CUDNN_POINTWISE_RECIPROCAL:
  case CUDNN_POINTWISE_SIN:
  case CUDNN_POINTWISE_COS:
  case CUDNN_POINTWISE_TAN:
  case CUDNN_POINTWISE_ERF:
  case CUDNN_POINTWISE_IDENTITY:
  case CUDNN_POINTWISE_TANH_FWD:
  case CUDNN_POINTWISE_SIGMOID_FWD:
  case CUDNN_POINTWISE_RELU_FWD:
  case CUDNN_POINTWISE_LOGICAL_NOT:
  case CUDNN_POINTWISE_GEN_INDEX:
    return Arity::Unary;
  case CUDNN_POINTWISE_BINARY_SELECT:
    return Arity::Select;
  default:
    return Arity::Unsupported;
  }
}

float unary(cudnnPointwiseMode_t mode, float x) {
  switch (mode) {
  case CUDNN_POINTWISE_ABS:
    return std::fabs(x);
  case CUDNN_POINTWISE_CEIL:
    return std::ceil(x);
  case CUDNN_POINTWISE_FLOOR:
    return std::floor(x);
  case CUDNN_POINTWISE_NEG:
    return -x;
  case CUDNN_POINTWISE_EXP:
    return std::exp(x);
  case CUDNN_POINTWISE_LOG:
    return std::log(x);
  case CUDNN_POINTWISE_SQRT:
    return std::sqrt(x);
  case CUDNN_POINTWISE_RSQRT:
    return 1.0f / std::sqrt(x);
  case CUDNN_POINTWISE_RECIPROCAL:
    return 1.0f / x;
  case CUDNN_POINTWISE_SIN:
    return std::sin(x);
  case CUDNN_POINTWISE_COS:
    return std::cos(x);
  case CUDNN_POINTWISE_TAN:
    return std::tan(x);
  case CUDNN_POINTWISE_ERF:
    return std::erf(x);
  case CUDNN_POINTWISE_TANH_FWD:
    return std::tanh(x);
  case CUDNN_POINTWISE_SIGMOID_FWD:
    return 1.0f / (1.0f + std::exp(-x));
  case CUDNN_POINTWISE_RELU_FWD:
    return x > 0 ? x : 0.0f;
  case CUDNN_POINTWISE_LOGICAL_NOT:
    return x == 0 ? 1.0f : 0.0f;
  default: // IDENTITY
    return x;
  }
}

float binary(cudnnPointwiseMode_t mode, float x, float b) {
  switch (mode) {
  case CUDNN_POINTWISE_ADD:
    return x + b;
  case CUDNN_POINTWISE_ADD_SQUARE:
    return x + b * b;
  case CUDNN_POINTWISE_SUB:
    return x - b;
  case CUDNN_POINTWISE_MUL:
    return x * b;
  case CUDNN_POINTWISE_DIV:
    return x / b;
  case CUDNN_POINTWISE_MIN:
    return std::fmin(x, b);
  case CUDNN_POINTWISE_MAX:
    return std::fmax(x, b);
  case CUDNN_POINTWISE_POW:
    return std::pow(x, b);
  case CUDNN_POINTWISE_MOD:
    return std::fmod(x, b);
  case CUDNN_POINTWISE_ATAN2:
    return std::atan2(x, b);
  case CUDNN_POINTWISE_CMP_EQ:
    return x == b;
  case CUDNN_POINTWISE_CMP_NEQ:
    return x != b;
  case CUDNN_POINTWISE_CMP_GT:
    return x > b;
  case CUDNN_POINTWISE_CMP_GE:
    return x >= b;
  case CUDNN_POINTWISE_CMP_LT:
    return x < b;
  case CUDNN_POINTWISE_CMP_LE:
    return x <= b;
  case CUDNN_POINTWISE_LOGICAL_AND:
    return x != 0 && b != 0;
  default: // LOGICAL_OR
    return x != 0 || b != 0;
  }
}

//===----------------------------------------------------------------------===//
// Checking an operation graph
//===----------------------------------------------------------------------===//

/// What the engine lacks to run `op` ("" if nothing), beyond what
/// finalize found (OpInfo::unsupported).
std::string lacks(const OpInfo &op) {
  if (!op.unsupported.empty())
    return op.unsupported;
  std::vector<const TensorInfo *> all{&op.output};
  for (const TensorInfo &i : op.inputs)
    all.push_back(&i);
  for (const TensorInfo *t : all) {
    if (elementBytes(t->type) || (t->type == CUDNN_DATA_BOOLEAN && t->isVirtual))
      continue;
    return describe(*t) + ": the emulated engine has no memory layout for " +
           (t->type == CUDNN_DATA_BOOLEAN ? "non-virtual " : "") +
           enumName("CUDNN_DATA_", t->type) + " tensors";
  }
  if (op.kind == OpKind::Pointwise && arity(op.pointwise) == Arity::Unsupported)
    return "pointwise mode " + enumName("CUDNN_POINTWISE_", op.pointwise) +
           " is not implemented by the emulated engine";
  return "";
}

[[noreturn]] void malformed(const OpInfo &op, const std::string &why) {
  std::string kind[] = {"pointwise", "matmul", "reduction", "reshape"};
  fail(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
       kind[int(op.kind)] + " operation writing " + describe(op.output) +
           ": " + why);
}

void checkPointwise(const OpInfo &op) {
  size_t want = 0;
  switch (arity(op.pointwise)) {
  case Arity::Unary:
    want = 1;
    break;
  case Arity::Binary:
    want = 2;
    break;
  case Arity::Select:
    want = 3;
    break;
  case Arity::Unsupported:
    return; // refused by lacks()
  }
  if (op.inputs.size() != want)
    malformed(op, enumName("CUDNN_POINTWISE_", op.pointwise) + " takes " +
                      std::to_string(want) + " inputs, given " +
                      std::to_string(op.inputs.size()));
  for (const TensorInfo &in : op.inputs)
    if (!mapsOnto(in.dims, op.output.dims))
      malformed(op, describe(in) + " does not broadcast onto it");
  int64_t rank = int64_t(op.output.dims.size());
  if (op.pointwise == CUDNN_POINTWISE_GEN_INDEX &&
      (op.axis < 0 || op.axis >= rank))
    malformed(op, "GEN_INDEX axis " + std::to_string(op.axis) +
                      " is not a dim of its output");
}

const cudnnBackendAttributeName_t kOverrideAttrs[3] = {
    CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC,
    CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC,
    CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC};

/// A GEMM M/N/K override tensor: INT32 or INT64, in memory (neither
/// virtual nor by value), of dims [C's leading dim, 1, ..., 1] at C's rank;
/// otherwise BAD_PARAM, naming the attribute.
void checkOverride(const OpInfo &op, int which) {
  const TensorInfo &t = *op.overrides[which];
  const Dims &c = op.output.dims;
  std::string want = "[" + std::to_string(c[0]);
  for (size_t d = 1; d < c.size(); ++d)
    want += ",1";
  want += "]";
  std::string why;
  if (t.type != CUDNN_DATA_INT32 && t.type != CUDNN_DATA_INT64)
    why = "must be INT32 or INT64";
  else if (t.isVirtual || t.byValue)
    why = std::string("is ") + (t.isVirtual ? "virtual" : "by value") +
          ": it must be in device memory";
  else if (c.size() < 3)
    why = "needs a batch dim of C " + show(c) + " to index it";
  else if (t.dims.size() != c.size() || numel(t.dims) != c[0] ||
           t.dims[0] != c[0])
    why = "must be " + want + ", one length per entry of C's leading dim";
  if (!why.empty())
    fail(CUDNN_STATUS_BAD_PARAM,
         "matmul operation writing " + describe(op.output) + ": " +
             enumName("CUDNN_ATTR_", kOverrideAttrs[which]) + " " +
             describe(t) + " " + why);
}

void checkMatmul(const OpInfo &op) {
  const Dims &a = op.inputs[0].dims, &b = op.inputs[1].dims,
             &c = op.output.dims;
  size_t r = c.size();
  if (r < 2 || a.size() != r || b.size() != r)
    malformed(op, "A, B and C must have one rank, 2 or more");
  if (a[r - 2] != c[r - 2] || b[r - 1] != c[r - 1] || a[r - 1] != b[r - 2])
    malformed(op, "A " + show(a) + " times B " + show(b) + " is not C");
  for (size_t d = 0; d + 2 < r; ++d)
    if (c[d] % a[d] || c[d] % b[d])
      malformed(op, "batch dim " + std::to_string(d) + " of A " + show(a) +
                        " or B " + show(b) + " does not divide C's");
  for (int which = 0; which < 3; ++which)
    if (op.overrides[which])
      checkOverride(op, which);
}

void checkReduction(const OpInfo &op) {
  const Dims &x = op.inputs[0].dims, &y = op.output.dims;
  if (!mapsOnto(y, x))
    malformed(op, "its input " + show(x) +
                      " does not reduce onto it (each output dim must "
                      "divide the input's)");
}

/// A reshape is a view: y's elements must be elements of x's memory, and
/// x's elements distinct in it.
void checkReshape(const OpInfo &op) {
  const TensorInfo &x = op.inputs[0], &y = op.output;
  if (numel(x.dims) != numel(y.dims))
    malformed(op, "its input " + show(x.dims) + " has another element count");
  std::vector<int64_t> xo = offsets(x.dims, x.strides);
  int64_t span = xo.empty() ? 0 : *std::max_element(xo.begin(), xo.end()) + 1;
  std::vector<char> held(size_t(span), 0);
  for (int64_t o : xo)
    if (o < 0 || held[size_t(o)]++)
      malformed(op, "its input's strides overlap");
  for (int64_t o : offsets(y.dims, y.strides))
    if (o < 0 || o >= span || !held[size_t(o)])
      malformed(op, "its strides " + show(y.strides) +
                        " read outside its input's memory (strides " +
                        show(x.strides) + "): not a view");
}

void checkOp(const OpInfo &op) {
  size_t ports = op.kind == OpKind::Matmul ? 2 : 1;
  if (op.kind != OpKind::Pointwise && op.inputs.size() != ports)
    malformed(op, "an input descriptor is missing");
  std::vector<const TensorInfo *> all{&op.output};
  for (const TensorInfo &i : op.inputs)
    all.push_back(&i);
  for (const TensorInfo *t : all)
    if (t->dims.empty() || t->dims.size() != t->strides.size() ||
        *std::min_element(t->dims.begin(), t->dims.end()) < 1)
      malformed(op, describe(*t) + " has strides " + show(t->strides) +
                        ": dims must be positive, one stride each");
  switch (op.kind) {
  case OpKind::Pointwise:
    return checkPointwise(op);
  case OpKind::Matmul:
    return checkMatmul(op);
  case OpKind::Reduction:
    return checkReduction(op);
  case OpKind::Reshape:
    return checkReshape(op);
  }
}

bool sameTensor(const TensorInfo &a, const TensorInfo &b) {
  return a.type == b.type && a.dims == b.dims && a.strides == b.strides &&
         a.isVirtual == b.isVirtual && a.byValue == b.byValue;
}

int addTensor(Program &p, const TensorInfo &t) {
  auto [it, added] = p.byUid.emplace(t.uid, int(p.tensors.size()));
  if (added) {
    p.tensors.push_back({t});
  } else if (!sameTensor(p.tensors[size_t(it->second)].info, t)) {
    fail(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES,
         "two tensors of uid " + std::to_string(t.uid) + " differ: " +
             describe(p.tensors[size_t(it->second)].info) + " and " +
             describe(t));
  }
  return it->second;
}

/// Kahn's order of `steps` (the given order where it is one).
std::vector<Step> topological(const Program &p, std::vector<Step> steps) {
  std::vector<int> pending(steps.size(), 0);
  std::vector<std::vector<size_t>> readers(p.tensors.size());
  for (size_t s = 0; s < steps.size(); ++s)
    for (int t : steps[s].reads())
      if (p.tensors[size_t(t)].producer >= 0) {
        ++pending[s];
        readers[size_t(t)].push_back(s);
      }
  std::vector<Step> order;
  std::set<size_t> ready;
  for (size_t s = 0; s < steps.size(); ++s)
    if (!pending[s])
      ready.insert(s);
  while (!ready.empty()) {
    size_t s = *ready.begin();
    ready.erase(ready.begin());
    for (size_t r : readers[size_t(steps[s].out)])
      if (--pending[r] == 0)
        ready.insert(r);
    order.push_back(std::move(steps[s]));
  }
  if (order.size() != steps.size())
    fail(CUDNN_STATUS_BAD_PARAM, "the operation graph has a cycle");
  return order;
}

/// Every tensor read is written by an op or is a graph input in memory;
/// graph outputs in memory do not overlap themselves.
void checkTensors(Program &p) {
  for (const Tensor &t : p.tensors) {
    const TensorInfo &i = t.info;
    if (i.isVirtual && t.producer < 0)
      fail(CUDNN_STATUS_BAD_PARAM,
           "virtual " + describe(i) + " is read but no operation writes it");
    if (i.byValue && t.producer >= 0)
      fail(CUDNN_STATUS_BAD_PARAM, "by-value " + describe(i) + " is written");
    if (i.isVirtual || t.producer < 0 || !p.unsupported.empty())
      continue;
    std::vector<int64_t> o = offsets(i.dims, i.strides);
    std::sort(o.begin(), o.end());
    if (std::adjacent_find(o.begin(), o.end()) != o.end())
      p.unsupported = "output " + describe(i) + " has overlapping strides " +
                      show(i.strides);
  }
}

} // namespace

std::shared_ptr<const Program> buildProgram(const std::vector<OpInfo> &ops) {
  auto p = std::make_shared<Program>();
  std::vector<Step> steps;
  for (size_t s = 0; s < ops.size(); ++s) {
    const OpInfo &op = ops[s];
    checkOp(op);
    if (p->unsupported.empty())
      p->unsupported = lacks(op);
    Step step{op, {}, addTensor(*p, op.output)};
    for (const TensorInfo &in : op.inputs)
      step.in.push_back(addTensor(*p, in));
    for (int which = 0; which < 3; ++which)
      if (op.overrides[which])
        step.overrides[which] = addTensor(*p, *op.overrides[which]);
    Tensor &out = p->tensors[size_t(step.out)];
    if (out.producer >= 0)
      fail(CUDNN_STATUS_BAD_PARAM, "two operations write " + describe(op.output));
    out.producer = int(s);
    steps.push_back(std::move(step));
  }
  p->steps = topological(*p, std::move(steps));
  for (size_t s = 0; s < p->steps.size(); ++s) {
    p->tensors[size_t(p->steps[s].out)].producer = int(s);
    for (int t : p->steps[s].reads())
      p->tensors[size_t(t)].lastUse = int(s);
  }
  checkTensors(*p);
  return p;
}

int64_t engineWorkspace(const Program &p) {
  // The backward reads Stats [B,H,T,1] f32; the forward writes it.
  const TensorInfo *stats = nullptr;
  for (const Tensor &t : p.tensors)
    if (t.producer < 0 && !t.info.isVirtual && !t.info.byValue &&
        t.info.type == CUDNN_DATA_FLOAT && t.info.dims.size() == 4 &&
        t.info.dims[3] == 1)
      stats = &t.info;
  if (!stats)
    return 0;
  const Dims &bht = stats->dims;
  int64_t S = 0;
  bool matmuls = false;
  for (const Step &st : p.steps) {
    if (st.op.kind != OpKind::Matmul)
      continue;
    matmuls = true;
    const TensorInfo &out = p.tensors[size_t(st.out)].info;
    // An f32 matmul result in memory: the non-deterministic graph's dQ
    // accumulator (the frontend's workspace, not the engine's).
    if (!out.isVirtual && out.type == CUDNN_DATA_FLOAT)
      return 0;
    // The scores [B,H,T,S]: Q K^T (and dO V^T), the virtual result over
    // stats' rows of a matmul whose A is a graph input (the other matmuls
    // multiply intermediates: P^T dO, dS^T Q, dS K).
    if (out.isVirtual && out.dims.size() == 4 && out.dims[0] == bht[0] &&
        out.dims[1] == bht[1] && out.dims[2] == bht[2] && !st.in.empty() &&
        p.tensors[size_t(st.in[0])].producer < 0)
      S = std::max(S, out.dims[3]);
  }
  if (!matmuls || S == 0)
    return 0;
  return bht[0] * bht[1] * ((bht[2] + 63) / 64 * 64) * ((S + 127) / 128 * 128) *
         2;
}

std::string describe(const Program &p) {
  std::string out;
  const char *kinds[] = {"pointwise", "matmul", "reduction", "reshape"};
  for (const Step &s : p.steps) {
    const OpInfo &op = s.op;
    out += kinds[int(op.kind)];
    if (op.kind == OpKind::Pointwise)
      out += " " + enumName("CUDNN_POINTWISE_", op.pointwise);
    if (op.kind == OpKind::Reduction)
      out += " " + enumName("CUDNN_REDUCE_TENSOR_", op.reduction);
    for (int t : s.in) {
      const TensorInfo &i = p.tensors[size_t(t)].info;
      out += " " + std::string(i.byValue     ? "value "
                               : i.isVirtual ? "virtual "
                                             : "") +
             describe(i);
    }
    for (int which = 0; which < 3; ++which)
      if (s.overrides[which] >= 0)
        out += std::string(" ") + "MNK"[which] + "-override " +
               describe(p.tensors[size_t(s.overrides[which])].info);
    out += " -> " + std::string(op.output.isVirtual ? "virtual " : "") +
           describe(op.output) + " strides " + show(op.output.strides) + "\n";
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Binding a variant pack
//===----------------------------------------------------------------------===//

namespace {

/// Bytes from the first to the last element of `t`, inclusive.
size_t spanBytes(const TensorInfo &t) {
  int64_t last = 0;
  for (size_t d = 0; d < t.dims.size(); ++d)
    last += (t.dims[d] - 1) * t.strides[d];
  return size_t(last + 1) * elementBytes(t.type);
}

bool inDeviceMemory(const void *p, size_t bytes) {
  auto in = [](const void *q) { return isDeviceMemory(q) || isPinnedMemory(q); };
  return in(p) && in(static_cast<const char *>(p) + bytes - 1);
}

} // namespace

Binding bind(const Program &p, const std::vector<int64_t> &uids,
             const std::vector<void *> &pointers) {
  std::map<int64_t, void *> given;
  for (size_t i = 0; i < uids.size(); ++i)
    given[uids[i]] = pointers[i];
  Binding b;
  for (const Tensor &t : p.tensors) {
    const TensorInfo &i = t.info;
    if (i.isVirtual)
      continue;
    auto it = given.find(i.uid);
    if (it == given.end() || !it->second)
      fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
           "the variant pack has no pointer for " + describe(i));
    if (i.byValue) {
      b.scalars[i.uid] = load(static_cast<const char *>(it->second), i.type);
    } else if (!inDeviceMemory(it->second, spanBytes(i))) {
      fail(CUDNN_STATUS_BAD_PARAM,
           describe(i) + " at " + std::to_string(uintptr_t(it->second)) +
               ": its " + std::to_string(spanBytes(i)) +
               " bytes are not in emulated device memory (cudaMalloc)");
    } else {
      b.pointers[i.uid] = it->second;
    }
  }
  return b;
}

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

namespace {

using Values = std::vector<std::vector<float>>;

std::vector<float> loadTensor(const TensorInfo &t, const Binding &b) {
  if (t.byValue)
    return {roundTo(float(b.scalars.at(t.uid)), t.type)};
  const char *base = static_cast<const char *>(b.pointers.at(t.uid));
  size_t bytes = elementBytes(t.type);
  std::vector<int64_t> off = offsets(t.dims, t.strides);
  std::vector<float> v(off.size());
  for (size_t i = 0; i < off.size(); ++i)
    v[i] = load(base + off[i] * int64_t(bytes), t.type);
  return v;
}

void storeTensor(const TensorInfo &t, const Binding &b,
                 const std::vector<float> &v) {
  char *base = static_cast<char *>(b.pointers.at(t.uid));
  size_t bytes = elementBytes(t.type);
  std::vector<int64_t> off = offsets(t.dims, t.strides);
  for (size_t i = 0; i < off.size(); ++i)
    store(base + off[i] * int64_t(bytes), t.type, v[i]);
}

/// GEN_INDEX: each element's coordinate along `axis`.
std::vector<float> genIndex(const Dims &dims, int64_t axis) {
  int64_t cols = dims.back(), rows = numel(dims) / cols;
  int64_t rank = int64_t(dims.size()), below = 1;
  for (int64_t d = axis + 1; d + 1 < rank; ++d)
    below *= dims[size_t(d)];
  std::vector<float> y(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      y[size_t(r * cols + j)] =
          float(axis + 1 == rank ? j : (r / below) % dims[size_t(axis)]);
  return y;
}

/// y = op(alpha1 x, alpha2 b) (BINARY_SELECT: t ? x : b) over y's dims, row
/// by row (rows in parallel: each element is computed alone).
std::vector<float> pointwise(const Step &s, const Values &v,
                             const Program &p) {
  const OpInfo &op = s.op;
  const Dims &dims = op.output.dims;
  if (op.pointwise == CUDNN_POINTWISE_GEN_INDEX)
    return genIndex(dims, op.axis);
  std::vector<IndexMap> maps;
  std::vector<const float *> in;
  for (int t : s.in) {
    maps.emplace_back(dims, p.tensors[size_t(t)].info.dims);
    in.push_back(v[size_t(t)].data());
  }
  int64_t cols = dims.back(), rows = numel(dims) / cols;
  std::vector<float> y(size_t(rows * cols));
  float a1 = float(op.alpha1), a2 = float(op.alpha2);
  Arity ar = arity(op.pointwise);
#pragma omp parallel for if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = in[0] + maps[0].rowBase(r);
    const int64_t *xi = maps[0].inner.data();
    float *out = &y[size_t(r * cols)];
    if (ar == Arity::Unary) {
      for (int64_t j = 0; j < cols; ++j)
        out[j] = unary(op.pointwise, a1 * x[xi[j]]);
      continue;
    }
    const float *b = in[1] + maps[1].rowBase(r);
    const int64_t *bi = maps[1].inner.data();
    if (ar == Arity::Binary) {
      for (int64_t j = 0; j < cols; ++j)
        out[j] = binary(op.pointwise, a1 * x[xi[j]], a2 * b[bi[j]]);
      continue;
    }
    const float *t = in[2] + maps[2].rowBase(r);
    const int64_t *ti = maps[2].inner.data();
    for (int64_t j = 0; j < cols; ++j)
      out[j] = t[ti[j]] != 0 ? a1 * x[xi[j]] : a2 * b[bi[j]];
  }
  return y;
}

/// A fault of the engine's work (an override length out of range), reported
/// sticky by run(), as a kernel's fault is.
struct EngineFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// C = A B per batch of C (A's and B's batches broadcast onto C's), in f32
/// by the CPU backend's sgemm. With M/N/K overrides, batch entry i (of
/// leading index b) computes the first M_b x N_b block of C over the first
/// K_b of the reduction; the rest of C is the padding value.
std::vector<float> matmul(const Step &s, const Values &v, const Program &p) {
  const Dims &a = p.tensors[size_t(s.in[0])].info.dims,
             &b = p.tensors[size_t(s.in[1])].info.dims, &c = s.op.output.dims;
  size_t r = c.size();
  int64_t M = c[r - 2], N = c[r - 1], K = a[r - 1];
  Dims cb(c.begin(), c.end() - 2), ab(a.begin(), a.end() - 2),
      bb(b.begin(), b.end() - 2);
  cb.push_back(1), ab.push_back(1), bb.push_back(1); // IndexMap's last dim
  IndexMap toA(cb, ab), toB(cb, bb);
  int64_t batches = numel(cb);
  std::vector<float> y(size_t(batches * M * N));
  const float *av = v[size_t(s.in[0])].data(), *bv = v[size_t(s.in[1])].data();
  const int64_t full[3] = {M, N, K};
  // The length `which` (M, N, K) of batch entry i: its override's entry
  // for C's leading index, or the full dim.
  auto length = [&](int which, int64_t i) {
    int t = s.overrides[which];
    if (t < 0)
      return full[which];
    int64_t lead = i / (batches / c[0]);
    float n = v[size_t(t)][size_t(lead)];
    if (!(n >= 0 && n <= float(full[which])))
      throw EngineFault(enumName("CUDNN_ATTR_", kOverrideAttrs[which]) + " " +
                        describe(p.tensors[size_t(t)].info) + " gives " +
                        std::to_string(int64_t(n)) + " for entry " +
                        std::to_string(lead) + " of the matmul writing " +
                        describe(s.op.output) + ": outside [0, " +
                        std::to_string(full[which]) + "]");
    return int64_t(n);
  };
  float padding = float(s.op.padding);
  for (int64_t i = 0; i < batches; ++i) {
    int64_t m = length(0, i), n = length(1, i), k = length(2, i);
    float *ci = y.data() + i * M * N;
    if (m != M || n != N)
      std::fill(ci, ci + M * N, padding);
    if (m == 0 || n == 0)
      continue;
    if (k == 0) { // an empty sum
      for (int64_t row = 0; row < m; ++row)
        std::fill(ci + row * N, ci + row * N + n, 0.0f);
      continue;
    }
    shardc::runtime::cpu::sgemm(false, false, m, n, k, 1.0f,
                                av + toA.rowBase(i) * M * K, K,
                                bv + toB.rowBase(i) * K * N, N, 0.0f, ci, N);
  }
  return y;
}

float reductionInit(cudnnReduceTensorOp_t op) {
  switch (op) {
  case CUDNN_REDUCE_TENSOR_MUL:
  case CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS:
    return 1;
  case CUDNN_REDUCE_TENSOR_MIN:
    return std::numeric_limits<float>::infinity();
  case CUDNN_REDUCE_TENSOR_MAX:
    return -std::numeric_limits<float>::infinity();
  default:
    return 0;
  }
}

float accumulate(cudnnReduceTensorOp_t op, float acc, float x) {
  switch (op) {
  case CUDNN_REDUCE_TENSOR_MUL:
    return acc * x;
  case CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS:
    return x == 0 ? acc : acc * x;
  case CUDNN_REDUCE_TENSOR_MIN:
    return std::fmin(acc, x);
  case CUDNN_REDUCE_TENSOR_MAX:
    return std::fmax(acc, x);
  case CUDNN_REDUCE_TENSOR_AMAX:
    return std::fmax(acc, std::fabs(x));
  case CUDNN_REDUCE_TENSOR_NORM1:
    return acc + std::fabs(x);
  case CUDNN_REDUCE_TENSOR_NORM2:
    return acc + x * x;
  default: // ADD, AVG
    return acc + x;
  }
}

/// y[i] = reduce of the x mapping onto i, in x's row-major order.
std::vector<float> reduce(const Step &s, const Values &v, const Program &p) {
  const Dims &xd = p.tensors[size_t(s.in[0])].info.dims;
  const Dims &yd = s.op.output.dims;
  cudnnReduceTensorOp_t op = s.op.reduction;
  IndexMap toY(xd, yd);
  std::vector<float> y(size_t(numel(yd)), reductionInit(op));
  const float *x = v[size_t(s.in[0])].data();
  int64_t cols = xd.back(), rows = numel(xd) / cols;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t base = toY.rowBase(r);
    for (int64_t j = 0; j < cols; ++j) {
      float &acc = y[size_t(base + toY.inner[size_t(j)])];
      acc = accumulate(op, acc, x[r * cols + j]);
    }
  }
  float count = float(numel(xd) / numel(yd));
  for (float &e : y)
    e = op == CUDNN_REDUCE_TENSOR_AVG     ? e / count
        : op == CUDNN_REDUCE_TENSOR_NORM2 ? std::sqrt(e)
                                          : e;
  return y;
}

/// y = x's memory (x laid out at its declared strides) read at y's strides.
std::vector<float> reshape(const Step &s, const Values &v, const Program &p) {
  const TensorInfo &x = p.tensors[size_t(s.in[0])].info, &y = s.op.output;
  std::vector<int64_t> xo = offsets(x.dims, x.strides);
  std::vector<float> image(size_t(*std::max_element(xo.begin(), xo.end()) + 1));
  const std::vector<float> &xv = v[size_t(s.in[0])];
  for (size_t i = 0; i < xo.size(); ++i)
    image[size_t(xo[i])] = xv[i];
  std::vector<int64_t> yo = offsets(y.dims, y.strides);
  std::vector<float> out(yo.size());
  for (size_t i = 0; i < yo.size(); ++i)
    out[i] = image[size_t(yo[i])];
  return out;
}

std::vector<float> evaluate(const Step &s, const Values &v, const Program &p) {
  switch (s.op.kind) {
  case OpKind::Pointwise:
    return pointwise(s, v, p);
  case OpKind::Matmul:
    return matmul(s, v, p);
  case OpKind::Reduction:
    return reduce(s, v, p);
  case OpKind::Reshape:
    return reshape(s, v, p);
  }
  return {};
}

void runSteps(const Program &p, const Binding &b) {
  Values v(p.tensors.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step &s = p.steps[i];
    for (int t : s.reads())
      if (v[size_t(t)].empty())
        v[size_t(t)] = loadTensor(p.tensors[size_t(t)].info, b);
    std::vector<float> y = evaluate(s, v, p);
    cudnnDataType_t type = s.op.output.type;
    if (type != CUDNN_DATA_FLOAT && type != CUDNN_DATA_DOUBLE)
      for (float &e : y)
        e = roundTo(e, type);
    if (!s.op.output.isVirtual)
      storeTensor(s.op.output, b, y);
    if (p.tensors[size_t(s.out)].lastUse > int(i))
      v[size_t(s.out)] = std::move(y);
    for (int t : s.reads())
      if (p.tensors[size_t(t)].lastUse == int(i))
        std::vector<float>().swap(v[size_t(t)]);
  }
}

} // namespace

void run(const Program &p, const Binding &b) {
  try {
    runSteps(p, b);
  } catch (const EngineFault &e) {
    shardc::emu::report(cudaErrorIllegalAddress,
                        std::string("cudnnBackendExecute: ") + e.what(),
                        /*sticky=*/true);
  }
}

} // namespace shardc::emu::cudnn
