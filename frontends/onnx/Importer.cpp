//===- Importer.cpp - ONNX models into the nn dialect ---------------------===//
//
// Nodes are visited in graph order (ONNX graphs are topologically sorted).
// A node whose inputs are all known at compile time is evaluated here
// (HostTensor.cpp), which folds shape subgraphs; any other node becomes nn
// ops on static shapes. Trainable initializers become parameters and are
// never folded.
//
// Op types are looked up in the op registry (OpRegistry.h), whose
// handlers live in ops/*.cpp by op group. Tensors are read from protobuf
// in TensorProto.cpp, the graph's initializers and inputs added in
// Initializers.cpp; this file walks the nodes and builds the module.
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

using shardc::runtime::printable;

/// Every importer error goes through here: the names it quotes come from
/// the model file and are made printable (runtime/text.h) once, here.
Error shardc::onnx_import::fail(const llvm::Twine &message) {
  return createStringError(printable(message.str()));
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

/// The template for --export-onnx: the model less its trained weights,
/// with untied parameters as initializers and tied transposed copies as
/// Transpose nodes of their source.
std::string GraphImporter::graphTemplate() const {
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
  return stripped.SerializeAsString();
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

  imported.graphTemplate = graphTemplate();
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
