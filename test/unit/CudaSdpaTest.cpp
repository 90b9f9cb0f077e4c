//===- CudaSdpaTest.cpp - cuDNN's fused attention against the CPU ---------===//
//
// The CUDA backend's sdpa and sdpa_grad through cuDNN (runtime/cuda/sdpa.cpp:
// cudnn-frontend graphs; on the emulated device its cudnn.cpp runs them)
// against the CPU's attention kernels on the same bf16 inputs: o and the
// gradients within a bf16 rounding, lse against an f64 log-sum-exp. Each
// case asserts cuDNN took it (SdpaPath::Cudnn), and that two backward runs
// give the same bits (the deterministic algorithm). On a real GPU,
// CudaSdpa.Rates prints TFLOP/s at GPT-2's and Llama-3-8B's shapes (CUDA
// events); it skips on the emulated device.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/sdpa.h"
#include "test/unit/CudaCompare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace shardc::test;
using namespace shardc::runtime::cuda;
using Bits = std::vector<uint16_t>;

/// A device copy of `host` (n elements of E), freed by the test's end.
struct Device {
  std::vector<void *> owned;
  ~Device() {
    for (void *p : owned)
      cudaFree(p);
  }
  template <typename E> E *copy(const std::vector<E> &host) {
    E *d = alloc<E>(host.size());
    CUDA_CHECK(cudaMemcpy(d, host.data(), host.size() * sizeof(E),
                          cudaMemcpyHostToDevice));
    return d;
  }
  template <typename E> E *alloc(size_t n) {
    void *d = nullptr;
    CUDA_CHECK(cudaMalloc(&d, std::max<size_t>(1, n * sizeof(E))));
    CUDA_CHECK(cudaMemset(d, 0xff, std::max<size_t>(1, n * sizeof(E))));
    owned.push_back(d);
    return static_cast<E *>(d);
  }
  template <typename E> std::vector<E> read(const E *d, size_t n) {
    std::vector<E> host(n);
    CUDA_CHECK(cudaMemcpy(host.data(), d, n * sizeof(E),
                          cudaMemcpyDeviceToHost));
    return host;
  }
};

Bits toBf16(const std::vector<float> &v) {
  Bits b(v.size());
  for (size_t e = 0; e < v.size(); ++e)
    b[e] = floatToBf16(v[e]);
  return b;
}

std::string describe(const SdpaShape &s) {
  return "B=" + std::to_string(s.B) + " H=" + std::to_string(s.H) +
         " G=" + std::to_string(s.G) + " T=" + std::to_string(s.T) +
         " S=" + std::to_string(s.S) + " D=" + std::to_string(s.D) +
         (s.causal ? " causal" : "");
}

/// The ints of attention / attention_grad (and sdpa's prefix) for `s`.
std::vector<int64_t> attentionInts(A::KernelId id, const SdpaShape &s) {
  namespace K = A::attention;
  return packInts(id, {{K::B, s.B},
                       {K::H, s.H},
                       {K::G, s.G},
                       {K::T, s.T},
                       {K::S, s.S},
                       {K::D, s.D},
                       {K::causal, s.causal ? 1 : 0},
                       {K::dtype, A::kBF16}});
}

/// Every element of `got` within `tol` (1 + |want|) of `want`.
void expectClose(const Bits &got, const Bits &want, double tol,
                 const char *what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t e = 0; e < got.size(); ++e) {
    double g = bf16ToFloat(got[e]), w = bf16ToFloat(want[e]);
    ASSERT_LE(std::fabs(g - w), tol * (1.0 + std::fabs(w)))
        << what << " element " << e << ": cuDNN " << g << ", cpu " << w;
  }
}

