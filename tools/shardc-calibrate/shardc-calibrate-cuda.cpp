//===- shardc-calibrate-cuda.cpp - measure a GPU for --predict ------------===//
//
// Usage: shardc-calibrate-cuda [--quick] FILE   (what `shardc --calibrate
// FILE --target cuda` runs; shardc-calibrate-cuda-emu is the same program
// on the emulated device, what --cuda-emulation runs). It measures the CUDA
// backend through its own kernel table (runtime/cuda/context.h), each
// figure with CUDA events around repeated launches on the compute stream
// after a warm-up:
//   - cuBLASLt GEMMs by shape (target/Calibration.h's CUDA grid): matmul
//     (x w^T) in f32, in f32 with TF32 (--allow-tf32), in bf16, and
//     matmul_fp8 (e4m3, tensorwise, bf16 out: --float8's);
//   - one epilogue class: matmul_bgrad (the bias gradient in the weight
//     gradient's GEMM, bf16) against the plain matmul of its shape;
//   - cuDNN's SDPA (sdpa, sdpa_grad; bf16, causal) at head dimensions 64
//     and 128 and two lengths;
//   - accumulate over three large f32 buffers: the memory bandwidth;
//   - a one-element fill: a launch's overhead, alone and replayed from a
//     CUDA graph (what the trainer's steps are).
// On the emulated device (or with --quick) the sizes are tiny, so that it
// finishes in seconds; its figures only prove the path. It writes FILE in
// the format of target/Calibration.h ("device": "cuda"). Progress goes to
// stderr. Exit 3, printing nothing, when there is no CUDA device (shardc
// names --cuda-emulation then).
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "runtime/cuda/context.h"
#include "runtime/kernels.h"
#include "target/Calibration.h"
#include "tools/shardc-calibrate/Common.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace A = shardc::abi;
using shardc::calibrate::packed;
namespace C = shardc::calibration;
namespace cuda = shardc::runtime::cuda;
using shardc::runtime::KernelFn;

namespace {

#ifdef SHARDC_CUDA_EMULATION
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

/// A device buffer of `bytes`, filled with the byte `fill`.
struct DeviceBuffer {
  void *p = nullptr;
  explicit DeviceBuffer(size_t bytes, int fill = 0) {
    CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
    CUDA_CHECK(cudaMemset(p, fill, std::max<size_t>(bytes, 1)));
  }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
};

struct Calibrator {
  cuda::Context ctx;
  bool quick;
  cudaEvent_t start = nullptr, stop = nullptr;

  explicit Calibrator(bool quick) : quick(quick) {
    ctx.create();
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~Calibrator() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    ctx.destroy();
  }
  cudaStream_t stream() const { return ctx.stream(A::kComputeStream); }

  /// Seconds between events around `calls` calls of f on the stream.
  template <typename F> double timed(F f, int calls) {
    CUDA_CHECK(cudaEventRecord(start, stream()));
    for (int c = 0; c < calls; ++c)
      f();
    CUDA_CHECK(cudaEventRecord(stop, stream()));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return double(ms) * 1e-3;
  }

  /// Seconds per call of f: two calls to warm up (plans, cuDNN graphs),
  /// one timed to size the run, then enough calls for about 50 ms (3 to
  /// 1000; 3 when quick), their mean.
  template <typename F> double perCall(F f) {
    f();
    f();
    double one = timed(f, 1);
    int calls = quick ? 3
                      : int(std::clamp(0.05 / std::max(one, 1e-9), 3.0,
                                       1000.0));
    double s = timed(f, calls) / calls;
    ctx.checkErrors();
    return s;
  }

  /// Seconds of kernel `id` on `bufs` with `ints` and `fl`.
  double kernel(A::KernelId id, const std::vector<void *> &bufs,
                const std::vector<int64_t> &ints,
                const std::vector<double> &fl = {}) {
    KernelFn fn = cuda::kernelTable()[int64_t(id)];
    if (!fn) {
      std::fprintf(stderr, "shardc-calibrate-cuda: kernel %s has no CUDA "
                           "implementation\n",
                   A::kernelInfo(id).name);
      std::exit(1);
    }
    std::vector<void *> b = bufs;
    return perCall([&] {
      fn(&ctx, b.data(), ints.data(), fl.data(), A::kComputeStream);
    });
  }

