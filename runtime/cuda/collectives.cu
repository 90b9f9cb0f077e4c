//===- collectives.cu - the collectives of the CUDA backend, through NCCL -===//
//
// The collectives of the runtime ABI on the schedule's stream (the
// communication stream: ordered by the compiled events alone). On a mesh of
// several ranks they are NCCL calls on the communicators of
// Context::makeCommunicators (one per grid axis, split from a world
// communicator; subgroups of N ranks for --reshard-after-forward=N), in the
// dtype the policy gives (f32 or bf16). Over an axis of one rank each is a
// device copy (a gather of one block, a sum over one rank).
//
// Ranks that share a GPU take the host-staged transport instead
// (host_staged.cpp). With --collective-timeout, every collective issued is
// counted, and once complete marks its index for the watchdog
// (Context::issuedCollective).
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "runtime/cuda/kernel_util.cuh"
#include "runtime/mesh.h"
#include "runtime/program/trace.h"
#include "runtime/trainer/watchdog.h"

namespace A = shardc::abi;
using namespace shardc::runtime;
using namespace shardc::runtime::cuda;

namespace {

/// Bytes of one element of dtype `code` (f32, bf16; a gather, which only
/// moves bytes, also fp8: the float8 all-gather).
int64_t elementBytes(int64_t code, const char *what, bool gather = false) {
  bool fp8 = code == A::kF8E4M3 || code == A::kF8E5M2;
  if (code != A::kF32 && code != A::kBF16 && !(gather && fp8))
    fatal("%s: dtype %s is not supported (f32, bf16%s)", what,
          A::dtypeName(code), gather ? ", fp8" : "");
  return A::dtypeBytes(code);
}

ncclDataType_t ncclType(int64_t code) {
  switch (code) {
  case A::kBF16:
    return ncclBfloat16;
  case A::kF8E4M3: // gathered as bytes: any one-byte type moves them alike
  case A::kF8E5M2:
    return ncclUint8;
  default:
    return ncclFloat32;
  }
}

cuda::Context &contextOf(void *ctx) {
  return *static_cast<cuda::Context *>(ctx);
}

/// The NCCL communicator of `axis`, or null when the axis has one rank.
ncclComm_t commOf(cuda::Context &c, int64_t axis, const char *what) {
  if (!c.mesh || c.mesh->world <= 1)
    return nullptr;
  if (axis < 0 || axis >= int64_t(c.axes.size()))
    fatal("%s on grid axis %lld: the mesh has %zu", what, (long long)axis,
          c.axes.size());
  return c.mesh->axisSize(axis) > 1 ? c.axes[size_t(axis)] : nullptr;
}

/// Ranks share the GPU: the collective goes through the host.
#define SHARDC_HOST_STAGED(name)                                               \
  if (c.hostStaged && c.mesh && c.mesh->world > 1) {                           \
    hostStagedCollective(c, int64_t(A::KernelId::name), b, i, f, stream);      \
    c.issuedCollective(#name, collectiveBytes(int64_t(A::KernelId::name), i),  \
                       c.stream(stream));                                      \
    return;                                                                    \
  }

/// An NCCL call on `comm`: made inside a watchdog::DeviceUse (never while
/// the watchdog aborts the communicators, nor after: see backend.cu),
/// waited for when non-blocking, then checked; in the NCCL group the
/// schedule's launch `i` opens, continues or closes.
#define NCCL_CALL(comm, call)                                                  \
  do {                                                                         \
    c.groupBegin(i);                                                           \
    ncclResult_t result_;                                                      \
    {                                                                          \
      watchdog::DeviceUse use_(#call);                                         \
      result_ = (call);                                                        \
    }                                                                          \
    c.ncclDone(result_, (comm), #call);                                        \
    c.groupEnd(i, (comm));                                                     \
  } while (0)

// progress[0] = index: collective `index` of the run (from 1) is complete.
__global__ void markProgressKernel(int64_t *progress, int64_t index) {
  *reinterpret_cast<volatile int64_t *>(progress) = index;
}

void copy(void *dst, const void *src, int64_t bytes, cudaStream_t s) {
  if (dst != src && bytes > 0)
    CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes),
                               cudaMemcpyDeviceToDevice, s));
}

} // namespace

