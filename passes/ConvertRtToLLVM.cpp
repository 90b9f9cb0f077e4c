//===- ConvertRtToLLVM.cpp - rt step functions to the LLVM dialect --------===//
//
// Kernel ABI (runtime/kernels.h):
//   void shardc_k_<name>(void *ctx, void **buffers, const int64_t *ints,
//                        const double *floats, int64_t stream);
// Buffers go in a stack array; ints and floats are private constant
// globals, shared between kernels with equal arguments.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"

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

LLVM::LLVMFuncOp declareFunction(OpBuilder &b, ModuleOp module, StringRef name,
                                 LLVM::LLVMFunctionType type) {
  if (auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
    return fn;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  return LLVM::LLVMFuncOp::create(b, module.getLoc(), name, type);
}

/// A private constant global holding `values`, reused when one with the same
/// contents exists.
template <typename T>
Value constantArray(OpBuilder &b, ModuleOp module, Location loc, Type elt,
                    StringRef prefix, ArrayRef<T> values) {
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  if (values.empty())
    return LLVM::ZeroOp::create(b, loc, ptrType);
  auto tensor = RankedTensorType::get({int64_t(values.size())}, elt);
  DenseElementsAttr data = DenseElementsAttr::get(tensor, values);
  const char *bytes = reinterpret_cast<const char *>(values.data());
  uint64_t hash = llvm::hash_combine_range(bytes, bytes + values.size() * sizeof(T));
  LLVM::GlobalOp global;
  for (unsigned suffix = 0;; ++suffix) {
    std::string name =
        (prefix + llvm::utohexstr(hash) + "_" + llvm::Twine(suffix)).str();
    global = module.lookupSymbol<LLVM::GlobalOp>(name);
    if (!global) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      global = LLVM::GlobalOp::create(
          b, loc, LLVM::LLVMArrayType::get(elt, values.size()),
          /*isConstant=*/true, LLVM::Linkage::Private, name, data);
      break;
    }
    if (global.getValueAttr() == data)
      break;
  }
  return LLVM::AddressOfOp::create(b, loc, global);
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

struct ConstantLowering : public ConvertOpToLLVMPattern<rt::ConstantOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(rt::ConstantOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type elt = op.getValue().getElementType();
    if (!elt.isF32() && !elt.isInteger(1) && !elt.isInteger(32) &&
        !elt.isInteger(64))
      return op.emitOpError("holds ") << elt << ", which the runtime cannot store";
    auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
    if (!dense)
      return op.emitOpError("holds a non-dense value");
    std::string bytes = runtimeBytes(dense);
    if (bytes.empty())
      bytes.assign(1, '\0');
    auto module = op->getParentOfType<ModuleOp>();
    std::string name;
    for (unsigned k = 0;; ++k) {
      name = "__rt_const_" + std::to_string(k);
      if (!module.lookupSymbol(name))
        break;
    }
    LLVM::GlobalOp global;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(module.getBody());
      global = LLVM::GlobalOp::create(
          rewriter, op.getLoc(),
          LLVM::LLVMArrayType::get(rewriter.getI8Type(), bytes.size()),
          /*isConstant=*/true, LLVM::Linkage::Private, name,
          rewriter.getStringAttr(bytes), /*alignment=*/64);
    }
    rewriter.replaceOpWithNewOp<LLVM::AddressOfOp>(op, global);
    return success();
  }
};

struct ViewLowering : public ConvertOpToLLVMPattern<rt::ViewOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(rt::ViewOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value offset = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI64Type(),
                                            op.getOffset());
    rewriter.replaceOpWithNewOp<LLVM::GEPOp>(
        op, getVoidPtrType(), rewriter.getI8Type(), adaptor.getBase(),
        ArrayRef<LLVM::GEPArg>{offset});
    return success();
  }
};

struct KernelLowering : public ConvertOpToLLVMPattern<rt::KernelOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(rt::KernelOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto module = op->getParentOfType<ModuleOp>();
    Type ptr = getVoidPtrType();
    auto fnType = LLVM::LLVMFunctionType::get(
        LLVM::LLVMVoidType::get(rewriter.getContext()),
        {ptr, ptr, ptr, ptr, rewriter.getI64Type()});
    LLVM::LLVMFuncOp callee = declareFunction(
        rewriter, module, ("shardc_k_" + op.getName()).str(), fnType);

    ValueRange buffers = adaptor.getBuffers();
    Value count = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI64Type(),
                                           std::max<int64_t>(buffers.size(), 1));
    Value array = LLVM::AllocaOp::create(rewriter, loc, ptr, ptr, count);
    for (auto [i, buffer] : llvm::enumerate(buffers)) {
      Value slot = LLVM::GEPOp::create(rewriter, loc, ptr, ptr, array,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(rewriter, loc, buffer, slot);
    }
    Value ints = constantArray<int64_t>(rewriter, module, loc,
                                        rewriter.getI64Type(), "__rt_ints_",
                                        op.getInts());
    Value floats = constantArray<double>(rewriter, module, loc,
                                         rewriter.getF64Type(), "__rt_floats_",
                                         op.getFloats());
    Value stream = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI64Type(),
                                            op.getStream());
    rewriter.replaceOpWithNewOp<LLVM::CallOp>(
        op, callee, ValueRange{adaptor.getCtx(), array, ints, floats, stream});
    return success();
  }
};

