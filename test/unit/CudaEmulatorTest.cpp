//===- CudaEmulatorTest.cpp - the emulated device keeps CUDA's model ------===//
#include "runtime/cuda/launch.h"
#include "runtime/cuda_emu/emu.h"

#include <gtest/gtest.h>

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
