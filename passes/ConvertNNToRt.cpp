//===- ConvertNNToRt.cpp - nn forward graph to an rt step function --------===//
//
// A direct, in-order lowering: the model function has one block of nn ops on
// value-semantic tensors; each tensor gets a buffer (a region view for
// parameters, inputs and outputs, an rt.alloc otherwise) and each op becomes
// rt.kernel calls whose integer/float arguments follow runtime/kernels.h.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace shardc {
#define GEN_PASS_DEF_CONVERTNNTORT
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

int64_t elementBytes(Type t) { return (t.getIntOrFloatBitWidth() + 7) / 8; }

int64_t byteSize(Value v) {
  RankedTensorType t = tensorType(v);
  return t.getNumElements() * elementBytes(t.getElementType());
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

std::string dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isBF16())
    return "bf16";
  if (t.isF16())
    return "f16";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(64))
    return "i64";
  return "unknown";
}

/// Lowers one model function into the body of a step function.
class StepBuilder {
public:
  StepBuilder(OpBuilder &builder, Value ctx, Value params, Value io)
      : b(builder), ctx(ctx), paramsBase(params), ioBase(io) {}

  /// Binds a tensor to an existing buffer (parameter, input or output view).
  void bind(Value tensor, Value buffer) { buffers[tensor] = buffer; }
  void reserveOutput(Value tensor, Value buffer) { outputs[tensor] = buffer; }
  Value lookup(Value tensor) const { return buffers.lookup(tensor); }

  LogicalResult lower(Operation *op);

private:
  Value buf(Value tensor) { return buffers.lookup(tensor); }

  /// The buffer an op writes its result to: the reserved output view if the
  /// result is returned, a fresh transient allocation otherwise.
  Value define(Value result) {
    Value out = outputs.lookup(result);
    if (!out)
      out = rt::AllocOp::create(b, result.getLoc(), byteSize(result));
    buffers[result] = out;
    return out;
  }

  void kernel(Location loc, StringRef name, ValueRange bufs,
              ArrayRef<int64_t> ints, ArrayRef<double> floats = {}) {
    rt::KernelOp::create(b, loc, ctx, name, bufs, ints, floats, /*stream=*/0);
  }

  LogicalResult checkSupported(Operation *op);
  void lowerBinary(Operation *op, StringRef name);

  OpBuilder &b;
  Value ctx, paramsBase, ioBase;
  DenseMap<Value, Value> buffers;
  DenseMap<Value, Value> outputs;
};

LogicalResult StepBuilder::checkSupported(Operation *op) {
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    Type elt = cast<RankedTensorType>(t).getElementType();
    if (isa<FloatType>(elt) && !elt.isF32())
      return op->emitOpError("on ")
             << elt << " is not supported by the CPU backend yet (f32 only)";
    if (isa<IntegerType>(elt) && !elt.isInteger(32))
      return op->emitOpError("on ")
             << elt << " ids is not supported by the CPU backend (i32 only)";
  }
  return success();
}

void StepBuilder::lowerBinary(Operation *op, StringRef name) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1),
        res = op->getResult(0);
  ArrayRef<int64_t> out = tensorType(res).getShape();
  int64_t rank = out.size();
  // ints: [rank, out dims..., lhs strides..., rhs strides...] where a
  // broadcast dimension has stride 0.
  SmallVector<int64_t> ints = {rank};
  ints.append(out.begin(), out.end());
  for (Value in : {lhs, rhs}) {
    ArrayRef<int64_t> shape = tensorType(in).getShape();
    SmallVector<int64_t> strides(rank, 0);
    int64_t stride = 1;
    for (int64_t i = rank - 1, j = shape.size() - 1; j >= 0; --i, --j) {
      strides[i] = shape[j] == 1 ? 0 : stride;
      stride *= shape[j];
    }
    ints.append(strides);
  }
  Value l = buf(lhs), r = buf(rhs);
  kernel(op->getLoc(), name, {l, r, define(res)}, ints);
}

