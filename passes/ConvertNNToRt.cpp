//===- ConvertNNToRt.cpp - nn forward graph to an rt step function --------===//
//
// A direct, in-order lowering: the model function has one block of nn ops on
// value-semantic tensors; each tensor gets a buffer (a region view for
// parameters, inputs and outputs, an rt.alloc otherwise) and each op becomes
// rt.kernel calls whose integer/float arguments follow runtime/kernels.h.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "target/TargetDescription.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace shardc {
#define GEN_PASS_DEF_CONVERTNNTORT
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;
using K = shardc::abi::KernelId;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

int64_t elementBytes(Type t) { return (t.getIntOrFloatBitWidth() + 7) / 8; }

/// Element strides of `operand` read at each index of a broadcast result of
/// rank `rank` (0 where the operand is broadcast).
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> shape, int64_t rank) {
  SmallVector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (int64_t i = rank - 1, j = int64_t(shape.size()) - 1; j >= 0; --i, --j) {
    strides[i] = shape[j] == 1 ? 0 : stride;
    stride *= shape[j];
  }
  return strides;
}

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

/// Lowers one model function into the body of a step function.
class StepBuilder {
public:
  StepBuilder(OpBuilder &builder, Value ctx, const TargetDescription &target)
      : b(builder), ctx(ctx), target(target) {}

  /// Binds a tensor to an existing buffer (parameter, input or output view).
  void bind(Value tensor, Value buffer) { buffers[tensor] = buffer; }
  void reserveOutput(Value tensor, Value buffer) { outputs[tensor] = buffer; }

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

  /// Whether `buffer` is a transient allocation whose tensors (it and the
  /// views that alias it: reshapes, leading-row slices) are used by no op
  /// after `op`.
  bool onlyReadUpTo(Value buffer, Operation *op) {
    if (!buffer || !buffer.getDefiningOp<rt::AllocOp>())
      return false;
    for (auto &[tensor, bound] : buffers) {
      if (bound != buffer)
        continue;
      for (Operation *user : tensor.getUsers())
        if (user != op &&
            (user->getBlock() != op->getBlock() || !user->isBeforeInBlock(op)))
          return false;
    }
    return true;
  }

  /// A compute kernel on stream 0; it first waits for the collectives that
  /// produced any of its buffers.
  void kernel(Location loc, K id, ValueRange bufs, ArrayRef<int64_t> ints,
              ArrayRef<double> floats = {}) {
    for (Value buf : bufs) {
      auto it = pending.find(buf);
      if (it == pending.end())
        continue;
      rt::EventWaitOp::create(b, loc, ctx, it->second, /*stream=*/0);
      pending.erase(it);
    }
    rt::KernelOp::create(b, loc, ctx, abi::kernelInfo(id).name, bufs, ints,
                         floats, abi::kComputeStream);
  }

  /// Orders a collective after the compute that produced its input (event
  /// on the compute stream waited on the communication stream).
  void beforeCollective(Location loc) {
    int64_t ready = nextEvent++;
    rt::EventRecordOp::create(b, loc, ctx, ready, abi::kComputeStream);
    rt::EventWaitOp::create(b, loc, ctx, ready, abi::kCommStream);
  }

  /// After a collective: its output is pending until a compute kernel
  /// waits for it.
  void afterCollective(Location loc, Value out) {
    int64_t done = nextEvent++;
    rt::EventRecordOp::create(b, loc, ctx, done, abi::kCommStream);
    pending[out] = done;
  }

  static IntegerAttr groupOf(Operation *op) {
    return op->getAttrOfType<IntegerAttr>(attrs::kGroup);
  }

  /// `result` = all-gather of `input` on dim 0 over grid axis `axis`
  /// (within groups of `subgroup` ranks if non-zero).
  void gather(Operation *op, Value input, Value result, int64_t axis,
              int64_t subgroup) {
    Location loc = op->getLoc();
    Value in = buf(input);
    Value out = define(result);
    beforeCollective(loc);
    rt::AllGatherOp::create(
        b, loc, ctx, ValueRange{in}, ValueRange{out}, ValueRange{}, axis,
        tensorType(input).getElementType(),
        ArrayRef<int64_t>{tensorType(input).getNumElements()}, subgroup,
        groupOf(op), abi::kCommStream);
    afterCollective(loc, out);
  }

  /// The single grid axis of a collective (shard axis or replicate axis).
  static FailureOr<int64_t> axisOf(Operation *op, ArrayRef<int16_t> axes) {
    if (axes.size() != 1)
      return op->emitOpError("must act on exactly one grid axis");
    return int64_t(axes[0]);
  }

  LogicalResult checkSupported(Operation *op);
  void lowerBroadcast(Operation *op, K name,
                      ArrayRef<int64_t> extra = {});

  OpBuilder &b;
  Value ctx;
  const TargetDescription &target;
  DenseMap<Value, int64_t> pending;
  int64_t nextEvent = 0;
  DenseMap<Value, Value> buffers;
  DenseMap<Value, Value> outputs;
};

