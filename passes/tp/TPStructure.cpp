//===- TPStructure.cpp - tp-partition's plan read off the graph -----------===//
//
// A model imported from ONNX has no Hugging Face names to plan by (the
// dynamo exporter names a Linear's transposed weight `val_110`). Its plan is
// read off the forward's ops instead, the same plan torchtitan's names give:
//
//   column-parallel: a projection whose result reaches attention's q, k or v
//     through its bias, reshapes, transposes, slices, rotary embeddings and
//     scalings
//     (its blocks: the slices of its features on the way, GPT-2's fused
//     c_attn by thirds); a projection whose result feeds a row-parallel one
//     through element-wise ops only (the MLP's up and gate), and the bias
//     added to its result;
//   row-parallel: a projection reading attention's result through reshapes
//     and transposes (the output projection), or reading element-wise ops of
//     column-parallel projections only (the MLP's down);
//   vocabulary-parallel: an embedding's table, and the projection whose
//     result is the loss's logits (the LM head);
//   everything else (norms, positions) replicated.
//
//===----------------------------------------------------------------------===//
#include "passes/tp/TPPartition.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::tp_partition;

namespace {

/// Ops that only move, scale or rotate features on the way from a
/// projection to attention.
bool isOnTheWayToAttention(Operation *op) {
  return isa<nn::ReshapeOp, nn::TransposeOp, nn::SliceOp, nn::RotaryOp,
             nn::RotaryTableOp, nn::MulOp, nn::CastOp>(op);
}

/// Element-wise ops of an MLP's activation (GELU, SiLU, the gate's product,
/// decomposed forms).
bool isElementwise(Operation *op) {
  return isa<nn::AddOp, nn::MulOp, nn::SubOp, nn::DivOp, nn::PowOp,
             nn::GeluOp, nn::SiluOp, nn::ReluOp, nn::LeakyReluOp, nn::TanhOp,
             nn::SigmoidOp, nn::ErfOp, nn::NegOp, nn::ExpOp, nn::SoftplusOp,
             nn::CastOp>(op);
}

/// Whether `v` (a projection's result) reaches an operand of attention.
bool reachesAttention(Value v, int depth = 0) {
  if (depth > 16)
    return false;
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<nn::AttentionOp>(user) && use.getOperandNumber() < 3)
      return true;
    // A scaling on the way: the other operand is a constant.
    if (auto mul = dyn_cast<nn::MulOp>(user)) {
      Value other = mul.getLhs() == v ? mul.getRhs() : mul.getLhs();
      if (!other.getDefiningOp<nn::ConstantOp>() &&
          !other.getDefiningOp<nn::FillOp>())
        continue;
    }
    // A bias the exporter adds after the projection (MatMul, then Add).
    if (auto add = dyn_cast<nn::AddOp>(user)) {
      Value other = add.getLhs() == v ? add.getRhs() : add.getLhs();
      if (!isa<BlockArgument>(other) || tensorType(other).getRank() != 1)
        continue;
    } else if (!isOnTheWayToAttention(user) || user->getNumResults() != 1) {
      continue;
    }
    if (reachesAttention(user->getResult(0), depth + 1))
      return true;
  }
  return false;
}

/// Counts the slices of `v`'s last dim that reach attention (GPT-2's q, k
/// and v out of c_attn): the column's blocks.
int64_t attentionBlocks(Value v) {
  SmallPtrSet<Operation *, 4> slices;
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Value x = work.pop_back_val();
    for (Operation *user : x.getUsers()) {
      if (auto sl = dyn_cast<nn::SliceOp>(user)) {
        if (int64_t(sl.getDim()) == tensorType(sl.getInput()).getRank() - 1 &&
            reachesAttention(sl.getResult()))
          slices.insert(user);
        continue;
      }
      if (isa<nn::ReshapeOp, nn::AddOp>(user))
        work.push_back(user->getResult(0));
    }
  }
  return slices.empty() ? 1 : int64_t(slices.size());
}

