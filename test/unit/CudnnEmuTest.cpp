//===- CudnnEmuTest.cpp - cudnn-frontend's SDPA on the emulated cuDNN -----===//
//
// The emulated device's cuDNN backend API (runtime/cuda_emu/cudnn.cpp) runs
// the graphs cudnn-frontend builds for shardc's fused attention
// (runtime/cuda/sdpa.cpp's buildSdpaGraphs: composite SDPA with stats, bf16
// in and out, f32 intermediates and compute; the deterministic backward),
// compared with a naive f64 reference of softmax attention and its gradient
// on the same bf16 inputs: causal and not, grouped-query (H=8, G=2),
// multi-query (G=1) and plain heads, D 64, 128 and 256, odd lengths and
// keys of another length than the queries. Stats is the log-sum-exp of each
// row; two runs give the same bits; execute is stream-ordered and captured
// into CUDA graphs; what the emulated engine lacks is refused by name.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/sdpa_graph.h"
#include "runtime/math.h"

#include <cuda_runtime.h>
#include <cudnn_frontend.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

namespace fe = cudnn_frontend;
using fe::graph::Graph;
using fe::graph::Tensor_attributes;
using shardc::runtime::bf16ToFloat;
using shardc::runtime::floatToBf16;

using namespace shardc::runtime::cuda;

/// Q [B,H,T,D], K and V [B,G,S,D]; causal is top-left (query t sees keys
/// s <= t).
struct Shape {
  int64_t B, H, G, T, S, D;
  bool causal;
  float scale() const { return 1.0f / std::sqrt(float(D)); }
  int64_t q() const { return B * H * T * D; }
  int64_t kv() const { return B * G * S * D; }
  SdpaShape sdpa() const { return {B, H, G, T, S, D, causal, scale()}; }
  std::string name() const {
    return "B=" + std::to_string(B) + " H=" + std::to_string(H) +
           " G=" + std::to_string(G) + " T=" + std::to_string(T) +
           " S=" + std::to_string(S) + " D=" + std::to_string(D) +
           (causal ? " causal" : "");
  }
};

/// A graph of bf16 io and f32 math, as sdpa.cpp's.
std::shared_ptr<Graph> newGraph() {
  auto g = std::make_shared<Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

/// validate .. build_plans; "" or the first failing step's message.
std::string build(Graph &g, cudnnHandle_t handle) {
  std::vector<std::function<fe::error_t()>> steps = {
      [&] { return g.validate(); },
      [&] { return g.build_operation_graph(handle); },
      [&] { return g.create_execution_plans({fe::HeurMode_t::A}); },
      [&] { return g.check_support(handle); },
      [&] { return g.build_plans(handle); }};
  for (auto &step : steps)
    if (fe::error_t e = step(); e.is_bad())
      return e.get_message().empty() ? "failed" : e.get_message();
  return "";
}

//===----------------------------------------------------------------------===//
// Device buffers
//===----------------------------------------------------------------------===//

/// Emulated device memory holding `n` elements of T.
template <typename T> struct DeviceBuffer {
  T *p = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t n) : n(n) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0xff, n * sizeof(T)), cudaSuccess);
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { cudaFree(p); }
  void upload(const std::vector<T> &v) {
    ASSERT_EQ(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return v;
  }
};

using Bf16 = uint16_t;

std::vector<Bf16> randomBf16(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<Bf16> v(static_cast<size_t>(n));
  for (Bf16 &e : v)
    e = floatToBf16(dist(rng));
  return v;
}

std::vector<double> widen(const std::vector<Bf16> &v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = bf16ToFloat(v[i]);
  return out;
}

//===----------------------------------------------------------------------===//
// The reference: softmax attention and its gradient in f64
//===----------------------------------------------------------------------===//

struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

