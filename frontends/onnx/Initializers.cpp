//===- Initializers.cpp - the graph's initializers and inputs -------------===//
//
// Initializers become parameters (the trained ones, Parameters.cpp decides
// which), folded constants, or untied copies; graph inputs become the
// tokens and targets (their symbolic dims given by --micro-batch and
// --seq-len) or --bind tensors.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/GraphImporter.h"
#include "frontends/onnx/HostTensor.h"
#include "frontends/onnx/Parameters.h"
#include "runtime/abi/abi.h"
#include "runtime/formats/files.h"
#include "target/Attrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Regex.h"

#include <onnx/onnx_pb.h>


using namespace mlir;
using namespace shardc;
using namespace shardc::onnx_import;
using llvm::Error;
using llvm::Expected;


//===----------------------------------------------------------------------===//
// Graph inputs and initializers
//===----------------------------------------------------------------------===//

/// Which initializers are trained (docs/onnx.md, "The trained parameters
/// are"):
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
