//===- Attrs.h - attribute names the layers share ---------------*- C++ -*-===//
//
// The discardable attributes the frontends put on a model function and the
// dialects and passes read, by name, in one place. Header-only and free of
// generated headers, below the dialects and the passes (target/), so the
// frontends and the dialects include it without depending on the passes.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TARGET_ATTRS_H
#define SHARDC_TARGET_ATTRS_H

#include "llvm/ADT/StringRef.h"

namespace shardc {

/// Attribute names shared by the frontends, the passes and the runtime.
namespace attrs {
/// On a model function argument: the parameter's checkpoint name.
constexpr llvm::StringLiteral kParam = "nn.param";
/// On a parameter: "normal" (with kInitStd), "zeros" or "ones".
constexpr llvm::StringLiteral kInit = "nn.init";
constexpr llvm::StringLiteral kInitStd = "nn.init_std";
/// On a model function argument: the input's name ("tokens", "targets").
constexpr llvm::StringLiteral kInput = "nn.input";
/// On a model function argument: persistent training state (gradient
/// accumulators "grad.<param>", optimizer states "exp_avg.<param>", ...).
constexpr llvm::StringLiteral kState = "nn.state";
/// On a model function result: written to the io region under this name.
constexpr llvm::StringLiteral kOutput = "nn.output";
/// On an input argument or an output result computed in f32: the element
/// type of its file ("f64", "f16", "bf16"), converted at the boundary.
constexpr llvm::StringLiteral kFileDtype = "nn.file_dtype";
/// On a model function result: the index of the argument it updates in place.
constexpr llvm::StringLiteral kUpdates = "nn.updates";
/// On a forward op: the transformer block it belongs to.
constexpr llvm::StringLiteral kBlock = "nn.block";
/// On a sharded parameter argument: its group (-1: the root group) and its
/// global shape; on gathers: the group they gather.
constexpr llvm::StringLiteral kGroup = "fsdp.group";
constexpr llvm::StringLiteral kGlobalShape = "fsdp.shape";
/// On the module: the mesh shape [R, S] (R = 1 without replication), or
/// [R, S, T] with tensor parallelism (abi::MeshGrid).
constexpr llvm::StringLiteral kMesh = "fsdp.mesh";
/// On a parameter argument under tensor parallelism (tp-partition): the dim
/// its tp ranks split (its type is then the tp-local shape), or -1 where
/// every tp rank holds it whole.
constexpr llvm::StringLiteral kTpDim = "tp.dim";
/// With kTpDim: the split dim is `tp.blocks` blocks (GPT-2's fused c_attn:
/// q, k, v), each split by tp rank; absent: one block.
constexpr llvm::StringLiteral kTpBlocks = "tp.blocks";
/// On a collective of activations (tp-partition's sequence all-gathers and
/// reduce-scatters): the element type its sums run in, the reduce dtype
/// (fsdp-shard-parameters). A reduce-scatter's input is cast to it; an
/// all-gather's adjoint reduce-scatters its gradient in it.
constexpr llvm::StringLiteral kSumDtype = "tp.sum_dtype";
/// On the module (tp-partition): every tp rank's token input holds the
/// whole sequences (abi::kManifestTpWholeTokens).
constexpr llvm::StringLiteral kTpWholeTokens = "tp.whole_tokens";
/// The name of the device grid.
constexpr llvm::StringLiteral kGridName = "mesh";
/// On the model module: a dictionary describing the model (for the manifest).
constexpr llvm::StringLiteral kModel = "nn.model";
/// On the lowered module: the dictionary the runtime reads to lay out memory.
constexpr llvm::StringLiteral kManifest = "rt.manifest";
/// The prefix of compiled entry points (shardc_micro_step, ...).
constexpr llvm::StringLiteral kEntryPrefix = "shardc_";
/// On a lowered step function: the bytes of arena it needs.
constexpr llvm::StringLiteral kArenaBytes = "rt.arena_bytes";
/// On a step function the runtime runs on the host (--offload=cpu's
/// optimizer step), with the CPU backend's kernels.
constexpr llvm::StringLiteral kOnHost = "rt.on_host";
/// On a lowered step function: the peak bytes of gathered parameters.
constexpr llvm::StringLiteral kPeakGatheredBytes = "rt.peak_gathered_bytes";
/// On a step function, from rt-predict: its predicted seconds (whole,
/// compute, communication, exposed) and the cost of each kind of launch.
constexpr llvm::StringLiteral kPredict = "rt.predict";
/// On the module, from rt-predict: the machine predicted on (name,
/// summary, the peak FLOP/s of the dtype the GEMMs run in, that dtype, the
/// default memory budget).
constexpr llvm::StringLiteral kPredictMachine = "rt.predict_machine";
} // namespace attrs

} // namespace shardc

#endif // SHARDC_TARGET_ATTRS_H
