//===- backend.cu - the CUDA backend: device memory, streams, events ------===//
//
// All device memory is one allocation, sized by the memory plan (reserve),
// that the regions are carved from: no allocator on the hot path. The two
// streams of the compiled schedule are CUDA streams, its events CUDA
// events; kernels launch asynchronously and `run` returns once both streams
// are done. The constants region is copied to the device once.
//
// CUDA graphs: the first run of an entry point runs its launch table
// directly (cuBLASLt picks its algorithms, scratch is sized); the second is
// captured as one graph, from the compute stream, the communication stream
// forked in and joined back; every run from then on replays the graph. A
// step then costs one graph launch and one synchronization, after it.
// `--cuda-graphs=false` (setGraphs) runs every step from the table: the
// same kernels in the same order, so the same results, bit for bit.
//
//===----------------------------------------------------------------------===//
#include "runtime/backend.h"
#include "runtime/cuda/context.h"
#include "runtime/mesh.h"
#include "runtime/runtime.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

using namespace shardc;
using namespace shardc::runtime;

namespace {

/// The GPU of this process: its local rank's under mpirun or srun.
int localDevice() {
  for (const char *var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                          "MPI_LOCALRANKID", "LOCAL_RANK"})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return 0;
}

void recordEvent(void *ctxPtr, int64_t event, int64_t stream) {
  auto &ctx = *static_cast<cuda::Context *>(ctxPtr);
  while (size_t(event) >= ctx.events.size()) {
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    ctx.events.push_back(e);
  }
  CUDA_CHECK(cudaEventRecord(ctx.events[event], ctx.stream(stream)));
}

void waitEvent(void *ctxPtr, int64_t event, int64_t stream) {
  auto &ctx = *static_cast<cuda::Context *>(ctxPtr);
  if (size_t(event) >= ctx.events.size())
    fatal("compiled step waits on event %lld before recording it (schedule "
          "bug)",
          (long long)event);
  CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(stream), ctx.events[event], 0));
}

} // namespace

void cuda::Context::create() {
  for (cudaStream_t &s : streams)
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasLtCreate(&lt));
  workspaceBytes = size_t(32) << 20;
  CUDA_CHECK(cudaMalloc(&workspace, workspaceBytes));
  CUDA_CHECK(cudaMalloc(&errors, abi::kNumKernels * sizeof(int64_t)));
  CUDA_CHECK(cudaMemset(errors, 0, abi::kNumKernels * sizeof(int64_t)));
  CUDA_CHECK(cudaMalloc(&normPartials, kNormBlocks * sizeof(double)));
}

void cuda::Context::makeCommunicators() {
  if (!mesh || mesh->world <= 1)
    return;
  ncclUniqueId id;
  if (mesh->rank == 0)
    NCCL_CHECK(ncclGetUniqueId(&id));
  std::string bytes = mesh->broadcastString(
      mesh->rank == 0 ? std::string(id.internal, sizeof(id.internal)) : "");
  std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  NCCL_CHECK(ncclCommInitRank(&world, mesh->world, id, mesh->rank));
  // Axis 0 of a 1-D mesh is its shard axis; of R x S, the replicate axis
  // (ranks of one shard index), then axis 1 the shard axis (one replica).
  int64_t numAxes = mesh->replicas > 1 ? 2 : 1;
  for (int64_t a = 0; a < numAxes; ++a) {
    bool replicate = numAxes == 2 && a == 0;
    int color = int(replicate ? mesh->shardIndex() : mesh->replicaIndex());
    int key = int(replicate ? mesh->replicaIndex() : mesh->shardIndex());
    ncclComm_t c = nullptr;
    NCCL_CHECK(ncclCommSplit(world, color, key, &c, nullptr));
    axes.push_back(c);
  }
}

ncclComm_t cuda::Context::subgroup(int64_t axis, int64_t N) {
  auto it = subgroups.find({axis, N});
  if (it != subgroups.end())
    return it->second;
  int r = mesh->axisRank(axis);
  ncclComm_t c = nullptr;
  NCCL_CHECK(ncclCommSplit(axes.at(size_t(axis)), int(r / N), int(r % N), &c,
                           nullptr));
  return subgroups[{axis, N}] = c;
}

