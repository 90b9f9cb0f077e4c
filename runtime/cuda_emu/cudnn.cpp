//===- cudnn.cpp - cuDNN's backend API on the emulated device -------------===//
//
// Host versions of the cuDNN 9 backend API (cudnn_graph_v9.h, NVIDIA's
// declarations) that cudnn-frontend calls to build and run its graphs:
// handles and their streams, descriptors, attributes, finalize, heuristics,
// engines, engine configs, execution plans, variant packs and execute.
//
//  - Descriptors keep the attributes set on them; a descriptor set as an
//    attribute is copied (its state when set), as cuDNN copies it.
//    Finalize checks a descriptor and builds what it describes: a tensor,
//    an operation, an operation graph (cudnn_graph.cpp's Program, checked
//    and ordered once).
//  - One engine (global index 0) runs every graph cudnn_graph.cpp
//    implements: the heuristics return one engine config for it, no knobs,
//    no numerical or behaviour notes (it is deterministic, whichever SDPA
//    backward the frontend built, and compiles nothing at run time). Its
//    workspace is what the real engine asks for (engineWorkspace: the
//    deterministic SDPA backward's dP buffer, else none); execute checks
//    the variant pack's workspace is device memory spanning that much, and
//    scribbles over it (NaN bytes) before the graph runs, so that a plan
//    giving less shows. A graph using something it lacks gets no
//    config, and cudnnGetLastErrorString says what.
//  - Execute binds the variant pack (device pointers, by-value scalars read
//    at once) and enqueues the graph's evaluation on the handle's stream
//    (cudnnSetStream), as a kernel is: it runs in stream order and is
//    captured into CUDA graphs like any other work of the device.
//  - cudnnGetVersion is 91400, what the GPU machine's library reported (an
//    H200 with CUDA 13, tools/bench/results/h200-2026-11-26-sdpa-run2.log;
//    the headers here are 9.19's), so that cudnn-frontend, which picks its
//    graphs by the backend's version, builds the same graphs for both.
//
// Refused by name (CUDNN_STATUS_NOT_SUPPORTED, the name in the last error
// string): descriptor types other than those above (convolutions, norms,
// RNG, kernel caches, device properties, the fused SDPA operations...) when
// created, attributes not listed in settable() when set, ragged, vectorized
// or reordered tensors when finalized, knob choices; a graph with what the
// engine lacks (cudnn_graph.cpp: pointwise modes, types; dynamic shapes)
// gets no engine config. Also
// cudnnBackendPopulateCudaGraph / UpdateCudaGraph.
//
// Also here: the NVRTC entry points cudnn-frontend's run-time-compiled
// engines link, which the emulated device refuses (it compiles no CUDA).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda_emu/cudnn_graph.h"
#include "runtime/cuda_emu/emu.h"

#include <cudnn.h>
#include <nvrtc.h>

// cudnn-frontend sets attributes cuDNN 9 calls deprecated (the operation
// graph's handle, NaN propagation): they are accepted by their names.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

/// A cuDNN handle: the stream its work goes to.
struct cudnnContext {
  cudaStream_t stream = nullptr;
};

