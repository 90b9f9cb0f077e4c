//===- Backward.cpp ------------------------------------------------------===//
//
// convert-nn-to-rt: the gradient ops nn-autodiff writes.
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

LogicalResult lowerSumTo(StepBuilder &s, nn::SumToOp st) {
  Location loc = st.getLoc();
  // ints: [rank, out numel, in dims..., out strides aligned to the
  // input's dims (0 where summed)].
  ArrayRef<int64_t> in = tensorType(st.getInput()).getShape();
  ArrayRef<int64_t> out = tensorType(st.getResult()).getShape();
  int64_t rank = in.size();
  SmallVector<int64_t> ints = {rank, product(out), /*y_f32=*/0};
  ints.append(in.begin(), in.end());
  ints.append(broadcastStrides(out, rank));
  Value x = s.buf(st.getInput());
  s.kernel(loc, K::sum_to, {x, s.define(st.getResult())}, ints);
  return success();
}

LogicalResult lowerEmbeddingGrad(StepBuilder &s, nn::EmbeddingGradOp eg) {
  Location loc = eg.getLoc();
  RankedTensorType table = tensorType(eg.getResult());
  Value ids = s.buf(eg.getIds()), dy = s.buf(eg.getGrad());
  s.kernel(loc, K::embedding_grad, {ids, dy, s.define(eg.getResult())},
           {tensorType(eg.getIds()).getNumElements(), table.getDimSize(0),
            table.getDimSize(1)});
  return success();
}

LogicalResult lowerLayerNormGrad(StepBuilder &s, nn::LayerNormGradOp g) {
  Location loc = g.getLoc();
  int64_t c = tensorType(g.getInput()).getShape().back();
  int64_t m = tensorType(g.getInput()).getNumElements() / c;
  Value x = s.buf(g.getInput()), w = s.buf(g.getWeight()),
        dy = s.buf(g.getGrad());
  Value dx = s.define(g.getInputGrad()), dw = s.define(g.getWeightGrad()),
        db = s.define(g.getBiasGrad());
  s.kernel(loc, K::layer_norm_grad, {x, w, dy, dx, dw, db},
           {m, c, /*wb_f32=*/0, /*add_dr=*/0},
           {g.getEps().convertToDouble()});
  return success();
}

LogicalResult lowerRMSNormGrad(StepBuilder &s, nn::RMSNormGradOp g) {
  Location loc = g.getLoc();
  int64_t c = tensorType(g.getInput()).getShape().back();
  int64_t m = tensorType(g.getInput()).getNumElements() / c;
  Value x = s.buf(g.getInput()), w = s.buf(g.getWeight()),
        dy = s.buf(g.getGrad());
  Value dx = s.define(g.getInputGrad()), dw = s.define(g.getWeightGrad());
  s.kernel(loc, K::rms_norm_grad, {x, w, dy, dx, dw}, {m, c, /*add_dr=*/0},
           {g.getEps().convertToDouble()});
  return success();
}

LogicalResult lowerGeluGrad(StepBuilder &s, nn::GeluGradOp g) {
  Location loc = g.getLoc();
  Value x = s.buf(g.getInput()), dy = s.buf(g.getGrad());
  s.kernel(loc, K::gelu_grad, {x, dy, s.define(g.getResult())},
           {tensorType(g.getInput()).getNumElements(),
            g.getApproximate() == "tanh" ? 1 : 0});
  return success();
}

LogicalResult lowerSiluGrad(StepBuilder &s, nn::SiluGradOp g) {
  Location loc = g.getLoc();
  Value x = s.buf(g.getInput()), dy = s.buf(g.getGrad());
  s.kernel(loc, K::silu_grad, {x, dy, s.define(g.getResult())},
           {tensorType(g.getInput()).getNumElements()});
  return success();
}

LogicalResult lowerSoftmaxGrad(StepBuilder &s, nn::SoftmaxGradOp g) {
  Location loc = g.getLoc();
  ArrayRef<int64_t> shape = tensorType(g.getOutput()).getShape();
  int64_t axis = g.getAxis();
  if (axis < 0)
    axis += shape.size();
  Value y = s.buf(g.getOutput()), dy = s.buf(g.getGrad());
  s.kernel(loc, K::softmax_grad, {y, dy, s.define(g.getResult())},
           {product(shape.take_front(axis)), shape[axis],
            product(shape.drop_front(axis + 1))});
  return success();
}

LogicalResult lowerAttentionGrad(StepBuilder &s, nn::AttentionGradOp g) {
  Location loc = g.getLoc();
  ArrayRef<int64_t> q = tensorType(g.getQuery()).getShape();
  ArrayRef<int64_t> k = tensorType(g.getKey()).getShape();
  Value qb = s.buf(g.getQuery()), kb = s.buf(g.getKey()),
        vb = s.buf(g.getValue()), dy = s.buf(g.getGrad());
  Value dq = s.define(g.getQueryGrad()), dk = s.define(g.getKeyGrad()),
        dv = s.define(g.getValueGrad());
  s.kernel(loc, K::attention_grad, {qb, kb, vb, dy, dq, dk, dv},
           {q[0], q[1], k[1], q[2], k[2], q[3], g.getCausal() ? 1 : 0,
            abi::kAttentionBHTD, 0, 0, 0, 0},
           {g.getScale().convertToDouble()});
  return success();
}