// in[n] -> out[n * P], rank-major
SHARDC_CUDA_KERNEL(all_gather) {
  auto &c = contextOf(ctx);
  int64_t n = i[A::all_gather::n], dtype = i[A::all_gather::dtype];
  int64_t bytes = n * elementBytes(dtype, "all_gather", true);
  cudaStream_t s = c.stream(stream);
  SHARDC_HOST_STAGED(all_gather)
  if (ncclComm_t comm = commOf(c, i[A::all_gather::axis], "all_gather")) {
    NCCL_CALL(comm,
              ncclAllGather(b[0], b[1], size_t(n), ncclType(dtype), comm, s));
    c.issuedCollective("all_gather", bytes, s);
  } else {
    copy(b[1], b[0], bytes, s);
  }
}

// in_1..in_k -> out_1..out_k [n_j * P]: the group's shards packed into
// pack[sum n], one all-gather into gathered[P, sum n], each tensor's blocks
// copied out (strided copies)
SHARDC_CUDA_KERNEL(all_gather_group) {
  auto &c = contextOf(ctx);
  int64_t k = i[A::all_gather_group::k], dtype = i[A::all_gather_group::dtype];
  const int64_t *counts = i + A::all_gather_group::kNumInts;
  int64_t eb = elementBytes(dtype, "all_gather_group", true);
  cudaStream_t s = c.stream(stream);
  SHARDC_HOST_STAGED(all_gather_group)
  ncclComm_t comm =
      commOf(c, i[A::all_gather_group::axis], "all_gather_group");
  if (!comm) {
    for (int64_t j = 0; j < k; ++j)
      copy(b[k + j], b[j], counts[j] * eb, s);
    return;
  }
  char *pack = static_cast<char *>(b[2 * k]);
  char *gathered = static_cast<char *>(b[2 * k + 1]);
  int64_t block = 0;
  for (int64_t j = 0; j < k; ++j) {
    copy(pack + block * eb, b[j], counts[j] * eb, s);
    block += counts[j];
  }
  NCCL_CALL(comm, ncclAllGather(pack, gathered, size_t(block),
                                ncclType(dtype), comm, s));
  c.issuedCollective("all_gather_group", block * eb, s);
  int P = c.mesh->axisSize(i[A::all_gather_group::axis]);
  int64_t offset = 0;
  for (int64_t j = 0; j < k; ++j) {
    size_t bytes = size_t(counts[j] * eb);
    CUDA_CHECK(cudaMemcpy2DAsync(b[k + j], bytes, gathered + offset * eb,
                                 size_t(block * eb), bytes, size_t(P),
                                 cudaMemcpyDeviceToDevice, s));
    offset += counts[j];
  }
}

// in[n * P] -> out[n]: block `rank` of the sum over the axis (tmp unused)
SHARDC_CUDA_KERNEL(reduce_scatter) {
  auto &c = contextOf(ctx);
  int64_t n = i[A::reduce_scatter::n], dtype = i[A::reduce_scatter::dtype];
  int64_t bytes = n * elementBytes(dtype, "reduce_scatter");
  cudaStream_t s = c.stream(stream);
  SHARDC_HOST_STAGED(reduce_scatter)
  if (ncclComm_t comm =
          commOf(c, i[A::reduce_scatter::axis], "reduce_scatter")) {
    NCCL_CALL(comm, ncclReduceScatter(b[0], b[1], size_t(n), ncclType(dtype),
                                      ncclSum, comm, s));
    c.issuedCollective("reduce_scatter", bytes, s);
  } else {
    copy(b[1], b[0], bytes, s);
  }
}

// in[n] -> out[n], the sum over the axis
SHARDC_CUDA_KERNEL(all_reduce) {
  auto &c = contextOf(ctx);
  int64_t n = i[A::all_reduce::n], dtype = i[A::all_reduce::dtype];
  int64_t bytes = n * elementBytes(dtype, "all_reduce");
  cudaStream_t s = c.stream(stream);
  SHARDC_HOST_STAGED(all_reduce)
  if (ncclComm_t comm = commOf(c, i[A::all_reduce::axis], "all_reduce")) {
    NCCL_CALL(comm, ncclAllReduce(b[0], b[1], size_t(n), ncclType(dtype),
                                  ncclSum, comm, s));
    c.issuedCollective("all_reduce", bytes, s);
  } else {
    copy(b[1], b[0], bytes, s);
  }
}

