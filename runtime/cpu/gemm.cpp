//===- gemm.cpp - the CPU backend's f32 GEMM through oneDNN's matmul ------===//
//
// One oneDNN matmul primitive per GEMM (transposes as strides, alpha as an
// output scale, beta as a sum post-op), created at the first call of its
// shape and cached: the program's shapes are static, so a step creates
// none. Its scratchpad is the calling thread's buffer (grown to the largest
// a primitive asks for, under 1 MiB at the models' shapes), so a call
// allocates nothing: dnnl_sgemm allocates up to 18 MiB a thread per call,
// which glibc then keeps, outside the memory plan. Reductions longer than
// kMaxChunkK are summed in chunks (the same association on every thread
// count).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/gemm.h"
#include "runtime/runtime.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace shardc::runtime::cpu {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

struct Key {
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  bool bf16 = false; ///< a and b bf16 (c f32)
  bool operator<(const Key &o) const {
    return std::tie(ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, bf16) <
           std::tie(o.ta, o.tb, o.M, o.N, o.K, o.lda, o.ldb, o.ldc, o.alpha,
                    o.beta, o.bf16);
  }
};

/// The longest reduction one matmul call does (sgemm chunks longer ones).
constexpr int64_t kMaxChunkK = 8192;

struct Gemm {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

dnnl::engine &engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

/// The matmul of `k`: a [M,K] (strides (lda, 1), or (1, lda) when ta) by
/// b [K,N] ((ldb, 1), or (1, ldb) when tb) into c [M,N] (ldc, 1).
Gemm create(const Key &k) {
  dt in = k.bf16 ? dt::bf16 : dt::f32;
  dnnl::memory::desc a({k.M, k.K}, in, k.ta ? dims{1, k.lda} : dims{k.lda, 1});
  dnnl::memory::desc b({k.K, k.N}, in, k.tb ? dims{1, k.ldb} : dims{k.ldb, 1});
  dnnl::memory::desc c({k.M, k.N}, dt::f32, dims{k.ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.alpha != 1.0f)
    attr.set_output_scales(0, {k.alpha});
  if (k.beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(k.beta);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine());
  return {pd, dnnl::matmul(pd)};
}

/// The cached matmul of `k`, created on first use (any thread).
const Gemm &lookup(const Key &k) {
  static std::mutex lock;
  static std::map<Key, std::unique_ptr<Gemm>> cache;
  std::lock_guard<std::mutex> guard(lock);
  std::unique_ptr<Gemm> &g = cache[k];
  if (!g) {
    try {
      g = std::make_unique<Gemm>(create(k));
    } catch (const dnnl::error &e) {
      cache.erase(k);
      fatal("sgemm %c%c %lld x %lld x %lld (lda %lld, ldb %lld, ldc %lld): "
            "oneDNN has no matmul for it: %s",
            k.ta ? 'T' : 'N', k.tb ? 'T' : 'N', (long long)k.M, (long long)k.N,
            (long long)k.K, (long long)k.lda, (long long)k.ldb,
            (long long)k.ldc, e.what());
    }
  }
  return *g;
}

/// The calling thread's scratchpad, at least `bytes`.
void *scratchpad(size_t bytes) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < bytes)
    buffer.resize(bytes);
  return buffer.data();
}

/// One matmul call: the primitive of its shape on the calling thread.
void run(const Key &k, const void *a, const void *b, float *c) {
  const Gemm &g = lookup(k);
  dnnl::engine &e = engine();
  // Inside an OpenMP parallel region (attention's heads) the primitive
  // runs on the calling thread alone.
  thread_local dnnl::stream stream(e);
  dnnl::memory::desc scratchDesc = g.pd.scratchpad_desc();
  dnnl::memory am(g.pd.src_desc(), e, const_cast<void *>(a));
  dnnl::memory bm(g.pd.weights_desc(), e, const_cast<void *>(b));
  dnnl::memory cm(g.pd.dst_desc(), e, c);
  dnnl::memory sm(scratchDesc, e, scratchpad(scratchDesc.get_size()));
  g.prim.execute(stream, {{DNNL_ARG_SRC, am},
                          {DNNL_ARG_WEIGHTS, bm},
                          {DNNL_ARG_DST, cm},
                          {DNNL_ARG_SCRATCHPAD, sm}});
  stream.wait();
}

/// sgemm's body for f32 (elementBytes 4) or bf16 (2) operands.
void gemmOf(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
            const char *a, int64_t lda, const char *b, int64_t ldb, float beta,
            float *c, int64_t ldc, int64_t elementBytes) {
  if (M <= 0 || N <= 0)
    return;
  if (K <= 0) { // c = beta c
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        c[m * ldc + n] = beta == 0.0f ? 0.0f : beta * c[m * ldc + n];
    return;
  }
  // A long K (the LM head's dh = dlogits w over the vocabulary) in chunks
  // summed into c: oneDNN's matmul streams all of B for each block of rows
  // otherwise (145 against 220 GFLOP/s at 333 x 384 x 50257).
  int64_t chunks = (K + kMaxChunkK - 1) / kMaxChunkK;
  int64_t chunkK = (K + chunks - 1) / chunks;
  for (int64_t k0 = 0; k0 < K; k0 += chunkK) {
    int64_t kk = std::min(chunkK, K - k0);
    run({ta, tb, M, N, kk, lda, ldb, ldc, alpha, k0 ? 1.0f : beta,
         elementBytes == 2},
        a + (ta ? k0 * lda : k0) * elementBytes,
        b + (tb ? k0 : k0 * ldb) * elementBytes, c);
  }
}

} // namespace

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
           float *c, int64_t ldc) {
  gemmOf(ta, tb, M, N, K, alpha, reinterpret_cast<const char *>(a), lda,
         reinterpret_cast<const char *>(b), ldb, beta, c, ldc, 4);
}

void gemmBf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
              float beta, float *c, int64_t ldc) {
  gemmOf(ta, tb, M, N, K, alpha, reinterpret_cast<const char *>(a), lda,
         reinterpret_cast<const char *>(b), ldb, beta, c, ldc, 2);
}

bool nativeBf16() {
  static const bool native = [] {
    // SHARDC_CPU_BF16_GEMM=widen: widen and sgemm anyway (to measure both).
    if (const char *how = std::getenv("SHARDC_CPU_BF16_GEMM"))
      if (std::string(how) == "widen")
        return false;
    std::string isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
    return isa.find("bf16") != std::string::npos ||
           isa.find("amx") != std::string::npos;
  }();
  return native;
}

std::string gemmLibrary() {
  const dnnl_version_t *v = dnnl_version();
  // "cpu_isa_avx512_core_bf16" -> "avx512_core_bf16"
  std::string isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
  if (isa.rfind("cpu_isa_", 0) == 0)
    isa = isa.substr(8);
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
         "." + std::to_string(v->patch) + " matmul (" + isa + ")";
}

} // namespace shardc::runtime::cpu
