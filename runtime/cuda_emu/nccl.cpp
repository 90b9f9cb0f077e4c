//===- nccl.cpp - NCCL of the emulated device, over MPI -------------------===//
//
// Host versions of NCCL's calls, with the real declarations of nccl.h, for
// ranks launched by mpirun: every rank is a process with its own emulated
// device, and a communicator is an MPI communicator.
//  - ncclGetUniqueId names a communicator; ncclCommInitRank(Config) makes
//    it from MPI_COMM_WORLD, which every MPI rank must join (as a world
//    communicator is made); ncclCommSplit is MPI_Comm_split of its parent;
//  - the collectives (all-gather, reduce-scatter, all-reduce, broadcast)
//    are enqueued on their stream and run, in stream order, as MPI
//    collectives when the stream's work runs; bf16 and f16 reductions go
//    through f32 and are rounded once;
//  - ncclGroupStart/End bracket calls that are issued together: as NCCL
//    does, the calls are held until the outermost ncclGroupEnd, and then
//    enqueued in reverse issue order (the same on every rank), since NCCL
//    runs a group's operations concurrently: a caller that grouped an
//    operation with one it depends on gets wrong results here too;
//    a ncclCommSplit inside a group leaves its handle NULL until then;
//  - a non-blocking communicator (ncclConfig_t blocking = 0) is still
//    being made when ncclCommInitRankConfig and ncclCommSplit return
//    (ncclInProgress) until ncclCommGetAsyncError has said so once, so that
//    a caller's wait for it runs;
//  - a collective waits for its MPI request polling, and gives up when its
//    communicator is aborted meanwhile (ncclCommAbort from another thread,
//    as a watchdog calls it): its collectives not yet run are dropped;
//  - as NCCL's argument checks, every call on a communicator refuses NULL
//    (ncclInvalidArgument; ncclCommDestroy, ncclCommAbort and
//    ncclCommFinalize of NULL do nothing, as NCCL's);
//  - ncclCommAbort frees NCCL's communicator, so any later call on it is a
//    use after free: here the handle stays allocated, marked dead, and
//    every call on it (ncclCommGetAsyncError, a second abort, destroy
//    included) fails with ncclInvalidArgument, naming the call;
//  - the MPI calls of a collective run where the stream's work runs; off
//    MPI's main thread they need MPI_THREAD_SERIALIZED, or are refused;
//  - SHARDC_NCCL_EMU_LOG=PATH: every collective that runs (a graph replay
//    included) appends a line to PATH.<MPI rank>: the call, the world ranks
//    of its communicator and the bytes of its full buffer (what the
//    compiler's report counts), so that a test can count NCCL's calls.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda_emu/emu.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mpi.h>
#include <nccl.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 1;
  bool blocking = true;
  std::atomic<bool> aborted{false};
  std::atomic<ncclResult_t> asyncError{ncclSuccess};
  std::string worldRanks; ///< "0,2": the log's name of the communicator
};

namespace {

int groupDepth = 0;
/// The calls of the open group: enqueued at its end.
struct Held {
  cudaStream_t stream;
  const char *what;
  std::function<void()> work;
};
std::vector<Held> held;
/// Set while a grouped call runs (the log says so).
bool runningGrouped = false;
/// Splits made inside the open group: as NCCL's, the caller's handle is
/// NULL until the outermost ncclGroupEnd writes the communicator to it.
struct HeldSplit {
  ncclComm_t *out;
  ncclComm_t comm;
};
std::vector<HeldSplit> heldSplits;

ncclResult_t fail(ncclResult_t result, const std::string &why) {
  std::fprintf(stderr, "cuda-emulation: NCCL: %s\n", why.c_str());
  std::fflush(stderr);
  return result;
}

/// `comm` as an argument of `call`: NULL is refused, as NCCL's CommCheck
/// refuses it; so is an aborted one, which NCCL has freed.
ncclResult_t usable(ncclComm_t comm, const char *call) {
  if (!comm)
    return fail(ncclInvalidArgument, std::string(call) + ": comm is NULL");
  if (comm->aborted)
    return fail(ncclInvalidArgument,
                std::string(call) + ": the communicator was aborted "
                                    "(ncclCommAbort frees it): a use after "
                                    "abort");
  return ncclSuccess;
}

/// A pointer argument of `call` that NCCL's PtrCheck refuses when NULL.
ncclResult_t notNull(const void *p, const char *call, const char *name) {
  if (!p)
    return fail(ncclInvalidArgument,
                std::string(call) + ": " + name + " is NULL");
  return ncclSuccess;
}

/// Whether this thread may call MPI now: MPI's main thread may; another
/// (the emulated device's, running the stream's work) only if MPI was
/// initialized for threads that take turns (MPI_THREAD_SERIALIZED or more).
bool mpiThreadAllowed(const char *what) {
  int level = MPI_THREAD_SINGLE, main = 0;
  MPI_Query_thread(&level);
  MPI_Is_thread_main(&main);
  if (main || level >= MPI_THREAD_SERIALIZED)
    return true;
  fail(ncclSystemError,
       std::string(what) + " runs on a thread other than MPI's main one, "
                           "which MPI's thread level (" +
           (level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED"
                                         : "MPI_THREAD_SINGLE") +
           ") forbids: initialize MPI with MPI_Init_thread and "
           "MPI_THREAD_SERIALIZED");
  return false;
}

/// MPI must be running: NCCL's ranks are MPI's.
bool mpiReady(const char *call) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    fail(ncclInvalidUsage,
         std::string(call) + ": the emulated NCCL runs over MPI, which is "
                             "not initialized (launch with mpirun)");
  return initialized != 0;
}

