//===- CudaEmulatorTest.cpp - the emulated device keeps CUDA's model ------===//
#include "runtime/cuda/context.h"
#include "runtime/cuda/launch.h"
#include "runtime/cuda_emu/emu.h"

#include <cublasLt.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace {

// y[blocks] = sum of x[blocks * 256] per block: a tree reduction in shared
// memory, with or without the barrier between its levels.
__global__ void blockReduce(const float *x, float *y, bool barrier) {
  __shared__ float part[256];
  int t = threadIdx.x;
  part[t] = x[blockIdx.x * 256 + t];
  if (barrier)
    __syncthreads();
  for (int stride = 128; stride > 0; stride /= 2) {
    if (t < stride)
      part[t] += part[t + stride];
    if (barrier)
      __syncthreads();
  }
  if (t == 0)
    y[blockIdx.x] = part[0];
}

} // namespace

TEST(CudaEmulator, ReductionNeedsItsBarrier) {
  const int blocks = 8;
  std::vector<float> x(blocks * 256);
  for (size_t k = 0; k < x.size(); ++k)
    x[k] = float(k % 7 + 1);
  float *dx, *dy;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, blocks * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  for (bool barrier : {true, false}) {
    SHARDC_LAUNCH(blockReduce, blocks, 256, 0, nullptr, dx, dy, barrier);
    std::vector<float> y(blocks);
    ASSERT_EQ(cudaMemcpy(y.data(), dy, blocks * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    int wrong = 0;
    for (int b = 0; b < blocks; ++b) {
      double want = 0;
      for (int t = 0; t < 256; ++t)
        want += x[b * 256 + t];
      wrong += y[b] != float(want);
    }
    if (barrier)
      EXPECT_EQ(wrong, 0);
    else // Thread 0 sums before the others have written their values (a
         // block may still match by chance, from stale shared memory).
      EXPECT_GE(wrong, blocks / 2)
          << "without its barrier the reduction must fail";
  }
  cudaFree(dx);
  cudaFree(dy);
}

namespace {

// Threads below `half` meet at a barrier the others never reach.
__global__ void divergentBarrier(float *y, int half) {
  if (int(threadIdx.x) < half) {
    __syncthreads();
    y[threadIdx.x] = 1.0f;
  }
}

// y[0] = threads that ran; nothing else.
__global__ void countThreads(int *y) { atomicAdd(y, 1); }

// Uses `want` floats of dynamic shared memory.
__global__ void usesDynamicShared(float *y, int want) {
  SHARDC_DYNAMIC_SHARED(float, tile, want);
  tile[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  y[threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}

// y[lane] = the warp's values shuffled: down by 1, xor 3, from lane 5, and
// the ballot of odd lanes.
__global__ void shuffles(const int *x, int *y) {
  int v = x[threadIdx.x];
  int lane = threadIdx.x % 32;
  y[threadIdx.x * 4 + 0] = __shfl_down_sync(0xffffffffu, v, 1);
  y[threadIdx.x * 4 + 1] = __shfl_xor_sync(0xffffffffu, v, 3);
  y[threadIdx.x * 4 + 2] = __shfl_sync(0xffffffffu, v, 5);
  y[threadIdx.x * 4 + 3] = int(__ballot_sync(0xffffffffu, lane % 2));
}

// A lane that exits before the others shuffle.
__global__ void shuffleAfterExit(int *y) {
  if (threadIdx.x == 7)
    return;
  y[threadIdx.x] = __shfl_down_sync(0xffffffffu, int(threadIdx.x), 1);
}

// y[k] += 1 for k < n, in the grid-stride loop's order.
__global__ void increment(float *y, int n) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n;
       k += gridDim.x * blockDim.x)
    y[k] += 1.0f;
}

// y[k] *= 2.
__global__ void twice(float *y, int n) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n;
       k += gridDim.x * blockDim.x)
    y[k] *= 2.0f;
}

} // namespace

