//===- CudaEmuRuntimeTest.cpp - the emulated runtime refuses as CUDA does -===//
//
// Each test makes a call the CUDA runtime refuses (or orders differently
// than a permissive emulator would) and shows the emulated runtime doing
// what CUDA does: the calls CUDA calls unsafe during a capture, copies from
// or to pageable memory into a captured stream (but a pageable upload of at
// most 64 KiB, which current drivers take: a replay reads its host source
// again), CUDA calls from a host function, overlapping copies, copies whose
// pointers are not of the kind they name, the legacy stream not waiting for
// non-blocking streams, and a stream's synchronization running only that
// stream. Then the seeded
// stream order: a missing wait gives a wrong result under some seed, and a
// present one under every seed, graph replays included. What cudnn-frontend
// asks of a capture: its graph, user objects that graph retains. And the
// kernels' alignment check: a misaligned 128-bit load stops the program.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/launch.h"
#include "runtime/cuda_emu/emu.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace {

// y[0] = the sum of the float4 at x (a 128-bit load).
__global__ void loadFloat4(const float *x, float *y) {
  float4 v = *reinterpret_cast<const float4 *>(x);
  y[0] = v.x + v.y + v.z + v.w;
}

/// A non-blocking stream (the backend's kind), begun capturing.
struct Capture {
  cudaStream_t s = nullptr;
  Capture() {
    EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
              cudaSuccess);
    EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
              cudaSuccess);
  }
  /// Ends the capture: invalidated by what happened inside it.
  cudaError_t end() {
    cudaGraph_t g = nullptr;
    cudaError_t err = cudaStreamEndCapture(s, &g);
    if (g)
      cudaGraphDestroy(g);
    cudaGetLastError();
    return err;
  }
  ~Capture() { cudaStreamDestroy(s); }
};

class CudaEmuRuntime : public ::testing::Test {
protected:
  void SetUp() override {
    shardc::emu::setStreamOrder("last");
    cudaGetLastError();
  }
  void TearDown() override {
    shardc::emu::setStreamOrder("last");
    cudaGetLastError();
  }
};

TEST_F(CudaEmuRuntime, CaptureRefusesAllocationAndFreeing) {
  void *d = nullptr, *h = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&h, 64), cudaSuccess);
  {
    Capture c;
    void *p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(c.end(), cudaErrorStreamCaptureInvalidated);
  }
  {
    Capture c;
    EXPECT_EQ(cudaFree(d), cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(c.end(), cudaErrorStreamCaptureInvalidated);
  }
  {
    Capture c;
    void *p = nullptr;
    EXPECT_EQ(cudaMallocHost(&p, 64), cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(cudaHostAlloc(&p, 64, cudaHostAllocMapped),
              cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(c.end(), cudaErrorStreamCaptureInvalidated);
  }
  {
    Capture c;
    EXPECT_EQ(cudaFreeHost(h), cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(c.end(), cudaErrorStreamCaptureInvalidated);
  }
  // Outside a capture, the same calls succeed.
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(h), cudaSuccess);
}

TEST_F(CudaEmuRuntime, CaptureRefusesFuncSetAttribute) {
  static int kernelStandIn;
  Capture c;
  EXPECT_EQ(cudaFuncSetAttribute(&kernelStandIn,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 64 << 10),
            cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(c.end(), cudaErrorStreamCaptureInvalidated);
}

TEST_F(CudaEmuRuntime, CaptureRefusesPageableCopies) {
  // Beyond the 64 KiB a driver writes into the command stream.
  constexpr size_t kBytes = (64 << 10) + 1;
  void *d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kBytes), cudaSuccess);
  std::vector<char> pageable(kBytes, 1);
  {
    Capture c;
    // The driver stages a large pageable copy: CUDA refuses it in a capture.
    EXPECT_EQ(cudaMemcpyAsync(d, pageable.data(), kBytes,
                              cudaMemcpyHostToDevice, c.s),
              cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(c.end(), cudaErrorStreamCaptureInvalidated);
  }
  {
    // To pageable memory, whatever the size.
    Capture c;
    EXPECT_EQ(cudaMemcpyAsync(pageable.data(), d, 64, cudaMemcpyDeviceToHost,
                              c.s),
              cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(c.end(), cudaErrorStreamCaptureInvalidated);
  }
  cudaFree(d);
}

/// A pageable host-to-device copy of at most 64 KiB is captured, as current
/// drivers take it (cudnn-frontend's workspace uploads): the graph's node
/// reads the host source at each replay, not at capture.
TEST_F(CudaEmuRuntime, CaptureTakesSmallPageableUploads) {
  constexpr size_t kBytes = 64 << 10;
  char *d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, kBytes), cudaSuccess);
  std::vector<char> pageable(kBytes, 1), got(kBytes);
  Capture c;
  ASSERT_EQ(
      cudaMemcpyAsync(d, pageable.data(), kBytes, cudaMemcpyHostToDevice, c.s),
      cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(c.s, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), d, kBytes, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(got, std::vector<char>(kBytes, 0)); // captured, not run
  for (char value : {2, 3}) {
    std::fill(pageable.begin(), pageable.end(), value);
    ASSERT_EQ(cudaGraphLaunch(exec, c.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(c.s), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), d, kBytes, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(got, pageable) << "replay with the host source at " << int(value);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(d);
}

struct HostFunctionSeen {
  std::thread::id thread;
  cudaError_t cudaCall = cudaSuccess;
};

TEST_F(CudaEmuRuntime, HostFunctionsRunOnTheirOwnThreadAndMakeNoCudaCall) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  HostFunctionSeen seen;
  ASSERT_EQ(cudaLaunchHostFunc(
                s,
                [](void *p) {
                  auto *seen = static_cast<HostFunctionSeen *>(p);
                  seen->thread = std::this_thread::get_id();
                  void *d = nullptr;
                  seen->cudaCall = cudaMalloc(&d, 16);
                },
                &seen),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_NE(seen.thread, std::thread::id());
  EXPECT_NE(seen.thread, std::this_thread::get_id());
  EXPECT_EQ(seen.cudaCall, cudaErrorNotPermitted);
  cudaStreamDestroy(s);
}

TEST_F(CudaEmuRuntime, OverlappingCopiesAreRefused) {
  char *d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&d), 256), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d + 16, d, 64, cudaMemcpyDeviceToDevice),
            cudaErrorInvalidValue);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(d, d + 63, 64, cudaMemcpyDeviceToDevice, s),
            cudaErrorInvalidValue);
  // Adjacent ranges do not overlap.
  EXPECT_EQ(cudaMemcpyAsync(d + 64, d, 64, cudaMemcpyDeviceToDevice, s),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
  cudaFree(d);
}

