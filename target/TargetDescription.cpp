//===- TargetDescription.cpp - the targets shardc compiles for ------------===//
#include "target/TargetDescription.h"

#include "runtime/abi/abi.h"

#include <algorithm>

#if !defined(SHARDC_RUNTIME_LIBS) || !defined(SHARDC_MPI_LIBS)
#error "SHARDC_RUNTIME_LIBS and SHARDC_MPI_LIBS must list the link flags"
#endif

using namespace shardc;

namespace {

std::vector<std::string> splitCommas(const std::string &s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos)
      comma = s.size();
    if (comma > start)
      out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string typeList(const std::vector<int64_t> &codes) {
  std::string s;
  for (int64_t c : codes)
    s += (s.empty() ? "" : ", ") + std::string(abi::dtypeName(c));
  return s;
}

const std::vector<TargetDescription> &targets() {
  static const std::vector<TargetDescription> table = [] {
    TargetDescription cpu;
    cpu.name = "cpu";
    cpu.summary = "host CPU: oneDNN GEMMs, OpenMP kernels, MPI collectives";
    // bf16 is stored, and computed on in f32 (runtime/cpu/typed.h).
    cpu.computeTypes = {abi::kF32, abi::kBF16};
    cpu.indexTypes = {abi::kI32, abi::kBool};
    cpu.alignment = abi::kBufferAlignment;
    cpu.runtimeLibraries = {"libshardc_rt_main.a", "libshardc_rt.a"};
    cpu.linkFlags = splitCommas(SHARDC_RUNTIME_LIBS);
    cpu.mpiLibraries = {"libshardc_mesh_mpi.a"};
    cpu.mpiLinkFlags = splitCommas(SHARDC_MPI_LIBS);
    cpu.localMeshLibrary = "libshardc_mesh_local.a";
    // The fused kernels have OpenMP twins (runtime/cpu): the fusions cut
    // the element-wise passes over memory on the CPU as on the GPU.
    cpu.gemmEpilogues = true;
    cpu.groupedKernels = true;
    cpu.fusedResidualNorm = true;
    cpu.fusedSwiglu = true;
    cpu.chunkedLossHead = true;
    TargetDescription cuda = cpu;
    // The CPU backend's kernel table holds its (MPI) collectives.
    cpu.linkFlags.push_back("-Xlinker");
    cpu.linkFlags.push_back("--undefined=shardc_make_cpu_backend");
    std::vector<TargetDescription> all = {cpu};
    // The CUDA target: one NVIDIA GPU (sm_80, sm_90), cuBLASLt GEMMs, CUDA
    // kernels; bf16 stored, f32 math (cuBLASLt's bf16 GEMMs accumulate in
    // f32). One GPU needs no MPI.
    cuda.name = "cuda";
    cuda.computeTypes = {abi::kF32, abi::kBF16};
    cuda.summary = "one NVIDIA GPU: CUDA kernels, cuBLASLt GEMMs, cuDNN "
                   "attention";
    cuda.collectivesOnOneRank = false;
    cuda.gemmEpilogues = true;
    cuda.tf32 = true; // CUBLAS_COMPUTE_32F_FAST_TF32 (--allow-tf32)
    cuda.gemmAuxLdMultiple = 8; // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD
    cuda.groupedKernels = true;
    cuda.fusedResidualNorm = true;
    cuda.fusedSwiglu = true;
    cuda.chunkedLossHead = true;
    cuda.fusedAttention = true;
    // Ranks that share a GPU run the CPU backend's MPI collectives on
    // staged host copies (runtime/cuda/host_staged.cpp).
    cuda.mpiLinkFlags.push_back("-Xlinker");
    cuda.mpiLinkFlags.push_back("--undefined=shardc_k_all_gather");
    // --offload=cpu: the optimizer step runs on the CPU backend.
    cuda.hostEntryLinkFlags = {"-Xlinker", "--undefined=shardc_make_cpu_backend"};
#ifdef SHARDC_CUDA_LIBS
    // Built where nvcc was found.
    TargetDescription gpu = cuda;
    gpu.runtimeLibraries = {"libshardc_rt_main.a", "libshardc_rt_cuda.a",
                            "libshardc_rt.a"};
    for (const std::string &flag : splitCommas(SHARDC_CUDA_LIBS))
      gpu.linkFlags.push_back(flag);
    all.push_back(gpu);
#endif
#ifdef SHARDC_CUDA_EMU_LIBS
    // The same target on the emulated CUDA device (runtime/cuda_emu), built
    // where the CUDA toolkit's headers were found.
    TargetDescription emu = cuda;
    emu.emulated = true;
    emu.summary = "the CUDA target on the emulated CUDA device (host)";
    emu.runtimeLibraries = {"libshardc_rt_main.a", "libshardc_rt_cuda_emu.a",
                            "libshardc_nccl_emu.a", "libshardc_cuda_emu.a",
                            "libshardc_rt.a"};
    // Its NCCL runs over MPI, one rank included.
    emu.collectivesOnOneRank = true;
    for (const std::string &flag : splitCommas(SHARDC_CUDA_EMU_LIBS))
      emu.linkFlags.push_back(flag);
    all.push_back(emu);
#endif
    return all;
  }();
  return table;
}

} // namespace

bool TargetDescription::computes(int64_t code) const {
  return std::find(computeTypes.begin(), computeTypes.end(), code) !=
         computeTypes.end();
}

bool TargetDescription::indexes(int64_t code) const {
  return std::find(indexTypes.begin(), indexTypes.end(), code) !=
         indexTypes.end();
}

std::string TargetDescription::computeTypeList() const {
  return typeList(computeTypes);
}

std::string TargetDescription::indexTypeList() const {
  return typeList(indexTypes);
}

const TargetDescription *shardc::lookupTarget(const std::string &name,
                                              bool emulated) {
  for (const TargetDescription &t : targets())
    if (t.name == name && t.emulated == emulated)
      return &t;
  return nullptr;
}

std::string shardc::targetNames() {
  std::string s;
  for (const TargetDescription &t : targets())
    if (s.find(t.name) == std::string::npos)
      s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

const TargetDescription &shardc::defaultTarget() { return targets().front(); }