// The fault is sticky (a GPU's context is lost), so every test after it in
// this process would fail: the remaining checks run in a fresh process.
// Faults: a divergent barrier, dynamic shared memory beyond the launch's,
// a shuffle with an exited lane.
TEST(CudaEmulatorDeathTest, FaultsAreStickyAndNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        float *y;
        cudaMalloc(&y, 64 * 4);
        // Unchecked, to see the error stay.
        ::shardc::emu::launch("usesDynamicShared", usesDynamicShared, dim3(1),
                              dim3(64), 32 * sizeof(float), nullptr, y, 64);
        std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure &&
                          cudaMalloc(&y, 4) == cudaErrorLaunchFailure
                      ? 0
                      : 1);
      },
      testing::ExitedWithCode(0),
      "kernel 'usesDynamicShared', block \\(0,0,0\\): uses 256 bytes of "
      "dynamic shared memory, but the launch asked for 128");
  EXPECT_EXIT(
      {
        float *y;
        cudaMalloc(&y, 64 * 4);
        // The checked launch of the backend's kernels: a fatal error.
        SHARDC_LAUNCH(divergentBarrier, 1, 64, 0, nullptr, y, 32);
      },
      testing::ExitedWithCode(1),
      "kernel 'divergentBarrier', block \\(0,0,0\\): __syncthreads\\(\\) "
      "reached by 32 of the block's 64 threads");
  EXPECT_EXIT(
      {
        int *y;
        cudaMalloc(&y, 64 * 4);
        SHARDC_LAUNCH(shuffleAfterExit, 1, 32, 0, nullptr, y);
      },
      testing::ExitedWithCode(1),
      "kernel 'shuffleAfterExit'.*__shfl_down_sync.*lane 7 .* exited without "
      "reaching it");
}

TEST(CudaEmulator, OversizedBlockIsAnError) {
  int *y;
  ASSERT_EQ(cudaMalloc(&y, 4), cudaSuccess);
  testing::internal::CaptureStderr();
  ::shardc::emu::launch("countThreads", countThreads, dim3(1), dim3(1025), 0,
                        nullptr, y);
  cudaError_t err = cudaGetLastError();
  std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, cudaErrorInvalidConfiguration);
  EXPECT_NE(printed.find("launch of kernel 'countThreads' asks for a block of "
                         "1025 threads"),
            std::string::npos)
      << printed;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess); // not sticky
  EXPECT_EQ(cudaFree(y), cudaSuccess);
}

// Over 48 KiB of dynamic shared memory needs the kernel's opt-in, as on a
// GPU.
TEST(CudaEmulator, LargeSharedMemoryNeedsOptIn) {
  float *y;
  ASSERT_EQ(cudaMalloc(&y, 64 * 4), cudaSuccess);
  const int floats = 16384; // 64 KiB
  testing::internal::CaptureStderr();
  ::shardc::emu::launch("usesDynamicShared", usesDynamicShared, dim3(1),
                        dim3(64), floats * sizeof(float), nullptr, y, floats);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("launch of kernel 'usesDynamicShared' asks for 65536 "
                         "bytes of dynamic shared memory, over 48 KiB"),
            std::string::npos)
      << printed;
  ASSERT_EQ(cudaFuncSetAttribute(usesDynamicShared,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 floats * int(sizeof(float))),
            cudaSuccess);
  SHARDC_LAUNCH(usesDynamicShared, 1, 64, floats * sizeof(float), nullptr, y,
                floats);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(y);
}

