//===- Importer.cpp - ONNX models into the nn dialect ---------------------===//
//
// Nodes are visited in graph order (ONNX graphs are topologically sorted).
// A node whose inputs are all known at compile time is evaluated here
// (HostTensor.cpp), which folds shape subgraphs; any other node becomes nn
// ops on static shapes. Trainable initializers become parameters and are
// never folded.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Importer.h"
#include "frontends/onnx/HostTensor.h"
#include "runtime/cpu/fastmath.h"

#include "dialects/nn/NNDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>

using namespace mlir;
using namespace shardc;
using namespace shardc::onnx_import;
using llvm::createStringError;
using llvm::Error;
using llvm::Expected;

namespace {

using shardc::runtime::bf16ToFloat;
using shardc::runtime::halfToFloat;

constexpr int64_t kMinOpset = 13, kMaxOpset = 21;

Error fail(const llvm::Twine &message) { return createStringError(message); }

//===----------------------------------------------------------------------===//
// Tensors from protobuf
//===----------------------------------------------------------------------===//

std::string typeName(int32_t t) {
  const std::string *name = nullptr;
  if (onnx::TensorProto_DataType_IsValid(t))
    name = &onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(t));
  return name ? *name : "type " + std::to_string(t);
}

/// The bytes of a tensor stored as external data, read from the file its
/// `location` names next to the model.
Expected<std::string> externalBytes(const onnx::TensorProto &t,
                                    llvm::StringRef baseDir) {
  std::string location;
  uint64_t offset = 0, length = 0;
  bool hasLength = false;
  for (const auto &kv : t.external_data()) {
    llvm::StringRef value = kv.value();
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset" && value.getAsInteger(10, offset))
      return fail("tensor '" + t.name() + "': bad external data offset '" +
                  kv.value() + "'");
    else if (kv.key() == "length") {
      hasLength = true;
      if (value.getAsInteger(10, length))
        return fail("tensor '" + t.name() + "': bad external data length '" +
                    kv.value() + "'");
    }
  }
  if (location.empty() || llvm::sys::path::is_absolute(location) ||
      llvm::StringRef(location).contains(".."))
    return fail("tensor '" + t.name() + "': external data location '" +
                location + "' must be a relative path inside the model's folder");
  llvm::SmallString<256> path(baseDir);
  llvm::sys::path::append(path, location);
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return fail("tensor '" + t.name() + "': cannot read external data file '" +
                path + "': " + file.getError().message());
  uint64_t size = (*file)->getBufferSize();
  if (!hasLength)
    length = offset <= size ? size - offset : 0;
  if (offset > size || length > size - offset)
    return fail("tensor '" + t.name() + "': external data [" +
                llvm::Twine(offset) + ", +" + llvm::Twine(length) +
                ") lies outside '" + path + "' (" + llvm::Twine(size) +
                " bytes)");
  return std::string((*file)->getBufferStart() + offset, length);
}

Expected<HostTensor> toHost(const onnx::TensorProto &t, llvm::StringRef baseDir) {
  HostTensor h;
  h.onnxType = t.data_type();
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && n > (int64_t(1) << 40) / d))
      return fail("tensor '" + t.name() + "' has an invalid shape");
    h.shape.push_back(d);
    n *= d;
  }
  int64_t width;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
    width = 4;
    break;
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64:
    width = 8;
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    width = 2;
    break;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
    width = 1;
    break;
  default:
    return fail("tensor '" + t.name() + "' has element type " +
                typeName(t.data_type()) + ", which shardc does not read");
  }
  int32_t dt = t.data_type();
  bool isFloat = dt == onnx::TensorProto::FLOAT || dt == onnx::TensorProto::DOUBLE ||
                 dt == onnx::TensorProto::FLOAT16 || dt == onnx::TensorProto::BFLOAT16;
  h.kind = isFloat ? Kind::Float : dt == onnx::TensorProto::BOOL ? Kind::Bool : Kind::Int;

  std::string raw;
  bool hasRaw = t.has_raw_data();
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    Expected<std::string> bytes = externalBytes(t, baseDir);
    if (!bytes)
      return bytes.takeError();
    raw = std::move(*bytes);
    hasRaw = true;
  } else if (hasRaw) {
    raw = t.raw_data();
  }
  if (hasRaw) {
    if (int64_t(raw.size()) != n * width)
      return fail("tensor '" + t.name() + "' holds " + llvm::Twine(raw.size()) +
                  " bytes, its shape needs " + llvm::Twine(n * width));
    const char *p = raw.data();
    for (int64_t k = 0; k < n; ++k, p += width) {
      auto load = [&](auto v) {
        std::memcpy(&v, p, sizeof(v));
        return v;
      };
      switch (dt) {
      case onnx::TensorProto::FLOAT: h.f.push_back(load(float())); break;
      case onnx::TensorProto::DOUBLE: h.f.push_back(load(double())); break;
      case onnx::TensorProto::FLOAT16: h.f.push_back(halfToFloat(load(uint16_t()))); break;
      case onnx::TensorProto::BFLOAT16: h.f.push_back(bf16ToFloat(load(uint16_t()))); break;
      case onnx::TensorProto::INT32: h.i.push_back(load(int32_t())); break;
      case onnx::TensorProto::UINT32: h.i.push_back(load(uint32_t())); break;
      case onnx::TensorProto::INT64: h.i.push_back(load(int64_t())); break;
      case onnx::TensorProto::UINT64: h.i.push_back(int64_t(load(uint64_t()))); break;
      case onnx::TensorProto::INT16: h.i.push_back(load(int16_t())); break;
      case onnx::TensorProto::UINT16: h.i.push_back(load(uint16_t())); break;
      case onnx::TensorProto::INT8: h.i.push_back(load(int8_t())); break;
      case onnx::TensorProto::UINT8: h.i.push_back(load(uint8_t())); break;
      default: h.i.push_back(load(uint8_t()) != 0); // BOOL
      }
    }
    return h;
  }
  // Typed fields.
  int64_t have;
  switch (dt) {
  case onnx::TensorProto::FLOAT:
    have = t.float_data_size();
    for (float v : t.float_data()) h.f.push_back(v);
    break;
  case onnx::TensorProto::DOUBLE:
    have = t.double_data_size();
    for (double v : t.double_data()) h.f.push_back(v);
    break;
  case onnx::TensorProto::INT64:
    have = t.int64_data_size();
    for (int64_t v : t.int64_data()) h.i.push_back(v);
    break;
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64:
    have = t.uint64_data_size();
    for (uint64_t v : t.uint64_data()) h.i.push_back(int64_t(v));
    break;
  default:
    have = t.int32_data_size();
    for (int32_t v : t.int32_data()) {
      if (dt == onnx::TensorProto::FLOAT16)
        h.f.push_back(halfToFloat(uint16_t(v)));
      else if (dt == onnx::TensorProto::BFLOAT16)
        h.f.push_back(bf16ToFloat(uint16_t(v)));
      else
        h.i.push_back(v);
    }
  }
  if (have != n)
    return fail("tensor '" + t.name() + "' holds " + llvm::Twine(have) +
                " elements, its shape needs " + llvm::Twine(n));
  return h;
}