/// log sum_s exp(scale q.k_s) of query row (b, h, t), in f64.
double logSumExp(const SdpaShape &s, const Bits &q, const Bits &k, int64_t b,
                 int64_t h, int64_t t) {
  int64_t g = h / (s.H / s.G), valid = s.causal ? std::min(t + 1, s.S) : s.S;
  std::vector<double> row(static_cast<size_t>(valid));
  double mx = -INFINITY;
  for (int64_t j = 0; j < valid; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < s.D; ++d)
      dot += double(bf16ToFloat(q[((b * s.H + h) * s.T + t) * s.D + d])) *
             bf16ToFloat(k[((b * s.G + g) * s.S + j) * s.D + d]);
    row[size_t(j)] = dot * s.scale;
    mx = std::max(mx, row[size_t(j)]);
  }
  double sum = 0;
  for (double x : row)
    sum += std::exp(x - mx);
  return mx + std::log(sum);
}

/// The CPU's attention and attention_grad of `s` on bf16 q, k, v and dO
/// (dense): o, dq, dk and dv.
void cpuAttention(const SdpaShape &s, Bits &q, Bits &k, Bits &v, Bits &dO,
                  Bits &o, Bits &dq, Bits &dk, Bits &dv) {
  std::vector<double> fl = {double(s.scale)};
  void *b[] = {q.data(), k.data(), v.data(), o.data()};
  std::vector<int64_t> ints = attentionInts(A::KernelId::attention, s);
  shardc_k_attention(nullptr, b, ints.data(), fl.data(), 0);
  void *g[] = {q.data(),  k.data(),  v.data(), dO.data(),
               dq.data(), dk.data(), dv.data()};
  ints = attentionInts(A::KernelId::attention_grad, s);
  shardc_k_attention_grad(nullptr, g, ints.data(), fl.data(), 0);
}

class CudaSdpa : public CudaKernels {
protected:
  /// Forward and backward of `s` through cuDNN against the CPU.
  void check(SdpaShape s, unsigned seed = 3) {
    s.scale = float(1.0 / std::sqrt(double(s.D)));
    SCOPED_TRACE(describe(s));
    size_t qn = size_t(s.B * s.H * s.T * s.D), kn = size_t(s.B * s.G * s.S * s.D);
    size_t rows = size_t(s.B * s.H * s.T);
    Bits q = toBf16(randomVec(qn, seed)), k = toBf16(randomVec(kn, seed + 1)),
         v = toBf16(randomVec(kn, seed + 2)),
         dO = toBf16(randomVec(qn, seed + 3));
    // CPU: attention and attention_grad on the same bf16 data.
    Bits o(qn), dq(qn), dk(kn), dv(kn);
    cpuAttention(s, q, k, v, dO, o, dq, dk, dv);
    Device dev;
    auto *dQ = dev.copy(q), *dK = dev.copy(k), *dV = dev.copy(v),
         *ddO = dev.copy(dO);
    auto *gO = dev.alloc<uint16_t>(qn), *gdQ = dev.alloc<uint16_t>(qn),
         *gdK = dev.alloc<uint16_t>(kn), *gdV = dev.alloc<uint16_t>(kn);
    auto *lse = dev.alloc<float>(rows);
    int64_t wsF = A::sdpaWorkspaceBytes(s.B, s.H, s.G, s.T, s.S, s.D, false),
            wsB = A::sdpaWorkspaceBytes(s.B, s.H, s.G, s.T, s.S, s.D, true);
    void *work = dev.alloc<char>(size_t(std::max(wsF, wsB)));
    ASSERT_EQ(sdpaForward(ctx, s, dQ, dK, dV, gO, lse, work, wsF, 0),
              SdpaPath::Cudnn);
    ASSERT_EQ(sdpaBackward(ctx, s, dQ, dK, dV, gO, lse, ddO, gdQ, gdK, gdV,
                           work, wsB, 0),
              SdpaPath::Cudnn);
    CUDA_CHECK(cudaDeviceSynchronize());
    // o within a bf16 rounding or two of the CPU's; lse within f32 noise.
    expectClose(dev.read(gO, qn), o, 8e-3, "o");
    std::vector<float> gotLse = dev.read(lse, rows);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t t = 0; t < s.T; t += std::max<int64_t>(1, s.T / 7)) {
          double want = logSumExp(s, q, k, b, h, t);
          ASSERT_NEAR(gotLse[size_t((b * s.H + h) * s.T + t)], want,
                      1e-4 * (1 + std::fabs(want)))
              << "lse row " << (b * s.H + h) * s.T + t;
        }
    // Gradients: cuDNN reads its own o, which may differ from the CPU's
    // by a rounding, so a little more slack than o's.
    Bits gotDq = dev.read(gdQ, qn), gotDk = dev.read(gdK, kn),
         gotDv = dev.read(gdV, kn);
    expectClose(gotDq, dq, 1.6e-2, "dq");
    expectClose(gotDk, dk, 1.6e-2, "dk");
    expectClose(gotDv, dv, 1.6e-2, "dv");
    // Deterministic: the backward again gives the same bits.
    ASSERT_EQ(sdpaBackward(ctx, s, dQ, dK, dV, gO, lse, ddO, gdQ, gdK, gdV,
                           work, wsB, 0),
              SdpaPath::Cudnn);
    CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(dev.read(gdQ, qn), gotDq);
    EXPECT_EQ(dev.read(gdK, kn), gotDk);
    EXPECT_EQ(dev.read(gdV, kn), gotDv);
  }
};