TEST(CudaEmulator, AtomicsAcrossBlocks) {
  int *y;
  ASSERT_EQ(cudaMalloc(&y, 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(y, 0, 4), cudaSuccess);
  SHARDC_LAUNCH(countThreads, 64, 256, 0, nullptr, y);
  int got = 0;
  ASSERT_EQ(cudaMemcpy(&got, y, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, 64 * 256);
  cudaFree(y);
}

TEST(CudaEmulator, DynamicSharedMemoryWithinTheLaunch) {
  float *y;
  ASSERT_EQ(cudaMalloc(&y, 64 * 4), cudaSuccess);
  SHARDC_LAUNCH(usesDynamicShared, 1, 64, 64 * sizeof(float), nullptr, y, 64);
  std::vector<float> got(64);
  ASSERT_EQ(cudaMemcpy(got.data(), y, 64 * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int t = 0; t < 64; ++t)
    EXPECT_EQ(got[t], float(63 - t));
  cudaFree(y);
}

TEST(CudaEmulator, WarpShufflesAndVotes) {
  const int n = 64; // two warps
  std::vector<int> x(n);
  for (int t = 0; t < n; ++t)
    x[t] = 100 + t * 7;
  int *dx, *dy;
  ASSERT_EQ(cudaMalloc(&dx, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, n * 16), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  SHARDC_LAUNCH(shuffles, 1, n, 0, nullptr, dx, dy);
  std::vector<int> y(n * 4);
  ASSERT_EQ(cudaMemcpy(y.data(), dy, n * 16, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int t = 0; t < n; ++t) {
    int lane = t % 32, base = t - lane;
    // Beyond the warp, a shuffle down returns the caller's own value.
    EXPECT_EQ(y[t * 4 + 0], lane < 31 ? x[t + 1] : x[t]) << t;
    EXPECT_EQ(y[t * 4 + 1], x[base + (lane ^ 3)]) << t;
    EXPECT_EQ(y[t * 4 + 2], x[base + 5]) << t;
    EXPECT_EQ(unsigned(y[t * 4 + 3]), 0xaaaaaaaau) << t;
  }
  cudaFree(dx);
  cudaFree(dy);
}

// Streams run in the order their events give, not the order work was
// enqueued in: of two streams with work ready the later-created runs first,
// so a missing wait shows.
TEST(CudaEmulator, StreamsOrderedByEventsOnly) {
  cudaStream_t a, b;
  cudaEvent_t done;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
            cudaSuccess);
  float *y;
  ASSERT_EQ(cudaMalloc(&y, 4), cudaSuccess);
  for (bool wait : {true, false}) {
    ASSERT_EQ(cudaMemset(y, 0, 4), cudaSuccess);
    // (0 + 1) * 2 = 2 in order; 0 * 2 + 1 = 1 when b runs first.
    SHARDC_LAUNCH(increment, 1, 32, 0, a, y, 1);
    ASSERT_EQ(cudaEventRecord(done, a), cudaSuccess);
    if (wait) {
      ASSERT_EQ(cudaStreamWaitEvent(b, done, 0), cudaSuccess);
    }
    SHARDC_LAUNCH(twice, 1, 32, 0, b, y, 1);
    // A legacy-stream copy waits for no non-blocking stream: synchronize.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    float got = 0;
    ASSERT_EQ(cudaMemcpy(&got, y, 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, wait ? 2.0f : 1.0f) << (wait ? "with" : "without")
                                       << " the wait";
  }
  cudaFree(y);
  cudaEventDestroy(done);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

// A graph captured across two streams replays their work in order; a
// synchronization during capture is an error, as is a joined stream left
// unjoined.
TEST(CudaEmulator, GraphCaptureAndReplay) {
  cudaStream_t a, b;
  cudaEvent_t fork, join;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming),
            cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&join, cudaEventDisableTiming),
            cudaSuccess);
  float *y;
  ASSERT_EQ(cudaMalloc(&y, 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(y, 0, 4), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  SHARDC_LAUNCH(increment, 1, 32, 0, a, y, 1);
  ASSERT_EQ(cudaEventRecord(fork, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, fork, 0), cudaSuccess);
  SHARDC_LAUNCH(twice, 1, 32, 0, b, y, 1);
  ASSERT_EQ(cudaEventRecord(join, b), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(a, join, 0), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(a, &graph), cudaSuccess);
  float got = -1;
  ASSERT_EQ(cudaMemcpy(&got, y, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, 0.0f) << "captured work does not run";
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int k = 0; k < 3; ++k)
    ASSERT_EQ(cudaGraphLaunch(exec, a), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&got, y, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, 14.0f); // ((0+1)*2+1)*2 = 6, then (6+1)*2 = 14
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // A synchronization inside the capture invalidates it.
  testing::internal::CaptureStderr();
  ASSERT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  EXPECT_NE(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(a, &graph), cudaErrorStreamCaptureInvalidated);
  cudaGetLastError(); // as CUDA, the failed calls set the last error
  // A forked stream not joined back.
  ASSERT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, fork, 0), cudaSuccess);
  SHARDC_LAUNCH(twice, 1, 32, 0, b, y, 1);
  EXPECT_EQ(cudaStreamEndCapture(a, &graph), cudaErrorStreamCaptureUnjoined);
  std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("cudaDeviceSynchronize waits for the device while a "
                         "stream is captured"),
            std::string::npos)
      << printed;
  cudaGetLastError();
  cudaFree(y);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

namespace {

/// The emulated heuristic's answer for a GELU_AUX epilogue on a column-major
/// m x n output whose aux matrix has leading dimension `auxLd`.
cublasStatus_t geluAuxHeuristic(int64_t m, int64_t auxLd) {
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulPreference_t pref;
  EXPECT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_AUX;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(
                desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(
                desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd,
                sizeof(auxLd)),
            CUBLAS_STATUS_SUCCESS);
  const uint64_t n = 4, k = 8;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, m, k, m),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, k, n, k),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, m, n, m),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result;
  int found = -1;
  cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, c, c, pref,
                                                    1, &result, &found);
  if (s != CUBLAS_STATUS_SUCCESS) {
    EXPECT_EQ(found, 0);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(c);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(lt);
  return s;
}

// cublasLt.h: CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD must be divisible by 8.
// An aux matrix 45 rows high (a GELU over 45 features) is refused; 48 is
// not (rt-fuse-epilogues keeps widths the CUDA target cannot fuse apart).
TEST(CudaEmulator, CublasLtAuxLeadingDimensionMultipleOf8) {
  EXPECT_EQ(geluAuxHeuristic(45, 45), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(geluAuxHeuristic(48, 48), CUBLAS_STATUS_SUCCESS);
}

} // namespace

//===----------------------------------------------------------------------===//
// cuBLASLt: what the real library refuses (cublasLt.h), the emulated one
// refuses, with NOT_SUPPORTED and the rule printed
//===----------------------------------------------------------------------===//

namespace {

constexpr cublasStatus_t kOk = CUBLAS_STATUS_SUCCESS;
constexpr cublasStatus_t kRefused = CUBLAS_STATUS_NOT_SUPPORTED;

/// One f32 column-major GEMM D[m,n] = A[m,k] B[k,n] (leading dimensions m,
/// k, m; D is C) through the emulated cuBLASLt, its operands and an epilogue
/// vector (bias or aux) in device buffers with room to be offset.
struct LtGemm {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  char *buf[4] = {}; ///< A, B, C/D, the epilogue's vector

  LtGemm(uint64_t m, uint64_t n, uint64_t k) {
    EXPECT_EQ(cublasLtCreate(&lt), kOk);
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              kOk);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, m, k, m), kOk);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, k, n, k), kOk);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, m, n, m), kOk);
    uint64_t elements[4] = {m * k, k * n, m * n, m * n};
    for (int j = 0; j < 4; ++j) {
      size_t bytes = elements[j] * sizeof(float) + 256;
      EXPECT_EQ(cudaMalloc(&buf[j], bytes), cudaSuccess);
      EXPECT_EQ(cudaMemset(buf[j], 0, bytes), cudaSuccess);
    }
  }
  ~LtGemm() {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (char *p : buf)
      cudaFree(p);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(lt);
  }

  template <typename T>
  cublasStatus_t set(cublasLtMatmulDescAttributes_t attr, T value) {
    return cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value));
  }
  /// The epilogue's vector, `offset` bytes into its buffer.
  float *vec(size_t offset) {
    return reinterpret_cast<float *>(buf[3] + offset);
  }

  /// The heuristic's algorithm with MIN_ALIGNMENT_{A,B,C,D}_BYTES `align`
  /// (0: left at the default); `found` the algorithms it returned.
  cublasStatus_t heuristic(cublasLtMatmulAlgo_t &algo,
                           std::vector<uint32_t> align = {0, 0, 0, 0},
                           int *found = nullptr) {
    cublasLtMatmulPreference_t pref;
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), kOk);
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int j = 0; j < 4; ++j) {
      if (align[j]) {
        EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                      pref, attrs[j], &align[j], sizeof(align[j])),
                  kOk);
      }
    }
    cublasLtMatmulHeuristicResult_t result;
    int returned = -1;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(
        lt, desc, a, b, c, c, pref, 1, &result, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    if (returned == 1)
      algo = result.algo;
    if (found)
      *found = returned;
    return s;
  }

  /// The matmul with A, B and C = D `offA`, `offB`, `offD` bytes into their
  /// buffers (`algo` null: cuBLASLt's implicit default heuristic).
  cublasStatus_t matmul(const cublasLtMatmulAlgo_t *algo, size_t offA = 0,
                        size_t offB = 0, size_t offD = 0) {
    float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(lt, desc, &alpha, buf[0] + offA, a, buf[1] + offB, b,
                          &beta, buf[2] + offD, c, buf[2] + offD, c, algo,
                          nullptr, 0, nullptr);
  }
};

} // namespace