  /// FLOP/s of x[m,k] w[n,k]^T in `dtype` ("f32", "tf32", "bf16", "fp8").
  double gemm(int64_t m, int64_t n, int64_t k, const std::string &dtype) {
    double flops = 2.0 * double(m) * double(n) * double(k);
    if (dtype == "fp8") {
      DeviceBuffer qa(size_t(m * k), 0x30), qb(size_t(n * k), 0x28),
          y(size_t(m * n) * 2);
      float one = 1.0f;
      DeviceBuffer scale(4);
      CUDA_CHECK(cudaMemcpy(scale.p, &one, 4, cudaMemcpyHostToDevice));
      namespace M8 = A::matmul_fp8;
      return flops /
             kernel(A::KernelId::matmul_fp8,
                    {qa.p, qb.p, scale.p, scale.p, y.p},
                    packed(A::KernelId::matmul_fp8,
                           {{M8::M, m}, {M8::K, k}, {M8::N, n},
                            {M8::format_a, A::kF8E4M3},
                            {M8::format_b, A::kF8E4M3}, {M8::rowwise, 0},
                            {M8::has_bias, 0}, {M8::dtype, A::kBF16}}));
    }
    bool bf16 = dtype == "bf16";
    size_t e = bf16 ? 2 : 4;
    // Small values (0x3c3c... is about 0.0115 in bf16 and 0.0115 in f32's
    // upper half) keep the sums finite.
    DeviceBuffer a(size_t(m * k) * e, 0x3c), b(size_t(n * k) * e, 0x3c),
        y(size_t(m * n) * e);
    ctx.allowTf32 = dtype == "tf32";
    namespace Mm = A::matmul;
    double s = kernel(A::KernelId::matmul, {a.p, b.p, y.p},
                      packed(A::KernelId::matmul,
                             {{Mm::M, m}, {Mm::K, k}, {Mm::N, n},
                              {Mm::trans_a, 0}, {Mm::trans_b, 1},
                              {Mm::dtype, bf16 ? A::kBF16 : A::kF32}}));
    ctx.allowTf32 = false;
    return flops / s;
  }

  /// FLOP/s of the weight gradient dw[m,n] = x[k,m]^T dy[k,n] (bf16, dw
  /// f32), with its bias gradient db[n] in the GEMM (matmul_bgrad) when
  /// `bgrad`, else the plain matmul.
  double weightGrad(int64_t m, int64_t n, int64_t k, bool bgrad) {
    DeviceBuffer x(size_t(k * m) * 2, 0x3c), dy(size_t(k * n) * 2, 0x3c),
        dw(size_t(m * n) * 4), db(size_t(n) * 4);
    double flops = 2.0 * double(m) * double(n) * double(k);
    if (!bgrad) {
      namespace Mm = A::matmul;
      return flops /
             kernel(A::KernelId::matmul, {x.p, dy.p, dw.p},
                    packed(A::KernelId::matmul,
                           {{Mm::M, m}, {Mm::K, k}, {Mm::N, n},
                            {Mm::trans_a, 1}, {Mm::trans_b, 0},
                            {Mm::dtype, A::kBF16}, {Mm::y_f32, 1}}));
    }
    namespace Mb = A::matmul_bgrad;
    return flops / kernel(A::KernelId::matmul_bgrad, {x.p, dy.p, dw.p, db.p},
                          packed(A::KernelId::matmul_bgrad,
                                 {{Mb::M, m}, {Mb::K, k}, {Mb::N, n},
                                  {Mb::trans_a, 1}, {Mb::trans_b, 0},
                                  {Mb::dtype, A::kBF16}, {Mb::y_f32, 1},
                                  {Mb::side, 1}}));
  }

  /// FLOP/s of sdpa and sdpa_grad (bf16, causal, dense) at B x H x T x D:
  /// passes/rt/RtFlops.h's counts, 4 and 10 per kept pair and D.
  std::pair<double, double> sdpa(int64_t B, int64_t H, int64_t T, int64_t D) {
    size_t n = size_t(B * H * T * D) * 2, rows = size_t(B * H * T) * 4;
    int64_t wsF = A::sdpaWorkspaceBytes(B, H, H, T, T, D, false),
            wsB = A::sdpaWorkspaceBytes(B, H, H, T, T, D, true);
    DeviceBuffer q(n, 0x3c), k(n, 0x3c), v(n, 0x3c), o(n), lse(rows),
        dO(n, 0x3c), dq(n), dk(n), dv(n), ws(size_t(std::max(wsF, wsB)));
    // The backward is the deterministic one, training's default
    // (--deterministic-attention).
    auto ints = [&](A::KernelId id, int64_t wsBytes) {
      namespace S = A::sdpa;
      std::vector<std::pair<int, int64_t>> named = {
          {S::B, B},       {S::H, H},         {S::G, H},
          {S::T, T},       {S::S, T},         {S::D, D},
          {S::causal, 1},  {S::dtype, A::kBF16}, {S::ws_bytes, wsBytes}};
      if (id == A::KernelId::sdpa_grad)
        named.push_back({A::sdpa_grad::deterministic, 1});
      return packed(id, named);
    };
    std::vector<double> scale = {1.0 / std::sqrt(double(D))};
    double fwd = kernel(A::KernelId::sdpa, {q.p, k.p, v.p, o.p, lse.p, ws.p},
                        ints(A::KernelId::sdpa, wsF), scale);
    double bwd = kernel(A::KernelId::sdpa_grad,
                        {q.p, k.p, v.p, o.p, lse.p, dO.p, dq.p, dk.p, dv.p,
                         ws.p},
                        ints(A::KernelId::sdpa_grad, wsB), scale);
    double pairs = double(T) * double(T + 1) / 2;
    double unit = double(B * H * D) * pairs;
    return {4.0 * unit / fwd, 10.0 * unit / bwd};
  }