// The kernels of the ABI, sdpa and sdpa_grad, from the CUDA kernel table
// against the CPU's (attention's o and its lse; attention_grad's
// gradients): the forward, then the backward on the CPU's o and lse.
TEST_F(CudaSdpa, KernelEntries) {
  SdpaShape s{1, 4, 2, 23, 23, 64, true, 0.125f};
  size_t qn = size_t(s.B * s.H * s.T * s.D), kn = size_t(s.B * s.G * s.S * s.D),
         rows = size_t(s.B * s.H * s.T);
  std::vector<float> q = randomVec(qn, 7), k = randomVec(kn, 8),
                     v = randomVec(kn, 9), dO = randomVec(qn, 10);
  auto ints = [&](A::KernelId id, bool grad) {
    // sdpa's ints are attention's with ws_bytes before the layout (dense).
    std::vector<int64_t> i = attentionInts(A::KernelId::attention, s);
    i.insert(i.begin() + A::sdpa::ws_bytes,
             A::sdpaWorkspaceBytes(s.B, s.H, s.G, s.T, s.S, s.D, grad));
    if (grad)
      i.push_back(1); // deterministic
    EXPECT_EQ(int64_t(i.size()), A::kernelInfo(id).numInts);
    return i;
  };
  std::vector<int64_t> fi = ints(A::KernelId::sdpa, false),
                       gi = ints(A::KernelId::sdpa_grad, true);
  std::vector<float> wsF(size_t(fi[A::sdpa::ws_bytes] / 4)),
      wsB(size_t(gi[A::sdpa_grad::ws_bytes] / 4));
  std::vector<double> fl = {double(s.scale)};
  compare(A::KernelId::sdpa, shardc_k_sdpa,
          {bf16s(q), bf16s(k), bf16s(v), outBf16(qn), out(rows), floats(wsF)},
          fi, fl, 8e-3);
  // The CPU's o and lse feed the backward on both.
  Bits qb = toBf16(q), kb = toBf16(k), vb = toBf16(v), o(qn);
  std::vector<float> lse(rows);
  void *b[] = {qb.data(), kb.data(), vb.data(), o.data(), lse.data(),
               wsF.data()};
  shardc_k_sdpa(nullptr, b, fi.data(), fl.data(), 0);
  std::vector<float> of(qn);
  for (size_t e = 0; e < qn; ++e)
    of[e] = bf16ToFloat(o[e]);
  compare(A::KernelId::sdpa_grad, shardc_k_sdpa_grad,
          {bf16s(q), bf16s(k), bf16s(v), bf16s(of), floats(lse), bf16s(dO),
           outBf16(qn), outBf16(kn), outBf16(kn), floats(wsB)},
          gi, fl, 1.6e-2);
  // The non-deterministic backward (deterministic 0), in its smaller
  // workspace: the same results within the same tolerance.
  std::vector<int64_t> ni = gi;
  ni[A::sdpa_grad::deterministic] = 0;
  ni[A::sdpa_grad::ws_bytes] = A::sdpaWorkspaceBytes(
      s.B, s.H, s.G, s.T, s.S, s.D, true, /*deterministic=*/false);
  EXPECT_LT(ni[A::sdpa_grad::ws_bytes], gi[A::sdpa_grad::ws_bytes]);
  std::vector<float> wsN(size_t(ni[A::sdpa_grad::ws_bytes] / 4));
  compare(A::KernelId::sdpa_grad, shardc_k_sdpa_grad,
          {bf16s(q), bf16s(k), bf16s(v), bf16s(of), floats(lse), bf16s(dO),
           outBf16(qn), outBf16(kn), outBf16(kn), floats(wsN)},
          ni, fl, 1.6e-2);
}

