//===- Forward.cpp
//-----------------------------------------------------------===//
//
// convert-nn-to-rt: the forward ops of the nn dialect (andconstants, casts).
//
// One lowering function per op (passes/conversion/NNToRt/StepBuilder.h): each reads the
// op's operand shapes and writes rt.kernel calls whose arguments follow
// runtime/abi/kernels.def.
//
//===----------------------------------------------------------------------===//
#include "passes/conversion/NNToRt/StepBuilder.h"

using namespace mlir;
using namespace shardc;

namespace shardc::lower {
namespace {

LogicalResult lowerEmbedding(StepBuilder &s, nn::EmbeddingOp e) {
  Location loc = e.getLoc();
  RankedTensorType table = tensorType(e.getTable());
  int64_t n = tensorType(e.getIds()).getNumElements();
  Value ids = s.buf(e.getIds()), t = s.buf(e.getTable());
  s.kernel(loc, K::embedding, {ids, t, s.define(e.getResult())},
           {n, table.getDimSize(0), table.getDimSize(1)});
  return success();
}

LogicalResult lowerLinear(StepBuilder &s, nn::LinearOp l) {
  Location loc = l.getLoc();
  RankedTensorType x = tensorType(l.getInput());
  int64_t k = x.getShape().back();
  int64_t n = tensorType(l.getResult()).getShape().back();
  int64_t m = x.getNumElements() / k;
  if (StringAttr recipe = l.getFloat8Attr()) {
    // x [M,K]; W [N,K], or [K,N] in, out.
    bool in_out = l.getWeightInOut();
    Float8Operand a{l.getInput(), m, k, false, l.getFloat8Grad() == "lhs"};
    Float8Operand w{l.getWeight(), in_out ? k : n, in_out ? n : k, in_out,
                    false, /*isWeight=*/true};
    return lowerFloat8Gemm(s, l, recipe, a, w, l.getBias(), l.getResult());
  }
  SmallVector<Value> bufs = {s.buf(l.getInput()), s.buf(l.getWeight())};
  if (l.getBias())
    bufs.push_back(s.buf(l.getBias()));
  bufs.push_back(s.define(l.getResult()));
  s.kernel(loc, K::linear, bufs,
           {m, k, n, l.getWeightInOut() ? 1 : 0, l.getBias() ? 1 : 0});
  return success();
}

LogicalResult lowerAdd(StepBuilder &s, nn::AddOp a) {
  s.broadcastKernel(a, K::add);
  return success();
}

LogicalResult lowerMul(StepBuilder &s, nn::MulOp m) {
  s.broadcastKernel(m, K::mul);
  return success();
}

LogicalResult lowerLayerNorm(StepBuilder &s, nn::LayerNormOp ln) {
  Location loc = ln.getLoc();
  int64_t c = tensorType(ln.getInput()).getShape().back();
  int64_t m = tensorType(ln.getInput()).getNumElements() / c;
  SmallVector<Value> bufs = {s.buf(ln.getInput()), s.buf(ln.getWeight())};
  if (ln.getBias())
    bufs.push_back(s.buf(ln.getBias()));
  bufs.push_back(s.define(ln.getResult()));
  s.kernel(loc, K::layer_norm, bufs, {m, c, ln.getBias() ? 1 : 0},
           {ln.getEps().convertToDouble()});
  return success();
}

LogicalResult lowerRMSNorm(StepBuilder &s, nn::RMSNormOp rn) {
  Location loc = rn.getLoc();
  int64_t c = tensorType(rn.getInput()).getShape().back();
  int64_t m = tensorType(rn.getInput()).getNumElements() / c;
  Value x = s.buf(rn.getInput()), w = s.buf(rn.getWeight());
  s.kernel(loc, K::rms_norm, {x, w, s.define(rn.getResult())}, {m, c},
           {rn.getEps().convertToDouble()});
  return success();
}

LogicalResult lowerGelu(StepBuilder &s, nn::GeluOp g) {
  Location loc = g.getLoc();
  Value x = s.buf(g.getInput());
  s.kernel(loc, K::gelu, {x, s.define(g.getResult())},
           {tensorType(g.getInput()).getNumElements(),
            g.getApproximate() == "tanh" ? 1 : 0});
  return success();
}

LogicalResult lowerSilu(StepBuilder &s, nn::SiluOp op) {
  Location loc = op.getLoc();
  Value x = s.buf(op.getInput());
  s.kernel(loc, K::silu, {x, s.define(op.getResult())},
           {tensorType(op.getInput()).getNumElements()});
  return success();
}

LogicalResult lowerSoftmax(StepBuilder &s, nn::SoftmaxOp op) {
  Location loc = op.getLoc();
  ArrayRef<int64_t> shape = tensorType(op.getInput()).getShape();
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += shape.size();
  Value x = s.buf(op.getInput());
  s.kernel(loc, K::softmax, {x, s.define(op.getResult())},
           {product(shape.take_front(axis)), shape[axis],
            product(shape.drop_front(axis + 1))});
  return success();
}

LogicalResult lowerRotary(StepBuilder &s, nn::RotaryOp r) {
  Location loc = r.getLoc();
  SmallVector<int64_t> ints(tensorType(r.getInput()).getShape());
  ints.push_back(r.getInverse() ? 1 : 0);
  ints.push_back(abi::kAttentionBHTD); // layout (the dtype goes before it)
  ints.push_back(0);                   // amax (rt-fuse-amax)
  Value x = s.buf(r.getInput());
  s.kernel(loc, K::rotary, {x, s.define(r.getResult())}, ints,
           {r.getTheta().convertToDouble()});
  return success();
}

LogicalResult lowerRotaryTable(StepBuilder &s, nn::RotaryTableOp r) {
  Location loc = r.getLoc();
  SmallVector<int64_t> ints(tensorType(r.getInput()).getShape());
  ints.push_back(r.getInverse() ? 1 : 0);
  ints.push_back(abi::kAttentionBHTD); // layout (the dtype goes before it)
  Value x = s.buf(r.getInput()), c = s.buf(r.getCos()), sn = s.buf(r.getSin());
  s.kernel(loc, K::rotary_table, {x, c, sn, s.define(r.getResult())}, ints, {});
  return success();
}

LogicalResult lowerAttention(StepBuilder &s, nn::AttentionOp a) {
  Location loc = a.getLoc();
  ArrayRef<int64_t> q = tensorType(a.getQuery()).getShape();
  ArrayRef<int64_t> k = tensorType(a.getKey()).getShape();
  Value qb = s.buf(a.getQuery()), kb = s.buf(a.getKey()),
        vb = s.buf(a.getValue());
  s.kernel(loc, K::attention, {qb, kb, vb, s.define(a.getResult())},
           {q[0], q[1], k[1], q[2], k[2], q[3], a.getCausal() ? 1 : 0,
            abi::kAttentionBHTD, 0, 0, 0, 0},
           {a.getScaleOrDefault()});
  return success();
}

LogicalResult lowerReshape(StepBuilder &s, nn::ReshapeOp r) {
  Location loc = r.getLoc();
  // Row-major reshapes are free: the result aliases the input, unless
  // the result is a function output, which needs its own bytes.
  Value out = s.output(r.getResult());
  if (!out) {
    s.alias(r.getResult(), s.buf(r.getInput()));
    return success();
  }
  Value x = s.buf(r.getInput());
  s.kernel(loc, K::copy, {x, s.define(r.getResult())},
           {byteSize(r.getInput())});
  return success();
}

LogicalResult lowerTranspose(StepBuilder &s, nn::TransposeOp t) {
  Location loc = t.getLoc();
  ArrayRef<int64_t> shape = tensorType(t.getInput()).getShape();
  SmallVector<int64_t> ints = {int64_t(shape.size())};
  ints.append(shape.begin(), shape.end());
  ints.append(t.getPermutation().begin(), t.getPermutation().end());
  Value x = s.buf(t.getInput());
  s.kernel(loc, K::transpose, {x, s.define(t.getResult())}, ints);
  return success();
}

LogicalResult lowerSlice(StepBuilder &s, nn::SliceOp op) {
  Location loc = op.getLoc();
  ArrayRef<int64_t> in = tensorType(op.getInput()).getShape();
  int64_t dim = op.getDim(), start = op.getStart();
  int64_t size = tensorType(op.getResult()).getDimSize(dim);
  Value x = s.buf(op.getInput());
  // Leading rows of a row-major buffer (the unpadding of a padded
  // vocabulary) are its prefix: the result aliases the input, as a
  // reshape's does, unless it is a function output.
  if (start == 0 && product(in.take_front(dim)) == 1 &&
      !s.output(op.getResult())) {
    s.alias(op.getResult(), x);
    return success();
  }
  s.kernel(loc, K::slice, {x, s.define(op.getResult())},
           {product(in.take_front(dim)), in[dim], start, size,
            product(in.drop_front(dim + 1))});
  return success();
}

LogicalResult lowerCrossEntropy(StepBuilder &s, nn::CrossEntropyOp ce) {
  Location loc = ce.getLoc();
  ArrayRef<int64_t> shape = tensorType(ce.getLogits()).getShape();
  Value logits = s.buf(ce.getLogits()), targets = s.buf(ce.getTargets());
  s.kernel(
      loc, K::cross_entropy, {logits, targets, s.define(ce.getResult())},
      {product(shape.drop_back()), shape.back(), int64_t(ce.getIgnoreIndex())});
  return success();
}

LogicalResult lowerVocabPart(StepBuilder &s, nn::VocabPartOp p) {
  Location loc = p.getLoc();
  Value ids = s.buf(p.getIds()), r = s.buf(p.getTpIndex());
  s.kernel(loc, K::vocab_part,
           {ids, r, s.define(p.getLocal()), s.define(p.getMask())},
           {tensorType(p.getIds()).getNumElements(), int64_t(p.getRows())});
  return success();
}

LogicalResult lowerVocabStats(StepBuilder &s, nn::VocabStatsOp st) {
  Location loc = st.getLoc();
  ArrayRef<int64_t> shape = tensorType(st.getLogits()).getShape();
  Value logits = s.buf(st.getLogits()), targets = s.buf(st.getTargets()),
        r = s.buf(st.getTpIndex());
  s.kernel(loc, K::vocab_ce_stats,
           {logits, targets, r, s.define(st.getStats())},
           {product(shape.drop_back()), shape.back()});
  return success();
}

LogicalResult lowerVocabCrossEntropy(StepBuilder &s,
                                     nn::VocabCrossEntropyOp ce) {
  Location loc = ce.getLoc();
  ArrayRef<int64_t> rows = tensorType(ce.getTargets()).getShape();
  int64_t tp = tensorType(ce.getStats()).getDimSize(0) / rows[0];
  Value targets = s.buf(ce.getTargets()), stats = s.buf(ce.getStats()),
        r = s.buf(ce.getTpIndex());
  s.kernel(loc, K::vocab_ce, {targets, stats, r, s.define(ce.getResult())},
           {product(rows), rows.back(), tp, int64_t(ce.getIgnoreIndex())});
  return success();
}

LogicalResult lowerFill(StepBuilder &s, nn::FillOp fill) {
  Location loc = fill.getLoc();
  s.kernel(loc, K::fill, {s.define(fill.getResult())},
           {tensorType(fill.getResult()).getNumElements()},
           {fill.getValue().convertToDouble()});
  return success();
}

LogicalResult lowerMatmul(StepBuilder &s, nn::MatmulOp mm) {
  Location loc = mm.getLoc();
  RankedTensorType a = tensorType(mm.getLhs());
  int64_t m = a.getDimSize(mm.getTransposeA() ? 1 : 0);
  int64_t k = a.getDimSize(mm.getTransposeA() ? 0 : 1);
  int64_t n = tensorType(mm.getResult()).getDimSize(1);
  if (StringAttr recipe = mm.getFloat8Attr()) {
    // op(a) [M,K], op(b) [K,N]: a stored [M,K] or [K,M]; b [K,N] or [N,K].
    bool ta = mm.getTransposeA(), tb = mm.getTransposeB();
    Float8Operand a{mm.getLhs(), ta ? k : m, ta ? m : k, ta,
                    mm.getFloat8Grad() == "lhs"};
    Float8Operand b{mm.getRhs(), tb ? n : k, tb ? k : n, !tb,
                    mm.getFloat8Grad() == "rhs"};
    return lowerFloat8Gemm(s, mm, recipe, a, b, Value(), mm.getResult());
  }
  Value l = s.buf(mm.getLhs()), r = s.buf(mm.getRhs());
  s.kernel(loc, K::matmul, {l, r, s.define(mm.getResult())},
           {m, k, n, mm.getTransposeA() ? 1 : 0, mm.getTransposeB() ? 1 : 0,
            /*y_f32=*/0});
  return success();
}

LogicalResult lowerConstant(StepBuilder &s, nn::ConstantOp c) {
  Location loc = c.getLoc();
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense)
    return c.emitOpError("holds a non-dense value, which has no "
                         "lowering to the rt dialect");
  Value data = rt::ConstantOp::create(s.b, loc, dense);
  if (Value out = s.output(c.getResult())) {
    s.alias(c.getResult(), out);
    s.kernel(loc, K::copy, {data, out}, {byteSize(c.getResult())});
  } else {
    s.alias(c.getResult(), data);
  }
  return success();
}

LogicalResult lowerCast(StepBuilder &s, nn::CastOp c) {
  Location loc = c.getLoc();
  Type from = tensorType(c.getInput()).getElementType();
  Type to = tensorType(c.getResult()).getElementType();
  if (from == to) {
    s.alias(c.getResult(), s.buf(c.getInput()));
    return success();
  }
  Value x = s.buf(c.getInput());
  s.kernel(loc, K::cast, {x, s.define(c.getResult())},
           {tensorType(c.getInput()).getNumElements(), rt::dtypeCode(from),
            rt::dtypeCode(to)});
  return success();
}

} // namespace

void addForwardLowerings(LoweringTable &table) {
  table.addTyped(lowerEmbedding);
  table.addTyped(lowerLinear);
  table.addTyped(lowerAdd);
  table.addTyped(lowerMul);
  table.addTyped(lowerLayerNorm);
  table.addTyped(lowerRMSNorm);
  table.addTyped(lowerGelu);
  table.addTyped(lowerSilu);
  table.addTyped(lowerSoftmax);
  table.addTyped(lowerRotary);
  table.addTyped(lowerRotaryTable);
  table.addTyped(lowerAttention);
  table.addTyped(lowerReshape);
  table.addTyped(lowerTranspose);
  table.addTyped(lowerSlice);
  table.add(lowerCrossEntropy);
  table.add(lowerVocabPart);
  table.add(lowerVocabStats);
  table.add(lowerVocabCrossEntropy);
  table.addTyped(lowerFill);
  table.addTyped(lowerMatmul);
  table.add(lowerConstant);
  table.add(lowerCast);
}

} // namespace shardc::lower