  /// Bytes/s of accumulate over three f32 buffers of n elements (acc and
  /// g read, out written).
  double bandwidth(int64_t n) {
    DeviceBuffer acc(size_t(n) * 4), g(size_t(n) * 4), out(size_t(n) * 4),
        ctl(8);
    float c[2] = {1.0f, 0.5f};
    CUDA_CHECK(cudaMemcpy(ctl.p, c, 8, cudaMemcpyHostToDevice));
    double s = kernel(A::KernelId::accumulate, {acc.p, g.p, ctl.p, out.p},
                      packed(A::KernelId::accumulate, {{A::accumulate::n, n}}));
    return 12.0 * double(n) / s;
  }

  /// Seconds a one-element fill costs: launched `calls` times back to back
  /// (launch), and replayed from a CUDA graph of `calls` fills (graph).
  void launch(int calls, double &plain, double &graph) {
    DeviceBuffer y(4);
    std::vector<void *> b = {y.p};
    auto ints = packed(A::KernelId::fill, {{A::fill::n, 1},
                                           {A::fill::dtype, A::kF32}});
    std::vector<double> value = {1.0};
    KernelFn fn = cuda::kernelTable()[int64_t(A::KernelId::fill)];
    auto many = [&] {
      for (int c = 0; c < calls; ++c)
        fn(&ctx, b.data(), ints.data(), value.data(), A::kComputeStream);
    };
    plain = perCall(many) / calls;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(
        cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    many();
    CUDA_CHECK(cudaStreamEndCapture(stream(), &g));
    CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    graph = perCall([&] { CUDA_CHECK(cudaGraphLaunch(exec, stream())); }) /
            calls;
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(g));
  }
};

std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20)
      out += c;
  }
  return out + "\"";
}

/// A rate of FLOP/s for the progress lines: TFLOP/s on a GPU, GFLOP/s
/// below one TFLOP/s (the emulated device).
std::string flops(double v) {
  char buf[64];
  if (v >= 1e12)
    std::snprintf(buf, sizeof(buf), "%8.2f TFLOP/s", v / 1e12);
  else
    std::snprintf(buf, sizeof(buf), "%8.3f GFLOP/s", v / 1e9);
  return buf;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

} // namespace