namespace shardc::emu::cudnn {

//===----------------------------------------------------------------------===//
// Names and errors
//===----------------------------------------------------------------------===//

namespace {

struct EnumName {
  const char *name;
  int64_t value;
};

/// Every enumerator of cudnn_graph_v9.h (generated from the header by
/// CMakeLists.txt).
const EnumName kEnumNames[] = {
#define NAME(name, value) {#name, value},
#include "cudnn_names.inc"
#undef NAME
};

const char *findName(const char *prefix, int64_t value) {
  size_t n = std::strlen(prefix);
  for (const EnumName &e : kEnumNames)
    if (e.value == value && std::strncmp(e.name, prefix, n) == 0)
      return e.name;
  return nullptr;
}

std::string attrName(cudnnBackendAttributeName_t a) {
  return enumName("CUDNN_ATTR_", a);
}
std::string descName(cudnnBackendDescriptorType_t t) {
  return enumName("CUDNN_BACKEND_", t);
}

std::string &lastError() {
  thread_local std::string message;
  return message;
}

/// Records `message` for cudnnGetLastErrorString and prints it, as the
/// emulated CUDA runtime prints its errors.
cudnnStatus_t report(cudnnStatus_t status, const std::string &message) {
  lastError() = message;
  std::fprintf(stderr, "cudnn-emulation: %s (%s)\n", message.c_str(),
               enumName("CUDNN_STATUS_", status).c_str());
  std::fflush(stderr);
  return status;
}

/// Runs `body`, turning a thrown Error into its status and message.
template <typename Body>
cudnnStatus_t guarded(const char *call, Body &&body) {
  try {
    body();
    return CUDNN_STATUS_SUCCESS;
  } catch (const Error &e) {
    return report(e.status, std::string(call) + ": " + e.what());
  } catch (const std::bad_alloc &) {
    return report(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
                  std::string(call) + ": out of host memory");
  }
}

} // namespace

std::string enumName(const char *prefix, int64_t value) {
  if (const char *n = findName(prefix, value))
    return n;
  return std::string(prefix) + "? (" + std::to_string(value) + ")";
}

//===----------------------------------------------------------------------===//
// Descriptors and attributes
//===----------------------------------------------------------------------===//

namespace {

struct Desc;
using DescPtr = std::shared_ptr<const Desc>;

/// One attribute as set: `count` elements of `type`.
struct Value {
  cudnnBackendAttributeType_t type = CUDNN_TYPE_INT64;
  int64_t count = 0;
  std::vector<char> bytes;     ///< the elements (not descriptors)
  std::vector<DescPtr> descs;  ///< CUDNN_TYPE_BACKEND_DESCRIPTOR: copies
};

struct Desc {
  cudnnBackendDescriptorType_t type;
  std::map<cudnnBackendAttributeName_t, Value> attrs;
  bool finalized = false;
  // What finalize built, by type.
  TensorInfo tensor;
  OpInfo op;
  std::shared_ptr<const Program> program; ///< graph, heuristics, engine,
                                          ///< config, plan
  std::string unsupported; ///< why the engine cannot run `program`
  std::vector<int64_t> uids; ///< variant pack
  std::vector<void *> pointers;
};

/// The attributes each descriptor type takes, with their types; a type
/// missing here is refused by cudnnBackendCreateDescriptor.
using AttrTypes =
    std::map<cudnnBackendAttributeName_t,
             std::vector<cudnnBackendAttributeType_t>>;

const std::map<cudnnBackendDescriptorType_t, AttrTypes> &settable() {
  constexpr auto D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  constexpr auto I = CUDNN_TYPE_INT64;
  constexpr auto F = CUDNN_TYPE_DOUBLE;
  constexpr auto B = CUDNN_TYPE_BOOLEAN;
  constexpr auto T = CUDNN_TYPE_DATA_TYPE;
  static const std::map<cudnnBackendDescriptorType_t, AttrTypes> table = {
      {CUDNN_BACKEND_TENSOR_DESCRIPTOR,
       {{CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, {I}},
        {CUDNN_ATTR_TENSOR_DATA_TYPE, {T}},
        {CUDNN_ATTR_TENSOR_DIMENSIONS, {I}},
        {CUDNN_ATTR_TENSOR_STRIDES, {I}},
        {CUDNN_ATTR_TENSOR_VECTOR_COUNT, {I}},
        {CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION, {I}},
        {CUDNN_ATTR_TENSOR_UNIQUE_ID, {I}},
        {CUDNN_ATTR_TENSOR_IS_VIRTUAL, {B}},
        {CUDNN_ATTR_TENSOR_IS_BY_VALUE, {B}},
        {CUDNN_ATTR_TENSOR_REORDERING_MODE, {CUDNN_TYPE_TENSOR_REORDERING_MODE}},
        {CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, {D}}}},
      {CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
       {{CUDNN_ATTR_POINTWISE_MODE, {CUDNN_TYPE_POINTWISE_MODE}},
        {CUDNN_ATTR_POINTWISE_MATH_PREC, {T}},
        {CUDNN_ATTR_POINTWISE_NAN_PROPAGATION, {CUDNN_TYPE_NAN_PROPOGATION}},
        {CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, {F}},
        {CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, {F}},
        {CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, {F}},
        {CUDNN_ATTR_POINTWISE_ELU_ALPHA, {F}},
        {CUDNN_ATTR_POINTWISE_SOFTPLUS_BETA, {F}},
        {CUDNN_ATTR_POINTWISE_SWISH_BETA, {F}},
        {CUDNN_ATTR_POINTWISE_AXIS, {I}}}},
      {CUDNN_BACKEND_MATMUL_DESCRIPTOR,
       {{CUDNN_ATTR_MATMUL_COMP_TYPE, {T}},
        {CUDNN_ATTR_MATMUL_PADDING_VALUE, {F}}}},
      {CUDNN_BACKEND_REDUCTION_DESCRIPTOR,
       {{CUDNN_ATTR_REDUCTION_OPERATOR, {CUDNN_TYPE_REDUCTION_OPERATOR_TYPE}},
        {CUDNN_ATTR_REDUCTION_COMP_TYPE, {T}},
        {CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, {B}}}},
      {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
       {{CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, {D}},
        {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, {D}},
        {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, {D}},
        {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, {D}},
        {CUDNN_ATTR_OPERATION_POINTWISE_TDESC, {D}},
        {CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, {D}},
        {CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, {D}},
        {CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, {CUDNN_TYPE_FLOAT, F}},
        {CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, {CUDNN_TYPE_FLOAT, F}}}},
      {CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
       {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, {D}},
        {CUDNN_ATTR_OPERATION_MATMUL_BDESC, {D}},
        {CUDNN_ATTR_OPERATION_MATMUL_CDESC, {D}},
        {CUDNN_ATTR_OPERATION_MATMUL_DESC, {D}},
        {CUDNN_ATTR_OPERATION_MATMUL_IRREGULARLY_STRIDED_BATCH_COUNT, {I}},
        {CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, {D}},
        {CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, {D}},
        {CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, {D}}}},
      {CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
       {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, {D}},
        {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, {D}},
        {CUDNN_ATTR_OPERATION_REDUCTION_DESC, {D}}}},
      {CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
       {{CUDNN_ATTR_OPERATION_RESHAPE_XDESC, {D}},
        {CUDNN_ATTR_OPERATION_RESHAPE_YDESC, {D}}}},
      {CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
       {{CUDNN_ATTR_OPERATIONGRAPH_HANDLE, {CUDNN_TYPE_HANDLE}},
        {CUDNN_ATTR_OPERATIONGRAPH_OPS, {D}},
        {CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED, {B}}}},
      {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR,
       {{CUDNN_ATTR_ENGINEHEUR_MODE, {CUDNN_TYPE_HEUR_MODE}},
        {CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, {D}},
        {CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET, {CUDNN_TYPE_INT32}}}},
      {CUDNN_BACKEND_ENGINE_DESCRIPTOR,
       {{CUDNN_ATTR_ENGINE_OPERATION_GRAPH, {D}},
        {CUDNN_ATTR_ENGINE_GLOBAL_INDEX, {I}},
        {CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, {CUDNN_TYPE_INT32}}}},
      {CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
       {{CUDNN_ATTR_ENGINECFG_ENGINE, {D}},
        {CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, {D}}}},
      {CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,
       {{CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, {CUDNN_TYPE_KNOB_TYPE}},
        {CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, {I}}}},
      {CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, {}},
      {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
       {{CUDNN_ATTR_EXECUTION_PLAN_HANDLE, {CUDNN_TYPE_HANDLE}},
        {CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, {D}}}},
      {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
       {{CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, {I}},
        {CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, {CUDNN_TYPE_VOID_PTR}},
        {CUDNN_ATTR_VARIANT_PACK_WORKSPACE, {CUDNN_TYPE_VOID_PTR}}}},
  };
  return table;
}