void cuda::Context::destroy() {
  cudaDeviceSynchronize();
  for (auto &[key, c] : subgroups)
    ncclCommDestroy(c);
  for (ncclComm_t c : axes)
    ncclCommDestroy(c);
  if (world)
    ncclCommDestroy(world);
  for (cudaEvent_t e : events)
    cudaEventDestroy(e);
  for (cudaStream_t s : streams)
    cudaStreamDestroy(s);
  cublasLtDestroy(lt);
  cudaFree(workspace);
  cudaFree(errors);
  cudaFree(scratchBuffer);
  cudaFree(normPartials);
}

void *cuda::Context::scratch(size_t bytes) {
  if (bytes > scratchBytes) {
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(scratchBuffer));
    CUDA_CHECK(cudaMalloc(&scratchBuffer, bytes));
    scratchBytes = bytes;
    ++scratchGeneration;
  }
  return scratchBuffer;
}

void cuda::Context::checkErrors() {
  int64_t host[abi::kNumKernels];
  CUDA_CHECK(cudaMemcpy(host, errors, sizeof(host), cudaMemcpyDeviceToHost));
  for (int64_t id = 0; id < abi::kNumKernels; ++id) {
    if (!host[id])
      continue;
    if (id == int64_t(abi::KernelId::embedding))
      fatal("embedding: an id is outside the table of %lld rows",
            (long long)host[id]);
    if (id == int64_t(abi::KernelId::cross_entropy_with_grad) ||
        id == int64_t(abi::KernelId::cross_entropy) ||
        id == int64_t(abi::KernelId::cross_entropy_grad))
      fatal("%s: a target is outside the vocabulary of %lld",
            abi::kKernels[id].name, (long long)host[id]);
    fatal("%s: bad input (%lld)", abi::kKernels[id].name, (long long)host[id]);
  }
}

namespace {

class CudaBackend : public Backend {
public:
  explicit CudaBackend(const Mesh *mesh) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0)
      throw std::runtime_error(
          std::string("the CUDA backend found no GPU: ") +
          (err != cudaSuccess ? cudaGetErrorString(err) : "no device"));
    CUDA_CHECK(cudaSetDevice(localDevice() % count));
    ctx.create();
    ctx.mesh = mesh;
    ctx.makeCommunicators();
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    for (cudaEvent_t &e : join)
      CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }

  ~CudaBackend() override {
    for (auto &[program, c] : graphs)
      if (c.exec)
        cudaGraphExecDestroy(c.exec);
    cudaEventDestroy(fork);
    for (cudaEvent_t e : join)
      cudaEventDestroy(e);
    ctx.destroy();
    cudaFree(arena);
    if (constants)
      cudaFree(constants);
  }

  const char *name() const override { return "cuda"; }
  bool hostMemory() const override { return false; }

  void reserve(int64_t bytes) override {
    if (arena)
      throw std::runtime_error("the CUDA backend reserves its memory once");
    CUDA_CHECK(cudaMalloc(&arena, size_t(bytes)));
    capacity = bytes;
  }

  char *allocate(int64_t bytes, const char *what, bool zero) override {
    int64_t size = abi::alignTo(bytes < 1 ? 1 : bytes);
    if (!arena || used + size > capacity)
      throw std::runtime_error(std::string("the CUDA backend's reserved "
                                           "memory has no room for ") +
                               what + " (" + std::to_string(bytes) +
                               " bytes): reserve the planned total first");
    char *p = static_cast<char *>(arena) + used;
    used += size;
    if (zero)
      CUDA_CHECK(cudaMemset(p, 0, size_t(size)));
    return p;
  }

  void copyToDevice(void *dst, const void *src, int64_t bytes) override {
    CUDA_CHECK(cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyHostToDevice));
  }
  void copyToHost(void *dst, const void *src, int64_t bytes) override {
    CUDA_CHECK(cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyDeviceToHost));
  }

  void run(const int64_t *program,
           void *const regionBases[abi::kNumRegions]) override {
    const KernelFn *kernels = cuda::kernelTable();
    if (checked.insert(program).second)
      refuseMissingKernels(program, kernels);
    void *regions[abi::kNumRegions];
    for (int r = 0; r < abi::kNumRegions; ++r)
      regions[r] = regionBases[r];
    regions[abi::kRegionConstants] =
        deviceConstants(regionBases[abi::kRegionConstants]);
    ProgramTarget target{kernels, &ctx, &recordEvent, &waitEvent};
    if (graphsOn)
      runCaptured(program, regions, target);
    else
      runProgram(program, regions, target);
    for (cudaStream_t s : ctx.streams)
      CUDA_CHECK(cudaStreamSynchronize(s));
    ctx.checkErrors();
  }

  void setGraphs(bool on) override { graphsOn = on; }

  void setProfiling(bool) override {}
  /// Kernel timelines from CUDA events are not recorded yet: a host-timed
  /// launch would say nothing of the GPU, so no launch is added (the
  /// trainer refuses --trace for this target).
  void setTrace(Trace *) override {}
  void printProfile() const override {
    std::printf("SHARDC_PROFILE: per-kernel times are not collected on the "
                "CUDA backend yet\n");
  }

  /// The size of the constants region (from the manifest).
  int64_t constantsBytes = 0;