size_t typeBytes(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
  case ncclUint8:
  case ncclFloat8e4m3:
  case ncclFloat8e5m2:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}

/// Reductions of these types run as MPI reductions (f16 and bf16 widened
/// to f32).
bool reducible(ncclDataType_t t) {
  return t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat16 || t == ncclInt32 || t == ncclInt64;
}

MPI_Datatype mpiType(ncclDataType_t t) {
  switch (t) {
  case ncclFloat64:
    return MPI_DOUBLE;
  case ncclInt32:
    return MPI_INT32_T;
  case ncclInt64:
    return MPI_INT64_T;
  default:
    return MPI_FLOAT;
  }
}

MPI_Op mpiOp(ncclRedOp_t op) {
  switch (op) {
  case ncclProd:
    return MPI_PROD;
  case ncclMax:
    return MPI_MAX;
  case ncclMin:
    return MPI_MIN;
  default:
    return MPI_SUM;
  }
}

/// `count` elements of t as the MPI type they reduce in.
std::vector<char> widen(const void *p, size_t count, ncclDataType_t t) {
  std::vector<char> out;
  if (t == ncclBfloat16 || t == ncclFloat16) {
    out.resize(count * 4);
    float *f = reinterpret_cast<float *>(out.data());
    for (size_t k = 0; k < count; ++k)
      f[k] = t == ncclBfloat16
                 ? __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[k])
                 : __half2float(static_cast<const __half *>(p)[k]);
  } else {
    out.assign(static_cast<const char *>(p),
               static_cast<const char *>(p) + count * typeBytes(t));
  }
  return out;
}

void narrow(const std::vector<char> &wide, void *p, size_t count,
            ncclDataType_t t, double scale) {
  if (t == ncclBfloat16 || t == ncclFloat16) {
    const float *f = reinterpret_cast<const float *>(wide.data());
    for (size_t k = 0; k < count; ++k) {
      float v = float(f[k] * scale);
      if (t == ncclBfloat16)
        static_cast<__nv_bfloat16 *>(p)[k] = __float2bfloat16(v);
      else
        static_cast<__half *>(p)[k] = __float2half(v);
    }
    return;
  }
  std::memcpy(p, wide.data(), count * typeBytes(t));
  if (scale != 1.0) {
    if (t == ncclFloat32)
      for (size_t k = 0; k < count; ++k)
        static_cast<float *>(p)[k] = float(static_cast<float *>(p)[k] * scale);
    else if (t == ncclFloat64)
      for (size_t k = 0; k < count; ++k)
        static_cast<double *>(p)[k] *= scale;
  }
}