/// Whether `v` is attention's result, through reshapes and transposes.
bool fromAttention(Value v) {
  for (int depth = 0; depth < 16; ++depth) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return false;
    if (isa<nn::AttentionOp>(def))
      return true;
    if (!isa<nn::ReshapeOp, nn::TransposeOp>(def))
      return false;
    v = def->getOperand(0);
  }
  return false;
}

/// The projections whose results `v` is an element-wise function of (with
/// constants and parameters), or failure where it reads anything else.
LogicalResult activationLeaves(Value v, SmallVectorImpl<nn::LinearOp> &leaves,
                               int depth = 0) {
  if (depth > 32)
    return failure();
  Operation *def = v.getDefiningOp();
  if (!def)
    return success(); // a parameter (a bias)
  if (auto lin = dyn_cast<nn::LinearOp>(def)) {
    leaves.push_back(lin);
    return success();
  }
  if (isa<nn::ConstantOp, nn::FillOp>(def))
    return success();
  if (!isa<nn::ReshapeOp>(def) && !isElementwise(def))
    return failure();
  for (Value operand : def->getOperands())
    if (failed(activationLeaves(operand, leaves, depth + 1)))
      return failure();
  return success();
}

/// Whether `v` is the loss's logits, through reshapes.
bool isLogits(Value v) {
  for (Operation *user : v.getUsers()) {
    if (isa<nn::CrossEntropyOp>(user))
      return true;
    if (isa<nn::ReshapeOp>(user) && isLogits(user->getResult(0)))
      return true;
  }
  return false;
}

} // namespace

void TPPartitioner::planByStructure(func::FuncOp fwd) {
  auto set = [&](Value param, Role role, int64_t blocks = 1) {
    if (param && isa<BlockArgument>(param) &&
        fwd.getArgAttr(cast<BlockArgument>(param).getArgNumber(),
                       attrs::kParam))
      structural[param] = Plan{role, blocks};
  };
  fwd.walk([&](Operation *op) {
    if (auto emb = dyn_cast<nn::EmbeddingOp>(op)) {
      vocabParams.insert(emb.getTable());
      return;
    }
    auto lin = dyn_cast<nn::LinearOp>(op);
    if (!lin)
      return;
    if (isLogits(lin.getResult())) {
      vocabParams.insert(lin.getWeight());
      return;
    }
    if (reachesAttention(lin.getResult())) {
      int64_t blocks = attentionBlocks(lin.getResult());
      set(lin.getWeight(), Role::Column, blocks);
      set(lin.getBias(), Role::Column, blocks);
      columnBiases(lin, blocks);
      return;
    }
    if (fromAttention(lin.getInput())) {
      set(lin.getWeight(), Role::Row);
      return;
    }
    SmallVector<nn::LinearOp> leaves;
    if (failed(activationLeaves(lin.getInput(), leaves)) || leaves.empty())
      return;
    for (nn::LinearOp leaf : leaves)
      if (isLogits(leaf.getResult()) || fromAttention(leaf.getInput()))
        return;
    set(lin.getWeight(), Role::Row);
    for (nn::LinearOp leaf : leaves) {
      set(leaf.getWeight(), Role::Column);
      set(leaf.getBias(), Role::Column);
      columnBiases(leaf, 1);
    }
  });
}

/// A bias added to a column-parallel projection's result (MatMul then Add,
/// as exporters write a Linear): split with its features.
void TPPartitioner::columnBiases(nn::LinearOp lin, int64_t blocks) {
  for (Operation *user : lin.getResult().getUsers()) {
    auto add = dyn_cast<nn::AddOp>(user);
    if (!add)
      continue;
    Value other = add.getLhs() == lin.getResult() ? add.getRhs() : add.getLhs();
    auto arg = dyn_cast<BlockArgument>(other);
    if (arg && tensorType(arg).getRank() == 1 &&
        forward.getArgAttr(arg.getArgNumber(), attrs::kParam))
      structural[arg] = Plan{Role::Column, blocks};
  }
}