LogicalResult lowerSliceGrad(StepBuilder &s, nn::SliceGradOp g) {
  Location loc = g.getLoc();
  ArrayRef<int64_t> full = tensorType(g.getResult()).getShape();
  int64_t dim = g.getDim(), start = g.getStart();
  int64_t size = tensorType(g.getGrad()).getDimSize(dim);
  Value dy = s.buf(g.getGrad());
  s.kernel(loc, K::slice_grad, {dy, s.define(g.getResult())},
           {product(full.take_front(dim)), full[dim], start, size,
            product(full.drop_front(dim + 1))});
  return success();
}

LogicalResult lowerCrossEntropyGrad(StepBuilder &s, nn::CrossEntropyGradOp g) {
  Location loc = g.getLoc();
  ArrayRef<int64_t> shape = tensorType(g.getLogits()).getShape();
  Value logits = s.buf(g.getLogits()), targets = s.buf(g.getTargets()),
        dloss = s.buf(g.getGrad());
  s.kernel(
      loc, K::cross_entropy_grad,
      {logits, targets, dloss, s.define(g.getResult())},
      {product(shape.drop_back()), shape.back(), int64_t(g.getIgnoreIndex())});
  return success();
}

LogicalResult lowerVocabCrossEntropyGrad(StepBuilder &s,
                                         nn::VocabCrossEntropyGradOp g) {
  Location loc = g.getLoc();
  ArrayRef<int64_t> shape = tensorType(g.getLogits()).getShape();
  ArrayRef<int64_t> rows = shape.drop_back();
  int64_t tp = tensorType(g.getStats()).getDimSize(0) / rows[0];
  Value logits = s.buf(g.getLogits()), targets = s.buf(g.getTargets()),
        stats = s.buf(g.getStats()), r = s.buf(g.getTpIndex()),
        dloss = s.buf(g.getGrad());
  s.kernel(loc, K::vocab_ce_grad,
           {logits, targets, stats, r, dloss, s.define(g.getResult())},
           {product(rows), shape.back(), rows.back(), tp,
            int64_t(g.getIgnoreIndex())});
  return success();
}

LogicalResult lowerCrossEntropyWithGrad(StepBuilder &s,
                                        nn::CrossEntropyWithGradOp ce) {
  Location loc = ce.getLoc();
  ArrayRef<int64_t> shape = tensorType(ce.getLogits()).getShape();
  Value logits = s.buf(ce.getLogits()), targets = s.buf(ce.getTargets());
  Value loss = s.define(ce.getLoss());
  // The gradient takes the logits' bytes when nothing reads them
  // after this op (the kernels read a row's logits before writing
  // its gradient): the [tokens, vocab] pair costs one buffer.
  Value grad;
  if (s.onlyReadUpTo(logits, ce) && !s.output(ce.getLogitsGrad())) {
    grad = logits;
    s.alias(ce.getLogitsGrad(), grad);
  } else {
    grad = s.define(ce.getLogitsGrad());
  }
  s.kernel(
      loc, K::cross_entropy_with_grad, {logits, targets, loss, grad},
      {product(shape.drop_back()), shape.back(), int64_t(ce.getIgnoreIndex())});
  return success();
}

LogicalResult lowerLeakyReluGrad(StepBuilder &s, nn::LeakyReluGradOp g) {
  Location loc = g.getLoc();
  Value x = s.buf(g.getInput()), dy = s.buf(g.getGrad());
  s.kernel(loc, K::leaky_relu_grad, {x, dy, s.define(g.getResult())},
           {tensorType(g.getInput()).getNumElements()},
           {g.getAlpha().convertToDouble()});
  return success();
}

LogicalResult lowerUnaryGrad(StepBuilder &s, nn::UnaryGradOp g) {
  Location loc = g.getLoc();
  Value x = s.buf(g.getInput()), y = s.buf(g.getOutput()),
        dy = s.buf(g.getGrad());
  s.kernel(loc, K::unary_grad, {x, y, dy, s.define(g.getResult())},
           {tensorType(g.getResult()).getNumElements(),
            abi::unaryFnCode(g.getFn().str())});
  return success();
}

} // namespace

void addBackwardLowerings(LoweringTable &table) {
  table.addTyped(lowerSumTo);
  table.addTyped(lowerEmbeddingGrad);
  table.addTyped(lowerLayerNormGrad);
  table.addTyped(lowerRMSNormGrad);
  table.addTyped(lowerGeluGrad);
  table.addTyped(lowerSiluGrad);
  table.addTyped(lowerSoftmaxGrad);
  table.addTyped(lowerAttentionGrad);
  table.addTyped(lowerSliceGrad);
  table.add(lowerCrossEntropyGrad);
  table.add(lowerCrossEntropyWithGrad);
  table.add(lowerVocabCrossEntropyGrad);
  table.add(lowerLeakyReluGrad);
  table.add(lowerUnaryGrad);
}

} // namespace shardc::lower