// Layout Rows (rt-attention-layout), through the kernel table: q, k and v
// read in place from one fused QKV buffer [B*T, (H+2G)*D] (views at
// columns 0, H*D and (H+G)*D), o and dO as rows [B*T, H*D], dq, dk and dv
// written into the columns of one gradient [B*T, (H+2G)*D] -- against the
// CPU's dense kernels. `fused`: sdpa and sdpa_grad (cuDNN's graphs with
// strides); else attention and attention_grad (the f32-math kernels, the
// path cuDNN's declines take, reading and writing by strides too).
class CudaSdpaRows : public CudaSdpa {
protected:
  void rows(bool fused) {
    SdpaShape s{2, 4, 2, 23, 23, 64, true, 0.125f};
    const int64_t HD = s.H * s.D, W = (s.H + 2 * s.G) * s.D, BT = s.B * s.T;
    size_t qn = size_t(s.B * s.H * s.T * s.D), kn = size_t(s.B * s.G * s.S * s.D);
    Bits q = toBf16(randomVec(qn, 41)), k = toBf16(randomVec(kn, 42)),
         v = toBf16(randomVec(kn, 43)), dO = toBf16(randomVec(qn, 44));
    // The CPU's dense results.
    Bits o(qn), dq(qn), dk(kn), dv(kn);
    cpuAttention(s, q, k, v, dO, o, dq, dk, dv);
    // Packed: element (b, h, t, d) of an operand at column col of rows ld.
    auto at = [&](int64_t b, int64_t h, int64_t t, int64_t d, int64_t col,
                  int64_t ld) { return size_t((b * s.T + t) * ld + col + h * s.D + d); };
    auto dense = [&](int64_t b, int64_t h, int64_t t, int64_t d,
                     int64_t heads) { return size_t(((b * heads + h) * s.T + t) * s.D + d); };
    Bits qkv(size_t(BT * W)), dOr(qn);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t t = 0; t < s.T; ++t)
        for (int64_t d = 0; d < s.D; ++d) {
          for (int64_t h = 0; h < s.H; ++h) {
            qkv[at(b, h, t, d, 0, W)] = q[dense(b, h, t, d, s.H)];
            dOr[at(b, h, t, d, 0, HD)] = dO[dense(b, h, t, d, s.H)];
          }
          for (int64_t g = 0; g < s.G; ++g) {
            qkv[at(b, g, t, d, HD, W)] = k[dense(b, g, t, d, s.G)];
            qkv[at(b, g, t, d, HD + s.G * s.D, W)] = v[dense(b, g, t, d, s.G)];
          }
        }
    Device dev;
    uint16_t *dQKV = dev.copy(qkv), *ddO = dev.copy(dOr);
    uint16_t *gO = dev.alloc<uint16_t>(qn), *gdQKV = dev.alloc<uint16_t>(qkv.size());
    float *lse = dev.alloc<float>(size_t(s.B * s.H * s.T));
    int64_t wsF = A::sdpaWorkspaceBytes(s.B, s.H, s.G, s.T, s.S, s.D, false),
            wsB = A::sdpaWorkspaceBytes(s.B, s.H, s.G, s.T, s.S, s.D, true);
    void *work = dev.alloc<char>(size_t(std::max(wsF, wsB)));
    void *qv = dQKV, *kv = dQKV + HD, *vv = dQKV + HD + s.G * s.D;
    void *dq_ = gdQKV, *dk_ = gdQKV + HD, *dv_ = gdQKV + HD + s.G * s.D;
    auto ints = [&](A::KernelId id, int64_t ws) {
      std::vector<int64_t> i = attentionInts(A::KernelId::attention, s);
      namespace K = A::attention;
      i[K::layout] = A::kAttentionRows;
      i[K::ld_q] = i[K::ld_k] = i[K::ld_v] = W;
      i[K::ld_o] = HD;
      if (id == A::KernelId::sdpa || id == A::KernelId::sdpa_grad)
        i.insert(i.begin() + A::sdpa::ws_bytes, ws);
      if (id == A::KernelId::sdpa_grad)
        i.push_back(1); // deterministic
      EXPECT_EQ(int64_t(i.size()), A::kernelInfo(id).numInts);
      return i;
    };
    std::vector<double> fl = {double(s.scale)};
    auto launch = [&](A::KernelId id, std::vector<void *> b, int64_t ws) {
      std::vector<int64_t> i = ints(id, ws);
      cuda::kernelTable()[int64_t(id)](&ctx, b.data(), i.data(), fl.data(),
                                       A::kComputeStream);
    };
    if (fused) {
      launch(A::KernelId::sdpa, {qv, kv, vv, gO, lse, work}, wsF);
      launch(A::KernelId::sdpa_grad,
             {qv, kv, vv, gO, lse, ddO, dq_, dk_, dv_, work}, wsB);
    } else {
      launch(A::KernelId::attention, {qv, kv, vv, gO}, 0);
      launch(A::KernelId::attention_grad, {qv, kv, vv, ddO, dq_, dk_, dv_}, 0);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    Bits gotO = dev.read(gO, qn), gotD = dev.read(gdQKV, qkv.size());
    // Unpacked, against the CPU's dense results.
    Bits uo(qn), udq(qn), udk(kn), udv(kn);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t t = 0; t < s.T; ++t)
        for (int64_t d = 0; d < s.D; ++d) {
          for (int64_t h = 0; h < s.H; ++h) {
            uo[dense(b, h, t, d, s.H)] = gotO[at(b, h, t, d, 0, HD)];
            udq[dense(b, h, t, d, s.H)] = gotD[at(b, h, t, d, 0, W)];
          }
          for (int64_t g = 0; g < s.G; ++g) {
            udk[dense(b, g, t, d, s.G)] = gotD[at(b, g, t, d, HD, W)];
            udv[dense(b, g, t, d, s.G)] =
                gotD[at(b, g, t, d, HD + s.G * s.D, W)];
          }
        }
    expectClose(uo, o, 8e-3, "o");
    expectClose(udq, dq, 1.6e-2, "dq");
    expectClose(udk, dk, 1.6e-2, "dk");
    expectClose(udv, dv, 1.6e-2, "dv");
  }
};