/// Row (b, h, t)'s probabilities over the keys of kv head h / (H / G).
std::vector<double> probabilities(const Shape &s, const std::vector<double> &q,
                                  const std::vector<double> &k, int64_t b,
                                  int64_t h, int64_t t, double &lse) {
  int64_t g = h / (s.H / s.G);
  const double *qr = &q[size_t(((b * s.H + h) * s.T + t) * s.D)];
  std::vector<double> p(size_t(s.S), 0.0);
  double m = -INFINITY, sum = 0;
  for (int64_t j = 0; j < s.S && (!s.causal || j <= t); ++j) {
    const double *kr = &k[size_t(((b * s.G + g) * s.S + j) * s.D)];
    double dot = 0;
    for (int64_t d = 0; d < s.D; ++d)
      dot += qr[d] * kr[d];
    p[size_t(j)] = dot * s.scale();
    m = std::max(m, p[size_t(j)]);
  }
  for (int64_t j = 0; j < s.S && (!s.causal || j <= t); ++j)
    sum += (p[size_t(j)] = std::exp(p[size_t(j)] - m));
  for (double &e : p)
    e /= sum;
  lse = m + std::log(sum);
  return p;
}

/// One row's gradients: dS = P (dP - rowsum(dO O)), scaled.
void rowGradient(const Shape &s, const std::vector<double> &q,
                 const std::vector<double> &k, const std::vector<double> &v,
                 const std::vector<double> &dO, int64_t b, int64_t h,
                 int64_t t, Reference &r) {
  int64_t g = h / (s.H / s.G);
  double lse;
  std::vector<double> p = probabilities(s, q, k, b, h, t, lse);
  size_t row = size_t(((b * s.H + h) * s.T + t) * s.D);
  auto kvRow = [&](int64_t j) { return size_t(((b * s.G + g) * s.S + j) * s.D); };
  std::vector<double> dp(size_t(s.S), 0.0);
  double rowsum = 0;
  for (int64_t j = 0; j < s.S; ++j) {
    for (int64_t d = 0; d < s.D; ++d) {
      dp[size_t(j)] += dO[row + d] * v[kvRow(j) + d];
      r.o[row + d] += p[size_t(j)] * v[kvRow(j) + d];
    }
  }
  for (int64_t d = 0; d < s.D; ++d)
    rowsum += dO[row + d] * r.o[row + d];
  r.lse[size_t((b * s.H + h) * s.T + t)] = lse;
  for (int64_t j = 0; j < s.S; ++j) {
    double ds = p[size_t(j)] * (dp[size_t(j)] - rowsum) * s.scale();
    for (int64_t d = 0; d < s.D; ++d) {
      r.dq[row + d] += ds * k[kvRow(j) + d];
      r.dk[kvRow(j) + d] += ds * q[row + d];
      r.dv[kvRow(j) + d] += p[size_t(j)] * dO[row + d];
    }
  }
}

Reference reference(const Shape &s, const std::vector<double> &q,
                    const std::vector<double> &k, const std::vector<double> &v,
                    const std::vector<double> &dO) {
  Reference r{std::vector<double>(size_t(s.q())),
              std::vector<double>(size_t(s.B * s.H * s.T)),
              std::vector<double>(size_t(s.q())),
              std::vector<double>(size_t(s.kv())),
              std::vector<double>(size_t(s.kv()))};
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t t = 0; t < s.T; ++t)
        rowGradient(s, q, k, v, dO, b, h, t, r);
  return r;
}

/// max |got - want| / max |want|.
template <typename T>
double relativeError(const std::vector<T> &got, const std::vector<double> &want,
                     double (*value)(T)) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(value(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return err / scale;
}

double ofBf16(Bf16 x) { return bf16ToFloat(x); }
double ofFloat(float x) { return x; }

//===----------------------------------------------------------------------===//
// The fixture: one shape's buffers, graphs and runs
//===----------------------------------------------------------------------===//

class CudnnEmu : public ::testing::Test {
protected:
  cudnnHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;

  void SetUp() override {
    ASSERT_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
              cudaSuccess);
    ASSERT_EQ(cudnnSetStream(handle, stream), CUDNN_STATUS_SUCCESS);
  }
  void TearDown() override {
    cudnnDestroy(handle);
    cudaStreamDestroy(stream);
  }
};

/// A shape's inputs, outputs and built graphs on the emulated device.
struct Attention {
  Shape s;
  std::vector<Bf16> hq, hk, hv, hdO;
  DeviceBuffer<Bf16> q, k, v, dO, o, dq, dk, dv;
  DeviceBuffer<float> stats;
  SdpaGraphs graphs;

