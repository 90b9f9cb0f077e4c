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

/// Slots of one region, from the manifest: (offset, bytes).
using Slots = SmallVector<std::pair<int64_t, int64_t>>;

Slots slotsOf(DictionaryAttr manifest, StringRef key) {
  Slots slots;
  auto list = manifest ? manifest.getAs<ArrayAttr>(key) : ArrayAttr();
  if (!list)
    return slots;
  for (Attribute a : list) {
    auto slot = cast<DictionaryAttr>(a);
    auto offset = slot.getAs<IntegerAttr>("offset");
    auto bytes = slot.getAs<IntegerAttr>("bytes");
    if (offset && bytes)
      slots.push_back({offset.getInt(), bytes.getInt()});
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

  /// Bytes from `offset` to the end of the slot of `region` holding it.
  FailureOr<int64_t> bytesFrom(Operation *user, int64_t region,
                               int64_t offset) {
    for (auto [start, bytes] : slots[region])
      if (offset >= start && offset < start + bytes)
        return start + bytes - offset;
    return user->emitOpError("reads host memory at offset ")
           << offset << " of region " << region
           << ", which no manifest slot holds";
  }

  LogicalResult stage(func::FuncOp fn) {
    Block &entry = fn.getBody().front();
    Value ctx = entry.getArgument(0);
    int64_t nextEvent = 0;
    fn.walk([&](Operation *op) {
      if (auto r = dyn_cast<rt::EventRecordOp>(op))
        nextEvent = std::max(nextEvent, int64_t(r.getEvent()) + 1);
      if (auto w = dyn_cast<rt::EventWaitOp>(op))
        nextEvent = std::max(nextEvent, int64_t(w.getEvent()) + 1);
    });

    for (Operation &op : llvm::make_early_inc_range(entry)) {
      // What must be device memory: a collective's every host operand
      // (NCCL), a kernel's parameters (the bulk reads of the step).
      SetVector<Value> in, out;
      int64_t stream = abi::kComputeStream;
      auto host = [&](Value v) {
        std::optional<int64_t> region = regionOf(v, entry);
        return region && abi::hostRegionUnderOffload(*region);
      };
      if (auto g = dyn_cast<rt::AllGatherOp>(op)) {
        for (Value v : g.getInputs())
          if (host(v))
            in.insert(v);
        for (Value v : g.getOutputs())
          if (host(v))
            out.insert(v);
        stream = g.getStream();
      } else if (auto r = dyn_cast<rt::ReduceScatterOp>(op)) {
        if (host(r.getInput()))
          in.insert(r.getInput());
        if (host(r.getOutput()))
          out.insert(r.getOutput());
        stream = r.getStream();
      } else if (auto r = dyn_cast<rt::AllReduceOp>(op)) {
        if (host(r.getInput()))
          in.insert(r.getInput());
        if (host(r.getOutput()))
          out.insert(r.getOutput());
        stream = r.getStream();
      } else if (auto k = dyn_cast<rt::KernelOp>(op)) {
        for (Value v : k.getBuffers())
          if (regionOf(v, entry) == abi::kRegionParams)
            in.insert(v);
        stream = k.getStream();
      } else {
        continue;
      }
      if (in.empty() && out.empty())
        continue;

      OpBuilder b(&op);
      Location loc = op.getLoc();
      // The copy stream starts where the compute stream is, so that the
      // planned buffers it writes are free.
      int64_t ready = nextEvent++;
      rt::EventRecordOp::create(b, loc, ctx, ready, abi::kComputeStream);
      rt::EventWaitOp::create(b, loc, ctx, ready, abi::kCopyStream);
      DenseMap<Value, Value> staged;
      auto stageOf = [&](Value v) -> FailureOr<Value> {
        if (Value s = staged.lookup(v))
          return s;
        std::optional<int64_t> region = regionOf(v, entry);
        auto view = v.getDefiningOp<rt::ViewOp>();
        FailureOr<int64_t> bytes = bytesFrom(&op, *region, view.getOffset());
        if (failed(bytes))
          return failure();
        Value s = rt::AllocOp::create(b, loc, *bytes);
        staged[v] = s;
        sizes[s] = *bytes;
        return s;
      };
      for (Value v : in) {
        FailureOr<Value> s = stageOf(v);
        if (failed(s))
          return failure();
        rt::KernelOp::create(b, loc, ctx,
                             abi::kernelInfo(abi::KernelId::copy).name,
                             ValueRange{v, *s}, ArrayRef<int64_t>{sizes[*s]},
                             ArrayRef<double>{}, abi::kCopyStream);
      }
      for (Value v : out)
        if (failed(stageOf(v)))
          return failure();
      if (!in.empty()) {
        int64_t copied = nextEvent++;
        rt::EventRecordOp::create(b, loc, ctx, copied, abi::kCopyStream);
        rt::EventWaitOp::create(b, loc, ctx, copied, stream);
      }
      for (OpOperand &use : op.getOpOperands())
        if (Value s = staged.lookup(use.get()))
          use.set(s);
      if (out.empty())
        continue;
      // Copied out once the collective is done; the compute stream, which
      // every later reader waits on, waits for the copy.
      b.setInsertionPointAfter(&op);
      int64_t done = nextEvent++;
      rt::EventRecordOp::create(b, loc, ctx, done, stream);
      rt::EventWaitOp::create(b, loc, ctx, done, abi::kCopyStream);
      for (Value v : out) {
        Value s = staged.lookup(v);
        rt::KernelOp::create(b, loc, ctx,
                             abi::kernelInfo(abi::KernelId::copy).name,
                             ValueRange{s, v}, ArrayRef<int64_t>{sizes[s]},
                             ArrayRef<double>{}, abi::kCopyStream);
      }
      int64_t back = nextEvent++;
      rt::EventRecordOp::create(b, loc, ctx, back, abi::kCopyStream);
      rt::EventWaitOp::create(b, loc, ctx, back, abi::kComputeStream);
    }
    return success();
  }

  Slots slots[abi::kNumRegions];
  DenseMap<Value, int64_t> sizes;
};

} // namespace
