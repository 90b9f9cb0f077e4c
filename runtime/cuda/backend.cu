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
// On a mesh: the GPU is the local rank's (OpenMPI, Slurm or LOCAL_RANK).
// Ranks that find they share a GPU take the host-staged transport (one
// note says so), and run without graphs; otherwise NCCL communicators are
// made once, at start-up.
// With --collective-timeout they are non-blocking, the watchdog probes
// which collective a step waits on, and on a timeout aborts them
// (ncclCommAbort) before the process exits. After each run every
// communicator's asynchronous error is checked.
//
//===----------------------------------------------------------------------===//
#include "runtime/backend.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/sdpa.h"
#ifdef SHARDC_CUDA_EMULATION
#include "runtime/cpu/gemm.h"
#endif
#include "runtime/mesh.h"
#include "runtime/runtime.h"
#include "runtime/program/trace.h"
#include "runtime/trainer/watchdog.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

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

/// "host/uuid" of the current device, which ranks compare.
std::string deviceIdentity(int device) {
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string id = "GPU-";
  char hex[3];
  for (int k = 0; k < 16; ++k) {
    std::snprintf(hex, sizeof(hex), "%02x", uint8_t(prop.uuid.bytes[k]));
    id += hex;
  }
  return id + " on " + host;
}

/// NCCL's last message, on one line.
std::string oneLine(const char *text) {
  std::string s = text ? text : "";
  for (char &ch : s)
    if (ch == '\n' || ch == '\r')
      ch = ' ';
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

} // namespace

int cuda::errorRank = 0;

void cuda::ncclFailed(const char *call, const char *file, int line,
                      ncclResult_t result, ncclComm_t comm) {
  std::string last = oneLine(ncclGetLastError(comm));
  fatal("rank %d: %s failed at %s:%d: %s%s%s%s", errorRank, call, file, line,
        ncclGetErrorString(result), last.empty() ? "" : " (", last.c_str(),
        last.empty() ? "" : ")");
}

// The abort order. With --collective-timeout the watchdog's thread aborts
// every communicator (ncclCommAbort, which frees it) while this thread may
// be using them: polling ncclCommGetAsyncError, issuing a collective,
// splitting. Every call on a communicator here therefore runs inside a
// watchdog::DeviceUse, and the abort runs under the same lock, once, and
// keeps it until the process exits: so an abort never overlaps a call, and
// a call that would start after one exits instead of touching a freed
// communicator. A wait that times out here aborts through the same lock
// (DeviceUse::abort), so the communicators are aborted once, whichever
// thread finds the timeout first. Each use is one call that returns at
// once (the communicators are non-blocking under a timeout), never a wait.

void cuda::Context::ncclDone(ncclResult_t result, ncclComm_t comm,
                             const char *call) {
  if (result == ncclInProgress && comm) {
    auto start = std::chrono::steady_clock::now();
    int polls = 0;
    do {
      if (timeout > 0 && std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                                 .count() > timeout) {
        std::fflush(stdout);
        std::fprintf(stderr,
                     "error: rank %d: %s did not complete within %.0f s "
                     "(--collective-timeout): another rank died, hangs or is "
                     "stopped; exiting\n",
                     errorRank, call, timeout);
        std::fflush(stderr);
        watchdog::DeviceUse use(call);
        use.abort();
        std::fflush(nullptr);
        _exit(3); // holding the use: nothing touches the communicators now

      }
      // Most calls finish enqueueing within microseconds: spin first.
      if (++polls > 1000)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      else
        std::this_thread::yield();
      ncclResult_t state = ncclSuccess;
      watchdog::DeviceUse use(call);
      if (ncclCommGetAsyncError(comm, &state) != ncclSuccess)
        state = ncclInternalError;
      result = state;
    } while (result == ncclInProgress);
  }
  if (result != ncclSuccess)
    ncclFailed(call, __FILE__, __LINE__, result, comm);
}

