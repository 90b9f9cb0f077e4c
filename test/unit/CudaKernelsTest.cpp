//===- CudaKernelsTest.cpp - every CUDA kernel against its CPU twin -------===//
//
// For each kernel the CUDA backend implements: fresh random inputs, the CPU
// kernel (the reference, itself tested against naive references) on host
// buffers, the CUDA kernel on device buffers whose outputs are poisoned
// with NaN first (an element the kernel does not write fails), and every
// output compared within a relative 1e-5 (f32). Without a GPU every test
// skips, saying why.
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "test/unit/CudaCompare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace A = shardc::abi;
using namespace shardc::runtime;
using shardc::test::packFloats;
using shardc::test::packHyper;
using shardc::test::packInts;
using shardc::test::randomVec;
using Id = A::KernelId;

namespace {

using namespace shardc::test;

constexpr int64_t kN = 3001; // not a multiple of a block

TEST_F(CudaKernels, Elementwise) {
  auto x = randomVec(kN, 1), dy = randomVec(kN, 2);
  compare(Id::fill, shardc_k_fill, {out(kN)},
          packInts(Id::fill, {{A::fill::n, kN}}),
          packFloats(Id::fill, {{A::fill::f::value, 0.25}}));
  for (int64_t tanhForm : {0, 1}) {
    compare(Id::gelu, shardc_k_gelu, {floats(x), out(kN)},
            packInts(Id::gelu, {{A::gelu::n, kN}, {A::gelu::tanh, tanhForm}}));
    compare(Id::gelu_grad, shardc_k_gelu_grad, {floats(x), floats(dy), out(kN)},
            packInts(Id::gelu_grad,
                     {{A::gelu_grad::n, kN}, {A::gelu_grad::tanh, tanhForm}}));
  }
  compare(Id::silu, shardc_k_silu, {floats(x), out(kN)},
          packInts(Id::silu, {{A::silu::n, kN}}));
  compare(Id::silu_grad, shardc_k_silu_grad, {floats(x), floats(dy), out(kN)},
          packInts(Id::silu_grad, {{A::silu_grad::n, kN}}));
  for (float keep : {0.0f, 1.0f})
    compare(Id::accumulate, shardc_k_accumulate,
            {floats(x), floats(dy), floats({keep, 0.5f}), out(kN)},
            packInts(Id::accumulate, {{A::accumulate::n, kN}}));
  compare(Id::copy, shardc_k_copy, {floats(x), out(kN)},
          packInts(Id::copy, {{A::copy::bytes, kN * int64_t(sizeof(float))}}));
}

TEST_F(CudaKernels, CastBf16) {
  namespace Cs = A::cast;
  auto x = randomVec(kN, 3);
  compare(Id::cast, shardc_k_cast,
          {floats(x), out(kN, A::dtypeBytes(A::kBF16))},
          packInts(Id::cast,
                   {{Cs::n, kN}, {Cs::from, A::kF32}, {Cs::to, A::kBF16}}),
          {}, 0, /*exact=*/true);
  std::vector<uint16_t> h(kN);
  for (int64_t k = 0; k < kN; ++k)
    h[k] = floatToBf16(x[k]);
  Buffer in;
  in.host.resize(kN * sizeof(uint16_t));
  std::memcpy(in.host.data(), h.data(), in.host.size());
  compare(Id::cast, shardc_k_cast, {in, out(kN)},
          packInts(Id::cast,
                   {{Cs::n, kN}, {Cs::from, A::kBF16}, {Cs::to, A::kF32}}),
          {}, 0, /*exact=*/true);
}

TEST_F(CudaKernels, Norms) {
  const int64_t M = 37, C = 300;
  namespace LN = A::layer_norm;
  namespace RN = A::rms_norm;
  auto x = randomVec(M * C, 4), w = randomVec(C, 5), b = randomVec(C, 6);
  std::vector<double> lnEps = packFloats(Id::layer_norm, {{LN::f::eps, 1e-5}});
  compare(Id::layer_norm, shardc_k_layer_norm,
          {floats(x), floats(w), floats(b), out(M * C)},
          packInts(Id::layer_norm, {{LN::M, M}, {LN::C, C}, {LN::has_bias, 1}}),
          lnEps);
  compare(Id::layer_norm, shardc_k_layer_norm,
          {floats(x), floats(w), out(M * C)},
          packInts(Id::layer_norm, {{LN::M, M}, {LN::C, C}, {LN::has_bias, 0}}),
          lnEps);
  compare(Id::rms_norm, shardc_k_rms_norm, {floats(x), floats(w), out(M * C)},
          packInts(Id::rms_norm, {{RN::M, M}, {RN::C, C}}),
          packFloats(Id::rms_norm, {{RN::f::eps, 1e-6}}));
  compare(Id::squared_norm, shardc_k_squared_norm, {floats(x), out(1)},
          packInts(Id::squared_norm, {{A::squared_norm::n, M * C}}));
  for (float maxNorm : {0.0f, 0.5f, 1e6f})
    compare(Id::clip_coef, shardc_k_clip_coef,
            {floats({4.0f}), floats({maxNorm}), out(1)},
            packInts(Id::clip_coef, {}));
}

TEST_F(CudaKernels, Embedding) {
  const int64_t N = 50, V = 97, C = 33;
  namespace E = A::embedding;
  std::vector<int32_t> ids(N);
  std::mt19937 gen(7);
  for (int32_t &id : ids)
    id = int32_t(gen() % V);
  compare(Id::embedding, shardc_k_embedding,
          {ints32(ids), floats(randomVec(V * C, 8)), out(N * C)},
          packInts(Id::embedding, {{E::N, N}, {E::V, V}, {E::C, C}}));
}

TEST_F(CudaKernels, AdamW) {
  const int64_t n = 5000;
  auto p = randomVec(n, 9), g = randomVec(n, 10), m = randomVec(n, 11, 0.1f);
  auto v = randomVec(n, 12, 0.1f);
  for (float &e : v)
    e = e * e;
  std::vector<float> hyper = packHyper({{A::kLr, 1e-3f},
                                        {A::kBeta1, 0.9f},
                                        {A::kBeta2, 0.95f},
                                        {A::kEps, 1e-8f},
                                        {A::kWeightDecay, 0.1f},
                                        {A::kWeightDecay1D, 0.0f},
                                        {A::kStep, 3.0f}});
  for (int64_t is1D : {0, 1})
    compare(Id::adamw, shardc_k_adamw,
            {floats(p), floats(g), floats(m), floats(v), floats(hyper),
             floats({0.7f}), out(n), out(n), out(n)},
            packInts(Id::adamw, {{A::adamw::n, n}, {A::adamw::is_1d, is1D}}));
}

TEST_F(CudaKernels, Broadcasting) {
  // [2,3,4] op [3,1] -> [2,3,4]: rhs strides (0, 1, 0).
  auto a = randomVec(24, 25), c = randomVec(3, 26);
  for (float &v : a)
    v = std::fabs(v) + 0.1f; // pow of positive bases
  std::vector<int64_t> ints = {3, 2, 3, 4, 12, 4, 1, 0, 1, 0};
  compare(A::KernelId::add, shardc_k_add, {floats(a), floats(c), out(24)}, ints);
  compare(A::KernelId::mul, shardc_k_mul, {floats(a), floats(c), out(24)}, ints);
  compare(A::KernelId::sub, shardc_k_sub, {floats(a), floats(c), out(24)}, ints);
  compare(A::KernelId::div, shardc_k_div, {floats(a), floats(c), out(24)}, ints);
  auto e = c;
  e[1] = 2.0f; // the exact-square path
  compare(A::KernelId::pow, shardc_k_pow, {floats(a), floats(e), out(24)}, ints);
  compare(A::KernelId::broadcast, shardc_k_broadcast, {floats(c), out(24)},
          {3, 2, 3, 4, 0, 1, 0});
}

TEST_F(CudaKernels, SoftmaxAndLoss) {
  const int64_t outer = 6, n = 77, inner = 5;
  auto x = randomVec(outer * n * inner, 16), dy = randomVec(outer * n * inner, 17);
  compare(A::KernelId::softmax, shardc_k_softmax,
          {floats(x), out(outer * n * inner)}, {outer, n, inner});
  compare(A::KernelId::softmax_grad, shardc_k_softmax_grad,
          {floats(x), floats(dy), out(outer * n * inner)}, {outer, n, inner});
  const int64_t N = 41, V = 1003;
  std::vector<int32_t> t(N);
  std::mt19937 gen(18);
  for (int32_t &v : t)
    v = int32_t(gen() % V);
  t[3] = -100; // ignored
  compare(A::KernelId::cross_entropy_with_grad, shardc_k_cross_entropy_with_grad,
          {floats(randomVec(N * V, 19, 3.0f)), ints32(t), out(1), out(N * V)},
          {N, V, -100});
}

TEST_F(CudaKernels, EmbeddingGradAndSgd) {
  const int64_t N = 60, V = 23, C = 40;
  std::vector<int32_t> ids(N);
  std::mt19937 gen(20);
  for (int32_t &id : ids)
    id = int32_t(gen() % V); // repeats: rows sum several gradients
  compare(A::KernelId::embedding_grad, shardc_k_embedding_grad,
          {ints32(ids), floats(randomVec(N * C, 21)), out(V * C)}, {N, V, C});
  const int64_t n = 3000;
  auto p = randomVec(n, 22), g = randomVec(n, 23), buf = randomVec(n, 24);
  for (float step : {1.0f, 2.0f})
    for (int64_t is1D : {0, 1})
      compare(A::KernelId::sgd, shardc_k_sgd,
              {floats(p), floats(g), floats(buf),
               floats({0.1f, 0.9f, 0.0f, 0.0f, 0.01f, 0.0f, step}),
               floats({0.5f}), out(n), out(n)},
              {n, is1D});
}

TEST_F(CudaKernels, Gemms) {
  const int64_t M = 67, K = 129, N = 45;
  namespace L = A::linear;
  namespace Mm = A::matmul;
  auto x = randomVec(M * K, 13), w = randomVec(N * K, 14), b = randomVec(N, 15);
  for (int64_t inOut : {0, 1}) {
    compare(Id::linear, shardc_k_linear,
            {floats(x), floats(w), floats(b), out(M * N)},
            packInts(Id::linear, {{L::M, M},
                                  {L::K, K},
                                  {L::N, N},
                                  {L::in_out, inOut},
                                  {L::has_bias, 1}}),
            {}, 1e-4);
    compare(Id::linear, shardc_k_linear, {floats(x), floats(w), out(M * N)},
            packInts(Id::linear, {{L::M, M},
                                  {L::K, K},
                                  {L::N, N},
                                  {L::in_out, inOut},
                                  {L::has_bias, 0}}),
            {}, 1e-4);
  }
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1})
      compare(Id::matmul, shardc_k_matmul, {floats(x), floats(w), out(M * N)},
              packInts(Id::matmul, {{Mm::M, M},
                                    {Mm::K, K},
                                    {Mm::N, N},
                                    {Mm::trans_a, ta},
                                    {Mm::trans_b, tb}}),
              {}, 1e-4);
}