TEST_F(CudaSdpaRows, Fused) { rows(true); }
TEST_F(CudaSdpaRows, Kernels) { rows(false); }

// {B, H, G, T, S, D, causal}
TEST_F(CudaSdpa, CausalAndNot) {
  check({2, 4, 4, 37, 37, 64, true});
  check({2, 4, 4, 37, 37, 64, false});
}
// Grouped-query heads (8 query heads on 2 kv heads) and multi-query (1).
TEST_F(CudaSdpa, GroupedQueryHeads) { check({1, 8, 2, 45, 45, 64, true}); }
TEST_F(CudaSdpa, MultiQuery) { check({1, 4, 1, 33, 33, 64, true}); }
// Head dimensions 128 and 256.
TEST_F(CudaSdpa, HeadDims) {
  check({1, 2, 2, 29, 29, 128, true});
  check({1, 2, 1, 21, 21, 256, false});
}
// Keys of another length than the queries.
TEST_F(CudaSdpa, KeysNotQueries) { check({1, 4, 2, 19, 45, 64, false}); }

#ifndef SHARDC_CUDA_EMULATION
/// TFLOP/s of forward and backward at `s` (the FLOPs of passes/rt/RtFlops.h:
/// 4 and 10 per kept pair and head dimension), median of 10 after 3 warm.
void rate(cuda::Context &ctx, SdpaShape s, const char *name) {
  s.scale = float(1.0 / std::sqrt(double(s.D)));
  size_t qn = size_t(s.B * s.H * s.T * s.D), kn = size_t(s.B * s.G * s.S * s.D);
  Device dev;
  Bits q = toBf16(randomVec(qn, 1)), k = toBf16(randomVec(kn, 2));
  auto *dQ = dev.copy(q), *dK = dev.copy(k), *dV = dev.copy(k),
       *ddO = dev.copy(q);
  auto *o = dev.alloc<uint16_t>(qn), *gq = dev.alloc<uint16_t>(qn),
       *gk = dev.alloc<uint16_t>(kn), *gv = dev.alloc<uint16_t>(kn);
  auto *lse = dev.alloc<float>(size_t(s.B * s.H * s.T));
  int64_t wsF = A::sdpaWorkspaceBytes(s.B, s.H, s.G, s.T, s.S, s.D, false),
          wsB = A::sdpaWorkspaceBytes(s.B, s.H, s.G, s.T, s.S, s.D, true);
  void *work = dev.alloc<char>(size_t(std::max(wsF, wsB)));
  double pairs = s.causal ? double(s.T) * double(s.T + 1) / 2
                          : double(s.T) * double(s.S);
  double flops = double(s.B * s.H * s.D) * pairs;
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  auto time = [&](auto fn) {
    std::vector<float> ms;
    for (int r = 0; r < 13; ++r) {
      CUDA_CHECK(cudaEventRecord(a, ctx.stream(0)));
      fn();
      CUDA_CHECK(cudaEventRecord(b, ctx.stream(0)));
      CUDA_CHECK(cudaEventSynchronize(b));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
      if (r >= 3)
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return double(ms[ms.size() / 2]);
  };
  double f = time([&] {
    ASSERT_EQ(sdpaForward(ctx, s, dQ, dK, dV, o, lse, work, wsF, 0),
              SdpaPath::Cudnn);
  });
  double g = time([&] {
    ASSERT_EQ(sdpaBackward(ctx, s, dQ, dK, dV, o, lse, ddO, gq, gk, gv, work,
                           wsB, 0),
              SdpaPath::Cudnn);
  });
  std::printf("sdpa rate %s %s: forward %.3f ms %.1f TFLOP/s, backward %.3f "
              "ms %.1f TFLOP/s (cuDNN %lld)\n",
              name, describe(s).c_str(), f, 4 * flops / f / 1e9, g,
              10 * flops / g / 1e9, (long long)cudnnVersion());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

TEST_F(CudaSdpa, Rates) {
  rate(ctx, {4, 12, 12, 1024, 1024, 64, true, 0}, "gpt2");
  rate(ctx, {16, 12, 12, 1024, 1024, 64, true, 0}, "gpt2-16");
  rate(ctx, {1, 32, 8, 8192, 8192, 128, true, 0}, "llama3-8b");
}
#endif

} // namespace