// full[N * bytes] -> chunk[bytes]: block (rank on the axis) % N, no
// communication
SHARDC_CUDA_KERNEL(reshard_chunk) {
  auto &c = contextOf(ctx);
  int64_t bytes = i[A::reshard_chunk::bytes], N = i[A::reshard_chunk::N];
  int64_t rank =
      c.mesh && c.mesh->world > 1 ? c.mesh->axisRank(i[A::reshard_chunk::axis])
                                  : 0;
  copy(b[1], static_cast<const char *>(b[0]) + (rank % N) * bytes, bytes,
       c.stream(stream));
}

// chunk[n] -> full[n * N], gathered within N consecutive ranks of the axis
SHARDC_CUDA_KERNEL(all_gather_subgroup) {
  auto &c = contextOf(ctx);
  int64_t n = i[A::all_gather_subgroup::n],
          dtype = i[A::all_gather_subgroup::dtype],
          N = i[A::all_gather_subgroup::N],
          axis = i[A::all_gather_subgroup::axis];
  int64_t bytes = n * elementBytes(dtype, "all_gather_subgroup", true);
  cudaStream_t s = c.stream(stream);
  if (N > 1) {
    SHARDC_HOST_STAGED(all_gather_subgroup)
  }
  if (N > 1 && commOf(c, axis, "all_gather_subgroup")) {
    ncclComm_t group = c.subgroup(axis, N);
    NCCL_CALL(group, ncclAllGather(b[0], b[1], size_t(n), ncclType(dtype),
                                   group, s));
    c.issuedCollective("all_gather_subgroup", bytes, s);
  } else if (N == 1)
    copy(b[1], b[0], bytes, s);
  else
    fatal("all_gather_subgroup within %lld ranks on an axis of one",
          (long long)N);
}

void cuda::Context::groupBegin(const int64_t *ints) {
  if (!groups || grouping)
    return;
  auto it = groups->find(ints);
  if (it == groups->end() || !(it->second & kGroupOpen))
    return;
  NCCL_CHECK(ncclGroupStart());
  grouping = true;
  groupComms.clear();
}

void cuda::Context::groupEnd(const int64_t *ints, ncclComm_t comm) {
  if (!grouping)
    return;
  groupComms.push_back(comm);
  auto it = groups->find(ints);
  if (it == groups->end() || !(it->second & kGroupClose))
    return;
  grouping = false;
  ncclResult_t result;
  {
    watchdog::DeviceUse use("ncclGroupEnd()");
    result = ncclGroupEnd();
  }
  if (result != ncclInProgress)
    ncclDone(result, comm, "ncclGroupEnd()");
  else
    for (ncclComm_t member : groupComms)
      ncclDone(ncclInProgress, member, "ncclGroupEnd()");
}

void cuda::Context::issuedCollective(const char *what, int64_t bytes,
                                     cudaStream_t s) {
  if (!progressDevice)
    return;
  int64_t index;
  {
    std::lock_guard<std::mutex> lock(progressMutex);
    issued->push_back({what, bytes});
    index = int64_t(issued->size());
  }
  // Inside a group the calls are not enqueued yet: the group's last marks
  // them all.
  if (grouping)
    return;
  SHARDC_LAUNCH(markProgressKernel, 1, 1, 0, s, progressDevice, index);
}

void shardc::runtime::cuda::addCollectives(KernelFn *table) {
  auto set = [&](A::KernelId id, KernelFn fn) { table[int64_t(id)] = fn; };
  set(A::KernelId::all_gather, &shardc_cuda_k_all_gather);
  set(A::KernelId::all_gather_group, &shardc_cuda_k_all_gather_group);
  set(A::KernelId::reduce_scatter, &shardc_cuda_k_reduce_scatter);
  set(A::KernelId::all_reduce, &shardc_cuda_k_all_reduce);
  set(A::KernelId::reshard_chunk, &shardc_cuda_k_reshard_chunk);
  set(A::KernelId::all_gather_subgroup, &shardc_cuda_k_all_gather_subgroup);
}
