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
// The backend's version is the GPU machine's cuDNN, 9.14.0: for keys not a
// multiple of 128, cudnn-frontend's backward then adds its workaround
// padding mask (at versions up to 9.15): sequence lengths [B,1,1,1] it
// uploads into its workspace from pageable host memory at each execute
// (captured too: a replay reads them again), a padding mask, and GEMM M/N/K
// overrides on the matmuls, which the emulated engine computes as cuDNN
// does (a matmul's own test: overridden lengths shorter than its dims, the
// padding value around the block; malformed override tensors refused).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/sdpa_graph.h"
#include "runtime/math.h"

#include <cuda_runtime.h>
#include <cudnn_frontend.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <unordered_map>
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
  /// The backward's algorithm (SdpaShape::deterministic).
  bool deterministic = true;
  float scale() const { return 1.0f / std::sqrt(float(D)); }
  int64_t q() const { return B * H * T * D; }
  int64_t kv() const { return B * G * S * D; }
  SdpaShape sdpa() const {
    SdpaShape s{B, H, G, T, S, D, causal, scale()};
    s.deterministic = deterministic;
    return s;
  }
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

/// The GPU machine's cuDNN (runtime/cuda_emu/cudnn.cpp), 9.14.0.
constexpr int64_t kGpuCudnnVersion = 91400;

/// Whether cudnn-frontend's backward adds its workaround padding mask:
/// keys not a multiple of 128, backend 9.15 or older.
bool workaround(const Shape &s) { return s.S % 128 != 0; }

/// The backward's workspace: the frontend's own -- without the
/// deterministic algorithm, the f32 dQ accumulator [B,H,T,D]; the softmax
/// sum (rowsum(dO O)), f32 [B,H,T]; then, with the workaround, the
/// sequence lengths of the queries and of the keys, INT32 [B] each -- and
/// after it the engine's: with the deterministic algorithm, the dP matrix,
/// bf16 [B,H,T up to 64,S up to 128], as the real engine asks
/// (cudnn_graph.h's engineWorkspace).
int64_t backwardWorkspace(const Shape &s) {
  int64_t dQAccum = s.deterministic ? 0 : s.B * s.H * s.T * s.D * 4;
  int64_t dP = s.deterministic ? s.B * s.H * ((s.T + 63) / 64 * 64) *
                                     ((s.S + 127) / 128 * 128) * 2
                               : 0;
  return dQAccum + int64_t(s.B * s.H * s.T * sizeof(float)) +
         (workaround(s) ? int64_t(2 * s.B * sizeof(int32_t)) : 0) + dP;
}