private:
  /// One captured entry point: its graph, and the scratch it was captured
  /// with.
  struct Captured {
    int64_t runs = 0;
    cudaGraphExec_t exec = nullptr;
    int64_t scratchGeneration = -1;
  };

  /// Runs `program` through its graph: directly the first time, captured
  /// the second (or after the scratch moved), replayed after.
  void runCaptured(const int64_t *program, void *const regions[],
                   const ProgramTarget &target) {
    Captured &c = graphs[program];
    if (c.exec && c.scratchGeneration != ctx.scratchGeneration) {
      CUDA_CHECK(cudaGraphExecDestroy(c.exec));
      c.exec = nullptr;
    }
    if (c.runs++ == 0) {
      runProgram(program, regions, target);
      return;
    }
    if (!c.exec) {
      cudaStream_t compute = ctx.stream(abi::kComputeStream);
      int64_t generation = ctx.scratchGeneration;
      CUDA_CHECK(
          cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal));
      // Fork every other stream from the compute stream, so that all their
      // work is captured, and join them back at the end.
      CUDA_CHECK(cudaEventRecord(fork, compute));
      for (int64_t s = 0; s < abi::kNumStreams; ++s)
        if (s != abi::kComputeStream)
          CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(s), fork, 0));
      runProgram(program, regions, target);
      for (int64_t s = 0; s < abi::kNumStreams; ++s)
        if (s != abi::kComputeStream) {
          CUDA_CHECK(cudaEventRecord(join[s], ctx.stream(s)));
          CUDA_CHECK(cudaStreamWaitEvent(compute, join[s], 0));
        }
      cudaGraph_t graph = nullptr;
      CUDA_CHECK(cudaStreamEndCapture(compute, &graph));
      if (ctx.scratchGeneration != generation)
        fatal("a kernel grew its scratch while its entry point was captured "
              "(only a first run may)");
      CUDA_CHECK(cudaGraphInstantiate(&c.exec, graph, 0));
      CUDA_CHECK(cudaGraphDestroy(graph));
      c.scratchGeneration = generation;
    }
    CUDA_CHECK(cudaGraphLaunch(c.exec, ctx.stream(abi::kComputeStream)));
  }

  /// A program that launches a kernel this backend lacks is refused before
  /// anything runs, with every missing kernel named.
  void refuseMissingKernels(const int64_t *program, const KernelFn *kernels) {
    std::set<std::string> missing;
    for (const int64_t *p = program; *p != abi::kOpEnd;
         p += abi::recordWords(p))
      if (*p == abi::kOpKernel && !kernels[p[1]])
        missing.insert(abi::kKernels[p[1]].name);
    if (missing.empty())
      return;
    std::string list;
    for (const std::string &k : missing)
      list += (list.empty() ? "" : ", ") + k;
    throw std::runtime_error("the CUDA backend has no kernel for: " + list);
  }

  void *deviceConstants(void *host) {
    if (!host || constants)
      return constants ? constants : host;
    if (constantsBytes > 0) {
      CUDA_CHECK(cudaMalloc(&constants, size_t(constantsBytes)));
      copyToDevice(constants, host, constantsBytes);
    }
    return constants;
  }

  cuda::Context ctx;
  bool graphsOn = true;
  std::map<const int64_t *, Captured> graphs;
  cudaEvent_t fork = nullptr, join[abi::kNumStreams] = {};
  void *arena = nullptr, *constants = nullptr;
  int64_t capacity = 0, used = 0;
  std::set<const int64_t *> checked;
};

} // namespace

extern "C" Backend *shardc_make_cuda_backend(const Mesh *mesh,
                                             int64_t constantsBytes) {
  auto *backend = new CudaBackend(mesh);
  backend->constantsBytes = constantsBytes;
  return backend;
}
