//===- RtMatch.h - what the rt rewrite passes share ---------------*- C++ -*-===//
//
// The kernel test and the target lookup of the target-aware rt passes
// (rt-fuse-epilogues, rt-fuse-residual-norm, rt-group-optimizer), the shape
// of a plain add (rt-fuse-residual-norm, rt-attention-layout,
// rt-fuse-norm-grad-add), the buffer under views (rt-slice-views,
// rt-fuse-norm-grad-add), moving an output's definition up (rt-fuse-casts,
// rt-fuse-norm-grad-add), and the stream of a launch (rt-offload-to-host,
// rt-plan-memory).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_RTMATCH_H
#define SHARDC_PASSES_RTMATCH_H

#include "dialects/rt/RtDialect.h"
#include "runtime/abi/abi.h"
#include "target/TargetDescription.h"
#include "llvm/ADT/SetVector.h"

namespace shardc {

/// Whether `op` is an rt.kernel of kernel `id`.
inline bool isKernel(mlir::Operation *op, abi::KernelId id) {
  auto k = llvm::dyn_cast_or_null<rt::KernelOp>(op);
  return k && k.getName() == abi::kernelInfo(id).name;
}

/// Whether `op` is an rt.kernel of kernel `id` computing in f32: the
/// chunked loss head's f32 form matches f32 kernels (its bf16 form is its
/// own); the other rewrites match kernels of either dtype.
inline bool isF32Kernel(mlir::Operation *op, abi::KernelId id) {
  return isKernel(op, id) &&
         llvm::cast<rt::KernelOp>(op).getComputeType().isF32();
}

/// The rows and columns [M, C] of an `add` of two contiguous tensors of one
/// shape (no broadcast; C its innermost dimension), or {-1, -1}. A
/// dimension of size 1 may have any stride (convert-nn-to-rt gives it 0, as
/// to a broadcast one: a micro-batch of 1 is [1, T, C]).
inline std::pair<int64_t, int64_t> plainAdd(rt::KernelOp add) {
  llvm::ArrayRef<int64_t> i = add.getInts();
  int64_t R = i[abi::add::R];
  if (R < 1 || int64_t(i.size()) != abi::add::kNumInts + 3 * R)
    return {-1, -1};
  const int64_t *dims = i.data() + abi::add::kNumInts;
  const int64_t *astr = dims + R, *bstr = astr + R;
  int64_t stride = 1;
  for (int64_t d = R - 1; d >= 0; --d) {
    if (dims[d] != 1 && (astr[d] != stride || bstr[d] != stride))
      return {-1, -1};
    stride *= dims[d];
  }
  return {stride / dims[R - 1], dims[R - 1]};
}

/// The buffer `v` views (through any views), or `v` itself.
inline mlir::Value viewRoot(mlir::Value v) {
  while (auto view = v.getDefiningOp<rt::ViewOp>())
    v = view.getBase();
  return v;
}

/// Whether `op` has a buffer operand viewing one of `roots` (by viewRoot).
inline bool touchesRoots(mlir::Operation *op, llvm::ArrayRef<mlir::Value> roots) {
  return llvm::any_of(op->getOperands(), [&](mlir::Value v) {
    return llvm::isa<rt::BufferType>(v.getType()) &&
           llvm::is_contained(roots, viewRoot(v));
  });
}

/// Whether buffer `y` is defined before `op` (in its block), or can be: an
/// allocation, or a view of a value defined before it (rt-fuse-casts,
/// rt-fuse-norm-grad-add make a later kernel's output an earlier one's).
inline bool hoistable(mlir::Value y, mlir::Operation *op) {
  mlir::Operation *def = y.getDefiningOp();
  if (!def || def->getBlock() != op->getBlock() || def->isBeforeInBlock(op))
    return true;
  if (llvm::isa<rt::AllocOp>(def))
    return true;
  auto view = llvm::dyn_cast<rt::ViewOp>(def);
  if (!view)
    return false;
  mlir::Operation *base = view.getBase().getDefiningOp();
  return !base || base->getBlock() != op->getBlock() ||
         base->isBeforeInBlock(op);
}

/// Moves the definition of `y` (hoistable to `op`) before `op` where it
/// follows it.
inline void hoistBefore(mlir::Value y, mlir::Operation *op) {
  mlir::Operation *def = y.getDefiningOp();
  if (def && def->getBlock() == op->getBlock() && !def->isBeforeInBlock(op))
    def->moveBefore(op);
}

/// Erases the kernels among `ops`, then those of its allocations that
/// nothing uses any more: each op once, sorted before any is erased (an
/// erased op is not read again). Other ops (views) stay.
inline void eraseKernelsThenAllocs(llvm::ArrayRef<mlir::Operation *> ops) {
  llvm::SetVector<mlir::Operation *> kernels, allocs;
  for (mlir::Operation *op : ops)
    if (op && llvm::isa<rt::KernelOp>(op))
      kernels.insert(op);
    else if (op && llvm::isa<rt::AllocOp>(op))
      allocs.insert(op);
  for (mlir::Operation *op : kernels)
    op->erase();
  for (mlir::Operation *op : allocs)
    if (op->use_empty())
      op->erase();
}

/// The stream a kernel or collective runs on, or -1 for ops that launch
/// nothing (views, events, allocations).
inline int64_t streamOf(mlir::Operation *op) {
  if (auto k = llvm::dyn_cast<rt::KernelOp>(op))
    return k.getStream();
  if (auto g = llvm::dyn_cast<rt::AllGatherOp>(op))
    return g.getStream();
  if (auto r = llvm::dyn_cast<rt::ReduceScatterOp>(op))
    return r.getStream();
  if (auto r = llvm::dyn_cast<rt::AllReduceOp>(op))
    return r.getStream();
  return -1;
}

/// The description of target `name`, or null after an error on `op`
/// naming it and the targets this shardc has.
inline const TargetDescription *lookupTargetOf(mlir::Operation *op,
                                               llvm::StringRef name) {
  const TargetDescription *t = lookupTarget(name.str());
  if (!t)
    op->emitError("unknown target '")
        << name << "' (this shardc has: " << targetNames() << ")";
  return t;
}

/// What the GEMMs of the rt program under `op` compute in (the manifest's
/// abi::kManifestComputeDtype, the peak of --predict's MFU): "bf16" if any
/// kernel computes in bf16, else "tf32" under --allow-tf32, else "f32".
inline llvm::StringRef programComputeDtype(mlir::Operation *op,
                                           bool allowTf32) {
  bool bf16 = false;
  op->walk([&](rt::KernelOp k) { bf16 |= k.getComputeType().isBF16(); });
  return bf16 ? "bf16" : allowTf32 ? "tf32" : "f32";
}

} // namespace shardc

#endif // SHARDC_PASSES_RTMATCH_H
