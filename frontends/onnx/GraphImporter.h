//===- GraphImporter.h - the ONNX graph importer's state --------*- C++ -*-===//
//
// Private to frontends/onnx: the importer of one ONNX graph, shared by the
// driver (Importer.cpp: graph inputs, initializers, the node loop, the
// module) and the op handlers (ops/*.cpp), which the op registry
// (OpRegistry.h) reaches.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTENDS_ONNX_GRAPHIMPORTER_H
#define SHARDC_FRONTENDS_ONNX_GRAPHIMPORTER_H

#include "frontends/onnx/HostTensor.h"
#include "runtime/text.h"
#include "frontends/onnx/Importer.h"

#include "dialects/nn/NNDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace shardc::onnx_import {

/// The opsets of the default domain the importer reads (the model's).
/// The default domain's opsets a model may declare. Each op's registry
/// entry then says at which of them the importer knows the op's version:
/// one whose semantics changed after an older model's opset is refused
/// there, naming the node.
constexpr int64_t kMinOpset = 1, kMaxOpset = 21;

llvm::Error fail(const llvm::Twine &message);

/// What an ONNX file (a model, a --bind tensor) may hold: protobuf's limit
/// (TensorProto.cpp).
extern const char kProtobufLimit[];

/// The name of an ONNX element type ("FLOAT"), or "type N".
std::string typeName(int32_t t);
/// The runtime dtype code (abi::kF64, kF16, kBF16) of an ONNX float type a
/// graph computes in f32 and converts at its inputs, outputs and casts;
/// -1 for FLOAT and every other type.
int64_t fileFloatDtype(int32_t onnxType);
/// An error message if a tensor of `shape` with `elementBytes` per element
/// is over abi::kMaxTensorBytes (or its size overflows); "" if it fits.
std::string tensorSizeProblem(llvm::ArrayRef<int64_t> shape, int64_t elementBytes);
/// A shape as errors print it: [2, 16, 4].
std::string shapeText(llvm::ArrayRef<int64_t> shape);

/// Where a model's external data may be read from: files inside `dir` (the
/// model's folder, after symlinks), or anywhere with `allowOutside`
/// (--allow-external-data-outside); regular files only, either way.
struct ExternalDataPolicy {
  std::string dir;
  bool allowOutside = false;
};

/// A TensorProto's values; external data is read as `baseDir` allows.
llvm::Expected<HostTensor> toHost(const onnx::TensorProto &t,
                                  const ExternalDataPolicy &baseDir);

/// What a graph value is: known at compile time, or an SSA value of the
/// forward function.
struct Val {
  std::optional<HostTensor> constant;
  mlir::Value value;
  /// An integer tensor computed at runtime (the token ids) that the graph
  /// reshapes: the shape it has there, while `value` keeps the one it was
  /// computed with. The target computes no integer tensors, so only an
  /// index reader (Gather) may use it, and reshapes its float result.
  std::optional<std::vector<int64_t>> view;
};

class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext &ctx, const onnx::ModelProto &model,
                ExternalDataPolicy baseDir, const ImportOptions &opts)
      : b(&ctx), model(model), graph(model.graph()),
        baseDir(std::move(baseDir)), opts(opts), loc(b.getUnknownLoc()) {}

  llvm::Expected<ImportedModel> run(llvm::StringRef path);
  /// The serialized model --export-onnx writes weights into (Importer.cpp).
  std::string graphTemplate() const;

  // Op handlers, reached through the op registry (OpRegistry.h), which has
  // checked the node's opset and its input and output counts.
  // ops/Elementwise.cpp
  llvm::Error binary(const onnx::NodeProto &n); // Add, Sub, ..., Equal
  llvm::Error unary(const onnx::NodeProto &n);  // Neg, Sqrt, ..., Sigmoid
  llvm::Error castNode(const onnx::NodeProto &n);
  llvm::Error where(const onnx::NodeProto &n);
  llvm::Error isNan(const onnx::NodeProto &n);
  llvm::Error leakyRelu(const onnx::NodeProto &n);
  llvm::Error folded(const onnx::NodeProto &n); // ops/Folded.cpp
  llvm::Error geluNode(const onnx::NodeProto &n);
  // ops/Linear.cpp
  llvm::Error matmul(const onnx::NodeProto &n);
  llvm::Error gemm(const onnx::NodeProto &n);
  // ops/Normalization.cpp
  llvm::Error layerNorm(const onnx::NodeProto &n);
  llvm::Error softmax(const onnx::NodeProto &n);
  llvm::Error reduce(const onnx::NodeProto &n); // ReduceMean, ReduceSum
  // ops/Shape.cpp
  llvm::Error constantNode(const onnx::NodeProto &n);
  llvm::Error identity(const onnx::NodeProto &n);
  llvm::Error shapeNode(const onnx::NodeProto &n);
  llvm::Error constantOfShape(const onnx::NodeProto &n);
  llvm::Error range(const onnx::NodeProto &n);
  llvm::Error reshapeLike(const onnx::NodeProto &n); // Reshape, (Un)squeeze
  llvm::Error transpose(const onnx::NodeProto &n);
  llvm::Error concat(const onnx::NodeProto &n);
  llvm::Error expand(const onnx::NodeProto &n);
  llvm::Error trilu(const onnx::NodeProto &n);
  llvm::Error gather(const onnx::NodeProto &n);
  llvm::Error slice(const onnx::NodeProto &n);
  llvm::Error split(const onnx::NodeProto &n);

