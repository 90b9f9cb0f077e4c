//===- context.h - the CUDA backend's context and kernel table ----*- C++ -*-===//
#ifndef SHARDC_RUNTIME_CUDA_CONTEXT_H
#define SHARDC_RUNTIME_CUDA_CONTEXT_H

#include "runtime/abi/abi.h"
#include "runtime/cuda/check.h"
#include "runtime/program/program.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace shardc::runtime {
class Mesh;
}

namespace shardc::runtime::cuda {

/// What a CUDA kernel receives as its `ctx`: the streams of the compiled
/// schedule (abi::Stream), the events that order them, cuBLASLt.
struct Context {
  cudaStream_t streams[abi::kNumStreams] = {};
  std::vector<cudaEvent_t> events;
  cublasLtHandle_t lt = nullptr;
  /// The program's --allow-tf32: f32 GEMMs with
  /// CUBLAS_COMPUTE_32F_FAST_TF32 (gemm.cu).
  bool allowTf32 = false;
  void *workspace = nullptr; ///< cuBLASLt workspace
  /// cuDNN's handle (a cudnnHandle_t), made by the first fused attention
  /// (sdpa.cpp), released with its graphs by sdpaRelease.
  void *cudnn = nullptr;
  size_t workspaceBytes = 0;
  const Mesh *mesh = nullptr;
  /// On a mesh of several ranks: one NCCL communicator per grid axis, split
  /// from a world communicator whose unique id rank 0 broadcast over MPI
  /// (makeCommunicators); and per (axis, N) the communicators of N
  /// consecutive ranks (--reshard-after-forward=N), split on first use.
  ncclComm_t world = nullptr;
  std::vector<ncclComm_t> axes;
  std::map<std::pair<int64_t, int64_t>, ncclComm_t> subgroups;
  /// Ranks of this job share this GPU, which NCCL refuses: no
  /// communicator is made, and collectives go through pinned host memory
  /// and the CPU backend's MPI collectives (host_staged.cpp).
  bool hostStaged = false;

  /// --collective-timeout (watchdog::seconds(); 0: none). With one, the
  /// communicators are non-blocking, and each collective, once complete,
  /// writes its index in the run to `progress` (mapped pinned memory), so
  /// that the watchdog's probe can name the collective a step waits on.
  double timeout = 0;
  struct Issued {
    const char *what;
    int64_t bytes;
  };
  /// The collectives of the run in flight, in stream order (filled when a
  /// run issues them; a replayed graph issues what its capture did).
  std::vector<Issued> *issued = nullptr;
  volatile int64_t *progressHost = nullptr;
  int64_t *progressDevice = nullptr;
  /// Per launch (by its ints) of the program being run: whether it opens
  /// (kGroupOpen) and/or closes (kGroupClose) an NCCL group, around
  /// collectives the schedule issues together (adjacent launches on one
  /// stream, independent of each other; groupsOf in backend.cu).
  static constexpr uint8_t kGroupOpen = 1, kGroupClose = 2;
  const std::map<const int64_t *, uint8_t> *groups = nullptr;
  bool grouping = false;
  std::vector<ncclComm_t> groupComms;
  /// Around a launch's NCCL call: ncclGroupStart before the first of a
  /// group, ncclGroupEnd (waited for on every communicator of the group)
  /// after the last.
  void groupBegin(const int64_t *ints);
  void groupEnd(const int64_t *ints, ncclComm_t comm);
  /// Guards `issued` and the run counter against the watchdog's thread.
  std::mutex progressMutex;
  uint64_t runs = 0;
  bool inRun = false;
  /// Per kernel id: non-zero once a launch met bad input (an id outside
  /// its table, ...), holding the bound it broke. Checked after each run,
  /// so kernels never stop the stream to report.
  int64_t *errors = nullptr;
  /// Device scratch of kernels that need a little (cross-entropy's row
  /// losses); grows on first use of a larger size only.
  void *scratchBuffer = nullptr;
  size_t scratchBytes = 0;
  /// Bumped when the scratch moves: graphs captured before it are stale.
  int64_t scratchGeneration = 0;
  /// The per-block partial sums of squared_norm (kNormBlocks doubles).
  static constexpr int kNormBlocks = 1024;
  double *normPartials = nullptr;

  cudaStream_t stream(int64_t s) const { return streams[s]; }

