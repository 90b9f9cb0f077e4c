//===- CudnnDevicelessTest.cpp - shardc's SDPA graphs, for a described H200 ===//
//
// Device-less compilation (cuDNN >= 9.8): the real cuDNN builds the
// execution plans of shardc's attention graphs (runtime/cuda/sdpa.cpp's
// buildSdpaGraphs, forward and backward, no cuDNN handle) for a described
// sm_90 GPU, test/unit/data/cudnn-device-sm90.json: what cuDNN serialized
// on an H200 (tools/cudnn_device_json.cpp; SHARDC_CUDNN_DEVICE_JSON names
// another file). So the glue is held to NVIDIA's own checks (validate,
// heuristics, check_support, build_plans), and the workspace each plan
// asks for to the bound the memory plan gives it (abi::sdpaWorkspaceBytes;
// over it, the runtime leaves cuDNN for the f32-math kernels).
//
// It needs the CUDA driver all the same, and skips without one: cuDNN 9.19
// runs bf16 SDPA on sm_90 only on its runtime-compiled engines, whose
// engine configs do not finalize without libcuda.so.1
// (CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING: "this->libcuda
// == nullptr", "compiler.load()"), and whose plans load the compiled
// kernels with cuLibraryLoadData at build_plans. It also skips without the
// JSON file, or on a cuDNN older than 9.8.
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "runtime/cuda/sdpa_graph.h"

#include <cuda_runtime.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace fe = cudnn_frontend;
using shardc::runtime::cuda::buildSdpaGraphs;
using shardc::runtime::cuda::SdpaGraphs;
using shardc::runtime::cuda::SdpaShape;
namespace abi = shardc::abi;

std::string devicePath() {
  if (const char *env = std::getenv("SHARDC_CUDNN_DEVICE_JSON"))
    return env;
  return SHARDC_SOURCE_DIR "/test/unit/data/cudnn-device-sm90.json";
}

struct Case {
  const char *name;
  int64_t B, H, G, T, S, D;
  bool causal;
};

std::string describe(const Case &c) {
  return std::string(c.name) + " (B=" + std::to_string(c.B) +
         " H=" + std::to_string(c.H) + " G=" + std::to_string(c.G) +
         " T=" + std::to_string(c.T) + " S=" + std::to_string(c.S) +
         " D=" + std::to_string(c.D) + (c.causal ? " causal)" : ")");
}

class CudnnDeviceless : public testing::TestWithParam<Case> {
protected:
  static void SetUpTestSuite() {
    if (cudnnGetVersion() < 90800) {
      skip = "cuDNN " + std::to_string(cudnnGetVersion()) +
             " has no device-less compilation (9.8 and later)";
      return;
    }
    std::ifstream in(devicePath(), std::ios::binary);
    if (!in) {
      skip = devicePath() +
             " is missing: make it on an sm_90 GPU with "
             "shardc-cudnn-device-json";
      return;
    }
    std::vector<uint8_t> json{std::istreambuf_iterator<char>(in),
                              std::istreambuf_iterator<char>()};
    while (!json.empty() && (json.back() == '\n' || json.back() == 0))
      json.pop_back();
    auto props = std::make_shared<fe::DeviceProperties>();
    fe::error_t e = props->deserialize(json);
    if (e.is_bad()) {
      char last[1024] = "";
      cudnnGetLastErrorString(last, sizeof last);
      failure = devicePath() + ": " + e.get_message() + " (" + last + ")";
      return;
    }
    int gpus = 0;
    cudaError_t err = cudaGetDeviceCount(&gpus);
    if (err != cudaSuccess || gpus == 0) {
      skip = std::string("no CUDA driver and GPU here (") +
             (err != cudaSuccess ? cudaGetErrorString(err) : "no device") +
             "): cuDNN " + std::to_string(cudnnGetVersion()) +
             " builds the fused-attention plans on runtime-compiled engines "
             "through the driver (libcuda.so.1, cuLibraryLoadData), even for "
             "a described device";
      return;
    }
    device = props;
  }
  static void TearDownTestSuite() { device.reset(); }

  void SetUp() override {
    if (!skip.empty())
      GTEST_SKIP() << skip;
    ASSERT_TRUE(failure.empty()) << failure;
  }

  static std::shared_ptr<const fe::DeviceProperties> device;
  static std::string skip, failure;
};

std::shared_ptr<const fe::DeviceProperties> CudnnDeviceless::device;
std::string CudnnDeviceless::skip, CudnnDeviceless::failure;

TEST_P(CudnnDeviceless, BuildsForwardAndBackwardWithinTheWorkspaceBound) {
  const Case &c = GetParam();
  SCOPED_TRACE(describe(c));
  SdpaShape s{c.B, c.H, c.G, c.T, c.S, c.D, c.causal,
              float(1 / std::sqrt(double(c.D)))};
  SdpaGraphs g;
  std::string why = buildSdpaGraphs(s, /*handle=*/nullptr, device, g);
  ASSERT_EQ(why, "") << "cuDNN declined " << describe(c);
  ASSERT_TRUE(g.forward && g.backward);
  int64_t fwdBound = abi::sdpaWorkspaceBytes(c.B, c.H, c.G, c.T, c.S, c.D,
                                             /*grad=*/false);
  int64_t bwdBound = abi::sdpaWorkspaceBytes(c.B, c.H, c.G, c.T, c.S, c.D,
                                             /*grad=*/true);
  std::printf("%s: workspace forward %lld bytes (bound %lld), backward %lld "
              "bytes (bound %lld)\n",
              describe(c).c_str(), (long long)g.forwardWorkspace,
              (long long)fwdBound, (long long)g.backwardWorkspace,
              (long long)bwdBound);
  EXPECT_GE(g.forwardWorkspace, 0);
  EXPECT_GE(g.backwardWorkspace, 0);
  EXPECT_LE(g.forwardWorkspace, fwdBound);
  EXPECT_LE(g.backwardWorkspace, bwdBound);
}

INSTANTIATE_TEST_SUITE_P(
    Sm90, CudnnDeviceless,
    testing::Values(
        Case{"gpt2-124m", 4, 12, 12, 1024, 1024, 64, true},
        Case{"llama-3-8b", 1, 32, 8, 8192, 8192, 128, true},
        Case{"cross", 2, 8, 8, 384, 1024, 64, false},
        Case{"cross-grouped", 2, 16, 4, 512, 768, 128, false},
        Case{"d256", 2, 8, 8, 1024, 1024, 256, true}),
    [](const testing::TestParamInfo<Case> &info) {
      std::string n = info.param.name;
      for (char &ch : n)
        if (ch == '-')
          ch = '_';
      return n;
    });

} // namespace
