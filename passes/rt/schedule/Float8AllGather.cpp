//===- Float8AllGather.cpp - FSDP2's float8 all-gather --------------------===//
//
// Under --float8=tensorwise a float8 weight is cast with one scale, its
// whole tensor's: casting each rank's shard with that global scale and
// gathering the bytes gives the same fp8 weight, bit for bit, as gathering
// the weight and casting it. So the shard axis moves e4m3 bytes, half of
// bf16's (torchao's enable_fsdp_float8_all_gather):
//
//   head:    amax_group(shards -> amax[k])                        stream 0
//            all_gather(amax -> amaxes[P,k]); fp8_scales(-> s[k])  stream 0
//   gather:  all_gather(x -> w); cast_fp8(w -> q, sw)
//              => cast_fp8_scaled(x, s[j] -> qx)                   stream 0
//                 all_gather(qx -> wq, f8E4M3FN)      the gather's stream
//                 q's readers read wq, sw's read s[j]
//            cast_fp8 transposed (w -> qt, sw)
//              => transpose_fp8(wq -> qt), sw's readers read s[j]
//
// The head is torchao's precompute_float8_dynamic_scale_for_fsdp: the
// scales once a micro-step (the weights change only at the optimizer step),
// for every float8 weight with one collective; the forward's and the
// backward's gathers share them. A gathered weight qualifies when every
// reader of it is a tensorwise e4m3 cast_fp8 (nn-float8-linears' weights;
// not the LM head, not a weight that another op reads in high precision)
// and its shard is a parameter's (a view of the parameters, or the bf16
// cast of one: the amax is then the f32 master's, rounded to bf16 by
// fp8_scales, which is the bf16 weight's since rounding is monotone).
// Gathers within subgroups (--reshard-after-forward=N) keep their dtype.
// Runs before rt-coalesce-collectives, which packs a group's fp8 gathers in
// one collective and its other gathers in another.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/Float8Scales.h"
#include "passes/rt/RtMatch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace shardc {
#define GEN_PASS_DEF_RTFLOAT8ALLGATHER
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

using abi::KernelId;

/// A gather this pass rewrites, with what it needs.
struct Candidate {
  rt::AllGatherOp gather;
  SmallVector<rt::KernelOp> casts; ///< the cast_fp8s reading its output
  Value source;                    ///< the shard the amax reads
  int64_t sourceDtype;             ///< its dtype code
  Operation *castAt;               ///< where its shard's cast goes
};

/// The cast_fp8 kernels reading the gathered weight `w`, when every reader
/// other than `gather` is one with a tensorwise e4m3 recipe reading it as
/// its operand; empty otherwise.
SmallVector<rt::KernelOp> float8Readers(rt::AllGatherOp gather, Value w) {
  namespace C8 = abi::cast_fp8;
  SmallVector<rt::KernelOp> casts;
  for (Operation *user : w.getUsers()) {
    if (user == gather)
      continue;
    auto k = dyn_cast<rt::KernelOp>(user);
    if (!k || !isKernel(k, KernelId::cast_fp8) || k.getBuffers()[0] != w ||
        llvm::is_contained(k.getBuffers().drop_front(), w))
      return {};
    ArrayRef<int64_t> i = k.getInts();
    if (i[C8::format] != abi::kF8E4M3 || i[C8::rowwise] != 0 || i[C8::both])
      return {};
    casts.push_back(k);
  }
  return casts;
}

/// The buffer the amax of gather input `x` reads, and its dtype code: `x`
/// itself when it is a view of the parameters (`gathered` is x's dtype),
/// or the input of the `cast` that alone writes x.
std::optional<std::pair<Value, int64_t>> shardSource(Value x,
                                                     int64_t gathered,
                                                     Value params) {
  if (auto view = x.getDefiningOp<rt::ViewOp>())
    return view.getBase() == params ? std::optional(std::pair(x, gathered))
                                    : std::nullopt;
  if (!x.getDefiningOp<rt::AllocOp>())
    return std::nullopt;
  rt::KernelOp writer;
  for (Operation *user : x.getUsers()) {
    auto k = dyn_cast<rt::KernelOp>(user);
    if (k && k.getBuffers().size() > 1 && k.getBuffers()[1] == x) {
      if (writer || !isKernel(k, KernelId::cast))
        return std::nullopt;
      writer = k;
    }
  }
  if (!writer)
    return std::nullopt;
  Value from = writer.getBuffers()[0];
  auto view = from.getDefiningOp<rt::ViewOp>();
  if (!view || view.getBase() != params)
    return std::nullopt;
  return std::pair(from, writer.getInts()[abi::cast::from]);
}