//===----------------------------------------------------------------------===//
// The graph importer
//===----------------------------------------------------------------------===//

/// What a graph value is: known at compile time, or an SSA value of the
/// forward function.
struct Val {
  std::optional<HostTensor> constant;
  Value value;
};

class GraphImporter {
public:
  GraphImporter(MLIRContext &ctx, const onnx::ModelProto &model,
                std::string baseDir, const ImportOptions &opts)
      : b(&ctx), model(model), graph(model.graph()), baseDir(std::move(baseDir)),
        opts(opts), loc(b.getUnknownLoc()) {}

  Expected<ImportedModel> run(llvm::StringRef path);

private:
  // Types and values.
  Type elementOf(Kind k) {
    return k == Kind::Float ? Type(b.getF32Type())
           : k == Kind::Bool ? Type(b.getI1Type())
                             : Type(b.getI32Type());
  }
  RankedTensorType type(ArrayRef<int64_t> shape, Kind k = Kind::Float) {
    return RankedTensorType::get(shape, elementOf(k));
  }
  static ArrayRef<int64_t> shapeOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }
  static Kind kindOf(Value v) {
    Type e = cast<RankedTensorType>(v.getType()).getElementType();
    return isa<FloatType>(e) ? Kind::Float : e.isInteger(1) ? Kind::Bool : Kind::Int;
  }

  /// The SSA value of `name`, materializing a constant as nn.constant.
  Expected<Value> value(const std::string &name);
  Value materialize(const HostTensor &t);
  bool isConst(const std::string &name) const {
    auto it = vals.find(name);
    return it != vals.end() && it->second.constant.has_value();
  }
  const HostTensor &constant(const std::string &name) { return *vals[name].constant; }
  std::vector<int64_t> shape(const std::string &name) {
    Val &v = vals[name];
    return v.constant ? v.constant->shape
                      : std::vector<int64_t>(shapeOf(v.value).begin(),
                                             shapeOf(v.value).end());
  }
  std::vector<int64_t> shape_(const onnx::NodeProto &n, int k) {
    return shape(n.input(k));
  }
  Kind kind(const std::string &name) {
    Val &v = vals[name];
    return v.constant ? v.constant->kind : kindOf(v.value);
  }

  // Node helpers.
  Error importNode(const onnx::NodeProto &node);
  Error nodeError(const onnx::NodeProto &node, const llvm::Twine &message) {
    return fail(describe(node) + ": " + message);
  }
  std::string describe(const onnx::NodeProto &node) {
    std::string name = node.name().empty()
                           ? (node.output_size() ? node.output(0) : "?")
                           : node.name();
    return "node '" + name + "' (" + node.op_type() + ", opset " +
           std::to_string(opset) + ")";
  }
  const onnx::AttributeProto *attr(const onnx::NodeProto &n, llvm::StringRef name) {
    for (const auto &a : n.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t attrInt(const onnx::NodeProto &n, llvm::StringRef name, int64_t dflt) {
    const auto *a = attr(n, name);
    return a ? a->i() : dflt;
  }
  double attrFloat(const onnx::NodeProto &n, llvm::StringRef name, double dflt) {
    const auto *a = attr(n, name);
    return a ? a->f() : dflt;
  }
  std::optional<std::vector<int64_t>> attrInts(const onnx::NodeProto &n,
                                               llvm::StringRef name) {
    const auto *a = attr(n, name);
    if (!a)
      return std::nullopt;
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }
  bool hasInput(const onnx::NodeProto &n, int k) {
    return n.input_size() > k && !n.input(k).empty();
  }
  /// Integer values of input k, which must be known at compile time.
  Expected<std::vector<int64_t>> constInts(const onnx::NodeProto &n, int k,
                                           llvm::StringRef what) {
    if (!isConst(n.input(k)))
      return nodeError(n, "input '" + what +
                              "' must be known at compile time (shardc "
                              "compiles static shapes); bind it with --bind");
    return constant(n.input(k)).ints();
  }
  Error normalizeAxis(const onnx::NodeProto &n, int64_t &axis, int64_t rank) {
    if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
      return nodeError(n, "axis " + llvm::Twine(axis) +
                              " is out of range for rank " + llvm::Twine(rank));
    if (axis < 0)
      axis += rank;
    return Error::success();
  }

  void setConst(const std::string &name, HostTensor t) {
    vals[name] = Val{std::move(t), Value()};
  }
  void setValue(const std::string &name, Value v) { vals[name] = Val{std::nullopt, v}; }

  // Emission helpers.
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (shapeOf(x) == shape)
      return x;
    return nn::ReshapeOp::create(b, loc, type(shape), x);
  }
  Value floatScalar(double v) {
    return nn::FillOp::create(b, loc, type({}), b.getF64FloatAttr(v));
  }
  Expected<Value> floatValue(const onnx::NodeProto &n, int k) {
    Expected<Value> v = value(n.input(k));
    if (!v)
      return v.takeError();
    if (kindOf(*v) != Kind::Float)
      return nodeError(n, "input '" + n.input(k) +
                              "' is an integer tensor computed at runtime; "
                              "the CPU backend computes on f32 only");
    return v;
  }

  Error binary(const onnx::NodeProto &n);
  Error matmul(const onnx::NodeProto &n);
  Error gemm(const onnx::NodeProto &n);
  Error layerNorm(const onnx::NodeProto &n);
  Error reduce(const onnx::NodeProto &n, bool mean);
  Error gather(const onnx::NodeProto &n);
  Error slice(const onnx::NodeProto &n);
  Error split(const onnx::NodeProto &n);
  Error constantNode(const onnx::NodeProto &n);

  Error addInputs();
  Error addInitializers();
  Error untie(const std::string &source, const std::string &name);
  Expected<Value> trainingLoss();

  OpBuilder b;
  const onnx::ModelProto &model;
  const onnx::GraphProto &graph;
  std::string baseDir;
  const ImportOptions &opts;
  Location loc;
  int64_t opset = 0;
  std::unique_ptr<Block> block = std::make_unique<Block>();
  SmallVector<DictionaryAttr> argAttrs;
  std::map<std::string, Val> vals;
  std::vector<InitialWeight> weights;
  std::set<std::string> paramNames, frozen;
  /// Parameters made from Identity nodes of parameters (see untie).
  std::set<std::string> untied;
  /// Training: the token-id input and its [B, T] shape.
  std::string tokenInput;
  SmallVector<int64_t> tokenShape;
};

const std::vector<std::string> kSupported = {
    "Add", "Cast", "Concat", "Constant", "ConstantOfShape", "Div", "Equal",
    "Erf", "Expand", "Gather", "Gemm", "Identity", "LayerNormalization",
    "MatMul", "Mul", "Neg", "Pow", "Range", "Reciprocal", "ReduceMean",
    "ReduceSum", "Reshape", "Shape", "Sigmoid", "Slice", "Softmax", "Split",
    "Sqrt", "Squeeze", "Sub", "Tanh", "Transpose", "Trilu", "Unsqueeze",
    "Where"};

