//===- Importer.cpp - ONNX models into the nn dialect ---------------------===//
//
// Nodes are visited in graph order (ONNX graphs are topologically sorted).
// A node whose inputs are all known at compile time is evaluated here
// (HostTensor.cpp), which folds shape subgraphs; any other node becomes nn
// ops on static shapes. Trainable initializers become parameters and are
// never folded.
//
// Op types are looked up in the op registry (OpRegistry.h), whose
// handlers live in ops/*.cpp by op group.
//
//===----------------------------------------------------------------------===//
#include "target/Attrs.h"
#include "runtime/abi/abi.h"
#include "frontends/onnx/Importer.h"
#include "frontends/onnx/GraphImporter.h"
#include "frontends/onnx/Parameters.h"
#include "frontends/onnx/HostTensor.h"
#include "frontends/onnx/OpRegistry.h"
#include "runtime/math.h"
#include "runtime/formats/files.h"
#include "runtime/text.h"

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
#include "llvm/Support/Regex.h"

#include <onnx/onnx_pb.h>

#include <cstring>

using namespace mlir;
using namespace shardc;
using namespace shardc::onnx_import;
using llvm::createStringError;
using llvm::Error;
using llvm::Expected;

using shardc::runtime::bf16ToFloat;
using shardc::runtime::halfToFloat;
using shardc::runtime::printable;

/// Every importer error goes through here: the names it quotes come from
/// the model file and are made printable (runtime/text.h) once, here.
Error shardc::onnx_import::fail(const llvm::Twine &message) {
  return createStringError(printable(message.str()));
}

//===----------------------------------------------------------------------===//
// Tensors from protobuf
//===----------------------------------------------------------------------===//

std::string shardc::onnx_import::shapeText(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [k, d] : llvm::enumerate(shape))
    s += (k ? ", " : "") + std::to_string(d);
  return s + "]";
}

std::string GraphImporter::batchAdvice() const {
  if (!rebatched)
    return "";
  return "; input '" + rebatched->first + "' has a static batch of " +
         std::to_string(rebatched->second) + " in the file and --micro-batch " +
         "asks for " + std::to_string(tokenShape.empty() ? 0 : tokenShape[0]) +
         ": the exporter baked the batch into this shape, so export with a "
         "dynamic batch axis (torch.onnx.export(..., dynamic_axes={'" +
         rebatched->first + "': {0: 'batch'}})) or compile with --micro-batch " +
         std::to_string(rebatched->second);
}

std::string shardc::onnx_import::typeName(int32_t t) {
  const std::string *name = nullptr;
  if (onnx::TensorProto_DataType_IsValid(t))
    name = &onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(t));
  return name ? *name : "type " + std::to_string(t);
}

std::string shardc::onnx_import::tensorSizeProblem(llvm::ArrayRef<int64_t> shape,
                                                   int64_t elementBytes) {
  int64_t n = abi::checkedSize(shape, 1);
  if (n >= 0 && n <= abi::kMaxTensorBytes / elementBytes)
    return "";
  double bytes = double(elementBytes);
  for (int64_t d : shape)
    bytes *= double(d);
  return "a tensor of shape " + shapeText(shape) + " is " +
         (n >= 0 ? runtime::formatBytes(bytes) : std::string("beyond 2^63 elements")) +
         ", over shardc's limit of 2^40 bytes (1 TiB) per tensor";
}

Error GraphImporter::reserveFold(const onnx::NodeProto &n, int64_t elements) {
  int64_t budget = opts.foldBudgetBytes;
  if (elements >= 0 && elements <= (budget - foldedBytes) / 8) {
    foldedBytes += 8 * elements;
    return Error::success();
  }
  return nodeError(n, "evaluating it at compile time would hold " +
                          (elements < 0 ? std::string("more than 2^63 elements")
                                        : std::to_string(elements) + " elements (" +
                                              runtime::formatBytes(8.0 * double(elements)) + ")") +
                          ", beyond the compile-time evaluation budget (" +
                          runtime::formatBytes(double(budget)) + " in all, " +
                          runtime::formatBytes(double(budget - foldedBytes)) +
                          " left; --fold-budget MIB raises it)");
}