LogicalResult StepBuilder::lower(Operation *op) {
  if (failed(checkSupported(op)))
    return failure();
  Location loc = op->getLoc();
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](nn::EmbeddingOp e) {
        RankedTensorType table = tensorType(e.getTable());
        int64_t n = tensorType(e.getIds()).getNumElements();
        Value ids = buf(e.getIds()), t = buf(e.getTable());
        kernel(loc, "embedding", {ids, t, define(e.getResult())},
               {n, table.getDimSize(0), table.getDimSize(1)});
        return success();
      })
      .Case([&](nn::LinearOp l) {
        RankedTensorType x = tensorType(l.getInput());
        int64_t k = x.getShape().back();
        int64_t n = tensorType(l.getResult()).getShape().back();
        int64_t m = x.getNumElements() / k;
        SmallVector<Value> bufs = {buf(l.getInput()), buf(l.getWeight())};
        if (l.getBias())
          bufs.push_back(buf(l.getBias()));
        bufs.push_back(define(l.getResult()));
        kernel(loc, "linear", bufs,
               {m, k, n, l.getWeightInOut() ? 1 : 0, l.getBias() ? 1 : 0});
        return success();
      })
      .Case([&](nn::AddOp a) {
        lowerBinary(a, "add");
        return success();
      })
      .Case([&](nn::MulOp m) {
        lowerBinary(m, "mul");
        return success();
      })
      .Case([&](nn::LayerNormOp ln) {
        int64_t c = tensorType(ln.getInput()).getShape().back();
        int64_t m = tensorType(ln.getInput()).getNumElements() / c;
        SmallVector<Value> bufs = {buf(ln.getInput()), buf(ln.getWeight())};
        if (ln.getBias())
          bufs.push_back(buf(ln.getBias()));
        bufs.push_back(define(ln.getResult()));
        kernel(loc, "layer_norm", bufs, {m, c, ln.getBias() ? 1 : 0},
               {ln.getEps().convertToDouble()});
        return success();
      })
      .Case([&](nn::RMSNormOp rn) {
        int64_t c = tensorType(rn.getInput()).getShape().back();
        int64_t m = tensorType(rn.getInput()).getNumElements() / c;
        Value x = buf(rn.getInput()), w = buf(rn.getWeight());
        kernel(loc, "rms_norm", {x, w, define(rn.getResult())}, {m, c},
               {rn.getEps().convertToDouble()});
        return success();
      })
      .Case([&](nn::GeluOp g) {
        Value x = buf(g.getInput());
        kernel(loc, "gelu", {x, define(g.getResult())},
               {tensorType(g.getInput()).getNumElements(),
                g.getApproximate() == "tanh" ? 1 : 0});
        return success();
      })
      .Case([&](nn::SiluOp s) {
        Value x = buf(s.getInput());
        kernel(loc, "silu", {x, define(s.getResult())},
               {tensorType(s.getInput()).getNumElements()});
        return success();
      })
      .Case([&](nn::SoftmaxOp s) {
        ArrayRef<int64_t> shape = tensorType(s.getInput()).getShape();
        int64_t axis = s.getAxis();
        if (axis < 0)
          axis += shape.size();
        Value x = buf(s.getInput());
        kernel(loc, "softmax", {x, define(s.getResult())},
               {product(shape.take_front(axis)), shape[axis],
                product(shape.drop_front(axis + 1))});
        return success();
      })
      .Case([&](nn::RotaryOp r) {
        SmallVector<int64_t> ints(tensorType(r.getInput()).getShape());
        Value x = buf(r.getInput());
        kernel(loc, "rotary", {x, define(r.getResult())}, ints,
               {r.getTheta().convertToDouble()});
        return success();
      })
      .Case([&](nn::AttentionOp a) {
        ArrayRef<int64_t> q = tensorType(a.getQuery()).getShape();
        ArrayRef<int64_t> k = tensorType(a.getKey()).getShape();
        Value qb = buf(a.getQuery()), kb = buf(a.getKey()),
              vb = buf(a.getValue());
        kernel(loc, "attention", {qb, kb, vb, define(a.getResult())},
               {q[0], q[1], k[1], q[2], k[2], q[3], a.getCausal() ? 1 : 0},
               {a.getScaleOrDefault()});
        return success();
      })
      .Case([&](nn::ReshapeOp r) {
        // Row-major reshapes are free: the result aliases the input, unless
        // the result is a function output, which needs its own bytes.
        Value out = outputs.lookup(r.getResult());
        if (!out) {
          buffers[r.getResult()] = buf(r.getInput());
          return success();
        }
        Value x = buf(r.getInput());
        kernel(loc, "copy", {x, define(r.getResult())}, {byteSize(r.getInput())});
        return success();
      })
      .Case([&](nn::TransposeOp t) {
        ArrayRef<int64_t> shape = tensorType(t.getInput()).getShape();
        SmallVector<int64_t> ints = {int64_t(shape.size())};
        ints.append(shape.begin(), shape.end());
        ints.append(t.getPermutation().begin(), t.getPermutation().end());
        Value x = buf(t.getInput());
        kernel(loc, "transpose", {x, define(t.getResult())}, ints);
        return success();
      })
      .Case([&](nn::SliceOp s) {
        ArrayRef<int64_t> in = tensorType(s.getInput()).getShape();
        int64_t dim = s.getDim(), start = s.getStart();
        int64_t size = tensorType(s.getResult()).getDimSize(dim);
        Value x = buf(s.getInput());
        kernel(loc, "slice", {x, define(s.getResult())},
               {product(in.take_front(dim)), in[dim], start, size,
                product(in.drop_front(dim + 1))});
        return success();
      })
      .Case([&](nn::CrossEntropyOp ce) {
        ArrayRef<int64_t> shape = tensorType(ce.getLogits()).getShape();
        Value logits = buf(ce.getLogits()), targets = buf(ce.getTargets());
        kernel(loc, "cross_entropy", {logits, targets, define(ce.getResult())},
               {product(shape.drop_back()), shape.back(),
                int64_t(ce.getIgnoreIndex())});
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError("has no lowering to the rt dialect");
      });
}