  Attention(const Shape &s, cudnnHandle_t handle, unsigned seed)
      : s(s), hq(randomBf16(s.q(), seed)), hk(randomBf16(s.kv(), seed + 1)),
        hv(randomBf16(s.kv(), seed + 2)), hdO(randomBf16(s.q(), seed + 3)),
        q(size_t(s.q())), k(size_t(s.kv())), v(size_t(s.kv())),
        dO(size_t(s.q())), o(size_t(s.q())), dq(size_t(s.q())),
        dk(size_t(s.kv())), dv(size_t(s.kv())),
        stats(size_t(s.B * s.H * s.T)) {
    q.upload(hq), k.upload(hk), v.upload(hv), dO.upload(hdO);
    EXPECT_EQ(buildSdpaGraphs(s.sdpa(), handle, nullptr, graphs), "");
  }

  /// Enqueues the forward on the handle's stream.
  void forward(cudnnHandle_t handle, void *workspace) {
    std::unordered_map<int64_t, void *> ptrs = {{kUidQ, q.p},
                                                {kUidK, k.p},
                                                {kUidV, v.p},
                                                {kUidO, o.p},
                                                {kUidStats, stats.p}};
    fe::error_t e = graphs.forward->execute(handle, ptrs, workspace);
    EXPECT_TRUE(e.is_good()) << e.get_message();
  }

  void backward(cudnnHandle_t handle, void *workspace) {
    std::unordered_map<int64_t, void *> ptrs = {
        {kUidQ, q.p},     {kUidK, k.p},   {kUidV, v.p},
        {kUidO, o.p},     {kUidStats, stats.p}, {kUidDO, dO.p},
        {kUidDQ, dq.p},   {kUidDK, dk.p}, {kUidDV, dv.p}};
    fe::error_t e = graphs.backward->execute(handle, ptrs, workspace);
    EXPECT_TRUE(e.is_good()) << e.get_message();
  }