LogicalResult StepBuilder::checkSupported(Operation *op) {
  // Conversions and collectives move any float type; kernels compute in
  // the target's.
  if (isa<nn::CastOp, nn::ConstantOp, nn::EqualOp, shard::AllGatherOp, shard::ReduceScatterOp,
          shard::AllReduceOp, fsdp::ReshardOp, fsdp::GatherGroupOp>(op))
    return success();
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    Type elt = cast<RankedTensorType>(t).getElementType();
    int64_t code = rt::dtypeCode(elt);
    if (isa<FloatType>(elt) && !target.computes(code))
      return op->emitOpError("on ")
             << elt << " is not supported by the " << target.name
             << " target, which computes in " << target.computeTypeList();
    if (isa<IntegerType>(elt) && !target.indexes(code) && !isa<nn::FillOp>(op))
      return op->emitOpError("on ")
             << elt << " is not supported by the " << target.name
             << " target (integer types: " << target.indexTypeList() << ")";
  }
  return success();
}

/// An elementwise op over the NumPy broadcast of its operands (add, where,
/// broadcast_to, ...): one kernel reading each operand with its strides.
void StepBuilder::lowerBroadcast(Operation *op, K name,
                                 ArrayRef<int64_t> extra) {
  Value res = op->getResult(0);
  ArrayRef<int64_t> out = tensorType(res).getShape();
  int64_t rank = out.size();
  // ints: [rank, out dims..., strides of each operand...] where a broadcast
  // dimension has stride 0.
  SmallVector<int64_t> ints = {rank};
  ints.append(out.begin(), out.end());
  SmallVector<Value> bufs;
  for (Value in : op->getOperands()) {
    ints.append(broadcastStrides(tensorType(in).getShape(), rank));
    bufs.push_back(buf(in));
  }
  bufs.push_back(define(res));
  ints.append(extra.begin(), extra.end());
  kernel(op->getLoc(), name, bufs, ints);
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
        kernel(loc, K::embedding, {ids, t, define(e.getResult())},
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
        kernel(loc, K::linear, bufs,
               {m, k, n, l.getWeightInOut() ? 1 : 0, l.getBias() ? 1 : 0});
        return success();
      })
      .Case([&](nn::AddOp a) {
        lowerBroadcast(a, K::add);
        return success();
      })
      .Case([&](nn::MulOp m) {
        lowerBroadcast(m, K::mul);
        return success();
      })
      .Case([&](nn::LayerNormOp ln) {
        int64_t c = tensorType(ln.getInput()).getShape().back();
        int64_t m = tensorType(ln.getInput()).getNumElements() / c;
        SmallVector<Value> bufs = {buf(ln.getInput()), buf(ln.getWeight())};
        if (ln.getBias())
          bufs.push_back(buf(ln.getBias()));
        bufs.push_back(define(ln.getResult()));
        kernel(loc, K::layer_norm, bufs, {m, c, ln.getBias() ? 1 : 0},
               {ln.getEps().convertToDouble()});
        return success();
      })
      .Case([&](nn::RMSNormOp rn) {
        int64_t c = tensorType(rn.getInput()).getShape().back();
        int64_t m = tensorType(rn.getInput()).getNumElements() / c;
        Value x = buf(rn.getInput()), w = buf(rn.getWeight());
        kernel(loc, K::rms_norm, {x, w, define(rn.getResult())}, {m, c},
               {rn.getEps().convertToDouble()});
        return success();
      })
      .Case([&](nn::GeluOp g) {
        Value x = buf(g.getInput());
        kernel(loc, K::gelu, {x, define(g.getResult())},
               {tensorType(g.getInput()).getNumElements(),
                g.getApproximate() == "tanh" ? 1 : 0});
        return success();
      })
      .Case([&](nn::SiluOp s) {
        Value x = buf(s.getInput());
        kernel(loc, K::silu, {x, define(s.getResult())},
               {tensorType(s.getInput()).getNumElements()});
        return success();
      })
      .Case([&](nn::SoftmaxOp s) {
        ArrayRef<int64_t> shape = tensorType(s.getInput()).getShape();
        int64_t axis = s.getAxis();
        if (axis < 0)
          axis += shape.size();
        Value x = buf(s.getInput());
        kernel(loc, K::softmax, {x, define(s.getResult())},
               {product(shape.take_front(axis)), shape[axis],
                product(shape.drop_front(axis + 1))});
        return success();
      })
      .Case([&](nn::RotaryOp r) {
        SmallVector<int64_t> ints(tensorType(r.getInput()).getShape());
        ints.push_back(r.getInverse() ? 1 : 0);
        Value x = buf(r.getInput());
        kernel(loc, K::rotary, {x, define(r.getResult())}, ints,
               {r.getTheta().convertToDouble()});
        return success();
      })
      .Case([&](nn::RotaryTableOp r) {
        SmallVector<int64_t> ints(tensorType(r.getInput()).getShape());
        ints.push_back(r.getInverse() ? 1 : 0);
        Value x = buf(r.getInput()), c = buf(r.getCos()), s = buf(r.getSin());
        kernel(loc, K::rotary_table, {x, c, s, define(r.getResult())}, ints,
               {});
        return success();
      })
      .Case([&](nn::AttentionOp a) {
        ArrayRef<int64_t> q = tensorType(a.getQuery()).getShape();
        ArrayRef<int64_t> k = tensorType(a.getKey()).getShape();
        Value qb = buf(a.getQuery()), kb = buf(a.getKey()),
              vb = buf(a.getValue());
        kernel(loc, K::attention, {qb, kb, vb, define(a.getResult())},
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
        kernel(loc, K::copy, {x, define(r.getResult())}, {byteSize(r.getInput())});
        return success();
      })
      .Case([&](nn::TransposeOp t) {
        ArrayRef<int64_t> shape = tensorType(t.getInput()).getShape();
        SmallVector<int64_t> ints = {int64_t(shape.size())};
        ints.append(shape.begin(), shape.end());
        ints.append(t.getPermutation().begin(), t.getPermutation().end());
        Value x = buf(t.getInput());
        kernel(loc, K::transpose, {x, define(t.getResult())}, ints);
        return success();
      })
      .Case([&](nn::SliceOp s) {
        ArrayRef<int64_t> in = tensorType(s.getInput()).getShape();
        int64_t dim = s.getDim(), start = s.getStart();
        int64_t size = tensorType(s.getResult()).getDimSize(dim);
        Value x = buf(s.getInput());
        // Leading rows of a row-major buffer (the unpadding of a padded
        // vocabulary) are its prefix: the result aliases the input, as a
        // reshape's does, unless it is a function output.
        if (start == 0 && product(in.take_front(dim)) == 1 &&
            !outputs.lookup(s.getResult())) {
          buffers[s.getResult()] = x;
          return success();
        }
        kernel(loc, K::slice, {x, define(s.getResult())},
               {product(in.take_front(dim)), in[dim], start, size,
                product(in.drop_front(dim + 1))});
        return success();
      })
      .Case([&](nn::CrossEntropyOp ce) {
        ArrayRef<int64_t> shape = tensorType(ce.getLogits()).getShape();
        Value logits = buf(ce.getLogits()), targets = buf(ce.getTargets());
        kernel(loc, K::cross_entropy, {logits, targets, define(ce.getResult())},
               {product(shape.drop_back()), shape.back(),
                int64_t(ce.getIgnoreIndex())});
        return success();
      })
      .Case([&](nn::FillOp fill) {
        kernel(loc, K::fill, {define(fill.getResult())},
               {tensorType(fill.getResult()).getNumElements()},
               {fill.getValue().convertToDouble()});
        return success();
      })
      .Case([&](nn::MatmulOp mm) {
        RankedTensorType a = tensorType(mm.getLhs());
        int64_t m = a.getDimSize(mm.getTransposeA() ? 1 : 0);
        int64_t k = a.getDimSize(mm.getTransposeA() ? 0 : 1);
        int64_t n = tensorType(mm.getResult()).getDimSize(1);
        Value l = buf(mm.getLhs()), r = buf(mm.getRhs());
        kernel(loc, K::matmul, {l, r, define(mm.getResult())},
               {m, k, n, mm.getTransposeA() ? 1 : 0, mm.getTransposeB() ? 1 : 0});
        return success();
      })
      .Case([&](nn::SumToOp st) {
        // ints: [rank, out numel, in dims..., out strides aligned to the
        // input's dims (0 where summed)].
        ArrayRef<int64_t> in = tensorType(st.getInput()).getShape();
        ArrayRef<int64_t> out = tensorType(st.getResult()).getShape();
        int64_t rank = in.size();
        SmallVector<int64_t> ints = {rank, product(out)};
        ints.append(in.begin(), in.end());
        ints.append(broadcastStrides(out, rank));
        Value x = buf(st.getInput());
        kernel(loc, K::sum_to, {x, define(st.getResult())}, ints);
        return success();
      })
      .Case([&](nn::EmbeddingGradOp eg) {
        RankedTensorType table = tensorType(eg.getResult());
        Value ids = buf(eg.getIds()), dy = buf(eg.getGrad());
        kernel(loc, K::embedding_grad, {ids, dy, define(eg.getResult())},
               {tensorType(eg.getIds()).getNumElements(), table.getDimSize(0),
                table.getDimSize(1)});
        return success();
      })
      .Case([&](nn::LayerNormGradOp g) {
        int64_t c = tensorType(g.getInput()).getShape().back();
        int64_t m = tensorType(g.getInput()).getNumElements() / c;
        Value x = buf(g.getInput()), w = buf(g.getWeight()), dy = buf(g.getGrad());
        Value dx = define(g.getInputGrad()), dw = define(g.getWeightGrad()),
              db = define(g.getBiasGrad());
        kernel(loc, K::layer_norm_grad, {x, w, dy, dx, dw, db}, {m, c},
               {g.getEps().convertToDouble()});
        return success();
      })
      .Case([&](nn::RMSNormGradOp g) {
        int64_t c = tensorType(g.getInput()).getShape().back();
        int64_t m = tensorType(g.getInput()).getNumElements() / c;
        Value x = buf(g.getInput()), w = buf(g.getWeight()), dy = buf(g.getGrad());
        Value dx = define(g.getInputGrad()), dw = define(g.getWeightGrad());
        kernel(loc, K::rms_norm_grad, {x, w, dy, dx, dw}, {m, c},
               {g.getEps().convertToDouble()});
        return success();
      })
      .Case([&](nn::GeluGradOp g) {
        Value x = buf(g.getInput()), dy = buf(g.getGrad());
        kernel(loc, K::gelu_grad, {x, dy, define(g.getResult())},
               {tensorType(g.getInput()).getNumElements(),
                g.getApproximate() == "tanh" ? 1 : 0});
        return success();
      })
      .Case([&](nn::LeakyReluOp r) {
        Value x = buf(r.getInput());
        kernel(loc, K::leaky_relu, {x, define(r.getResult())},
               {tensorType(r.getInput()).getNumElements()},
               {r.getAlpha().convertToDouble()});
        return success();
      })
      .Case([&](nn::LeakyReluGradOp g) {
        Value x = buf(g.getInput()), dy = buf(g.getGrad());
        kernel(loc, K::leaky_relu_grad, {x, dy, define(g.getResult())},
               {tensorType(g.getInput()).getNumElements()},
               {g.getAlpha().convertToDouble()});
        return success();
      })
      .Case([&](nn::SiluGradOp g) {
        Value x = buf(g.getInput()), dy = buf(g.getGrad());
        kernel(loc, K::silu_grad, {x, dy, define(g.getResult())},
               {tensorType(g.getInput()).getNumElements()});
        return success();
      })
      .Case([&](nn::SoftmaxGradOp g) {
        ArrayRef<int64_t> shape = tensorType(g.getOutput()).getShape();
        int64_t axis = g.getAxis();
        if (axis < 0)
          axis += shape.size();
        Value y = buf(g.getOutput()), dy = buf(g.getGrad());
        kernel(loc, K::softmax_grad, {y, dy, define(g.getResult())},
               {product(shape.take_front(axis)), shape[axis],
                product(shape.drop_front(axis + 1))});
        return success();
      })
      .Case([&](nn::AttentionGradOp g) {
        ArrayRef<int64_t> q = tensorType(g.getQuery()).getShape();
        ArrayRef<int64_t> k = tensorType(g.getKey()).getShape();
        Value qb = buf(g.getQuery()), kb = buf(g.getKey()), vb = buf(g.getValue()),
              dy = buf(g.getGrad());
        Value dq = define(g.getQueryGrad()), dk = define(g.getKeyGrad()),
              dv = define(g.getValueGrad());
        kernel(loc, K::attention_grad, {qb, kb, vb, dy, dq, dk, dv},
               {q[0], q[1], k[1], q[2], k[2], q[3], g.getCausal() ? 1 : 0},
               {g.getScale().convertToDouble()});
        return success();
      })
      .Case([&](nn::SliceGradOp g) {
        ArrayRef<int64_t> full = tensorType(g.getResult()).getShape();
        int64_t dim = g.getDim(), start = g.getStart();
        int64_t size = tensorType(g.getGrad()).getDimSize(dim);
        Value dy = buf(g.getGrad());
        kernel(loc, K::slice_grad, {dy, define(g.getResult())},
               {product(full.take_front(dim)), full[dim], start, size,
                product(full.drop_front(dim + 1))});
        return success();
      })
      .Case([&](nn::CrossEntropyGradOp g) {
        ArrayRef<int64_t> shape = tensorType(g.getLogits()).getShape();
        Value logits = buf(g.getLogits()), targets = buf(g.getTargets()),
              dloss = buf(g.getGrad());
        kernel(loc, K::cross_entropy_grad,
               {logits, targets, dloss, define(g.getResult())},
               {product(shape.drop_back()), shape.back(),
                int64_t(g.getIgnoreIndex())});
        return success();
      })
      .Case([&](nn::CrossEntropyWithGradOp ce) {
        ArrayRef<int64_t> shape = tensorType(ce.getLogits()).getShape();
        Value logits = buf(ce.getLogits()), targets = buf(ce.getTargets());
        Value loss = define(ce.getLoss());
        // The gradient takes the logits' bytes when nothing reads them
        // after this op (the kernels read a row's logits before writing
        // its gradient): the [tokens, vocab] pair costs one buffer.
        Value grad;
        if (onlyReadUpTo(logits, ce) && !outputs.lookup(ce.getLogitsGrad())) {
          grad = logits;
          buffers[ce.getLogitsGrad()] = grad;
        } else {
          grad = define(ce.getLogitsGrad());
        }
        kernel(loc, K::cross_entropy_with_grad, {logits, targets, loss, grad},
               {product(shape.drop_back()), shape.back(),
                int64_t(ce.getIgnoreIndex())});
        return success();
      })
      .Case([&](nn::AccumulateOp a) {
        Value acc = buf(a.getAcc()), g = buf(a.getGrad()),
              ctl = buf(a.getControl());
        kernel(loc, K::accumulate, {acc, g, ctl, define(a.getResult())},
               {tensorType(a.getAcc()).getNumElements()});
        return success();
      })
      .Case([&](nn::SquaredNormOp sq) {
        Value x = buf(sq.getInput());
        kernel(loc, K::squared_norm, {x, define(sq.getResult())},
               {tensorType(sq.getInput()).getNumElements()});
        return success();
      })
      .Case([&](nn::ClipCoefOp c) {
        Value sq = buf(c.getSquaredNorm()), mx = buf(c.getMaxNorm());
        kernel(loc, K::clip_coef, {sq, mx, define(c.getResult())}, {});
        return success();
      })
      .Case([&](nn::AdamWOp a) {
        RankedTensorType t = tensorType(a.getParam());
        SmallVector<Value> bufs = {buf(a.getParam()), buf(a.getGrad()),
                                   buf(a.getExpAvg()), buf(a.getExpAvgSq()),
                                   buf(a.getHyper()), buf(a.getGradScale())};
        bufs.push_back(define(a.getNewParam()));
        bufs.push_back(define(a.getNewExpAvg()));
        bufs.push_back(define(a.getNewExpAvgSq()));
        kernel(loc, K::adamw, bufs, {t.getNumElements(), t.getRank() == 1 ? 1 : 0});
        return success();
      })
      .Case([&](nn::SGDOp a) {
        RankedTensorType t = tensorType(a.getParam());
        SmallVector<Value> bufs = {buf(a.getParam()), buf(a.getGrad()),
                                   buf(a.getMomentumBuffer()), buf(a.getHyper()),
                                   buf(a.getGradScale())};
        bufs.push_back(define(a.getNewParam()));
        bufs.push_back(define(a.getNewMomentumBuffer()));
        kernel(loc, K::sgd, bufs, {t.getNumElements(), t.getRank() == 1 ? 1 : 0});
        return success();
      })
      .Case([&](shard::AllGatherOp g) -> LogicalResult {
        FailureOr<int64_t> axis = axisOf(g, g.getGridAxes());
        if (failed(axis))
          return failure();
        if (g.getGatherAxis().getZExtValue() != 0)
          return g.emitOpError("gathers on dim 0 only on this backend");
        gather(g, g.getInput(), g.getResult(), *axis, /*subgroup=*/0);
        return success();
      })
      .Case([&](shard::ReduceScatterOp r) -> LogicalResult {
        FailureOr<int64_t> axis = axisOf(r, r.getGridAxes());
        if (failed(axis))
          return failure();
        if (r.getReduction() != shard::ReductionKind::Sum ||
            r.getScatterAxis().getZExtValue() != 0)
          return r.emitOpError("sums and scatters on dim 0 only on this backend");
        Value in = buf(r.getInput());
        // A block of scratch for the ring's partial sums, live only here.
        Value scratch = rt::AllocOp::create(b, loc, byteSize(r.getResult()));
        Value out = define(r.getResult());
        beforeCollective(loc);
        rt::ReduceScatterOp::create(
            b, loc, ctx, in, out, scratch, *axis,
            tensorType(r.getResult()).getElementType(),
            tensorType(r.getResult()).getNumElements(), groupOf(r),
            abi::kCommStream);
        afterCollective(loc, out);
        return success();
      })
      .Case([&](shard::AllReduceOp r) -> LogicalResult {
        FailureOr<int64_t> axis = axisOf(r, r.getGridAxes());
        if (failed(axis))
          return failure();
        if (r.getReduction() != shard::ReductionKind::Sum)
          return r.emitOpError("sums only on this backend");
        Value in = buf(r.getInput());
        Value out = define(r.getResult());
        beforeCollective(loc);
        rt::AllReduceOp::create(
            b, loc, ctx, in, out, *axis,
            tensorType(r.getResult()).getElementType(),
            tensorType(r.getResult()).getNumElements(), groupOf(r),
            abi::kCommStream);
        afterCollective(loc, out);
        return success();
      })
      .Case([&](nn::CastOp c) {
        Type from = tensorType(c.getInput()).getElementType();
        Type to = tensorType(c.getResult()).getElementType();
        if (from == to) {
          buffers[c.getResult()] = buf(c.getInput());
          return success();
        }
        Value x = buf(c.getInput());
        kernel(loc, K::cast, {x, define(c.getResult())},
               {tensorType(c.getInput()).getNumElements(), rt::dtypeCode(from),
                rt::dtypeCode(to)});
        return success();
      })
      .Case([&](fsdp::ReshardOp r) -> LogicalResult {
        FailureOr<int64_t> axis = axisOf(r, r.getGridAxes());
        if (failed(axis))
          return failure();
        Value in = buf(r.getInput());
        kernel(loc, K::reshard_chunk, {in, define(r.getResult())},
               {byteSize(r.getResult()), int64_t(r.getGroupSize()), *axis});
        return success();
      })
      .Case([&](fsdp::GatherGroupOp g) -> LogicalResult {
        FailureOr<int64_t> axis = axisOf(g, g.getGridAxes());
        if (failed(axis))
          return failure();
        gather(g, g.getInput(), g.getResult(), *axis, g.getGroupSize());
        return success();
      })
      .Case([&](fsdp::SyncGradOp s) {
        // Identity in forward: the result aliases the input.
        buffers[s.getResult()] = buf(s.getInput());
        return success();
      })
      .Case([&](nn::ConstantOp c) -> LogicalResult {
        auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
        if (!dense)
          return c.emitOpError("holds a non-dense value, which has no "
                               "lowering to the rt dialect");
        Value data = rt::ConstantOp::create(b, loc, dense);
        if (Value out = outputs.lookup(c.getResult())) {
          buffers[c.getResult()] = out;
          kernel(loc, K::copy, {data, out}, {byteSize(c.getResult())});
        } else {
          buffers[c.getResult()] = data;
        }
        return success();
      })
      .Case([&](nn::SubOp op) {
        lowerBroadcast(op, K::sub);
        return success();
      })
      .Case([&](nn::DivOp op) {
        lowerBroadcast(op, K::div);
        return success();
      })
      .Case([&](nn::PowOp op) {
        lowerBroadcast(op, K::pow);
        return success();
      })
      .Case([&](nn::WhereOp op) {
        lowerBroadcast(op, K::where);
        return success();
      })
      .Case([&](nn::EqualOp op) {
        lowerBroadcast(op, K::equal,
                    {rt::dtypeCode(tensorType(op.getLhs()).getElementType())});
        return success();
      })
      .Case<nn::SqrtOp, nn::ErfOp, nn::TanhOp, nn::SigmoidOp, nn::NegOp,
            nn::ReciprocalOp, nn::ExpOp, nn::LogOp, nn::ReluOp,
            nn::SoftplusOp, nn::NanToZeroOp, nn::RoundF16Op,
            nn::RoundBf16Op>([&](Operation *op) {
        Value x = buf(op->getOperand(0));
        kernel(loc, K::unary, {x, define(op->getResult(0))},
               {tensorType(op->getResult(0)).getNumElements(),
                abi::unaryFnCode(op->getName().stripDialect())});
        return success();
      })
      .Case([&](nn::UnaryGradOp g) {
        Value x = buf(g.getInput()), y = buf(g.getOutput()), dy = buf(g.getGrad());
        kernel(loc, K::unary_grad, {x, y, dy, define(g.getResult())},
               {tensorType(g.getResult()).getNumElements(),
                abi::unaryFnCode(g.getFn().str())});
        return success();
      })
      .Case([&](nn::BroadcastToOp op) {
        lowerBroadcast(op, K::broadcast);
        return success();
      })
      .Case([&](nn::BatchMatmulOp mm) {
        // ints: [M, K, N, trans_a, trans_b, R, batch dims[R], a matrix
        // strides[R], b matrix strides[R]] (0 where broadcast).
        ArrayRef<int64_t> a = tensorType(mm.getLhs()).getShape();
        ArrayRef<int64_t> c = tensorType(mm.getResult()).getShape();
        int64_t m = c[c.size() - 2], n = c[c.size() - 1];
        int64_t k = a[a.size() - (mm.getTransposeA() ? 2 : 1)];
        ArrayRef<int64_t> batch = c.drop_back(2);
        int64_t rank = batch.size();
        SmallVector<int64_t> ints = {m, k, n, mm.getTransposeA() ? 1 : 0,
                                     mm.getTransposeB() ? 1 : 0, rank};
        ints.append(batch.begin(), batch.end());
        for (Value v : {mm.getLhs(), mm.getRhs()})
          ints.append(broadcastStrides(tensorType(v).getShape().drop_back(2), rank));
        Value l = buf(mm.getLhs()), r = buf(mm.getRhs());
        kernel(loc, K::batch_matmul, {l, r, define(mm.getResult())}, ints);
        return success();
      })
      .Case([&](nn::ConcatOp cat) {
        ArrayRef<int64_t> out = tensorType(cat.getResult()).getShape();
        int64_t dim = cat.getDim(), start = 0;
        Value y = define(cat.getResult());
        for (Value in : cat.getInputs()) {
          int64_t size = tensorType(in).getDimSize(dim);
          kernel(loc, K::concat_part, {buf(in), y},
                 {product(out.take_front(dim)), size, out[dim], start,
                  product(out.drop_front(dim + 1))});
          start += size;
        }
        return success();
      })
      .Case([&](nn::TriluOp t) {
        ArrayRef<int64_t> shape = tensorType(t.getInput()).getShape();
        int64_t rows = shape[shape.size() - 2], cols = shape.back();
        Value x = buf(t.getInput());
        kernel(loc, K::trilu, {x, define(t.getResult())},
               {product(shape.drop_back(2)), rows, cols, t.getUpper() ? 1 : 0,
                t.getK()});
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError("has no lowering to the rt dialect");
      });
}

