//===- WorkingCopy.cpp - one rank's bf16 weights, written by the optimizer -===//
//
// On one rank, a bf16 param dtype gathers each parameter as a cast of the
// f32 master weights and a one-rank all-gather (a copy), before every use
// of every micro-step (twice with reshard-after-forward). Here the bf16
// copy becomes state, written where the master weights change:
//
//   micro-step:  cast(params[o] -> x); all_gather(x, ...) -> (g, ...)
//                  => g's readers read state[work.<name>]
//   opt_step:    ... adamw ...; cast(params[o] -> state[work.<name>])
//   refresh:     cast(params[o] -> state[work.<name>])   (a new entry)
//
// The runtime runs `refresh` after the parameters are initialized or loaded.
// The slots are named abi::kStateWork + the parameter's name; checkpoints
// skip them (they are the parameters, rounded). See Passes.td for the rules.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"
#include "target/Attrs.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <map>

namespace shardc {
#define GEN_PASS_DEF_RTWORKINGCOPY
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

namespace A = abi;

/// A parameter slot of the manifest, and its working copy's state offset
/// (-1 until one is made).
struct Param {
  DictionaryAttr slot;
  int64_t work = -1;
};

/// The block argument of `fn`'s region `region` (abi::Region order, after
/// the context).
Value regionArg(func::FuncOp fn, int64_t region) {
  return fn.getBody().front().getArgument(1 + region);
}

/// The parameter offset `buffer` views, if it is a view of `fn`'s params.
std::optional<int64_t> paramOffset(Value buffer, func::FuncOp fn) {
  auto view = buffer.getDefiningOp<rt::ViewOp>();
  if (!view || view.getBase() != regionArg(fn, A::kRegionParams))
    return std::nullopt;
  return view.getOffset();
}

/// The f32 -> bf16 cast of a parameter into `x`, if x is an allocation that
/// cast writes and `reader` alone reads.
rt::KernelOp castOfParam(Value x, Operation *reader, func::FuncOp fn) {
  if (!x.getDefiningOp<rt::AllocOp>())
    return nullptr;
  rt::KernelOp cast;
  for (Operation *user : x.getUsers()) {
    if (user == reader)
      continue;
    auto k = dyn_cast<rt::KernelOp>(user);
    if (cast || !isKernel(user, A::KernelId::cast) ||
        k.getBuffers().size() != 2 || k.getBuffers()[1] != x)
      return nullptr;
    cast = k;
  }
  if (!cast || !paramOffset(cast.getBuffers()[0], fn))
    return nullptr;
  ArrayRef<int64_t> ints = cast.getInts();
  if (ints[A::cast::from] != A::kF32 || ints[A::cast::to] != A::kBF16)
    return nullptr;
  return cast;
}

class WorkingCopies {
public:
  WorkingCopies(ModuleOp module, DictionaryAttr manifest)
      : module(module), manifest(manifest) {
    for (Attribute a : manifest.getAs<ArrayAttr>("params")) {
      auto slot = cast<DictionaryAttr>(a);
      params[slot.getAs<IntegerAttr>("offset").getInt()].slot = slot;
    }
    stateBytes = manifest.getAs<IntegerAttr>("state_bytes").getInt();
  }

  /// Replaces the gathers of `fn` whose every input is a parameter's cast.
  void replaceGathers(func::FuncOp fn);
  /// The casts into the working copies, at the end of opt_step and as the
  /// new entry `refresh`; the manifest's new state slots and entry.
  void finish();
  bool any() const { return made > 0; }

private:
  /// Param at `offset`'s working copy: its state offset.
  int64_t workOf(int64_t offset, int64_t count);
  void castAll(OpBuilder &b, Location loc, func::FuncOp fn);