/// Fills in `c` from its MPI communicator; non-blocking when `config`
/// says so (or, without one, when `parent` is).
ncclResult_t made(ncclComm *c, const ncclConfig_t *config,
                  const ncclComm *parent) {
  MPI_Comm_rank(c->mpi, &c->rank);
  MPI_Comm_size(c->mpi, &c->size);
  MPI_Group world, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Comm_group(c->mpi, &group);
  std::vector<int> mine(size_t(c->size)), theirs(size_t(c->size));
  for (int r = 0; r < c->size; ++r)
    mine[size_t(r)] = r;
  MPI_Group_translate_ranks(group, c->size, mine.data(), world, theirs.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  for (int r : theirs)
    c->worldRanks += (c->worldRanks.empty() ? "" : ",") + std::to_string(r);
  c->blocking = config && config->blocking != NCCL_CONFIG_UNDEF_INT
                    ? config->blocking != 0
                    : (parent ? parent->blocking : true);
  if (c->blocking)
    return ncclSuccess;
  c->asyncError = ncclInProgress;
  return ncclInProgress;
}

/// Waits for `request`; false if `comm` was aborted meanwhile.
bool wait(ncclComm_t comm, MPI_Request *request, int *rc) {
  for (int polls = 0;; ++polls) {
    int done = 0;
    *rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (done || *rc != MPI_SUCCESS)
      return true;
    if (comm->aborted.load())
      return false; // the request is abandoned with its communicator
    if (polls > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

/// SHARDC_NCCL_EMU_LOG: one line per collective run.
void logCall(ncclComm_t comm, const char *what, size_t fullBytes) {
  static FILE *log = [] () -> FILE * {
    const char *path = std::getenv("SHARDC_NCCL_EMU_LOG");
    if (!path || !*path)
      return nullptr;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::string file = std::string(path) + "." + std::to_string(rank);
    FILE *f = std::fopen(file.c_str(), "a");
    if (!f)
      fail(ncclSystemError, "SHARDC_NCCL_EMU_LOG: cannot open " + file);
    return f;
  }();
  if (!log)
    return;
  std::fprintf(log, "%s ranks=%s bytes=%zu%s\n", what,
               comm->worldRanks.c_str(), fullBytes,
               runningGrouped ? " grouped" : "");
  std::fflush(log);
}

/// Enqueues collective `what` of `comm` on `stream`.
ncclResult_t enqueue(ncclComm_t comm, cudaStream_t stream, const char *what,
                     std::function<int()> run) {
  if (comm->asyncError == ncclInProgress)
    return fail(ncclInvalidUsage,
                std::string(what) + " on a communicator still being made "
                                    "(wait until ncclCommGetAsyncError says "
                                    "ncclSuccess)");
  auto work = [comm, what, run]() {
    if (comm->aborted) {
      comm->asyncError = ncclRemoteError;
      return;
    }
    if (!mpiThreadAllowed(what)) {
      comm->asyncError = ncclSystemError;
      return;
    }
    int rc = run();
    if (comm->aborted) {
      comm->asyncError = ncclRemoteError;
      return;
    }
    if (rc != MPI_SUCCESS) {
      comm->asyncError = ncclSystemError;
      fail(ncclSystemError,
           std::string(what) + ": the MPI collective failed on rank " +
               std::to_string(comm->rank));
    }
  };
  if (groupDepth > 0) {
    held.push_back({stream, what, [work]() {
                      runningGrouped = true;
                      work();
                      runningGrouped = false;
                    }});
    return ncclSuccess;
  }
  cudaError_t err = shardc::emu::enqueue(stream, what, work);
  return err == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

/// NCCL moves device memory: a buffer that is not (host memory, even
/// pinned, as --offload=cpu's regions are) is refused, so that a schedule
/// that forgets a host copy fails here as it would on a GPU.
ncclResult_t deviceBuffers(const char *what, const void *send,
                           const void *recv) {
  for (const void *p : {send, recv})
    if (!shardc::emu::isDeviceMemory(p))
      return fail(ncclInvalidArgument,
                  std::string(what) + ": a buffer is not device memory "
                                      "(cudaMalloc'd)");
  return ncclSuccess;
}

} // namespace

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  static std::atomic<uint64_t> counter{0};
  std::memset(id->internal, 0, sizeof(id->internal));
  uint64_t words[2] = {uint64_t(getpid()), ++counter};
  std::memcpy(id->internal, words, sizeof(words));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  if (ncclResult_t r = notNull(comm, "ncclCommInitRank", "comm"))
    return r;
  *comm = nullptr;
  if (!mpiReady("ncclCommInitRank"))
    return ncclInvalidUsage;
  // Ranks that share the id form the communicator, ordered by `rank`.
  uint64_t h = 1469598103934665603ull;
  for (char c : id.internal)
    h = (h ^ uint8_t(c)) * 1099511628211ull;
  auto *c = new ncclComm;
  if (MPI_Comm_split(MPI_COMM_WORLD, int(h & 0x3fffffff), rank, &c->mpi) !=
      MPI_SUCCESS) {
    delete c;
    return fail(ncclSystemError, "ncclCommInitRank: MPI_Comm_split failed");
  }
  ncclResult_t result = made(c, config, nullptr);
  if (c->size != nranks || c->rank != rank) {
    std::string why = "ncclCommInitRank: rank " + std::to_string(rank) +
                      " of " + std::to_string(nranks) +
                      ", but the MPI ranks with this id are " +
                      std::to_string(c->size);
    MPI_Comm_free(&c->mpi);
    delete c;
    return fail(ncclInvalidArgument, why);
  }
  *comm = c;
  return result;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *config) {
  if (ncclResult_t r = usable(comm, "ncclCommSplit"))
    return r;
  if (ncclResult_t r = notNull(newcomm, "ncclCommSplit", "newcomm"))
    return r;
  *newcomm = nullptr;
  MPI_Comm out;
  if (MPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED
                                                            : color,
                     key, &out) != MPI_SUCCESS)
    return fail(ncclSystemError, "ncclCommSplit: MPI_Comm_split failed");
  if (color == NCCL_SPLIT_NOCOLOR)
    return ncclSuccess;
  auto *c = new ncclComm;
  c->mpi = out;
  *newcomm = c;
  ncclResult_t result = made(c, config, comm);
  if (groupDepth > 0) {
    heldSplits.push_back({newcomm, c});
    *newcomm = nullptr;
  }
  return result;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  if (ncclResult_t r = usable(comm, "ncclCommFinalize"))
    return r;
  shardc::emu::synchronizeAll("ncclCommFinalize");
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  if (ncclResult_t r = usable(comm, "ncclCommDestroy"))
    return r;
  shardc::emu::synchronizeAll("ncclCommDestroy");
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm->mpi != MPI_COMM_NULL)
    MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  if (ncclResult_t r = usable(comm, "ncclCommAbort"))
    return r;
  // NCCL frees the communicator. Here the record stays (a few bytes),
  // marked dead: its collectives not yet run are dropped when their stream
  // reaches them, one waiting gives up, and any call on it fails (usable).
  // The MPI communicator is left to MPI_Finalize (freeing it is collective).
  comm->aborted = true;
  comm->asyncError = ncclRemoteError;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (the emulated device printed why)";
  case ncclSystemError:
    return "unhandled system error (the emulated NCCL printed why)";
  case ncclInternalError:
    return "internal error";
  case ncclInvalidArgument:
    return "invalid argument (the emulated NCCL printed why)";
  case ncclInvalidUsage:
    return "invalid usage (the emulated NCCL printed why)";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  default:
    return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t) { return ""; }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *error) {
  if (ncclResult_t r = usable(comm, "ncclCommGetAsyncError"))
    return r;
  if (ncclResult_t r = notNull(error, "ncclCommGetAsyncError", "asyncError"))
    return r;
  *error = comm->asyncError;
  // A communicator being made is made once this was asked.
  ncclResult_t inProgress = ncclInProgress;
  comm->asyncError.compare_exchange_strong(inProgress, ncclSuccess);
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  if (ncclResult_t r = usable(comm, "ncclCommCount"))
    return r;
  if (ncclResult_t r = notNull(count, "ncclCommCount", "count"))
    return r;
  *count = comm->size;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
  if (ncclResult_t r = usable(comm, "ncclCommCuDevice"))
    return r;
  if (ncclResult_t r = notNull(device, "ncclCommCuDevice", "device"))
    return r;
  *device = 0;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  if (ncclResult_t r = usable(comm, "ncclCommUserRank"))
    return r;
  if (ncclResult_t r = notNull(rank, "ncclCommUserRank", "rank"))
    return r;
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--groupDepth > 0)
    return ncclSuccess;
  for (const HeldSplit &split : heldSplits)
    *split.out = split.comm;
  heldSplits.clear();
  std::vector<Held> calls = std::move(held);
  held.clear();
  for (auto it = calls.rbegin(); it != calls.rend(); ++it)
    if (shardc::emu::enqueue(it->stream, it->what, std::move(it->work)) !=
        cudaSuccess)
      return ncclUnhandledCudaError;
  return ncclSuccess;
}