/// One region of runtime memory (params, state, io): named slots at aligned
/// offsets, shared by every entry point of the module.
class Region {
public:
  explicit Region(StringRef kind) : kind(kind.str()) {}

  /// The offset of slot `name` of `type`, placing it on first use.
  FailureOr<int64_t> place(Operation *where, StringRef name, Type type,
                           NamedAttrList extra = {}) {
    auto it = index.find(name);
    if (it != index.end()) {
      Slot &slot = slots[it->second];
      if (slot.type != type)
        return where->emitError() << kind << " slot '" << name << "' has type "
                                  << type << " here but " << slot.type
                                  << " elsewhere";
      return slot.offset;
    }
    int64_t size = byteSize(type);
    if (size < 0 || size > abi::kMaxTensorBytes)
      return where->emitError() << kind << " slot '" << name << "' of " << type
                                << " is over the limit of 2^40 bytes (1 TiB)";
    if (bytes + alignTo(size) > abi::kMaxRegionBytes)
      return where->emitError() << "the " << kind
                                << " region exceeds 2^60 bytes with slot '" << name << "'";
    index[name] = slots.size();
    slots.push_back({name.str(), type, bytes, extra});
    int64_t offset = bytes;
    bytes += alignTo(size);
    return offset;
  }

  ArrayAttr manifest(OpBuilder &b) const {
    SmallVector<Attribute> entries;
    for (const Slot &s : slots) {
      auto t = cast<RankedTensorType>(s.type);
      NamedAttrList entry(s.extra);
      entry.set("name", b.getStringAttr(s.name));
      entry.set("dtype", b.getStringAttr(abi::dtypeName(rt::dtypeCode(t.getElementType()))));
      entry.set("shape", b.getI64ArrayAttr(t.getShape()));
      entry.set("offset", b.getI64IntegerAttr(s.offset));
      entry.set("bytes", b.getI64IntegerAttr(byteSize(s.type)));
      entries.push_back(entry.getDictionary(b.getContext()));
    }
    return b.getArrayAttr(entries);
  }