/// Where the cast of `gather`'s shard goes on the compute stream: before
/// the run of events, allocations, views and gathers that ends at it, so
/// that an event its stream waits on after the cast orders the two; null
/// when no such wait follows (the cast would race the gather).
Operation *castPoint(rt::AllGatherOp gather) {
  Operation *at = gather;
  bool waited = false;
  while (Operation *prev = at->getPrevNode()) {
    if (!isa<rt::EventRecordOp, rt::EventWaitOp, rt::AllocOp, rt::ViewOp,
             rt::AllGatherOp>(prev))
      break;
    if (auto wait = dyn_cast<rt::EventWaitOp>(prev))
      waited |= int64_t(wait.getStream()) == int64_t(gather.getStream());
    at = prev;
  }
  if (gather.getStream() == abi::kComputeStream)
    return gather;
  return waited ? at : nullptr;
}

/// `gather` as a candidate, if it is one.
std::optional<Candidate> candidate(rt::AllGatherOp gather,
                                   const abi::MeshGrid &mesh, Value params) {
  if (!gather.getGroup() || gather.getSubgroup() != 0 ||
      gather.getInputs().size() != 1 ||
      mesh.axisSize(gather.getAxis()) < 2 ||
      !gather.getOutputs()[0].getDefiningOp<rt::AllocOp>())
    return std::nullopt;
  Type dtype = gather.getDtype();
  if (!dtype.isF32() && !dtype.isBF16())
    return std::nullopt;
  Candidate c{gather, float8Readers(gather, gather.getOutputs()[0]), {}, 0,
              castPoint(gather)};
  auto source =
      shardSource(gather.getInputs()[0], rt::dtypeCode(dtype), params);
  if (c.casts.empty() || !source || !c.castAt)
    return std::nullopt;
  std::tie(c.source, c.sourceDtype) = *source;
  return c;
}

/// The head: the global scales of the candidates' weights, one a distinct
/// source, into a buffer of f32s; returns each source's scale view.
llvm::DenseMap<Value, Value> buildScales(ArrayRef<Candidate> cands,
                                         const abi::MeshGrid &mesh) {
  rt::AllGatherOp first = cands.front().gather;
  SmallVector<Value> sources;
  SmallVector<int64_t> ints = {0, cands.front().sourceDtype};
  for (const Candidate &c : cands)
    if (!llvm::is_contained(sources, c.source)) {
      sources.push_back(c.source);
      ints.push_back(rt::AllGatherOp(c.gather).getCounts()[0]);
    }
  int64_t k = int64_t(sources.size());
  ints[abi::amax_group::k] = k;
  for (Value s : sources)
    hoistBefore(s, cands.front().castAt);
  OpBuilder b(cands.front().castAt);
  Location loc = first.getLoc();
  Value ctx = first.getCtx();
  Value amax = rt::AllocOp::create(b, loc, k * 4);
  Value scales = rt::AllocOp::create(b, loc, k * 8); // {s, 1/s} a weight
  SmallVector<Value> bufs(sources);
  bufs.push_back(amax);
  launchKernel(b, loc, ctx, KernelId::amax_group, bufs, ints,
               cands.front().sourceDtype);
  // Under --tp a weight's shards are also its tp ranks' parts.
  SmallVector<int64_t> axes = {int64_t(first.getAxis())};
  if (mesh.tpAxis() >= 0)
    axes.push_back(mesh.tpAxis());
  gatherFp8Scales(b, loc, ctx, amax, k, axes, mesh, abi::kF8E4M3,
                  rt::dtypeCode(first.getDtype()), scales);
  llvm::DenseMap<Value, Value> scaleOf;
  for (auto [j, s] : llvm::enumerate(sources))
    scaleOf[s] = rt::ViewOp::create(b, loc, scales, int64_t(j) * 8, 8);
  return scaleOf;
}

