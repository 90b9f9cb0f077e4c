//===- CudaEmulatedNcclTest.cpp - NCCL of the emulated device, over MPI ---===//
//
// Run under mpirun with 2 ranks (ctest does): each rank has its own emulated
// device; communicators are made as a trainer makes them (a unique id
// broadcast over MPI, a world communicator, splits), and every collective's
// result is checked against the sum or gather written out by hand.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda_emu/emu.h"

#include <cuda_bf16.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <thread>
#include <vector>

namespace {

int rank = 0, world = 1;

#define NCCL_OK(call) ASSERT_EQ((call), ncclSuccess)
#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess)

class EmulatedNccl : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(world, 2) << "run under mpirun -np 2";
    ncclUniqueId id;
    if (rank == 0) {
      NCCL_OK(ncclGetUniqueId(&id));
    }
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL_OK(ncclCommInitRank(&comm, world, id, rank));
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (comm)
      ncclCommDestroy(comm);
    cudaStreamDestroy(stream);
  }
  /// n device floats holding `host`.
  float *device(const std::vector<float> &host) {
    float *d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, host.size() * 4), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * 4,
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    return d;
  }
  std::vector<float> host(const float *d, size_t n) {
    std::vector<float> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    return h;
  }
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

/// Element k of rank r's input.
float value(int r, int k) { return float(r * 1000 + k) * 0.5f; }

TEST_F(EmulatedNccl, AllGatherReduceScatterAllReduce) {
  const int n = 37;
  std::vector<float> mine(n), twice(2 * n);
  for (int k = 0; k < n; ++k)
    mine[k] = value(rank, k);
  for (int k = 0; k < 2 * n; ++k)
    twice[k] = value(rank, k);
  float *in = device(mine), *in2 = device(twice);
  float *gathered = device(std::vector<float>(2 * n, -1));
  float *scattered = device(std::vector<float>(n, -1));
  float *reduced = device(std::vector<float>(n, -1));
  // Issued together, as the schedule issues a group's calls.
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllGather(in, gathered, n, ncclFloat32, comm, stream));
  NCCL_OK(ncclReduceScatter(in2, scattered, n, ncclFloat32, ncclSum, comm,
                            stream));
  NCCL_OK(ncclAllReduce(in, reduced, n, ncclFloat32, ncclAvg, comm, stream));
  NCCL_OK(ncclGroupEnd());
  CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<float> g = host(gathered, 2 * n), s = host(scattered, n),
                     a = host(reduced, n);
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < n; ++k)
      EXPECT_EQ(g[r * n + k], value(r, k));
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(s[k], value(0, rank * n + k) + value(1, rank * n + k));
    EXPECT_EQ(a[k], (value(0, k) + value(1, k)) / 2);
  }
  ncclResult_t async;
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  EXPECT_EQ(async, ncclSuccess);
}

// bf16 sums go through f32 and are rounded once.
TEST_F(EmulatedNccl, Bf16ReduceScatter) {
  const int n = 16;
  std::vector<__nv_bfloat16> in(2 * n);
  for (int k = 0; k < 2 * n; ++k)
    in[k] = __float2bfloat16(value(rank, k) / 100);
  __nv_bfloat16 *d, *out;
  CUDA_OK(cudaMalloc(&d, in.size() * 2));
  CUDA_OK(cudaMalloc(&out, n * 2));
  CUDA_OK(cudaMemcpy(d, in.data(), in.size() * 2, cudaMemcpyHostToDevice));
  NCCL_OK(ncclReduceScatter(d, out, n, ncclBfloat16, ncclSum, comm, stream));
  // A non-blocking stream: cudaMemcpy does not wait for it.
  CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<__nv_bfloat16> got(n);
  CUDA_OK(cudaMemcpy(got.data(), out, n * 2, cudaMemcpyDeviceToHost));
  for (int k = 0; k < n; ++k) {
    float a = __bfloat162float(__float2bfloat16(value(0, rank * n + k) / 100));
    float b = __bfloat162float(__float2bfloat16(value(1, rank * n + k) / 100));
    EXPECT_EQ(__bfloat162float(got[k]), __bfloat162float(__float2bfloat16(a + b)));
  }
}

