//===- cuda_kernel_bench.cpp - the memory-bound CUDA kernels' rates -------===//
//
// Times the CUDA backend's memory-bound kernels at GPT-2 124M's shapes
// (micro-batch 16 x 1024 in bf16: M = 16384 rows of C = 768; the bias
// gradients' widths 768, 2304 and 3072; the vocabulary 50257; the
// optimizer's 124M parameters in f32) through the kernel table the trainer
// calls. Each row: the median of 20 launches after 3 (CUDA events around
// each), the bytes the kernel must move at least (each input read once,
// each output written once) and the rate that makes; the weight gradients'
// GEMMs (with and without their bias gradient's epilogue) their TFLOP/s.
// --predict's model of these kernels assumes a rate (target/Machine); this
// is what they reach.
//
//   shardc-cuda-kernel-bench [--small]
//
// --small divides the rows and lengths by 64 (bench_gpu.py --dry runs it on
// the emulated device, where the times mean nothing).
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "runtime/cuda/context.h"
#include "runtime/kernels.h"
#include "runtime/math.h"
#include "test/unit/TestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace A = shardc::abi;
using namespace shardc::runtime;
using shardc::test::packFloats;
using shardc::test::packInts;

namespace {

/// A device buffer of `bytes`, filled from `host` (or zeros).
struct DeviceBuffer {
  void *p = nullptr;
  explicit DeviceBuffer(size_t bytes, const std::vector<char> &host = {}) {
    CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
    if (host.empty())
      CUDA_CHECK(cudaMemset(p, 0, bytes));
    else
      CUDA_CHECK(cudaMemcpy(p, host.data(), bytes, cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { CUDA_CHECK(cudaFree(p)); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
};

/// n random values in [-1, 1) as bf16 (2 bytes each) or f32.
std::vector<char> randomBytes(int64_t n, bool bf16, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<char> out(size_t(n) * (bf16 ? 2 : 4));
  for (int64_t k = 0; k < n; ++k) {
    float v = dist(gen);
    if (bf16) {
      uint16_t h = floatToBf16(v);
      std::memcpy(out.data() + 2 * k, &h, 2);
    } else {
      std::memcpy(out.data() + 4 * k, &v, 4);
    }
  }
  return out;
}

/// n token ids in [0, V), about Zipf-distributed (id k about as often as
/// 1 / (k + 1)): a text's frequent tokens make the embedding gradient's
/// long rows.
std::vector<char> zipfIds(int64_t n, int64_t V, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<char> out(size_t(n) * 4);
  for (int64_t k = 0; k < n; ++k) {
    auto id = int32_t(std::min<double>(
        double(V - 1), std::floor(std::exp(u(gen) * std::log(double(V + 1)))) - 1));
    std::memcpy(out.data() + 4 * k, &id, 4);
  }
  return out;
}

struct Bench {
  cuda::Context ctx;
  Bench() { ctx.create(); }
  ~Bench() { ctx.destroy(); }

  /// Times kernel `id` on `bufs` and prints its row: `bytes` the least it
  /// must move, `flops` its arithmetic (a GEMM's; 0 for none).
  void run(const char *label, A::KernelId id,
           const std::vector<DeviceBuffer *> &bufs,
           const std::vector<int64_t> &ints, const std::vector<double> &fl,
           double bytes, double flops = 0) {
    const A::KernelInfo &k = A::kernelInfo(id);
    std::string bad = A::checkKernelArgs(k, int64_t(bufs.size()), ints.data(),
                                         int64_t(ints.size()),
                                         int64_t(fl.size()));
    if (!bad.empty()) {
      std::fprintf(stderr, "error: %s: %s\n", label, bad.c_str());
      std::exit(1);
    }
    std::vector<void *> ptrs;
    for (DeviceBuffer *b : bufs)
      ptrs.push_back(b->p);
    KernelFn fn = cuda::kernelTable()[int64_t(id)];
    cudaStream_t s = ctx.stream(A::kComputeStream);
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> ms;
    for (int rep = 0; rep < 23; ++rep) {
      CUDA_CHECK(cudaEventRecord(start, s));
      fn(&ctx, ptrs.data(), ints.data(), fl.data(), A::kComputeStream);
      CUDA_CHECK(cudaEventRecord(stop, s));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      if (rep >= 3)
        ms.push_back(t);
    }
    ctx.checkErrors();
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    double median = ms[ms.size() / 2];
    std::printf("%-44s %9.1f %9.1f %8.0f", label, median * 1e3, bytes / 1e6,
                bytes / (median * 1e-3) / 1e9);
    if (flops > 0)
      std::printf(" %8.1f", flops / (median * 1e-3) / 1e12);
    std::printf("\n");
    std::fflush(stdout);
  }
};

/// The bias gradients (sum_to of dy[M, N] over its rows, bf16).
void benchSumTo(Bench &b, int64_t M, const std::vector<int64_t> &widths) {
  for (int64_t N : widths) {
    DeviceBuffer x(size_t(M * N) * 2, randomBytes(M * N, true, 1)),
        y(size_t(N) * 2);
    namespace K = A::sum_to;
    b.run(("sum_to [" + std::to_string(M) + "," + std::to_string(N) + "] bf16")
              .c_str(),
          A::KernelId::sum_to, {&x, &y},
          packInts(A::KernelId::sum_to,
                   {{K::R, 2}, {K::out_n, N}, {K::dtype, A::kBF16}},
                   {M, N, 0, 1}),
          {}, double(M * N + N) * 2);
  }
}

/// The norms and the residual add at [M, C] (bf16).
void benchNorms(Bench &b, int64_t M, int64_t C) {
  size_t bytes = size_t(M * C) * 2;
  DeviceBuffer x(bytes, randomBytes(M * C, true, 2)),
      dy(bytes, randomBytes(M * C, true, 3)), r(bytes, randomBytes(M * C, true, 4)),
      w(size_t(C) * 2, randomBytes(C, true, 5)), bias(size_t(C) * 2),
      y(bytes), s(bytes), dw(size_t(C) * 2), db(size_t(C) * 2);
  std::string shape = "[" + std::to_string(M) + "," + std::to_string(C) + "] bf16";
  b.run(("add (dense) " + shape).c_str(), A::KernelId::add, {&x, &dy, &y},
        packInts(A::KernelId::add, {{A::add::R, 2}, {A::add::dtype, A::kBF16}},
                 {M, C, C, 1, C, 1}),
        {}, 3.0 * double(bytes));
  b.run(("layer_norm " + shape).c_str(), A::KernelId::layer_norm,
        {&x, &w, &bias, &y},
        packInts(A::KernelId::layer_norm,
                 {{A::layer_norm::M, M}, {A::layer_norm::C, C},
                  {A::layer_norm::has_bias, 1},
                  {A::layer_norm::dtype, A::kBF16}}),
        packFloats(A::KernelId::layer_norm, {{A::layer_norm::f::eps, 1e-5}}),
        2.0 * double(bytes));
  namespace AL = A::add_layer_norm;
  b.run(("add_layer_norm " + shape).c_str(), A::KernelId::add_layer_norm,
        {&x, &dy, &w, &bias, &s, &y},
        packInts(A::KernelId::add_layer_norm,
                 {{AL::M, M}, {AL::C, C}, {AL::has_bias, 1},
                  {AL::dtype, A::kBF16}}),
        packFloats(A::KernelId::add_layer_norm, {{AL::f::eps, 1e-5}}),
        4.0 * double(bytes));
  namespace LG = A::layer_norm_grad;
  b.run(("layer_norm_grad +dr " + shape).c_str(), A::KernelId::layer_norm_grad,
        {&x, &w, &dy, &y, &dw, &db, &r},
        packInts(A::KernelId::layer_norm_grad,
                 {{LG::M, M}, {LG::C, C}, {LG::dtype, A::kBF16},
                  {LG::add_dr, 1}}),
        packFloats(A::KernelId::layer_norm_grad, {{LG::f::eps, 1e-5}}),
        4.0 * double(bytes));
}

/// The weight gradients dw[in, out] = x^T dy of GPT-2's four linear layers
/// (bf16 operands, dw in f32 as rt-fuse-casts leaves it), alone and with
/// their bias gradient in the GEMM (matmul_bgrad, cuBLASLt's BGRADA): what
/// the epilogue costs against sum_to's rows above.
void benchWeightGrads(Bench &b, int64_t M, int64_t C) {
  for (auto [in, out] : {std::pair<int64_t, int64_t>{C, 3 * C},
                         {C, C},
                         {C, 4 * C},
                         {4 * C, C}}) {
    DeviceBuffer x(size_t(M * in) * 2, randomBytes(M * in, true, 10)),
        dy(size_t(M * out) * 2, randomBytes(M * out, true, 11)),
        dw(size_t(in * out) * 4), db(size_t(out) * 4);
    std::string shape = "[" + std::to_string(in) + "," + std::to_string(out) +
                        "] K " + std::to_string(M);
    double bytes = double(M * (in + out)) * 2 + double(in * out) * 4,
           flops = 2.0 * double(M) * double(in) * double(out);
    namespace Mm = A::matmul;
    b.run(("matmul dw " + shape + " bf16").c_str(), A::KernelId::matmul,
          {&x, &dy, &dw},
          packInts(A::KernelId::matmul,
                   {{Mm::M, in}, {Mm::K, M}, {Mm::N, out}, {Mm::trans_a, 1},
                    {Mm::trans_b, 0}, {Mm::dtype, A::kBF16}, {Mm::y_f32, 1}}),
          {}, bytes, flops);
    namespace Mb = A::matmul_bgrad;
    b.run(("matmul_bgrad dw, db " + shape + " bf16").c_str(),
          A::KernelId::matmul_bgrad, {&x, &dy, &dw, &db},
          packInts(A::KernelId::matmul_bgrad,
                   {{Mb::M, in}, {Mb::K, M}, {Mb::N, out}, {Mb::trans_a, 1},
                    {Mb::trans_b, 0}, {Mb::dtype, A::kBF16}, {Mb::y_f32, 1},
                    {Mb::side, 1}}),
          {}, bytes + double(out) * 4, flops);
  }
}

/// The embedding gradient: ids[N] (Zipf), dy[N, C] -> table[V, C] (bf16).
void benchEmbeddingGrad(Bench &b, int64_t N, int64_t V, int64_t C) {
  DeviceBuffer ids(size_t(N) * 4, zipfIds(N, V, 6)),
      dy(size_t(N * C) * 2, randomBytes(N * C, true, 7)), table(size_t(V * C) * 2);
  namespace K = A::embedding_grad;
  b.run(("embedding_grad N " + std::to_string(N) + " V " + std::to_string(V) +
         " bf16")
            .c_str(),
        A::KernelId::embedding_grad, {&ids, &dy, &table},
        packInts(A::KernelId::embedding_grad,
                 {{K::N, N}, {K::V, V}, {K::C, C}, {K::dtype, A::kBF16}}),
        {}, double(N) * 4 + double(N * C + V * C) * 2);
}

/// The optimizer's element-wise passes over n f32 parameters: the cast of
/// the bf16 working copy, the squared norm, AdamW on one tensor.
void benchOptimizer(Bench &b, int64_t n) {
  size_t f32 = size_t(n) * 4;
  DeviceBuffer p(f32, randomBytes(n, false, 8)), g(f32, randomBytes(n, false, 9)),
      m(f32), v(f32), half(size_t(n) * 2), sq(4), coef(4);
  std::string len = " n " + std::to_string(n);
  b.run(("cast f32->bf16" + len).c_str(), A::KernelId::cast, {&p, &half},
        packInts(A::KernelId::cast, {{A::cast::n, n},
                                     {A::cast::from, A::kF32},
                                     {A::cast::to, A::kBF16}}),
        {}, 6.0 * double(n));
  b.run(("squared_norm f32" + len).c_str(), A::KernelId::squared_norm, {&g, &sq},
        packInts(A::KernelId::squared_norm, {{A::squared_norm::n, n}}), {},
        4.0 * double(n));
  std::vector<float> hyper(A::kHyperSize, 0.0f);
  hyper[A::kLr] = 1e-3f;
  hyper[A::kBeta1] = 0.9f;
  hyper[A::kBeta2] = 0.95f;
  hyper[A::kEps] = 1e-8f;
  hyper[A::kStep] = 1.0f;
  std::vector<char> hb(hyper.size() * 4), cb(4);
  std::memcpy(hb.data(), hyper.data(), hb.size());
  float one = 1.0f;
  std::memcpy(cb.data(), &one, 4);
  DeviceBuffer h(hb.size(), hb), c(4, cb);
  b.run(("adamw f32 (one tensor)" + len).c_str(), A::KernelId::adamw,
        {&p, &g, &m, &v, &h, &c, &p, &m, &v},
        packInts(A::KernelId::adamw, {{A::adamw::n, n}, {A::adamw::is_1d, 0}}),
        {}, 28.0 * double(n));
}

/// squared_norm_group over GPT-2 124M's 148 gradient tensors (the token
/// embedding's 38.6M elements with 147 small ones, the step's one
/// launch), each divided by `scale`: against benchOptimizer's one
/// squared_norm of as many elements.
void benchSquaredNormGroup(Bench &b, int64_t C, int64_t V, int64_t layers,
                           int64_t scale) {
  std::vector<int64_t> sizes = {V * C, 1024 * C};
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t n : {C, C, C * 3 * C, 3 * C, C * C, C, C, C, C * 4 * C,
                      4 * C, 4 * C * C, C})
      sizes.push_back(n);
  sizes.push_back(C);
  sizes.push_back(C);
  std::vector<std::unique_ptr<DeviceBuffer>> owned;
  std::vector<DeviceBuffer *> bufs;
  std::vector<int64_t> ints = {int64_t(sizes.size())};
  double total = 0;
  for (int64_t &n : sizes) {
    n = std::max<int64_t>(1, n / scale);
    owned.push_back(std::make_unique<DeviceBuffer>(
        size_t(n) * 4, randomBytes(n, false, unsigned(12 + owned.size()))));
    bufs.push_back(owned.back().get());
    ints.push_back(n);
    total += double(n);
  }
  DeviceBuffer sq(4);
  bufs.push_back(&sq);
  b.run(("squared_norm_group f32, " + std::to_string(sizes.size()) +
         " tensors n " + std::to_string(int64_t(total)))
            .c_str(),
        A::KernelId::squared_norm_group, bufs, ints, {}, 4.0 * total);
}

/// --float8 at Llama-3-8B's block linears (tokens M = 2 x 8192 a rank;
/// hidden 4096, kv 1024, intermediate 14336): matmul_fp8 (cuBLASLt's FP8
/// GEMM, e4m3 x e4m3, tensorwise, bf16 out, the scaling pass included)
/// beside the bf16 `linear` of the same shape, and cast_fp8 of the input
/// (tensorwise, then rowwise transposed: the weight gradient's operand).
/// tools/bench/fp8_gemm_peer.py times torch._scaled_mm at these shapes.
void benchFloat8(Bench &b, int64_t M, int64_t div) {
  for (auto [k, n] : {std::pair<int64_t, int64_t>{4096, 4096},
                      {4096, 1024},
                      {4096, 14336},
                      {14336, 4096}}) {
    int64_t K = k / div, N = n / div; // --small: multiples of 16 still
    std::string shape = std::to_string(M) + "x" + std::to_string(K) + "x" +
                        std::to_string(N);
    DeviceBuffer qa(size_t(M * K), std::vector<char>(size_t(M * K), 0x30)),
        qb(size_t(N * K), std::vector<char>(size_t(N * K), 0x28)),
        scale(4, std::vector<char>{0, 0, char(0x80), 0x3f}), // 1.0f
        y(size_t(M * N) * 2);
    double flops = 2.0 * double(M) * double(K) * double(N);
    namespace M8 = A::matmul_fp8;
    b.run(("matmul_fp8 " + shape + " e4m3 -> bf16").c_str(),
          A::KernelId::matmul_fp8, {&qa, &qb, &scale, &scale, &y},
          packInts(A::KernelId::matmul_fp8,
                   {{M8::M, M}, {M8::K, K}, {M8::N, N},
                    {M8::format_a, A::kF8E4M3}, {M8::format_b, A::kF8E4M3},
                    {M8::rowwise, 0}, {M8::has_bias, 0},
                    {M8::dtype, A::kBF16}}),
          {}, double(M * K + N * K) + double(M * N) * 2, flops);
    DeviceBuffer x(size_t(M * K) * 2, randomBytes(M * K, true, 31)),
        w(size_t(N * K) * 2, randomBytes(N * K, true, 32));
    namespace L = A::linear;
    b.run(("linear " + shape + " bf16").c_str(), A::KernelId::linear,
          {&x, &w, &y},
          packInts(A::KernelId::linear,
                   {{L::M, M}, {L::K, K}, {L::N, N}, {L::in_out, 0},
                    {L::has_bias, 0}, {L::dtype, A::kBF16}}),
          {}, double(M * K + N * K + M * N) * 2, flops);
    namespace C8 = A::cast_fp8;
    for (int64_t rowwise : {0, 1}) {
      DeviceBuffer scales(size_t(rowwise ? K : 1) * 4);
      b.run(("cast_fp8 [" + std::to_string(M) + "," + std::to_string(K) +
             "] bf16 " + (rowwise ? "rowwise, transposed" : "tensorwise"))
                .c_str(),
            A::KernelId::cast_fp8, {&x, &qa, &scales},
            packInts(A::KernelId::cast_fp8,
                     {{C8::R, M}, {C8::C, K}, {C8::dtype, A::kBF16},
                      {C8::format, A::kF8E4M3}, {C8::rowwise, rowwise},
                      {C8::trans, rowwise}}),
            {}, 2.0 * double(M * K) * 2 + double(M * K));
    }
  }
}

} // namespace

int main(int argc, char **argv) {
  int64_t scale = 1;
  for (int k = 1; k < argc; ++k) {
    if (std::strcmp(argv[k], "--small") == 0) {
      scale = 64;
    } else {
      std::fprintf(stderr, "usage: %s [--small]\nerror: unknown argument '%s'\n",
                   argv[0], argv[k]);
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no CUDA device: nothing timed\n");
    return 0;
  }
  const int64_t M = 16384 / scale, C = 768, V = 50257 / scale,
                params = 124439808 / scale;
  Bench b;
  std::printf("%-44s %9s %9s %8s %8s\n", "kernel", "us", "MB", "GB/s",
              "TFLOP/s");
  benchNorms(b, M, C);
  benchSumTo(b, M, {768, 2304, 3072});
  benchWeightGrads(b, M, C);
  benchEmbeddingGrad(b, M, V, C);
  benchOptimizer(b, params);
  benchSquaredNormGroup(b, C, V, 12, scale);
  benchFloat8(b, 16384 / scale, scale > 1 ? 16 : 1);
  return 0;
}