int64_t shardc::onnx_import::fileFloatDtype(int32_t t) {
  switch (t) {
  case onnx::TensorProto::DOUBLE:
    return abi::kF64;
  case onnx::TensorProto::FLOAT16:
    return abi::kF16;
  case onnx::TensorProto::BFLOAT16:
    return abi::kBF16;
  default:
    return -1;
  }
}

/// What an ONNX file (a model, a --bind tensor) may hold: protobuf's limit.
static const char kProtobufLimit[] =
    "the 2 GiB protobuf limit of an ONNX file (a larger model keeps its "
    "tensors as external data)";

/// A path with its symlinks resolved (realpath), or an error naming why not.
static Expected<std::string> resolvedPath(const std::string &path) {
  char *resolved = ::realpath(path.c_str(), nullptr);
  if (!resolved)
    return fail("'" + path + "': " + std::strerror(errno));
  std::string out(resolved);
  std::free(resolved);
  return out;
}

/// The `bytes` bytes of a tensor stored as external data, read from the file
/// its `location` names: inside the model's folder after symlinks (unless
/// the policy allows any place), a regular file, the range inside it.
static Expected<std::string> externalBytes(const onnx::TensorProto &t,
                                           const ExternalDataPolicy &policy,
                                           uint64_t bytes) {
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
  std::string what = "tensor '" + t.name() + "': external data location '" +
                     location + "'";
  if (location.empty())
    return fail(what + " is empty");
  llvm::SmallString<256> path;
  if (!llvm::sys::path::is_absolute(location))
    path = policy.dir;
  llvm::sys::path::append(path, location);
  Expected<std::string> resolved = resolvedPath(std::string(path));
  if (!resolved)
    return fail(what + ": cannot read external data file " +
                llvm::toString(resolved.takeError()));
  if (!policy.allowOutside) {
    Expected<std::string> dir = resolvedPath(policy.dir);
    if (!dir)
      return fail(what + ": cannot resolve the model's folder " +
                  llvm::toString(dir.takeError()));
    std::string prefix = *dir == "/" ? *dir : *dir + "/";
    if (!llvm::StringRef(*resolved).starts_with(prefix))
      return fail(what + " resolves to '" + *resolved +
                  "', outside the model's folder '" + *dir +
                  "' (--allow-external-data-outside permits it)");
  }
  std::string error;
  uint64_t size = 0;
  runtime::FileHandle file =
      runtime::openInputFile(*resolved, UINT64_MAX, "", error, &size);
  if (!file)
    return fail(what + ": " + error);
  if (!hasLength)
    length = offset <= size ? size - offset : 0;
  if (offset > size || length > size - offset)
    return fail("tensor '" + t.name() + "': external data [" +
                llvm::Twine(offset) + ", +" + llvm::Twine(length) +
                ") lies outside '" + *resolved + "' (" + llvm::Twine(size) +
                " bytes)");
  if (length != bytes)
    return fail("tensor '" + t.name() + "' holds " + llvm::Twine(length) +
                " bytes of external data, its shape needs " +
                llvm::Twine(bytes));
  std::string out(size_t(length), '\0');
  if (!runtime::readAtNoThrow(file.fd(), *resolved, offset, out.data(), length,
                              error))
    return fail(what + ": " + error);
  return out;
}

Expected<HostTensor>
shardc::onnx_import::toHost(const onnx::TensorProto &t,
                            const ExternalDataPolicy &baseDir) {
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
    Expected<std::string> bytes =
        externalBytes(t, baseDir, uint64_t(n) * uint64_t(width));
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
  if (it == vals.end() && isNanOf.count(name))
    return fail("value '" + name + "' is IsNaN of a tensor computed at runtime; "
                "shardc computes it only as Where(IsNaN(x), 0, x)");
  if (it == vals.end())
    return fail("value '" + name + "' is used before any node defines it");
  if (!it->second.value)
    it->second.value = materialize(*it->second.constant);
  if (it->second.view && *it->second.view != std::vector<int64_t>(
                                                 shapeOf(it->second.value).begin(),
                                                 shapeOf(it->second.value).end()))
    return fail("value '" + name +
                "' is an integer tensor reshaped at runtime; only Gather may "
                "read it (the " + target().name + " target computes in " +
                target().computeTypeList() + " only)");
  return it->second.value;
}