size_t elementSize(cudnnBackendAttributeType_t type) {
  switch (type) {
  case CUDNN_TYPE_HANDLE:
  case CUDNN_TYPE_VOID_PTR:
  case CUDNN_TYPE_BACKEND_DESCRIPTOR:
  case CUDNN_TYPE_INT64:
  case CUDNN_TYPE_DOUBLE:
    return 8;
  case CUDNN_TYPE_BOOLEAN:
    return sizeof(bool);
  case CUDNN_TYPE_CHAR:
    return 1;
  case CUDNN_TYPE_FRACTION:
    return sizeof(cudnnFraction_t);
  default: // FLOAT, INT32 and the enums
    return 4;
  }
}

/// The live descriptors: a pointer that is none of them is refused.
struct Registry {
  std::mutex m;
  std::set<const void *> live;
};

Registry &registry() {
  static Registry *r = new Registry; // outlives static destructors
  return *r;
}

Desc &deref(cudnnBackendDescriptor_t d) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.m);
  if (!d || !r.live.count(d))
    fail(CUDNN_STATUS_BAD_PARAM, "not a live backend descriptor");
  return *static_cast<Desc *>(d);
}

const Value *find(const Desc &d, cudnnBackendAttributeName_t a) {
  auto it = d.attrs.find(a);
  return it == d.attrs.end() ? nullptr : &it->second;
}

template <typename T> T scalar(const Value &v) {
  T out{};
  std::memcpy(&out, v.bytes.data(), std::min(sizeof(T), v.bytes.size()));
  return out;
}

/// The attribute's one element, or `otherwise` if it is not set.
template <typename T>
T get(const Desc &d, cudnnBackendAttributeName_t a, T otherwise) {
  const Value *v = find(d, a);
  return v && v->count ? scalar<T>(*v) : otherwise;
}

std::vector<int64_t> ints(const Desc &d, cudnnBackendAttributeName_t a) {
  const Value *v = find(d, a);
  std::vector<int64_t> out(v ? size_t(v->count) : 0);
  if (!out.empty())
    std::memcpy(out.data(), v->bytes.data(), out.size() * sizeof(int64_t));
  return out;
}