TEST_F(CudaEmuRuntime, CopiesOfTheWrongKindAreRefused) {
  void *d = nullptr, *d2 = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d2, 64), cudaSuccess);
  std::vector<char> host(64);
  EXPECT_EQ(cudaMemcpy(d, d2, 64, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), d, 64, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, d2, 64, cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 64, cudaMemcpyDeviceToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 64, cudaMemcpyHostToHost),
            cudaErrorInvalidValue);
  // The right kinds, and cudaMemcpyDefault, pass.
  EXPECT_EQ(cudaMemcpy(d, host.data(), 64, cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), d, 64, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d2, d, 64, cudaMemcpyDefault), cudaSuccess);
  cudaFree(d);
  cudaFree(d2);
}

TEST_F(CudaEmuRuntime, TheLegacyStreamDoesNotWaitForNonBlockingStreams) {
  char *d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&d), 64), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, 64), cudaSuccess);
  cudaStream_t nonBlocking, blocking;
  ASSERT_EQ(cudaStreamCreateWithFlags(&nonBlocking, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  char got[32];
  // A synchronous copy (the legacy stream) is ordered after a blocking
  // stream's work...
  ASSERT_EQ(cudaMemsetAsync(d, 7, 32, blocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got, d, 32, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got[0], 7);
  // ...not after a non-blocking stream's: it need not see that memset.
  ASSERT_EQ(cudaMemsetAsync(d + 32, 9, 32, nonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got, d + 32, 32, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got[0], 0);
  ASSERT_EQ(cudaStreamSynchronize(nonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got, d + 32, 32, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got[0], 9);
  cudaStreamDestroy(nonBlocking);
  cudaStreamDestroy(blocking);
  cudaFree(d);
}

TEST_F(CudaEmuRuntime, StreamSynchronizeRunsThatStreamAndWhatItWaitsOn) {
  char *d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&d), 96), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, 96), cudaSuccess);
  cudaStream_t a, b, c;
  for (cudaStream_t *s : {&a, &b, &c})
    ASSERT_EQ(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking),
              cudaSuccess);
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 1, 32, b), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, b), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d + 32, 2, 32, c), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(a, e, 0), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d + 64, 3, 32, a), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  char got[96];
  std::memcpy(got, d, 96); // the host reads device memory: emulated only
  EXPECT_EQ(got[0], 1);    // a waited on b
  EXPECT_EQ(got[64], 3);   // a's own
  EXPECT_EQ(got[32], 0);   // c's is not a's to run
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d[32], 2);
  cudaEventDestroy(e);
  for (cudaStream_t s : {a, b, c})
    cudaStreamDestroy(s);
  cudaFree(d);
}