/// Gathers candidate `c`'s weight as fp8 bytes cast with `scale`; adds
/// the ops it replaces to `dead` (erased once every candidate is done: a
/// later candidate's cast may go before one of them).
void rewrite(const Candidate &c, Value scale, const abi::MeshGrid &mesh,
             SmallVectorImpl<Operation *> &dead) {
  rt::AllGatherOp g = c.gather;
  Location loc = g.getLoc();
  Value ctx = g.getCtx(), x = g.getInputs()[0];
  auto w = g.getOutputs()[0].getDefiningOp<rt::AllocOp>();
  int64_t n = g.getCounts()[0], P = mesh.axisSize(g.getAxis());
  int64_t dtype = rt::dtypeCode(g.getDtype());
  hoistBefore(x, c.castAt);
  OpBuilder b(c.castAt);
  Value qx = rt::AllocOp::create(b, loc, n);
  launchKernel(b, loc, ctx, KernelId::cast_fp8_scaled, {x, scale, qx},
               {1, n, dtype, abi::kF8E4M3, /*trans=*/0, /*both=*/0}, dtype);
  b.setInsertionPoint(w);
  Value wq = rt::AllocOp::create(b, loc, P * n);
  b.setInsertionPoint(g);
  rt::AllGatherOp::create(
      b, loc, ctx, ValueRange{qx}, ValueRange{wq}, ValueRange{}, g.getAxis(),
      Float8E4M3FNType::get(b.getContext()), ArrayRef<int64_t>{n},
      /*subgroup=*/0, g.getGroupAttr(), g.getStream());
  namespace C8 = abi::cast_fp8;
  for (rt::KernelOp cast : c.casts) {
    Value q = cast.getBuffers()[1], sw = cast.getBuffers()[2];
    ArrayRef<int64_t> i = cast.getInts();
    if (i[C8::trans]) {
      b.setInsertionPoint(cast);
      launchKernel(b, cast.getLoc(), ctx, KernelId::transpose_fp8, {wq, q},
                   {i[C8::R], i[C8::C]}, -1, cast.getStream());
    } else {
      q.replaceAllUsesWith(wq);
    }
    sw.replaceAllUsesWith(scale);
    cast.erase();
    for (Value buffer : {q, sw})
      if (buffer.use_empty() && buffer.getDefiningOp<rt::AllocOp>())
        dead.push_back(buffer.getDefiningOp());
  }
  dead.push_back(g);
  dead.push_back(w);
}

struct RtFloat8AllGatherPass
    : public shardc::impl::RtFloat8AllGatherBase<RtFloat8AllGatherPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal() || !fn.getBody().hasOneBlock())
      return;
    auto module = fn->getParentOfType<ModuleOp>();
    abi::MeshGrid mesh = compiledMesh(module);
    Block &body = fn.getBody().front();
    if (body.getNumArguments() <= 1 + abi::kRegionParams)
      return;
    Value params = body.getArgument(1 + abi::kRegionParams);
    SmallVector<Candidate> cands;
    for (auto g : body.getOps<rt::AllGatherOp>()) {
      std::optional<Candidate> c = candidate(g, mesh, params);
      // One head: one axis, one source dtype, one gathered dtype.
      if (c && !cands.empty() &&
          (c->gather.getAxis() != cands.front().gather.getAxis() ||
           c->sourceDtype != cands.front().sourceDtype ||
           c->gather.getDtype() != cands.front().gather.getDtype()))
        c.reset();
      if (c)
        cands.push_back(*c);
    }
    if (cands.empty())
      return;
    llvm::DenseMap<Value, Value> scaleOf = buildScales(cands, mesh);
    SmallVector<Operation *> dead;
    for (const Candidate &c : cands)
      rewrite(c, scaleOf.lookup(c.source), mesh, dead);
    for (Operation *op : dead) // the gathers first, then their outputs
      op->erase();
  }
};

} // namespace