  ModuleOp module;
  DictionaryAttr manifest;
  std::map<int64_t, Param> params;
  int64_t stateBytes;
  int made = 0;
};

int64_t WorkingCopies::workOf(int64_t offset, int64_t count) {
  Param &p = params.at(offset);
  if (p.work < 0) {
    p.work = A::alignTo(stateBytes);
    stateBytes = p.work + A::alignTo(count * 2);
    ++made;
  }
  return p.work;
}

void WorkingCopies::replaceGathers(func::FuncOp fn) {
  Value state = regionArg(fn, A::kRegionState);
  SmallVector<rt::AllGatherOp> gathers;
  fn.walk([&](rt::AllGatherOp g) { gathers.push_back(g); });
  for (rt::AllGatherOp g : gathers) {
    SmallVector<rt::KernelOp> casts;
    for (auto [x, count] : llvm::zip(g.getInputs(), g.getCounts())) {
      rt::KernelOp c = castOfParam(x, g, fn);
      auto it = c ? params.find(*paramOffset(c.getBuffers()[0], fn))
                  : params.end();
      if (it == params.end() || c.getInts()[A::cast::n] != count ||
          it->second.slot.getAs<IntegerAttr>("bytes").getInt() != 4 * count)
        break;
      casts.push_back(c);
    }
    if (casts.size() != g.getInputs().size() || casts.empty())
      continue;
    OpBuilder b(g);
    for (auto [j, c] : llvm::enumerate(casts)) {
      int64_t offset = *paramOffset(c.getBuffers()[0], fn);
      Value out = g.getOutputs()[j];
      int64_t work = workOf(offset, g.getCounts()[j]);
      out.replaceAllUsesExcept(
          rt::ViewOp::create(b, g.getLoc(), state, work),
          g);
    }
    SmallVector<Value> dead(g.getOperands().drop_front());
    g.erase();
    for (rt::KernelOp c : casts)
      c.erase();
    for (Value v : dead)
      if (v.use_empty() && v.getDefiningOp<rt::AllocOp>())
        v.getDefiningOp()->erase();
  }
}

void WorkingCopies::castAll(OpBuilder &b, Location loc, func::FuncOp fn) {
  Value ctx = fn.getBody().front().getArgument(0);
  Value paramsArg = regionArg(fn, A::kRegionParams);
  Value state = regionArg(fn, A::kRegionState);
  for (auto &[offset, p] : params) {
    if (p.work < 0)
      continue;
    int64_t n = p.slot.getAs<IntegerAttr>("bytes").getInt() / 4;
    Value from = rt::ViewOp::create(b, loc, paramsArg, offset);
    Value to = rt::ViewOp::create(b, loc, state, p.work);
    rt::KernelOp::create(b, loc, ctx, A::kernelInfo(A::KernelId::cast).name,
                         ValueRange{from, to},
                         ArrayRef<int64_t>{n, A::kF32, A::kBF16},
                         ArrayRef<double>{}, /*stream=*/0);
  }
}

void WorkingCopies::finish() {
  auto opt = module.lookupSymbol<func::FuncOp>(
      (attrs::kEntryPrefix + "opt_step").str());
  OpBuilder b(opt.getBody().front().getTerminator());
  castAll(b, opt.getLoc(), opt);

  b.setInsertionPointAfter(opt);
  auto refresh = func::FuncOp::create(
      b, opt.getLoc(), (attrs::kEntryPrefix + "refresh").str(),
      opt.getFunctionType());
  Block *body = refresh.addEntryBlock();
  b.setInsertionPointToStart(body);
  castAll(b, opt.getLoc(), refresh);
  func::ReturnOp::create(b, opt.getLoc());

  SmallVector<Attribute> state(manifest.getAs<ArrayAttr>("state").getValue());
  for (auto &[offset, p] : params) {
    if (p.work < 0)
      continue;
    NamedAttrList slot;
    slot.set("name", b.getStringAttr(A::kStateWork +
                                     p.slot.getAs<StringAttr>("name").str()));
    slot.set("dtype", b.getStringAttr("bf16"));
    slot.set("offset", b.getI64IntegerAttr(p.work));
    slot.set("bytes", b.getI64IntegerAttr(
                          p.slot.getAs<IntegerAttr>("bytes").getInt() / 2));
    slot.set("shape", p.slot.get("shape"));
    state.push_back(slot.getDictionary(module.getContext()));
  }
  SmallVector<Attribute> entries(
      manifest.getAs<ArrayAttr>("entries").getValue());
  entries.push_back(b.getStringAttr("refresh"));
  NamedAttrList m(manifest);
  m.set("state", b.getArrayAttr(state));
  m.set("state_bytes", b.getI64IntegerAttr(A::alignTo(stateBytes)));
  m.set("entries", b.getArrayAttr(entries));
  module->setAttr(attrs::kManifest, m.getDictionary(module.getContext()));
}

struct RtWorkingCopyPass
    : public shardc::impl::RtWorkingCopyBase<RtWorkingCopyPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto manifest = module->getAttrOfType<DictionaryAttr>(attrs::kManifest);
    auto mesh = manifest ? manifest.getAs<DenseI64ArrayAttr>("mesh")
                         : DenseI64ArrayAttr();
    if (!mesh || mesh.size() != 2 || mesh[0] * mesh[1] != 1 ||
        !module.lookupSymbol<func::FuncOp>(
            (attrs::kEntryPrefix + "opt_step").str()))
      return; // several ranks gather shards; no optimizer, no writer
    WorkingCopies copies(module, manifest);
    for (StringRef entry : {"micro_step", "micro_step_nosync"})
      if (auto fn = module.lookupSymbol<func::FuncOp>(
              (attrs::kEntryPrefix + entry).str()))
        copies.replaceGathers(fn);
    if (copies.any())
      copies.finish();
  }
};

} // namespace