Value GraphImporter::materialize(const HostTensor &t) {
  RankedTensorType ty = type(t.shape, t.kind);
  DenseElementsAttr attr;
  if (t.kind == Kind::Float) {
    std::vector<float> data(t.f.begin(), t.f.end());
    attr = DenseElementsAttr::get(ty, llvm::ArrayRef(data));
  } else if (t.kind == Kind::Bool) {
    SmallVector<bool> data;
    for (int64_t v : t.i)
      data.push_back(v != 0);
    attr = DenseElementsAttr::get(ty, ArrayRef<bool>(data));
  } else {
    std::vector<int32_t> data(t.i.begin(), t.i.end());
    attr = DenseElementsAttr::get(ty, llvm::ArrayRef(data));
  }
  return nn::ConstantOp::create(b, loc, ty, attr);
}

Expected<Value> GraphImporter::value(const std::string &name) {
  auto it = vals.find(name);
  if (it == vals.end())
    return fail("value '" + name + "' is used before any node defines it");
  if (!it->second.value)
    it->second.value = materialize(*it->second.constant);
  return it->second.value;
}

//===----------------------------------------------------------------------===//
// Graph inputs and initializers
//===----------------------------------------------------------------------===//

Error GraphImporter::addInitializers() {
  frozen.insert(opts.frozen.begin(), opts.frozen.end());
  for (const onnx::TensorProto &t : graph.initializer()) {
    Expected<HostTensor> h = toHost(t, baseDir);
    if (!h)
      return h.takeError();
    bool trainable = opts.training && h->kind == Kind::Float && h->numel() > 1 &&
                     h->isFinite() && !frozen.count(t.name());
    if (!trainable) {
      setConst(t.name(), std::move(*h));
      continue;
    }
    Value arg = block->addArgument(type(h->shape), loc);
    argAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("nn.param", b.getStringAttr(t.name())),
         b.getNamedAttr("nn.init", b.getStringAttr("file"))}));
    setValue(t.name(), arg);
    paramNames.insert(t.name());
    weights.push_back({t.name(), h->shape, std::vector<float>(h->f.begin(), h->f.end())});
  }
  // Names --freeze may give: initializers, and the outputs of Identity
  // nodes of initializers (see untie).
  std::set<std::string> copies;
  for (const onnx::NodeProto &n : graph.node())
    if (n.op_type() == "Identity" && n.input_size() == 1 && n.output_size() == 1 &&
        vals.count(n.input(0)))
      copies.insert(n.output(0));
  for (const std::string &name : frozen)
    if (!vals.count(name) && !copies.count(name))
      return fail("--freeze: the model has no initializer named '" + name + "'");
  return Error::success();
}

/// torch.onnx.export stores parameters whose values are equal at export
/// time once (fresh LayerNorm weights, the layers nn.TransformerEncoder
/// deep-copies) and writes the others as Identity nodes of it, named after
/// them. PyTorch trains them apart, so each becomes its own parameter with
/// the same initial values, and --export-onnx writes it as an initializer.
Error GraphImporter::untie(const std::string &source, const std::string &name) {
  auto it = llvm::find_if(weights, [&](const InitialWeight &w) { return w.name == source; });
  if (it == weights.end())
    return fail("internal error: parameter '" + source + "' has no initial value");
  InitialWeight copy = *it;
  copy.name = name;
  if (frozen.count(name)) {
    setConst(name, HostTensor::floats(copy.shape, std::vector<double>(copy.data.begin(),
                                                                      copy.data.end())));
    return Error::success();
  }
  Value arg = block->addArgument(type(copy.shape), loc);
  argAttrs.push_back(b.getDictionaryAttr(
      {b.getNamedAttr("nn.param", b.getStringAttr(name)),
       b.getNamedAttr("nn.init", b.getStringAttr("file"))}));
  setValue(name, arg);
  paramNames.insert(name);
  weights.push_back(std::move(copy));
  untied.insert(name);
  return Error::success();
}

Error GraphImporter::addInputs() {
  for (const auto &[name, file] : opts.bindings) {
    auto buffer = llvm::MemoryBuffer::getFile(file);
    onnx::TensorProto t;
    if (!buffer)
      return fail("--bind " + name + ": cannot read '" + file + "'");
    if (!t.ParseFromArray((*buffer)->getBufferStart(),
                          int((*buffer)->getBufferSize())))
      return fail("--bind " + name + ": '" + file + "' is not a TensorProto");
    Expected<HostTensor> h = toHost(t, baseDir);
    if (!h)
      return h.takeError();
    setConst(name, std::move(*h));
  }
  for (const onnx::ValueInfoProto &in : graph.input()) {
    const std::string &name = in.name();
    if (vals.count(name))
      continue; // an initializer (older exporters list them as inputs)
    if (!in.type().has_tensor_type())
      return fail("input '" + name + "' is not a tensor");
    const auto &tt = in.type().tensor_type();
    SmallVector<int64_t> dims;
    for (auto [k, d] : llvm::enumerate(tt.shape().dim())) {
      int64_t size = d.has_dim_value() ? d.dim_value() : -1;
      if (k == 0 && opts.microBatch > 0)
        size = opts.microBatch;
      else if (k == 1 && size < 0 && opts.seqLen > 0)
        size = opts.seqLen;
      if (size < 0)
        return fail("input '" + name + "' dim " + llvm::Twine(k) + " is symbolic ('" +
                    d.dim_param() + "'): give its size with " +
                    (k == 0 ? "--micro-batch" : k == 1 ? "--seq-len" : "a static export"));
      dims.push_back(size);
    }
    int32_t dt = tt.elem_type();
    Kind k;
    if (dt == onnx::TensorProto::FLOAT)
      k = Kind::Float;
    else if (dt == onnx::TensorProto::INT64 || dt == onnx::TensorProto::INT32)
      k = Kind::Int;
    else if (dt == onnx::TensorProto::BOOL)
      k = Kind::Bool;
    else
      return fail("input '" + name + "' has element type " + typeName(dt) +
                  "; the CPU backend takes f32, int32/int64 (as i32) and bool");
    if (opts.training) {
      if (k != Kind::Int || dims.size() != 2)
        return fail("input '" + name +
                    "': training feeds one input, integer token ids [batch, "
                    "seq]; this one is " + typeName(dt) + " of rank " +
                    llvm::Twine(dims.size()));
      if (!tokenInput.empty())
        return fail("inputs '" + tokenInput + "' and '" + name +
                    "': training feeds one input (token ids)");
      tokenInput = name;
      tokenShape = dims;
    }
    Value arg = block->addArgument(type(dims, k), loc);
    argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        "nn.input", b.getStringAttr(opts.training ? "tokens" : name))));
    setValue(name, arg);
  }
  if (opts.training && tokenInput.empty())
    return fail("the model has no integer input to feed token ids to");
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

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

Error GraphImporter::matmul(const onnx::NodeProto &n) {
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
    if (!broadcast(shapeOf(cv).vec(), {m, nOut}))
      return nodeError(n, "C does not broadcast to [M, N]");
    y = nn::AddOp::create(b, loc, type({m, nOut}), y, cv);
  }
  setValue(n.output(0), y);
  return Error::success();
}

