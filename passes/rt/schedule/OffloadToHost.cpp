//===- OffloadToHost.cpp - FSDP2's CPU offload on the rt program ----------===//
//
// --offload=cpu: the parameters, state and io regions are pinned host memory
// the device may address (mapped). The device's reads of parameters and the
// collectives' host operands become copies on the copy stream into planned
// arena buffers, ordered by events; the optimizer step becomes a host entry
// (run by the CPU backend). See Passes.td for the rules.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"

#include "mlir/IR/Builders.h"

#include <optional>

namespace shardc {
#define GEN_PASS_DEF_RTOFFLOADTOHOST
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// The region of an entry's buffer argument: the arguments after the
/// context are the regions in abi::Region order.
std::optional<int64_t> regionOf(Value buffer, Block &entry) {
  auto view = buffer.getDefiningOp<rt::ViewOp>();
  auto arg = view ? dyn_cast<BlockArgument>(view.getBase()) : BlockArgument();
  if (!arg || arg.getOwner() != &entry || arg.getArgNumber() == 0)
    return std::nullopt;
  return int64_t(arg.getArgNumber()) - 1;
}

/// A slot of one region, from the manifest: offset, bytes and (parameters)
/// FSDP group.
struct Slot {
  int64_t offset, bytes, group;
};
using Slots = SmallVector<Slot>;

Slots slotsOf(DictionaryAttr manifest, StringRef key) {
  Slots slots;
  auto list = manifest ? manifest.getAs<ArrayAttr>(key) : ArrayAttr();
  if (!list)
    return slots;
  for (Attribute a : list) {
    auto slot = cast<DictionaryAttr>(a);
    auto offset = slot.getAs<IntegerAttr>("offset");
    auto bytes = slot.getAs<IntegerAttr>("bytes");
    auto group = slot.getAs<IntegerAttr>("group");
    if (offset && bytes)
      slots.push_back(
          {offset.getInt(), bytes.getInt(), group ? group.getInt() : -1});
  }
  return slots;
}

struct RtOffloadToHostPass
    : public shardc::impl::RtOffloadToHostBase<RtOffloadToHostPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto manifest = module->getAttrOfType<DictionaryAttr>(attrs::kManifest);
    if (!manifest) {
      module.emitError("--offload=cpu needs the module's manifest (run after "
                       "convert-nn-to-rt)");
      return signalPassFailure();
    }
    slots[abi::kRegionParams] = slotsOf(manifest, "params");
    slots[abi::kRegionState] = slotsOf(manifest, "state");
    slots[abi::kRegionIo] = slotsOf(manifest, "io");

    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal() || !fn.getName().starts_with(attrs::kEntryPrefix))
        continue;
      if (fn.getName() == (attrs::kEntryPrefix + "opt_step").str()) {
        fn->setAttr(attrs::kOnHost, UnitAttr::get(&getContext()));
        continue;
      }
      if (!fn.getBody().hasOneBlock()) {
        fn.emitError("--offload=cpu expects a single-block step function");
        return signalPassFailure();
      }
      if (failed(stage(fn)))
        return signalPassFailure();
    }
    NamedAttrList entries(manifest);
    entries.set("offload", StringAttr::get(&getContext(), abi::kOffloadCpu));
    module->setAttr(attrs::kManifest, entries.getDictionary(&getContext()));
  }

  /// The slot of `region` holding `offset`.
  FailureOr<Slot> slotAt(Operation *user, int64_t region, int64_t offset) {
    for (const Slot &slot : slots[region])
      if (offset >= slot.offset && offset < slot.offset + slot.bytes)
        return slot;
    return user->emitOpError("reads host memory at offset ")
           << offset << " of region " << region
           << ", which no manifest slot holds";
  }

  /// A fresh arena buffer for host view `v` (from its offset to the end of
  /// its slot) before `b`'s insertion point.
  FailureOr<Value> stagingFor(OpBuilder &b, Operation *user, Value v,
                              Block &entry) {
    auto view = v.getDefiningOp<rt::ViewOp>();
    FailureOr<Slot> slot =
        slotAt(user, *regionOf(v, entry), view.getOffset());
    if (failed(slot))
      return failure();
    int64_t bytes = slot->offset + slot->bytes - view.getOffset();
    Value s = rt::AllocOp::create(b, user->getLoc(), bytes);
    sizes[s] = bytes;
    return s;
  }

  void copy(OpBuilder &b, Location loc, Value ctx, Value from, Value to,
            int64_t bytes) {
    rt::KernelOp::create(b, loc, ctx, abi::kernelInfo(abi::KernelId::copy).name,
                         ValueRange{from, to}, ArrayRef<int64_t>{bytes},
                         ArrayRef<double>{}, abi::kCopyStream);
  }

  /// Makes `waiting` wait on `stream` for everything launched so far on
  /// `signalling` (a fresh event).
  void order(OpBuilder &b, Location loc, Value ctx, int64_t signalling,
             int64_t waiting) {
    int64_t event = nextEvent++;
    rt::EventRecordOp::create(b, loc, ctx, event, signalling);
    rt::EventWaitOp::create(b, loc, ctx, event, waiting);
  }

  LogicalResult stage(func::FuncOp fn) {
    Block &entry = fn.getBody().front();
    Value ctx = entry.getArgument(0);
    nextEvent = 0;
    fn.walk([&](Operation *op) {
      if (auto r = dyn_cast<rt::EventRecordOp>(op))
        nextEvent = std::max(nextEvent, int64_t(r.getEvent()) + 1);
      if (auto w = dyn_cast<rt::EventWaitOp>(op))
        nextEvent = std::max(nextEvent, int64_t(w.getEvent()) + 1);
    });
    if (failed(stageCollectives(entry, ctx)))
      return failure();
    return stageKernels(entry, ctx);
  }

  /// A collective's host operands: copied in where it is issued (so as far
  /// ahead as it is prefetched), copied out after it.
  LogicalResult stageCollectives(Block &entry, Value ctx) {
    auto host = [&](Value v) {
      std::optional<int64_t> region = regionOf(v, entry);
      return region && abi::hostRegionUnderOffload(*region);
    };
    for (Operation &op : llvm::make_early_inc_range(entry)) {
      SetVector<Value> in, out;
      auto collect = [&](ValueRange inputs, ValueRange outputs) {
        for (Value v : inputs)
          if (host(v))
            in.insert(v);
        for (Value v : outputs)
          if (host(v))
            out.insert(v);
      };
      if (auto g = dyn_cast<rt::AllGatherOp>(op))
        collect(g.getInputs(), g.getOutputs());
      else if (auto r = dyn_cast<rt::ReduceScatterOp>(op))
        collect(r.getInput(), r.getOutput());
      else if (auto r = dyn_cast<rt::AllReduceOp>(op))
        collect(r.getInput(), r.getOutput());
      else
        continue;
      if (in.empty() && out.empty())
        continue;
      int64_t stream = streamOf(&op);

      OpBuilder b(&op);
      Location loc = op.getLoc();
      // The copy stream starts where the compute stream is, so that the
      // planned buffers it writes are free.
      order(b, loc, ctx, abi::kComputeStream, abi::kCopyStream);
      DenseMap<Value, Value> staged;
      SmallVector<Value> operands(in.begin(), in.end());
      operands.append(out.begin(), out.end());
      for (Value v : operands) {
        if (staged.count(v))
          continue;
        FailureOr<Value> s = stagingFor(b, &op, v, entry);
        if (failed(s))
          return failure();
        staged[v] = *s;
        if (in.contains(v))
          copy(b, loc, ctx, v, *s, sizes[*s]);
      }
      if (!in.empty())
        order(b, loc, ctx, abi::kCopyStream, stream);
      for (OpOperand &use : op.getOpOperands())
        if (Value s = staged.lookup(use.get()))
          use.set(s);
      if (out.empty())
        continue;
      // Copied out once the collective is done; the compute stream, which
      // every later reader waits on, waits for the copy.
      b.setInsertionPointAfter(&op);
      order(b, loc, ctx, stream, abi::kCopyStream);
      for (Value v : out)
        copy(b, loc, ctx, staged.lookup(v), v, sizes[staged.lookup(v)]);
      order(b, loc, ctx, abi::kCopyStream, abi::kComputeStream);
    }
    return success();
  }

  /// Kernels reading parameters (one rank's weights; the casts before a
  /// bf16 gather), in runs of one FSDP group: each run's parameters are
  /// copied once, issued where the run before it starts (one group ahead,
  /// as the all-gathers are prefetched by default), and the run waits for
  /// them.
  LogicalResult stageKernels(Block &entry, Value ctx) {
    struct Run {
      int64_t group;
      SmallVector<rt::KernelOp> ops;
      SetVector<Value> params;
    };
    SmallVector<Run> runs;
    for (auto k : entry.getOps<rt::KernelOp>()) {
      if (k.getStream() == abi::kCopyStream)
        continue; // the collectives' copies, above
      SetVector<Value> params;
      for (Value v : k.getBuffers())
        if (regionOf(v, entry) == abi::kRegionParams)
          params.insert(v);
      if (params.empty())
        continue;
      auto view = params.front().getDefiningOp<rt::ViewOp>();
      FailureOr<Slot> slot = slotAt(k, abi::kRegionParams, view.getOffset());
      if (failed(slot))
        return failure();
      if (runs.empty() || runs.back().group != slot->group)
        runs.push_back({slot->group, {}, {}});
      runs.back().ops.push_back(k);
      runs.back().params.insert(params.begin(), params.end());
    }
    for (auto [r, run] : llvm::enumerate(runs)) {
      Operation *first = run.ops.front();
      Operation *issue = r > 0 ? runs[r - 1].ops.front().getOperation() : first;
      OpBuilder b(issue);
      Location loc = first->getLoc();
      order(b, loc, ctx, abi::kComputeStream, abi::kCopyStream);
      DenseMap<Value, Value> staged;
      for (Value v : run.params) {
        FailureOr<Value> s = stagingFor(b, first, v, entry);
        if (failed(s))
          return failure();
        staged[v] = *s;
        copy(b, loc, ctx, v, *s, sizes[*s]);
      }
      int64_t copied = nextEvent++;
      rt::EventRecordOp::create(b, loc, ctx, copied, abi::kCopyStream);
      SmallVector<int64_t> waiting;
      for (rt::KernelOp k : run.ops) {
        if (!llvm::is_contained(waiting, int64_t(k.getStream()))) {
          waiting.push_back(k.getStream());
          OpBuilder at(k);
          rt::EventWaitOp::create(at, loc, ctx, copied, k.getStream());
        }
        for (OpOperand &use : k->getOpOperands())
          if (Value s = staged.lookup(use.get()))
            use.set(s);
      }
    }
    return success();
  }

  int64_t nextEvent = 0;
  Slots slots[abi::kNumRegions];
  DenseMap<Value, int64_t> sizes;
};

} // namespace