/// The manifest entry of one tensor placed in a region.
NamedAttrList tensorEntry(OpBuilder &b, StringRef name, Value v,
                          int64_t offset) {
  RankedTensorType t = tensorType(v);
  NamedAttrList entry;
  entry.set("name", b.getStringAttr(name));
  entry.set("dtype", b.getStringAttr(dtypeName(t.getElementType())));
  entry.set("shape", b.getI64ArrayAttr(t.getShape()));
  entry.set("offset", b.getI64IntegerAttr(offset));
  entry.set("bytes", b.getI64IntegerAttr(byteSize(v)));
  return entry;
}

struct ConvertNNToRtPass
    : public shardc::impl::ConvertNNToRtBase<ConvertNNToRtPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(entryName);
    if (!fn) {
      module.emitError("no model function named '") << entryName << "'";
      return signalPassFailure();
    }
    if (failed(lowerFunction(module, fn)))
      return signalPassFailure();
    fn.erase();
  }

  LogicalResult lowerFunction(ModuleOp module, func::FuncOp fn) {
    if (!fn.getBody().hasOneBlock())
      return fn.emitError("the model function must have a single block");
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    b.setInsertionPoint(fn);
    Type bufferType = rt::BufferType::get(ctx);
    auto stepType = b.getFunctionType(
        {rt::ContextType::get(ctx), bufferType, bufferType, bufferType}, {});
    auto step = func::FuncOp::create(b, fn.getLoc(), attrs::kStepName, stepType);
    Block *entry = step.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value ctxArg = entry->getArgument(0), params = entry->getArgument(1),
          io = entry->getArgument(2);
    StepBuilder lowering(b, ctxArg, params, io);

    // Lay out parameters and inputs at aligned offsets of their regions.
    SmallVector<Attribute> paramEntries, inputEntries, outputEntries;
    int64_t paramBytes = 0, ioBytes = 0;
    Block &body = fn.getBody().front();
    for (BlockArgument arg : body.getArguments()) {
      unsigned i = arg.getArgNumber();
      if (!isa<RankedTensorType>(arg.getType()))
        return fn.emitError("argument #") << i << " is not a ranked tensor";
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, attrs::kParam)) {
        NamedAttrList entry = tensorEntry(b, name, arg, paramBytes);
        auto init = fn.getArgAttrOfType<StringAttr>(i, attrs::kInit);
        entry.set("init", init ? init : b.getStringAttr("normal"));
        if (auto std = fn.getArgAttrOfType<FloatAttr>(i, attrs::kInitStd))
          entry.set("std", std);
        paramEntries.push_back(entry.getDictionary(ctx));
        lowering.bind(arg, rt::ViewOp::create(b, arg.getLoc(), params, paramBytes));
        paramBytes += alignTo(byteSize(arg));
      } else if (auto name = fn.getArgAttrOfType<StringAttr>(i, attrs::kInput)) {
        inputEntries.push_back(tensorEntry(b, name, arg, ioBytes).getDictionary(ctx));
        lowering.bind(arg, rt::ViewOp::create(b, arg.getLoc(), io, ioBytes));
        ioBytes += alignTo(byteSize(arg));
      } else {
        return fn.emitError("argument #")
               << i << " is neither a parameter ('" << attrs::kParam
               << "') nor an input ('" << attrs::kInput << "')";
      }
    }

    // Outputs get their views in the io region before the body is lowered,
    // so that the ops producing them write there directly.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      std::string name = i == 0 ? "loss" : "output" + std::to_string(i);
      outputEntries.push_back(tensorEntry(b, name, v, ioBytes).getDictionary(ctx));
      Value view = rt::ViewOp::create(b, v.getLoc(), io, ioBytes);
      if (isa<BlockArgument>(v))
        return fn.emitError("returning an argument directly is not supported");
      lowering.reserveOutput(v, view);
      ioBytes += alignTo(byteSize(v));
    }

    for (Operation &op : body.without_terminator())
      if (failed(lowering.lower(&op)))
        return failure();
    func::ReturnOp::create(b, fn.getLoc());

    NamedAttrList manifest;
    manifest.set("format", b.getI64IntegerAttr(1));
    if (auto model = module->getAttrOfType<DictionaryAttr>(attrs::kModel))
      manifest.set("model", model);
    manifest.set("params", b.getArrayAttr(paramEntries));
    manifest.set("inputs", b.getArrayAttr(inputEntries));
    manifest.set("outputs", b.getArrayAttr(outputEntries));
    manifest.set("param_bytes", b.getI64IntegerAttr(paramBytes));
    manifest.set("io_bytes", b.getI64IntegerAttr(ioBytes));
    step->setAttr(attrs::kManifest, manifest.getDictionary(ctx));
    return success();
  }
};

} // namespace