// sendbuff[sendcount] of each rank -> recvbuff[nranks * sendcount], rank
// order
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff,
                           size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t r = usable(comm, "ncclAllGather"))
    return r;
  if (ncclResult_t r = deviceBuffers("ncclAllGather", sendbuff, recvbuff))
    return r;
  size_t bytes = sendcount * typeBytes(datatype);
  return enqueue(comm, stream, "ncclAllGather", [=]() {
    logCall(comm, "ncclAllGather", bytes * size_t(comm->size));
    MPI_Request request;
    int rc;
    if (sendbuff == static_cast<char *>(recvbuff) + comm->rank * bytes)
      rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_BYTE, recvbuff, int(bytes),
                          MPI_BYTE, comm->mpi, &request);
    else
      rc = MPI_Iallgather(sendbuff, int(bytes), MPI_BYTE, recvbuff,
                          int(bytes), MPI_BYTE, comm->mpi, &request);
    if (rc == MPI_SUCCESS)
      wait(comm, &request, &rc);
    return rc;
  });
}

// sendbuff[nranks * recvcount] -> recvbuff[recvcount]: block `rank` of the
// reduction over ranks
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                               size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (ncclResult_t r = usable(comm, "ncclReduceScatter"))
    return r;
  if (ncclResult_t r = deviceBuffers("ncclReduceScatter", sendbuff, recvbuff))
    return r;
  if (!reducible(datatype) || op >= ncclNumOps)
    return fail(ncclInvalidArgument,
                "ncclReduceScatter: type or operation not emulated");
  return enqueue(comm, stream, "ncclReduceScatter", [=]() {
    size_t total = recvcount * size_t(comm->size);
    logCall(comm, "ncclReduceScatter", total * typeBytes(datatype));
    std::vector<char> in = widen(sendbuff, total, datatype);
    size_t wideBytes = in.size() / total;
    std::vector<char> out(recvcount * wideBytes);
    MPI_Request request;
    int rc = MPI_Ireduce_scatter_block(in.data(), out.data(), int(recvcount),
                                       mpiType(datatype), mpiOp(op),
                                       comm->mpi, &request);
    if (rc == MPI_SUCCESS && wait(comm, &request, &rc) && rc == MPI_SUCCESS)
      narrow(out, recvbuff, recvcount, datatype,
             op == ncclAvg ? 1.0 / comm->size : 1.0);
    return rc;
  });
}