template <typename EventOp>
struct EventLowering : public ConvertOpToLLVMPattern<EventOp> {
  EventLowering(const LLVMTypeConverter &converter, StringRef symbol)
      : ConvertOpToLLVMPattern<EventOp>(converter), symbol(symbol) {}
  LogicalResult
  matchAndRewrite(EventOp op, typename EventOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type ptr = this->getVoidPtrType(), i64 = rewriter.getI64Type();
    auto fnType = LLVM::LLVMFunctionType::get(
        LLVM::LLVMVoidType::get(rewriter.getContext()), {ptr, i64, i64});
    LLVM::LLVMFuncOp callee = declareFunction(
        rewriter, op->template getParentOfType<ModuleOp>(), symbol, fnType);
    Value event = LLVM::ConstantOp::create(rewriter, loc, i64, op.getEvent());
    Value stream = LLVM::ConstantOp::create(rewriter, loc, i64, op.getStream());
    rewriter.replaceOpWithNewOp<LLVM::CallOp>(
        op, callee, ValueRange{adaptor.getCtx(), event, stream});
    return success();
  }
  std::string symbol;
};

struct ConvertRtToLLVMPass
    : public shardc::impl::ConvertRtToLLVMBase<ConvertRtToLLVMPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (failed(emitManifests(module)))
      return signalPassFailure();

    LLVMTypeConverter converter(ctx);
    converter.addConversion(
        [ctx](rt::BufferType) { return LLVM::LLVMPointerType::get(ctx); });
    converter.addConversion(
        [ctx](rt::ContextType) { return LLVM::LLVMPointerType::get(ctx); });

    RewritePatternSet patterns(ctx);
    populateFuncToLLVMConversionPatterns(converter, patterns);
    patterns.add<ConstantLowering, ViewLowering, KernelLowering>(converter);
    patterns.add<EventLowering<rt::EventRecordOp>>(converter,
                                                   "shardc_event_record");
    patterns.add<EventLowering<rt::EventWaitOp>>(converter,
                                                 "shardc_event_wait");

    LLVMConversionTarget target(*ctx);
    target.addLegalOp<ModuleOp>();
    if (failed(applyFullConversion(module, target, std::move(patterns))))
      signalPassFailure();
  }

  /// Completes the module's manifest with the arena each entry needs and
  /// moves it into the global the runtime reads.
  LogicalResult emitManifests(ModuleOp module) {
    auto manifest = module->getAttrOfType<DictionaryAttr>(attrs::kManifest);
    if (!manifest)
      return success();
    OpBuilder b(module.getBody(), module.getBody()->begin());
    int64_t arenaBytes = 0;
    SmallVector<Attribute> arenas;
    for (auto fn : module.getOps<func::FuncOp>()) {
      auto bytes = fn->getAttrOfType<IntegerAttr>(attrs::kArenaBytes);
      if (!bytes)
        continue;
      arenaBytes = std::max(arenaBytes, bytes.getInt());
      SmallVector<NamedAttribute> entry = {
          b.getNamedAttr("symbol", b.getStringAttr(fn.getName())),
          b.getNamedAttr("arena_bytes", bytes)};
      if (auto gathered = fn->getAttrOfType<IntegerAttr>(attrs::kPeakGatheredBytes))
        entry.push_back(b.getNamedAttr("peak_gathered_bytes", gathered));
      arenas.push_back(b.getDictionaryAttr(entry));
      fn->removeAttr(attrs::kArenaBytes);
      fn->removeAttr(attrs::kPeakGatheredBytes);
    }
    NamedAttrList entries(manifest);
    entries.set("arena_bytes", b.getI64IntegerAttr(arenaBytes));
    entries.set("arenas", b.getArrayAttr(arenas));
    std::string json;
    llvm::raw_string_ostream os(json);
    os << toJSON(entries.getDictionary(&getContext()));
    json.push_back('\0');
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), json.size());
    LLVM::GlobalOp::create(b, module.getLoc(), type, /*isConstant=*/true,
                           LLVM::Linkage::External, attrs::kManifestSymbol,
                           b.getStringAttr(json));
    module->removeAttr(attrs::kManifest);
    return success();
  }
};

} // namespace
