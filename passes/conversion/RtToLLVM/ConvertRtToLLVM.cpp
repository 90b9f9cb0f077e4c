//===- ConvertRtToLLVM.cpp - rt step functions to launch tables -----------===//
//
// Each step function becomes a launch table (runtime/abi/abi.h, "The
// program"): a constant array of int64 words, `shardc_program_<entry>`,
// that the runtime's backend walks. Buffers are (region, byte offset)
// pairs, resolved from the step function's region arguments, rt.view
// offsets and the constants pool `shardc_constants` that rt.constant values
// are placed in. The manifest becomes the JSON string `shardc_manifest`.
//
// The module that results holds only constant globals: lowering and LLVM
// code generation take time linear in the number of launches, with no
// per-launch code for LLVM to compile.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtFlops.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"

#include <cstring>

namespace shardc {
#define GEN_PASS_DEF_CONVERTRTTOLLVM
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// The JSON form of a manifest attribute (dictionaries, arrays, strings,
/// integers, floats, booleans).
llvm::json::Value toJSON(Attribute attr) {
  if (auto dict = dyn_cast<DictionaryAttr>(attr)) {
    llvm::json::Object obj;
    for (NamedAttribute entry : dict)
      obj[entry.getName().str()] = toJSON(entry.getValue());
    return obj;
  }
  if (auto array = dyn_cast<ArrayAttr>(attr)) {
    llvm::json::Array out;
    for (Attribute a : array)
      out.push_back(toJSON(a));
    return out;
  }
  if (auto array = dyn_cast<DenseI64ArrayAttr>(attr))
    return llvm::json::Array(array.asArrayRef());
  if (auto s = dyn_cast<StringAttr>(attr))
    return s.str();
  if (auto b = dyn_cast<BoolAttr>(attr))
    return b.getValue();
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return i.getInt();
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  return nullptr;
}

/// The bytes of a constant tensor in the runtime's layout.
std::string runtimeBytes(DenseElementsAttr value) {
  std::string bytes;
  auto append = [&](auto v) {
    bytes.append(reinterpret_cast<const char *>(&v), sizeof(v));
  };
  Type elt = value.getElementType();
  if (elt.isF32())
    for (float v : value.getValues<float>())
      append(v);
  else if (elt.isInteger(1))
    for (bool v : value.getValues<bool>())
      append(uint8_t(v));
  else if (elt.isInteger(32))
    for (int32_t v : value.getValues<int32_t>())
      append(v);
  else if (elt.isInteger(64))
    for (int64_t v : value.getValues<int64_t>())
      append(v);
  return bytes;
}

int64_t doubleBits(double d) {
  int64_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  return bits;
}

/// Encodes the step functions of a module as launch tables.
class ProgramWriter {
public:
  explicit ProgramWriter(ModuleOp module) : module(module) {}

  /// Appends `fn`'s launch table to `words`.
  LogicalResult encode(func::FuncOp fn, SmallVectorImpl<int64_t> &words);

  /// The constants pool (rt.constant values, aligned).
  const std::string &constants() const { return pool; }

private:
  FailureOr<int64_t> ref(Operation *user, Value buffer);
  LogicalResult kernel(Operation *op, abi::KernelId id, ValueRange buffers,
                       ArrayRef<int64_t> ints, ArrayRef<double> floats,
                       int64_t stream, SmallVectorImpl<int64_t> &words);
  LogicalResult constant(rt::ConstantOp op);