// FP8 GEMMs as Hopper's cuBLASLt takes them (--float8's matmul_fp8): the
// TN format only (A transposed, B not), k and the leading dimensions of A
// and B multiples of 16, and not both operands e5m2.
TEST(CudaEmulator, CublasLtFp8TakesTheTnFormatOnly) {
  auto heuristic = [](cudaDataType_t ta, cudaDataType_t tb, bool transA,
                      bool transB, uint64_t k) {
    const uint64_t m = 32, n = 32;
    LtGemm g(m, n, k);
    cublasLtMatrixLayoutDestroy(g.a);
    cublasLtMatrixLayoutDestroy(g.b);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&g.a, ta, transA ? k : m,
                                         transA ? m : k, transA ? k : m),
              kOk);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&g.b, tb, transB ? n : k,
                                         transB ? k : n, transB ? n : k),
              kOk);
    EXPECT_EQ(g.set(CUBLASLT_MATMUL_DESC_TRANSA,
                    transA ? CUBLAS_OP_T : CUBLAS_OP_N),
              kOk);
    EXPECT_EQ(g.set(CUBLASLT_MATMUL_DESC_TRANSB,
                    transB ? CUBLAS_OP_T : CUBLAS_OP_N),
              kOk);
    cublasLtMatmulAlgo_t algo;
    return g.heuristic(algo);
  };
  const cudaDataType_t e4 = CUDA_R_8F_E4M3, e5 = CUDA_R_8F_E5M2;
  EXPECT_EQ(heuristic(e4, e4, true, false, 64), kOk);
  EXPECT_EQ(heuristic(e5, e4, true, false, 64), kOk);
  EXPECT_EQ(heuristic(e4, e4, false, false, 64), kRefused); // NN
  EXPECT_EQ(heuristic(e4, e4, true, true, 64), kRefused);   // TT
  EXPECT_EQ(heuristic(e5, e5, true, false, 64), kRefused);
  EXPECT_EQ(heuristic(e4, e4, true, false, 40), kRefused); // k
  EXPECT_EQ(heuristic(e4, CUDA_R_16BF, true, false, 64), kRefused);
}

// CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES (default 256): "selecting a
// smaller value will exclude algorithms that can not work with matrix A that
// is not as strictly aligned as they need", so an algorithm chosen with the
// default may need 256-byte pointers (pytorch#92201 met NOT_SUPPORTED so).
// Leading dimensions of 64 floats allow it.
TEST(CudaEmulator, CublasLtPointersBelowThePreferenceAreRefused) {
  LtGemm g(64, 64, 64);
  cublasLtMatmulAlgo_t algo;
  ASSERT_EQ(g.heuristic(algo), kOk);
  EXPECT_EQ(g.matmul(&algo), kOk);
  EXPECT_EQ(g.matmul(&algo, 16, 0, 0), kRefused);   // A 16-byte aligned
  EXPECT_EQ(g.matmul(&algo, 0, 64, 0), kRefused);   // B
  EXPECT_EQ(g.matmul(&algo, 0, 0, 128), kRefused);  // C and D
  EXPECT_EQ(g.matmul(nullptr, 16, 0, 0), kRefused); // the implicit heuristic
  // Told the real alignments, the heuristic picks an algorithm for them.
  ASSERT_EQ(g.heuristic(algo, {16, 64, 16, 16}), kOk);
  EXPECT_EQ(g.matmul(&algo, 16, 64, 16), kOk);
  EXPECT_EQ(g.matmul(&algo, 16, 64, 48), kOk);
  EXPECT_EQ(g.matmul(&algo, 4, 64, 16), kRefused);
  EXPECT_EQ(g.matmul(&algo, 16, 32, 16), kRefused);
}

// CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_*_BYTES is "required for buffer pointer,
// leading dimension, and possibly other strides": the heuristic, which sees
// the layouts, picks no algorithm needing more than the leading dimension
// allows. A's ld of 63 floats (252 bytes) allows 4; B's 8 floats, 32.
TEST(CudaEmulator, CublasLtLayoutBoundsTheAssumedAlignment) {
  LtGemm g(63, 8, 8);
  cublasLtMatmulAlgo_t algo;
  ASSERT_EQ(g.heuristic(algo), kOk);
  EXPECT_EQ(g.matmul(&algo, 4, 32, 4), kOk);
  EXPECT_EQ(g.matmul(&algo, 4, 16, 4), kRefused);
}

// A pointer not aligned to its element: no algorithm reads it, and a
// preference below the element has none.
TEST(CudaEmulator, CublasLtPointerNotAlignedToItsElementIsRefused) {
  LtGemm g(63, 8, 8);
  cublasLtMatmulAlgo_t algo;
  ASSERT_EQ(g.heuristic(algo), kOk);
  EXPECT_EQ(g.matmul(&algo, 2, 0, 0), kRefused);
  EXPECT_EQ(g.matmul(&algo, 0, 0, 6), kRefused);
  int found = -1;
  EXPECT_EQ(g.heuristic(algo, {2, 0, 0, 0}, &found), kRefused);
  EXPECT_EQ(found, 0);
}

// CUBLASLT_MATMUL_DESC_BIAS_POINTER and _EPILOGUE_AUX_POINTER: "routines
// that don't dereference this pointer, like cublasLtMatmulAlgoGetHeuristic()
// depend on its value to determine expected pointer alignment". Unset (NULL)
// when the heuristic runs, any alignment is assumed; the pointer given later
// must be as aligned as the one the heuristic saw.
TEST(CudaEmulator, CublasLtBiasAndAuxAsAlignedAsWhenTheHeuristicRan) {
  LtGemm g(64, 8, 8);
  cublasLtMatmulAlgo_t algo;
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS), kOk);
  ASSERT_EQ(g.heuristic(algo), kOk);
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.vec(4)), kOk);
  EXPECT_EQ(g.matmul(&algo), kRefused);
  ASSERT_EQ(g.heuristic(algo), kOk); // sees the bias 4 bytes in
  EXPECT_EQ(g.matmul(&algo), kOk);
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.vec(2)), kOk);
  EXPECT_EQ(g.matmul(&algo), kRefused); // not aligned to its f32
  // GELU_AUX's aux matrix (leading dimension 64 floats: 256 bytes).
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_GELU_AUX),
            kOk);
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(64)), kOk);
  ASSERT_EQ(g.heuristic(algo), kOk);
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.vec(16)), kOk);
  EXPECT_EQ(g.matmul(&algo), kRefused);
  ASSERT_EQ(g.heuristic(algo), kOk);
  EXPECT_EQ(g.matmul(&algo), kOk);
}

// The epilogue rules of cublasLt.h beyond the aux ld's multiple of 8
// (CublasLtAuxLeadingDimensionMultipleOf8): the aux pointer "requires
// setting CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD", which must "be no less than
// the number of rows in the output matrix"; the aux batch stride "must be
// divisible by 8"; TRANSC: "currently only CUBLAS_OP_N is supported". (The
// header states no transpose restriction for the epilogues the backend uses.)
TEST(CudaEmulator, CublasLtEpilogueRulesOfTheHeader) {
  LtGemm g(64, 8, 8);
  cublasLtMatmulAlgo_t algo;
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DGELU), kOk);
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.vec(0)), kOk);
  EXPECT_EQ(g.heuristic(algo), kRefused); // no aux ld
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(32)), kOk);
  EXPECT_EQ(g.heuristic(algo), kRefused); // below D's 64 rows
  EXPECT_EQ(g.matmul(nullptr), kRefused);
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(64)), kOk);
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, int64_t(12)),
            kOk);
  EXPECT_EQ(g.heuristic(algo), kRefused);
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, int64_t(0)),
            kOk);
  ASSERT_EQ(g.heuristic(algo), kOk);
  EXPECT_EQ(g.matmul(&algo), kOk);
  ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_TRANSC, CUBLAS_OP_T), kOk);
  EXPECT_EQ(g.heuristic(algo), kRefused);
  EXPECT_EQ(g.matmul(&algo), kRefused);
}