  /// Streams, cuBLASLt and its workspace, the error flags; on the current
  /// device.
  void create();
  void destroy();
  /// The communicators of `mesh` (several ranks); destroyed by destroy().
  void makeCommunicators();
  /// The communicator of N consecutive ranks of `axis` holding this rank.
  ncclComm_t subgroup(int64_t axis, int64_t N);
  /// After collective `what` of `bytes` is issued on `stream`: counts it,
  /// and with a timeout, marks its completion for the watchdog.
  void issuedCollective(const char *what, int64_t bytes, cudaStream_t stream);
  /// Waits for a non-blocking NCCL call's `result` on `comm` (ncclInProgress:
  /// until the communicator says it is done), then checks it; `call` names
  /// it in the error.
  void ncclDone(ncclResult_t result, ncclComm_t comm, const char *call);
  /// Every communicator's asynchronous error, after a run: one line naming
  /// this rank and the error, then exit.
  void checkAsyncErrors();
  /// Aborts every communicator (the watchdog's timeout).
  void abortCommunicators();
  /// `f` on every communicator: subgroups, then axes, then the world (the
  /// order they are torn down in: children before their parents).
  template <typename F> void forEachCommunicator(F f) {
    for (auto &[key, comm] : subgroups)
      f(comm);
    for (ncclComm_t comm : axes)
      f(comm);
    if (world)
      f(world);
  }
  /// At least `bytes` of scratch. Synchronizes the device when it grows
  /// (so only the first, uncaptured run of an entry point may grow it).
  void *scratch(size_t bytes);
  /// After the streams are done: a fatal error naming the kernel whose
  /// input was bad, if any.
  void checkErrors();
};

/// The CUDA kernels by abi::KernelId (abi::kNumKernels entries); null where
/// a kernel has no CUDA implementation yet.
const KernelFn *kernelTable();

/// Each kernel file enters its kernels in the table (abi::kNumKernels
/// entries, by abi::KernelId): attention.cu, tensor_kernels.cu,
/// train_kernels.cu.
void addAttentionKernels(KernelFn *table);
void addTensorKernels(KernelFn *table);
void addTrainKernels(KernelFn *table);
/// float8.cu: cast_fp8 and the float8 all-gather's kernels (matmul_fp8 is
/// gemm.cu's).
void addFloat8Kernels(KernelFn *table);
/// collectives.cu: the collectives of a mesh of one rank.
void addCollectives(KernelFn *table);
/// One device buffer of a collective launch: its bytes, and whether the
/// collective reads it, writes it, or neither (scratch).
struct CollectiveBuffer {
  int64_t bytes;
  bool read, written;
};
/// The buffers of collective launch `id` with ints `i` on `mesh`, in the
/// ABI's order (kernels.def); empty if `id` is not a collective.
std::vector<CollectiveBuffer> collectiveBuffers(int64_t id, const int64_t *i,
                                                const Mesh &mesh);
/// host_staged.cpp: collective `id` of a mesh whose ranks share a GPU,
/// through pinned host memory on `stream` (see Context::hostStaged).
void hostStagedCollective(Context &c, int64_t id, void **b, const int64_t *i,
                          const double *f, int64_t stream);
/// A row-major GEMM y[M,N] = op(a) op(b) + beta y: a is [M,K] (or [K,M]
/// with ta), b [K,N] (or [N,K] with tb); lda and ldb their row strides in
/// elements (0: dense), ldy y's (0: dense). f32, or bf16 operands with f32
/// accumulation and y bf16 (or f32 with f32Out).
struct RowGemm {
  int64_t M, N, K;
  bool ta, tb;
  const void *a, *b;
  void *y;
  float beta = 0.0f;
  int64_t lda = 0, ldb = 0, ldy = 0;
  bool bf16 = false, f32Out = false;
};
/// gemm.cu: `g` through cuBLASLt on `stream`.
void gemmRows(Context &c, int64_t stream, const RowGemm &g);

/// An FP8 GEMM's f32 product d[M,N] of fp8 operands, to be dequantized:
/// tensorwise, times sa[1] sb[1] (the scales' reciprocals, their product
/// first); rowwise, divided by sa[m] and sb[n] (the casts' scales sa[M]
/// and sb[N]); neither when `scaled` (cuBLASLt applied the tensorwise
/// scales; sa and sb may then be null). Then rounded once to y's dtype and
/// given the bias (after the rounding, as torchao adds it), rounded again.
/// `bf16`: the GEMM's dtype is bf16 (else f32), the bias's and y's, except
/// that y is f32 (kept unrounded) when yF32. d may be y.
struct Fp8Product {
  const float *d, *sa, *sb;
  const void *bias;
  void *y;
  int64_t M, N;
  bool rowwise, bf16;
  bool scaled = false;
  bool yF32 = false;
};
/// float8.cu: y from p's product, on `stream`.
void scaleFp8Product(Context &c, int64_t stream, const Fp8Product &p);
/// Whether a typed kernel's dtype code is bf16 (false: f32); any other code
/// is fatal, naming `kernel`. The one dtype check of the CUDA kernels.
inline bool isBf16(int64_t dtype, const char *kernel) {
  if (dtype == abi::kBF16)
    return true;
  if (dtype != abi::kF32)
    fatal("%s: the CUDA backend computes on f32 or bf16, not dtype code %lld",
          kernel, (long long)dtype);
  return false;
}

/// Whether the CUDA kernel `id` computes on bf16 as well as f32: every
/// typed kernel of the ABI (gemm.cu, kernels.cu, train_kernels.cu,
/// tensor_kernels.cu, attention.cu). The backend refuses a bf16 launch of
/// any other, so a typed kernel added to kernels.def is refused by name
/// until its CUDA kernel takes bf16.
inline bool computesBf16(abi::KernelId id) {
  switch (id) {
  case abi::KernelId::embedding:
  case abi::KernelId::linear:
  case abi::KernelId::linear_gelu:
  case abi::KernelId::linear_dgelu:
  case abi::KernelId::add:
  case abi::KernelId::mul:
  case abi::KernelId::layer_norm:
  case abi::KernelId::rms_norm:
  case abi::KernelId::gelu:
  case abi::KernelId::silu:
  case abi::KernelId::rotary:
  case abi::KernelId::rotary_table:
  case abi::KernelId::attention:
  case abi::KernelId::softmax:
  case abi::KernelId::transpose:
  case abi::KernelId::slice:
  case abi::KernelId::fill:
  case abi::KernelId::matmul:
  case abi::KernelId::matmul_bgrad:
  case abi::KernelId::sum_to:
  case abi::KernelId::embedding_grad:
  case abi::KernelId::layer_norm_grad:
  case abi::KernelId::rms_norm_grad:
  case abi::KernelId::gelu_grad:
  case abi::KernelId::silu_grad:
  case abi::KernelId::softmax_grad:
  case abi::KernelId::attention_grad:
  case abi::KernelId::sdpa:
  case abi::KernelId::sdpa_grad:
  case abi::KernelId::slice_grad:
  case abi::KernelId::concat_part:
  case abi::KernelId::linear_cross_entropy:
  case abi::KernelId::add_layer_norm:
  case abi::KernelId::add_rms_norm:
  case abi::KernelId::swiglu:
  case abi::KernelId::swiglu_grad:
  case abi::KernelId::cast_fp8:
  case abi::KernelId::matmul_fp8:
  case abi::KernelId::amax_group:
  case abi::KernelId::cast_fp8_scaled:
  // The collectives move f32 or bf16 (their dtype is what they move).
  case abi::KernelId::all_gather:
  case abi::KernelId::all_gather_group:
  case abi::KernelId::all_gather_subgroup:
  case abi::KernelId::reduce_scatter:
  case abi::KernelId::all_reduce:
    return true;
  default:
    return false;
  }
}
/// Whether collective `id` moves fp8 bytes as well (the float8
/// all-gather: gathers copy bytes, whatever they are).
inline bool gathersFp8(abi::KernelId id) {
  return id == abi::KernelId::all_gather ||
         id == abi::KernelId::all_gather_group ||
         id == abi::KernelId::all_gather_subgroup;
}

/// This process's rank in errors (set once the mesh is known).
extern int errorRank;

/// Blocks of `threads` covering n elements.
inline unsigned blocksFor(int64_t n, int threads = 256) {
  return unsigned((n + threads - 1) / threads);
}

} // namespace shardc::runtime::cuda

/// Defines the CUDA kernel `name` of the ABI with the kernel C signature.
#define SHARDC_CUDA_KERNEL(name)                                               \
  void shardc_cuda_k_##name(void *ctx, void **b, const int64_t *i,             \
                            const double *f, int64_t stream)

SHARDC_CUDA_KERNEL(linear);
SHARDC_CUDA_KERNEL(linear_gelu);
SHARDC_CUDA_KERNEL(linear_dgelu);
SHARDC_CUDA_KERNEL(matmul);
SHARDC_CUDA_KERNEL(matmul_bgrad);
SHARDC_CUDA_KERNEL(matmul_fp8);
SHARDC_CUDA_KERNEL(sum_to);

#endif // SHARDC_RUNTIME_CUDA_CONTEXT_H