  ModuleOp module;
  func::FuncOp current;
  DenseMap<Operation *, int64_t> constantOffsets;
  std::string pool;
};

LogicalResult ProgramWriter::constant(rt::ConstantOp op) {
  Type elt = op.getValue().getElementType();
  if (!elt.isF32() && !elt.isInteger(1) && !elt.isInteger(32) &&
      !elt.isInteger(64))
    return op.emitOpError("holds ") << elt << ", which the runtime cannot store";
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError("holds a non-dense value");
  pool.resize(size_t(abi::alignTo(int64_t(pool.size()))), '\0');
  constantOffsets[op] = int64_t(pool.size());
  pool += runtimeBytes(dense);
  return success();
}

/// The (region, offset) word of a buffer operand.
FailureOr<int64_t> ProgramWriter::ref(Operation *user, Value buffer) {
  int64_t offset = 0;
  while (auto view = buffer.getDefiningOp<rt::ViewOp>()) {
    offset += view.getOffset();
    buffer = view.getBase();
  }
  int64_t region = -1;
  if (auto arg = dyn_cast<BlockArgument>(buffer)) {
    // (ctx, params, state, io, arena): the regions in abi::Region order.
    region = int64_t(arg.getArgNumber()) - 1;
  } else if (auto c = buffer.getDefiningOp<rt::ConstantOp>()) {
    auto it = constantOffsets.find(c);
    if (it == constantOffsets.end())
      return user->emitOpError("uses a constant defined after it");
    region = abi::kRegionConstants;
    offset += it->second;
  } else if (buffer.getDefiningOp<rt::AllocOp>()) {
    return user->emitOpError(
        "uses an rt.alloc buffer: run the memory planner (rt-plan-memory) "
        "before lowering");
  }
  bool regionArg = isa<BlockArgument>(buffer) && region >= 0 &&
                   region <= abi::kRegionArena &&
                   cast<BlockArgument>(buffer).getOwner()->getParentOp() ==
                       current;
  if (!regionArg && region != abi::kRegionConstants)
    return user->emitOpError("uses a buffer that is not a view of a region "
                             "argument or a constant");
  if (offset < 0 || offset > abi::kOffsetMask)
    return user->emitOpError("buffer offset ") << offset << " is out of range";
  return abi::bufferRef(region, offset);
}

LogicalResult ProgramWriter::kernel(Operation *op, abi::KernelId id,
                                    ValueRange buffers, ArrayRef<int64_t> ints,
                                    ArrayRef<double> floats, int64_t stream,
                                    SmallVectorImpl<int64_t> &words) {
  const abi::KernelInfo &info = abi::kernelInfo(id);
  std::string wrong = abi::checkKernelArgs(info, buffers.size(), ints.data(),
                                           ints.size(), floats.size());
  if (!wrong.empty())
    return op->emitOpError("lowers to kernel '")
           << info.name << "', which " << wrong << "; expected "
           << abi::kernelLayout(info);
  words.append({abi::kOpKernel, int64_t(id), stream, int64_t(buffers.size()),
                int64_t(ints.size()), int64_t(floats.size())});
  for (Value b : buffers) {
    FailureOr<int64_t> r = ref(op, b);
    if (failed(r))
      return failure();
    words.push_back(*r);
  }
  words.append(ints.begin(), ints.end());
  for (double f : floats)
    words.push_back(doubleBits(f));
  return success();
}

LogicalResult ProgramWriter::encode(func::FuncOp fn,
                                    SmallVectorImpl<int64_t> &words) {
  current = fn;
  if (!fn.getBody().hasOneBlock())
    return fn.emitError("a step function must have a single block");
  Block &block = fn.getBody().front();
  if (block.getNumArguments() != 1 + abi::kRegionArena + 1 ||
      !isa<rt::ContextType>(block.getArgument(0).getType()))
    return fn.emitError("a step function takes (context, params, state, io, "
                        "arena), got ")
           << block.getNumArguments() << " arguments";
  using K = abi::KernelId;
  for (Operation &op : block) {
    LogicalResult ok =
        llvm::TypeSwitch<Operation *, LogicalResult>(&op)
            .Case([&](rt::KernelOp k) -> LogicalResult {
              const abi::KernelInfo *info = abi::lookupKernel(k.getName().str());
              if (!info)
                return k.emitOpError("unknown kernel '") << k.getName() << "'";
              return kernel(k, abi::kernelId(*info), k.getBuffers(),
                            k.getInts(), k.getFloats(), k.getStream(), words);
            })
            .Case([&](rt::AllGatherOp g) -> LogicalResult {
              int64_t dtype = rt::dtypeCode(g.getDtype());
              if (g.getSubgroup())
                return kernel(g, K::all_gather_subgroup,
                              {g.getInputs()[0], g.getOutputs()[0]},
                              {g.getCounts()[0], int64_t(g.getAxis()), dtype,
                               int64_t(g.getSubgroup())},
                              {}, g.getStream(), words);
              if (g.getInputs().size() == 1)
                return kernel(g, K::all_gather,
                              {g.getInputs()[0], g.getOutputs()[0]},
                              {g.getCounts()[0], int64_t(g.getAxis()), dtype},
                              {}, g.getStream(), words);
              SmallVector<Value> bufs(g.getInputs());
              llvm::append_range(bufs, g.getOutputs());
              llvm::append_range(bufs, g.getScratch());
              SmallVector<int64_t> ints = {int64_t(g.getInputs().size()),
                                           int64_t(g.getAxis()), dtype};
              llvm::append_range(ints, g.getCounts());
              return kernel(g, K::all_gather_group, bufs, ints, {},
                            g.getStream(), words);
            })
            .Case([&](rt::ReduceScatterOp r) {
              return kernel(r, K::reduce_scatter,
                            {r.getInput(), r.getOutput(), r.getScratch()},
                            {int64_t(r.getCount()), int64_t(r.getAxis()),
                             rt::dtypeCode(r.getDtype())},
                            {}, r.getStream(), words);
            })
            .Case([&](rt::AllReduceOp r) {
              return kernel(r, K::all_reduce, {r.getInput(), r.getOutput()},
                            {int64_t(r.getCount()), int64_t(r.getAxis()),
                             rt::dtypeCode(r.getDtype())},
                            {}, r.getStream(), words);
            })
            .Case([&](rt::EventRecordOp e) {
              words.append({abi::kOpEventRecord, int64_t(e.getEvent()),
                            int64_t(e.getStream())});
              return success();
            })
            .Case([&](rt::EventWaitOp e) {
              words.append({abi::kOpEventWait, int64_t(e.getEvent()),
                            int64_t(e.getStream())});
              return success();
            })
            .Case([&](rt::ConstantOp c) { return constant(c); })
            .Case<rt::ViewOp, func::ReturnOp>(
                [](Operation *) { return success(); })
            .Case([&](rt::AllocOp a) {
              return a.emitOpError("must be placed by the memory planner "
                                   "(rt-plan-memory) before lowering");
            })
            .Default([](Operation *other) {
              return other->emitOpError("has no lowering to a launch table");
            });
    if (failed(ok))
      return failure();
  }
  words.push_back(abi::kOpEnd);
  return success();
}

struct ConvertRtToLLVMPass
    : public shardc::impl::ConvertRtToLLVMBase<ConvertRtToLLVMPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder b(module.getBody(), module.getBody()->begin());
    ProgramWriter writer(module);
    SmallVector<func::FuncOp> steps;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (!fn.getName().starts_with(attrs::kEntryPrefix)) {
        fn.emitError("step function names start with '")
            << attrs::kEntryPrefix << "'";
        return signalPassFailure();
      }
      steps.push_back(fn);
    }
    auto i64 = b.getI64Type();
    for (func::FuncOp fn : steps) {
      SmallVector<int64_t> words;
      if (failed(writer.encode(fn, words)))
        return signalPassFailure();
      std::string symbol =
          (abi::kProgramSymbolPrefix +
           fn.getName().drop_front(attrs::kEntryPrefix.size()))
              .str();
      auto type = RankedTensorType::get({int64_t(words.size())}, i64);
      LLVM::GlobalOp::create(b, fn.getLoc(),
                             LLVM::LLVMArrayType::get(i64, words.size()),
                             /*isConstant=*/true, LLVM::Linkage::External,
                             symbol, DenseElementsAttr::get(type, ArrayRef(words)),
                             /*alignment=*/8);
    }
    if (!writer.constants().empty())
      LLVM::GlobalOp::create(
          b, module.getLoc(),
          LLVM::LLVMArrayType::get(b.getI8Type(), writer.constants().size()),
          /*isConstant=*/true, LLVM::Linkage::External, abi::kConstantsSymbol,
          b.getStringAttr(writer.constants()), abi::kBufferAlignment);
    if (failed(emitManifest(module, b, steps, writer.constants().size())))
      return signalPassFailure();
    for (func::FuncOp fn : steps)
      fn.erase();
  }

  /// Completes the module's manifest with the arena each entry needs and
  /// moves it into the global the runtime reads.
  LogicalResult emitManifest(ModuleOp module, OpBuilder &b,
                             ArrayRef<func::FuncOp> steps,
                             int64_t constantsBytes) {
    auto manifest = module->getAttrOfType<DictionaryAttr>(attrs::kManifest);
    if (!manifest)
      return success();
    int64_t arenaBytes = 0;
    SmallVector<Attribute> arenas;
    for (func::FuncOp fn : steps) {
      auto bytes = fn->getAttrOfType<IntegerAttr>(attrs::kArenaBytes);
      if (!bytes)
        continue;
      // A host entry's arena is host memory of its own (--offload=cpu).
      bool onHost = fn->hasAttr(attrs::kOnHost);
      if (!onHost)
        arenaBytes = std::max(arenaBytes, bytes.getInt());
      // Per entry, by the name the runtime runs it: its arena, its FLOPs
      // (GEMMs and attention, RtFlops.h), whether it runs on the host.
      SmallVector<NamedAttribute> entry = {
          b.getNamedAttr("symbol", b.getStringAttr(fn.getName())),
          b.getNamedAttr("entry",
                         b.getStringAttr(fn.getName().drop_front(
                             attrs::kEntryPrefix.size()))),
          b.getNamedAttr("arena_bytes", bytes),
          b.getNamedAttr("flops", b.getI64IntegerAttr(entryFlops(fn)))};
      if (onHost)
        entry.push_back(b.getNamedAttr("host", b.getBoolAttr(true)));
      if (auto gathered =
              fn->getAttrOfType<IntegerAttr>(attrs::kPeakGatheredBytes))
        entry.push_back(b.getNamedAttr("peak_gathered_bytes", gathered));
      arenas.push_back(b.getDictionaryAttr(entry));
    }
    NamedAttrList entries(manifest);
    entries.set("arena_bytes", b.getI64IntegerAttr(arenaBytes));
    entries.set("arenas", b.getArrayAttr(arenas));
    entries.set("constants_bytes", b.getI64IntegerAttr(constantsBytes));
    std::string json;
    llvm::raw_string_ostream os(json);
    os << toJSON(entries.getDictionary(&getContext()));
    json.push_back('\0');
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), json.size());
    LLVM::GlobalOp::create(b, module.getLoc(), type, /*isConstant=*/true,
                           LLVM::Linkage::External, abi::kManifestSymbol,
                           b.getStringAttr(json));
    module->removeAttr(attrs::kManifest);
    return success();
  }
};

} // namespace