  /// Forward then backward, synchronized.
  void both(cudnnHandle_t handle, cudaStream_t stream) {
    DeviceBuffer<char> workspace(
        size_t(std::max<int64_t>({graphs.forwardWorkspace,
                                  graphs.backwardWorkspace, int64_t(1)})));
    forward(handle, workspace.p);
    backward(handle, workspace.p);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
};

/// Runs `s` and compares every output with the f64 reference.
void check(const Shape &s, cudnnHandle_t handle, cudaStream_t stream) {
  SCOPED_TRACE(s.name());
  Attention run(s, handle, 7);
  EXPECT_EQ(run.graphs.forwardWorkspace, 0);
  // The frontend's own: the backward's softmax sum (rowsum(dO O)), f32.
  EXPECT_EQ(run.graphs.backwardWorkspace,
            int64_t(s.B * s.H * s.T * sizeof(float)));
  run.both(handle, stream);
  Reference r = reference(s, widen(run.hq), widen(run.hk), widen(run.hv),
                          widen(run.hdO));
  EXPECT_LT(relativeError(run.o.download(), r.o, ofBf16), 8e-3);
  EXPECT_LT(relativeError(run.stats.download(), r.lse, ofFloat), 1e-5);
  EXPECT_LT(relativeError(run.dq.download(), r.dq, ofBf16), 1.2e-2);
  EXPECT_LT(relativeError(run.dk.download(), r.dk, ofBf16), 1.2e-2);
  EXPECT_LT(relativeError(run.dv.download(), r.dv, ofBf16), 1.2e-2);
}

//===----------------------------------------------------------------------===//
// The tests
//===----------------------------------------------------------------------===//

TEST_F(CudnnEmu, VersionIsTheHeaders) {
  EXPECT_EQ(cudnnGetVersion(), size_t(CUDNN_VERSION));
  EXPECT_EQ(fe::detail::get_backend_version(), int64_t(CUDNN_VERSION));
}

TEST_F(CudnnEmu, GroupedQueryCausal) {
  check({2, 8, 2, 37, 37, 64, true}, handle, stream);
}

TEST_F(CudnnEmu, GroupedQueryNotCausal) {
  check({1, 8, 2, 37, 37, 128, false}, handle, stream);
}

TEST_F(CudnnEmu, MultiQueryCausal) {
  check({2, 4, 1, 37, 37, 128, true}, handle, stream);
}

TEST_F(CudnnEmu, MultiQueryKeysLongerThanQueries) {
  check({1, 4, 1, 19, 45, 64, false}, handle, stream);
}

TEST_F(CudnnEmu, GroupedQueryKeysLongerThanQueries) {
  check({1, 8, 2, 19, 45, 128, false}, handle, stream);
}

TEST_F(CudnnEmu, HeadDim256) {
  check({1, 8, 2, 37, 37, 256, true}, handle, stream);
}

TEST_F(CudnnEmu, PlainHeads) {
  check({1, 4, 4, 33, 33, 64, true}, handle, stream);
}

/// Two runs of the same inputs give the same bits, forward and backward.
TEST_F(CudnnEmu, Deterministic) {
  Shape s{1, 8, 2, 37, 37, 64, true};
  Attention a(s, handle, 3), b(s, handle, 3);
  a.both(handle, stream);
  b.both(handle, stream);
  EXPECT_EQ(a.o.download(), b.o.download());
  EXPECT_EQ(a.stats.download(), b.stats.download());
  EXPECT_EQ(a.dq.download(), b.dq.download());
  EXPECT_EQ(a.dk.download(), b.dk.download());
  EXPECT_EQ(a.dv.download(), b.dv.download());
}

/// Execute enqueues on the handle's stream: nothing is written before the
/// stream runs; captured into a CUDA graph, it runs at each launch.
TEST_F(CudnnEmu, ExecuteIsStreamOrderedAndCaptured) {
  Shape s{1, 4, 2, 21, 21, 64, true};
  Attention eager(s, handle, 5), captured(s, handle, 5);
  eager.forward(handle, nullptr);
  std::vector<Bf16> untouched(size_t(s.q()), 0xffff);
  EXPECT_EQ(eager.o.download(), untouched); // the copy waits; the stream has not
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_NE(eager.o.download(), untouched);

  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal),
            cudaSuccess);
  captured.forward(handle, nullptr);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(captured.o.download(), untouched);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(captured.o.download(), eager.o.download());
  EXPECT_EQ(captured.stats.download(), eager.stats.download());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

std::string lastError() {
  char message[1024] = {};
  cudnnGetLastErrorString(message, sizeof(message));
  return message;
}

/// What the emulated engine lacks is refused by name: a descriptor type, an
/// attribute, a pointwise mode (no engine config for the graph).
TEST_F(CudnnEmu, RefusesByName) {
  cudnnBackendDescriptor_t d = nullptr;
  EXPECT_EQ(cudnnBackendCreateDescriptor(
                CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &d),
            CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_NE(lastError().find(
                "CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR"),
            std::string::npos);

  ASSERT_EQ(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d),
            CUDNN_STATUS_SUCCESS);
  cudnnPointwiseMode_t mode = CUDNN_POINTWISE_ADD;
  EXPECT_EQ(cudnnBackendSetAttribute(d, CUDNN_ATTR_POINTWISE_MODE,
                                     CUDNN_TYPE_POINTWISE_MODE, 1, &mode),
            CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_NE(lastError().find("CUDNN_ATTR_POINTWISE_MODE"), std::string::npos);
  cudnnBackendDestroyDescriptor(d);

  auto g = newGraph();
  auto x = g->tensor(Tensor_attributes().set_name("X").set_uid(1).set_dim(
      {1, 2, 3, 8}).set_stride({48, 24, 8, 1}));
  auto y = g->pointwise(x, fe::graph::Pointwise_attributes().set_mode(
                               fe::PointwiseMode_t::GELU_FWD));
  y->set_output(true).set_uid(2);
  std::string why = build(*g, handle);
  EXPECT_NE(why.find("CUDNN_POINTWISE_GELU_FWD"), std::string::npos) << why;
}

} // namespace