namespace {

/// SHARDC_EMU_CUBLASLT_NO_ALGO set while in scope.
struct NoAlgorithm {
  explicit NoAlgorithm(const char *value) {
    setenv("SHARDC_EMU_CUBLASLT_NO_ALGO", value, 1);
  }
  ~NoAlgorithm() { unsetenv("SHARDC_EMU_CUBLASLT_NO_ALGO"); }
};

} // namespace

// The real heuristic may have no algorithm: NOT_SUPPORTED, or SUCCESS with
// none returned. SHARDC_EMU_CUBLASLT_NO_ALGO makes the emulated one say so.
TEST(CudaEmulator, CublasLtNoAlgorithmInjected) {
  LtGemm g(8, 8, 8);
  cublasLtMatmulAlgo_t algo;
  int found = -1;
  {
    NoAlgorithm none("1");
    EXPECT_EQ(g.heuristic(algo, {0, 0, 0, 0}, &found), kRefused);
    EXPECT_EQ(found, 0);
  }
  {
    NoAlgorithm none("empty");
    EXPECT_EQ(g.heuristic(algo, {0, 0, 0, 0}, &found), kOk);
    EXPECT_EQ(found, 0);
  }
  EXPECT_EQ(g.heuristic(algo, {0, 0, 0, 0}, &found), kOk);
  EXPECT_EQ(found, 1);
}

// With no algorithm, the backend's GEMM stops, naming what it asked for: the
// shape, the transposes, the epilogue and the pointers' alignments.
TEST(CudaEmulatorDeathTest, BackendGemmWithoutAnAlgorithmIsNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  namespace A = shardc::abi;
  namespace LG = A::linear_gelu;
  auto run = [](const char *injected) {
    NoAlgorithm none(injected);
    shardc::runtime::cuda::Context ctx;
    ctx.create();
    const int64_t M = 7, K = 3, N = 16;
    // x, w, b, y, pre; the bias 4 bytes into its allocation.
    size_t bytes[5] = {M * K * 4, N * K * 4, N * 4 + 4, M * N * 4, M * N * 4};
    void *bufs[5];
    for (int j = 0; j < 5; ++j)
      if (cudaMalloc(&bufs[j], bytes[j]) != cudaSuccess)
        std::exit(2);
    bufs[2] = static_cast<char *>(bufs[2]) + 4;
    std::vector<int64_t> ints(
        size_t(A::kernelInfo(A::KernelId::linear_gelu).numInts), 0);
    ints[LG::M] = M;
    ints[LG::K] = K;
    ints[LG::N] = N;
    ints[LG::has_bias] = 1;
    shardc::runtime::cuda::kernelTable()[int64_t(A::KernelId::linear_gelu)](
        &ctx, bufs, ints.data(), nullptr, A::kComputeStream);
    std::exit(0);
  };
  const char *named =
      "cuBLASLt has no algorithm \\(.*\\) for 1 single "
      "16 x 7 x 3 \\(m x n x k, column-major\\) f32 GEMM: op\\(A\\) T, "
      "op\\(B\\) N, lda 3, ldb 3, ldc 16, .*epilogue GELU_AUX_BIAS "
      "\\(164\\); pointers aligned to A 256, B 256, C/D 256, bias 4, aux "
      "256 bytes";
  EXPECT_EXIT(run("1"), testing::ExitedWithCode(1), named);
  EXPECT_EXIT(run("empty"), testing::ExitedWithCode(1), named);
}
