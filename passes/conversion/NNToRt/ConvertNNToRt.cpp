//===- ConvertNNToRt.cpp - nn forward graph to an rt step function --------===//
//
// A direct, in-order lowering: the model function has one block of nn ops on
// value-semantic tensors; each tensor gets a buffer (a region view for
// parameters, inputs and outputs, an rt.alloc otherwise) and each op becomes
// rt.kernel calls by its lowering function (passes/conversion/NNToRt/), whose
// arguments follow runtime/abi/kernels.def.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"
#include "passes/conversion/NNToRt/StepBuilder.h"

#include "target/TargetDescription.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace shardc {
#define GEN_PASS_DEF_CONVERTNNTORT
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

using lower::elementBytes;
using lower::StepBuilder;

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
    if (allowTf32)
      manifest.set(abi::kManifestAllowTf32, b.getBoolAttr(true));
    manifest.set(abi::kManifestComputeDtype,
                 b.getStringAttr(programComputeDtype(module, allowTf32)));
    if (module->hasAttr(attrs::kTpWholeTokens))
      manifest.set(abi::kManifestTpWholeTokens, b.getBoolAttr(true));
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
        if (auto tpDim = fn.getArgAttrOfType<IntegerAttr>(i, attrs::kTpDim))
          init.set("tp_dim", tpDim);
        if (auto blocks = fn.getArgAttrOfType<IntegerAttr>(i, attrs::kTpBlocks))
          init.set("tp_blocks", blocks);
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