void cuda::Context::checkAsyncErrors() {
  watchdog::DeviceUse use("ncclCommGetAsyncError (after a run)");
  auto check = [&](ncclComm_t comm, const std::string &which) {
    if (!comm)
      return;
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    if (state != ncclSuccess && state != ncclInProgress) {
      std::string last = oneLine(ncclGetLastError(comm));
      fatal("rank %d: NCCL failed on the communicator of %s: %s%s%s%s",
            errorRank, which.c_str(), ncclGetErrorString(state),
            last.empty() ? "" : " (", last.c_str(), last.empty() ? "" : ")");
    }
  };
  check(world, "every rank");
  for (size_t a = 0; a < axes.size(); ++a)
    check(axes[a], "grid axis " + std::to_string(a));
  for (auto &[key, comm] : subgroups)
    check(comm, "groups of " + std::to_string(key.second) + " ranks on axis " +
                    std::to_string(key.first));
}

// The watchdog's thread, holding the DeviceUse lock (see above): each
// communicator is aborted once, and never used again.
void cuda::Context::abortCommunicators() {
  forEachCommunicator([](ncclComm_t comm) { ncclCommAbort(comm); });
}

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
  // Non-blocking under a timeout: no NCCL call may then wait forever.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = timeout > 0 ? 0 : 1;
  // Each new communicator is in its container before it is waited for, so
  // that an abort meanwhile aborts it too.
  ncclResult_t made;
  {
    watchdog::DeviceUse use("ncclCommInitRankConfig");
    made = ncclCommInitRankConfig(&world, mesh->world, id, mesh->rank,
                                  &config);
  }
  ncclDone(made, world, "ncclCommInitRankConfig (the world communicator)");
  // One communicator per grid axis (abi::MeshGrid: replicate, shard, tp),
  // split as the mesh's MPI communicators are.
  const abi::MeshGrid g = mesh->grid();
  for (int64_t a = 0; a < g.numAxes(); ++a) {
    int color = int(g.axisColor(a, mesh->rank));
    int key = int(g.axisIndex(a, mesh->rank));
    ncclComm_t c = nullptr;
    ncclResult_t split;
    {
      watchdog::DeviceUse use("ncclCommSplit (a grid axis)");
      split = ncclCommSplit(world, color, key, &c, &config);
      axes.push_back(c);
    }
    ncclDone(split, c ? c : world, "ncclCommSplit (a grid axis)");
  }
}

ncclComm_t cuda::Context::subgroup(int64_t axis, int64_t N) {
  auto it = subgroups.find({axis, N});
  if (it != subgroups.end())
    return it->second;
  int r = mesh->axisRank(axis);
  ncclComm_t c = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = timeout > 0 ? 0 : 1;
  const char *call = "ncclCommSplit (a --reshard-after-forward subgroup)";
  ncclResult_t split;
  {
    watchdog::DeviceUse use(call);
    split = ncclCommSplit(axes.at(size_t(axis)), int(r / N), int(r % N), &c,
                          &config);
    if (c)
      subgroups[{axis, N}] = c;
  }
  ncclDone(split, c ? c : axes.at(size_t(axis)), call);
  if (!c)
    fatal("ncclCommSplit gave no communicator for the groups of %lld ranks "
          "on axis %lld (split inside an NCCL group?)",
          (long long)N, (long long)axis);
  return c;
}