// sendbuff[count] -> recvbuff[count], the reduction over ranks
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t r = usable(comm, "ncclAllReduce"))
    return r;
  if (ncclResult_t r = deviceBuffers("ncclAllReduce", sendbuff, recvbuff))
    return r;
  if (!reducible(datatype) || op >= ncclNumOps)
    return fail(ncclInvalidArgument,
                "ncclAllReduce: type or operation not emulated");
  return enqueue(comm, stream, "ncclAllReduce", [=]() {
    logCall(comm, "ncclAllReduce", count * typeBytes(datatype));
    std::vector<char> in = widen(sendbuff, count, datatype);
    std::vector<char> out(in.size());
    MPI_Request request;
    int rc = MPI_Iallreduce(in.data(), out.data(), int(count),
                            mpiType(datatype), mpiOp(op), comm->mpi, &request);
    if (rc == MPI_SUCCESS && wait(comm, &request, &rc) && rc == MPI_SUCCESS)
      narrow(out, recvbuff, count, datatype,
             op == ncclAvg ? 1.0 / comm->size : 1.0);
    return rc;
  });
}

// root's sendbuff[count] -> every rank's recvbuff[count]
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  if (ncclResult_t r = usable(comm, "ncclBroadcast"))
    return r;
  if (ncclResult_t r = deviceBuffers("ncclBroadcast", sendbuff, recvbuff))
    return r;
  size_t bytes = count * typeBytes(datatype);
  return enqueue(comm, stream, "ncclBroadcast", [=]() {
    logCall(comm, "ncclBroadcast", bytes);
    if (comm->rank == root && sendbuff != recvbuff)
      std::memmove(recvbuff, sendbuff, bytes);
    MPI_Request request;
    int rc = MPI_Ibcast(recvbuff, int(bytes), MPI_BYTE, root, comm->mpi,
                        &request);
    if (rc == MPI_SUCCESS)
      wait(comm, &request, &rc);
    return rc;
  });
}

} // extern "C"
