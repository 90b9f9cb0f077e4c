//===- CudaCompare.h - a CUDA kernel against its CPU twin ----------*- C++ -*-===//
//
// The harness of the CUDA kernel tests: fresh inputs, the CPU kernel (the
// reference, itself tested against naive references) on host buffers, the
// CUDA kernel on device buffers whose outputs are poisoned with NaN first
// (an element the kernel does not write fails), every output compared. On
// a GPU, or on the emulated CUDA device; without either every test skips,
// saying why.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TEST_UNIT_CUDACOMPARE_H
#define SHARDC_TEST_UNIT_CUDACOMPARE_H

#include "runtime/abi/abi.h"
#include "runtime/cuda/context.h"
#include "runtime/kernels.h"
#include "runtime/math.h"
#include "test/unit/TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace shardc::test {

namespace A = shardc::abi;
using namespace shardc::runtime;


/// Why no test can run here, or empty when a GPU is present.
inline std::string noGpu() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    return std::string("no CUDA device: ") + cudaGetErrorString(err);
  if (count == 0)
    return "no CUDA device";
  return "";
}

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    std::string why = noGpu();                                                 \
    if (!why.empty())                                                          \
      GTEST_SKIP() << why;                                                     \
  } while (0)

/// One buffer of a launch: its bytes, and whether the kernel writes it.
struct Buffer {
  std::vector<char> host;
  bool output = false;
  bool bf16 = false; ///< bf16 elements (compared as their f32 values)
};

/// `v` rounded to bf16, as a typed kernel's bf16 buffer.
inline Buffer bf16s(const std::vector<float> &v) {
  Buffer b;
  b.bf16 = true;
  b.host.resize(v.size() * 2);
  for (size_t k = 0; k < v.size(); ++k) {
    uint16_t h = floatToBf16(v[k]);
    std::memcpy(b.host.data() + 2 * k, &h, 2);
  }
  return b;
}

/// An output of `elements` bf16 values.
inline Buffer outBf16(size_t elements) {
  Buffer b;
  b.bf16 = true;
  b.host.assign(elements * 2, 0);
  b.output = true;
  return b;
}

inline Buffer floats(const std::vector<float> &v, bool output = false) {
  Buffer b;
  b.host.resize(v.size() * sizeof(float));
  std::memcpy(b.host.data(), v.data(), b.host.size());
  b.output = output;
  return b;
}

inline Buffer ints32(const std::vector<int32_t> &v) {
  Buffer b;
  b.host.resize(v.size() * sizeof(int32_t));
  std::memcpy(b.host.data(), v.data(), b.host.size());
  return b;
}

inline Buffer out(size_t elements, size_t bytesPer = sizeof(float)) {
  Buffer b;
  b.host.assign(elements * bytesPer, 0);
  b.output = true;
  return b;
}

class CudaKernels : public ::testing::Test {
protected:
  void SetUp() override {
    REQUIRE_GPU();
    ctx.create();
  }
  void TearDown() override {
    if (ctx.lt)
      ctx.destroy();
  }

