//===- TensorProto.cpp - ONNX tensors to host tensors ---------------------===//
//
// TensorProtos (initializers, Constant values, --bind files) read into
// host tensors: their element types, raw and typed data, external data
// files resolved under the model's directory; sizes checked against the
// fold budget and what shardc can hold.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/GraphImporter.h"
#include "frontends/onnx/HostTensor.h"
#include "runtime/abi/abi.h"
#include "runtime/formats/files.h"
#include "runtime/math.h"
#include "runtime/text.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <cstring>


using namespace mlir;
using namespace shardc;
using namespace shardc::onnx_import;
using llvm::Error;
using llvm::Expected;

using shardc::runtime::bf16ToFloat;
using shardc::runtime::halfToFloat;

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

const char shardc::onnx_import::kProtobufLimit[] =
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