private:
  // Types and values.
  mlir::Type elementOf(Kind k) {
    return k == Kind::Float  ? mlir::Type(b.getF32Type())
           : k == Kind::Bool ? mlir::Type(b.getI1Type())
                             : mlir::Type(b.getI32Type());
  }
  mlir::RankedTensorType type(llvm::ArrayRef<int64_t> shape,
                              Kind k = Kind::Float) {
    return mlir::RankedTensorType::get(shape, elementOf(k));
  }
  static llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
    return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
  }
  static Kind kindOf(mlir::Value v) {
    mlir::Type e =
        mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType();
    return mlir::isa<mlir::FloatType>(e) ? Kind::Float
           : e.isInteger(1)              ? Kind::Bool
                                         : Kind::Int;
  }

  /// The SSA value of `name`, materializing a constant as nn.constant.
  llvm::Expected<mlir::Value> value(const std::string &name);
  mlir::Value materialize(const HostTensor &t);
  bool isConst(const std::string &name) const {
    auto it = vals.find(name);
    return it != vals.end() && it->second.constant.has_value();
  }
  const HostTensor &constant(const std::string &name) {
    return *vals[name].constant;
  }
  std::vector<int64_t> shape(const std::string &name) {
    Val &v = vals[name];
    if (v.view)
      return *v.view;
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
  llvm::Error importNode(const onnx::NodeProto &node);
  llvm::Error nodeError(const onnx::NodeProto &node,
                        const llvm::Twine &message) {
    return fail(describe(node) + ": " + message);
  }
  std::string describe(const onnx::NodeProto &node) {
    std::string name = node.name().empty()
                           ? (node.output_size() ? node.output(0) : "?")
                           : node.name();
    return "node '" + runtime::printable(name) + "' (" +
           runtime::printable(node.op_type()) + ", opset " +
           std::to_string(opset) + ")";
  }
  const onnx::AttributeProto *attr(const onnx::NodeProto &n,
                                   llvm::StringRef name) {
    for (const auto &a : n.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t attrInt(const onnx::NodeProto &n, llvm::StringRef name,
                  int64_t dflt) {
    const auto *a = attr(n, name);
    return a ? a->i() : dflt;
  }
  double attrFloat(const onnx::NodeProto &n, llvm::StringRef name,
                   double dflt) {
    const auto *a = attr(n, name);
    return a ? a->f() : dflt;
  }
  std::string attrString(const onnx::NodeProto &n, llvm::StringRef name,
                         llvm::StringRef dflt) {
    const auto *a = attr(n, name);
    return a ? a->s() : dflt.str();
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
  /// Whether every input the node names is known at compile time.
  bool allInputsConst(const onnx::NodeProto &n) {
    for (int k = 0; k < n.input_size(); ++k)
      if (!n.input(k).empty() && !isConst(n.input(k)))
        return false;
    return true;
  }
  /// Integer values of input k, which must be known at compile time.
  llvm::Expected<std::vector<int64_t>> constInts(const onnx::NodeProto &n,
                                                 int k, llvm::StringRef what) {
    if (!isConst(n.input(k)))
      return nodeError(n, "input '" + what +
                              "' must be known at compile time (shardc "
                              "compiles static shapes); bind it with --bind");
    return constant(n.input(k)).ints();
  }
  /// Reserves `elements` of the compile-time evaluation budget
  /// (opts.foldBudgetBytes, 8 bytes an element) for node n's result before
  /// it is computed; an error naming the node if they do not fit.
  llvm::Error reserveFold(const onnx::NodeProto &n, int64_t elements);
  llvm::Error normalizeAxis(const onnx::NodeProto &n, int64_t &axis,
                            int64_t rank) {
    // A scalar has no axis: rank 0 admits none (ONNX's range [-r, r-1]).
    if (axis < -rank || axis >= rank)
      return nodeError(n, "axis " + llvm::Twine(axis) +
                              " is out of range for rank " + llvm::Twine(rank));
    if (axis < 0)
      axis += rank;
    return llvm::Error::success();
  }

  void setConst(const std::string &name, HostTensor t) {
    vals[name] = Val{std::move(t), mlir::Value()};
  }
  void setValue(const std::string &name, mlir::Value v) {
    vals[name] = Val{std::nullopt, v};
  }

  // Emission helpers.
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape) {
    if (shapeOf(x) == shape)
      return x;
    return nn::ReshapeOp::create(b, loc, type(shape), x);
  }
  mlir::Value floatScalar(double v) {
    return nn::FillOp::create(b, loc, type({}), b.getF64FloatAttr(v));
  }
  llvm::Expected<mlir::Value> floatValue(const onnx::NodeProto &n, int k) {
    llvm::Expected<mlir::Value> v = value(n.input(k));
    if (!v)
      return v.takeError();
    if (kindOf(*v) != Kind::Float)
      return nodeError(n, "input '" + n.input(k) +
                              "' is an integer tensor computed at runtime; "
                              "the " + target().name + " target computes in " +
                              target().computeTypeList() + " only");
    return v;
  }

  /// The target compiled for.
  const TargetDescription &target() const {
    return opts.target ? *opts.target : defaultTarget();
  }

  llvm::Error addInputs();
  llvm::Error addInitializers();
  llvm::Error untie(const std::string &source, const std::string &name);
  llvm::Expected<mlir::Value> trainingLoss();

  mlir::OpBuilder b;
  const onnx::ModelProto &model;
  const onnx::GraphProto &graph;
  ExternalDataPolicy baseDir;
  const ImportOptions &opts;
  mlir::Location loc;
  int64_t opset = 0;
  std::unique_ptr<mlir::Block> block = std::make_unique<mlir::Block>();
  llvm::SmallVector<mlir::DictionaryAttr> argAttrs;
  std::map<std::string, Val> vals;
  std::vector<InitialWeight> weights;
  std::set<std::string> paramNames, frozen;
  /// Parameters made from Identity nodes of parameters (see untie).
  std::set<std::string> untied;
  /// Trained-looking initializers that are the transpose of a parameter:
  /// copy -> parameter (see addInitializers).
  std::map<std::string, std::string> tiedTransposes;
  /// IsNaN of a runtime tensor: output -> input. The target has no bool
  /// tensors, so it is computed only as Where(IsNaN(x), 0, x).
  std::map<std::string, std::string> isNanOf;
  /// Bytes of node results evaluated at compile time so far (reserveFold).
  int64_t foldedBytes = 0;
  /// The rule that chose the trained initializers, for the summary.
  std::string trainedBy;
  /// An input whose static batch in the file (the size) --micro-batch
  /// replaced: constants computed from the exported batch (Reshape
  /// targets) then no longer fit, which batchAdvice explains.
  std::optional<std::pair<std::string, int64_t>> rebatched;
  /// For an error on shapes: the file's static batch, the one asked for and
  /// the advice to export with a dynamic batch axis; empty when the batch
  /// is the file's.
  std::string batchAdvice() const;
  /// Training: the token-id input and its [B, T] shape.
  std::string tokenInput;
  llvm::SmallVector<int64_t> tokenShape;
};

} // namespace shardc::onnx_import

#endif // SHARDC_FRONTENDS_ONNX_GRAPHIMPORTER_H