void cuda::Context::destroy() {
  cudaDeviceSynchronize();
  {
    watchdog::DeviceUse use("ncclCommDestroy");
    forEachCommunicator([](ncclComm_t comm) { ncclCommDestroy(comm); });
  }
  for (cudaEvent_t e : events)
    cudaEventDestroy(e);
  for (cudaStream_t s : streams)
    cudaStreamDestroy(s);
  sdpaRelease(*this);
  cublasLtDestroy(lt);
  cudaFree(workspace);
  cudaFree(errors);
  cudaFree(scratchBuffer);
  cudaFree(normPartials);
  if (progressHost)
    cudaFreeHost(const_cast<int64_t *>(progressHost));
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
        id == int64_t(abi::KernelId::cross_entropy_grad) ||
        id == int64_t(abi::KernelId::vocab_ce_grad) ||
        id == int64_t(abi::KernelId::linear_cross_entropy))
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
    int device = localDevice() % count;
    CUDA_CHECK(cudaSetDevice(device));
    ctx.create();
    ctx.mesh = mesh;
    if (mesh && mesh->world > 1) {
      cuda::errorRank = mesh->rank;
      ctx.hostStaged = ranksShareGpu(*mesh, device);
      ctx.timeout = watchdog::seconds();
      // Watched before the communicators are made: a timeout while they
      // are made aborts those made so far (the probe names no collective
      // until a run).
      if (ctx.timeout > 0) {
        void *p = nullptr;
        CUDA_CHECK(cudaHostAlloc(&p, sizeof(int64_t), cudaHostAllocMapped));
        ctx.progressHost = static_cast<volatile int64_t *>(p);
        *ctx.progressHost = 0;
        void *d = nullptr;
        CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
        ctx.progressDevice = static_cast<int64_t *>(d);
        watchdog::watchDevice(
            [this](watchdog::Pending &p) { return probe(p); },
            [this] { ctx.abortCommunicators(); });
      }
      if (!ctx.hostStaged)
        ctx.makeCommunicators();
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    for (cudaEvent_t &e : join)
      CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }

  ~CudaBackend() override {
    if (ctx.progressDevice)
      watchdog::watchDevice(nullptr, nullptr);
    for (auto &[program, c] : graphs)
      if (c.exec)
        cudaGraphExecDestroy(c.exec);
    for (cudaEvent_t e : timing)
      cudaEventDestroy(e);
    cudaEventDestroy(fork);
    for (cudaEvent_t e : join)
      cudaEventDestroy(e);
    ctx.destroy();
    cudaFree(arena);
    for (void *p : hostAllocations)
      cudaFreeHost(p);
    if (constants)
      cudaFree(constants);
  }

  const char *name() const override { return "cuda"; }
  std::string deviceName() const override {
    int device = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, device) != cudaSuccess)
      return "";
    return prop.name;
  }
  bool hostMemory() const override { return false; }
  std::string gemmLibrary() const override {
#ifdef SHARDC_CUDA_EMULATION
    return "emulated cuBLASLt: " + cpu::gemmLibrary();
#else
    size_t v = cublasLtGetVersion();
    return "cuBLASLt " + std::to_string(v / 10000) + "." +
           std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
#endif
  }

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
    if (zero) { // the legacy stream's memset, done before any kernel runs
      CUDA_CHECK(cudaMemset(p, 0, size_t(size)));
      CUDA_CHECK(cudaDeviceSynchronize());
    }
    return p;
  }

  char *allocateHost(int64_t bytes, const char *what) override {
    size_t size = size_t(abi::alignTo(bytes < 1 ? 1 : bytes));
    void *p = nullptr;
    if (cudaHostAlloc(&p, size, cudaHostAllocMapped | cudaHostAllocPortable) !=
        cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error(std::string("cannot pin ") +
                               std::to_string(bytes) + " bytes of host memory "
                               "for " + what + " (--offload=cpu)");
    }
    hostAllocations.push_back(p);
    // Kernels address it at the host's pointer (unified addressing).
    void *device = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(&device, p, 0));
    if (device != p)
      throw std::runtime_error(std::string("the GPU maps the pinned memory "
                                           "of ") +
                               what + " at another address than the host's: "
                                      "--offload=cpu needs unified addressing");
    std::memset(p, 0, size);
    return static_cast<char *>(p);
  }

  // Either side may be pinned host memory (--offload=cpu): the direction is
  // the pointers' (unified addressing). A copy from pageable memory may
  // return before its DMA lands, and the kernels' streams do not wait for
  // the legacy stream: synchronized, so the next run reads the bytes (the
  // device is idle between runs).
  void copyToDevice(void *dst, const void *src, int64_t bytes) override {
    CUDA_CHECK(cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyDefault));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  void copyToHost(void *dst, const void *src, int64_t bytes) override {
    CUDA_CHECK(cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyDefault));
  }

  void run(const int64_t *program,
           void *const regionBases[abi::kNumRegions]) override {
    const KernelFn *kernels = cuda::kernelTable();
    if (checked.insert(program).second) {
      refuseMissingKernels(program, kernels);
      groups[program] = groupsOf(program);
      makeSubgroups(program);
    }
    ctx.groups = &groups[program];
    void *regions[abi::kNumRegions];
    for (int r = 0; r < abi::kNumRegions; ++r)
      regions[r] = regionBases[r];
    regions[abi::kRegionConstants] =
        deviceConstants(regionBases[abi::kRegionConstants]);
    ProgramTarget target{kernels, &ctx, &recordEvent, &waitEvent};
    if (ctx.progressDevice) {
      std::lock_guard<std::mutex> lock(ctx.progressMutex);
      ctx.issued = &issued[program];
      *ctx.progressHost = 0;
      ++ctx.runs;
      ctx.inRun = true;
    }
    bool traced = trace && trace->keepsEvents();
    double hostStart = 0;
    if (traced) {
      hostStart = startTrace();
      target.aroundLaunch = &aroundLaunch;
      target.hookCtx = this;
      walk(program, regions, target);
    } else if (graphsOn && !ctx.hostStaged) {
      // Host-staged collectives synchronize on the host: never captured.
      runCaptured(program, regions, target);
    } else {
      walk(program, regions, target);
    }
    for (cudaStream_t s : ctx.streams)
      CUDA_CHECK(cudaStreamSynchronize(s));
    if (traced)
      finishTrace(hostStart);
    if (ctx.progressDevice) {
      std::lock_guard<std::mutex> lock(ctx.progressMutex);
      ctx.inRun = false;
    }
    ctx.checkAsyncErrors();
    ctx.checkErrors();
  }

  void setGraphs(bool on) override { graphsOn = on; }
  void setAllowTf32(bool on) override { ctx.allowTf32 = on; }

  void setProfiling(bool) override {}
  /// With --trace (a trace that keeps its launches), each run is launched
  /// without graphs, with a pair of timing events around every launch on
  /// its stream; after the run the events' times from a reference event
  /// recorded at its start (every stream waits on it) are the launches'.
  void setTrace(Trace *t) override { trace = t; }
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
      walk(program, regions, target);
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
      walk(program, regions, target);
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

  /// A traced launch: its kernel, stream, ints and events.
  struct Timed {
    int64_t id, stream;
    const int64_t *ints;
    size_t begin, end;
  };

  cudaEvent_t timingEvent(size_t k) {
    while (k >= timing.size()) {
      cudaEvent_t e;
      CUDA_CHECK(cudaEventCreate(&e));
      timing.push_back(e);
    }
    return timing[k];
  }

  /// The reference event, on the compute stream, that every stream waits
  /// on; returns the host time (trace clock) it stands for.
  double startTrace() {
    timed.clear();
    double now = trace->now();
    cudaEvent_t ref = timingEvent(0);
    CUDA_CHECK(cudaEventRecord(ref, ctx.stream(abi::kComputeStream)));
    for (int64_t s = 0; s < abi::kNumStreams; ++s)
      if (s != abi::kComputeStream)
        CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(s), ref, 0));
    return now;
  }

  static void aroundLaunch(void *self, bool after, int64_t id, int64_t stream,
                           const int64_t *ints) {
    auto &b = *static_cast<CudaBackend *>(self);
    size_t k = 1 + 2 * b.timed.size() + (after ? 1 : 0);
    CUDA_CHECK(cudaEventRecord(b.timingEvent(k), b.ctx.stream(stream)));
    if (after)
      b.timed.push_back({id, stream, ints, k - 1, k});
  }

  /// After the run: each launch's device interval, into the trace.
  void finishTrace(double hostStart) {
    for (const Timed &t : timed) {
      float begin = 0, end = 0;
      CUDA_CHECK(cudaEventElapsedTime(&begin, timing[0], timing[t.begin]));
      CUDA_CHECK(cudaEventElapsedTime(&end, timing[0], timing[t.end]));
      trace->add(t.id, t.stream, t.ints, hostStart + 1e3 * double(begin),
                 hostStart + 1e3 * double(end));
    }
  }

  /// Launches `program`'s table (its collectives are counted afresh).
  void walk(const int64_t *program, void *const regions[],
            const ProgramTarget &target) {
    if (ctx.progressDevice) {
      std::lock_guard<std::mutex> lock(ctx.progressMutex);
      ctx.issued->clear();
    }
    runProgram(program, regions, target);
  }

  /// The watchdog's probe (its thread): the first collective of the run in
  /// flight that has not completed.
  bool probe(watchdog::Pending &p) {
    std::lock_guard<std::mutex> lock(ctx.progressMutex);
    if (!ctx.inRun || !ctx.issued)
      return false;
    int64_t done = *ctx.progressHost;
    if (done < 0 || size_t(done) >= ctx.issued->size())
      return false;
    p.what = (*ctx.issued)[size_t(done)].what;
    p.bytes = (*ctx.issued)[size_t(done)].bytes;
    p.id = (ctx.runs << 24) + uint64_t(done);
    return true;
  }

  /// Whether ranks of `mesh` share this rank's GPU (NCCL refuses them); one
  /// note on rank 0 says so, naming them.
  static bool ranksShareGpu(const Mesh &mesh, int device) {
    std::vector<std::string> ids = mesh.gatherStrings(deviceIdentity(device));
    std::string shared;
    for (size_t a = 0; a < ids.size() && shared.empty(); ++a)
      for (size_t b = a + 1; b < ids.size() && shared.empty(); ++b)
        if (ids[a] == ids[b])
          shared = "ranks " + std::to_string(a) + " and " + std::to_string(b) +
                   " share " + ids[a];
    shared = mesh.broadcastString(shared);
    if (!shared.empty() && mesh.rank == 0)
      std::printf("note: %s, which NCCL refuses: the collectives go through "
                  "host memory over MPI instead (the same results, slower, "
                  "without CUDA graphs)\n",
                  shared.c_str());
    return !shared.empty();
  }

  /// The subgroup communicators `program`'s all_gather_subgroup launches
  /// use, made now, before it runs: a split inside an open NCCL group (a
  /// grouped chain of collectives before the launch) leaves its handle NULL
  /// until the group's end, so a lazy split there would keep NULL.
  void makeSubgroups(const int64_t *program) {
    if (!ctx.mesh || ctx.mesh->world <= 1 || ctx.hostStaged)
      return;
    for (const int64_t *p = program; *p != abi::kOpEnd;
         p += abi::recordWords(p)) {
      if (*p != abi::kOpKernel ||
          abi::KernelId(p[1]) != abi::KernelId::all_gather_subgroup)
        continue;
      const int64_t *i = p + abi::kKernelHeaderWords + p[3];
      int64_t N = i[abi::all_gather_subgroup::N],
              axis = i[abi::all_gather_subgroup::axis];
      if (N > 1 && axis >= 0 && axis < int64_t(ctx.axes.size()) &&
          ctx.mesh->axisSize(axis) > 1)
        ctx.subgroup(axis, N);
    }
  }

  /// The NCCL groups of `program`: chains of adjacent launches (no event
  /// between them) on one stream of single-call NCCL collectives
  /// (all_gather, reduce_scatter, all_reduce, all_gather_subgroup over more
  /// than one rank), each independent of the others (none writes what
  /// another reads or writes), which NCCL may then run concurrently.
  std::map<const int64_t *, uint8_t> groupsOf(const int64_t *program) const {
    std::map<const int64_t *, uint8_t> marks;
    if (!ctx.mesh || ctx.mesh->world <= 1 || ctx.hostStaged)
      return marks;
    struct Range {
      int64_t region, begin, end;
    };
    struct Call {
      const int64_t *ints;
      int64_t stream;
      Range in, out;
    };
    auto overlap = [](const Range &a, const Range &b) {
      return a.region == b.region && a.begin < b.end && b.begin < a.end;
    };
    auto range = [](int64_t ref, int64_t bytes) {
      int64_t offset = ref & abi::kOffsetMask;
      return Range{ref >> abi::kRegionShift, offset, offset + bytes};
    };
    auto ranks = [&](int64_t axis) {
      return axis >= 0 && axis < int64_t(ctx.axes.size())
                 ? int64_t(ctx.mesh->axisSize(axis))
                 : int64_t(1);
    };
    // The launch at `p` as a groupable call, if it is one: one NCCL call
    // over more than one rank (over one it is a device copy).
    auto callOf = [&](const int64_t *p, Call &call) {
      using K = abi::KernelId;
      const int64_t *refs = p + abi::kKernelHeaderWords, *i = refs + p[3];
      int64_t axis;
      switch (K(p[1])) {
      case K::all_gather:
        axis = i[abi::all_gather::axis];
        break;
      case K::all_gather_subgroup:
        axis = i[abi::all_gather_subgroup::N] > 1
                   ? i[abi::all_gather_subgroup::axis]
                   : -1;
        break;
      case K::reduce_scatter:
        axis = i[abi::reduce_scatter::axis];
        break;
      case K::all_reduce:
        axis = i[abi::all_reduce::axis];
        break;
      default:
        return false;
      }
      if (ranks(axis) <= 1)
        return false;
      std::vector<cuda::CollectiveBuffer> buffers =
          cuda::collectiveBuffers(p[1], i, *ctx.mesh);
      call = {i, p[2], range(refs[0], buffers[0].bytes),
              range(refs[1], buffers[1].bytes)};
      return true;
    };
    std::vector<Call> chain;
    auto close = [&] {
      if (chain.size() > 1) {
        marks[chain.front().ints] |= cuda::Context::kGroupOpen;
        marks[chain.back().ints] |= cuda::Context::kGroupClose;
      }
      chain.clear();
    };
    for (const int64_t *p = program; *p != abi::kOpEnd;
         p += abi::recordWords(p)) {
      Call call;
      if (*p != abi::kOpKernel || !callOf(p, call)) {
        close();
        continue;
      }
      bool joins = !chain.empty() && chain.back().stream == call.stream;
      for (const Call &other : chain)
        joins = joins && !overlap(other.out, call.in) &&
                !overlap(other.out, call.out) && !overlap(other.in, call.out);
      if (!joins)
        close();
      chain.push_back(call);
    }
    close();
    return marks;
  }

  /// A program that launches a kernel this backend lacks is refused before
  /// anything runs, with every missing kernel named.
  void refuseMissingKernels(const int64_t *program, const KernelFn *kernels) {
    std::set<std::string> missing;
    std::set<std::string> typed;
    for (const int64_t *p = program; *p != abi::kOpEnd;
         p += abi::recordWords(p)) {
      if (*p != abi::kOpKernel)
        continue;
      const abi::KernelInfo &k = abi::kKernels[p[1]];
      if (!kernels[p[1]])
        missing.insert(k.name);
      // Of the typed kernels, some compute on bf16 too; the others on f32
      // only, so far: one on another dtype is refused by name.
      int64_t at = abi::dtypeArg(k);
      abi::KernelId id = abi::KernelId(p[1]);
      bool bf16 = cuda::computesBf16(id);
      int64_t dtype = at >= 0 ? p[abi::kKernelHeaderWords + p[3] + at] : 0;
      bool fp8 = dtype == abi::kF8E4M3 || dtype == abi::kF8E5M2;
      if (at >= 0 && dtype != abi::kF32 && !(bf16 && dtype == abi::kBF16) &&
          !(fp8 && cuda::gathersFp8(id)))
        typed.insert(k.name);
    }
    if (!typed.empty()) {
      std::string list;
      for (const std::string &k : typed)
        list += (list.empty() ? "" : ", ") + k;
      throw std::runtime_error("the CUDA backend has no bf16 kernel for: " +
                               list);
    }
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
  std::map<const int64_t *, std::map<const int64_t *, uint8_t>> groups;
  Trace *trace = nullptr;
  std::vector<cudaEvent_t> timing; ///< [0]: the reference; then pairs
  std::vector<Timed> timed;
  /// Per program: its collectives, in issue order (with a timeout).
  std::map<const int64_t *, std::vector<cuda::Context::Issued>> issued;
  cudaEvent_t fork = nullptr, join[abi::kNumStreams] = {};
  void *arena = nullptr, *constants = nullptr;
  std::vector<void *> hostAllocations; ///< allocateHost's
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