//===----------------------------------------------------------------------===//
// Graph inputs and initializers
//===----------------------------------------------------------------------===//

/// Which initializers are trained (README, "Which initializers are
/// trained"):
///  - with --train REGEX, the floating-point ones whose names it matches;
///  - where the exporter marked the module's state (torch's dynamo
///    exporter), its parameters, and what its optimizer folded from one
///    parameter alone (a weight transposed once at export time);
///  - in a file without marks, every floating-point initializer of more
///    than one element whose values are all finite (masks filled with
///    -inf stay constant);
/// and never those --freeze names. A trained initializer that is the
/// transpose of another, bit for bit (a tied head the exporter folded to a
/// transposed copy), is computed from it instead of trained apart.
Error GraphImporter::addInitializers() {
  frozen.insert(opts.frozen.begin(), opts.frozen.end());
  ExporterMarks marks = readExporterMarks(graph);
  std::optional<llvm::Regex> trainRe;
  if (!opts.trainRegex.empty()) {
    trainRe.emplace("^(" + opts.trainRegex + ")$");
    std::string why;
    if (!trainRe->isValid(why))
      return fail("--train: invalid regex '" + opts.trainRegex + "': " + why);
  }
  std::vector<std::pair<std::string, HostTensor>> chosen;
  for (const onnx::TensorProto &t : graph.initializer()) {
    Expected<HostTensor> h = toHost(t, baseDir);
    if (!h)
      return h.takeError();
    bool trainable = opts.training && h->kind == Kind::Float && h->numel() > 1 &&
                     !frozen.count(t.name());
    if (trainable && trainRe) {
      trainable = trainRe->match(t.name());
    } else if (trainable && marks.present) {
      auto kind = marks.kind.find(t.name());
      std::vector<std::string> sources = marks.foldedParameters(t.name());
      if (sources.size() > 1)
        return fail("initializer '" + t.name() + "' was folded at export time from " +
                    llvm::Twine(sources.size()) + " parameters ('" + sources[0] +
                    "', '" + sources[1] +
                    "', ...), so it cannot be trained as they are; export "
                    "with torch.onnx.export(..., optimize=False) or freeze it "
                    "with --freeze");
      trainable = (kind != marks.kind.end() && kind->second == "PARAMETER") ||
                  sources.size() == 1;
    } else if (trainable) {
      trainable = h->isFinite();
    }
    if (!trainable) {
      setConst(t.name(), std::move(*h));
      continue;
    }
    chosen.emplace_back(t.name(), std::move(*h));
  }
  // Transposed copies: a 2-D tensor with more than one distinct value that
  // equals another's transpose bit for bit is that tensor, tied.
  std::map<std::string, std::string> transposeOf;
  for (size_t i = 0; opts.retieTransposes && i < chosen.size(); ++i) {
    const HostTensor &x = chosen[i].second;
    if (x.shape.size() != 2 || transposeOf.count(chosen[i].first) ||
        std::all_of(x.f.begin(), x.f.end(), [&](double v) { return v == x.f[0]; }))
      continue;
    for (size_t j = 0; j < chosen.size(); ++j) {
      const HostTensor &y = chosen[j].second;
      if (i == j || transposeOf.count(chosen[j].first) || y.shape.size() != 2 ||
          y.shape[0] != x.shape[1] || y.shape[1] != x.shape[0])
        continue;
      int64_t r = x.shape[0], c = x.shape[1];
      bool same = true;
      for (int64_t a = 0; a < r && same; ++a)
        for (int64_t b = 0; b < c && same; ++b)
          same = x.f[a * c + b] == y.f[b * r + a];
      if (!same)
        continue;
      // The copy is the one with the exporter's generated name, or the later.
      auto generated = [](const std::string &n) {
        return llvm::StringRef(n).starts_with("onnx::") ||
               llvm::StringRef(n).starts_with("val_");
      };
      bool gi = generated(chosen[i].first), gj = generated(chosen[j].first);
      bool xIsCopy = gi != gj ? gi : i > j;
      if (xIsCopy)
        transposeOf[chosen[i].first] = chosen[j].first;
      else
        transposeOf[chosen[j].first] = chosen[i].first;
      break;
    }
  }
  for (auto &[name, h] : chosen) {
    if (transposeOf.count(name))
      continue;
    Value arg = block->addArgument(type(h.shape), loc);
    argAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr(attrs::kParam, b.getStringAttr(name)),
         b.getNamedAttr(attrs::kInit, b.getStringAttr("file"))}));
    setValue(name, arg);
    paramNames.insert(name);
    weights.push_back({name, h.shape, std::vector<float>(h.f.begin(), h.f.end())});
  }
  for (auto &[name, h] : chosen) {
    auto it = transposeOf.find(name);
    if (it == transposeOf.end())
      continue;
    Value source = vals[it->second].value;
    setValue(name, nn::TransposeOp::create(b, loc, type(h.shape), source,
                                           b.getDenseI64ArrayAttr({1, 0})));
    tiedTransposes[name] = it->second;
  }
  trainedBy = trainRe          ? "--train"
              : marks.present ? "the exporter's parameter marks"
                              : "finite float initializers";
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
      {b.getNamedAttr(attrs::kParam, b.getStringAttr(name)),
       b.getNamedAttr(attrs::kInit, b.getStringAttr("file"))}));
  setValue(name, arg);
  paramNames.insert(name);
  weights.push_back(std::move(copy));
  untied.insert(name);
  return Error::success();
}

