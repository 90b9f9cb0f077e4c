//===- kernels.cpp - CPU backend kernels (oneDNN for GEMMs) ---------------===//
//
// Reductions accumulate in double so that results track PyTorch's f32
// numerics closely; GEMMs go through runtime/cpu/gemm.h.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels.h"
#include "runtime/cpu/fastmath.h"
#include "runtime/cpu/kernel_util.h"
#include "runtime/cpu/typed.h"
#include "runtime/runtime.h"

#include "runtime/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace A = shardc::abi;
using shardc::runtime::bf16ToFloat;
using shardc::runtime::expSum;
using shardc::runtime::fastExp;
using shardc::runtime::fastSigmoid;
using shardc::runtime::fastTanh;
using shardc::runtime::fatal;
using shardc::runtime::floatToBf16;
using shardc::runtime::rowMax;

using shardc::runtime::cpu::AsF32;
using shardc::runtime::cpu::amaxOf;
using shardc::runtime::cpu::AttentionLayout;
using shardc::runtime::cpu::HeadBlock;
using shardc::runtime::cpu::DenseAttention;
using shardc::runtime::cpu::BF16;
using shardc::runtime::cpu::gemmBf16;
using shardc::runtime::cpu::nativeBf16;
using shardc::runtime::cpu::broadcastBinary;
using shardc::runtime::cpu::broadcastExtent;
using shardc::runtime::cpu::columnSums;
using shardc::runtime::cpu::F;
using shardc::runtime::cpu::I32;
using shardc::runtime::cpu::kParallelMin;
using shardc::runtime::cpu::sgemm;

namespace {

/// y = x @ op(w) for row-major x [M,K]; w [N,K] (transposed) or [K,N].
void gemm(const float *x, const float *w, float *y, int64_t M, int64_t K,
          int64_t N, bool inOut, float beta) {
  sgemm(false, !inOut, M, N, K, 1.0f, x, K, w, inOut ? N : K, beta, y, N);
}

/// y[M,N]'s rows = bias[N]: where a GEMM with beta 1 adds the bias.
void biasRows(const float *bias, float *y, int64_t M, int64_t N) {
#pragma omp parallel for schedule(static) if (M * N >= kParallelMin)
  for (int64_t m = 0; m < M; ++m)
    std::memcpy(y + m * N, bias, N * sizeof(float));
}

/// y[M,N] = x[M,K] @ op(w) + bias[N] (bias may be null): the linear
/// kernel's work, without counting a launch (the fused kernels call it).
void linearInto(const float *x, const float *w, const float *bias, float *y,
                int64_t M, int64_t K, int64_t N, bool inOut) {
  if (bias)
    biasRows(bias, y, M, N);
  gemm(x, w, y, M, K, N, inOut, bias ? 1.0f : 0.0f);
}

/// One row of layer_norm: y = (x - mean) / sqrt(var + eps) * w + bias?, the
/// moments in double.
inline void layerNormRow(const float *row, const float *w, const float *bias,
                         float *y, int64_t C, float eps) {
  auto [mean, var] = shardc::runtime::cpu::rowMoments(row, C);
  float rstd = float(1.0 / std::sqrt(var + eps));
  if (bias) {
    for (int64_t c = 0; c < C; ++c)
      y[c] = float(row[c] - mean) * rstd * w[c] + bias[c];
  } else {
    for (int64_t c = 0; c < C; ++c)
      y[c] = float(row[c] - mean) * rstd * w[c];
  }
}

/// One row of rms_norm: y = w * (x / sqrt(mean(x^2) + eps)).
inline void rmsNormRow(const float *row, const float *w, float *y, int64_t C,
                       float eps) {
  double ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t c = 0; c < C; ++c)
    ss += double(row[c]) * row[c];
  float rstd = float(1.0 / std::sqrt(ss / C + eps));
  for (int64_t c = 0; c < C; ++c)
    y[c] = w[c] * (row[c] * rstd);
}

} // namespace

