//===- host_staged.cpp - collectives of ranks that share a GPU, via the host ===//
//
// NCCL refuses two ranks on one device, yet a developer's single-GPU
// machine runs `mpirun -np 2 ./train` to test a mesh. When the backend finds
// ranks sharing its GPU (Context::hostStaged), every collective goes through
// the host, on the thread that issues the launches (MPI's main thread):
//
//   device inputs --cudaMemcpyAsync--> pinned staging, on its stream
//   cudaStreamSynchronize(its stream)
//   the CPU backend's collective (runtime/cpu/collectives.cpp, MPI) on the
//     staging buffers
//   pinned staging --cudaMemcpyAsync--> device outputs, on its stream
//
// so the results are the CPU backend's, bit for bit. The staging buffers of
// a launch are made on its first run and kept.
//
// Why not a host function (cudaLaunchHostFunc) doing the MPI in stream
// order, as this did: the collective waits for the other ranks' host
// functions, which run only once their streams reach them, i.e. on other
// ranks' outstanding GPU work, and CUDA forbids a host function any wait on
// outstanding CUDA work not ordered before it (host functions may share one
// driver thread, and their order across streams is undefined); it also
// called MPI from a driver thread. Here no host function waits on anything,
// and it cannot deadlock: when the issuing thread reaches collective k, its
// stream's pending work depends only on launches and events already issued
// by this process (an event is recorded before it is waited on), so the
// synchronization returns; every rank issues the same program, so every
// rank reaches its collective k (with 1..k-1 complete on all ranks, by
// induction) and the MPI collective completes. MPI is called only by the
// main thread (MPI_THREAD_FUNNELED, which Mesh::init requires).
//
// The price: a host synchronization per collective (the issue waits for its
// stream), and no CUDA graphs (a capture cannot hold a synchronization; the
// backend runs these ranks without graphs). Ranks on one GPU are a test
// setup, not a fast one.
//
// The CPU collectives are referenced weakly: an executable links them (the
// driver's --undefined) only when it links MPI, i.e. for several ranks.
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "runtime/cuda/context.h"
#include "runtime/mesh.h"
#include "runtime/runtime.h"

#include <map>
#include <memory>
#include <vector>

namespace A = shardc::abi;
using namespace shardc::runtime;

#define SHARDC_WEAK_CPU_COLLECTIVE(name)                                       \
  extern "C" SHARDC_ABI_KERNEL_SIGNATURE(name) __attribute__((weak));
SHARDC_WEAK_CPU_COLLECTIVE(all_gather)
SHARDC_WEAK_CPU_COLLECTIVE(all_gather_group)
SHARDC_WEAK_CPU_COLLECTIVE(reduce_scatter)
SHARDC_WEAK_CPU_COLLECTIVE(all_reduce)
SHARDC_WEAK_CPU_COLLECTIVE(all_gather_subgroup)
#undef SHARDC_WEAK_CPU_COLLECTIVE

namespace {

/// One launch's staging: its buffers (collectiveBuffers: those read are
/// copied in, those written copied out), a pinned host buffer for each,
/// and the CPU collective run on them.
struct Staged {
  KernelFn fn = nullptr;
  std::vector<cuda::CollectiveBuffer> buffers;
  std::vector<void *> host;
};

/// The CPU context the collectives run with, and every launch's staging
/// (by its ints, which the program keeps for the executable's life).
struct HostStaging {
  Context cpu;
  std::map<const int64_t *, std::unique_ptr<Staged>> launches;
  ~HostStaging() {
    for (auto &[key, s] : launches)
      for (void *p : s->host)
        cudaFreeHost(p);
  }
};

HostStaging &staging(const Mesh *mesh) {
  static HostStaging s;
  s.cpu.mesh = mesh;
  return s;
}

/// The CPU backend's collective `id` (null if this executable lacks it).
KernelFn cpuCollective(int64_t id) {
  switch (A::KernelId(id)) {
  case A::KernelId::all_gather:
    return &shardc_k_all_gather;
  case A::KernelId::all_gather_subgroup:
    return &shardc_k_all_gather_subgroup;
  case A::KernelId::all_gather_group:
    return &shardc_k_all_gather_group;
  case A::KernelId::reduce_scatter:
    return &shardc_k_reduce_scatter;
  case A::KernelId::all_reduce:
    return &shardc_k_all_reduce;
  default:
    fatal("%s is not a collective the host-staged transport carries",
          A::kKernels[id].name);
  }
}

} // namespace

