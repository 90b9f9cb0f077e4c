//===- StepBuilder.h - convert-nn-to-rt's state and op table -*- C++ -*-===//
//
// convert-nn-to-rt lowers a model function's ops in order. The StepBuilder
// holds what that walk shares: the buffer bound to each tensor, the
// reserved output views, the collectives still pending on the compute
// stream. Each op has one lowering function (passes/conversion/NNToRt/*.cpp), found by
// its name in the table that lowerings() builds once, as torch-mlir's ONNX
// importer has one pattern per op.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_LOWER_STEPBUILDER_H
#define SHARDC_PASSES_LOWER_STEPBUILDER_H

#include "dialects/fsdp/FSDPDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/rt/RtDialect.h"
#include "runtime/abi/abi.h"
#include "target/Attrs.h"
#include "target/TargetDescription.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <functional>

namespace shardc::lower {

using K = abi::KernelId;

inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType());
}
inline int64_t elementBytes(mlir::Type t) {
  return (t.getIntOrFloatBitWidth() + 7) / 8;
}
inline int64_t byteSize(mlir::Value v) {
  mlir::RankedTensorType t = tensorType(v);
  return t.getNumElements() * elementBytes(t.getElementType());
}
inline int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}
/// Element strides of an operand of `shape` read at each index of a
/// broadcast result of rank `rank` (0 where the operand is broadcast).
llvm::SmallVector<int64_t> broadcastStrides(llvm::ArrayRef<int64_t> shape,
                                            int64_t rank);

/// Lowers one model function into the body of a step function.
class StepBuilder {
public:
  StepBuilder(mlir::OpBuilder &builder, mlir::Value ctx,
              const TargetDescription &target)
      : b(builder), ctx(ctx), target(target) {}

  /// Binds a tensor to an existing buffer (parameter, input or output view).
  void bind(mlir::Value tensor, mlir::Value buffer) {
    buffers[tensor] = buffer;
  }
  void reserveOutput(mlir::Value tensor, mlir::Value buffer) {
    outputs[tensor] = buffer;
  }

  /// Lowers `op` by its entry in the table; an op without one is an error
  /// naming it.
  mlir::LogicalResult lower(mlir::Operation *op);

  // What the lowering functions use.

  mlir::Value buf(mlir::Value tensor) { return buffers.lookup(tensor); }
  /// The reserved output view of `result`, or null.
  mlir::Value output(mlir::Value result) { return outputs.lookup(result); }
  /// `result` reads the bytes of `buffer` (a reshape, a prefix, a no-op).
  void alias(mlir::Value result, mlir::Value buffer) {
    buffers[result] = buffer;
  }
  /// The buffer an op writes its result to: the reserved output view if the
  /// result is returned, a fresh transient allocation otherwise.
  mlir::Value define(mlir::Value result);
  /// Whether `buffer` is a transient allocation whose tensors (it and the
  /// views that alias it: reshapes, leading-row slices) are used by no op
  /// after `op`.
  bool onlyReadUpTo(mlir::Value buffer, mlir::Operation *op);

  /// A compute kernel on stream 0; it first waits for the collectives that
  /// produced any of its buffers.
  void kernel(mlir::Location loc, K id, mlir::ValueRange bufs,
              llvm::ArrayRef<int64_t> ints, llvm::ArrayRef<double> floats = {});
  /// An elementwise op over the NumPy broadcast of its operands (add, where,
  /// broadcast_to, ...): one kernel reading each operand with its strides.
  void broadcastKernel(mlir::Operation *op, K id,
                       llvm::ArrayRef<int64_t> extra = {});

  /// `result` = all-gather of `input` on dim 0 over grid axis `axis`
  /// (within groups of `subgroup` ranks if non-zero).
  void gather(mlir::Operation *op, mlir::Value input, mlir::Value result,
              int64_t axis, int64_t subgroup);
  /// Orders a collective after the compute that produced its input (event
  /// on the compute stream waited on the communication stream).
  void beforeCollective(mlir::Location loc);
  /// After a collective: its output is pending until a compute kernel
  /// waits for it.
  void afterCollective(mlir::Location loc, mlir::Value out);

  /// The FSDP group attribute of a collective, or null.
  static mlir::IntegerAttr groupOf(mlir::Operation *op);
  /// The single grid axis of a collective (shard axis or replicate axis).
  static mlir::FailureOr<int64_t> axisOf(mlir::Operation *op,
                                         llvm::ArrayRef<int16_t> axes);

  mlir::OpBuilder &b;
  mlir::Value ctx;
  const TargetDescription &target;