int main(int argc, char **argv) {
  bool quick = kEmulated;
  std::string file;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--quick")
      quick = true;
    else if (!arg.empty() && arg[0] != '-' && file.empty())
      file = arg;
    else
      file.clear(), a = argc; // usage below
  }
  if (file.empty()) {
    std::fprintf(stderr, "usage: %s [--quick] FILE (what shardc --calibrate "
                         "FILE --target cuda runs)\n",
                 argv[0]);
    return 2;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return 3;
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::string name = prop.name;
  std::fprintf(stderr, "shardc-calibrate-cuda: %s (sm_%d%d, %.1f GiB)%s\n",
               name.c_str(), prop.major, prop.minor,
               double(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
               quick ? ", quick sizes" : "");
  Calibrator cal(quick);

  std::string json = "{" + quoted(C::kKeyFormat) + ": " + quoted(C::kFormat) +
                     ", " + quoted(C::kKeyVersion) + ": " +
                     std::to_string(C::kVersion) + ", " +
                     quoted(C::kKeyDevice) + ": " + quoted(C::kDeviceCuda) +
                     ", " + quoted(C::kKeyName) + ": " + quoted(name) + ", " +
                     quoted(C::kKeyEmulated) + ": " +
                     (kEmulated ? "true" : "false") + ", " +
                     quoted(C::kKeyMemoryBytes) + ": " +
                     number(double(prop.totalGlobalMem));

  // GEMMs by shape class and dtype.
  std::vector<int64_t> rows, dims;
  if (quick) {
    rows.assign(std::begin(C::kCudaQuickGemmRows),
                std::end(C::kCudaQuickGemmRows));
    dims.assign(std::begin(C::kCudaQuickGemmDims),
                std::end(C::kCudaQuickGemmDims));
  } else {
    rows.assign(std::begin(C::kCudaGemmRows), std::end(C::kCudaGemmRows));
    dims.assign(std::begin(C::kCudaGemmDims), std::end(C::kCudaGemmDims));
  }
  json += ", " + quoted(C::kKeyGemm) + ": [";
  bool first = true;
  for (const char *dtype : C::kCudaGemmDtypes)
    for (int64_t m : rows)
      for (int64_t n : dims)
        for (int64_t k : dims) {
          double rate = cal.gemm(m, n, k, dtype);
          std::fprintf(stderr, "  gemm %-4s %5lld x %5lld x %5lld: %s\n",
                       dtype, (long long)m, (long long)n, (long long)k,
                       flops(rate).c_str());
          json += std::string(first ? "" : ", ") + "{" +
                  quoted(C::kKeyDtype) + ": " + quoted(dtype) + ", " +
                  quoted(C::kKeyM) + ": " + std::to_string(m) + ", " +
                  quoted(C::kKeyN) + ": " + std::to_string(n) + ", " +
                  quoted(C::kKeyK) + ": " + std::to_string(k) + ", " +
                  quoted(C::kKeyFlopsPerS) + ": " + number(rate) + "}";
          first = false;
        }
  json += "]";

  // The bias gradient's epilogue (matmul_bgrad) at the grid's two largest
  // squares, against the plain matmul of the same shape.
  json += ", " + quoted(C::kKeyGemmEpilogue) + ": [";
  first = true;
  for (size_t j = dims.size() >= 2 ? dims.size() - 2 : 0; j < dims.size();
       ++j) {
    int64_t d = dims[j], tokens = rows.back();
    double with = cal.weightGrad(d, d, tokens, true),
           plain = cal.weightGrad(d, d, tokens, false);
    std::fprintf(stderr,
                 "  matmul_bgrad bf16 %5lld x %5lld x %5lld: %s (plain %s)\n",
                 (long long)d, (long long)d, (long long)tokens,
                 flops(with).c_str(), flops(plain).c_str());
    json += std::string(first ? "" : ", ") + "{" + quoted(C::kKeyEpilogue) +
            ": " + quoted(C::kEpilogueBgrad) + ", " + quoted(C::kKeyDtype) +
            ": \"bf16\", " + quoted(C::kKeyM) + ": " + std::to_string(d) +
            ", " + quoted(C::kKeyN) + ": " + std::to_string(d) + ", " +
            quoted(C::kKeyK) + ": " + std::to_string(tokens) + ", " +
            quoted(C::kKeyFlopsPerS) + ": " + number(with) + ", " +
            quoted(C::kKeyPlainFlopsPerS) + ": " + number(plain) + "}";
    first = false;
  }
  json += "]";

  // cuDNN's SDPA by head dimension and length: about 8192 tokens of a
  // 2048-wide model (quick: one short sequence of two heads).
  json += ", " + quoted(C::kKeySdpa) + ": [";
  first = true;
  for (int64_t D : {int64_t(64), int64_t(128)})
    for (int64_t T : quick ? std::vector<int64_t>{32, 64}
                           : std::vector<int64_t>{1024, 4096}) {
      int64_t B = quick ? 1 : 8192 / T, H = quick ? 2 : 2048 / D;
      auto [fwd, bwd] = cal.sdpa(B, H, T, D);
      std::fprintf(stderr,
                   "  sdpa bf16 causal %lld x %lld x %5lld x %3lld: forward "
                   "%s, backward %s\n",
                   (long long)B, (long long)H, (long long)T, (long long)D,
                   flops(fwd).c_str(), flops(bwd).c_str());
      json += std::string(first ? "" : ", ") + "{" + quoted(C::kKeyHeadDim) +
              ": " + std::to_string(D) + ", " + quoted(C::kKeySeq) + ": " +
              std::to_string(T) + ", " + quoted(C::kKeyFlopsPerS) + ": " +
              number(fwd) + ", " + quoted(C::kKeyGradFlopsPerS) + ": " +
              number(bwd) + "}";
      first = false;
    }
  json += "]";

  double bw = cal.bandwidth(quick ? int64_t(1) << 18 : int64_t(1) << 28);
  double plain = 0, graph = 0;
  cal.launch(quick ? 20 : 1000, plain, graph);
  std::fprintf(stderr,
               "  memory %.1f GB/s (accumulate), launch %.3f us, from a CUDA "
               "graph %.3f us a kernel\n",
               bw / 1e9, plain * 1e6, graph * 1e6);
  json += ", " + quoted(C::kKeyMemoryBandwidth) + ": " + number(bw) + ", " +
          quoted(C::kKeyLaunch) + ": " + number(plain) + ", " +
          quoted(C::kKeyGraphLaunch) + ": " + number(graph) + "}\n";

  return shardc::calibrate::writeCalibration("shardc-calibrate-cuda", file, json) ? 0 : 1;
}