  /// Runs kernel `id` on the CPU and on the GPU with the same inputs and
  /// compares every output buffer (as f32, or as bytes if `exact`).
  void compare(A::KernelId id, KernelFn cpu, std::vector<Buffer> bufs,
               std::vector<int64_t> ints, std::vector<double> fl = {},
               double tol = 1e-5, bool exact = false) {
    const A::KernelInfo &k = A::kernelInfo(id);
    SCOPED_TRACE(A::kernelLayout(k));
    ASSERT_EQ(A::checkKernelArgs(k, int64_t(bufs.size()), ints.data(),
                                 int64_t(ints.size()), int64_t(fl.size())),
              "");
    KernelFn gpu = cuda::kernelTable()[int64_t(id)];
    ASSERT_NE(gpu, nullptr) << k.name << " has no CUDA kernel";
    // CPU: outputs start as the inputs do (kernels may read what they
    // overwrite, as adamw's outputs alias).
    std::vector<void *> hostPtrs, devPtrs;
    std::vector<std::vector<char>> cpuBufs;
    for (Buffer &b : bufs)
      cpuBufs.push_back(b.host);
    for (auto &b : cpuBufs)
      hostPtrs.push_back(b.data());
    cpu(nullptr, hostPtrs.data(), ints.data(), fl.data(), A::kComputeStream);
    // GPU: outputs poisoned with NaN (0xff bytes).
    for (Buffer &b : bufs) {
      void *d = nullptr;
      CUDA_CHECK(cudaMalloc(&d, b.host.size() ? b.host.size() : 1));
      if (b.output)
        CUDA_CHECK(cudaMemset(d, 0xff, b.host.size()));
      else
        CUDA_CHECK(cudaMemcpy(d, b.host.data(), b.host.size(),
                              cudaMemcpyHostToDevice));
      devPtrs.push_back(d);
    }
    // A copy from pageable memory may return before its DMA lands, and the
    // kernels' streams do not wait for the legacy stream's memsets (seen on
    // an H100: the last rows of a 1 MB input read before they arrived).
    CUDA_CHECK(cudaDeviceSynchronize());
    gpu(&ctx, devPtrs.data(), ints.data(), fl.data(), A::kComputeStream);
    CUDA_CHECK(cudaDeviceSynchronize());
    ctx.checkErrors(); // valid inputs: no kernel reports bad input
    for (size_t j = 0; j < bufs.size(); ++j) {
      std::vector<char> got(bufs[j].host.size());
      CUDA_CHECK(cudaMemcpy(got.data(), devPtrs[j], got.size(),
                            cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaFree(devPtrs[j]));
      if (!bufs[j].output)
        continue;
      if (exact) {
        EXPECT_EQ(got, cpuBufs[j]) << "buffer " << j;
        continue;
      }
      if (bufs[j].bf16) {
        for (size_t e = 0; e < got.size() / 2; ++e) {
          uint16_t gh, wh;
          std::memcpy(&gh, got.data() + 2 * e, 2);
          std::memcpy(&wh, cpuBufs[j].data() + 2 * e, 2);
          double g = bf16ToFloat(gh), w = bf16ToFloat(wh);
          ASSERT_LE(std::fabs(g - w), tol * (1.0 + std::fabs(w)))
              << "buffer " << j << " (bf16) element " << e << ": cuda " << g
              << ", cpu " << w;
        }
        continue;
      }
      const float *g = reinterpret_cast<const float *>(got.data());
      const float *w = reinterpret_cast<const float *>(cpuBufs[j].data());
      for (size_t e = 0; e < got.size() / sizeof(float); ++e)
        ASSERT_LE(std::fabs(double(g[e]) - w[e]), tol * (1.0 + std::fabs(w[e])))
            << "buffer " << j << " element " << e << ": cuda " << g[e]
            << ", cpu " << w[e];
    }
  }

  /// Runs kernel `id` on the GPU alone: every buffer's bytes after it.
  std::vector<std::vector<char>> runGpu(A::KernelId id,
                                        const std::vector<Buffer> &bufs,
                                        const std::vector<int64_t> &ints) {
    std::vector<void *> devPtrs;
    for (const Buffer &b : bufs) {
      void *d = nullptr;
      CUDA_CHECK(cudaMalloc(&d, b.host.size() ? b.host.size() : 1));
      CUDA_CHECK(cudaMemcpy(d, b.host.data(), b.host.size(),
                            cudaMemcpyHostToDevice));
      devPtrs.push_back(d);
    }
    CUDA_CHECK(cudaDeviceSynchronize()); // the copies landed (compare's note)
    cuda::kernelTable()[int64_t(id)](&ctx, devPtrs.data(), ints.data(),
                                     nullptr, A::kComputeStream);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::vector<char>> got;
    for (size_t j = 0; j < bufs.size(); ++j) {
      got.emplace_back(bufs[j].host.size());
      CUDA_CHECK(cudaMemcpy(got.back().data(), devPtrs[j], got.back().size(),
                            cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaFree(devPtrs[j]));
    }
    return got;
  }

  cuda::Context ctx;
};

} // namespace shardc::test

#endif // SHARDC_TEST_UNIT_CUDACOMPARE_H