// ids[N] (int32), table[V,C] -> y[N,C]: y[n] = table[ids[n]]
static void embeddingF32(void *ctx, void **b, const int64_t *i, const double *f,
                         int64_t stream) {
  int64_t N = i[A::embedding::N], V = i[A::embedding::V],
          C = i[A::embedding::C];
  const int32_t *ids = I32(b[0]);
  const float *table = F(b[1]);
  float *y = F(b[2]);
  for (int64_t n = 0; n < N; ++n) {
    int64_t id = ids[n];
    if (id < 0 || id >= V)
      fatal("embedding: id %lld at position %lld is outside the table of %lld "
            "rows",
            (long long)id, (long long)n, (long long)V);
    std::memcpy(y + n * C, table + id * C, C * sizeof(float));
  }
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(embedding) {
  namespace K = A::embedding;
  int64_t N = i[K::N], V = i[K::V], C = i[K::C];
  AsF32 t(b, 3, i[K::dtype], "embedding");
  t.in(1, V * C);
  t.out(2, N * C);
  embeddingF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// x[M,K] @ w[N,K]^T (w[K,N] with in_out) + b[N]? -> y[M,N]
static void linearF32(void *ctx, void **b, const int64_t *i, const double *f,
                      int64_t stream) {
  int64_t M = i[A::linear::M], K = i[A::linear::K], N = i[A::linear::N];
  bool inOut = i[A::linear::in_out], hasBias = i[A::linear::has_bias];
  linearInto(F(b[0]), F(b[1]), hasBias ? F(b[2]) : nullptr,
             F(b[hasBias ? 3 : 2]), M, K, N, inOut);
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(linear) {
  namespace K = A::linear;
  int64_t M = i[K::M], Kd = i[K::K], N = i[K::N];
  bool hasBias = i[K::has_bias];
  AsF32 t(b, hasBias ? 4 : 3, i[K::dtype], "linear");
  int64_t out = hasBias ? 3 : 2;
  if (hasBias)
    t.in(2, N);
  t.out(out, M * N);
  if (t.bf16() && nativeBf16()) {
    // x and w stay bf16 for the cores' bf16 GEMM; y in f32, rounded once.
    bool inOut = i[K::in_out];
    float *y = F(t.buffers()[out]);
    if (hasBias)
      biasRows(F(t.buffers()[2]), y, M, N);
    gemmBf16(false, !inOut, M, N, Kd, 1.0f, BF16(b[0]), Kd, BF16(b[1]),
             inOut ? N : Kd, hasBias ? 1.0f : 0.0f, y, N);
  } else {
    t.in(0, M * Kd);
    t.in(1, N * Kd);
    linearF32(ctx, t.buffers(), i, f, stream);
  }
  t.finish();
  launched(ctx, stream);
}

// x[M,K], w, b[N]? -> pre[M,N] = linear(x, w, b), y[M,N] = gelu_tanh(pre):
// the GEMM, then one vectorized pass over pre
static void linearGeluF32(void **b, const int64_t *i) {
  namespace L = A::linear_gelu;
  int64_t M = i[L::M], K = i[L::K], N = i[L::N], n = M * N;
  bool hasBias = i[L::has_bias];
  float *pre = F(b[hasBias ? 3 : 2]);
  float *y = F(b[hasBias ? 4 : 3]);
  linearInto(F(b[0]), F(b[1]), hasBias ? F(b[2]) : nullptr, pre, M, K, N,
             i[L::in_out]);
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t k = 0; k < n; ++k)
    y[k] = shardc::runtime::gelu(pre[k], /*tanhForm=*/true);
}

// On f32 or bf16: pre and y rounded once each, y from the f32 pre, as
// cuBLASLt's GELU_AUX epilogue computes it.
SHARDC_KERNEL(linear_gelu) {
  namespace L = A::linear_gelu;
  int64_t M = i[L::M], K = i[L::K], N = i[L::N];
  bool hasBias = i[L::has_bias];
  int out = hasBias ? 3 : 2;
  AsF32 t(b, out + 2, i[L::dtype], "linear_gelu");
  t.in(0, M * K).in(1, N * K).out(out, M * N).out(out + 1, M * N);
  if (hasBias)
    t.in(2, N);
  linearGeluF32(t.buffers(), i);
  t.finish();
  launched(ctx, stream);
}

// dy[M,K], w, pre[M,N] -> dx[M,N] = linear(dy, w) gelu_tanh'(pre), db[N]? =
// the sum of dx's rows (in double, in row order, as sum_to); with
// roundProduct, the product rounded to bf16 before the gelu_tanh'
static void linearDgeluF32(void **b, const int64_t *i, bool roundProduct) {
  namespace L = A::linear_dgelu;
  int64_t M = i[L::M], K = i[L::K], N = i[L::N], n = M * N;
  bool hasBias = i[L::has_bias];
  const float *pre = F(b[2]);
  float *dx = F(b[3]);
  linearInto(F(b[0]), F(b[1]), nullptr, dx, M, K, N, i[L::in_out]);
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t k = 0; k < n; ++k) {
    float product = roundProduct ? shardc::runtime::roundToBf16(dx[k]) : dx[k];
    dx[k] = product * shardc::runtime::geluGrad(pre[k], /*tanhForm=*/true);
  }
  if (hasBias)
    columnSums(dx, M, N, F(b[4]));
}

// On f32 or bf16: dx and db rounded once, db summed from the f32 dx, as
// cuBLASLt's DGELU_BGRAD epilogue computes them; on bf16 the GEMM's product
// is rounded to bf16 before the gelu_tanh', as cuBLASLt's bf16 DGELU does
// on Hopper (and PyTorch's unfused step).
SHARDC_KERNEL(linear_dgelu) {
  namespace L = A::linear_dgelu;
  int64_t M = i[L::M], K = i[L::K], N = i[L::N];
  bool hasBias = i[L::has_bias];
  AsF32 t(b, hasBias ? 5 : 4, i[L::dtype], "linear_dgelu");
  t.in(0, M * K).in(1, N * K).in(2, M * N).out(3, M * N);
  if (hasBias)
    t.out(4, N);
  linearDgeluF32(t.buffers(), i, /*roundProduct=*/t.bf16());
  t.finish();
  launched(ctx, stream);
}

// a, b broadcast to y[dims] (element strides astr, bstr) -> y = a + b
static void addF32(void *ctx, void **b, const int64_t *i, const double *f,
                   int64_t stream) {
  broadcastBinary<A::KernelId::add>(b, i,
                                    [](float x, float y) { return x + y; });
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(add) {
  namespace K = A::add;
  int64_t R = i[K::R], numel = 1;
  const int64_t *dims = i + K::kNumInts;
  for (int64_t d = 0; d < R; ++d)
    numel *= dims[d];
  AsF32 t(b, 3, i[K::dtype], "add");
  t.in(0, broadcastExtent(R, dims, dims + R));
  t.in(1, broadcastExtent(R, dims, dims + 2 * R));
  t.out(2, numel);
  addF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// a, b broadcast to y[dims] -> y = a * b
static void mulF32(void *ctx, void **b, const int64_t *i, const double *f,
                   int64_t stream) {
  broadcastBinary<A::KernelId::mul>(b, i,
                                    [](float x, float y) { return x * y; });
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(mul) {
  namespace K = A::mul;
  int64_t R = i[K::R], numel = 1;
  const int64_t *dims = i + K::kNumInts;
  for (int64_t d = 0; d < R; ++d)
    numel *= dims[d];
  AsF32 t(b, 3, i[K::dtype], "mul");
  t.in(0, broadcastExtent(R, dims, dims + R));
  t.in(1, broadcastExtent(R, dims, dims + 2 * R));
  t.out(2, numel);
  mulF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// x[M,C], w[C], b[C]? -> y[M,C] = (x - mean) / sqrt(var + eps) * w + b
static void layer_normF32(void *ctx, void **b, const int64_t *i,
                          const double *f, int64_t stream) {
  int64_t M = i[A::layer_norm::M], C = i[A::layer_norm::C];
  bool hasBias = i[A::layer_norm::has_bias];
  float eps = float(f[A::layer_norm::f::eps]);
  const float *x = F(b[0]), *w = F(b[1]);
  const float *bias = hasBias ? F(b[2]) : nullptr;
  float *y = F(b[hasBias ? 3 : 2]);
#pragma omp parallel for schedule(static) if (M * C >= kParallelMin)
  for (int64_t m = 0; m < M; ++m)
    layerNormRow(x + m * C, w, bias, y + m * C, C, eps);
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(layer_norm) {
  namespace K = A::layer_norm;
  int64_t M = i[K::M], C = i[K::C];
  bool hasBias = i[K::has_bias];
  AsF32 t(b, hasBias ? 4 : 3, i[K::dtype], "layer_norm");
  t.in(0, M * C);
  t.in(1, C);
  if (hasBias)
    t.in(2, C);
  t.out(hasBias ? 3 : 2, M * C);
  layer_normF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// x[M,C], w[C] -> y[M,C] = w * x / sqrt(mean(x^2) + eps)
static void rms_normF32(void *ctx, void **b, const int64_t *i, const double *f,
                        int64_t stream) {
  int64_t M = i[A::rms_norm::M], C = i[A::rms_norm::C];
  float eps = float(f[A::rms_norm::f::eps]);
  const float *x = F(b[0]), *w = F(b[1]);
  float *y = F(b[2]);
#pragma omp parallel for schedule(static) if (M * C >= kParallelMin)
  for (int64_t m = 0; m < M; ++m)
    rmsNormRow(x + m * C, w, y + m * C, C, eps);
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(rms_norm) {
  namespace K = A::rms_norm;
  int64_t M = i[K::M], C = i[K::C];
  AsF32 t(b, 3, i[K::dtype], "rms_norm");
  t.in(0, M * C);
  t.in(1, C);
  t.out(2, M * C);
  rms_normF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// a[M,C], b[M,C], w[C], bias[C]? -> s[M,C] = a + b, y[M,C] = the layer norm
// of s: one pass over each row
// (on bf16: f32 math on widened inputs, s rounded before the norm reads it)
SHARDC_KERNEL(add_layer_norm) {
  namespace K = A::add_layer_norm;
  int64_t M = i[K::M], C = i[K::C];
  bool hasBias = i[K::has_bias];
  float eps = float(f[K::f::eps]);
  int64_t nb = hasBias ? 6 : 5;
  AsF32 t(b, nb, i[K::dtype], "add_layer_norm");
  t.in(0, M * C).in(1, M * C).in(2, C);
  if (hasBias)
    t.in(3, C);
  t.out(nb - 2, M * C).out(nb - 1, M * C);
  void **tb = t.buffers();
  const float *a = F(tb[0]), *c = F(tb[1]), *w = F(tb[2]);
  const float *bias = hasBias ? F(tb[3]) : nullptr;
  float *s = F(tb[nb - 2]), *y = F(tb[nb - 1]);
  bool round = t.bf16();
#pragma omp parallel for schedule(static) if (M * C >= kParallelMin)
  for (int64_t m = 0; m < M; ++m) {
    float *sr = s + m * C;
    for (int64_t k = 0; k < C; ++k) {
      float v = a[m * C + k] + c[m * C + k];
      sr[k] = round ? bf16ToFloat(floatToBf16(v)) : v;
    }
    layerNormRow(sr, w, bias, y + m * C, C, eps);
  }
  t.finish();
  launched(ctx, stream);
}

// a[M,C], b[M,C] -> s = a + b, then the RMS norm of s
SHARDC_KERNEL(add_rms_norm) {
  namespace K = A::add_rms_norm;
  int64_t M = i[K::M], C = i[K::C];
  float eps = float(f[K::f::eps]);
  AsF32 t(b, 5, i[K::dtype], "add_rms_norm");
  t.in(0, M * C).in(1, M * C).in(2, C).out(3, M * C).out(4, M * C);
  void **tb = t.buffers();
  const float *a = F(tb[0]), *c = F(tb[1]), *w = F(tb[2]);
  float *s = F(tb[3]), *y = F(tb[4]);
  bool round = t.bf16();
#pragma omp parallel for schedule(static) if (M * C >= kParallelMin)
  for (int64_t m = 0; m < M; ++m) {
    float *sr = s + m * C;
    for (int64_t k = 0; k < C; ++k) {
      float v = a[m * C + k] + c[m * C + k];
      sr[k] = round ? bf16ToFloat(floatToBf16(v)) : v;
    }
    rmsNormRow(sr, w, y + m * C, C, eps);
  }
  t.finish();
  if (i[K::amax]) // rt-fuse-amax: max |y| as stored
    F(b[5])[0] = amaxOf(b[4], round, M * C);
  launched(ctx, stream);
}

// y[n] = gelu(x[n]) (tanh form or erf)
static void geluF32(void *ctx, void **b, const int64_t *i, const double *f,
                    int64_t stream) {
  int64_t n = i[A::gelu::n];
  bool tanhForm = i[A::gelu::tanh];
  const float *x = F(b[0]);
  float *y = F(b[1]);
  // The form is hoisted out of the loop, which then vectorizes.
  if (tanhForm) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t k = 0; k < n; ++k)
      y[k] = shardc::runtime::gelu(x[k], /*tanhForm=*/true);
  } else {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t k = 0; k < n; ++k)
      y[k] = shardc::runtime::gelu(x[k], /*tanhForm=*/false);
  }
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(gelu) {
  namespace K = A::gelu;
  int64_t n = i[K::n];
  AsF32 t(b, 2, i[K::dtype], "gelu");
  t.in(0, n);
  t.out(1, n);
  geluF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// y[n] = silu(x[n])
static void siluF32(void *ctx, void **b, const int64_t *i, const double *f,
                    int64_t stream) {
  int64_t n = i[A::silu::n];
  const float *x = F(b[0]);
  float *y = F(b[1]);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < n; ++k)
    y[k] = shardc::runtime::silu(x[k]);
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(silu) {
  namespace K = A::silu;
  int64_t n = i[K::n];
  AsF32 t(b, 2, i[K::dtype], "silu");
  t.in(0, n);
  t.out(1, n);
  siluF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// g[n], u[n] -> y[n] = silu(g) u (f32 or bf16; on bf16 silu(g) rounded
// first, as the unfused silu's output is: runtime::swiglu)
SHARDC_KERNEL(swiglu) {
  namespace K = A::swiglu;
  int64_t n = i[K::n];
  AsF32 t(b, 3, i[K::dtype], "swiglu");
  t.in(0, n).in(1, n).out(2, n);
  void **tb = t.buffers();
  const float *g = F(tb[0]), *u = F(tb[1]);
  float *y = F(tb[2]);
  bool bf16 = t.bf16();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t k = 0; k < n; ++k)
    y[k] = shardc::runtime::swiglu(g[k], u[k], bf16);
  t.finish();
  if (i[K::amax]) // rt-fuse-amax: max |y| as stored
    F(b[3])[0] = amaxOf(b[2], bf16, n);
  launched(ctx, stream);
}

// g[n], u[n], dy[n] -> dg[n] = silu'(g) (dy u), du[n] = dy silu(g) (f32 or
// bf16, rounded as the unfused kernels round: runtime::swigluGrad)
SHARDC_KERNEL(swiglu_grad) {
  namespace K = A::swiglu_grad;
  int64_t n = i[K::n];
  AsF32 t(b, 5, i[K::dtype], "swiglu_grad");
  t.in(0, n).in(1, n).in(2, n).out(3, n).out(4, n);
  void **tb = t.buffers();
  const float *g = F(tb[0]), *u = F(tb[1]), *dy = F(tb[2]);
  float *dg = F(tb[3]), *du = F(tb[4]);
  bool bf16 = t.bf16();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t k = 0; k < n; ++k)
    shardc::runtime::swigluGrad(g[k], u[k], dy[k], bf16, dg[k], du[k]);
  t.finish();
  if (i[K::amax]) { // rt-fuse-amax: max |dg| and max |du| as stored
    F(b[5])[0] = amaxOf(b[3], bf16, n);
    F(b[6])[0] = amaxOf(b[4], bf16, n);
  }
  launched(ctx, stream);
}

/// y = x * cat(cos, cos) + rotate_half(x) * cat(sin, sin) over x[B,H,T,D]
/// (layout 1: [B,T,H,D]) with tables [T, D/2] (sin negated with negateSin).
static void rotate(const float *x, float *y, const float *cosT,
                   const float *sinT, int64_t B, int64_t H, int64_t T,
                   int64_t D, int64_t layout, bool negateSin) {
  const int64_t half = D / 2;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < B * H * T; ++r) {
    int64_t t = shardc::runtime::rotaryPosition(r, T, H, layout);
    const float *xr = x + r * D;
    float *yr = y + r * D;
    for (int64_t k = 0; k < half; ++k) {
      float c = cosT[t * half + k],
            s = negateSin ? -sinT[t * half + k] : sinT[t * half + k];
      shardc::runtime::rotatePair(xr[k], xr[k + half], c, s, yr[k],
                                  yr[k + half]);
    }
  }
}

// x[B,H,T,D] -> y[B,H,T,D] (layout 1: [B,T,H,D]): the halves of D rotated
// by position t (by -t with inverse)
static void rotaryF32(void *ctx, void **b, const int64_t *i, const double *f,
                      int64_t stream) {
  int64_t B = i[A::rotary::B], H = i[A::rotary::H], T = i[A::rotary::T],
          D = i[A::rotary::D], half = D / 2;
  bool inverse = i[A::rotary::inverse];
  double theta = f[A::rotary::f::theta];
  const float *x = F(b[0]);
  float *y = F(b[1]);
  // cos/sin tables [T, D/2]; the inverse frequencies are formed in f32 as in
  // Hugging Face's LlamaRotaryEmbedding.
  std::vector<float> cosT(T * half), sinT(T * half);
  for (int64_t k = 0; k < half; ++k) {
    float invFreq = shardc::runtime::rotaryInvFreq(theta, k, D);
    for (int64_t t = 0; t < T; ++t) {
      float angle = shardc::runtime::rotaryAngle(t, invFreq);
      cosT[t * half + k] = std::cos(angle);
      sinT[t * half + k] = inverse ? -std::sin(angle) : std::sin(angle);
    }
  }
  rotate(x, y, cosT.data(), sinT.data(), B, H, T, D, i[A::rotary::layout],
         /*negateSin=*/false);
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(rotary) {
  namespace K = A::rotary;
  int64_t n = i[K::B] * i[K::H] * i[K::T] * i[K::D];
  AsF32 t(b, 2, i[K::dtype], "rotary");
  t.in(0, n);
  t.out(1, n);
  rotaryF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  if (i[K::amax]) // rt-fuse-amax: max |y| as stored
    F(b[2])[0] = amaxOf(b[1], t.bf16(), n);
  launched(ctx, stream);
}

// x[B,H,T,D], cos[T,D/2], sin[T,D/2] -> y[B,H,T,D] (layout 1: x and y
// [B,T,H,D]): the halves of D rotated by the tables' angles (their
// opposites with inverse)
static void rotary_tableF32(void *ctx, void **b, const int64_t *i,
                            const double *f, int64_t stream) {
  namespace R = A::rotary_table;
  int64_t B = i[R::B], H = i[R::H], T = i[R::T], D = i[R::D];
  rotate(F(b[0]), F(b[3]), F(b[1]), F(b[2]), B, H, T, D, i[R::layout],
         i[R::inverse] != 0);
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(rotary_table) {
  namespace K = A::rotary_table;
  int64_t n = i[K::B] * i[K::H] * i[K::T] * i[K::D],
          half = i[K::T] * (i[K::D] / 2);
  AsF32 t(b, 4, i[K::dtype], "rotary_table");
  t.in(0, n);
  t.in(1, half);
  t.in(2, half);
  t.out(3, n);
  rotary_tableF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// q[B,H,T,D], k[B,G,S,D], v[B,G,S,D] -> o[B,H,T,D] = softmax(scale q k^T) v,
// H/G query heads per key/value head, optionally causal; with lse, also
// lse[B,H,T] = log sum_s exp(scale q.k_s) (sdpa's)
static void attentionF32(void *ctx, void **b, const int64_t *i, const double *f,
                         int64_t stream, const AttentionLayout &L,
                         float *lse = nullptr) {
  int64_t B = i[A::attention::B], H = i[A::attention::H],
          G = i[A::attention::G], T = i[A::attention::T],
          S = i[A::attention::S], D = i[A::attention::D];
  bool causal = i[A::attention::causal];
  float scale = float(f[A::attention::f::scale]);
  const float *q = F(b[0]), *k = F(b[1]), *v = F(b[2]);
  float *o = F(b[3]);
  int64_t group = H / G;
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    int64_t bi = bh / H, h = bh % H;
    std::vector<float> scores(T * S);
    {
      // Each operand's head, [rows, D] at its strides (L), as a dense block.
      int64_t g = h / group;
      HeadBlock qh(q + bi * L.q.b + h * L.q.h, T, D, L.q.t);
      HeadBlock kh(k + bi * L.k.b + g * L.k.h, S, D, L.k.t);
      HeadBlock vh(v + bi * L.v.b + g * L.v.h, S, D, L.v.t);
      HeadBlock oh(o + bi * L.o.b + h * L.o.h, T, D, L.o.t, false);
      // scores [T,S] = scale * q k^T
      sgemm(false, true, T, S, D, scale, qh.data(), D, kh.data(), D, 0.0f,
            scores.data(), S);
      for (int64_t t = 0; t < T; ++t) {
        float *row = scores.data() + t * S;
        int64_t valid = causal ? std::min(t + 1, S) : S;
        float mx = rowMax(row, valid);
        double sum = expSum(row, valid, mx, row);
        if (lse)
          lse[(bi * H + h) * T + t] = float(double(mx) + std::log(sum));
        float inv = float(1.0 / sum);
        for (int64_t s = 0; s < valid; ++s)
          row[s] *= inv;
        for (int64_t s = valid; s < S; ++s)
          row[s] = 0.0f;
      }
      // o [T,D] = p v
      sgemm(false, false, T, D, S, 1.0f, scores.data(), S, vh.data(), D, 0.0f,
            oh.data(), D);
      oh.store();
    }
  }
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(attention) {
  namespace K = A::attention;
  int64_t q = i[K::B] * i[K::H] * i[K::T] * i[K::D],
          kv = i[K::B] * i[K::G] * i[K::S] * i[K::D];
  DenseAttention dense(b, 4, SHARDC_ATTENTION_ARGS(K, i),
                       {{0, 'q', false}, {1, 'k', false}, {2, 'v', false},
                        {3, 'o', true}});
  AsF32 t(dense.buffers(), 4, i[K::dtype], "attention");
  t.in(0, q);
  t.in(1, kv);
  t.in(2, kv);
  t.out(3, q);
  attentionF32(ctx, t.buffers(), i, f, stream, dense.strides());
  t.finish();
  dense.finish();
  launched(ctx, stream);
}

// sdpa: attention's o, and lse[B,H,T] (f32 whatever the dtype); ws unused.
SHARDC_KERNEL(sdpa) {
  namespace K = A::sdpa;
  int64_t q = i[K::B] * i[K::H] * i[K::T] * i[K::D],
          kv = i[K::B] * i[K::G] * i[K::S] * i[K::D];
  DenseAttention dense(b, 4, SHARDC_ATTENTION_ARGS(K, i),
                       {{0, 'q', false}, {1, 'k', false}, {2, 'v', false},
                        {3, 'o', true}});
  AsF32 t(dense.buffers(), 4, i[K::dtype], "sdpa");
  t.in(0, q);
  t.in(1, kv);
  t.in(2, kv);
  t.out(3, q);
  attentionF32(ctx, t.buffers(), i, f, stream, dense.strides(), F(b[4]));
  t.finish();
  dense.finish();
  launched(ctx, stream);
}

// x[outer,n,inner] -> y[outer,n,inner], softmax over n
static void softmaxF32(void *ctx, void **b, const int64_t *i, const double *f,
                       int64_t stream) {
  int64_t outer = i[A::softmax::outer], n = i[A::softmax::n],
          inner = i[A::softmax::inner];
  const float *x = F(b[0]);
  float *y = F(b[1]);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in)
      shardc::runtime::softmaxColumn(x + o * n * inner + in,
                                     y + o * n * inner + in, n, inner);
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(softmax) {
  namespace K = A::softmax;
  int64_t n = i[K::outer] * i[K::n] * i[K::inner];
  AsF32 t(b, 2, i[K::dtype], "softmax");
  t.in(0, n);
  t.out(1, n);
  softmaxF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// x[dims[R]] -> y, whose dimension d is x's dimension perm[d]
static void transposeF32(void *ctx, void **b, const int64_t *i, const double *f,
                         int64_t stream) {
  int64_t R = i[A::transpose::R];
  const int64_t *dims = i + A::transpose::kNumInts,
                *perm = i + A::transpose::kNumInts + R;
  const float *x = F(b[0]);
  float *y = F(b[1]);
  std::vector<int64_t> inStride(R), outDims(R), stride(R), idx(R, 0);
  int64_t total = 1;
  for (int64_t d = R - 1, s = 1; d >= 0; --d) {
    inStride[d] = s;
    s *= dims[d];
  }
  for (int64_t d = 0; d < R; ++d) {
    outDims[d] = dims[perm[d]];
    stride[d] = inStride[perm[d]];
    total *= outDims[d];
  }
  // The innermost dimension kept: whole rows move; the output's rows in
  // parallel, each finding its input offset from its index.
  if (R > 0 && perm[R - 1] == R - 1 && total >= kParallelMin) {
    int64_t inner = dims[R - 1], rows = total / inner;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t src = 0;
      for (int64_t d = R - 2, rest = r; d >= 0; --d) {
        src += (rest % outDims[d]) * stride[d];
        rest /= outDims[d];
      }
      std::memcpy(y + r * inner, x + src, inner * sizeof(float));
    }
      return;
  }
  // Walk the output in order; keep the input offset of the current index.
  int64_t off = 0;
  for (int64_t n = 0; n < total; ++n) {
    y[n] = x[off];
    for (int64_t d = R - 1; d >= 0; --d) {
      ++idx[d];
      off += stride[d];
      if (idx[d] < outDims[d])
        break;
      off -= stride[d] * outDims[d];
      idx[d] = 0;
    }
  }
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(transpose) {
  namespace K = A::transpose;
  int64_t n = 1;
  for (int64_t d = 0; d < i[K::R]; ++d)
    n *= i[K::kNumInts + d];
  AsF32 t(b, 2, i[K::dtype], "transpose");
  t.in(0, n);
  t.out(1, n);
  transposeF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// x[outer,n,inner] -> y[outer,size,inner] = x[:, start:start+size, :]
static void sliceF32(void *ctx, void **b, const int64_t *i, const double *f,
                     int64_t stream) {
  int64_t outer = i[A::slice::outer], n = i[A::slice::n],
          start = i[A::slice::start], size = i[A::slice::size],
          inner = i[A::slice::inner];
  const float *x = F(b[0]);
  float *y = F(b[1]);
#pragma omp parallel for schedule(static) if (outer * size * inner >=          \
                                              kParallelMin)
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(y + o * size * inner, x + (o * n + start) * inner,
                size * inner * sizeof(float));
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(slice) {
  namespace K = A::slice;
  int64_t outer = i[K::outer], inner = i[K::inner];
  AsF32 t(b, 2, i[K::dtype], "slice");
  t.in(0, outer * i[K::n] * inner);
  t.out(1, outer * i[K::size] * inner);
  sliceF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// logits[N,V], t[N] (int32) -> loss[] = mean over rows with t != ignore_index
// of logsumexp(logits[n]) - logits[n, t[n]]
SHARDC_KERNEL(cross_entropy) {
  int64_t N = i[A::cross_entropy::N], V = i[A::cross_entropy::V],
          ignore = i[A::cross_entropy::ignore_index];
  const float *logits = F(b[0]);
  const int32_t *targets = I32(b[1]);
  // Rows in parallel, each row's loss kept, then summed in order so the
  // result does not depend on the thread count.
  std::vector<double> rowLoss(N, 0.0);
  bool badTarget = false;
#pragma omp parallel for schedule(static) reduction(|| : badTarget)
  for (int64_t n = 0; n < N; ++n) {
    int64_t t = targets[n];
    if (t == ignore)
      continue;
    if (t < 0 || t >= V) {
      badTarget = true;
      continue;
    }
    const float *row = logits + n * V;
    thread_local std::vector<float> scratch;
    scratch.resize(V);
    float mx = rowMax(row, V);
    double sum = expSum(row, V, mx, scratch.data());
    rowLoss[n] = std::log(sum) + mx - row[t];
  }
  if (badTarget)
    fatal("cross_entropy: a target is outside the vocabulary of %lld",
          (long long)V);
  double total = 0;
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n)
    if (targets[n] != ignore) {
      total += rowLoss[n];
      ++count;
    }
  F(b[2])[0] = count ? float(total / count) : NAN;
  launched(ctx, stream);
}

// x -> y, `bytes` bytes
SHARDC_KERNEL(copy) {
  std::memcpy(b[1], b[0], size_t(i[A::copy::bytes]));
  launched(ctx, stream);
}

// x[n] of dtype `from` -> y[n] of dtype `to`
SHARDC_KERNEL(cast) {
  // f32, bf16, i32 and bool (one byte); floats to integers truncate toward
  // zero, anything to bool is != 0.
  int64_t n = i[A::cast::n], from = i[A::cast::from], to = i[A::cast::to];
  auto load = [&](int64_t k) -> float {
    switch (from) {
    case A::kF32:
      return F(b[0])[k];
    case A::kBF16:
      return bf16ToFloat(static_cast<const uint16_t *>(b[0])[k]);
    case A::kI32:
      return float(static_cast<const int32_t *>(b[0])[k]);
    case A::kBool:
      return float(static_cast<const uint8_t *>(b[0])[k]);
    }
    return 0.0f;
  };
  auto known = [](int64_t c) {
    return c == A::kF32 || c == A::kBF16 || c == A::kI32 || c == A::kBool;
  };
  if (!known(from) || !known(to))
    fatal("cast: dtype codes %lld to %lld are not supported on the CPU "
          "backend (f32, bf16, i32, bool)",
          (long long)from, (long long)to);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t k = 0; k < n; ++k) {
    float v = load(k);
    if (to == A::kF32)
      F(b[1])[k] = v;
    else if (to == A::kBF16)
      static_cast<uint16_t *>(b[1])[k] = floatToBf16(v);
    else if (to == A::kI32)
      static_cast<int32_t *>(b[1])[k] = int32_t(v);
    else
      static_cast<uint8_t *>(b[1])[k] = v != 0.0f;
  }
  launched(ctx, stream);
}