std::vector<cuda::CollectiveBuffer>
cuda::collectiveBuffers(int64_t id, const int64_t *i, const Mesh &mesh) {
  std::vector<CollectiveBuffer> out;
  auto add = [&](int64_t bytes, bool read, bool written) {
    out.push_back({bytes, read, written});
  };
  switch (A::KernelId(id)) {
  case A::KernelId::all_gather: {
    int64_t n = i[A::all_gather::n] * A::dtypeBytes(i[A::all_gather::dtype]);
    add(n, true, false);
    add(n * mesh.axisSize(i[A::all_gather::axis]), false, true);
    break;
  }
  case A::KernelId::all_gather_subgroup: {
    int64_t n = i[A::all_gather_subgroup::n] *
                A::dtypeBytes(i[A::all_gather_subgroup::dtype]);
    add(n, true, false);
    add(n * i[A::all_gather_subgroup::N], false, true);
    break;
  }
  case A::KernelId::all_gather_group: {
    int64_t k = i[A::all_gather_group::k],
            eb = A::dtypeBytes(i[A::all_gather_group::dtype]);
    int64_t P = mesh.axisSize(i[A::all_gather_group::axis]), total = 0;
    const int64_t *counts = i + A::all_gather_group::kNumInts;
    for (int64_t j = 0; j < k; ++j) {
      add(counts[j] * eb, true, false);
      total += counts[j] * eb;
    }
    for (int64_t j = 0; j < k; ++j)
      add(counts[j] * eb * P, false, true);
    add(total, false, false);     // pack
    add(total * P, false, false); // gathered
    break;
  }
  case A::KernelId::reduce_scatter: {
    int64_t n = i[A::reduce_scatter::n] *
                A::dtypeBytes(i[A::reduce_scatter::dtype]);
    add(n * mesh.axisSize(i[A::reduce_scatter::axis]), true, false);
    add(n, false, true);
    add(n, false, false); // tmp: the ring's second partial-sum block
    break;
  }
  case A::KernelId::all_reduce: {
    int64_t n = i[A::all_reduce::n] * A::dtypeBytes(i[A::all_reduce::dtype]);
    add(n, true, false);
    add(n, false, true);
    break;
  }
  default:
    break;
  }
  return out;
}

void cuda::hostStagedCollective(cuda::Context &c, int64_t id, void **b,
                                const int64_t *i, const double *f,
                                int64_t stream) {
  HostStaging &all = staging(c.mesh);
  std::unique_ptr<Staged> &slot = all.launches[i];
  if (!slot) {
    auto s = std::make_unique<Staged>();
    s->fn = cpuCollective(id);
    s->buffers = collectiveBuffers(id, i, *c.mesh);
    if (!s->fn)
      fatal("rank %d: ranks share a GPU, and the host-staged transport needs "
            "the CPU backend's MPI collectives, which this executable was "
            "not linked with (relink it with shardc for several ranks)",
            c.mesh->rank);
    for (const CollectiveBuffer &buffer : s->buffers) {
      void *p = nullptr;
      CUDA_CHECK(cudaHostAlloc(&p, size_t(buffer.bytes > 0 ? buffer.bytes : 1),
                               cudaHostAllocDefault));
      s->host.push_back(p);
    }
    slot = std::move(s);
  }
  Staged &s = *slot;
  cudaStream_t st = c.stream(stream);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(st, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    fatal("rank %d: %s: a host-staged collective waits for its stream on the "
          "host, which a CUDA graph capture cannot hold (ranks that share a "
          "GPU run without graphs)",
          c.mesh->rank, A::kKernels[id].name);
  for (size_t k = 0; k < s.buffers.size(); ++k)
    if (s.buffers[k].read && s.buffers[k].bytes > 0)
      CUDA_CHECK(cudaMemcpyAsync(s.host[k], b[k], size_t(s.buffers[k].bytes),
                                 cudaMemcpyDeviceToHost, st));
  // The inputs are staged, and the copies out of these buffers of this
  // launch's previous run are done: the host may write them.
  CUDA_CHECK(cudaStreamSynchronize(st));
  s.fn(&all.cpu, s.host.data(), i, f, stream);
  for (size_t k = 0; k < s.buffers.size(); ++k)
    if (s.buffers[k].written && s.buffers[k].bytes > 0)
      CUDA_CHECK(cudaMemcpyAsync(b[k], s.host[k], size_t(s.buffers[k].bytes),
                                 cudaMemcpyHostToDevice, st));
}