  /// The float8 casts made so far (Float8.cpp), by what they cast: the
  /// tensor (under its reshapes, which keep its bytes), its stored rows and
  /// columns, the fp8 format, rowwise and the layout (kFirst). GEMMs that
  /// read one tensor alike (q, k and v of one norm's output) share its
  /// cast: its fp8 buffer and scales; a tensorwise cast of an activation or
  /// a gradient read in the other layout too writes both (cast_fp8's both).
  using Float8CastKey =
      std::tuple<mlir::Value, int64_t, int64_t, int64_t, int64_t, int64_t>;
  struct Float8Cast {
    mlir::Value q, scale;
    mlir::Operation *kernel;
  };
  llvm::DenseMap<Float8CastKey, Float8Cast> float8Casts;
  /// The tensors float8 linears read as weights (under reshapes): never
  /// cast in both layouts at once, which would keep a transposed fp8 copy
  /// of a gathered weight from the forward to the backward.
  llvm::DenseSet<mlir::Value> float8Weights;

private:
  mlir::LogicalResult checkSupported(mlir::Operation *op, bool typed);

  /// The op being lowered: its element type is the dtype of its typed
  /// kernels.
  mlir::Operation *current = nullptr;

  llvm::DenseMap<mlir::Value, int64_t> pending;
  int64_t nextEvent = 0;
  llvm::DenseMap<mlir::Value, mlir::Value> buffers;
  llvm::DenseMap<mlir::Value, mlir::Value> outputs;
};

/// The lowering of one op.
using LowerFn = mlir::LogicalResult (*)(StepBuilder &, mlir::Operation *);

/// The op table: op name -> its lowering.
class LoweringTable {
public:
  /// Registers `fn` for op class `Op`, whose kernels compute in f32 only.
  template <typename Op>
  void add(mlir::LogicalResult (*fn)(StepBuilder &, Op)) {
    entries[Op::getOperationName()] = {
        [fn](StepBuilder &s, mlir::Operation *op) {
          return fn(s, mlir::cast<Op>(op));
        },
        /*typed=*/false};
  }
  /// Registers `fn` for op class `Op`, whose kernels are typed: they
  /// compute on the op's element type, f32 or bf16 (kernels.def).
  template <typename Op>
  void addTyped(mlir::LogicalResult (*fn)(StepBuilder &, Op)) {
    add(fn);
    entries[Op::getOperationName()].typed = true;
  }
  /// Registers `fn` for each of the op classes `Ops` (f32 only).
  template <typename... Ops> void addAll(LowerFn fn) {
    (entries.insert_or_assign(Ops::getOperationName(), Entry{fn, false}), ...);
  }

  struct Entry {
    std::function<mlir::LogicalResult(StepBuilder &, mlir::Operation *)> fn;
    /// Its kernels compute on bf16 as well as f32.
    bool typed = false;
  };
  /// The lowering of `op`, or null if it has none.
  const Entry *find(mlir::Operation *op) const {
    auto it = entries.find(op->getName().getStringRef());
    return it == entries.end() ? nullptr : &it->second;
  }

private:
  llvm::StringMap<Entry> entries;
};

/// An operand of a float8 GEMM: `value` stored [rows, cols], its reduction
/// axis the columns, or the rows when `kFirst`; `isGrad`: it is an output
/// gradient (dialects/nn/Float8.h).
struct Float8Operand {
  mlir::Value value;
  int64_t rows, cols;
  bool kFirst, isGrad;
  /// A linear's weight (StepBuilder::float8Weights).
  bool isWeight = false;
};

/// y = a b^T in float8 under `recipe` (Float8.cpp): each operand cast to
/// fp8 K-major with its scales, then one FP8 GEMM, plus `bias` if set.
mlir::LogicalResult lowerFloat8Gemm(StepBuilder &s, mlir::Operation *gemm,
                                    llvm::StringRef recipe,
                                    const Float8Operand &a,
                                    const Float8Operand &b, mlir::Value bias,
                                    mlir::Value result);

/// The table of every op convert-nn-to-rt lowers, built once.
const LoweringTable &lowerings();

/// The element type `op` computes on: that of its first float result, else
/// of its first float operand; null if it has neither.
mlir::Type computeType(mlir::Operation *op);

// Each file of passes/conversion/NNToRt/ adds its ops.
void addForwardLowerings(LoweringTable &table);    // Forward.cpp
void addBackwardLowerings(LoweringTable &table);   // Backward.cpp
void addTrainingLowerings(LoweringTable &table);   // Training.cpp
void addCollectiveLowerings(LoweringTable &table); // Collectives.cpp
void addTensorLowerings(LoweringTable &table);     // Tensor.cpp

} // namespace shardc::lower

#endif // SHARDC_PASSES_LOWER_STEPBUILDER_H