Error GraphImporter::addInputs() {
  for (const auto &[name, file] : opts.bindings) {
    std::string bytes, error;
    if (!runtime::readInputFile(file, runtime::kMaxProtobufBytes,
                                kProtobufLimit, bytes, error))
      return fail("--bind " + name + ": " + error);
    onnx::TensorProto t;
    if (!t.ParseFromArray(bytes.data(), int(bytes.size())))
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
      if (d.has_dim_value() && d.dim_value() < 0)
        return fail("input '" + name + "' dim " + llvm::Twine(k) + " is negative (" +
                    llvm::Twine(d.dim_value()) + ")");
      int64_t size = d.has_dim_value() ? d.dim_value() : -1;
      if (k == 0 && opts.microBatch > 0) {
        if (size > 0 && size != opts.microBatch)
          rebatched = {name, size};
        size = opts.microBatch;
      }
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
    // Integers are taken as i32, floats as f32, if the target has them.
    // f64, f16 and bf16 inputs are computed in f32 too: the executable
    // reads their files in that type and converts (fileDtype).
    int64_t fileDtype = fileFloatDtype(dt);
    if (dt == onnx::TensorProto::FLOAT && target().computes(abi::kF32))
      k = Kind::Float;
    else if (fileDtype >= 0 && !opts.training && target().computes(abi::kF32))
      k = Kind::Float;
    else if ((dt == onnx::TensorProto::INT64 ||
              dt == onnx::TensorProto::INT32) &&
             target().indexes(abi::kI32))
      k = Kind::Int;
    else if (dt == onnx::TensorProto::BOOL && target().indexes(abi::kBool))
      k = Kind::Bool;
    else
      return fail("input '" + name + "' has element type " + typeName(dt) +
                  "; the " + target().name + " target takes " +
                  target().computeTypeList() + ", int32/int64 (as i32) and "
                  "bool");
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
    if (std::string big = tensorSizeProblem(dims, k == Kind::Bool ? 1 : 4); !big.empty())
      return fail("input '" + name + "': " + big);
    Value arg = block->addArgument(type(dims, k), loc);
    SmallVector<NamedAttribute> argAttr = {b.getNamedAttr(
        attrs::kInput, b.getStringAttr(opts.training ? abi::kIoTokens : name))};
    if (fileDtype >= 0)
      argAttr.push_back(b.getNamedAttr(
          attrs::kFileDtype, b.getStringAttr(abi::dtypeName(fileDtype))));
    argAttrs.push_back(b.getDictionaryAttr(argAttr));
    setValue(name, arg);
  }
  if (opts.training && tokenInput.empty())
    return fail("the model has no integer input to feed token ids to");
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

/// How many inputs or outputs an op takes: "2 inputs", "2 to 3 inputs",
/// "at least 1 input", "no inputs".
static std::string countText(Bounds count, llvm::StringRef noun) {
  auto plural = [&](int64_t k) {
    return std::to_string(k) + " " + noun.str() + (k == 1 ? "" : "s");
  };
  if (count.max == kVariadic)
    return "at least " + plural(count.min);
  if (count.min == count.max)
    return count.min == 0 ? "no " + noun.str() + "s" : plural(count.min);
  return std::to_string(count.min) + " to " + plural(count.max);
}

Error GraphImporter::importNode(const onnx::NodeProto &n) {
  const std::string &op = n.op_type();
  const OpInfo *info =
      n.domain().empty() || n.domain() == "ai.onnx" ? lookupOp(op) : nullptr;
  if (!info)
    return fail(describe(n) +
                (n.domain().empty() ? "" : " of domain '" + n.domain() + "'") +
                " is not supported; supported ops: " +
                llvm::join(supportedOps(), ", "));
  if (!info->opsets.contains(opset))
    return fail(describe(n) +
                " is not supported at this opset; shardc imports " + op +
                " at opsets " + llvm::Twine(info->opsets.min) + " to " +
                llvm::Twine(info->opsets.max));
  for (int k = 0; k < n.input_size(); ++k) {
    if (isNanOf.count(n.input(k)) && (op != "Where" || k != 0))
      return nodeError(n, "input '" + n.input(k) +
                              "' is IsNaN of a tensor computed at runtime, which is "
                              "supported only as Where(IsNaN(x), 0, x)");
    if (!n.input(k).empty() && !vals.count(n.input(k)) && !isNanOf.count(n.input(k)))
      return nodeError(n,
                       "input '" + n.input(k) + "' is not defined before it");
  }
  // Static single assignment (onnx.checker's rule): a name is the output
  // of one node, and no node redefines a graph input or initializer.
  for (const std::string &out : n.output())
    if (!out.empty() && (vals.count(out) || isNanOf.count(out)))
      return nodeError(n, "output '" + out +
                              "' is already defined (an ONNX graph assigns "
                              "each name once)");
  if (!info->inputs.contains(n.input_size()))
    return nodeError(n, "expects " + countText(info->inputs, "input") +
                            ", has " + llvm::Twine(n.input_size()));
  // Optional inputs may be left out with an empty name; required ones (all
  // of a variadic list) may not.
  for (int k = 0; k < n.input_size(); ++k)
    if (n.input(k).empty() &&
        (k < info->inputs.min || info->inputs.max == kVariadic))
      return nodeError(n, "input " + llvm::Twine(k) +
                              " is required but its name is empty");
  if (!info->outputs.contains(n.output_size()))
    return nodeError(n, "expects " + countText(info->outputs, "output") +
                            ", has " + llvm::Twine(n.output_size()));
  // A node whose inputs are all known is evaluated here: its result (at
  // least the broadcast of its inputs) must fit the budget before it is
  // computed. Ops whose results outgrow their inputs (ConstantOfShape,
  // Expand, Range) reserve their own sizes.
  bool folded = allInputsConst(n) && n.input_size() > 0;
  if (folded) {
    std::vector<int64_t> shape;
    bool broadcasts = true;
    for (const std::string &in : n.input())
      if (!in.empty()) {
        auto s = broadcast(shape, constant(in).shape);
        if (!s) {
          broadcasts = false;
          break;
        }
        shape = *s;
      }
    if (broadcasts) {
      if (Error e = reserveFold(n, abi::checkedSize(shape, 1)))
        return e;
    }
  }
  if (Error e = (this->*info->handler)(n))
    return e;
  // What the node made: a value computed at runtime has elements (the
  // kernels take no empty tensors) and at most kMaxTensorBytes.
  for (const std::string &out : n.output()) {
    auto it = vals.find(out);
    if (out.empty() || it == vals.end() || !it->second.value)
      continue;
    auto t = mlir::cast<RankedTensorType>(it->second.value.getType());
    if (std::string big = tensorSizeProblem(t.getShape(), 4); !big.empty())
      return nodeError(n, "output '" + out + "': " + big);
    // Views and slices of nothing are read as nothing; the kernels of
    // other ops take no empty tensors.
    static const std::set<std::string> kViews = {
        "Reshape", "Split", "Slice", "Squeeze", "Unsqueeze", "Identity", "Flatten"};
    if (t.getNumElements() == 0 && !kViews.count(n.op_type()))
      return nodeError(n, "output '" + out + "' of shape " + shapeText(t.getShape()) +
                              " is empty; shardc computes no empty tensors at runtime");
  }
  return Error::success();
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
      b.getNamedAttr(attrs::kInput, b.getStringAttr(abi::kIoTargets))));
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
    loc = NameLoc::get(b.getStringAttr(
        printable(node.name().empty() ? node.op_type() : node.name())));
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
        return fail(path + ": " + llvm::toString(v.takeError()));
      Value r = *v;
      // A result needs its own buffer: copy arguments and repeated values.
      if (isa<BlockArgument>(r) || llvm::is_contained(results, r)) {
        if (kindOf(r) != Kind::Float)
          return fail(path + ": output '" + o.name() +
                      "' repeats an integer input; not supported");
        r = nn::ReshapeOp::create(b, loc, r.getType(), r);
      }
      // An output the file declares f64, f16 or bf16 is computed in f32 and
      // written in its type.
      SmallVector<NamedAttribute> resultAttr = {
          b.getNamedAttr(attrs::kOutput, b.getStringAttr(o.name()))};
      int64_t fileDtype = o.type().has_tensor_type()
                              ? fileFloatDtype(o.type().tensor_type().elem_type())
                              : -1;
      if (fileDtype >= 0 && kindOf(r) == Kind::Float)
        resultAttr.push_back(b.getNamedAttr(
            attrs::kFileDtype, b.getStringAttr(abi::dtypeName(fileDtype))));
      results.push_back(r);
      resultAttrs.push_back(b.getDictionaryAttr(resultAttr));
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
  // Tied transposed copies are Transpose nodes of their source.
  auto *inits = g->mutable_initializer();
  inits->erase(std::remove_if(inits->begin(), inits->end(),
                              [&](const onnx::TensorProto &t) {
                                return tiedTransposes.count(t.name()) > 0;
                              }),
               inits->end());
  for (const auto &[copy, source] : tiedTransposes) {
    onnx::NodeProto *n = g->add_node();
    n->set_op_type("Transpose");
    n->set_name("shardc_tied_" + copy);
    n->add_input(source);
    n->add_output(copy);
    onnx::AttributeProto *perm = n->add_attribute();
    perm->set_name("perm");
    perm->set_type(onnx::AttributeProto::INTS);
    perm->add_ints(1);
    perm->add_ints(0);
    // First: a node list must stay in topological order.
    for (int k = g->node_size() - 1; k > 0; --k)
      g->mutable_node()->SwapElements(k, k - 1);
  }
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
                     std::to_string(imported.weights.size()) + " trained initializers (by " +
                     trainedBy + ")";
  for (const InitialWeight &w : imported.weights)
    imported.trained.push_back(w.name);
  for (const auto &[copy, source] : tiedTransposes)
    imported.tied.push_back(copy + " = transpose of " + source);
  return imported;
}

Expected<ImportedModel> shardc::onnx_import::importModel(MLIRContext &context,
                                                         llvm::StringRef path,
                                                         const ImportOptions &options) {
  context.getOrLoadDialect<nn::NNDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  std::string bytes, error;
  if (!runtime::readInputFile(path.str(), runtime::kMaxProtobufBytes,
                              kProtobufLimit, bytes, error))
    return fail(error);
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    return fail(path + ": not a valid ONNX model (the protobuf does not parse: "
                       "truncated or corrupt file?)");
  bytes = std::string();
  if (!model.has_graph() || model.graph().node_size() == 0)
    return fail(path + ": not a valid ONNX model (no graph or no nodes)");
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  GraphImporter importer(context, model,
                         ExternalDataPolicy{std::string(dir),
                                            options.allowExternalDataOutside},
                         options);
  return importer.run(path);
}