Error GraphImporter::layerNorm(const onnx::NodeProto &n) {
  Expected<Value> xv = floatValue(n, 0);
  if (!xv)
    return xv.takeError();
  Expected<Value> sv = floatValue(n, 1);
  if (!sv)
    return sv.takeError();
  SmallVector<int64_t> xs(shapeOf(*xv));
  int64_t rank = xs.size(), axis = attrInt(n, "axis", -1);
  if (Error e = normalizeAxis(n, axis, rank))
    return e;
  double eps = attrFloat(n, "epsilon", 1e-5);
  int64_t outer = 1, c = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? outer : c) *= xs[d];
  // Normalizing over dims axis.. is normalizing the rows of [outer, C].
  auto asRow = [&](Value v, llvm::StringRef what) -> Expected<Value> {
    int64_t numel = cast<RankedTensorType>(v.getType()).getNumElements();
    if (numel != c)
      return nodeError(n, what + " has " + llvm::Twine(numel) +
                              " elements; the normalized shape has " + llvm::Twine(c));
    return reshape(v, {c});
  };
  Expected<Value> scale = asRow(*sv, "scale");
  if (!scale)
    return scale.takeError();
  Value bias;
  if (hasInput(n, 2)) {
    Expected<Value> bv = floatValue(n, 2);
    if (!bv)
      return bv.takeError();
    Expected<Value> row = asRow(*bv, "bias");
    if (!row)
      return row.takeError();
    bias = *row;
  }
  Value x2 = reshape(*xv, {outer, c});
  Value y = nn::LayerNormOp::create(b, loc, x2.getType(), x2, *scale, bias,
                                    llvm::APFloat(eps));
  setValue(n.output(0), reshape(y, xs));
  // Optional outputs: the mean and 1/sqrt(var + eps) over the normalized dims.
  bool wantStats = (n.output_size() > 1 && !n.output(1).empty()) ||
                   (n.output_size() > 2 && !n.output(2).empty());
  if (wantStats) {
    SmallVector<int64_t> statShape(xs);
    for (int64_t d = axis; d < rank; ++d)
      statShape[d] = 1;
    Value count = floatScalar(double(c));
    Value sum = nn::SumToOp::create(b, loc, type({outer, 1}), x2);
    Value mean = nn::DivOp::create(b, loc, type({outer, 1}), sum, count);
    Value centered = nn::SubOp::create(b, loc, x2.getType(), x2, mean);
    Value sq = nn::MulOp::create(b, loc, x2.getType(), centered, centered);
    Value var = nn::DivOp::create(
        b, loc, type({outer, 1}),
        nn::SumToOp::create(b, loc, type({outer, 1}), sq), count);
    Value std = nn::SqrtOp::create(
        b, loc, type({outer, 1}),
        nn::AddOp::create(b, loc, type({outer, 1}), var, floatScalar(eps)));
    Value inv = nn::ReciprocalOp::create(b, loc, type({outer, 1}), std);
    if (n.output_size() > 1 && !n.output(1).empty())
      setValue(n.output(1), reshape(mean, statShape));
    if (n.output_size() > 2 && !n.output(2).empty())
      setValue(n.output(2), reshape(inv, statShape));
  }
  return Error::success();
}

Error GraphImporter::reduce(const onnx::NodeProto &n, bool mean) {
  Expected<Value> xv = floatValue(n, 0);
  if (!xv)
    return xv.takeError();
  SmallVector<int64_t> xs(shapeOf(*xv));
  int64_t rank = xs.size();
  // Axes: an attribute before opset 18 (13 for ReduceSum), an input after.
  std::vector<int64_t> axes;
  bool axesAsInput = n.op_type() == "ReduceSum" ? opset >= 13 : opset >= 18;
  if (axesAsInput && hasInput(n, 1)) {
    Expected<std::vector<int64_t>> a = constInts(n, 1, "axes");
    if (!a)
      return a.takeError();
    axes = *a;
  } else if (auto a = attrInts(n, "axes")) {
    axes = *a;
  }
  if (axes.empty()) {
    if (attrInt(n, "noop_with_empty_axes", 0)) {
      setValue(n.output(0), *xv);
      return Error::success();
    }
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  SmallVector<int64_t> kept(xs), dropped;
  int64_t count = 1;
  for (int64_t a : axes) {
    if (Error e = normalizeAxis(n, a, rank))
      return e;
    count *= xs[a];
    kept[a] = 1;
  }
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(axes, d) && !llvm::is_contained(axes, d - rank))
      dropped.push_back(xs[d]);
  Value y = kept == xs ? *xv : Value(nn::SumToOp::create(b, loc, type(kept), *xv));
  if (mean)
    y = nn::DivOp::create(b, loc, y.getType(), y, floatScalar(double(count)));
  if (!attrInt(n, "keepdims", 1))
    y = reshape(y, dropped);
  setValue(n.output(0), y);
  return Error::success();
}

Error GraphImporter::gather(const onnx::NodeProto &n) {
  std::vector<int64_t> ds = shape_(n, 0);
  int64_t axis = attrInt(n, "axis", 0), rank = ds.size();
  if (Error e = normalizeAxis(n, axis, rank))
    return e;
  // Constant indices are checked and made non-negative.
  std::optional<HostTensor> idx;
  if (isConst(n.input(1))) {
    idx = constant(n.input(1));
    for (int64_t &v : idx->i) {
      if (v < -ds[axis] || v >= ds[axis])
        return nodeError(n, "index " + llvm::Twine(v) + " is out of range for size " +
                                llvm::Twine(ds[axis]));
      if (v < 0)
        v += ds[axis];
    }
    if (isConst(n.input(0))) {
      setConst(n.output(0), evalGather(constant(n.input(0)), *idx, axis));
      return Error::success();
    }
  }
  Expected<Value> data = floatValue(n, 0);
  if (!data)
    return data.takeError();
  Value ids;
  if (idx) {
    ids = materialize(*idx);
  } else {
    Expected<Value> v = value(n.input(1));
    if (!v)
      return v.takeError();
    ids = *v;
  }
  if (kindOf(ids) != Kind::Int)
    return nodeError(n, "indices must be integers");
  // Gather on `axis` is an embedding lookup of the table [ds[axis], rest]
  // obtained by moving `axis` to the front.
  SmallVector<int64_t> perm = {axis}, moved = {ds[axis]};
  int64_t rest = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) {
      perm.push_back(d);
      moved.push_back(ds[d]);
      rest *= ds[d];
    }
  Value table = *data;
  if (axis != 0)
    table = nn::TransposeOp::create(b, loc, type(moved), table,
                                    b.getDenseI64ArrayAttr(perm));
  table = reshape(table, {ds[axis], rest});
  SmallVector<int64_t> is(shapeOf(ids));
  SmallVector<int64_t> rows(is);
  rows.push_back(rest);
  Value y = nn::EmbeddingOp::create(b, loc, type(rows), ids, table);
  // [indices..., moved dims...] back to [before axis, indices..., after axis].
  SmallVector<int64_t> expanded(is);
  expanded.append(moved.begin() + 1, moved.end());
  y = reshape(y, expanded);
  if (axis != 0) {
    int64_t ni = is.size();
    SmallVector<int64_t> back, finalShape;
    for (int64_t d = 0; d < axis; ++d)
      back.push_back(ni + d);
    for (int64_t d = 0; d < ni; ++d)
      back.push_back(d);
    for (int64_t d = axis; d < rank - 1; ++d)
      back.push_back(ni + d);
    for (int64_t p : back)
      finalShape.push_back(expanded[p]);
    y = nn::TransposeOp::create(b, loc, type(finalShape), y,
                                b.getDenseI64ArrayAttr(back));
  }
  setValue(n.output(0), y);
  return Error::success();
}