/// Stream a writes x (a memset of 5), stream b copies x to y, waiting on
/// a's event or not; captured and replayed as a graph if `graph`. Returns
/// y's first byte.
int producerConsumer(bool wait, bool graph) {
  char *d = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void **>(&d), 128), cudaSuccess);
  EXPECT_EQ(cudaMemset(d, 0, 128), cudaSuccess);
  cudaStream_t a, b;
  cudaEvent_t fork, written, join;
  EXPECT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  for (cudaEvent_t *e : {&fork, &written, &join})
    EXPECT_EQ(cudaEventCreateWithFlags(e, cudaEventDisableTiming),
              cudaSuccess);
  if (graph) {
    EXPECT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal),
              cudaSuccess);
  }
  EXPECT_EQ(cudaEventRecord(fork, a), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(b, fork, 0), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(d, 5, 64, a), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(written, a), cudaSuccess);
  if (wait) {
    EXPECT_EQ(cudaStreamWaitEvent(b, written, 0), cudaSuccess);
  }
  EXPECT_EQ(cudaMemcpyAsync(d + 64, d, 64, cudaMemcpyDeviceToDevice, b),
            cudaSuccess);
  EXPECT_EQ(cudaEventRecord(join, b), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(a, join, 0), cudaSuccess);
  if (graph) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t x = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(a, &g), cudaSuccess);
    EXPECT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    EXPECT_EQ(cudaGraphLaunch(x, a), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int y = d[64];
  for (cudaEvent_t e : {fork, written, join})
    cudaEventDestroy(e);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  cudaFree(d);
  return y;
}

TEST_F(CudaEmuRuntime, TheSeededOrderFindsAMissingWait) {
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "graph replay" : "streams");
    int stale = 0, fresh = 0;
    for (int seed = 0; seed < 16; ++seed) {
      ASSERT_TRUE(shardc::emu::setStreamOrder("seed:" + std::to_string(seed)));
      // With the wait, every order gives the written value.
      EXPECT_EQ(producerConsumer(true, graph), 5) << "seed " << seed;
      int y = producerConsumer(false, graph);
      (y == 5 ? fresh : stale) += 1;
    }
    // Without it, some seeds run the copy first (and some after).
    EXPECT_GT(stale, 0);
    EXPECT_GT(fresh, 0);
  }
  // The fixed orders try one order each: the stream created last first
  // runs b's copy before a's memset, the one created first after it, and
  // a graph replays in captured order (the copy after the memset), so
  // neither `first` nor a graph replay shows the missing wait.
  ASSERT_TRUE(shardc::emu::setStreamOrder("last"));
  EXPECT_EQ(producerConsumer(false, false), 0);
  EXPECT_EQ(producerConsumer(false, true), 5);
  ASSERT_TRUE(shardc::emu::setStreamOrder("first"));
  EXPECT_EQ(producerConsumer(false, false), 5);
  EXPECT_FALSE(shardc::emu::setStreamOrder("seed:"));
  EXPECT_FALSE(shardc::emu::setStreamOrder("random"));
}

/// What cudnn-frontend asks of a capture: its status and graph; a user
/// object the graph retains lives as long as the graph and its
/// instantiations, its destructor run on the host-function thread.
TEST_F(CudaEmuRuntime, CapturedGraphsRetainUserObjects) {
  static std::atomic<int> destroyed{0};
  static std::atomic<bool> onMainThread{false};
  std::thread::id main = std::this_thread::get_id();
  static std::thread::id *mainId = &main;
  cudaUserObject_t object = nullptr;
  ASSERT_EQ(cudaUserObjectCreate(
                &object, nullptr,
                [](void *) {
                  ++destroyed;
                  onMainThread = std::this_thread::get_id() == *mainId;
                },
                1, cudaUserObjectNoDestructorSync),
            cudaSuccess);
  Capture c;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  unsigned long long id = 0;
  ASSERT_EQ(cudaStreamGetCaptureInfo(c.s, &status, &id, &graph), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_NE(id, 0u);
  ASSERT_NE(graph, nullptr);
  ASSERT_EQ(cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove),
            cudaSuccess);
  cudaGraph_t ended = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(c.s, &ended), cudaSuccess);
  EXPECT_EQ(ended, graph);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);
  EXPECT_EQ(destroyed, 0); // the instantiation still holds it
  cudaGraphExecDestroy(exec);
  EXPECT_EQ(destroyed, 1);
  EXPECT_FALSE(onMainThread);
}

TEST(CudaEmuRuntimeDeathTest, AMisaligned128BitLoadStopsTheProgram) {
  float *x = nullptr, *y = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&x), 64), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&y), 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(x, 0, 64), cudaSuccess);
  // 16-byte aligned: runs.
  SHARDC_LAUNCH(loadFloat4, 1, 1, 0, nullptr, x, y);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // 4 bytes past it: UBSan's alignment check stops the program.
  EXPECT_DEATH(
      {
        SHARDC_LAUNCH(loadFloat4, 1, 1, 0, nullptr, x + 1, y);
        cudaDeviceSynchronize();
      },
      "misaligned address");
  cudaFree(x);
  cudaFree(y);
}

} // namespace