/// The workaround's sequence lengths as the workspace holds them.
std::vector<int32_t> seqLens(const Shape &s, const DeviceBuffer<char> &ws) {
  std::vector<int32_t> lens(size_t(2 * s.B));
  EXPECT_EQ(cudaMemcpy(lens.data(), ws.p + s.B * s.H * s.T * sizeof(float),
                       lens.size() * sizeof(int32_t), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return lens;
}

/// Runs `s` and compares every output with the f64 reference.
void check(const Shape &s, cudnnHandle_t handle, cudaStream_t stream) {
  SCOPED_TRACE(s.name());
  Attention run(s, handle, 7);
  EXPECT_EQ(run.graphs.forwardWorkspace, 0);
  EXPECT_EQ(run.graphs.backwardWorkspace, backwardWorkspace(s));
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

/// The GPU's library, not the headers' (9.19), so that the frontend builds
/// the graphs it builds there.
TEST_F(CudnnEmu, VersionIsTheGpus) {
  EXPECT_EQ(cudnnGetVersion(), size_t(kGpuCudnnVersion));
  EXPECT_EQ(fe::detail::get_backend_version(), kGpuCudnnVersion);
  EXPECT_LE(kGpuCudnnVersion, int64_t(CUDNN_VERSION));
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

/// Keys a multiple of 128: no workaround padding mask (the other shapes
/// have it).
TEST_F(CudnnEmu, KeysAMultipleOf128) {
  check({1, 4, 2, 40, 128, 64, false}, handle, stream);
}

/// The non-deterministic backward (set_deterministic_algorithm(false)):
/// the frontend's f32 dQ accumulator instead of the engine's dP, the same
/// results (the emulated engine is deterministic either way).
TEST_F(CudnnEmu, NonDeterministic) {
  Shape s{2, 8, 2, 37, 37, 64, true};
  s.deterministic = false;
  check(s, handle, stream);
  Shape d = s;
  d.deterministic = true;
  EXPECT_LT(backwardWorkspace(s), backwardWorkspace(d));
}

/// The workaround's sequence lengths are the full ones, uploaded by the
/// backward's execute into its workspace (after the softmax sum), and the
/// overridden matmuls give the reference's gradients (check's).
TEST_F(CudnnEmu, WorkaroundPaddingMask) {
  Shape s{2, 4, 2, 19, 45, 64, false};
  ASSERT_TRUE(workaround(s));
  check(s, handle, stream);
  Attention run(s, handle, 9);
  DeviceBuffer<char> ws(size_t(run.graphs.backwardWorkspace));
  run.forward(handle, ws.p);
  run.backward(handle, ws.p);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(seqLens(s, ws), (std::vector<int32_t>{19, 19, 45, 45}));
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

/// The backward with the workaround, captured into a CUDA graph: the
/// frontend's uploads of the sequence lengths (pageable, 8 bytes each) are
/// captured, and each replay writes them again, from the host, before the
/// overridden matmuls read them: replays over a zeroed workspace give the
/// eager run's bits.
TEST_F(CudnnEmu, CapturedBackwardWithTheWorkaround) {
  Shape s{2, 4, 2, 21, 21, 64, true};
  ASSERT_TRUE(workaround(s));
  Attention eager(s, handle, 5), captured(s, handle, 5);
  eager.both(handle, stream);

  DeviceBuffer<char> ws(size_t(captured.graphs.backwardWorkspace));
  captured.forward(handle, ws.p);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal),
            cudaSuccess);
  captured.backward(handle, ws.p);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  std::vector<Bf16> untouched(size_t(s.q()), 0xffff);
  EXPECT_EQ(captured.dq.download(), untouched); // captured, not run
  for (int replay = 0; replay < 2; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    ASSERT_EQ(cudaMemset(ws.p, 0, ws.n), cudaSuccess); // lengths 0
    for (auto *out : {&captured.dq, &captured.dk, &captured.dv})
      ASSERT_EQ(cudaMemset(out->p, 0xff, out->n * sizeof(Bf16)), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(seqLens(s, ws), (std::vector<int32_t>{21, 21, 21, 21}));
    EXPECT_EQ(captured.dq.download(), eager.dq.download());
    EXPECT_EQ(captured.dk.download(), eager.dk.download());
    EXPECT_EQ(captured.dv.download(), eager.dv.download());
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

//===----------------------------------------------------------------------===//
// GEMM M/N/K overrides on a matmul of its own
//===----------------------------------------------------------------------===//

/// C [Bt,H,M,N] = A [Bt,H,M,K] B [Bt,H,K,N] in f32, with M, N and K
/// overridden per entry of the leading dim.
struct OverriddenMatmul {
  static constexpr int64_t Bt = 2, H = 3, M = 5, N = 6, K = 7;
  enum : int64_t { kA = 1, kB, kM, kN, kK, kC };
  std::shared_ptr<Graph> g = std::make_shared<Graph>();
  std::shared_ptr<Tensor_attributes> c;

  /// `type` and `dims` of the M override (the others are INT32 [Bt,1,1,1]).
  OverriddenMatmul(double padding, fe::DataType_t mType = fe::DataType_t::INT32,
                   std::vector<int64_t> mDims = {Bt, 1, 1, 1}) {
    g->set_io_data_type(fe::DataType_t::FLOAT)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    auto dense = [](std::vector<int64_t> d) {
      std::vector<int64_t> st(d.size(), 1);
      for (size_t i = d.size() - 1; i-- > 0;)
        st[i] = st[i + 1] * d[i + 1];
      return st;
    };
    auto tensor = [&](const char *name, int64_t uid, std::vector<int64_t> d,
                      fe::DataType_t type) {
      return g->tensor(Tensor_attributes()
                           .set_name(name)
                           .set_uid(uid)
                           .set_dim(d)
                           .set_stride(dense(d))
                           .set_data_type(type));
    };
    auto a = tensor("A", kA, {Bt, H, M, K}, fe::DataType_t::FLOAT);
    auto b = tensor("B", kB, {Bt, H, K, N}, fe::DataType_t::FLOAT);
    auto m = tensor("M", kM, mDims, mType);
    auto n = tensor("N", kN, {Bt, 1, 1, 1}, fe::DataType_t::INT32);
    auto k = tensor("K", kK, {Bt, 1, 1, 1}, fe::DataType_t::INT32);
    c = g->matmul(a, b,
                  fe::graph::Matmul_attributes()
                      .set_name("mm")
                      .set_m_override(m)
                      .set_n_override(n)
                      .set_k_override(k)
                      .set_padding(padding));
    c->set_output(true).set_uid(kC).set_data_type(fe::DataType_t::FLOAT);
  }
};

/// Lengths shorter than the dims: entry b of the leading dim computes C's
/// first M_b rows and N_b columns over the first K_b of the reduction; the
/// rest of C is the padding value.
TEST_F(CudnnEmu, MatmulOverridesComputeTheirBlock) {
  using MM = OverriddenMatmul;
  MM mm(-1.5);
  ASSERT_EQ(build(*mm.g, handle), "");
  const std::vector<int32_t> lens = {3, 5, 6, 2, 4, 7}; // M, N, K per entry
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> ha(size_t(MM::Bt * MM::H * MM::M * MM::K)),
      hb(size_t(MM::Bt * MM::H * MM::K * MM::N));
  for (float &e : ha)
    e = dist(rng);
  for (float &e : hb)
    e = dist(rng);
  DeviceBuffer<float> a(ha.size()), b(hb.size()),
      c(size_t(MM::Bt * MM::H * MM::M * MM::N));
  DeviceBuffer<int32_t> mLen(2), nLen(2), kLen(2);
  a.upload(ha), b.upload(hb);
  mLen.upload({lens[0], lens[1]}), nLen.upload({lens[2], lens[3]});
  kLen.upload({lens[4], lens[5]});
  int64_t wsBytes = 0;
  ASSERT_TRUE(mm.g->get_workspace_size(wsBytes).is_good());
  DeviceBuffer<char> ws(size_t(std::max<int64_t>(wsBytes, 1)));
  std::unordered_map<int64_t, void *> ptrs = {
      {MM::kA, a.p},    {MM::kB, b.p},    {MM::kM, mLen.p},
      {MM::kN, nLen.p}, {MM::kK, kLen.p}, {MM::kC, c.p}};
  fe::error_t e = mm.g->execute(handle, ptrs, ws.p);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::vector<float> got = c.download();
  int64_t padded = 0;
  for (int64_t bt = 0; bt < MM::Bt; ++bt)
    for (int64_t h = 0; h < MM::H; ++h)
      for (int64_t i = 0; i < MM::M; ++i)
        for (int64_t j = 0; j < MM::N; ++j) {
          SCOPED_TRACE("C[" + std::to_string(bt) + "," + std::to_string(h) +
                       "," + std::to_string(i) + "," + std::to_string(j) + "]");
          float v = got[size_t(((bt * MM::H + h) * MM::M + i) * MM::N + j)];
          if (i >= lens[size_t(bt)] || j >= lens[size_t(2 + bt)]) {
            EXPECT_EQ(v, -1.5f);
            ++padded;
            continue;
          }
          double want = 0;
          for (int64_t k = 0; k < lens[size_t(4 + bt)]; ++k)
            want +=
                double(ha[size_t(((bt * MM::H + h) * MM::M + i) * MM::K + k)]) *
                hb[size_t(((bt * MM::H + h) * MM::K + k) * MM::N + j)];
          EXPECT_NEAR(v, want, 1e-5 * (1 + std::fabs(want)));
        }
  // Entry 0: 3 of 5 rows, all 6 columns; entry 1: 5 rows, 2 of 6 columns.
  EXPECT_EQ(padded, MM::H * ((5 * 6 - 3 * 6) + (5 * 6 - 5 * 2)));
}

std::string lastError() {
  char message[1024] = {};
  cudnnGetLastErrorString(message, sizeof(message));
  return message;
}

/// An override tensor not INT32/INT64 [leading dim of C, 1, ..., 1] in
/// memory is malformed: BAD_PARAM when the graph is finalized, naming the
/// attribute.
TEST_F(CudnnEmu, MatmulOverrideMalformed) {
  using MM = OverriddenMatmul;
  struct Case {
    fe::DataType_t type;
    std::vector<int64_t> dims;
    const char *why;
  };
  for (const Case &c :
       {Case{
            fe::DataType_t::FLOAT, {MM::Bt, 1, 1, 1}, "must be INT32 or INT64"},
        Case{fe::DataType_t::INT32, {1, MM::H, 1, 1}, "must be [2,1,1,1]"},
        Case{fe::DataType_t::INT32, {MM::Bt, 1, 1}, "must be [2,1,1,1]"}}) {
    SCOPED_TRACE(c.why);
    MM mm(0.0, c.type, c.dims);
    // The frontend's message: the backend's last error and status.
    std::string why = build(*mm.g, handle);
    EXPECT_NE(why.find("CUDNN_STATUS_BAD_PARAM"), std::string::npos) << why;
    EXPECT_NE(why.find("CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find(c.why), std::string::npos) << why;
  }
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