Error GraphImporter::slice(const onnx::NodeProto &n) {
  std::vector<int64_t> xs = shape_(n, 0);
  int64_t rank = xs.size();
  Expected<std::vector<int64_t>> starts = constInts(n, 1, "starts");
  if (!starts)
    return starts.takeError();
  Expected<std::vector<int64_t>> ends = constInts(n, 2, "ends");
  if (!ends)
    return ends.takeError();
  std::vector<int64_t> axes, steps;
  if (hasInput(n, 3)) {
    Expected<std::vector<int64_t>> a = constInts(n, 3, "axes");
    if (!a)
      return a.takeError();
    axes = *a;
  } else {
    for (size_t k = 0; k < starts->size(); ++k)
      axes.push_back(k);
  }
  if (hasInput(n, 4)) {
    Expected<std::vector<int64_t>> s = constInts(n, 4, "steps");
    if (!s)
      return s.takeError();
    steps = *s;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return nodeError(n, "starts, ends, axes and steps differ in length");
  std::optional<HostTensor> c;
  if (isConst(n.input(0)))
    c = constant(n.input(0));
  Value v;
  if (!c) {
    Expected<Value> x = floatValue(n, 0);
    if (!x)
      return x.takeError();
    v = *x;
  }
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t axis = axes[k], step = steps[k];
    if (Error e = normalizeAxis(n, axis, rank))
      return e;
    if (step == 0)
      return nodeError(n, "a step is 0");
    int64_t dim = xs[axis];
    // Clamp as ONNX does (starts/ends may be INT64_MAX/MIN).
    auto clampIndex = [&](int64_t i, int64_t lo, int64_t hi) {
      if (i < 0)
        i = i < -dim ? -1 : i + dim;
      return std::clamp(i, lo, hi);
    };
    int64_t start = step > 0 ? clampIndex((*starts)[k], 0, dim)
                             : clampIndex((*starts)[k], -1, dim - 1);
    int64_t end = step > 0 ? clampIndex((*ends)[k], 0, dim)
                           : clampIndex((*ends)[k], -1, dim - 1);
    if ((*ends)[k] < -dim && step < 0)
      end = -1;
    int64_t size = step > 0 ? std::max<int64_t>(0, (end - start + step - 1) / step)
                            : std::max<int64_t>(0, (start - end - step - 1) / -step);
    if (c) {
      *c = evalSlice(*c, axis, start, end, step);
    } else {
      if (step != 1)
        return nodeError(n, "a slice with step " + llvm::Twine(step) +
                                " on a runtime tensor is not supported (step 1 only)");
      if (size == 0)
        return nodeError(n, "the slice is empty");
      SmallVector<int64_t> shape(shapeOf(v));
      if (size != shape[axis]) {
        shape[axis] = size;
        v = nn::SliceOp::create(b, loc, type(shape), v, b.getI64IntegerAttr(axis),
                                b.getI64IntegerAttr(start));
      }
    }
    xs[axis] = size;
  }
  if (c)
    setConst(n.output(0), *c);
  else
    setValue(n.output(0), v);
  return Error::success();
}

Error GraphImporter::split(const onnx::NodeProto &n) {
  std::vector<int64_t> xs = shape_(n, 0);
  int64_t axis = attrInt(n, "axis", 0);
  if (Error e = normalizeAxis(n, axis, xs.size()))
    return e;
  std::vector<int64_t> sizes;
  if (hasInput(n, 1)) {
    Expected<std::vector<int64_t>> s = constInts(n, 1, "split");
    if (!s)
      return s.takeError();
    sizes = *s;
  } else if (auto s = attrInts(n, "split")) {
    sizes = *s;
  } else {
    int64_t parts = attrInt(n, "num_outputs", n.output_size());
    int64_t chunk = (xs[axis] + parts - 1) / std::max<int64_t>(parts, 1);
    for (int64_t k = 0, left = xs[axis]; k < parts; ++k, left -= chunk)
      sizes.push_back(std::min(chunk, left));
  }
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  if (int64_t(sizes.size()) != n.output_size() || total != xs[axis])
    return nodeError(n, "split sizes do not match the outputs or dim " +
                            llvm::Twine(axis));
  int64_t start = 0;
  for (auto [k, size] : llvm::enumerate(sizes)) {
    if (isConst(n.input(0))) {
      setConst(n.output(k), evalSlice(constant(n.input(0)), axis, start, start + size, 1));
    } else {
      Expected<Value> x = floatValue(n, 0);
      if (!x)
        return x.takeError();
      SmallVector<int64_t> shape(xs.begin(), xs.end());
      shape[axis] = size;
      setValue(n.output(k),
               nn::SliceOp::create(b, loc, type(shape), *x, b.getI64IntegerAttr(axis),
                                   b.getI64IntegerAttr(start)));
    }
    start += size;
  }
  return Error::success();
}

Error GraphImporter::constantNode(const onnx::NodeProto &n) {
  if (n.attribute_size() != 1)
    return nodeError(n, "expects exactly one value attribute");
  const onnx::AttributeProto &a = n.attribute(0);
  if (a.name() == "value") {
    Expected<HostTensor> h = toHost(a.t(), baseDir);
    if (!h)
      return h.takeError();
    setConst(n.output(0), *h);
  } else if (a.name() == "value_float") {
    setConst(n.output(0), HostTensor::floats({}, {a.f()}));
  } else if (a.name() == "value_floats") {
    setConst(n.output(0), HostTensor::floats({a.floats_size()},
                                             {a.floats().begin(), a.floats().end()}));
  } else if (a.name() == "value_int") {
    setConst(n.output(0), HostTensor::integers({}, {a.i()}));
  } else if (a.name() == "value_ints") {
    setConst(n.output(0), HostTensor::integers({a.ints_size()},
                                               {a.ints().begin(), a.ints().end()}));
  } else {
    return nodeError(n, "attribute '" + a.name() + "' is not supported");
  }
  return Error::success();
}

