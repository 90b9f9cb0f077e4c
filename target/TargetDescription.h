//===- TargetDescription.h - what a backend computes in and links --*- C++ -*-===//
//
// One description per `--target`: the element types its kernels compute
// in, the integer types they index with, the buffer alignment, and the
// runtime libraries and link line of its executables. The frontends, the
// FSDP passes, convert-nn-to-rt and the link step ask it instead of
// assuming "the CPU backend". No MLIR dependency: element types are the
// runtime ABI's dtype codes (runtime/abi/abi.h).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TARGET_TARGETDESCRIPTION_H
#define SHARDC_TARGET_TARGETDESCRIPTION_H

#include <cstdint>
#include <string>
#include <vector>

namespace shardc {

struct TargetDescription {
  /// The name `--target` takes ("cpu").
  std::string name;
  std::string summary;
  /// Floating-point types the kernels compute in (abi dtype codes). Other
  /// float types are only stored and moved (collectives, casts).
  std::vector<int64_t> computeTypes;
  /// Integer and bool types kernels read and write (ids, targets, masks).
  std::vector<int64_t> indexTypes;
  /// Byte alignment of every buffer.
  int64_t alignment = 0;
  /// Runtime libraries in the runtime directory, the trainer's main first;
  /// a shared library (tests that drive entry points) takes all but main.
  std::vector<std::string> runtimeLibraries;
  /// The rest of the link line.
  std::vector<std::string> linkFlags;
  /// The mesh over MPI (its library, then the link line's MPI libraries);
  /// one-rank executables of a target without collectives on one rank
  /// link the one-process mesh (localMeshLibrary) and no MPI instead.
  std::vector<std::string> mpiLibraries, mpiLinkFlags;
  std::string localMeshLibrary;
  bool collectivesOnOneRank = true;
  /// What an executable whose program has host entries (--offload=cpu's
  /// optimizer step) adds to its link line: the CPU backend, which runs
  /// them, with its MPI collectives (so MPI, one rank included).
  std::vector<std::string> hostEntryLinkFlags;
  /// Its GEMMs apply GELU, its gradient and the bias gradient as epilogues
  /// (linear_gelu, linear_dgelu: rt-fuse-epilogues).
  bool gemmEpilogues = false;
  /// Its f32 GEMMs may run on TF32 tensor cores (--allow-tf32).
  bool tf32 = false;
  /// The leading dimension, in elements, of a GELU epilogue's aux matrix
  /// (the pre-activation, N wide) must be a multiple of this (cuBLASLt: 8);
  /// rt-fuse-epilogues keeps other widths unfused.
  int64_t gemmAuxLdMultiple = 1;
  /// It has a residual add fused with the norm after it (add_layer_norm,
  /// add_rms_norm: rt-fuse-residual-norm).
  bool fusedResidualNorm = false;
  /// It has SwiGLU's product and gradient as one kernel each (swiglu,
  /// swiglu_grad: rt-fuse-swiglu).
  bool fusedSwiglu = false;
  /// It has a fused-attention library for bf16 (sdpa, sdpa_grad: cuDNN's
  /// SDPA; rt-fused-attention).
  bool fusedAttention = false;
  /// It computes the LM head and its loss over row chunks
  /// (linear_cross_entropy: rt-chunk-loss-head).
  bool chunkedLossHead = false;
  /// It updates and takes the norm of many parameters in one launch
  /// (adamw_group, squared_norm_group: rt-group-optimizer).
  bool groupedKernels = false;
  /// Linked against the emulated CUDA device (--cuda-emulation).
  bool emulated = false;

  bool computes(int64_t dtypeCode) const;
  bool indexes(int64_t dtypeCode) const;
  /// "f32" or "f32, bf16": for messages.
  std::string computeTypeList() const;
  std::string indexTypeList() const;
};

/// The description of target `name` (its emulated build when `emulated`:
/// --target cuda --cuda-emulation), or null if this shardc has none.
const TargetDescription *lookupTarget(const std::string &name,
                                      bool emulated = false);
/// The targets this shardc was built with, comma-separated ("cpu").
std::string targetNames();
/// The default target: "cpu".
const TargetDescription &defaultTarget();

} // namespace shardc

#endif // SHARDC_TARGET_TARGETDESCRIPTION_H
