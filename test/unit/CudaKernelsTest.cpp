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

/// Kernel `id` on the CPU (host buffers) and on the device with buffer j
/// at element offset at[j] of its allocation (a pointer not 16-byte
/// aligned: the kernels' element-by-element paths); every output compared
/// bit for bit.
void compareUnaligned(cuda::Context &ctx, Id id, KernelFn cpu,
                      std::vector<Buffer> bufs, std::vector<size_t> bytesAt,
                      std::vector<int64_t> ints) {
  ASSERT_EQ(A::checkKernelArgs(A::kernelInfo(id), int64_t(bufs.size()),
                               ints.data(), int64_t(ints.size()), 0),
            "");
  std::vector<std::vector<char>> host;
  std::vector<void *> hostPtrs, devPtrs, allocs;
  for (Buffer &b : bufs)
    host.push_back(b.host);
  for (auto &h : host)
    hostPtrs.push_back(h.data());
  cpu(nullptr, hostPtrs.data(), ints.data(), nullptr, A::kComputeStream);
  for (size_t j = 0; j < bufs.size(); ++j) {
    char *d = nullptr;
    CUDA_CHECK(cudaMalloc(&d, bufs[j].host.size() + bytesAt[j] + 1));
    if (bufs[j].output)
      CUDA_CHECK(cudaMemset(d, 0xff, bufs[j].host.size() + bytesAt[j] + 1));
    else
      CUDA_CHECK(cudaMemcpy(d + bytesAt[j], bufs[j].host.data(),
                            bufs[j].host.size(), cudaMemcpyHostToDevice));
    allocs.push_back(d);
    devPtrs.push_back(d + bytesAt[j]);
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  cuda::kernelTable()[int64_t(id)](&ctx, devPtrs.data(), ints.data(), nullptr,
                                   A::kComputeStream);
  CUDA_CHECK(cudaDeviceSynchronize());
  for (size_t j = 0; j < bufs.size(); ++j) {
    std::vector<char> got(bufs[j].host.size());
    CUDA_CHECK(
        cudaMemcpy(got.data(), devPtrs[j], got.size(), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(allocs[j]));
    if (bufs[j].output) {
      EXPECT_EQ(got, host[j]) << "buffer " << j;
    }
  }
}

// The float8 kernels (--float8): the casts, the scales and the byte
// transpose bit for bit against the CPU's (the rounding is
// runtime/math.h's on both) in each scale mode and layout, with both, on
// f32 and bf16, in both formats; on shapes whose R and C are not
// multiples of the transposing tiles (128 x 64) nor of the 128-bit packs
// (37 x 70, 130 x 47, 1 x 16), and on one whose tensorwise amax takes
// many blocks (512 x 1024); with unaligned buffers. The FP8 GEMM
// (cuBLASLt's, TN) against the CPU's, on f32 and bf16 outputs with a bias,
// and with y_f32.
TEST_F(CudaKernels, Float8) {
  namespace C8 = A::cast_fp8;
  namespace CS = A::cast_fp8_scaled;
  const std::vector<int64_t> formats = {A::kF8E4M3, A::kF8E5M2};
  const std::vector<int64_t> dtypes = {A::kF32, A::kBF16};
  struct Shape {
    int64_t R, C;
  };
  for (auto [R, C] : {Shape{48, 32}, Shape{37, 70}, Shape{130, 47},
                      Shape{1, 16}, Shape{512, 1024}}) {
    SCOPED_TRACE("x[" + std::to_string(R) + "," + std::to_string(C) + "]");
    auto x = randomVec(R * C, unsigned(21 + R), 3.0f);
    x[size_t(R * C * 2 / 3)] = -41.0f; // the amax, late in x
    bool large = R * C > 100000;
    for (int64_t dtype : dtypes) {
      SCOPED_TRACE(dtype == A::kBF16 ? "bf16" : "f32");
      Buffer in = dtype == A::kBF16 ? bf16s(x) : floats(x);
      for (int64_t format : formats) {
        for (int64_t rowwise : {0, 1})
          for (int64_t trans : {0, 1}) {
            if (large && rowwise && format == A::kF8E5M2)
              continue; // the layouts once are enough at this size
            int64_t scales = rowwise ? (trans ? C : R) : 2;
            compare(Id::cast_fp8, shardc_k_cast_fp8,
                    {in, out(R * C, 1), out(scales)},
                    packInts(Id::cast_fp8, {{C8::R, R},
                                            {C8::C, C},
                                            {C8::dtype, dtype},
                                            {C8::format, format},
                                            {C8::rowwise, rowwise},
                                            {C8::trans, trans},
                                            {C8::both, 0}}),
                    {}, 0, /*exact=*/true);
          }
        // q and qt from one read of x.
        compare(Id::cast_fp8, shardc_k_cast_fp8,
                {in, out(R * C, 1), out(2), out(R * C, 1)},
                packInts(Id::cast_fp8, {{C8::R, R},
                                        {C8::C, C},
                                        {C8::dtype, dtype},
                                        {C8::format, format},
                                        {C8::rowwise, 0},
                                        {C8::trans, 0},
                                        {C8::both, 1}}),
                {}, 0, /*exact=*/true);
      }
      // cast_fp8_scaled: q, q transposed, or q and qt.
      Buffer pair = floats({37.5f, 1.0f / 37.5f});
      for (auto [trans, both] :
           {std::pair<int64_t, int64_t>{0, 0}, {1, 0}, {0, 1}}) {
        std::vector<Buffer> b = {in, pair, out(R * C, 1)};
        if (both)
          b.push_back(out(R * C, 1));
        compare(Id::cast_fp8_scaled, shardc_k_cast_fp8_scaled, b,
                packInts(Id::cast_fp8_scaled, {{CS::R, R},
                                               {CS::C, C},
                                               {CS::dtype, dtype},
                                               {CS::format, A::kF8E5M2},
                                               {CS::trans, trans},
                                               {CS::both, both}}),
                {}, 0, /*exact=*/true);
      }
      // The all-gather's amaxes: x and its first half.
      std::vector<float> half(x.begin(), x.begin() + R * C / 2);
      compare(Id::amax_group, shardc_k_amax_group,
              {in, dtype == A::kBF16 ? bf16s(half) : floats(half), out(2)},
              packInts(Id::amax_group,
                       {{A::amax_group::k, 2}, {A::amax_group::dtype, dtype}},
                       {R * C, R * C / 2}),
              {}, 0, /*exact=*/true);
    }
    // The byte transpose.
    Buffer bytes = out(R * C, 1);
    bytes.output = false; // an input
    for (int64_t k = 0; k < R * C; ++k)
      bytes.host[size_t(k)] = char(k * 7 + 3);
    compare(Id::transpose_fp8, shardc_k_transpose_fp8, {bytes, out(R * C, 1)},
            packInts(Id::transpose_fp8,
                     {{A::transpose_fp8::R, R}, {A::transpose_fp8::C, C}}),
            {}, 0, /*exact=*/true);
  }

  for (int64_t dtype : dtypes)
    compare(Id::fp8_scales, shardc_k_fp8_scales,
            {floats({1.5f, 3.0f, 2.75f, 0.1f, 7.3f, 0.0f}), out(2 * 2)},
            packInts(Id::fp8_scales, {{A::fp8_scales::P, 3},
                                      {A::fp8_scales::k, 2},
                                      {A::fp8_scales::format, A::kF8E4M3},
                                      {A::fp8_scales::amax_dtype, dtype}}),
            {}, 0, /*exact=*/true);

  // Unaligned buffers (a shard of a gathered weight starts anywhere): the
  // amaxes' heads before the first 16-byte boundary, the casts' element
  // paths.
  {
    const int64_t R = 33, C = 40;
    auto x = randomVec(R * C, 29, 2.0f);
    for (int64_t dtype : dtypes) {
      SCOPED_TRACE(dtype == A::kBF16 ? "bf16 unaligned" : "f32 unaligned");
      Buffer in = dtype == A::kBF16 ? bf16s(x) : floats(x);
      size_t e = A::dtypeBytes(dtype);
      compareUnaligned(
          ctx, Id::amax_group, shardc_k_amax_group, {in, in, out(2)},
          {e, 3 * e, 0},
          packInts(Id::amax_group,
                   {{A::amax_group::k, 2}, {A::amax_group::dtype, dtype}},
                   {R * C, R * C}));
      for (auto [trans, both] :
           {std::pair<int64_t, int64_t>{0, 0}, {1, 0}, {0, 1}}) {
        std::vector<Buffer> b = {in, out(R * C, 1), out(2)};
        std::vector<size_t> at = {e, 1, 0};
        if (both) {
          b.push_back(out(R * C, 1));
          at.push_back(3);
        }
        compareUnaligned(ctx, Id::cast_fp8, shardc_k_cast_fp8, b, at,
                         packInts(Id::cast_fp8, {{C8::R, R},
                                                 {C8::C, C},
                                                 {C8::dtype, dtype},
                                                 {C8::format, A::kF8E4M3},
                                                 {C8::rowwise, 0},
                                                 {C8::trans, trans},
                                                 {C8::both, both}}));
      }
      for (int64_t trans : {0, 1})
        compareUnaligned(ctx, Id::cast_fp8, shardc_k_cast_fp8,
                         {in, out(R * C, 1), out(trans ? C : R)}, {e, 1, 0},
                         packInts(Id::cast_fp8, {{C8::R, R},
                                                 {C8::C, C},
                                                 {C8::dtype, dtype},
                                                 {C8::format, A::kF8E4M3},
                                                 {C8::rowwise, 1},
                                                 {C8::trans, trans},
                                                 {C8::both, 0}}));
    }
    Buffer bytes = out(R * C, 1);
    bytes.output = false;
    for (int64_t k = 0; k < R * C; ++k)
      bytes.host[size_t(k)] = char(k * 5 + 1);
    compareUnaligned(ctx, Id::transpose_fp8, shardc_k_transpose_fp8,
                     {bytes, out(R * C, 1)}, {3, 1},
                     packInts(Id::transpose_fp8, {{A::transpose_fp8::R, R},
                                                  {A::transpose_fp8::C, C}}));
  }

  namespace M8 = A::matmul_fp8;
  const int64_t M = 32, K = 48, N = 16;
  std::mt19937 gen(5);
  auto codes = [&](int64_t n, uint8_t top) {
    Buffer b;
    b.host.resize(size_t(n));
    for (char &c : b.host)
      c = char(uint8_t(gen() % top) | (gen() % 2 ? 0x80 : 0));
    return b;
  };
  Buffer qa = codes(M * K, 0x50), qb = codes(N * K, 0x48); // |v| < 16
  auto bias = randomVec(N, 22);
  for (int64_t rowwise : {0, 1}) {
    // Rowwise: the casts' scales (powers of two for a); tensorwise: the
    // {s, 1/s} pairs.
    std::vector<float> sa, sb;
    if (rowwise) {
      for (int64_t m = 0; m < M; ++m)
        sa.push_back(std::ldexp(1.0f, int(gen() % 9)));
      for (int64_t n = 0; n < N; ++n)
        sb.push_back(0.75f + float(gen() % 64));
    } else {
      float s = std::ldexp(1.0f, int(gen() % 9)), t = 0.75f + float(gen() % 64);
      sa = {s, 1.0f / s};
      sb = {t, 1.0f / t};
    }
    std::vector<std::pair<int64_t, int64_t>> ints = {
        {M8::M, M},
        {M8::K, K},
        {M8::N, N},
        {M8::format_a, A::kF8E4M3},
        {M8::format_b, A::kF8E5M2},
        {M8::rowwise, rowwise},
        {M8::has_bias, 1}};
    compare(Id::matmul_fp8, shardc_k_matmul_fp8,
            {qa, qb, floats(sa), floats(sb), floats(bias), out(M * N)},
            packInts(Id::matmul_fp8, ints), {}, 1e-4);
    ints.push_back({M8::dtype, A::kBF16});
    compare(Id::matmul_fp8, shardc_k_matmul_fp8,
            {qa, qb, floats(sa), floats(sb), bf16s(bias), outBf16(M * N)},
            packInts(Id::matmul_fp8, ints), {}, 1e-2);
    // y_f32: a bf16 GEMM's y in f32, unrounded (the bias bf16).
    ints.push_back({M8::y_f32, 1});
    compare(Id::matmul_fp8, shardc_k_matmul_fp8,
            {qa, qb, floats(sa), floats(sb), bf16s(bias), out(M * N)},
            packInts(Id::matmul_fp8, ints), {}, 1e-4);
  }

  // scaleFp8Product on its own, bit for bit: d times sa[1] sb[1]
  // (tensorwise, unscaled), d / sa[m] / sb[n] (rowwise) or d (scaled),
  // rounded to bf16 unless f32 or yF32, the bias added and rounded again.
  auto d = randomVec(M * N, 24, 40.0f);
  std::vector<float> ra(M), rb(N);
  for (float &v : ra)
    v = std::ldexp(1.0f, int(gen() % 9));
  for (float &v : rb)
    v = 0.75f + float(gen() % 64);
  std::vector<float> pa = {3.0f, 1.0f / 3.0f}, pb = {7.0f, 1.0f / 7.0f};
  for (int way = 0; way < 3; ++way) // tensorwise, rowwise, scaled
    for (auto [bf16, yF32] :
         {std::pair{false, false}, {true, false}, {true, true}}) {
      SCOPED_TRACE("way " + std::to_string(way) + (bf16 ? " bf16" : "") +
                   (yF32 ? " yF32" : ""));
      bool yBf16 = bf16 && !yF32;
      std::vector<char> want(size_t(M * N) * (yBf16 ? 2 : 4));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          float v = d[m * N + n];
          if (way == 0)
            v = v * (pa[1] * pb[1]);
          else if (way == 1)
            v = v / ra[m] / rb[n];
          float bv = bf16 ? roundToBf16(bias[n]) : bias[n];
          if (yBf16) {
            uint16_t h = floatToBf16(roundToBf16(v) + bv);
            std::memcpy(want.data() + 2 * (m * N + n), &h, 2);
          } else {
            float y = v + bv;
            std::memcpy(want.data() + 4 * (m * N + n), &y, 4);
          }
        }
      std::vector<void *> dev;
      auto put = [&](const void *host, size_t bytes) {
        void *p = nullptr;
        CUDA_CHECK(cudaMalloc(&p, bytes));
        CUDA_CHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
        dev.push_back(p);
        return static_cast<float *>(p);
      };
      const float *sa = way == 0   ? put(pa.data(), 8)
                        : way == 1 ? put(ra.data(), size_t(M) * 4)
                                   : nullptr; // scaled: none
      const float *sb = way == 0   ? put(pb.data(), 8)
                        : way == 1 ? put(rb.data(), size_t(N) * 4)
                                   : nullptr;
      Buffer bb = bf16 ? bf16s(bias) : floats(bias);
      std::vector<char> poison(want.size(), char(0xff)); // y's NaNs
      cuda::Fp8Product p{put(d.data(), d.size() * 4),
                         sa,
                         sb,
                         put(bb.host.data(), bb.host.size()),
                         put(poison.data(), poison.size()),
                         M,
                         N,
                         /*rowwise=*/way == 1,
                         bf16};
      p.scaled = way == 2;
      p.yF32 = yF32;
      CUDA_CHECK(cudaDeviceSynchronize());
      cuda::scaleFp8Product(ctx, A::kComputeStream, p);
      CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<char> got(want.size());
      CUDA_CHECK(
          cudaMemcpy(got.data(), p.y, got.size(), cudaMemcpyDeviceToHost));
      EXPECT_EQ(got, want);
      for (void *q : dev)
        CUDA_CHECK(cudaFree(q));
    }
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
  // A norm over 100003 elements (not a multiple of 4): 25 blocks of
  // partials and the float4 tail.
  auto big = randomVec(100003, 7);
  compare(Id::squared_norm, shardc_k_squared_norm, {floats(big), out(1)},
          packInts(Id::squared_norm, {{A::squared_norm::n, 100003}}));
  // The residual add fused with the norm: the sum and the normalized rows.
  namespace AL = A::add_layer_norm;
  namespace AR = A::add_rms_norm;
  auto h = randomVec(M * C, 8);
  for (int64_t hasBias : {0, 1}) {
    std::vector<Buffer> bufs = {floats(x), floats(h), floats(w)};
    if (hasBias)
      bufs.push_back(floats(b));
    bufs.push_back(out(M * C));
    bufs.push_back(out(M * C));
    compare(Id::add_layer_norm, shardc_k_add_layer_norm, bufs,
            packInts(Id::add_layer_norm,
                     {{AL::M, M}, {AL::C, C}, {AL::has_bias, hasBias}}),
            packFloats(Id::add_layer_norm, {{AL::f::eps, 1e-5}}));
  }
  compare(Id::add_rms_norm, shardc_k_add_rms_norm,
          {floats(x), floats(h), floats(w), out(M * C), out(M * C)},
          packInts(Id::add_rms_norm, {{AR::M, M}, {AR::C, C}, {AR::amax, 0}}),
          packFloats(Id::add_rms_norm, {{AR::f::eps, 1e-6}}));
  // With the amax of y (rt-fuse-amax): one atomic max a row's block.
  compare(Id::add_rms_norm, shardc_k_add_rms_norm,
          {floats(x), floats(h), floats(w), out(M * C), out(M * C), out(1)},
          packInts(Id::add_rms_norm, {{AR::M, M}, {AR::C, C}, {AR::amax, 1}}),
          packFloats(Id::add_rms_norm, {{AR::f::eps, 1e-6}}));
  for (float maxNorm : {0.0f, 0.5f, 1e6f})
    compare(Id::clip_coef, shardc_k_clip_coef,
            {floats({4.0f}), floats({maxNorm}), out(1)},
            packInts(Id::clip_coef, {}));
}

// SwiGLU's fused kernels against the CPU's, f32 and bf16, n not a multiple
// of a pack (the tail) and a pack's multiple; with and without the amaxes
// of their outputs.
TEST_F(CudaKernels, Swiglu) {
  for (int64_t n : {int64_t(1003), int64_t(1024)})
    for (int64_t dtype : {A::kF32, A::kBF16}) {
      bool bf16 = dtype == A::kBF16;
      auto in = [&](unsigned seed, float scale) {
        auto v = randomVec(n, seed, scale);
        return bf16 ? bf16s(v) : floats(v);
      };
      auto o = [&] { return bf16 ? outBf16(n) : out(n); };
      double tol = bf16 ? 8e-3 : 1e-5;
      compare(Id::swiglu, shardc_k_swiglu, {in(64, 4.0f), in(65, 1.0f), o()},
              packInts(Id::swiglu, {{A::swiglu::n, n},
                                    {A::swiglu::dtype, dtype},
                                    {A::swiglu::amax, 0}}),
              {}, tol);
      compare(Id::swiglu_grad, shardc_k_swiglu_grad,
              {in(64, 4.0f), in(65, 1.0f), in(66, 1.0f), o(), o()},
              packInts(Id::swiglu_grad, {{A::swiglu_grad::n, n},
                                         {A::swiglu_grad::dtype, dtype},
                                         {A::swiglu_grad::amax, 0}}),
              {}, tol);
      // With the outputs' amaxes (rt-fuse-amax), f32 whatever the dtype.
      compare(Id::swiglu, shardc_k_swiglu,
              {in(64, 4.0f), in(65, 1.0f), o(), out(1)},
              packInts(Id::swiglu, {{A::swiglu::n, n},
                                    {A::swiglu::dtype, dtype},
                                    {A::swiglu::amax, 1}}),
              {}, tol);
      compare(Id::swiglu_grad, shardc_k_swiglu_grad,
              {in(64, 4.0f), in(65, 1.0f), in(66, 1.0f), o(), o(), out(1),
               out(1)},
              packInts(Id::swiglu_grad, {{A::swiglu_grad::n, n},
                                         {A::swiglu_grad::dtype, dtype},
                                         {A::swiglu_grad::amax, 1}}),
              {}, tol);
    }
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

// The grouped optimizer kernels against the CPU's, which run the per-tensor
// kernels: three tensors of different sizes (one 1-D), one large enough for
// several blocks, and the norm of 32, the most a launch takes.
TEST_F(CudaKernels, OptimizerGroups) {
  const std::vector<int64_t> sizes = {5000, 37, 70001};
  std::vector<float> hyper = packHyper({{A::kLr, 1e-3f},
                                        {A::kBeta1, 0.9f},
                                        {A::kBeta2, 0.95f},
                                        {A::kEps, 1e-8f},
                                        {A::kWeightDecay, 0.1f},
                                        {A::kWeightDecay1D, 0.0f},
                                        {A::kStep, 3.0f}});
  std::vector<Buffer> bufs = {floats(hyper), floats({0.7f})};
  std::vector<int64_t> ints = {int64_t(sizes.size())};
  std::vector<Buffer> normBufs;
  std::vector<int64_t> normInts = {int64_t(sizes.size())};
  for (size_t j = 0; j < sizes.size(); ++j) {
    int64_t n = sizes[j];
    auto v = randomVec(n, 60 + j, 0.1f);
    for (float &e : v)
      e = e * e;
    auto g = randomVec(n, 70 + j);
    for (Buffer b : {floats(randomVec(n, 50 + j)), floats(g),
                     floats(randomVec(n, 80 + j, 0.1f)), floats(v), out(n),
                     out(n), out(n)})
      bufs.push_back(b);
    ints.push_back(n);
    ints.push_back(j == 1);
    normBufs.push_back(floats(g));
    normInts.push_back(n);
  }
  compare(Id::adamw_group, shardc_k_adamw_group, bufs, ints);
  normBufs.push_back(out(1));
  compare(Id::squared_norm_group, shardc_k_squared_norm_group, normBufs,
          normInts);
  std::vector<Buffer> many;
  std::vector<int64_t> manyInts = {32};
  for (int j = 0; j < 32; ++j) {
    many.push_back(floats(randomVec(100 + 37 * j, 90 + j)));
    manyInts.push_back(100 + 37 * j);
  }
  many.push_back(out(1));
  compare(Id::squared_norm_group, shardc_k_squared_norm_group, many,
          manyInts);
}

TEST_F(CudaKernels, Broadcasting) {
  // [2,3,4] op [3,1] -> [2,3,4]: rhs strides (0, 1, 0).
  auto a = randomVec(24, 25), c = randomVec(3, 26);
  for (float &v : a)
    v = std::fabs(v) + 0.1f; // pow of positive bases
  std::vector<int64_t> ints = {3, 2, 3, 4, 12, 4, 1, 0, 1, 0};
  // add and mul are typed: R, then the dtype, then the dims and strides.
  std::vector<int64_t> typed = ints;
  typed.insert(typed.begin() + 1, A::kF32);
  compare(A::KernelId::add, shardc_k_add, {floats(a), floats(c), out(24)}, typed);
  compare(A::KernelId::mul, shardc_k_mul, {floats(a), floats(c), out(24)}, typed);
  compare(A::KernelId::sub, shardc_k_sub, {floats(a), floats(c), out(24)}, ints);
  compare(A::KernelId::div, shardc_k_div, {floats(a), floats(c), out(24)}, ints);
  auto e = c;
  e[1] = 2.0f; // the exact-square path
  compare(A::KernelId::pow, shardc_k_pow, {floats(a), floats(e), out(24)}, ints);
  compare(A::KernelId::broadcast, shardc_k_broadcast, {floats(c), out(24)},
          {3, 2, 3, 4, 0, 1, 0});
  // [2,3,7] op [2,3,7], both dense: the elementwise map (packs of 4 and a
  // tail of 2), every op.
  auto x = randomVec(42, 27), z = randomVec(42, 28);
  for (float &v : x)
    v = std::fabs(v) + 0.1f;
  z[5] = 2.0f;
  std::vector<int64_t> dense = {3, 2, 3, 7, 21, 7, 1, 21, 7, 1};
  std::vector<int64_t> denseTyped = dense;
  denseTyped.insert(denseTyped.begin() + 1, A::kF32);
  compare(A::KernelId::add, shardc_k_add, {floats(x), floats(z), out(42)},
          denseTyped);
  compare(A::KernelId::mul, shardc_k_mul, {floats(x), floats(z), out(42)},
          denseTyped);
  compare(A::KernelId::sub, shardc_k_sub, {floats(x), floats(z), out(42)}, dense);
  compare(A::KernelId::div, shardc_k_div, {floats(x), floats(z), out(42)}, dense);
  compare(A::KernelId::pow, shardc_k_pow, {floats(x), floats(z), out(42)}, dense);
}

TEST_F(CudaKernels, SoftmaxAndLoss) {
  const int64_t outer = 6, n = 77, inner = 5;
  auto x = randomVec(outer * n * inner, 16), dy = randomVec(outer * n * inner, 17);
  compare(A::KernelId::softmax, shardc_k_softmax,
          {floats(x), out(outer * n * inner)}, {outer, n, inner, A::kF32});
  compare(A::KernelId::softmax_grad, shardc_k_softmax_grad,
          {floats(x), floats(dy), out(outer * n * inner)},
          {outer, n, inner, A::kF32});
  // V = 1003: one element a thread; 1004: float4 packs (the target of row
  // 12 the last column).
  const int64_t N = 41;
  for (int64_t V : {1003, 1004}) {
    std::vector<int32_t> t(N);
    std::mt19937 gen(18);
    for (int32_t &v : t)
      v = int32_t(gen() % V);
    t[3] = -100; // ignored
    t[12] = int32_t(V - 1);
    compare(A::KernelId::cross_entropy_with_grad,
            shardc_k_cross_entropy_with_grad,
            {floats(randomVec(N * V, 19, 3.0f)), ints32(t), out(1),
             out(N * V)},
            {N, V, -100});
  }
}

TEST_F(CudaKernels, EmbeddingGradAndSgd) {
  const int64_t N = 60, V = 23, C = 40;
  std::vector<int32_t> ids(N);
  std::mt19937 gen(20);
  for (int32_t &id : ids)
    id = int32_t(gen() % V); // repeats: rows sum several gradients
  compare(A::KernelId::embedding_grad, shardc_k_embedding_grad,
          {ints32(ids), floats(randomVec(N * C, 21)), out(V * C)},
          {N, V, C, A::kF32});
  // Several tiles of ids (2048 a tile) and buckets of rows, a partial
  // group of 32 columns.
  const int64_t N2 = 4500, V2 = 300, C2 = 72;
  std::vector<int32_t> ids2(N2);
  for (int32_t &id : ids2)
    id = int32_t(gen() % V2);
  compare(A::KernelId::embedding_grad, shardc_k_embedding_grad,
          {ints32(ids2), floats(randomVec(N2 * C2, 25)), out(V2 * C2)},
          {N2, V2, C2, A::kF32});
  // One id in half the positions, across tiles (its rows summed in order
  // over tiles), rows of the table no id names, a width that is no pack
  // (45, a column a lane), and bf16 (8 columns a load; f32 sums rounded
  // once). The sums are the CPU's, in its order: bit for bit.
  for (int64_t k = 0; k < N2; k += 2)
    ids2[k] = 7;
  compare(A::KernelId::embedding_grad, shardc_k_embedding_grad,
          {ints32(ids2), floats(randomVec(N2 * 45, 26)), out(V2 * 45)},
          {N2, V2, 45, A::kF32}, {}, 0, /*exact=*/true);
  compare(A::KernelId::embedding_grad, shardc_k_embedding_grad,
          {ints32(ids2), bf16s(randomVec(N2 * C2, 27)), outBf16(V2 * C2)},
          {N2, V2, C2, A::kBF16}, {}, 0, /*exact=*/true);
  // 33 packs a row: two warps a row, the second with one live lane.
  compare(A::KernelId::embedding_grad, shardc_k_embedding_grad,
          {ints32(ids2), bf16s(randomVec(N2 * 264, 28)), outBf16(V2 * 264)},
          {N2, V2, 264, A::kBF16}, {}, 0, /*exact=*/true);
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

// The GEMMs with GELU epilogues (cuBLASLt's GELU_AUX(_BIAS) and
// DGELU(_BGRAD)) against the CPU's linear followed by the GELU, its
// gradient and the bias gradient. N (the aux matrix's leading dimension) a
// multiple of 8, as cuBLASLt requires (rt-fuse-epilogues fuses no other on
// the CUDA target; CudaEmulator.CublasLtAuxLeadingDimensionMultipleOf8).
// The tolerance of cuBLASLt's DGELU epilogue against the exact gelu_tanh'.
constexpr double kDgeluEpilogueTol = 2e-3;

TEST_F(CudaKernels, GemmEpilogues) {
  const int64_t M = 67, K = 129, N = 48;
  auto x = randomVec(M * K, 16), w = randomVec(N * K, 17), b = randomVec(N, 18);
  auto pre = randomVec(M * N, 19);
  for (int64_t inOut : {0, 1})
    for (int64_t hasBias : {0, 1}) {
      namespace LG = A::linear_gelu;
      namespace LD = A::linear_dgelu;
      std::vector<Buffer> fwd = {floats(x), floats(w)};
      if (hasBias)
        fwd.push_back(floats(b));
      fwd.push_back(out(M * N));
      fwd.push_back(out(M * N));
      compare(Id::linear_gelu, shardc_k_linear_gelu, fwd,
              packInts(Id::linear_gelu, {{LG::M, M},
                                         {LG::K, K},
                                         {LG::N, N},
                                         {LG::in_out, inOut},
                                         {LG::has_bias, hasBias}}),
              {}, 1e-4);
      // dy[M,K] through w to [M,N]: the same GEMM shapes as the forward.
      // cuBLASLt's DGELU epilogue is looser than its GEMM: on an H100
      // (cuBLASLt 13.1) its dx was 3.5e-4 off the exact gelu_tanh' at 0.83
      // (the emulated one computes it exactly), so 2e-3 here; a wrong
      // derivative is off by far more.
      std::vector<Buffer> bwd = {floats(x), floats(w), floats(pre),
                                 out(M * N)};
      if (hasBias)
        bwd.push_back(out(N));
      compare(Id::linear_dgelu, shardc_k_linear_dgelu, bwd,
              packInts(Id::linear_dgelu, {{LD::M, M},
                                          {LD::K, K},
                                          {LD::N, N},
                                          {LD::in_out, inOut},
                                          {LD::has_bias, hasBias}}),
              {}, kDgeluEpilogueTol);
    }
}

//===----------------------------------------------------------------------===//
// GEMMs on views less aligned than cuBLASLt assumes by default
//===----------------------------------------------------------------------===//

/// Kernel `id` on the CPU and on the device with the same inputs, each
/// device buffer `offsets[j]` bytes into its allocation (an arena view),
/// outputs poisoned with NaN; every output compared within `tol`.
void compareAt(cuda::Context &ctx, A::KernelId id, KernelFn cpu,
               std::vector<Buffer> bufs, const std::vector<size_t> &offsets,
               std::vector<int64_t> ints, double tol) {
  ASSERT_EQ(bufs.size(), offsets.size());
  std::vector<std::vector<char>> cpuBufs;
  std::vector<void *> hostPtrs, allocs, devPtrs;
  for (Buffer &b : bufs)
    cpuBufs.push_back(b.host);
  for (auto &b : cpuBufs)
    hostPtrs.push_back(b.data());
  cpu(nullptr, hostPtrs.data(), ints.data(), nullptr, A::kComputeStream);
  for (size_t j = 0; j < bufs.size(); ++j) {
    void *d = nullptr;
    CUDA_CHECK(cudaMalloc(&d, bufs[j].host.size() + offsets[j]));
    char *view = static_cast<char *>(d) + offsets[j];
    if (bufs[j].output)
      CUDA_CHECK(cudaMemset(view, 0xff, bufs[j].host.size()));
    else
      CUDA_CHECK(cudaMemcpy(view, bufs[j].host.data(), bufs[j].host.size(),
                            cudaMemcpyHostToDevice));
    allocs.push_back(d);
    devPtrs.push_back(view);
  }
  cuda::kernelTable()[int64_t(id)](&ctx, devPtrs.data(), ints.data(), nullptr,
                                   A::kComputeStream);
  CUDA_CHECK(cudaDeviceSynchronize());
  ctx.checkErrors();
  for (size_t j = 0; j < bufs.size(); ++j) {
    std::vector<float> got(bufs[j].host.size() / sizeof(float));
    CUDA_CHECK(cudaMemcpy(got.data(), devPtrs[j], bufs[j].host.size(),
                          cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(allocs[j]));
    const float *want = reinterpret_cast<const float *>(cpuBufs[j].data());
    for (size_t e = 0; bufs[j].output && e < got.size(); ++e)
      ASSERT_LE(std::fabs(double(got[e]) - want[e]),
                tol * (1.0 + std::fabs(want[e])))
          << A::kernelInfo(id).name << " buffer " << j << " (offset "
          << offsets[j] << ") element " << e;
  }
}

// squared_norm_group's chunks against the CPU's chain of squared_norm and
// add: 40 tensors (two passes of 32), one of several chunks with a tail
// (300,007 elements), an empty one, and views 4 bytes past an allocation
// (not 16-byte aligned: the scalar loads). Relative 1e-6: the sums are in
// double on both sides, in different orders, then rounded to f32.
TEST_F(CudaKernels, SquaredNormGroupChunks) {
  for (size_t misaligned : {size_t(0), size_t(4)}) {
    SCOPED_TRACE("offset " + std::to_string(misaligned));
    std::vector<Buffer> bufs;
    std::vector<size_t> offsets;
    std::vector<int64_t> ints = {40};
    for (int j = 0; j < 40; ++j) {
      int64_t n = j == 3 ? 300007 : j == 8 ? 0 : 1000 + 611 * j;
      bufs.push_back(floats(randomVec(n, 200 + j)));
      offsets.push_back(j % 2 ? misaligned : 0);
      ints.push_back(n);
    }
    bufs.push_back(out(1));
    offsets.push_back(0);
    compareAt(ctx, Id::squared_norm_group, shardc_k_squared_norm_group, bufs,
              offsets, ints, 1e-6);
  }
}

// cuBLASLt's heuristic assumes 256-byte-aligned A, B, C and D unless told
// otherwise (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES), and takes the bias
// and aux pointers' alignment from their values when it runs. Here every
// GEMM kernel runs on views 4, 16 or 64 bytes past an allocation, with
// leading dimensions of 64 floats (which would allow a 256-byte algorithm),
// against the CPU. The emulated cuBLASLt refuses a pointer less aligned than
// its algorithm assumes (CudaEmulator.CublasLt*), so this fails if gemm.cu
// asks the heuristic with the default preferences or sets the bias and aux
// pointers after it.
TEST_F(CudaKernels, GemmsOnUnalignedViews) {
  const int64_t M = 5, K = 64, N = 64;
  auto x = randomVec(M * K, 70), w = randomVec(N * K, 71), b = randomVec(N, 72);
  auto pre = randomVec(M * N, 73);
  for (int64_t inOut : {0, 1}) {
    SCOPED_TRACE("in_out " + std::to_string(inOut));
    namespace L = A::linear;
    // Aligned first: the plan made for it is not the one for the views.
    for (std::vector<size_t> offsets :
         {std::vector<size_t>{0, 0, 0, 0}, std::vector<size_t>{4, 16, 4, 64}})
      compareAt(ctx, Id::linear, shardc_k_linear,
                {floats(x), floats(w), floats(b), out(M * N)}, offsets,
                packInts(Id::linear, {{L::M, M},
                                      {L::K, K},
                                      {L::N, N},
                                      {L::in_out, inOut},
                                      {L::has_bias, 1}}),
                1e-4);
    namespace LG = A::linear_gelu;
    compareAt(ctx, Id::linear_gelu, shardc_k_linear_gelu,
              {floats(x), floats(w), floats(b), out(M * N), out(M * N)},
              {16, 4, 4, 4, 16},
              packInts(Id::linear_gelu, {{LG::M, M},
                                         {LG::K, K},
                                         {LG::N, N},
                                         {LG::in_out, inOut},
                                         {LG::has_bias, 1}}),
              1e-4);
    namespace LD = A::linear_dgelu;
    compareAt(ctx, Id::linear_dgelu, shardc_k_linear_dgelu,
              {floats(x), floats(w), floats(pre), out(M * N), out(N)},
              {64, 4, 4, 16, 4},
              packInts(Id::linear_dgelu, {{LD::M, M},
                                          {LD::K, K},
                                          {LD::N, N},
                                          {LD::in_out, inOut},
                                          {LD::has_bias, 1}}),
              kDgeluEpilogueTol);
  }
  namespace Mm = A::matmul;
  compareAt(ctx, Id::matmul, shardc_k_matmul,
            {floats(x), floats(w), out(M * N)}, {4, 16, 64},
            packInts(Id::matmul, {{Mm::M, M},
                                  {Mm::K, K},
                                  {Mm::N, N},
                                  {Mm::trans_a, 0},
                                  {Mm::trans_b, 1}}),
            1e-4);
  // Strided-batched: b [1,4] broadcast over a's [3,4], so 3 calls of 4
  // products, the first 16 bytes into its allocation.
  namespace BM = A::batch_matmul;
  auto a = randomVec(12 * M * K, 74), bm = randomVec(4 * K * N, 75);
  compareAt(ctx, Id::batch_matmul, shardc_k_batch_matmul,
            {floats(a), floats(bm), out(12 * M * N)}, {16, 4, 16},
            packInts(Id::batch_matmul,
                     {{BM::M, M},
                      {BM::K, K},
                      {BM::N, N},
                      {BM::ta, 0},
                      {BM::tb, 0},
                      {BM::R, 2}},
                     {3, 4, 4, 1, 0, 1}),
            1e-4);
  // The chunked LM head: its GEMMs on h + r0*C, dh + r0*C and the scratch.
  namespace LC = A::linear_cross_entropy;
  const int64_t V = 96, R = 2;
  std::vector<int32_t> t = {1, 5, 95, 0, 7};
  Buffer scratch = out(R * A::lossHeadRowStride(V));
  scratch.output = false; // rows at the padded stride here, dense on the CPU
  compareAt(ctx, Id::linear_cross_entropy, shardc_k_linear_cross_entropy,
            {floats(x), floats(randomVec(V * K, 76, 0.3f)), ints32(t), out(1),
             out(M * K), out(V * K), scratch},
            {4, 16, 0, 0, 4, 16, 4},
            packInts(Id::linear_cross_entropy, {{LC::N, M},
                                                {LC::C, K},
                                                {LC::V, V},
                                                {LC::R, R},
                                                {LC::ignore_index, -100}}),
            1e-4);
}

//===----------------------------------------------------------------------===//
// Backward, loss and rotary kernels (train_kernels.cu)
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, NormGrads) {
  namespace LG = A::layer_norm_grad;
  namespace RG = A::rms_norm_grad;
  // C not a multiple of 32; M large enough that the parameter gradients'
  // column sums are split into several chunks of rows. C a multiple of 4
  // (300, 264) takes the 128-bit column sums; 264 leaves the last block
  // of columns part empty.
  for (auto [M, C] : {std::pair<int64_t, int64_t>{37, 300},
                      {203, 45},
                      {1, 7},
                      {1000, 264}}) {
    SCOPED_TRACE("M " + std::to_string(M) + " C " + std::to_string(C));
    auto x = randomVec(M * C, 30, 2.0f), w = randomVec(C, 31),
         dy = randomVec(M * C, 32);
    for (float &v : x)
      v += 0.5f; // a mean away from 0
    compare(Id::layer_norm_grad, shardc_k_layer_norm_grad,
            {floats(x), floats(w), floats(dy), out(M * C), out(C), out(C)},
            packInts(Id::layer_norm_grad, {{LG::M, M}, {LG::C, C}}),
            packFloats(Id::layer_norm_grad, {{LG::f::eps, 1e-5}}));
    compare(Id::rms_norm_grad, shardc_k_rms_norm_grad,
            {floats(x), floats(w), floats(dy), out(M * C), out(C)},
            packInts(Id::rms_norm_grad, {{RG::M, M}, {RG::C, C}}),
            packFloats(Id::rms_norm_grad, {{RG::f::eps, 1e-6}}));
    // With the residual gradient's add fused in (add_dr).
    auto r = randomVec(M * C, 33);
    compare(Id::layer_norm_grad, shardc_k_layer_norm_grad,
            {floats(x), floats(w), floats(dy), out(M * C), out(C), out(C),
             floats(r)},
            packInts(Id::layer_norm_grad,
                     {{LG::M, M}, {LG::C, C}, {LG::add_dr, 1}}),
            packFloats(Id::layer_norm_grad, {{LG::f::eps, 1e-5}}));
    compare(Id::rms_norm_grad, shardc_k_rms_norm_grad,
            {floats(x), floats(w), floats(dy), out(M * C), out(C), floats(r)},
            packInts(Id::rms_norm_grad,
                     {{RG::M, M}, {RG::C, C}, {RG::add_dr, 1}}),
            packFloats(Id::rms_norm_grad, {{RG::f::eps, 1e-6}}));
    // And the amax of dx (add_dr 2, rt-fuse-amax): a warp's max a row.
    compare(Id::rms_norm_grad, shardc_k_rms_norm_grad,
            {floats(x), floats(w), floats(dy), out(M * C), out(C), floats(r),
             out(1)},
            packInts(Id::rms_norm_grad,
                     {{RG::M, M}, {RG::C, C}, {RG::add_dr, 2}}),
            packFloats(Id::rms_norm_grad, {{RG::f::eps, 1e-6}}));
  }
}

TEST_F(CudaKernels, CrossEntropy) {
  namespace CE = A::cross_entropy;
  namespace CG = A::cross_entropy_grad;
  const int64_t N = 41, ignore = -100;
  // V 1003: float by float; 1000: float4 vectors.
  for (int64_t V : {1003, 1000}) {
    SCOPED_TRACE("V " + std::to_string(V));
    std::vector<int32_t> t(N);
    std::mt19937 gen(33);
    for (int32_t &v : t)
      v = int32_t(gen() % V);
    t[3] = int32_t(ignore); // an ignored row
    t[7] = int32_t(V - 1);  // the last class
    auto logits = floats(randomVec(N * V, 34, 3.0f));
    compare(Id::cross_entropy, shardc_k_cross_entropy,
            {logits, ints32(t), out(1)},
            packInts(Id::cross_entropy,
                     {{CE::N, N}, {CE::V, V}, {CE::ignore_index, ignore}}));
    compare(Id::cross_entropy_grad, shardc_k_cross_entropy_grad,
            {logits, ints32(t), floats({0.7f}), out(N * V)},
            packInts(Id::cross_entropy_grad,
                     {{CG::N, N}, {CG::V, V}, {CG::ignore_index, ignore}}));
    // Every row ignored: a zero gradient (the loss is NaN on both).
    std::vector<int32_t> none(N, int32_t(ignore));
    compare(Id::cross_entropy_grad, shardc_k_cross_entropy_grad,
            {logits, ints32(none), floats({1.0f}), out(N * V)},
            packInts(Id::cross_entropy_grad,
                     {{CG::N, N}, {CG::V, V}, {CG::ignore_index, ignore}}));
  }
}

// The vocabulary-parallel loss's kernels (--tp) against their CPU twins:
// V 250 float by float, 252 as float4 (the statistics), tp 4 ranks owning
// 2 of each sequence's 8 tokens, rank 2 computing.
TEST_F(CudaKernels, VocabParallelLoss) {
  const int64_t N = 40, seq = 8, tp = 4, ignore = -100;
  std::vector<int32_t> rank = {2};
  for (int64_t V : {250, 252}) {
    SCOPED_TRACE("V " + std::to_string(V));
    std::vector<int32_t> t(N);
    std::mt19937 gen(36);
    for (int32_t &v : t)
      v = int32_t(gen() % (tp * V));
    t[5] = int32_t(ignore);
    t[9] = int32_t(2 * V); // this rank's first column
    auto logits = floats(randomVec(N * V, 37, 3.0f));
    compare(Id::vocab_ce_stats, shardc_k_vocab_ce_stats,
            {logits, ints32(t), ints32(rank), out(N * 2)},
            packInts(Id::vocab_ce_stats,
                     {{A::vocab_ce_stats::N, N}, {A::vocab_ce_stats::V, V}}));
    auto all = randomVec(tp * N * 2, 38, 2.0f);
    for (int64_t k = 0; k < tp * N; ++k)
      all[2 * k] += 6.0f; // logsumexps above the logits
    compare(Id::vocab_ce, shardc_k_vocab_ce,
            {ints32(t), floats(all), ints32(rank), out(1)},
            packInts(Id::vocab_ce, {{A::vocab_ce::N, N},
                                    {A::vocab_ce::seq, seq},
                                    {A::vocab_ce::tp, tp},
                                    {A::vocab_ce::ignore_index, ignore}}));
    compare(Id::vocab_ce_grad, shardc_k_vocab_ce_grad,
            {logits, ints32(t), floats(all), ints32(rank), floats({0.7f}),
             out(N * V)},
            packInts(Id::vocab_ce_grad, {{A::vocab_ce_grad::N, N},
                                         {A::vocab_ce_grad::V, V},
                                         {A::vocab_ce_grad::seq, seq},
                                         {A::vocab_ce_grad::tp, tp},
                                         {A::vocab_ce_grad::ignore_index,
                                          ignore}}));
    compare(Id::vocab_part, shardc_k_vocab_part,
            {ints32(t), ints32(rank), out(N, sizeof(int32_t)), out(N)},
            packInts(Id::vocab_part,
                     {{A::vocab_part::N, N}, {A::vocab_part::rows, V}}),
            {}, 0.0, /*exact=*/true);
  }
}

// The LM head and its loss over row chunks: cuBLASLt's three GEMMs a chunk
// and the loss rows between them against the CPU kernel (itself tested
// against the unchunked kernels), with chunks that divide the rows, that
// do not, and one chunk of every row. The scratch is not compared: its
// rows are at lossHeadRowStride(V) here, dense on the CPU.
TEST_F(CudaKernels, LinearCrossEntropy) {
  namespace LC = A::linear_cross_entropy;
  const int64_t N = 41, C = 67, V = 1003, ignore = -100;
  std::vector<int32_t> t(N);
  std::mt19937 gen(35);
  for (int32_t &v : t)
    v = int32_t(gen() % V);
  t[3] = int32_t(ignore);
  t[12] = int32_t(V - 1);
  auto h = floats(randomVec(N * C, 36)), w = floats(randomVec(V * C, 37, 0.3f));
  for (int64_t R : {7, 41, 10}) {
    SCOPED_TRACE("R " + std::to_string(R));
    Buffer scratch = out(R * A::lossHeadRowStride(V));
    scratch.output = false;
    compare(Id::linear_cross_entropy, shardc_k_linear_cross_entropy,
            {h, w, ints32(t), out(1), out(N * C), out(V * C), scratch},
            packInts(Id::linear_cross_entropy, {{LC::N, N},
                                                {LC::C, C},
                                                {LC::V, V},
                                                {LC::R, R},
                                                {LC::ignore_index, ignore}}),
            {}, 1e-4);
  }
}

/// A target outside the vocabulary: the CPU kernels stop; the CUDA kernels
/// flag it on the device and the run's error check stops, naming the kernel.
using CudaKernelsDeathTest = CudaKernels;
TEST_F(CudaKernelsDeathTest, CrossEntropyBadTarget) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int64_t N = 4, V = 10;
  auto run = [&](A::KernelId id) {
    std::vector<int32_t> t = {1, 2, int32_t(V), 3};
    void *bufs[4];
    size_t bytes[4] = {N * V * 4, N * 4, 4, N * V * 4};
    for (int k = 0; k < 4; ++k)
      CUDA_CHECK(cudaMalloc(&bufs[k], bytes[k]));
    CUDA_CHECK(cudaMemset(bufs[0], 0, bytes[0]));
    CUDA_CHECK(cudaMemset(bufs[2], 0, bytes[2]));
    CUDA_CHECK(cudaMemcpy(bufs[1], t.data(), bytes[1], cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize()); // the copies landed (CudaCompare.h)
    std::vector<int64_t> ints = {N, V, -100};
    cuda::kernelTable()[int64_t(id)](&ctx, bufs, ints.data(), nullptr,
                                     A::kComputeStream);
    CUDA_CHECK(cudaDeviceSynchronize());
    ctx.checkErrors();
    std::exit(0);
  };
  for (A::KernelId id : {Id::cross_entropy, Id::cross_entropy_grad})
    EXPECT_EXIT(run(id), testing::ExitedWithCode(1),
                std::string(A::kernelInfo(id).name) +
                    ": a target is outside the vocabulary of 10");
}

TEST_F(CudaKernels, Rotary) {
  namespace Ro = A::rotary;
  namespace RT = A::rotary_table;
  const int64_t B = 2, H = 3, T = 17;
  for (int64_t D : {10, 64}) {
    int64_t n = B * H * T * D, half = D / 2;
    auto x = randomVec(n, 35);
    for (int64_t layout : {A::kAttentionBHTD, A::kAttentionRows})
      for (int64_t inverse : {0, 1}) {
        compare(Id::rotary, shardc_k_rotary, {floats(x), out(n)},
                packInts(Id::rotary, {{Ro::B, B},
                                      {Ro::H, H},
                                      {Ro::T, T},
                                      {Ro::D, D},
                                      {Ro::inverse, inverse},
                                      {Ro::layout, layout}}),
                packFloats(Id::rotary, {{Ro::f::theta, 10000.0}}));
        // With the amax of y (rt-fuse-amax).
        compare(Id::rotary, shardc_k_rotary, {floats(x), out(n), out(1)},
                packInts(Id::rotary, {{Ro::B, B},
                                      {Ro::H, H},
                                      {Ro::T, T},
                                      {Ro::D, D},
                                      {Ro::inverse, inverse},
                                      {Ro::layout, layout},
                                      {Ro::amax, 1}}),
                packFloats(Id::rotary, {{Ro::f::theta, 10000.0}}));
        compare(Id::rotary_table, shardc_k_rotary_table,
                {floats(x), floats(randomVec(T * half, 36)),
                 floats(randomVec(T * half, 37)), out(n)},
                packInts(Id::rotary_table, {{RT::B, B},
                                            {RT::H, H},
                                            {RT::T, T},
                                            {RT::D, D},
                                            {RT::inverse, inverse},
                                            {RT::layout, layout}}));
      }
  }
}

//===----------------------------------------------------------------------===//
// Generic tensor kernels (tensor_kernels.cu, gemm.cu)
//===----------------------------------------------------------------------===//

/// As CudaKernels::compare, but every output starts on the GPU as on the CPU
/// (its given contents), for kernels that write only part of an output.
class CudaPartialWrites : public CudaKernels {
protected:
  void comparePrefilled(A::KernelId id, KernelFn cpu, std::vector<Buffer> bufs,
                        std::vector<int64_t> ints) {
    const A::KernelInfo &k = A::kernelInfo(id);
    SCOPED_TRACE(A::kernelLayout(k));
    ASSERT_EQ(A::checkKernelArgs(k, int64_t(bufs.size()), ints.data(),
                                 int64_t(ints.size()), 0),
              "");
    KernelFn gpu = cuda::kernelTable()[int64_t(id)];
    ASSERT_NE(gpu, nullptr) << k.name << " has no CUDA kernel";
    std::vector<std::vector<char>> cpuBufs;
    std::vector<void *> hostPtrs, devPtrs;
    for (Buffer &b : bufs)
      cpuBufs.push_back(b.host);
    for (auto &b : cpuBufs)
      hostPtrs.push_back(b.data());
    cpu(nullptr, hostPtrs.data(), ints.data(), nullptr, A::kComputeStream);
    for (Buffer &b : bufs) {
      void *d = nullptr;
      CUDA_CHECK(cudaMalloc(&d, b.host.size() ? b.host.size() : 1));
      CUDA_CHECK(
          cudaMemcpy(d, b.host.data(), b.host.size(), cudaMemcpyHostToDevice));
      devPtrs.push_back(d);
    }
    CUDA_CHECK(cudaDeviceSynchronize()); // the copies landed (CudaCompare.h)
    gpu(&ctx, devPtrs.data(), ints.data(), nullptr, A::kComputeStream);
    CUDA_CHECK(cudaDeviceSynchronize());
    ctx.checkErrors();
    for (size_t j = 0; j < bufs.size(); ++j) {
      std::vector<char> got(bufs[j].host.size());
      CUDA_CHECK(cudaMemcpy(got.data(), devPtrs[j], got.size(),
                            cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaFree(devPtrs[j]));
      if (bufs[j].output) {
        EXPECT_EQ(got, cpuBufs[j]) << "buffer " << j;
      }
    }
  }
};

TEST_F(CudaKernels, Transpose) {
  struct Case {
    std::vector<int64_t> dims, perm;
  };
  const Case cases[] = {
      {{37, 45}, {1, 0}},
      {{37, 45}, {0, 1}}, // the identity: a copy
      {{5, 33, 7}, {0, 2, 1}},
      {{5, 33, 7}, {2, 1, 0}},
      {{5, 33, 7}, {1, 0, 2}}, // the innermost stays: a gather
      {{5, 33, 7}, {2, 0, 1}},
      {{5, 33, 7}, {1, 2, 0}}, // merges to a rank-2 transpose
      {{3, 4, 5, 6}, {0, 2, 1, 3}},
      {{3, 4, 5, 6}, {3, 2, 1, 0}},
      {{3, 4, 5, 6}, {0, 1, 3, 2}},
      {{3, 4, 5, 6}, {2, 3, 0, 1}},
      {{3, 4, 5, 6}, {1, 0, 3, 2}},
      {{3, 1, 5, 40}, {3, 1, 0, 2}}, // a size-1 dimension
  };
  for (const Case &c : cases) {
    int64_t R = int64_t(c.dims.size()), n = 1;
    for (int64_t d : c.dims)
      n *= d;
    std::vector<int64_t> tail = c.dims;
    tail.insert(tail.end(), c.perm.begin(), c.perm.end());
    compare(Id::transpose, shardc_k_transpose,
            {floats(randomVec(n, 40)), out(n)},
            packInts(Id::transpose, {{A::transpose::R, R}}, tail), {}, 0,
            /*exact=*/true);
  }
}

TEST_F(CudaPartialWrites, SliceAndConcat) {
  namespace S = A::slice;
  namespace SG = A::slice_grad;
  namespace CP = A::concat_part;
  // inner 7: float by float; inner 8: float4 vectors.
  for (int64_t inner : {7, 8, 1}) {
    const int64_t outer = 4, n = 10, start = 3, size = 5;
    SCOPED_TRACE("inner " + std::to_string(inner));
    compare(
        Id::slice, shardc_k_slice,
        {floats(randomVec(outer * n * inner, 41)), out(outer * size * inner)},
        packInts(Id::slice, {{S::outer, outer},
                             {S::n, n},
                             {S::start, start},
                             {S::size, size},
                             {S::inner, inner}}),
        {}, 0, /*exact=*/true);
    compare(
        Id::slice_grad, shardc_k_slice_grad,
        {floats(randomVec(outer * size * inner, 42)), out(outer * n * inner)},
        packInts(Id::slice_grad, {{SG::outer, outer},
                                  {SG::n, n},
                                  {SG::start, start},
                                  {SG::size, size},
                                  {SG::inner, inner}}),
        {}, 0, /*exact=*/true);
  }
  // Into the middle of y, whose other elements stay as they were.
  for (int64_t inner : {6, 4, 3}) {
    const int64_t outer = 3, nx = 4, ny = 11, start = 5;
    SCOPED_TRACE("inner " + std::to_string(inner));
    comparePrefilled(Id::concat_part, shardc_k_concat_part,
                     {floats(randomVec(outer * nx * inner, 43)),
                      floats(randomVec(outer * ny * inner, 44), true)},
                     packInts(Id::concat_part, {{CP::outer, outer},
                                                {CP::n_x, nx},
                                                {CP::n_y, ny},
                                                {CP::start, start},
                                                {CP::inner, inner}}));
  }
}

TEST_F(CudaKernels, SumTo) {
  struct Case {
    std::vector<int64_t> dims, ystr;
    int64_t outN;
  };
  const Case cases[] = {
      {{6, 35, 40}, {0, 0, 1}, 40},     // rows summed: 128-bit columns
      {{1000, 264}, {0, 1}, 264},       // ... a block of columns part empty
      {{30, 7}, {0, 1}, 7},             // leading dims: a thread a column
      {{300, 5}, {0, 1}, 5},            // ... its rows in chunks
      {{4, 5, 6, 7}, {0, 7, 0, 1}, 35}, // two summed dims apart
      {{4, 5, 6}, {6, 0, 1}, 24},       // the middle dim
      {{37, 50}, {1, 0}, 37},           // the innermost: a warp a row
      {{4, 5, 6}, {0, 1, 0}, 5},        // innermost and outer summed
      {{3, 2000}, {1, 0}, 3},           // a block a row
      {{2, 9000}, {1, 0}, 2},           // ... in chunks
      {{3001}, {0}, 1},                 // everything
      {{20000}, {0}, 1},                // ... in chunks
      {{3, 1, 4}, {4, 0, 1}, 12},       // nothing summed
      {{3, 4}, {1, 3}, 12},             // y transposed: the general walk
  };
  for (const Case &c : cases) {
    int64_t R = int64_t(c.dims.size()), n = 1;
    for (int64_t d : c.dims)
      n *= d;
    std::vector<int64_t> tail = c.dims;
    tail.insert(tail.end(), c.ystr.begin(), c.ystr.end());
    compare(Id::sum_to, shardc_k_sum_to,
            {floats(randomVec(n, 45)), out(c.outN)},
            packInts(Id::sum_to,
                     {{A::sum_to::R, R}, {A::sum_to::out_n, c.outN}}, tail));
  }
}

TEST_F(CudaKernels, WhereAndEqual) {
  // y[2,3,4] = c[2,1,4] ? a[2,3,4] : b[] (strides 0 where broadcast).
  std::vector<float> cf = randomVec(8, 46);
  Buffer cond = out(8, 1);
  cond.output = false;
  for (int64_t k = 0; k < 8; ++k)
    cond.host[k] = cf[k] > 0;
  compare(Id::where, shardc_k_where,
          {cond, floats(randomVec(24, 47)), floats({2.5f}), out(24)},
          packInts(Id::where, {{A::where::R, 3}},
                   {2, 3, 4, 4, 0, 1, 12, 4, 1, 0, 0, 0}),
          {}, 0, /*exact=*/true);
  // Rank 0: one element.
  compare(Id::where, shardc_k_where,
          {cond, floats({1.0f}), floats({2.0f}), out(1)},
          packInts(Id::where, {{A::where::R, 0}}), {}, 0, /*exact=*/true);
  // a[3,5] == b[5], as f32, i32 and bool.
  auto a = randomVec(15, 48), bv = randomVec(5, 49);
  for (int64_t k = 0; k < 15; k += 2)
    a[k] = bv[k % 5]; // some equal
  std::vector<int64_t> tail = {3, 5, 5, 1, 0, 1};
  auto withDtype = [&](int64_t dtype) {
    std::vector<int64_t> t = tail;
    t.push_back(dtype);
    return packInts(Id::equal, {{A::equal::R, 2}}, t);
  };
  compare(Id::equal, shardc_k_equal, {floats(a), floats(bv), out(15, 1)},
          withDtype(A::kF32), {}, 0, /*exact=*/true);
  std::vector<int32_t> ai(15), bi(5);
  for (int64_t k = 0; k < 15; ++k)
    ai[k] = int32_t(a[k] * 2);
  for (int64_t k = 0; k < 5; ++k)
    bi[k] = int32_t(bv[k] * 2);
  compare(Id::equal, shardc_k_equal, {ints32(ai), ints32(bi), out(15, 1)},
          withDtype(A::kI32), {}, 0, /*exact=*/true);
  Buffer ab = out(15, 1), bb = out(5, 1);
  ab.output = bb.output = false;
  for (int64_t k = 0; k < 15; ++k)
    ab.host[k] = a[k] > 0;
  for (int64_t k = 0; k < 5; ++k)
    bb.host[k] = bv[k] > 0;
  compare(Id::equal, shardc_k_equal, {ab, bb, out(15, 1)}, withDtype(A::kBool),
          {}, 0, /*exact=*/true);
}

TEST_F(CudaKernels, Unary) {
  namespace U = A::unary;
  namespace UG = A::unary_grad;
  for (int64_t fn = 0; fn < int64_t(A::UnaryFn::kNumFns); ++fn) {
    SCOPED_TRACE("function code " + std::to_string(fn));
    A::UnaryFn f = A::UnaryFn(fn);
    auto x = randomVec(kN, 50, 3.0f);
    if (f == A::UnaryFn::sqrt || f == A::UnaryFn::log)
      for (float &v : x)
        v = std::fabs(v) + 0.01f;
    if (f == A::UnaryFn::softplus)
      x[5] = 25.0f; // beyond the threshold
    if (f == A::UnaryFn::relu)
      x[6] = 0.0f;
    if (f == A::UnaryFn::round_f16)
      x[7] = 65519.0f; // rounds down to the largest half, 65504
    if (f == A::UnaryFn::nan_to_zero)
      x[8] = NAN;
    compare(Id::unary, shardc_k_unary, {floats(x), out(kN)},
            packInts(Id::unary, {{U::n, kN}, {U::fn, fn}}));
    // y = f(x) from the CPU kernel, then the gradient.
    std::vector<float> y(kN);
    void *bufs[] = {x.data(), y.data()};
    std::vector<int64_t> ints = packInts(Id::unary, {{U::n, kN}, {U::fn, fn}});
    shardc_k_unary(nullptr, bufs, ints.data(), nullptr, A::kComputeStream);
    compare(Id::unary_grad, shardc_k_unary_grad,
            {floats(x), floats(y), floats(randomVec(kN, 51)), out(kN)},
            packInts(Id::unary_grad, {{UG::n, kN}, {UG::fn, fn}}));
  }
}

TEST_F(CudaKernels, LeakyReluAndTrilu) {
  namespace L = A::leaky_relu;
  namespace LG = A::leaky_relu_grad;
  auto x = randomVec(kN, 52), dy = randomVec(kN, 53);
  x[10] = 0.0f; // alpha at 0
  for (int64_t n : {kN, int64_t(3)}) {
    compare(Id::leaky_relu, shardc_k_leaky_relu, {floats(x), out(n)},
            packInts(Id::leaky_relu, {{L::n, n}}),
            packFloats(Id::leaky_relu, {{L::f::alpha, 0.01}}), 0, true);
    compare(Id::leaky_relu_grad, shardc_k_leaky_relu_grad,
            {floats(x), floats(dy), out(n)},
            packInts(Id::leaky_relu_grad, {{LG::n, n}}),
            packFloats(Id::leaky_relu_grad, {{LG::f::alpha, 0.2}}), 0, true);
  }
  namespace Tr = A::trilu;
  const int64_t batch = 3, rows = 7, cols = 9;
  auto m = randomVec(batch * rows * cols, 54);
  for (int64_t upper : {0, 1})
    for (int64_t k : {-2, 0, 3})
      compare(Id::trilu, shardc_k_trilu, {floats(m), out(m.size())},
              packInts(Id::trilu, {{Tr::batch, batch},
                                   {Tr::rows, rows},
                                   {Tr::cols, cols},
                                   {Tr::upper, upper},
                                   {Tr::k, k}}),
              {}, 0, /*exact=*/true);
}

TEST_F(CudaKernels, BatchMatmul) {
  namespace BM = A::batch_matmul;
  const int64_t M = 5, K = 7, N = 6;
  struct Case {
    std::vector<int64_t> batch, astr, bstr;
    int64_t aMats, bMats;
  };
  const Case cases[] = {
      {{4}, {1}, {1}, 4, 4},                   // one strided-batched call
      {{4}, {1}, {0}, 4, 1},                   // b broadcast (stride 0)
      {{3, 4}, {4, 1}, {0, 1}, 12, 4},         // b [1,4]: 3 calls of 4
      {{3, 4}, {1, 0}, {4, 1}, 3, 12},         // a [3,1]: 3 calls of 4
      {{2, 1, 3}, {3, 0, 1}, {3, 3, 1}, 6, 6}, // a size-1 dimension
      {{}, {}, {}, 1, 1},                      // no batch: one GEMM
  };
  for (const Case &c : cases) {
    int64_t R = int64_t(c.batch.size()), batches = 1;
    for (int64_t d : c.batch)
      batches *= d;
    std::vector<int64_t> tail = c.batch;
    tail.insert(tail.end(), c.astr.begin(), c.astr.end());
    tail.insert(tail.end(), c.bstr.begin(), c.bstr.end());
    auto a = randomVec(c.aMats * M * K, 55),
         bm = randomVec(c.bMats * K * N, 56);
    for (int64_t ta : {0, 1})
      for (int64_t tb : {0, 1})
        compare(Id::batch_matmul, shardc_k_batch_matmul,
                {floats(a), floats(bm), out(batches * M * N)},
                packInts(Id::batch_matmul,
                         {{BM::M, M},
                          {BM::K, K},
                          {BM::N, N},
                          {BM::ta, ta},
                          {BM::tb, tb},
                          {BM::R, R}},
                         tail),
                {}, 1e-4);
  }
}

// The collectives of a mesh of one rank are copies: every output equals
// its input (reshard_chunk: the first chunk), f32 and bf16 alike.
TEST_F(CudaKernels, CollectivesOfOneRank) {
  const int64_t n = 301;
  auto x = randomVec(n, 40), z = randomVec(n + 7, 41);
  auto run = [&](A::KernelId id, std::vector<Buffer> bufs,
                 std::vector<int64_t> ints,
                 std::vector<std::pair<size_t, size_t>> equal) {
    SCOPED_TRACE(A::kernelInfo(id).name);
    ASSERT_EQ(A::checkKernelArgs(A::kernelInfo(id), int64_t(bufs.size()),
                                 ints.data(), int64_t(ints.size()), 0),
              "");
    std::vector<void *> dev;
    for (Buffer &b : bufs) {
      void *d;
      CUDA_CHECK(cudaMalloc(&d, b.host.size()));
      CUDA_CHECK(cudaMemcpy(d, b.host.data(), b.host.size(),
                            cudaMemcpyHostToDevice));
      if (b.output)
        CUDA_CHECK(cudaMemset(d, 0xff, b.host.size()));
      dev.push_back(d);
    }
    cuda::kernelTable()[int64_t(id)](&ctx, dev.data(), ints.data(), nullptr,
                                     A::kCommStream);
    CUDA_CHECK(cudaDeviceSynchronize());
    for (auto [out, in] : equal) {
      std::vector<char> got(bufs[out].host.size());
      CUDA_CHECK(cudaMemcpy(got.data(), dev[out], got.size(),
                            cudaMemcpyDeviceToHost));
      EXPECT_EQ(0, std::memcmp(got.data(), bufs[in].host.data(), got.size()))
          << "buffer " << out;
    }
    for (void *d : dev)
      CUDA_CHECK(cudaFree(d));
  };
  for (int64_t dtype : {int64_t(A::kF32), int64_t(A::kBF16)}) {
    // bf16: the same bytes read as half as many elements of twice as many.
    int64_t m = dtype == A::kF32 ? n : 2 * n;
    run(Id::all_gather, {floats(x), out(n)},
        packInts(Id::all_gather, {{A::all_gather::n, m},
                                  {A::all_gather::axis, 0},
                                  {A::all_gather::dtype, dtype}}),
        {{1, 0}});
    run(Id::reduce_scatter, {floats(x), out(n), out(n)},
        packInts(Id::reduce_scatter, {{A::reduce_scatter::n, m},
                                      {A::reduce_scatter::axis, 0},
                                      {A::reduce_scatter::dtype, dtype}}),
        {{1, 0}});
    run(Id::all_gather_subgroup, {floats(x), out(n)},
        packInts(Id::all_gather_subgroup,
                 {{A::all_gather_subgroup::n, m},
                  {A::all_gather_subgroup::axis, 0},
                  {A::all_gather_subgroup::dtype, dtype},
                  {A::all_gather_subgroup::N, 1}}),
        {{1, 0}});
  }
  run(Id::all_reduce, {floats(x), out(n)},
      packInts(Id::all_reduce, {{A::all_reduce::n, n},
                                {A::all_reduce::axis, 0},
                                {A::all_reduce::dtype, A::kF32}}),
      {{1, 0}});
  run(Id::reshard_chunk, {floats(x), out(n)},
      packInts(Id::reshard_chunk, {{A::reshard_chunk::bytes, n * 4},
                                   {A::reshard_chunk::N, 1},
                                   {A::reshard_chunk::axis, 0}}),
      {{1, 0}});
  // Two tensors of one group: each output its input.
  std::vector<int64_t> ints = {2, 0, A::kF32, n, n + 7};
  run(Id::all_gather_group,
      {floats(x), floats(z), out(n), out(n + 7), out(2 * n + 7),
       out(2 * n + 7)},
      ints, {{2, 0}, {3, 1}});
}

/// Runs everywhere: the table names each kernel the backend implements by
/// its ABI id, and these tests cover every one of them.
TEST(CudaKernelTable, CoveredByTests) {
  const A::KernelId tested[] = {
      A::KernelId::fill, A::KernelId::gelu, A::KernelId::gelu_grad,
      A::KernelId::silu, A::KernelId::silu_grad, A::KernelId::accumulate,
      A::KernelId::copy, A::KernelId::cast, A::KernelId::layer_norm,
      A::KernelId::rms_norm, A::KernelId::squared_norm, A::KernelId::clip_coef,
      A::KernelId::embedding, A::KernelId::adamw, A::KernelId::linear,
      A::KernelId::matmul, A::KernelId::softmax, A::KernelId::softmax_grad,
      A::KernelId::cross_entropy_with_grad, A::KernelId::embedding_grad,
      A::KernelId::sgd, A::KernelId::linear_gelu, A::KernelId::linear_dgelu,
      A::KernelId::linear_cross_entropy,
      A::KernelId::add, A::KernelId::mul, A::KernelId::sub,
      A::KernelId::div, A::KernelId::pow, A::KernelId::broadcast,
      // train_kernels.cu
      A::KernelId::layer_norm_grad, A::KernelId::rms_norm_grad,
      A::KernelId::cross_entropy, A::KernelId::cross_entropy_grad,
      A::KernelId::rotary, A::KernelId::rotary_table,
      // tensor_kernels.cu, gemm.cu
      A::KernelId::transpose, A::KernelId::slice, A::KernelId::slice_grad,
      A::KernelId::concat_part, A::KernelId::sum_to, A::KernelId::where,
      A::KernelId::equal, A::KernelId::unary, A::KernelId::unary_grad,
      A::KernelId::leaky_relu, A::KernelId::leaky_relu_grad, A::KernelId::trilu,
      A::KernelId::batch_matmul, A::KernelId::matmul_bgrad,
      A::KernelId::vocab_part, A::KernelId::vocab_ce_stats,
      A::KernelId::vocab_ce, A::KernelId::vocab_ce_grad,
      // attention.cu (CudaAttentionTest.cpp, CudaSdpaTest.cpp)
      A::KernelId::attention, A::KernelId::attention_grad,
      A::KernelId::sdpa, A::KernelId::sdpa_grad,
      A::KernelId::squared_norm_group, A::KernelId::adamw_group,
      A::KernelId::add_layer_norm, A::KernelId::add_rms_norm,
      A::KernelId::swiglu, A::KernelId::swiglu_grad,
      // float8.cu, gemm.cu
      A::KernelId::cast_fp8, A::KernelId::matmul_fp8,
      A::KernelId::amax_group, A::KernelId::fp8_scales,
      A::KernelId::cast_fp8_scaled, A::KernelId::transpose_fp8,
      // collectives.cu (one rank)
      A::KernelId::all_gather, A::KernelId::all_gather_group,
      A::KernelId::reduce_scatter, A::KernelId::all_reduce,
      A::KernelId::reshard_chunk, A::KernelId::all_gather_subgroup};
  int64_t implemented = 0;
  for (int64_t id = 0; id < A::kNumKernels; ++id)
    implemented += cuda::kernelTable()[id] != nullptr;
  EXPECT_EQ(implemented, int64_t(std::size(tested)));
  for (A::KernelId id : tested)
    EXPECT_NE(cuda::kernelTable()[int64_t(id)], nullptr)
        << A::kernelInfo(id).name;
}

} // namespace

namespace shardc::test {
namespace {

// The weight gradient with its bias gradient (cuBLASLt's BGRADA for side
// 1, BGRADB for side 0; the GEMM and sum_to's column sums where cuBLASLt
// has no algorithm) against the CPU's matmul and column sums: f32, and
// bf16 with both outputs in bf16 or in f32 (y_f32).
TEST_F(CudaKernels, MatmulBgrad) {
  namespace Mb = A::matmul_bgrad;
  const int64_t M = 24, K = 67, N = 40;
  for (int64_t side : {0, 1})
    for (int64_t dtype : {int64_t(A::kF32), int64_t(A::kBF16)})
      for (int64_t yF32 : {0, 1}) {
        if (dtype == A::kF32 && yF32)
          continue;
        SCOPED_TRACE("side " + std::to_string(side) + " dtype " +
                     std::to_string(dtype) + " y_f32 " + std::to_string(yF32));
        bool bf16 = dtype == A::kBF16;
        auto in = [&](int64_t n, unsigned seed) {
          return bf16 ? bf16s(randomVec(n, seed)) : floats(randomVec(n, seed));
        };
        auto outOf = [&](int64_t n) {
          return bf16 && !yF32 ? outBf16(n) : out(n);
        };
        compare(Id::matmul_bgrad, shardc_k_matmul_bgrad,
                {in(K * M, 50), in(K * N, 51), outOf(M * N),
                 outOf(side ? N : M)},
                packInts(Id::matmul_bgrad,
                         {{Mb::M, M}, {Mb::K, K}, {Mb::N, N},
                          {Mb::trans_a, 1}, {Mb::trans_b, 0},
                          {Mb::dtype, dtype}, {Mb::y_f32, yF32},
                          {Mb::side, side}}),
                {}, bf16 ? 8e-3 : 1e-5);
      }
}

// The typed GEMMs on bf16 (cuBLASLt: CUDA_R_16BF A, B, bias and D, f32
// accumulation) against the CPU's (bf16 operands, f32 sums, one rounding):
// within one bf16 rounding (2^-8) of each other, at odd sizes, both weight
// layouts, with and without the bias, and every transpose of matmul.
TEST_F(CudaKernels, Bf16LinearAndMatmul) {
  namespace Li = A::linear;
  namespace Mm = A::matmul;
  const double tol = 8e-3;
  for (int64_t inOut : {0, 1})
    for (bool bias : {false, true}) {
      int64_t M = 13, K = 24, N = 40;
      std::vector<Buffer> bufs = {bf16s(randomVec(M * K, 31)),
                                  bf16s(randomVec(N * K, 32))};
      if (bias)
        bufs.push_back(bf16s(randomVec(N, 33)));
      bufs.push_back(outBf16(M * N));
      compare(Id::linear, shardc_k_linear, bufs,
              packInts(Id::linear, {{Li::M, M}, {Li::K, K}, {Li::N, N},
                                    {Li::in_out, inOut},
                                    {Li::has_bias, bias ? 1 : 0},
                                    {Li::dtype, A::kBF16}}),
              {}, tol);
    }
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1}) {
      int64_t M = 9, K = 33, N = 16;
      compare(Id::matmul, shardc_k_matmul,
              {bf16s(randomVec(M * K, 34)), bf16s(randomVec(K * N, 35)),
               outBf16(M * N)},
              packInts(Id::matmul, {{Mm::M, M}, {Mm::K, K}, {Mm::N, N},
                                    {Mm::trans_a, ta}, {Mm::trans_b, tb},
                                    {Mm::dtype, A::kBF16}}),
              {}, tol);
    }
}

// llama-odd's bf16 q projection and the transpose to heads that reads it
// (x[39,40] w[40,40] -> y[3,13,5,8] -> [3,5,13,8]), the pair whose reads
// compute-sanitizer's initcheck reports as uninitialized on an H100
// (tools/bench/results/h100-2026-11-27-run7.log). The poisoned run proves
// the GEMM writes every element of y; the second runs the pair on a y that
// nothing but the GEMM writes, as the trainer's arena does, so that
// `compute-sanitizer --tool initcheck shardc-cuda-tests
// --gtest_filter=*Bf16ProjectionThenTranspose*` tells whether initcheck
// sees cuBLASLt's stores.
TEST_F(CudaKernels, Bf16ProjectionThenTranspose) {
  namespace Li = A::linear;
  const int64_t B = 3, T = 13, H = 5, D = 8, M = B * T, K = 40, N = H * D;
  const double tol = 8e-3;
  Buffer x = bf16s(randomVec(M * K, 36)), w = bf16s(randomVec(N * K, 37));
  std::vector<int64_t> lin = packInts(
      Id::linear, {{Li::M, M}, {Li::K, K}, {Li::N, N}, {Li::in_out, 0},
                   {Li::has_bias, 0}, {Li::dtype, A::kBF16}});
  compare(Id::linear, shardc_k_linear, {x, w, outBf16(M * N)}, lin, {}, tol);
  std::vector<int64_t> tr = packInts(Id::transpose, {{A::transpose::R, 4},
                                                     {A::transpose::dtype,
                                                      A::kBF16}},
                                     {B, T, H, D, 0, 2, 1, 3});
  // The CPU's pair.
  std::vector<char> y(M * N * 2), z(M * N * 2);
  std::vector<void *> hl = {x.host.data(), w.host.data(), y.data()};
  shardc_k_linear(nullptr, hl.data(), lin.data(), nullptr, A::kComputeStream);
  std::vector<void *> ht = {y.data(), z.data()};
  shardc_k_transpose(nullptr, ht.data(), tr.data(), nullptr,
                     A::kComputeStream);
  // The GPU's, y and z fresh from cudaMalloc.
  void *d[4] = {};
  for (int j = 0; j < 4; ++j)
    CUDA_CHECK(cudaMalloc(&d[j], j == 1 ? w.host.size()
                                        : j == 0 ? x.host.size() : y.size()));
  CUDA_CHECK(cudaMemcpy(d[0], x.host.data(), x.host.size(),
                        cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d[1], w.host.data(), w.host.size(),
                        cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaDeviceSynchronize());
  const KernelFn *table = cuda::kernelTable();
  void *dl[3] = {d[0], d[1], d[2]}, *dt[2] = {d[2], d[3]};
  table[int64_t(Id::linear)](&ctx, dl, lin.data(), nullptr, A::kComputeStream);
  table[int64_t(Id::transpose)](&ctx, dt, tr.data(), nullptr,
                                A::kComputeStream);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<char> got(z.size());
  CUDA_CHECK(cudaMemcpy(got.data(), d[3], got.size(), cudaMemcpyDeviceToHost));
  for (void *p : d)
    CUDA_CHECK(cudaFree(p));
  for (int64_t e = 0; e < M * N; ++e) {
    uint16_t gh, wh;
    std::memcpy(&gh, got.data() + 2 * e, 2);
    std::memcpy(&wh, z.data() + 2 * e, 2);
    double g = bf16ToFloat(gh), want = bf16ToFloat(wh);
    ASSERT_LE(std::fabs(g - want), tol * (1.0 + std::fabs(want)))
        << "element " << e << ": cuda " << g << ", cpu " << want;
  }
}

// The element-wise typed kernels on bf16 (8 values a 128-bit load, f32
// math, one rounding) against the CPU's, at a length with a tail.
TEST_F(CudaKernels, Bf16Elementwise) {
  const double tol = 8e-3;
  auto x = randomVec(kN, 41), dy = randomVec(kN, 42);
  compare(Id::fill, shardc_k_fill, {outBf16(kN)},
          packInts(Id::fill, {{A::fill::n, kN}, {A::fill::dtype, A::kBF16}}),
          packFloats(Id::fill, {{A::fill::f::value, 0.3}}), tol);
  for (int64_t tanhForm : {0, 1}) {
    compare(Id::gelu, shardc_k_gelu, {bf16s(x), outBf16(kN)},
            packInts(Id::gelu, {{A::gelu::n, kN}, {A::gelu::tanh, tanhForm},
                                {A::gelu::dtype, A::kBF16}}),
            {}, tol);
    compare(Id::gelu_grad, shardc_k_gelu_grad,
            {bf16s(x), bf16s(dy), outBf16(kN)},
            packInts(Id::gelu_grad, {{A::gelu_grad::n, kN},
                                     {A::gelu_grad::tanh, tanhForm},
                                     {A::gelu_grad::dtype, A::kBF16}}),
            {}, tol);
  }
  compare(Id::silu, shardc_k_silu, {bf16s(x), outBf16(kN)},
          packInts(Id::silu, {{A::silu::n, kN}, {A::silu::dtype, A::kBF16}}),
          {}, tol);
  compare(Id::silu_grad, shardc_k_silu_grad,
          {bf16s(x), bf16s(dy), outBf16(kN)},
          packInts(Id::silu_grad,
                   {{A::silu_grad::n, kN}, {A::silu_grad::dtype, A::kBF16}}),
          {}, tol);
}

// The layout kernels on bf16 move its bits: exactly the CPU's, through the
// 128-bit path (rows of 8k values) and the element path (odd rows), and
// transposes both tiled and gathered.
TEST_F(CudaKernels, Bf16Layout) {
  for (int64_t inner : {8, 3}) {
    int64_t outer = 5, n = 7, start = 2, size = 3;
    compare(Id::slice, shardc_k_slice,
            {bf16s(randomVec(outer * n * inner, 51)),
             outBf16(outer * size * inner)},
            packInts(Id::slice, {{A::slice::outer, outer}, {A::slice::n, n},
                                 {A::slice::start, start},
                                 {A::slice::size, size},
                                 {A::slice::inner, inner},
                                 {A::slice::dtype, A::kBF16}}),
            {}, 0.0);
    compare(Id::slice_grad, shardc_k_slice_grad,
            {bf16s(randomVec(outer * size * inner, 52)),
             outBf16(outer * n * inner)},
            packInts(Id::slice_grad,
                     {{A::slice_grad::outer, outer}, {A::slice_grad::n, n},
                      {A::slice_grad::start, start},
                      {A::slice_grad::size, size},
                      {A::slice_grad::inner, inner},
                      {A::slice_grad::dtype, A::kBF16}}),
            {}, 0.0);
  }
  // [2, 33, 40] -> [2, 40, 33] (tiled) and [33, 2, 40] (gathered rows).
  for (std::vector<int64_t> perm : {std::vector<int64_t>{0, 2, 1},
                                    std::vector<int64_t>{1, 0, 2}}) {
    std::vector<int64_t> tail = {2, 33, 40};
    tail.insert(tail.end(), perm.begin(), perm.end());
    compare(Id::transpose, shardc_k_transpose,
            {bf16s(randomVec(2 * 33 * 40, 55)), outBf16(2 * 33 * 40)},
            packInts(Id::transpose, {{A::transpose::R, 3},
                                     {A::transpose::dtype, A::kBF16}},
                     tail),
            {}, 0.0);
  }
}

// add and mul on bf16 (broadcast: [2,3,4] with [3,1], f32 math, one
// rounding) and the embedding's bf16 rows, against the CPU's.
TEST_F(CudaKernels, Bf16BroadcastAndEmbedding) {
  // ints: R, dtype, dims, a's strides, b's strides.
  std::vector<int64_t> tail = {2, 3, 4, 12, 4, 1, 0, 1, 0};
  for (Id id : {Id::add, Id::mul})
    compare(id, id == Id::add ? shardc_k_add : shardc_k_mul,
            {bf16s(randomVec(24, 61)), bf16s(randomVec(3, 62)), outBf16(24)},
            packInts(id, {{0, 3}, {1, A::kBF16}}, tail), {}, 8e-3);
  // [2,3,45] with [2,3,45], both dense (a residual add): packs of 8 and a
  // tail of 6, one rounding each, as the CPU's.
  std::vector<int64_t> dense = {2, 3, 45, 135, 45, 1, 135, 45, 1};
  for (Id id : {Id::add, Id::mul})
    compare(id, id == Id::add ? shardc_k_add : shardc_k_mul,
            {bf16s(randomVec(270, 64)), bf16s(randomVec(270, 65)),
             outBf16(270)},
            packInts(id, {{0, 3}, {1, A::kBF16}}, dense), {}, 0.0);
  int64_t N = 9, V = 11, C = 24;
  std::vector<int32_t> ids = {0, 3, 10, 3, 7, 1, 1, 5, 2};
  compare(Id::embedding, shardc_k_embedding,
          {ints32(ids), bf16s(randomVec(V * C, 63)), outBf16(N * C)},
          packInts(Id::embedding, {{A::embedding::N, N}, {A::embedding::V, V},
                                   {A::embedding::C, C},
                                   {A::embedding::dtype, A::kBF16}}),
          {}, 0.0);
}

// The norms on bf16 (128-bit loads of 8 values when C is a multiple of 8,
// one at a time otherwise; double statistics, one rounding) and their
// gradients (dx, and dw, db summed over rows in double), against the CPU's.
TEST_F(CudaKernels, Bf16NormsAndGrads) {
  namespace LN = A::layer_norm;
  namespace RN = A::rms_norm;
  namespace LG = A::layer_norm_grad;
  namespace RG = A::rms_norm_grad;
  const double tol = 8e-3;
  // C 296 and 264: 128-bit column sums (264: in chunks of rows, the last
  // block of columns part empty); 45: column by column.
  for (auto [M, C] : {std::pair<int64_t, int64_t>{37, 296},
                      {203, 45},
                      {700, 264}}) {
    SCOPED_TRACE("M " + std::to_string(M) + " C " + std::to_string(C));
    auto x = randomVec(M * C, 71, 2.0f), w = randomVec(C, 72),
         b = randomVec(C, 73), dy = randomVec(M * C, 74);
    for (float &v : x)
      v += 0.5f; // a mean away from 0
    for (int64_t bias : {0, 1}) {
      std::vector<Buffer> bufs = {bf16s(x), bf16s(w)};
      if (bias)
        bufs.push_back(bf16s(b));
      bufs.push_back(outBf16(M * C));
      compare(Id::layer_norm, shardc_k_layer_norm, bufs,
              packInts(Id::layer_norm, {{LN::M, M}, {LN::C, C},
                                        {LN::has_bias, bias},
                                        {LN::dtype, A::kBF16}}),
              packFloats(Id::layer_norm, {{LN::f::eps, 1e-5}}), tol);
    }
    compare(Id::rms_norm, shardc_k_rms_norm,
            {bf16s(x), bf16s(w), outBf16(M * C)},
            packInts(Id::rms_norm,
                     {{RN::M, M}, {RN::C, C}, {RN::dtype, A::kBF16}}),
            packFloats(Id::rms_norm, {{RN::f::eps, 1e-6}}), tol);
    compare(Id::layer_norm_grad, shardc_k_layer_norm_grad,
            {bf16s(x), bf16s(w), bf16s(dy), outBf16(M * C), outBf16(C),
             outBf16(C)},
            packInts(Id::layer_norm_grad,
                     {{LG::M, M}, {LG::C, C}, {LG::dtype, A::kBF16}}),
            packFloats(Id::layer_norm_grad, {{LG::f::eps, 1e-5}}), tol);
    compare(Id::rms_norm_grad, shardc_k_rms_norm_grad,
            {bf16s(x), bf16s(w), bf16s(dy), outBf16(M * C), outBf16(C)},
            packInts(Id::rms_norm_grad,
                     {{RG::M, M}, {RG::C, C}, {RG::dtype, A::kBF16}}),
            packFloats(Id::rms_norm_grad, {{RG::f::eps, 1e-6}}), tol);
    // With the residual gradient's add fused in (add_dr).
    auto r = randomVec(M * C, 75);
    compare(Id::layer_norm_grad, shardc_k_layer_norm_grad,
            {bf16s(x), bf16s(w), bf16s(dy), outBf16(M * C), outBf16(C),
             outBf16(C), bf16s(r)},
            packInts(Id::layer_norm_grad, {{LG::M, M}, {LG::C, C},
                                           {LG::dtype, A::kBF16},
                                           {LG::add_dr, 1}}),
            packFloats(Id::layer_norm_grad, {{LG::f::eps, 1e-5}}), tol);
    compare(Id::rms_norm_grad, shardc_k_rms_norm_grad,
            {bf16s(x), bf16s(w), bf16s(dy), outBf16(M * C), outBf16(C),
             bf16s(r)},
            packInts(Id::rms_norm_grad, {{RG::M, M}, {RG::C, C},
                                         {RG::dtype, A::kBF16},
                                         {RG::add_dr, 1}}),
            packFloats(Id::rms_norm_grad, {{RG::f::eps, 1e-6}}), tol);
  }
}

// softmax, its gradient, both rotaries, sum_to and the embedding's
// gradient (f32 sums of repeated ids, one rounding) on bf16, against the
// CPU's.
TEST_F(CudaKernels, Bf16SoftmaxRotaryAndSums) {
  const double tol = 8e-3;
  const int64_t outer = 6, n = 77, inner = 5, len = outer * n * inner;
  auto x = randomVec(len, 81), dy = randomVec(len, 82);
  compare(Id::softmax, shardc_k_softmax, {bf16s(x), outBf16(len)},
          {outer, n, inner, A::kBF16}, {}, tol);
  compare(Id::softmax_grad, shardc_k_softmax_grad,
          {bf16s(randomVec(len, 83, 0.1f)), bf16s(dy), outBf16(len)},
          {outer, n, inner, A::kBF16}, {}, tol);
  namespace Ro = A::rotary;
  namespace RT = A::rotary_table;
  const int64_t B = 2, H = 3, T = 17, D = 64, rn = B * H * T * D;
  for (int64_t inverse : {0, 1}) {
    compare(Id::rotary, shardc_k_rotary, {bf16s(randomVec(rn, 84)), outBf16(rn)},
            packInts(Id::rotary, {{Ro::B, B}, {Ro::H, H}, {Ro::T, T},
                                  {Ro::D, D}, {Ro::inverse, inverse},
                                  {Ro::dtype, A::kBF16}}),
            packFloats(Id::rotary, {{Ro::f::theta, 10000.0}}), tol);
    compare(Id::rotary, shardc_k_rotary,
            {bf16s(randomVec(rn, 84)), outBf16(rn), out(1)},
            packInts(Id::rotary, {{Ro::B, B}, {Ro::H, H}, {Ro::T, T},
                                  {Ro::D, D}, {Ro::inverse, inverse},
                                  {Ro::dtype, A::kBF16}, {Ro::amax, 1}}),
            packFloats(Id::rotary, {{Ro::f::theta, 10000.0}}), tol);
    compare(Id::rotary_table, shardc_k_rotary_table,
            {bf16s(randomVec(rn, 85)), bf16s(randomVec(T * D / 2, 86)),
             bf16s(randomVec(T * D / 2, 87)), outBf16(rn)},
            packInts(Id::rotary_table, {{RT::B, B}, {RT::H, H}, {RT::T, T},
                                        {RT::D, D}, {RT::inverse, inverse},
                                        {RT::dtype, A::kBF16}}),
            {}, tol);
  }
  // [4, 300, 6] summed to [1, 300, 1] (ints: R, out_n, dtype, dims, y's
  // strides), to [4, 1, 6] and to [1, 1, 6] (rows summed: 128-bit columns
  // when 8 divide them; here 6 do not).
  for (std::vector<int64_t> ystr : {std::vector<int64_t>{0, 1, 0},
                                    std::vector<int64_t>{6, 0, 1},
                                    std::vector<int64_t>{0, 0, 1}}) {
    int64_t outN = ystr[1] ? 300 : ystr[0] ? 24 : 6;
    std::vector<int64_t> tail = {4, 300, 6};
    tail.insert(tail.end(), ystr.begin(), ystr.end());
    compare(Id::sum_to, shardc_k_sum_to,
            {bf16s(randomVec(7200, 88)), outBf16(outN)},
            packInts(Id::sum_to, {{A::sum_to::R, 3},
                                  {A::sum_to::out_n, outN},
                                  {A::sum_to::dtype, A::kBF16}},
                     tail),
            {}, tol);
  }
  // [700, 264] summed to [264]: 128-bit columns (8 bf16), in chunks of
  // rows, the last block of columns part empty.
  compare(Id::sum_to, shardc_k_sum_to,
          {bf16s(randomVec(700 * 264, 90)), outBf16(264)},
          packInts(Id::sum_to, {{A::sum_to::R, 2},
                                {A::sum_to::out_n, 264},
                                {A::sum_to::dtype, A::kBF16}},
                   {700, 264, 0, 1}),
          {}, tol);
  const int64_t N = 60, V = 23, C = 40;
  std::vector<int32_t> ids(N);
  std::mt19937 gen(89);
  for (int32_t &id : ids)
    id = int32_t(gen() % V); // repeats: rows sum several gradients
  compare(Id::embedding_grad, shardc_k_embedding_grad,
          {ints32(ids), bf16s(randomVec(N * C, 90)), outBf16(V * C)},
          {N, V, C, A::kBF16}, {}, tol);
}

// The LM head and its loss on bf16: logits an f32 product of bf16 h and w
// rounded to bf16 as the loss reads them, their gradient rounded to bf16
// in place and the bf16 operand of dh and dw (dw summed in f32 over
// several chunks), against the CPU's; one chunk and several, one not
// dividing the rows.
TEST_F(CudaKernels, Bf16LinearCrossEntropy) {
  namespace LC = A::linear_cross_entropy;
  const int64_t N = 41, C = 64, V = 1000, ignore = -100;
  std::vector<int32_t> t(N);
  std::mt19937 gen(91);
  for (int32_t &v : t)
    v = int32_t(gen() % V);
  t[3] = int32_t(ignore);
  auto h = bf16s(randomVec(N * C, 92)), w = bf16s(randomVec(V * C, 93, 0.3f));
  for (int64_t R : {41, 10}) {
    SCOPED_TRACE("R " + std::to_string(R));
    Buffer scratch = out(R * A::lossHeadRowStride(V));
    scratch.output = false; // not compared: f32 rows on the CPU, bf16 here
    compare(Id::linear_cross_entropy, shardc_k_linear_cross_entropy,
            {h, w, ints32(t), out(1), outBf16(N * C), outBf16(V * C), scratch},
            packInts(Id::linear_cross_entropy, {{LC::N, N},
                                                {LC::C, C},
                                                {LC::V, V},
                                                {LC::R, R},
                                                {LC::ignore_index, ignore},
                                                {LC::dtype, A::kBF16}}),
            {}, 8e-3);
  }
}

/// x rounded to TF32 (10 mantissa bits), to nearest with ties away from
/// zero, as PTX's cvt.rna.tf32.f32 defines it.
float tf32Rna(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x1000u) & ~0x1fffu;
  std::memcpy(&x, &bits, 4);
  return x;
}

// --allow-tf32: an f32 linear on TF32 tensor cores. Against naive sums in
// double: within the two operand roundings (2^-10 of the sum of |x w|) of
// the product of the TF32-rounded operands, whatever the hardware's
// rounding mode; and measurably off the exact f32 product (more than 1e-5
// of the sum of |x w| somewhere, where f32 is within 1e-6), so the test
// tells TF32 from f32.
TEST_F(CudaKernels, Tf32Linear) {
  namespace Li = A::linear;
  const int64_t M = 17, K = 96, N = 24;
  auto x = randomVec(M * K, 95), w = randomVec(N * K, 96);
  ctx.allowTf32 = true;
  std::vector<void *> d(3);
  std::vector<size_t> bytes = {x.size() * 4, w.size() * 4, size_t(M * N) * 4};
  for (int k = 0; k < 3; ++k)
    CUDA_CHECK(cudaMalloc(&d[k], bytes[k]));
  CUDA_CHECK(cudaMemcpy(d[0], x.data(), bytes[0], cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d[1], w.data(), bytes[1], cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaDeviceSynchronize()); // the copies landed (CudaCompare.h)
  std::vector<int64_t> ints = packInts(
      Id::linear, {{Li::M, M}, {Li::K, K}, {Li::N, N}, {Li::in_out, 0},
                   {Li::has_bias, 0}, {Li::dtype, A::kF32}});
  cuda::kernelTable()[int64_t(Id::linear)](&ctx, d.data(), ints.data(),
                                           nullptr, A::kComputeStream);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> y(M * N);
  CUDA_CHECK(cudaMemcpy(y.data(), d[2], bytes[2], cudaMemcpyDeviceToHost));
  for (void *p : d)
    CUDA_CHECK(cudaFree(p));
  double worstTf32 = 0, offF32 = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double exact = 0, rounded = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        float a = x[m * K + k], b = w[n * K + k];
        exact += double(a) * b;
        rounded += double(tf32Rna(a)) * tf32Rna(b);
        mag += std::fabs(double(a) * b);
      }
      double got = y[m * N + n];
      worstTf32 = std::max(worstTf32, std::fabs(got - rounded) / mag);
      offF32 = std::max(offF32, std::fabs(got - exact) / mag);
    }
  EXPECT_LE(worstTf32, std::ldexp(1.0, -10));
  EXPECT_GT(offF32, 1e-5) << "the GEMM computed in f32, not TF32";
}

// The GELU epilogues on bf16 (bf16 x, w, bias, pre and y; dpre and db):
// cuBLASLt's GELU_AUX(_BIAS) and DGELU(_BGRAD) with f32 accumulation, each
// output rounded once from the unrounded GEMM result, against the CPU's
// fused kernels (f32 math on the widened operands, one rounding each).
TEST_F(CudaKernels, Bf16GemmEpilogues) {
  const int64_t M = 37, K = 72, N = 48;
  const double tol = 8e-3;
  auto x = randomVec(M * K, 97), w = randomVec(N * K, 98, 0.2f),
       b = randomVec(N, 99), pre = randomVec(M * N, 100);
  for (int64_t inOut : {0, 1})
    for (int64_t hasBias : {0, 1}) {
      namespace LG = A::linear_gelu;
      namespace LD = A::linear_dgelu;
      std::vector<Buffer> fwd = {bf16s(x), bf16s(w)};
      if (hasBias)
        fwd.push_back(bf16s(b));
      fwd.push_back(outBf16(M * N));
      fwd.push_back(outBf16(M * N));
      compare(Id::linear_gelu, shardc_k_linear_gelu, fwd,
              packInts(Id::linear_gelu, {{LG::M, M},
                                         {LG::K, K},
                                         {LG::N, N},
                                         {LG::in_out, inOut},
                                         {LG::has_bias, hasBias},
                                         {LG::dtype, A::kBF16}}),
              {}, tol);
      std::vector<Buffer> bwd = {bf16s(x), bf16s(w), bf16s(pre),
                                 outBf16(M * N)};
      if (hasBias)
        bwd.push_back(outBf16(N));
      compare(Id::linear_dgelu, shardc_k_linear_dgelu, bwd,
              packInts(Id::linear_dgelu, {{LD::M, M},
                                          {LD::K, K},
                                          {LD::N, N},
                                          {LD::in_out, inOut},
                                          {LD::has_bias, hasBias},
                                          {LD::dtype, A::kBF16}}),
              {}, tol);
    }
}

/// The bf16 element k of `bytes`, as f32.
float bf16At(const std::vector<char> &bytes, size_t k) {
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * k, 2);
  return bf16ToFloat(h);
}

/// The fraction of `got`'s bf16 elements equal to `want`'s values rounded.
double matching(const std::vector<char> &got, const std::vector<double> &want) {
  size_t same = 0;
  for (size_t k = 0; k < want.size(); ++k)
    same += bf16At(got, k) == roundToBf16(float(want[k]));
  return double(same) / double(want.size());
}

// Where the bf16 GELU epilogues round: the GPU's linear_gelu and
// linear_dgelu outputs against two readings of the fused step, computed
// here from the same bf16 operands (the product in double):
//   once:  y = gelu(acc), dx = acc gelu'(pre), each rounded once (the CPU
//          twins and the emulated cuBLASLt);
//   twice: y = gelu(round(acc)), dx = round(acc) gelu'(pre) (PyTorch's
//          unfused step, the GEMM's output rounded first).
// Prints the fractions of elements each reading matches bit for bit. An
// H200's cuBLASLt 13 gave y once 0.959 (twice 0.630) and dx twice 0.998
// (once 0.737): the CPU twins and the emulated cuBLASLt compute those
// readings, and this holds them at 95% (the rest are ties that a fast tanh
// breaks). db, the sum of round(acc) gelu'(pre) over the rows, within one
// bf16 rounding of each summand.
TEST_F(CudaKernels, Bf16EpilogueRounding) {
  const int64_t M = 64, K = 96, N = 80;
  auto x = randomVec(M * K, 101), w = randomVec(N * K, 102, 0.2f),
       b = randomVec(N, 103), pre = randomVec(M * N, 104);
  Buffer xb = bf16s(x), wb = bf16s(w), bb = bf16s(b), preb = bf16s(pre);
  std::vector<double> acc(M * N), accB(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += double(bf16At(xb.host, m * K + k)) * bf16At(wb.host, n * K + k);
      acc[m * N + n] = s;
      accB[m * N + n] = s + bf16At(bb.host, n);
    }
  namespace LG = A::linear_gelu;
  namespace LD = A::linear_dgelu;
  auto fwd = runGpu(Id::linear_gelu, {xb, wb, bb, outBf16(M * N), outBf16(M * N)},
                    packInts(Id::linear_gelu, {{LG::M, M}, {LG::K, K}, {LG::N, N},
                                               {LG::in_out, 0}, {LG::has_bias, 1},
                                               {LG::dtype, A::kBF16}}));
  auto bwd = runGpu(Id::linear_dgelu,
                    {xb, wb, preb, outBf16(M * N), outBf16(N)},
                    packInts(Id::linear_dgelu, {{LD::M, M}, {LD::K, K}, {LD::N, N},
                                                {LD::in_out, 0}, {LD::has_bias, 1},
                                                {LD::dtype, A::kBF16}}));
  std::vector<double> yOnce(M * N), yTwice(M * N), dxOnce(M * N), dxTwice(M * N);
  std::vector<double> db(N, 0.0), dbScale(N, 0.0);
  for (int64_t e = 0; e < M * N; ++e) {
    yOnce[e] = gelu(float(accB[e]), true);
    yTwice[e] = gelu(roundToBf16(float(accB[e])), true);
    double g = geluGrad(bf16At(preb.host, e), true);
    dxOnce[e] = acc[e] * g;
    dxTwice[e] = double(roundToBf16(float(acc[e]))) * g;
    db[e % N] += dxTwice[e];
    dbScale[e % N] += std::fabs(dxTwice[e]);
  }
  double dbWorst = 0; // the worst error in bf16 roundings of the summands
  for (int64_t n = 0; n < N; ++n)
    dbWorst = std::max(dbWorst, std::fabs(bf16At(bwd[4], n) - db[n]) /
                                    (std::ldexp(dbScale[n], -8) +
                                     std::ldexp(std::fabs(db[n]), -8)));
  double yo = matching(fwd[4], yOnce), yt = matching(fwd[4], yTwice),
         dxo = matching(bwd[3], dxOnce), dxt = matching(bwd[3], dxTwice);
  std::printf("bf16 epilogues, elements matching bit for bit: y once %.3f "
              "twice %.3f; dx once %.3f twice %.3f; db within %.3f of a "
              "bf16 rounding per summand\n",
              yo, yt, dxo, dxt, dbWorst);
  EXPECT_GE(yo, 0.95);
  EXPECT_GE(dxt, 0.95);
  EXPECT_LE(dbWorst, 1.0);
}

// concat_part on bf16 writes its slot, bit for bit, and nothing else.
TEST_F(CudaPartialWrites, Bf16ConcatPart) {
  for (int64_t inner : {8, 3}) {
    int64_t outer = 5, n = 7, start = 2, size = 3;
    Buffer y = bf16s(randomVec(outer * n * inner, 53));
    y.output = true;
    comparePrefilled(Id::concat_part, shardc_k_concat_part,
                     {bf16s(randomVec(outer * size * inner, 54)), y},
                     packInts(Id::concat_part,
                              {{A::concat_part::outer, outer},
                               {A::concat_part::n_x, size},
                               {A::concat_part::n_y, n},
                               {A::concat_part::start, start},
                               {A::concat_part::inner, inner},
                               {A::concat_part::dtype, A::kBF16}}));
  }
}

} // namespace
} // namespace shardc::test