Error GraphImporter::importNode(const onnx::NodeProto &n) {
  const std::string &op = n.op_type();
  if ((!n.domain().empty() && n.domain() != "ai.onnx") ||
      !llvm::is_contained(kSupported, op))
    return fail(describe(n) + (n.domain().empty() ? "" : " of domain '" + n.domain() + "'") +
                " is not supported; supported ops: " + llvm::join(kSupported, ", "));
  for (int k = 0; k < n.input_size(); ++k)
    if (!n.input(k).empty() && !vals.count(n.input(k)))
      return nodeError(n, "input '" + n.input(k) + "' is not defined before it");
  if (n.output_size() == 0)
    return nodeError(n, "has no output");
  int required = op == "Constant" || op == "Range" ? 0 : 1;
  if (n.input_size() < required)
    return nodeError(n, "has no input");
  bool allConst = true;
  for (int k = 0; k < n.input_size(); ++k)
    if (!n.input(k).empty() && !isConst(n.input(k)))
      allConst = false;

  if (op == "Constant")
    return constantNode(n);
  if (op == "Identity") {
    if (paramNames.count(n.input(0)) && !vals.count(n.output(0)))
      return untie(n.input(0), n.output(0));
    vals[n.output(0)] = vals[n.input(0)];
    return Error::success();
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" ||
      op == "Equal") {
    if (n.input_size() < 2)
      return nodeError(n, "expects two inputs");
    return binary(n);
  }
  if (op == "Neg" || op == "Sqrt" || op == "Reciprocal" || op == "Erf" ||
      op == "Tanh" || op == "Sigmoid") {
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
                                   : Value(nn::SigmoidOp::create(b, loc, t, *x));
    setValue(n.output(0), y);
    return Error::success();
  }
  if (op == "Shape") {
    std::vector<int64_t> s = shape_(n, 0);
    int64_t rank = s.size(), start = attrInt(n, "start", 0), end = attrInt(n, "end", rank);
    if (start < 0)
      start += rank;
    if (end < 0)
      end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    setConst(n.output(0), HostTensor::integers({end - start},
                                               {s.begin() + start, s.begin() + end}));
    return Error::success();
  }
  if (op == "ConstantOfShape") {
    Expected<std::vector<int64_t>> s = constInts(n, 0, "input");
    if (!s)
      return s.takeError();
    HostTensor fill = HostTensor::floats({1}, {0.0});
    if (const auto *a = attr(n, "value")) {
      Expected<HostTensor> h = toHost(a->t(), baseDir);
      if (!h)
        return h.takeError();
      if (h->numel() != 1)
        return nodeError(n, "value must hold one element");
      fill = *h;
    }
    for (int64_t d : *s)
      if (d < 0)
        return nodeError(n, "negative dimension in the shape");
    fill.shape = {};
    setConst(n.output(0), evalExpand(fill, *s));
    return Error::success();
  }
  if (op == "Range") {
    if (n.input_size() != 3 || !allConst)
      return nodeError(n, "start, limit and delta must be known at compile time");
    const HostTensor &s = constant(n.input(0)), &l = constant(n.input(1)),
                     &d = constant(n.input(2));
    if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1 || d.at(0) == 0)
      return nodeError(n, "start, limit and delta must be scalars, delta non-zero");
    double count = std::ceil((l.at(0) - s.at(0)) / d.at(0));
    int64_t len = std::max<int64_t>(0, int64_t(count));
    if (len > (int64_t(1) << 31))
      return nodeError(n, "the range is too long");
    HostTensor r;
    r.kind = s.kind;
    r.onnxType = s.onnxType;
    r.shape = {len};
    for (int64_t k = 0; k < len; ++k) {
      if (s.kind == Kind::Float)
        r.f.push_back(float(s.at(0) + double(k) * d.at(0)));
      else
        r.i.push_back(s.i[0] + k * d.i[0]);
    }
    setConst(n.output(0), r);
    return Error::success();
  }
  if (op == "Cast") {
    int64_t to = attrInt(n, "to", 1);
    if (allConst) {
      setConst(n.output(0), evalCast(constant(n.input(0)), int32_t(to)));
      return Error::success();
    }
    Expected<Value> x = value(n.input(0));
    if (!x)
      return x.takeError();
    Kind target;
    if (to == onnx::TensorProto::FLOAT)
      target = Kind::Float;
    else if (to == onnx::TensorProto::INT32 || to == onnx::TensorProto::INT64)
      target = Kind::Int;
    else if (to == onnx::TensorProto::BOOL)
      target = Kind::Bool;
    else
      return nodeError(n, "a runtime cast to " + typeName(int32_t(to)) +
                              " is not supported (f32, int32/int64, bool)");
    Value y = *x;
    if (kindOf(y) != target)
      y = nn::CastOp::create(b, loc, type(shapeOf(y), target), y, TypeAttr());
    setValue(n.output(0), y);
    return Error::success();
  }
  if (op == "Reshape" || op == "Unsqueeze" || op == "Squeeze") {
    std::vector<int64_t> in = shape_(n, 0), out;
    if (op == "Reshape") {
      Expected<std::vector<int64_t>> s = constInts(n, 1, "shape");
      if (!s)
        return s.takeError();
      bool allowZero = attrInt(n, "allowzero", 0);
      int64_t known = 1, infer = -1;
      for (auto [k, d] : llvm::enumerate(*s)) {
        if (d == 0 && !allowZero) {
          if (k >= in.size())
            return nodeError(n, "shape copies dim " + llvm::Twine(k) +
                                    " the input lacks");
          d = in[k];
        }
        if (d == -1) {
          if (infer >= 0)
            return nodeError(n, "shape has more than one -1");
          infer = k;
        } else if (d < 0) {
          return nodeError(n, "shape has a negative size " + llvm::Twine(d));
        } else {
          known *= d;
        }
        out.push_back(d);
      }
      int64_t numel = 1;
      for (int64_t d : in)
        numel *= d;
      if (infer >= 0)
        out[infer] = known ? numel / known : 0;
      int64_t outNumel = 1;
      for (int64_t d : out)
        outNumel *= d;
      if (outNumel != numel)
        return nodeError(n, "cannot reshape " + llvm::Twine(numel) +
                                " elements to the shape given");
    } else {
      std::vector<int64_t> axes;
      if (hasInput(n, 1)) {
        Expected<std::vector<int64_t>> a = constInts(n, 1, "axes");
        if (!a)
          return a.takeError();
        axes = *a;
      } else if (auto a = attrInts(n, "axes")) {
        axes = *a;
      }
      if (op == "Unsqueeze") {
        int64_t rank = in.size() + axes.size();
        std::vector<bool> inserted(rank, false);
        for (int64_t a : axes) {
          if (Error e = normalizeAxis(n, a, rank))
            return e;
          inserted[a] = true;
        }
        for (int64_t d = 0, k = 0; d < rank; ++d)
          out.push_back(inserted[d] ? 1 : in[k++]);
      } else {
        std::vector<bool> removed(in.size(), false);
        for (int64_t a : axes) {
          if (Error e = normalizeAxis(n, a, in.size()))
            return e;
          if (in[a] != 1)
            return nodeError(n, "cannot squeeze dim " + llvm::Twine(a) + " of size " +
                                    llvm::Twine(in[a]));
          removed[a] = true;
        }
        for (size_t d = 0; d < in.size(); ++d)
          if (!(axes.empty() ? in[d] == 1 : bool(removed[d])))
            out.push_back(in[d]);
      }
    }
    if (isConst(n.input(0))) {
      HostTensor t = constant(n.input(0));
      t.shape = out;
      setConst(n.output(0), t);
      return Error::success();
    }
    Expected<Value> x = floatValue(n, 0);
    if (!x)
      return x.takeError();
    setValue(n.output(0), reshape(*x, out));
    return Error::success();
  }
  if (op == "Transpose") {
    std::vector<int64_t> in = shape_(n, 0), perm, out;
    if (auto p = attrInts(n, "perm"))
      perm = *p;
    else
      for (int64_t d = int64_t(in.size()) - 1; d >= 0; --d)
        perm.push_back(d);
    std::vector<int64_t> sorted(perm);
    std::sort(sorted.begin(), sorted.end());
    for (size_t d = 0; d < sorted.size(); ++d)
      if (sorted[d] != int64_t(d) || perm.size() != in.size())
        return nodeError(n, "perm is not a permutation of the input's dims");
    if (allConst) {
      setConst(n.output(0), evalTranspose(constant(n.input(0)), perm));
      return Error::success();
    }
    Expected<Value> x = floatValue(n, 0);
    if (!x)
      return x.takeError();
    for (int64_t p : perm)
      out.push_back(in[p]);
    setValue(n.output(0), nn::TransposeOp::create(b, loc, type(out), *x,
                                                  b.getDenseI64ArrayAttr(perm)));
    return Error::success();
  }
  if (op == "Concat") {
    int64_t axis = attrInt(n, "axis", 0);
    std::vector<int64_t> first = shape_(n, 0);
    if (Error e = normalizeAxis(n, axis, first.size()))
      return e;
    if (allConst) {
      std::vector<const HostTensor *> ins;
      for (int k = 0; k < n.input_size(); ++k) {
        const HostTensor &t = constant(n.input(k));
        if (t.shape.size() != first.size())
          return nodeError(n, "inputs differ in rank");
        for (size_t d = 0; d < first.size(); ++d)
          if (int64_t(d) != axis && t.shape[d] != first[d])
            return nodeError(n, "inputs differ on dim " + llvm::Twine(d));
        ins.push_back(&t);
      }
      setConst(n.output(0), evalConcat(ins, axis));
      return Error::success();
    }
    SmallVector<Value> ins;
    SmallVector<int64_t> out(first.begin(), first.end());
    out[axis] = 0;
    for (int k = 0; k < n.input_size(); ++k) {
      Expected<Value> x = floatValue(n, k);
      if (!x)
        return x.takeError();
      if (shapeOf(*x).size() != first.size())
        return nodeError(n, "inputs differ in rank");
      out[axis] += shapeOf(*x)[axis];
      ins.push_back(*x);
    }
    auto cat = nn::ConcatOp::create(b, loc, type(out), ins, b.getI64IntegerAttr(axis));
    if (failed(verify(cat)))
      return nodeError(n, "inputs do not concatenate");
    setValue(n.output(0), cat);
    return Error::success();
  }
  if (op == "Expand") {
    Expected<std::vector<int64_t>> s = constInts(n, 1, "shape");
    if (!s)
      return s.takeError();
    auto out = broadcast(shape_(n, 0), *s);
    if (!out)
      return nodeError(n, "the input does not broadcast to the shape given");
    if (isConst(n.input(0))) {
      setConst(n.output(0), evalExpand(constant(n.input(0)), *s));
      return Error::success();
    }
    Expected<Value> x = floatValue(n, 0);
    if (!x)
      return x.takeError();
    Value y = *x;
    if (shapeOf(y) != ArrayRef<int64_t>(*out))
      y = nn::BroadcastToOp::create(b, loc, type(*out), y);
    setValue(n.output(0), y);
    return Error::success();
  }
  if (op == "Where") {
    if (n.input_size() != 3)
      return nodeError(n, "expects three inputs");
    if (kind(n.input(0)) != Kind::Bool)
      return nodeError(n, "the condition must be bool");
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
  if (op == "Trilu") {
    bool upper = attrInt(n, "upper", 1);
    int64_t k = 0;
    if (hasInput(n, 1)) {
      Expected<std::vector<int64_t>> kv = constInts(n, 1, "k");
      if (!kv)
        return kv.takeError();
      if (kv->size() != 1)
        return nodeError(n, "k must be a scalar");
      k = (*kv)[0];
    }
    if (shape_(n, 0).size() < 2)
      return nodeError(n, "the input must have rank >= 2");
    if (isConst(n.input(0))) {
      setConst(n.output(0), evalTrilu(constant(n.input(0)), upper, k));
      return Error::success();
    }
    Expected<Value> x = floatValue(n, 0);
    if (!x)
      return x.takeError();
    setValue(n.output(0), nn::TriluOp::create(b, loc, x->getType(), *x, upper, k));
    return Error::success();
  }
  if (op == "Softmax") {
    int64_t axis = attrInt(n, "axis", -1);
    if (Error e = normalizeAxis(n, axis, shape_(n, 0).size()))
      return e;
    Expected<Value> x = floatValue(n, 0);
    if (!x)
      return x.takeError();
    setValue(n.output(0), nn::SoftmaxOp::create(b, loc, x->getType(), *x, axis));
    return Error::success();
  }
  if (op == "MatMul") {
    if (n.input_size() != 2)
      return nodeError(n, "expects two inputs");
    return matmul(n);
  }
  if (op == "Gemm") {
    if (n.input_size() < 2)
      return nodeError(n, "expects at least two inputs");
    return gemm(n);
  }
  if (op == "LayerNormalization") {
    if (n.input_size() < 2)
      return nodeError(n, "expects X and Scale");
    return layerNorm(n);
  }
  if (op == "ReduceMean" || op == "ReduceSum")
    return reduce(n, op == "ReduceMean");
  if (op == "Gather") {
    if (n.input_size() != 2)
      return nodeError(n, "expects data and indices");
    return gather(n);
  }
  if (op == "Slice") {
    if (n.input_size() < 3)
      return nodeError(n, "expects data, starts and ends");
    return slice(n);
  }
  if (op == "Split")
    return split(n);
  return nodeError(n, "is not handled");
}