/// Runs everywhere: the table names each kernel the backend implements by
/// its ABI id, and these tests cover every one of them.
TEST(CudaKernelTable, CoveredByTests) {
  const A::KernelId tested[] = {
      A::KernelId::fill,       A::KernelId::gelu,
      A::KernelId::gelu_grad,  A::KernelId::silu,
      A::KernelId::silu_grad,  A::KernelId::accumulate,
      A::KernelId::copy,       A::KernelId::cast,
      A::KernelId::layer_norm, A::KernelId::rms_norm,
      A::KernelId::squared_norm, A::KernelId::clip_coef,
      A::KernelId::embedding,  A::KernelId::adamw,
      A::KernelId::linear,     A::KernelId::matmul,
      A::KernelId::softmax,    A::KernelId::softmax_grad,
      A::KernelId::cross_entropy_with_grad, A::KernelId::embedding_grad,
      A::KernelId::sgd,        A::KernelId::add,
      A::KernelId::mul,        A::KernelId::sub,
      A::KernelId::div,        A::KernelId::pow,
      A::KernelId::broadcast};
  int64_t implemented = 0;
  for (int64_t id = 0; id < A::kNumKernels; ++id)
    implemented += cuda::kernelTable()[id] != nullptr;
  EXPECT_EQ(implemented, int64_t(std::size(tested)));
  for (A::KernelId id : tested)
    EXPECT_NE(cuda::kernelTable()[int64_t(id)], nullptr)
        << A::kernelInfo(id).name;
}

} // namespace