/// The finalized descriptor of type `type` set as `a`; null if unset and
/// not `required`.
const Desc *child(const Desc &d, cudnnBackendAttributeName_t a,
                  cudnnBackendDescriptorType_t type, bool required = true) {
  const Value *v = find(d, a);
  if (!v || v->descs.empty()) {
    if (required)
      fail(CUDNN_STATUS_BAD_PARAM, descName(d.type) + " needs " + attrName(a));
    return nullptr;
  }
  const Desc &c = *v->descs[0];
  if (c.type != type)
    fail(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
         attrName(a) + " is a " + descName(c.type) + ", not a " + descName(type));
  return &c;
}

void setAttribute(Desc &d, cudnnBackendAttributeName_t a,
                  cudnnBackendAttributeType_t type, int64_t count,
                  const void *elements) {
  const AttrTypes &ok = settable().at(d.type);
  auto it = ok.find(a);
  if (it == ok.end())
    fail(CUDNN_STATUS_NOT_SUPPORTED, attrName(a) + " of a " + descName(d.type) +
                                         " is not emulated");
  if (std::find(it->second.begin(), it->second.end(), type) == it->second.end())
    fail(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
         attrName(a) + " is not of type " + enumName("CUDNN_TYPE_", type));
  if (d.finalized)
    fail(CUDNN_STATUS_BAD_PARAM, descName(d.type) + " is already finalized");
  if (count < 0 || (count && !elements))
    fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, attrName(a) + ": no elements");
  Value v{type, count, {}, {}};
  if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    auto *list = static_cast<const cudnnBackendDescriptor_t *>(elements);
    for (int64_t i = 0; i < count; ++i) {
      const Desc &c = deref(list[i]);
      if (!c.finalized)
        fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
             attrName(a) + ": the " + descName(c.type) + " is not finalized");
      v.descs.push_back(std::make_shared<const Desc>(c));
    }
  } else {
    auto *p = static_cast<const char *>(elements);
    v.bytes.assign(p, p + size_t(count) * elementSize(type));
  }
  d.attrs[a] = std::move(v);
}

//===----------------------------------------------------------------------===//
// Finalize: tensors and operations
//===----------------------------------------------------------------------===//

void finalizeTensor(Desc &d) {
  TensorInfo &t = d.tensor;
  if (!find(d, CUDNN_ATTR_TENSOR_DATA_TYPE) ||
      !find(d, CUDNN_ATTR_TENSOR_UNIQUE_ID))
    fail(CUDNN_STATUS_BAD_PARAM, "a tensor needs a data type and a unique id");
  t.type = get(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_DATA_FLOAT);
  t.uid = get<int64_t>(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0);
  t.dims = ints(d, CUDNN_ATTR_TENSOR_DIMENSIONS);
  t.strides = ints(d, CUDNN_ATTR_TENSOR_STRIDES);
  t.isVirtual = get(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, false);
  t.byValue = get(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, false);
  if (t.dims.empty() || t.dims.size() != t.strides.size() ||
      t.dims.size() > CUDNN_DIM_MAX)
    fail(CUDNN_STATUS_BAD_PARAM, "tensor uid " + std::to_string(t.uid) +
                                     ": 1 to 8 dims, one stride each");
  std::string what;
  if (get<int64_t>(d, CUDNN_ATTR_TENSOR_VECTOR_COUNT, 1) != 1)
    what = attrName(CUDNN_ATTR_TENSOR_VECTOR_COUNT) + " other than 1";
  if (get(d, CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TENSOR_REORDERING_NONE) !=
      CUDNN_TENSOR_REORDERING_NONE)
    what = enumName("CUDNN_TENSOR_REORDERING_",
                    get(d, CUDNN_ATTR_TENSOR_REORDERING_MODE,
                        CUDNN_TENSOR_REORDERING_NONE));
  if (find(d, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC))
    what = attrName(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC);
  if (!what.empty())
    fail(CUDNN_STATUS_NOT_SUPPORTED, "tensor uid " + std::to_string(t.uid) +
                                         ": " + what + " is not emulated");
}

/// The pointwise descriptor's mode, axis, precision and what the engine
/// lacks of it.
void readPointwiseDesc(const Desc &pw, OpInfo &op) {
  op.pointwise = get(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_POINTWISE_IDENTITY);
  op.axis = get<int64_t>(pw, CUDNN_ATTR_POINTWISE_AXIS, -1);
  op.compute = get(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_DATA_FLOAT);
  if (op.pointwise != CUDNN_POINTWISE_RELU_FWD)
    return;
  double lower = get(pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, 0.0);
  double slope = get(pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, 0.0);
  double upper = get(pw, CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, 3.4e38);
  if (lower != 0 || slope != 0 || upper < 3.4e38)
    op.unsupported = "CUDNN_POINTWISE_RELU_FWD with clips is not emulated";
}