// Split by rank: two communicators of one rank each, where an all-reduce is
// the identity; split by nothing: the world again.
TEST_F(EmulatedNccl, Split) {
  ncclComm_t alone, both;
  NCCL_OK(ncclCommSplit(comm, rank, 0, &alone, nullptr));
  NCCL_OK(ncclCommSplit(comm, 0, rank, &both, nullptr));
  int count = 0, me = -1;
  NCCL_OK(ncclCommCount(alone, &count));
  EXPECT_EQ(count, 1);
  NCCL_OK(ncclCommCount(both, &count));
  NCCL_OK(ncclCommUserRank(both, &me));
  EXPECT_EQ(count, 2);
  EXPECT_EQ(me, rank);
  std::vector<float> mine = {value(rank, 0), value(rank, 1)};
  float *in = device(mine), *out = device({0, 0});
  NCCL_OK(ncclAllReduce(in, out, 2, ncclFloat32, ncclSum, alone, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(host(out, 2), mine);
  ncclCommDestroy(alone);
  ncclCommDestroy(both);
}

// A split inside a group, as NCCL makes it: the handle is NULL until the
// outermost ncclGroupEnd (a caller that keeps it earlier keeps NULL), and
// a collective on a NULL communicator is refused.
TEST_F(EmulatedNccl, SplitInsideAGroupIsNullUntilItsEnd) {
  ncclComm_t both = reinterpret_cast<ncclComm_t>(&both);
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclCommSplit(comm, 0, rank, &both, nullptr));
  EXPECT_EQ(both, nullptr);
  NCCL_OK(ncclGroupEnd());
  EXPECT_EQ(both, nullptr) << "an inner ncclGroupEnd completed the split";
  float *in = device({1, 2}), *out = device({0, 0});
  EXPECT_EQ(ncclAllReduce(in, out, 2, ncclFloat32, ncclSum, both, stream),
            ncclInvalidArgument);
  NCCL_OK(ncclGroupEnd());
  ASSERT_NE(both, nullptr);
  int count = 0;
  NCCL_OK(ncclCommCount(both, &count));
  EXPECT_EQ(count, 2);
  NCCL_OK(ncclAllReduce(in, out, 2, ncclFloat32, ncclSum, both, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(host(out, 2), std::vector<float>({2, 4}));
  ncclCommDestroy(both);
}

// Abort: what was enqueued and not run is dropped, never waited for.
TEST_F(EmulatedNccl, AbortDropsPendingWork) {
  float *in = device({1, 2}), *out = device({-1, -1});
  if (rank == 0) {
    // Only rank 0 enqueues: run, it would wait forever for rank 1.
    NCCL_OK(ncclAllReduce(in, out, 2, ncclFloat32, ncclSum, comm, stream));
    NCCL_OK(ncclCommAbort(comm));
    comm = nullptr;
    CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_EQ(host(out, 2), std::vector<float>({-1, -1}));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A collective already waiting (rank 1 never joins) gives up when another
// thread aborts its communicator, as the trainer's watchdog does: the wait
// returns, the output is untouched and the asynchronous error says why.
TEST_F(EmulatedNccl, AbortFromAnotherThreadEndsAWait) {
  float *in = device({1, 2}), *out = device({-1, -1});
  if (rank == 0) {
    NCCL_OK(ncclAllReduce(in, out, 2, ncclFloat32, ncclSum, comm, stream));
    std::thread watchdog([c = comm] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ncclCommAbort(c);
    });
    CUDA_OK(cudaStreamSynchronize(stream)); // waits in the all-reduce
    watchdog.join();
    EXPECT_EQ(host(out, 2), std::vector<float>({-1, -1}));
    // NCCL freed the communicator: asking it anything is a use after free.
    ncclResult_t async = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclInvalidArgument);
    comm = nullptr;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// NCCL's argument checks refuse a NULL communicator (NCCL_COMM_NULL) in
// every call on one, as a handle a split left NULL would be used; destroy,
// abort and finalize of NULL do nothing, as NCCL's.
TEST_F(EmulatedNccl, NullCommunicatorRefused) {
  ncclComm_t none = NCCL_COMM_NULL;
  float *in = device({1, 2}), *out = device({0, 0, 0, 0});
  EXPECT_EQ(ncclAllGather(in, out, 2, ncclFloat32, none, stream),
            ncclInvalidArgument);
  EXPECT_EQ(ncclReduceScatter(out, in, 2, ncclFloat32, ncclSum, none, stream),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(in, in, 2, ncclFloat32, ncclSum, none, stream),
            ncclInvalidArgument);
  EXPECT_EQ(ncclBroadcast(in, in, 2, ncclFloat32, 0, none, stream),
            ncclInvalidArgument);
  ncclComm_t child = reinterpret_cast<ncclComm_t>(&child);
  EXPECT_EQ(ncclCommSplit(none, 0, rank, &child, nullptr),
            ncclInvalidArgument);
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(none, &async), ncclInvalidArgument);
  int value = -1;
  EXPECT_EQ(ncclCommCount(none, &value), ncclInvalidArgument);
  EXPECT_EQ(ncclCommUserRank(none, &value), ncclInvalidArgument);
  EXPECT_EQ(ncclCommCuDevice(none, &value), ncclInvalidArgument);
  EXPECT_EQ(value, -1);
  // A NULL result pointer is refused too (NCCL's PtrCheck).
  EXPECT_EQ(ncclCommGetAsyncError(comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommSplit(comm, 0, rank, nullptr, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(none), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(none), ncclSuccess);
  EXPECT_EQ(ncclCommFinalize(none), ncclSuccess);
  // Nothing was enqueued: the stream is empty, the communicator fine.
  CUDA_OK(cudaStreamSynchronize(stream));
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  EXPECT_EQ(async, ncclSuccess);
}

// ncclCommAbort frees NCCL's communicator: every later call on it (a
// watchdog's abort racing the main thread's ncclCommGetAsyncError, a
// second abort, a destroy) is a use after free. The emulated one stays
// allocated and refuses each, so that such a call fails a test.
TEST_F(EmulatedNccl, AbortedCommunicatorPoisoned) {
  ncclComm_t both = nullptr;
  NCCL_OK(ncclCommSplit(comm, 0, rank, &both, nullptr));
  ASSERT_NE(both, nullptr);
  NCCL_OK(ncclCommAbort(both));
  float *in = device({1, 2}), *out = device({-1, -1});
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(both, &async), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(in, out, 2, ncclFloat32, ncclSum, both, stream),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllGather(in, out, 1, ncclFloat32, both, stream),
            ncclInvalidArgument);
  ncclComm_t child = nullptr;
  EXPECT_EQ(ncclCommSplit(both, 0, rank, &child, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(child, nullptr);
  int value = -1;
  EXPECT_EQ(ncclCommCount(both, &value), ncclInvalidArgument);
  EXPECT_EQ(ncclCommUserRank(both, &value), ncclInvalidArgument);
  EXPECT_EQ(ncclCommFinalize(both), ncclInvalidArgument);
  EXPECT_EQ(ncclCommAbort(both), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(both), ncclInvalidArgument);
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(host(out, 2), std::vector<float>({-1, -1}));
  // Its parent is untouched.
  NCCL_OK(ncclAllReduce(in, out, 2, ncclFloat32, ncclSum, comm, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(host(out, 2), std::vector<float>({2, 4}));
}

// The MPI of a collective runs where its stream's work runs: here on a
// thread that is not MPI's main one, which MPI_Init's level
// (MPI_THREAD_SINGLE) forbids: refused on every rank, not called.
TEST_F(EmulatedNccl, CollectiveOffMainThreadNeedsSerializedMpi) {
  int level = MPI_THREAD_MULTIPLE;
  MPI_Query_thread(&level);
  if (level >= MPI_THREAD_SERIALIZED)
    GTEST_SKIP() << "MPI allows threads that take turns";
  float *in = device({1, 2}), *out = device({-1, -1});
  NCCL_OK(ncclAllReduce(in, out, 2, ncclFloat32, ncclSum, comm, stream));
  std::thread device([this] { cudaStreamSynchronize(stream); });
  device.join();
  ncclResult_t async = ncclSuccess;
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  EXPECT_EQ(async, ncclSystemError);
  EXPECT_EQ(host(out, 2), std::vector<float>({-1, -1}));
  MPI_Barrier(MPI_COMM_WORLD);
}

// A non-blocking communicator is in progress when made, until
// ncclCommGetAsyncError has said so; a collective on it before then is
// refused. Then it works as a blocking one.
TEST_F(EmulatedNccl, NonBlockingCommunicator) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t nb = nullptr;
  ASSERT_EQ(ncclCommSplit(comm, 0, rank, &nb, &config), ncclInProgress);
  float *in = device({float(rank + 1)}), *out = device({0});
  EXPECT_EQ(ncclAllReduce(in, out, 1, ncclFloat32, ncclSum, nb, stream),
            ncclInvalidUsage);
  ncclResult_t state = ncclSuccess;
  NCCL_OK(ncclCommGetAsyncError(nb, &state));
  EXPECT_EQ(state, ncclInProgress); // the first answer
  NCCL_OK(ncclCommGetAsyncError(nb, &state));
  EXPECT_EQ(state, ncclSuccess);
  NCCL_OK(ncclAllReduce(in, out, 1, ncclFloat32, ncclSum, nb, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(host(out, 1)[0], 3.0f);
  ncclCommDestroy(nb);
}

// Host functions run in stream order, between the device work around them.
TEST_F(EmulatedNccl, HostFunctionInStreamOrder) {
  float *d = device({0});
  static float seen = -1;
  static float *pinned = nullptr;
  CUDA_OK(cudaMallocHost(&pinned, 4));
  float one = 1, two = 2;
  CUDA_OK(cudaMemcpyAsync(d, &one, 4, cudaMemcpyHostToDevice, stream));
  CUDA_OK(cudaMemcpyAsync(pinned, d, 4, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaLaunchHostFunc(
      stream, [](void *) { seen = *pinned; }, nullptr));
  CUDA_OK(cudaMemcpyAsync(d, &two, 4, cudaMemcpyHostToDevice, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(seen, 1.0f);
  EXPECT_EQ(host(d, 1)[0], 2.0f);
  cudaFreeHost(pinned);
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}