//===----------------------------------------------------------------------===//
// The whole model
//===----------------------------------------------------------------------===//

Expected<Value> GraphImporter::trainingLoss() {
  llvm::StringRef spec(opts.loss);
  auto [kindName, output] = spec.split(':');
  if (kindName != "cross_entropy" && kindName != "output")
    return fail("--loss must be cross_entropy[:OUTPUT] or output:OUTPUT, got '" +
                opts.loss + "'");
  std::string out = output.str();
  if (out.empty()) {
    if (kindName == "output")
      return fail("--loss output:OUTPUT needs the name of a scalar output");
    for (const auto &o : graph.output())
      if (o.name() == "logits")
        out = "logits";
    if (out.empty())
      out = graph.output(0).name();
  }
  bool found = llvm::any_of(graph.output(), [&](const auto &o) { return o.name() == out; });
  if (!found || !vals.count(out))
    return fail("--loss: the model has no output named '" + out + "'");
  Expected<Value> v = value(out);
  if (!v)
    return v.takeError();
  RankedTensorType scalar = type({});
  if (kindName == "output") {
    if (v->getType() != scalar)
      return fail("--loss output:" + out + ": the output is " +
                  llvm::formatv("{0}", v->getType()).str() + ", not a scalar f32");
    return *v;
  }
  ArrayRef<int64_t> s = shapeOf(*v);
  if (kindOf(*v) != Kind::Float || s.size() != 3 || s[0] != tokenShape[0] ||
      s[1] != tokenShape[1])
    return fail("--loss cross_entropy: output '" + out + "' must be logits [" +
                llvm::Twine(tokenShape[0]) + ", " + llvm::Twine(tokenShape[1]) +
                ", vocab] to match the token input");
  Value targets = block->addArgument(type(tokenShape, Kind::Int), loc);
  argAttrs.push_back(b.getDictionaryAttr(
      b.getNamedAttr("nn.input", b.getStringAttr("targets"))));
  return Value(nn::CrossEntropyOp::create(b, loc, scalar, *v, targets,
                                          b.getI64IntegerAttr(-100)));
}