double alpha(const Desc &d, cudnnBackendAttributeName_t a) {
  const Value *v = find(d, a);
  if (!v || !v->count)
    return 1;
  return v->type == CUDNN_TYPE_FLOAT ? scalar<float>(*v) : scalar<double>(*v);
}

void finalizePointwise(Desc &d) {
  OpInfo &op = d.op;
  op.kind = OpKind::Pointwise;
  readPointwiseDesc(*child(d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                           CUDNN_BACKEND_POINTWISE_DESCRIPTOR),
                    op);
  auto tensor = [&](cudnnBackendAttributeName_t a, bool required) {
    const Desc *t = child(d, a, CUDNN_BACKEND_TENSOR_DESCRIPTOR, required);
    return t ? &t->tensor : nullptr;
  };
  if (find(d, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC) ||
      find(d, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC))
    op.unsupported = enumName("CUDNN_POINTWISE_", op.pointwise) +
                     " (an activation backward: DXDESC, DYDESC) is not emulated";
  op.output = *tensor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, true);
  op.inputs.push_back(*tensor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, true));
  for (auto a : {CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                 CUDNN_ATTR_OPERATION_POINTWISE_TDESC})
    if (const TensorInfo *t = tensor(a, false))
      op.inputs.push_back(*t);
  op.alpha1 = alpha(d, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1);
  op.alpha2 = alpha(d, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2);
}

/// Math in f32 (what the engine does) stands for these precisions.
void checkCompute(OpInfo &op, cudnnDataType_t type, const char *what) {
  op.compute = type;
  bool ok = type == CUDNN_DATA_FLOAT || type == CUDNN_DATA_INT32 ||
            type == CUDNN_DATA_INT64 || type == CUDNN_DATA_BOOLEAN;
  if (!ok && op.unsupported.empty())
    op.unsupported = std::string(what) + " " + enumName("CUDNN_DATA_", type) +
                     " is not emulated (f32 is)";
}