  int64_t size() const { return bytes; }

private:
  /// Bytes of a tensor of `type`, or -1 if that overflows int64.
  static int64_t byteSize(Type type) {
    auto t = cast<RankedTensorType>(type);
    return abi::checkedSize(t.getShape(), elementBytes(t.getElementType()));
  }
  struct Slot {
    std::string name;
    Type type;
    int64_t offset;
    NamedAttrList extra;
  };
  std::string kind;
  std::vector<Slot> slots;
  llvm::StringMap<size_t> index;
  int64_t bytes = 0;
};

/// The manifest's "file_dtype" of an io slot: the element type its file
/// holds when it is not the one computed in (attrs::kFileDtype).
NamedAttrList fileDtype(DictionaryAttr dict) {
  NamedAttrList extra;
  if (dict)
    if (auto dtype = dict.getAs<StringAttr>(attrs::kFileDtype))
      extra.set("file_dtype", dtype);
  return extra;
}

struct ConvertNNToRtPass
    : public shardc::impl::ConvertNNToRtBase<ConvertNNToRtPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    targetDesc = lookupTarget(target);
    if (!targetDesc) {
      module.emitError("unknown target '")
          << target << "' (this shardc has: " << targetNames() << ")";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> entries;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal() && fn.isPublic())
        entries.push_back(fn);
    if (entries.empty()) {
      module.emitError("no model function to lower");
      return signalPassFailure();
    }
    SmallVector<Attribute> names;
    for (func::FuncOp fn : entries) {
      if (failed(lowerFunction(fn)))
        return signalPassFailure();
      names.push_back(StringAttr::get(&getContext(), fn.getName()));
    }
    for (func::FuncOp fn : entries)
      fn.erase();
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      grid.erase();

    OpBuilder b(&getContext());
    NamedAttrList manifest;
    manifest.set("format", b.getI64IntegerAttr(abi::kFormatVersion));
    manifest.set("target", b.getStringAttr(targetDesc->name));
    if (auto model = module->getAttrOfType<DictionaryAttr>(attrs::kModel))
      manifest.set("model", model);
    manifest.set("entries", b.getArrayAttr(names));
    auto mesh = module->getAttrOfType<DenseI64ArrayAttr>(attrs::kMesh);
    manifest.set("mesh", mesh ? mesh : b.getDenseI64ArrayAttr({1, 1}));
    manifest.set("params", params.manifest(b));
    manifest.set("state", state.manifest(b));
    manifest.set("io", io.manifest(b));
    manifest.set("param_bytes", b.getI64IntegerAttr(params.size()));
    manifest.set("state_bytes", b.getI64IntegerAttr(state.size()));
    manifest.set("io_bytes", b.getI64IntegerAttr(io.size()));
    module->setAttr(attrs::kManifest, manifest.getDictionary(&getContext()));
  }

  /// Lowers `fn` into `shardc_<name>(ctx, params, state, io, arena)`.
  LogicalResult lowerFunction(func::FuncOp fn) {
    if (!fn.getBody().hasOneBlock())
      return fn.emitError("a model function must have a single block");
    MLIRContext *ctx = &getContext();
    OpBuilder b(fn);
    Type bufferType = rt::BufferType::get(ctx);
    auto stepType = b.getFunctionType({rt::ContextType::get(ctx), bufferType,
                                       bufferType, bufferType, bufferType},
                                      {});
    auto step = func::FuncOp::create(
        b, fn.getLoc(), (attrs::kEntryPrefix + fn.getName()).str(), stepType);
    Block *entry = step.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value regionBase[] = {entry->getArgument(1), entry->getArgument(2),
                          entry->getArgument(3)};
    StepBuilder lowering(b, entry->getArgument(0), *targetDesc);

    Block &body = fn.getBody().front();
    SmallVector<Value> argViews;
    for (BlockArgument arg : body.getArguments()) {
      unsigned i = arg.getArgNumber();
      if (!isa<RankedTensorType>(arg.getType()))
        return fn.emitError("argument #") << i << " is not a ranked tensor";
      FailureOr<int64_t> offset = failure();
      int region = 0;
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, attrs::kParam)) {
        NamedAttrList init;
        auto kind = fn.getArgAttrOfType<StringAttr>(i, attrs::kInit);
        init.set("init", kind ? kind : b.getStringAttr("normal"));
        if (auto std = fn.getArgAttrOfType<FloatAttr>(i, attrs::kInitStd))
          init.set("std", std);
        if (auto group = fn.getArgAttrOfType<IntegerAttr>(i, attrs::kGroup))
          init.set("group", group);
        if (auto shape = fn.getArgAttrOfType<DenseI64ArrayAttr>(i, attrs::kGlobalShape))
          init.set("global_shape", shape);
        offset = params.place(fn, name, arg.getType(), init);
      } else if (auto name = fn.getArgAttrOfType<StringAttr>(i, attrs::kState)) {
        region = 1;
        offset = state.place(fn, name, arg.getType());
      } else if (auto name = fn.getArgAttrOfType<StringAttr>(i, attrs::kInput)) {
        region = 2;
        offset = io.place(fn, name, arg.getType(), fileDtype(fn.getArgAttrDict(i)));
      } else {
        return fn.emitError("argument #")
               << i << " is neither a parameter ('" << attrs::kParam
               << "'), a state ('" << attrs::kState << "') nor an input ('"
               << attrs::kInput << "')";
      }
      if (failed(offset))
        return failure();
      Value view = rt::ViewOp::create(b, arg.getLoc(), regionBase[region], *offset);
      lowering.bind(arg, view);
      argViews.push_back(view);
    }

    // Results are written where they belong before the body is lowered: a
    // named io slot, or in place over the argument they update.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (isa<BlockArgument>(v))
        return fn.emitError("result #") << i << " returns an argument directly";
      if (auto updated = fn.getResultAttrOfType<IntegerAttr>(i, attrs::kUpdates)) {
        int64_t a = updated.getInt();
        if (a < 0 || a >= int64_t(argViews.size()) ||
            body.getArgument(a).getType() != v.getType())
          return fn.emitError("result #") << i << " updates argument #" << a
                                          << " of another type or none";
        // In place is safe only if nothing reads the old value afterwards.
        Operation *writer = v.getDefiningOp();
        for (Operation *user : body.getArgument(a).getUsers())
          if (user != writer && writer->isBeforeInBlock(user))
            return user->emitError("reads argument #")
                   << a << " after result #" << i << " overwrote it in place";
        lowering.reserveOutput(v, argViews[a]);
        continue;
      }
      auto name = fn.getResultAttrOfType<StringAttr>(i, attrs::kOutput);
      std::string outName = name ? name.str() : "output" + std::to_string(i);
      FailureOr<int64_t> offset =
          io.place(fn, outName, v.getType(), fileDtype(fn.getResultAttrDict(i)));
      if (failed(offset))
        return failure();
      lowering.reserveOutput(v, rt::ViewOp::create(b, v.getLoc(), regionBase[2], *offset));
    }

    for (Operation &op : body.without_terminator())
      if (failed(lowering.lower(&op)))
        return failure();
    func::ReturnOp::create(b, fn.getLoc());
    return success();
  }

  Region params{"parameter"}, state{"state"}, io{"io"};
  const TargetDescription *targetDesc = nullptr;
};

} // namespace