Expected<ImportedModel> GraphImporter::run(llvm::StringRef path) {
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset < kMinOpset || opset > kMaxOpset)
    return fail(path + ": opset " + llvm::Twine(opset) +
                " of the default domain is not supported (shardc reads opsets " +
                llvm::Twine(kMinOpset) + " to " + llvm::Twine(kMaxOpset) + ")");
  if (graph.output_size() == 0)
    return fail(path + ": the graph has no outputs");
  b.setInsertionPointToStart(block.get());
  if (Error e = addInitializers())
    return fail(path + ": " + llvm::toString(std::move(e)));
  if (Error e = addInputs())
    return fail(path + ": " + llvm::toString(std::move(e)));
  for (const onnx::NodeProto &node : graph.node()) {
    loc = NameLoc::get(b.getStringAttr(node.name().empty() ? node.op_type() : node.name()));
    if (Error e = importNode(node))
      return fail(path + ": " + llvm::toString(std::move(e)));
  }
  loc = b.getUnknownLoc();

  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  ImportedModel imported;
  int64_t vocab = 0;
  if (opts.training) {
    Expected<Value> loss = trainingLoss();
    if (!loss)
      return fail(path + ": " + llvm::toString(loss.takeError()));
    results.push_back(*loss);
    if (auto ce = loss->getDefiningOp<nn::CrossEntropyOp>())
      vocab = shapeOf(ce.getLogits()).back();
  } else {
    for (const auto &o : graph.output()) {
      if (!vals.count(o.name()))
        return fail(path + ": output '" + o.name() + "' is never computed");
      Expected<Value> v = value(o.name());
      if (!v)
        return v.takeError();
      Value r = *v;
      // A result needs its own buffer: copy arguments and repeated values.
      if (isa<BlockArgument>(r) || llvm::is_contained(results, r)) {
        if (kindOf(r) != Kind::Float)
          return fail(path + ": output '" + o.name() +
                      "' repeats an integer input; not supported");
        r = nn::ReshapeOp::create(b, loc, r.getType(), r);
      }
      results.push_back(r);
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr("nn.output", b.getStringAttr(o.name()))));
    }
  }
  func::ReturnOp::create(b, loc, results);

  imported.module = ModuleOp::create(loc);
  OpBuilder mb(imported.module->getBodyRegion());
  auto fnType = b.getFunctionType(block->getArgumentTypes(), TypeRange(results));
  auto fn = func::FuncOp::create(mb, loc, opts.training ? "forward" : "infer", fnType);
  fn.getBody().push_back(block.release());
  fn.setAllArgAttrs(argAttrs);
  if (!resultAttrs.empty())
    fn.setAllResultAttrs(resultAttrs);
  int64_t B = opts.training ? tokenShape[0] : 1, T = opts.training ? tokenShape[1] : 1;
  SmallVector<NamedAttribute> info = {
      b.getNamedAttr("family", b.getStringAttr("onnx")),
      b.getNamedAttr("source", b.getStringAttr(path)),
      b.getNamedAttr("vocab_size", b.getI64IntegerAttr(vocab)),
      b.getNamedAttr("micro_batch", b.getI64IntegerAttr(B)),
      b.getNamedAttr("seq_len", b.getI64IntegerAttr(T)),
      b.getNamedAttr("opset", b.getI64IntegerAttr(opset)),
  };
  (*imported.module)->setAttr("nn.model", b.getDictionaryAttr(info));
  if (failed(verify(*imported.module)))
    return fail(path + ": internal error: the imported graph does not verify");

  // The template for --export-onnx: the model less its trained weights.
  onnx::ModelProto stripped = model;
  for (onnx::TensorProto &t : *stripped.mutable_graph()->mutable_initializer())
    if (paramNames.count(t.name())) {
      t.clear_raw_data();
      t.clear_float_data();
      t.clear_double_data();
      t.clear_int32_data();
      t.clear_external_data();
      t.set_data_location(onnx::TensorProto::DEFAULT);
    }
  // Untied parameters are initializers there, in place of their Identity.
  onnx::GraphProto *g = stripped.mutable_graph();
  auto *nodes = g->mutable_node();
  nodes->erase(std::remove_if(nodes->begin(), nodes->end(),
                              [&](const onnx::NodeProto &n) {
                                return n.op_type() == "Identity" &&
                                       untied.count(n.output(0));
                              }),
               nodes->end());
  for (const InitialWeight &w : weights) {
    if (!untied.count(w.name))
      continue;
    onnx::TensorProto *t = g->add_initializer();
    t->set_name(w.name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : w.shape)
      t->add_dims(d);
  }
  imported.graphTemplate = stripped.SerializeAsString();
  imported.weights = std::move(weights);
  imported.summary = "onnx opset " + std::to_string(opset) + ", " +
                     std::to_string(graph.node_size()) + " nodes, " +
                     std::to_string(imported.weights.size()) + " trainable initializers";
  return imported;
}

} // namespace

const std::vector<std::string> &shardc::onnx_import::supportedOps() {
  return kSupported;
}

Expected<ImportedModel> shardc::onnx_import::importModel(MLIRContext &context,
                                                         llvm::StringRef path,
                                                         const ImportOptions &options) {
  context.getOrLoadDialect<nn::NNDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return fail(path + ": cannot read: " + file.getError().message());
  if ((*file)->getBufferSize() > size_t(INT32_MAX))
    return fail(path + ": a model file over 2 GB must keep its tensors as "
                       "external data");
  onnx::ModelProto model;
  if (!model.ParseFromArray((*file)->getBufferStart(), int((*file)->getBufferSize())))
    return fail(path + ": not a valid ONNX model (the protobuf does not parse: "
                       "truncated or corrupt file?)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    return fail(path + ": not a valid ONNX model (no graph or no nodes)");
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  GraphImporter importer(context, model, std::string(dir), options);
  return importer.run(path);
}