void finalizeMatmul(Desc &d) {
  OpInfo &op = d.op;
  op.kind = OpKind::Matmul;
  const Desc *mm = child(d, CUDNN_ATTR_OPERATION_MATMUL_DESC,
                         CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  for (auto a : {CUDNN_ATTR_OPERATION_MATMUL_ADESC,
                 CUDNN_ATTR_OPERATION_MATMUL_BDESC})
    op.inputs.push_back(
        child(d, a, CUDNN_BACKEND_TENSOR_DESCRIPTOR)->tensor);
  op.output = child(d, CUDNN_ATTR_OPERATION_MATMUL_CDESC,
                    CUDNN_BACKEND_TENSOR_DESCRIPTOR)
                  ->tensor;
  // The per-batch M, N and K (cudnn_graph.cpp checks their tensors and
  // computes only the block they give, the padding value around it).
  const cudnnBackendAttributeName_t overrides[3] = {
      CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC,
      CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC,
      CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC};
  for (int which = 0; which < 3; ++which)
    if (const Desc *t =
            child(d, overrides[which], CUDNN_BACKEND_TENSOR_DESCRIPTOR, false))
      op.overrides[which] = t->tensor;
  op.padding = get(*mm, CUDNN_ATTR_MATMUL_PADDING_VALUE, 0.0);
  checkCompute(op, get(*mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT),
               "matmul compute type");
}

void finalizeReduction(Desc &d) {
  OpInfo &op = d.op;
  op.kind = OpKind::Reduction;
  const Desc *r = child(d, CUDNN_ATTR_OPERATION_REDUCTION_DESC,
                        CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  op.reduction = get(*r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_REDUCE_TENSOR_ADD);
  op.inputs.push_back(child(d, CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
                            CUDNN_BACKEND_TENSOR_DESCRIPTOR)
                          ->tensor);
  op.output = child(d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
                    CUDNN_BACKEND_TENSOR_DESCRIPTOR)
                  ->tensor;
  checkCompute(op, get(*r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT),
               "reduction compute type");
}

void finalizeReshape(Desc &d) {
  d.op.kind = OpKind::Reshape;
  d.op.inputs.push_back(child(d, CUDNN_ATTR_OPERATION_RESHAPE_XDESC,
                              CUDNN_BACKEND_TENSOR_DESCRIPTOR)
                            ->tensor);
  d.op.output = child(d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC,
                      CUDNN_BACKEND_TENSOR_DESCRIPTOR)
                    ->tensor;
}

//===----------------------------------------------------------------------===//
// Finalize: graphs, heuristics, engines, plans, variant packs
//===----------------------------------------------------------------------===//

bool isOperation(cudnnBackendDescriptorType_t t) {
  return t == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR ||
         t == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR ||
         t == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR ||
         t == CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR;
}

void finalizeGraph(Desc &d) {
  const Value *ops = find(d, CUDNN_ATTR_OPERATIONGRAPH_OPS);
  if (!ops || ops->descs.empty())
    fail(CUDNN_STATUS_BAD_PARAM, "an operation graph needs operations");
  std::vector<OpInfo> list;
  for (const DescPtr &op : ops->descs) {
    if (!isOperation(op->type))
      fail(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
           descName(op->type) + " is not an operation");
    list.push_back(op->op);
  }
  d.program = buildProgram(list);
  d.unsupported = unsupportedReason(*d.program);
  if (std::getenv("SHARDC_EMU_CUDNN_LOG"))
    std::fprintf(stderr, "cudnn-emulation: operation graph\n%s",
                 describe(*d.program).c_str());
  if (get(d, CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED, false))
    d.unsupported = "dynamic shapes (CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_"
                    "SHAPE_ENABLED) are not emulated";
}

/// Takes the program of the descriptor set as `a` (of type `type`).
void inherit(Desc &d, cudnnBackendAttributeName_t a,
             cudnnBackendDescriptorType_t type) {
  const Desc *from = child(d, a, type);
  d.program = from->program;
  d.unsupported = from->unsupported;
}

void finalizeEngine(Desc &d) {
  inherit(d, CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
          CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  int64_t index = get<int64_t>(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, -1);
  if (index != 0)
    fail(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND,
         "engine " + std::to_string(index) +
             ": the emulated device has one engine, global index 0");
  if (!d.unsupported.empty())
    fail(CUDNN_STATUS_NOT_SUPPORTED, "engine 0 cannot run the graph: " +
                                         d.unsupported);
}

void finalizeConfig(Desc &d) {
  inherit(d, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  const Value *knobs = find(d, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES);
  if (knobs && !knobs->descs.empty())
    fail(CUDNN_STATUS_NOT_SUPPORTED,
         "engine 0 has no knobs; given " +
             enumName("CUDNN_KNOB_TYPE_",
                      get(*knobs->descs[0], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                          CUDNN_KNOB_TYPE_COUNTS)));
}

void finalizeVariantPack(Desc &d) {
  d.uids = ints(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  const Value *p = find(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  d.pointers.assign(p ? size_t(p->count) : 0, nullptr);
  if (p && p->count)
    std::memcpy(d.pointers.data(), p->bytes.data(), p->bytes.size());
  if (d.pointers.size() != d.uids.size())
    fail(CUDNN_STATUS_BAD_PARAM, "a variant pack needs one pointer per uid");
}

void finalize(Desc &d) {
  if (d.finalized)
    fail(CUDNN_STATUS_BAD_PARAM, descName(d.type) + " is already finalized");
  switch (d.type) {
  case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
    finalizeTensor(d);
    break;
  case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
    if (!find(d, CUDNN_ATTR_POINTWISE_MODE))
      fail(CUDNN_STATUS_BAD_PARAM, "a pointwise descriptor needs a mode");
    break;
  case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
    finalizePointwise(d);
    break;
  case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    finalizeMatmul(d);
    break;
  case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
    finalizeReduction(d);
    break;
  case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
    finalizeReshape(d);
    break;
  case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
    finalizeGraph(d);
    break;
  case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
    inherit(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
            CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    break;
  case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
    finalizeEngine(d);
    break;
  case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    finalizeConfig(d);
    break;
  case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
    inherit(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
            CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    break;
  case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
    finalizeVariantPack(d);
    break;
  default: // matmul, reduction, knob choice: attributes only
    break;
  }
  d.finalized = true;
}

//===----------------------------------------------------------------------===//
// Get: stored attributes and what the engine reports
//===----------------------------------------------------------------------===//

/// The one engine config of `graph` (the heuristics' result).
Desc engineConfig(const Desc &graph) {
  Desc engine{CUDNN_BACKEND_ENGINE_DESCRIPTOR, {}};
  engine.attrs[CUDNN_ATTR_ENGINE_OPERATION_GRAPH] = {
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, {}, {std::make_shared<const Desc>(graph)}};
  int64_t zero = 0;
  engine.attrs[CUDNN_ATTR_ENGINE_GLOBAL_INDEX] = {
      CUDNN_TYPE_INT64, 1,
      std::vector<char>(reinterpret_cast<char *>(&zero),
                        reinterpret_cast<char *>(&zero + 1)),
      {}};
  engine.program = graph.program;
  engine.finalized = true;
  Desc config{CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, {}};
  config.attrs[CUDNN_ATTR_ENGINECFG_ENGINE] = {
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, {}, {std::make_shared<const Desc>(engine)}};
  config.program = graph.program;
  config.finalized = true;
  return config;
}

/// An attribute's value as the query sees it: stored, or computed.
Value query(const Desc &d, cudnnBackendAttributeName_t a) {
  if (const Value *v = find(d, a))
    return *v;
  auto number = [](cudnnBackendAttributeType_t type, int64_t n) {
    Value v{type, 1, std::vector<char>(elementSize(type)), {}};
    std::memcpy(v.bytes.data(), &n, v.bytes.size()); // little-endian
    return v;
  };
  auto none = [](cudnnBackendAttributeType_t type) { return Value{type, 0, {}, {}}; };
  switch (a) {
  case CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT:
    return number(CUDNN_TYPE_INT64, 1);
  case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE:
  case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE:
    return number(CUDNN_TYPE_INT64,
                  d.program ? engineWorkspace(*d.program) : 0);
  case CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED:
    return number(CUDNN_TYPE_INT32, 0);
  case CUDNN_ATTR_ENGINECFG_KNOB_CHOICES:
  case CUDNN_ATTR_ENGINE_KNOB_INFO:
    return none(CUDNN_TYPE_BACKEND_DESCRIPTOR);
  case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE: // deterministic, f32 math
    return none(CUDNN_TYPE_NUMERICAL_NOTE);
  case CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE: // nothing compiled at run time
    return none(CUDNN_TYPE_BEHAVIOR_NOTE);
  default:
    break;
  }
  fail(CUDNN_STATUS_NOT_SUPPORTED,
       attrName(a) + " of a " + descName(d.type) + " is not emulated");
}

/// ENGINEHEUR_RESULTS: one config, or none (with the reason as the last
/// error) for a graph the engine cannot run.
Value heuristicResults(const Desc &d) {
  if (!d.finalized)
    fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "the heuristics are not finalized");
  if (!d.unsupported.empty()) {
    report(CUDNN_STATUS_NOT_SUPPORTED,
           "no engine config: the emulated engine cannot run the graph: " +
               d.unsupported);
    return Value{CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, {}, {}};
  }
  const Desc *graph = child(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                            CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  return Value{CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, {},
               {std::make_shared<const Desc>(engineConfig(*graph))}};
}

void getAttribute(const Desc &d, cudnnBackendAttributeName_t a,
                  cudnnBackendAttributeType_t type, int64_t requested,
                  int64_t *count, void *elements) {
  Value v = a == CUDNN_ATTR_ENGINEHEUR_RESULTS ? heuristicResults(d) : query(d, a);
  if (v.type != type)
    fail(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
         attrName(a) + " is of type " + enumName("CUDNN_TYPE_", v.type) +
             ", asked as " + enumName("CUDNN_TYPE_", type));
  if (count)
    *count = v.count;
  if (!elements || requested <= 0)
    return;
  int64_t n = std::min(requested, v.count);
  if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    std::memcpy(elements, v.bytes.data(), size_t(n) * elementSize(type));
    return;
  }
  auto *out = static_cast<cudnnBackendDescriptor_t *>(elements);
  for (int64_t i = 0; i < n; ++i) {
    Desc &dst = deref(out[i]);
    if (dst.type != v.descs[size_t(i)]->type)
      fail(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
           attrName(a) + " fills a " + descName(v.descs[size_t(i)]->type) +
               ", given a " + descName(dst.type));
    dst = *v.descs[size_t(i)];
  }
}

//===----------------------------------------------------------------------===//
// Execute
//===----------------------------------------------------------------------===//

void execute(cudnnHandle_t handle, const Desc &plan, const Desc &pack) {
  if (!handle)
    fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "no handle");
  if (plan.type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR ||
      pack.type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    fail(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
         "execute takes an execution plan and a variant pack");
  if (!plan.finalized || !pack.finalized)
    fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
         "the plan or the variant pack is not finalized");
  std::shared_ptr<const Program> program = plan.program;
  Binding binding = bind(*program, pack.uids, pack.pointers);
  // The engine's workspace: device memory of at least what it asked for.
  int64_t wsBytes = engineWorkspace(*program);
  char *ws = nullptr;
  if (const Value *w = find(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE))
    if (w->bytes.size() == sizeof(void *))
      std::memcpy(&ws, w->bytes.data(), sizeof ws);
  if (wsBytes > 0 && (!ws || !shardc::emu::isDeviceMemory(ws) ||
                      !shardc::emu::isDeviceMemory(ws + wsBytes - 1)))
    fail(CUDNN_STATUS_BAD_PARAM,
         "the variant pack's workspace is not " + std::to_string(wsBytes) +
             " bytes of device memory (what the engine asked for)");
  cudaError_t err = enqueue(
      handle->stream, "cudnnBackendExecute",
      [program, binding = std::move(binding), ws, wsBytes]() {
        if (wsBytes > 0)
          std::memset(ws, 0xff, size_t(wsBytes)); // NaN, as scratch is left
        run(*program, binding);
      });
  if (err != cudaSuccess)
    fail(CUDNN_STATUS_EXECUTION_FAILED_CUDART,
         std::string("the stream refused the work: ") + cudaGetErrorName(err));
}

} // namespace
} // namespace shardc::emu::cudnn

//===----------------------------------------------------------------------===//
// The C API
//===----------------------------------------------------------------------===//

using namespace shardc::emu::cudnn;

extern "C" {

/// The GPU machine's cuDNN (see above): 9.14.0.
constexpr size_t kGpuCudnnVersion = 91400;
static_assert(kGpuCudnnVersion <= CUDNN_VERSION,
              "the headers must be at least the GPU's version");

size_t cudnnGetVersion(void) { return kGpuCudnnVersion; }

const char *cudnnGetErrorString(cudnnStatus_t status) {
  const char *name = findName("CUDNN_STATUS_", status);
  return name ? name : "CUDNN_STATUS_UNKNOWN";
}

/// The last error of this thread, then cleared.
void cudnnGetLastErrorString(char *message, size_t max_size) {
  if (!message || !max_size)
    return;
  std::string &last = lastError();
  std::snprintf(message, max_size, "%s", last.c_str());
  last.clear();
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  if (!handle)
    return report(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreate: no handle");
  *handle = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  if (!handle)
    return report(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnSetStream: no handle");
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *stream) {
  if (!handle || !stream)
    return report(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnGetStream: no handle");
  *stream = handle->stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t *desc) {
  return guarded(__func__, [&] {
    if (!desc)
      fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "no descriptor");
    if (!settable().count(type))
      fail(CUDNN_STATUS_NOT_SUPPORTED, descName(type) + " is not emulated");
    auto *d = new Desc{type, {}};
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.m);
    r.live.insert(d);
    *desc = d;
  });
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t desc) {
  return guarded(__func__, [&] {
    Desc *d = &deref(desc);
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.m);
    r.live.erase(d);
    delete d;
  });
}

/// Deprecated: returns the descriptor to its created state.
cudnnStatus_t cudnnBackendInitialize(cudnnBackendDescriptor_t desc) {
  return guarded(__func__, [&] {
    Desc &d = deref(desc);
    d = Desc{d.type, {}};
  });
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t desc) {
  return guarded(__func__, [&] { finalize(deref(desc)); });
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t desc,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type,
                                       int64_t count, const void *elements) {
  return guarded(__func__, [&] {
    setAttribute(deref(desc), name, type, count, elements);
  });
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const desc,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type,
                                       int64_t requested, int64_t *count,
                                       void *elements) {
  return guarded(__func__, [&] {
    getAttribute(deref(desc), name, type, requested, count, elements);
  });
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle,
                                  cudnnBackendDescriptor_t plan,
                                  cudnnBackendDescriptor_t pack) {
  return guarded(__func__, [&] { execute(handle, deref(plan), deref(pack)); });
}

cudnnStatus_t cudnnBackendPopulateCudaGraph(cudnnHandle_t,
                                            cudnnBackendDescriptor_t,
                                            cudnnBackendDescriptor_t,
                                            cudaGraph_t) {
  return report(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API,
                "cudnnBackendPopulateCudaGraph is not emulated (capture "
                "cudnnBackendExecute on a stream instead)");
}

cudnnStatus_t cudnnBackendUpdateCudaGraph(cudnnHandle_t,
                                          cudnnBackendDescriptor_t,
                                          cudnnBackendDescriptor_t,
                                          cudaGraph_t) {
  return report(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API,
                "cudnnBackendUpdateCudaGraph is not emulated");
}

//===----------------------------------------------------------------------===//
// NVRTC: linked by cudnn-frontend's run-time-compiled engines; the emulated
// device compiles no CUDA C++, so a program is never created.
//===----------------------------------------------------------------------===//

static nvrtcResult noNvrtc(const char *call) {
  std::fprintf(stderr,
               "cuda-emulation: %s: the emulated device compiles no CUDA C++ "
               "at run time\n",
               call);
  return NVRTC_ERROR_PROGRAM_CREATION_FAILURE;
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *, const char *,
                               int, const char *const *, const char *const *) {
  if (prog)
    *prog = nullptr;
  return noNvrtc(__func__);
}
nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) {
  if (prog)
    *prog = nullptr;
  return NVRTC_SUCCESS;
}
nvrtcResult nvrtcCompileProgram(nvrtcProgram, int, const char *const *) {
  return NVRTC_ERROR_INVALID_PROGRAM;
}
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram, size_t *) {
  return NVRTC_ERROR_INVALID_PROGRAM;
}
nvrtcResult nvrtcGetCUBIN(nvrtcProgram, char *) {
  return NVRTC_ERROR_INVALID_PROGRAM;
}
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram, size_t *) {
  return NVRTC_ERROR_INVALID_PROGRAM;
}
nvrtcResult nvrtcGetProgramLog(nvrtcProgram, char *) {
  return NVRTC_ERROR_INVALID_PROGRAM;
}

} // extern "C"
