//===- train_kernels.cpp - CPU backward, reduction and optimizer kernels --===//
//
// Arguments as defined in runtime/abi/kernels.def. Reductions accumulate in
// double; the optimizers follow torch.optim's f32 arithmetic step by step.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/fastmath.h"
#include "runtime/cpu/kernel_util.h"
#include "runtime/cpu/typed.h"
#include "runtime/kernels.h"
#include "runtime/runtime.h"

#include "runtime/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace A = shardc::abi;
using shardc::runtime::expSum;
using shardc::runtime::fastExp;
using shardc::runtime::fastSigmoid;
using shardc::runtime::fastTanh;
using shardc::runtime::fatal;
using shardc::runtime::rowMax;

using shardc::runtime::cpu::amaxOf;
using shardc::runtime::cpu::AsF32;
using shardc::runtime::cpu::AttentionLayout;
using shardc::runtime::cpu::HeadBlock;
using shardc::runtime::cpu::DenseAttention;
using shardc::runtime::cpu::BF16;
using shardc::runtime::cpu::gemmBf16;
using shardc::runtime::cpu::nativeBf16;
using shardc::runtime::cpu::blockedSum;
using shardc::runtime::cpu::broadcastExtent;
using shardc::runtime::cpu::columnSums;
using shardc::runtime::cpu::F;
using shardc::runtime::cpu::I32;
using shardc::runtime::cpu::kParallelMin;
using shardc::runtime::cpu::sgemm;

namespace {

void zero(float *p, int64_t n) { std::memset(p, 0, n * sizeof(float)); }

/// Row-wise softmax of `scores` [T, S] in place, with a causal mask.
void maskedSoftmax(float *scores, int64_t T, int64_t S, bool causal) {
  for (int64_t t = 0; t < T; ++t) {
    float *row = scores + t * S;
    int64_t valid = causal ? std::min(t + 1, S) : S;
    float mx = rowMax(row, valid);
    double sum = expSum(row, valid, mx, row);
    float inv = float(1.0 / sum);
    for (int64_t s = 0; s < valid; ++s)
      row[s] *= inv;
    for (int64_t s = valid; s < S; ++s)
      row[s] = 0.0f;
  }
}

} // namespace

// y[n] = value
static void fillF32(void *ctx, void **b, const int64_t *i, const double *f,
                    int64_t stream) {
  std::fill(F(b[0]), F(b[0]) + i[A::fill::n], float(f[A::fill::f::value]));
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(fill) {
  namespace K = A::fill;

  AsF32 t(b, 1, i[K::dtype], "fill");
  t.out(0, i[K::n]);
  fillF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// op(a)[M,K] @ op(b)[K,N] -> y[M,N]; a stored [K,M] with trans_a, b [N,K]
// with trans_b
static void matmulF32(void *ctx, void **b, const int64_t *i, const double *f,
                      int64_t stream) {
  int64_t M = i[A::matmul::M], K = i[A::matmul::K], N = i[A::matmul::N];
  bool ta = i[A::matmul::trans_a], tb = i[A::matmul::trans_b];
  sgemm(ta, tb, M, N, K, 1.0f, F(b[0]), ta ? M : K, F(b[1]), tb ? K : N, 0.0f,
        F(b[2]), N);
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
// matmul's body (matmul_bgrad's too, whose ints lead with matmul's).
static void matmulTyped(void *ctx, void **b, const int64_t *i, const double *f,
                        int64_t stream) {
  namespace K = A::matmul;
  int64_t M = i[K::M], Kd = i[K::K], N = i[K::N];
  AsF32 t(b, 3, i[K::dtype], "matmul");
  if (!i[K::y_f32])
    t.out(2, M * N); // else the f32 body writes y as it is
  if (t.bf16() && nativeBf16()) {
    // a and b stay bf16 for the cores' bf16 GEMM; y in f32, rounded once.
    bool ta = i[K::trans_a], tb = i[K::trans_b];
    gemmBf16(ta, tb, M, N, Kd, 1.0f, BF16(b[0]), ta ? M : Kd, BF16(b[1]),
             tb ? Kd : N, 0.0f, F(t.buffers()[2]), N);
  } else {
    t.in(0, M * Kd);
    t.in(1, Kd * N);
    matmulF32(ctx, t.buffers(), i, f, stream);
  }
  t.finish();
}

SHARDC_KERNEL(matmul) {
  matmulTyped(ctx, b, i, f, stream);
  launched(ctx, stream);
}

// matmul, then db = the column sums of a (side 0) or b (side 1) stored
// [K, count], in double and in order as sum_to's (columnSums): the unfused
// matmul and sum_to, bit for bit.
SHARDC_KERNEL(matmul_bgrad) {
  namespace K = A::matmul_bgrad;
  static_assert(A::matmul::kNumInts == K::side, "matmul's ints lead");
  matmulTyped(ctx, b, i, f, stream);
  std::string bad = A::matmulBgradLayoutError(i);
  if (!bad.empty())
    fatal("%s", bad.c_str());
  int64_t side = i[K::side], count = side ? i[K::N] : i[K::M];
  void *io[2] = {b[side ? 1 : 0], b[3]};
  AsF32 t(io, 2, i[K::dtype], "matmul_bgrad");
  t.in(0, i[K::K] * count);
  if (!i[K::y_f32])
    t.out(1, count);
  columnSums(F(t.buffers()[0]), i[K::K], count, F(t.buffers()[1]));
  t.finish();
  launched(ctx, stream);
}

// x[dims[R]] -> y[out_n], summed over the dimensions where ystr is 0
static void sum_toF32(void *ctx, void **b, const int64_t *i, const double *f,
                      int64_t stream) {
  int64_t R = i[A::sum_to::R], outN = i[A::sum_to::out_n];
  const int64_t *dims = i + A::sum_to::kNumInts,
                *ystr = i + A::sum_to::kNumInts + R;
  const float *x = F(b[0]);
  int64_t total = 1;
  for (int64_t d = 0; d < R; ++d)
    total *= dims[d];
  // Summed over leading dimensions into the trailing ones (a bias
  // gradient): column sums, the same association as the loop below.
  int64_t lead = 0;
  while (lead < R && ystr[lead] == 0)
    ++lead;
  bool trailing = true;
  for (int64_t d = R - 1, st = 1; d >= lead; --d) {
    trailing = trailing && ystr[d] == st;
    st *= dims[d];
  }
  if (trailing && outN > 0) {
    columnSums(x, total / outN, outN, F(b[1]));
      return;
  }
  std::vector<double> acc(outN, 0.0);
  std::vector<int64_t> idx(R, 0);
  int64_t off = 0;
  for (int64_t n = 0; n < total; ++n) {
    acc[off] += x[n];
    for (int64_t d = R - 1; d >= 0; --d) {
      ++idx[d];
      off += ystr[d];
      if (idx[d] < dims[d])
        break;
      off -= ystr[d] * dims[d];
      idx[d] = 0;
    }
  }
  float *y = F(b[1]);
  for (int64_t k = 0; k < outN; ++k)
    y[k] = float(acc[k]);
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(sum_to) {
  namespace K = A::sum_to;
  int64_t n = 1;
  for (int64_t d = 0; d < i[K::R]; ++d)
    n *= i[K::kNumInts + d];
  AsF32 t(b, 2, i[K::dtype], "sum_to");
  t.in(0, n);
  if (!i[K::y_f32])
    t.out(1, i[K::out_n]);
  sum_toF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// ids[N] (int32), dy[N,C] -> dtable[V,C]: the rows of dy summed per id
static void embedding_gradF32(void *ctx, void **b, const int64_t *i,
                              const double *f, int64_t stream) {
  int64_t N = i[A::embedding_grad::N], V = i[A::embedding_grad::V],
          C = i[A::embedding_grad::C];
  const int32_t *ids = I32(b[0]);
  const float *dy = F(b[1]);
  float *dt = F(b[2]);
  zero(dt, V * C);
  for (int64_t n = 0; n < N; ++n) {
    float *row = dt + int64_t(ids[n]) * C;
    for (int64_t c = 0; c < C; ++c)
      row[c] += dy[n * C + c];
  }
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(embedding_grad) {
  namespace K = A::embedding_grad;
  int64_t N = i[K::N], V = i[K::V], C = i[K::C];
  AsF32 t(b, 3, i[K::dtype], "embedding_grad");
  t.in(1, N * C);
  t.out(2, V * C);
  embedding_gradF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

/// A norm gradient's element `g` as its fused residual add writes it: g
/// rounded to the dtype (as the unfused norm gradient's output was), plus
/// the residual gradient's element `r` (the add's rounding follows when
/// the output is rounded); `g` alone without one (r null).
static inline float plusResidual(float g, const float *r, bool bf16) {
  if (!r)
    return g;
  return (bf16 ? shardc::runtime::roundToBf16(g) : g) + *r;
}

// x[M,C], w[C], dy[M,C] (dr[M,C]) -> dx[M,C] (+ dr), dw[C], db[C] of
// layer_norm (with bias)
static void layer_norm_gradF32(void *ctx, void **b, const int64_t *i,
                               const double *f, int64_t stream, bool bf16) {
  namespace K = A::layer_norm_grad;
  int64_t M = i[K::M], C = i[K::C];
  double eps = f[K::f::eps];
  const float *x = F(b[0]), *w = F(b[1]), *dy = F(b[2]);
  float *dx = F(b[3]), *dw = F(b[4]), *db = F(b[5]);
  const float *dr = i[K::add_dr] ? F(b[6]) : nullptr;
  // Rows in blocks of a fixed size, in parallel; each block keeps its own
  // dw and db partial sums, added in block order after: the result does not
  // depend on the thread count.
  constexpr int64_t kRows = 32;
  int64_t blocks = (M + kRows - 1) / kRows;
  std::vector<double> dwPart(blocks * C, 0.0), dbPart(blocks * C, 0.0);
#pragma omp parallel if (M * C >= kParallelMin)
  {
    std::vector<double> xhat(C), g(C);
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      double *dwAcc = dwPart.data() + blk * C, *dbAcc = dbPart.data() + blk * C;
      for (int64_t m = blk * kRows; m < std::min(M, (blk + 1) * kRows); ++m) {
        const float *xr = x + m * C, *dyr = dy + m * C;
        auto [mean, var] = shardc::runtime::cpu::rowMoments(xr, C);
        double rstd = 1.0 / std::sqrt(var + eps);
        double meanG = 0, meanGX = 0;
#pragma omp simd reduction(+ : meanG, meanGX)
        for (int64_t c = 0; c < C; ++c) {
          xhat[c] = (xr[c] - mean) * rstd;
          g[c] = double(dyr[c]) * w[c];
          dwAcc[c] += double(dyr[c]) * xhat[c];
          dbAcc[c] += dyr[c];
          meanG += g[c];
          meanGX += g[c] * xhat[c];
        }
        meanG /= C;
        meanGX /= C;
        // dr is read before dx is written at each element: it may be dx.
        for (int64_t c = 0; c < C; ++c)
          dx[m * C + c] =
              plusResidual(float(rstd * (g[c] - meanG - xhat[c] * meanGX)),
                           dr ? dr + m * C + c : nullptr, bf16);
      }
    }
  }
  for (int64_t c = 0; c < C; ++c) {
    double sw = 0, sb = 0;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      sw += dwPart[blk * C + c];
      sb += dbPart[blk * C + c];
    }
    dw[c] = float(sw);
    db[c] = float(sb);
  }
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(layer_norm_grad) {
  namespace K = A::layer_norm_grad;
  int64_t M = i[K::M], C = i[K::C];
  AsF32 t(b, 6 + i[K::add_dr], i[K::dtype], "layer_norm_grad");
  t.in(0, M * C);
  t.in(1, C);
  t.in(2, M * C);
  t.out(3, M * C);
  if (!i[K::wb_f32]) {
    t.out(4, C);
    t.out(5, C);
  }
  if (i[K::add_dr])
    t.in(6, M * C);
  layer_norm_gradF32(ctx, t.buffers(), i, f, stream, t.bf16());
  t.finish();
  launched(ctx, stream);
}

// x[M,C], w[C], dy[M,C] (dr[M,C]) -> dx[M,C] (+ dr), dw[C] of rms_norm
static void rms_norm_gradF32(void *ctx, void **b, const int64_t *i,
                             const double *f, int64_t stream, bool bf16) {
  namespace K = A::rms_norm_grad;
  int64_t M = i[K::M], C = i[K::C];
  double eps = f[K::f::eps];
  const float *x = F(b[0]), *w = F(b[1]), *dy = F(b[2]);
  float *dx = F(b[3]), *dw = F(b[4]);
  const float *dr = i[K::add_dr] ? F(b[5]) : nullptr;
  std::vector<double> dwAcc(C, 0.0);
  for (int64_t m = 0; m < M; ++m) {
    const float *xr = x + m * C, *dyr = dy + m * C;
    double ss = 0;
    for (int64_t c = 0; c < C; ++c)
      ss += double(xr[c]) * xr[c];
    double r = 1.0 / std::sqrt(ss / C + eps);
    double gx = 0;
    for (int64_t c = 0; c < C; ++c) {
      gx += double(dyr[c]) * w[c] * xr[c];
      dwAcc[c] += double(dyr[c]) * xr[c] * r;
    }
    for (int64_t c = 0; c < C; ++c)
      dx[m * C + c] = plusResidual(
          float(r * double(dyr[c]) * w[c] - r * r * r * xr[c] * gx / C),
          dr ? dr + m * C + c : nullptr, bf16);
  }
  for (int64_t c = 0; c < C; ++c)
    dw[c] = float(dwAcc[c]);
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(rms_norm_grad) {
  namespace K = A::rms_norm_grad;
  int64_t M = i[K::M], C = i[K::C];
  bool dr = i[K::add_dr] != 0;
  AsF32 t(b, 5 + (dr ? 1 : 0), i[K::dtype], "rms_norm_grad");
  t.in(0, M * C);
  t.in(1, C);
  t.in(2, M * C);
  t.out(3, M * C);
  t.out(4, C);
  if (dr)
    t.in(5, M * C);
  rms_norm_gradF32(ctx, t.buffers(), i, f, stream, t.bf16());
  t.finish();
  if (i[K::add_dr] == 2) // rt-fuse-amax: max |dx| as stored
    F(b[6])[0] = amaxOf(b[3], t.bf16(), M * C);
  launched(ctx, stream);
}

// dx[n] = dy[n] gelu'(x[n])
static void gelu_gradF32(void *ctx, void **b, const int64_t *i, const double *f,
                         int64_t stream) {
  int64_t n = i[A::gelu_grad::n];
  bool tanhForm = i[A::gelu_grad::tanh];
  const float *x = F(b[0]), *dy = F(b[1]);
  float *dx = F(b[2]);
  // The form is hoisted out of the loop, which then vectorizes.
  if (tanhForm) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t k = 0; k < n; ++k)
      dx[k] = dy[k] * shardc::runtime::geluGrad(x[k], /*tanhForm=*/true);
  } else {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t k = 0; k < n; ++k)
      dx[k] = dy[k] * shardc::runtime::geluGrad(x[k], /*tanhForm=*/false);
  }
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(gelu_grad) {
  namespace K = A::gelu_grad;
  int64_t n = i[K::n];
  AsF32 t(b, 3, i[K::dtype], "gelu_grad");
  t.in(0, n);
  t.in(1, n);
  t.out(2, n);
  gelu_gradF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// dx[n] = dy[n] silu'(x[n])
static void silu_gradF32(void *ctx, void **b, const int64_t *i, const double *f,
                         int64_t stream) {
  int64_t n = i[A::silu_grad::n];
  const float *x = F(b[0]), *dy = F(b[1]);
  float *dx = F(b[2]);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < n; ++k)
    dx[k] = shardc::runtime::siluBackward(dy[k], x[k]);
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(silu_grad) {
  namespace K = A::silu_grad;
  int64_t n = i[K::n];
  AsF32 t(b, 3, i[K::dtype], "silu_grad");
  t.in(0, n);
  t.in(1, n);
  t.out(2, n);
  silu_gradF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// y[outer,n,inner], dy -> dx = y (dy - sum_n y dy), softmax over n
static void softmax_gradF32(void *ctx, void **b, const int64_t *i,
                            const double *f, int64_t stream) {
  int64_t outer = i[A::softmax_grad::outer], n = i[A::softmax_grad::n],
          inner = i[A::softmax_grad::inner];
  const float *y = F(b[0]), *dy = F(b[1]);
  float *dx = F(b[2]);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      int64_t base = o * n * inner + in;
      shardc::runtime::softmaxGradColumn(y + base, dy + base, dx + base, n,
                                         inner);
    }
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(softmax_grad) {
  namespace K = A::softmax_grad;
  int64_t n = i[K::outer] * i[K::n] * i[K::inner];
  AsF32 t(b, 3, i[K::dtype], "softmax_grad");
  t.in(0, n);
  t.in(1, n);
  t.out(2, n);
  softmax_gradF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// q[B,H,T,D], k[B,G,S,D], v[B,G,S,D], do[B,H,T,D] -> dq[B,H,T,D],
// dk[B,G,S,D], dv[B,G,S,D] of attention
static void attention_gradF32(void *ctx, void **b, const int64_t *i,
                              const double *f, int64_t stream,
                              const AttentionLayout &L) {
  int64_t B = i[A::attention_grad::B], H = i[A::attention_grad::H],
          G = i[A::attention_grad::G], T = i[A::attention_grad::T],
          S = i[A::attention_grad::S], D = i[A::attention_grad::D];
  bool causal = i[A::attention_grad::causal];
  float scale = float(f[A::attention_grad::f::scale]);
  const float *q = F(b[0]), *k = F(b[1]), *v = F(b[2]), *dO = F(b[3]);
  float *dq = F(b[4]), *dk = F(b[5]), *dv = F(b[6]);
  int64_t group = H / G;
  // In parallel over (batch, key/value head): the query heads sharing one
  // key/value head accumulate into it in order, without races. Each
  // operand's head, [rows, D] at its strides (L: dq as q, dO as o), as a
  // dense block.
#pragma omp parallel for schedule(static)
  for (int64_t bg = 0; bg < B * G; ++bg) {
    std::vector<float> p(T * S), dp(T * S);
    int64_t bi = bg / G, g = bg % G;
    HeadBlock kh(k + bi * L.k.b + g * L.k.h, S, D, L.k.t);
    HeadBlock vh(v + bi * L.v.b + g * L.v.h, S, D, L.v.t);
    HeadBlock dkh(dk + bi * L.k.b + g * L.k.h, S, D, L.k.t, false);
    HeadBlock dvh(dv + bi * L.v.b + g * L.v.h, S, D, L.v.t, false);
    zero(dkh.data(), S * D);
    zero(dvh.data(), S * D);
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      HeadBlock qh(q + bi * L.q.b + h * L.q.h, T, D, L.q.t);
      HeadBlock doh(dO + bi * L.o.b + h * L.o.h, T, D, L.o.t);
      HeadBlock dqh(dq + bi * L.q.b + h * L.q.h, T, D, L.q.t, false);
      // P = softmax(scale q k^T), as in forward.
      sgemm(false, true, T, S, D, scale, qh.data(), D, kh.data(), D, 0.0f,
            p.data(), S);
      maskedSoftmax(p.data(), T, S, causal);
      // dV += P^T dO; dP = dO V^T.
      sgemm(true, false, S, D, T, 1.0f, p.data(), S, doh.data(), D, 1.0f,
            dvh.data(), D);
      sgemm(false, true, T, S, D, 1.0f, doh.data(), D, vh.data(), D, 0.0f,
            dp.data(), S);
      // dS = P * (dP - rowsum(dP * P)), stored in dp.
      for (int64_t t = 0; t < T; ++t) {
        float *pr = p.data() + t * S, *dr = dp.data() + t * S;
        double dot = 0;
        for (int64_t s = 0; s < S; ++s)
          dot += double(pr[s]) * dr[s];
        for (int64_t s = 0; s < S; ++s)
          dr[s] = float(pr[s] * (dr[s] - dot));
      }
      // dQ = scale dS K; dK += scale dS^T Q.
      sgemm(false, false, T, D, S, scale, dp.data(), S, kh.data(), D, 0.0f,
            dqh.data(), D);
      sgemm(true, false, S, D, T, scale, dp.data(), S, qh.data(), D, 1.0f,
            dkh.data(), D);
      dqh.store();
    }
    dkh.store();
    dvh.store();
  }
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(attention_grad) {
  namespace K = A::attention_grad;
  int64_t q = i[K::B] * i[K::H] * i[K::T] * i[K::D],
          kv = i[K::B] * i[K::G] * i[K::S] * i[K::D];
  DenseAttention dense(b, 7, SHARDC_ATTENTION_ARGS(K, i),
                       {{0, 'q', false}, {1, 'k', false}, {2, 'v', false},
                        {3, 'o', false}, {4, 'q', true}, {5, 'k', true},
                        {6, 'v', true}});
  AsF32 t(dense.buffers(), 7, i[K::dtype], "attention_grad");
  t.in(0, q);
  t.in(1, kv);
  t.in(2, kv);
  t.in(3, q);
  t.out(4, q);
  t.out(5, kv);
  t.out(6, kv);
  attention_gradF32(ctx, t.buffers(), i, f, stream, dense.strides());
  t.finish();
  dense.finish();
  launched(ctx, stream);
}

// sdpa_grad: attention_grad's (o and lse unread: the CPU recomputes them).
SHARDC_KERNEL(sdpa_grad) {
  void *grad[] = {b[0], b[1], b[2], b[5], b[6], b[7], b[8]};
  int64_t gi[A::attention_grad::kNumInts];
  A::attentionGradIntsOf(i, gi);
  shardc_k_attention_grad(ctx, grad, gi, f, stream);
}

// dy[outer,size,inner] -> dx[outer,n,inner], zero outside start:start+size
static void slice_gradF32(void *ctx, void **b, const int64_t *i,
                          const double *f, int64_t stream) {
  int64_t outer = i[A::slice_grad::outer], n = i[A::slice_grad::n],
          start = i[A::slice_grad::start], size = i[A::slice_grad::size],
          inner = i[A::slice_grad::inner];
  const float *dy = F(b[0]);
  float *dx = F(b[1]);
#pragma omp parallel for schedule(static) if (outer * n * inner >= kParallelMin)
  for (int64_t o = 0; o < outer; ++o) {
    float *row = dx + o * n * inner;
    zero(row, start * inner);
    std::memcpy(row + start * inner, dy + o * size * inner,
                size * inner * sizeof(float));
    zero(row + (start + size) * inner, (n - start - size) * inner);
  }
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(slice_grad) {
  namespace K = A::slice_grad;
  int64_t outer = i[K::outer], inner = i[K::inner];
  AsF32 t(b, 2, i[K::dtype], "slice_grad");
  t.in(0, outer * i[K::size] * inner);
  t.out(1, outer * i[K::n] * inner);
  slice_gradF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

namespace {

/// Rows of the cross-entropy gradient: dl[n] = scale * (softmax(logits[n])
/// - onehot(t[n])), zero for ignored rows; with `rowLoss`, also each row's
/// loss logsumexp - logit[t] from the same sums. Returns the number of
/// targets outside the vocabulary.
int64_t crossEntropyRows(const float *logits, const int32_t *targets, int64_t N,
                         int64_t V, int64_t ignore, float scale, float *dl,
                         double *rowLoss) {
  int64_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
  for (int64_t n = 0; n < N; ++n) {
    float *out = dl + n * V;
    int64_t t = targets[n];
    if (t == ignore || t < 0 || t >= V) {
      bad += t != ignore;
      std::memset(out, 0, V * sizeof(float));
      continue;
    }
    const float *row = logits + n * V;
    // Read before out is written: dl may alias logits.
    float target = row[t];
    float mx = rowMax(row, V);
    double sum = expSum(row, V, mx, out);
    if (rowLoss)
      rowLoss[n] = std::log(sum) + mx - target;
    float factor = float(scale / sum);
    for (int64_t v = 0; v < V; ++v)
      out[v] *= factor;
    out[t] -= scale;
  }
  return bad;
}

/// The mean loss: the rows' losses of the targets not ignored, summed in
/// row order (as the unfused loss kernel does), over their count; NaN
/// without any.
float meanRowLoss(const double *rowLoss, const int32_t *targets, int64_t N,
                  int64_t ignore, int64_t count) {
  double total = 0;
  for (int64_t n = 0; n < N; ++n)
    if (targets[n] != ignore)
      total += rowLoss[n];
  return count ? float(total / count) : NAN;
}

int64_t countTargets(const int32_t *targets, int64_t N, int64_t ignore) {
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n)
    count += targets[n] != ignore;
  return count;
}

} // namespace

// logits[N,V], t[N] (int32), dloss[] -> dlogits[N,V] of cross_entropy
SHARDC_KERNEL(cross_entropy_grad) {
  int64_t N = i[A::cross_entropy_grad::N], V = i[A::cross_entropy_grad::V],
          ignore = i[A::cross_entropy_grad::ignore_index];
  const int32_t *targets = I32(b[1]);
  int64_t count = countTargets(targets, N, ignore);
  float scale = count ? F(b[2])[0] / float(count) : 0.0f;
  if (crossEntropyRows(F(b[0]), targets, N, V, ignore, scale, F(b[3]), nullptr))
    fatal("cross_entropy_grad: a target is outside the vocabulary of %lld",
          (long long)V);
  launched(ctx, stream);
}

// logits[N,V], t[N] (int32) -> loss[], dlogits[N,V] (loss gradient 1)
SHARDC_KERNEL(cross_entropy_with_grad) {
  int64_t N = i[A::cross_entropy_with_grad::N],
          V = i[A::cross_entropy_with_grad::V],
          ignore = i[A::cross_entropy_with_grad::ignore_index];
  const int32_t *targets = I32(b[1]);
  int64_t count = countTargets(targets, N, ignore);
  float scale = count ? 1.0f / float(count) : 0.0f;
  std::vector<double> rowLoss(N, 0.0);
  if (crossEntropyRows(F(b[0]), targets, N, V, ignore, scale, F(b[3]),
                       rowLoss.data()))
    fatal("cross_entropy: a target is outside the vocabulary of %lld",
          (long long)V);
  F(b[2])[0] = meanRowLoss(rowLoss.data(), targets, N, ignore, count);
  launched(ctx, stream);
}

// h[N,C], w[V,C], t[N] -> loss[], dh[N,C], dw[V,C], through scratch[R,V]:
// per chunk of R rows, the logits (a GEMM), their cross-entropy gradient in
// place (each row's loss kept), dh's rows and dw's sum (GEMMs, dw
// accumulating from the second chunk); the loss is the rows' losses summed
// in row order over the count of targets, as cross_entropy_with_grad's
/// x[n] rounded to the nearest bf16, kept as f32.
static void roundToBf16InPlace(float *x, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t k = 0; k < n; ++k)
    x[k] = shardc::runtime::roundToBf16(x[k]);
}

static void linearCrossEntropyF32(void **b, const int64_t *i, bool bf16) {
  namespace L = A::linear_cross_entropy;
  int64_t N = i[L::N], C = i[L::C], V = i[L::V], R = i[L::R],
          ignore = i[L::ignore_index];
  const float *h = F(b[0]), *w = F(b[1]);
  const int32_t *targets = I32(b[2]);
  float *dh = F(b[4]), *dw = F(b[5]), *scratch = F(b[6]);
  // On bf16 the planned scratch holds bf16 rows; the f32 body works on a
  // per-thread f32 chunk instead (outside the plan, as AsF32's copies).
  thread_local std::vector<float> wide;
  if (bf16) {
    if (int64_t(wide.size()) < std::min(R, N) * V)
      wide.resize(size_t(std::min(R, N) * V));
    scratch = wide.data();
  }
  int64_t count = countTargets(targets, N, ignore);
  float scale = count ? 1.0f / float(count) : 0.0f;
  std::vector<double> rowLoss(N, 0.0);
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    int64_t rows = std::min(R, N - r0);
    // logits [rows, V] = h[r0:] w^T
    sgemm(false, true, rows, V, C, 1.0f, h + r0 * C, C, w, C, 0.0f, scratch, V);
    if (bf16)
      roundToBf16InPlace(scratch, rows * V);
    if (crossEntropyRows(scratch, targets + r0, rows, V, ignore, scale, scratch,
                         rowLoss.data() + r0))
      fatal("cross_entropy: a target is outside the vocabulary of %lld",
            (long long)V);
    if (bf16)
      roundToBf16InPlace(scratch, rows * V);
    // dh[r0:] = dlogits w; dw (+)= dlogits^T h[r0:]
    sgemm(false, false, rows, C, V, 1.0f, scratch, V, w, C, 0.0f, dh + r0 * C,
          C);
    sgemm(true, false, V, C, rows, 1.0f, scratch, V, h + r0 * C, C,
          r0 ? 1.0f : 0.0f, dw, C);
  }
  F(b[3])[0] = meanRowLoss(rowLoss.data(), targets, N, ignore, count);
}

// On f32 or bf16 (h, w, dh, dw and the scratch; the loss f32): dh and dw
// rounded once (runtime/cpu/typed.h).
SHARDC_KERNEL(linear_cross_entropy) {
  namespace K = A::linear_cross_entropy;
  int64_t N = i[K::N], C = i[K::C], V = i[K::V];
  AsF32 t(b, 7, i[K::dtype], "linear_cross_entropy");
  t.in(0, N * C).in(1, V * C).out(4, N * C).out(5, V * C);
  linearCrossEntropyF32(t.buffers(), i, t.bf16());
  t.finish();
  launched(ctx, stream);
}

// acc[n], g[n], ctl[2] -> out[n] = ctl[0] ? acc + ctl[1] g : ctl[1] g
SHARDC_KERNEL(accumulate) {
  int64_t n = i[A::accumulate::n];
  const float *acc = F(b[0]), *g = F(b[1]), *ctl = F(b[2]);
  float *out = F(b[3]);
  bool keep = ctl[0] != 0.0f;
  float scale = ctl[1];
  if (keep) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t k = 0; k < n; ++k)
      out[k] = acc[k] + scale * g[k];
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t k = 0; k < n; ++k)
      out[k] = scale * g[k];
  }
  launched(ctx, stream);
}

// x[n] -> y[] = sum of x^2
SHARDC_KERNEL(squared_norm) {
  int64_t n = i[A::squared_norm::n];
  double s = blockedSum(F(b[0]), n, [](double v) { return v * v; });
  F(b[1])[0] = float(s);
  launched(ctx, stream);
}

// sq[], max[] -> y[] = min(1, max / (sqrt(sq) + 1e-6)), or 1 if max <= 0
SHARDC_KERNEL(clip_coef) {
  float sq = F(b[0])[0], maxNorm = F(b[1])[0];
  float coef = 1.0f;
  if (maxNorm > 0.0f)
    coef = std::min(1.0f, maxNorm / (std::sqrt(sq) + 1e-6f));
  F(b[2])[0] = coef;
  launched(ctx, stream);
}

// p', m', v' [n] = AdamW(p, g * c[], m, v) with hyper[kHyperSize]
SHARDC_KERNEL(adamw) {
  int64_t n = i[A::adamw::n];
  bool is1D = i[A::adamw::is_1d];
  const float *p = F(b[0]), *g = F(b[1]), *m = F(b[2]), *v = F(b[3]);
  const float *h = F(b[4]);
  float coef = F(b[5])[0];
  float *p2 = F(b[6]), *m2 = F(b[7]), *v2 = F(b[8]);
  // Scalars in double, then applied in f32, as torch.optim.AdamW does.
  shardc::runtime::AdamWScalars s = shardc::runtime::adamwScalars(h, is1D);
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t k = 0; k < n; ++k) {
    float pk = p[k], mk = m[k], vk = v[k];
    shardc::runtime::adamwUpdate(s, g[k] * coef, pk, mk, vk);
    p2[k] = pk;
    m2[k] = mk;
    v2[k] = vk;
  }
  launched(ctx, stream);
}

// x_1[n_1] .. x_k[n_k] -> y[] = the f32 sum, in order, of each tensor's
// squared_norm: the chain of squared_norm and add kernels it replaces
SHARDC_KERNEL(squared_norm_group) {
  int64_t k = i[A::squared_norm_group::k];
  const int64_t *n = i + A::squared_norm_group::kNumInts;
  float total = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    float sq = 0.0f;
    void *bufs[2] = {b[j], &sq};
    shardc_k_squared_norm(nullptr, bufs, &n[j], f, stream);
    total = j == 0 ? sq : total + sq;
  }
  F(b[k])[0] = total;
  launched(ctx, stream);
}

// hyper, c, then per tensor p g m v p' m' v': adamw of each
SHARDC_KERNEL(adamw_group) {
  int64_t k = i[A::adamw_group::k];
  const int64_t *tail = i + A::adamw_group::kNumInts;
  for (int64_t j = 0; j < k; ++j) {
    void **t = b + 2 + 7 * j;
    void *bufs[9] = {t[0], t[1], t[2], t[3], b[0], b[1], t[4], t[5], t[6]};
    int64_t ints[A::adamw::kNumInts];
    ints[A::adamw::n] = tail[2 * j];
    ints[A::adamw::is_1d] = tail[2 * j + 1];
    shardc_k_adamw(nullptr, bufs, ints, f, stream);
  }
  launched(ctx, stream);
}

// p', buf' [n] = SGD(p, g * c[], buf) with hyper[kHyperSize]
SHARDC_KERNEL(sgd) {
  int64_t n = i[A::sgd::n];
  bool is1D = i[A::sgd::is_1d];
  const float *p = F(b[0]), *g = F(b[1]), *buf = F(b[2]), *h = F(b[3]);
  float coef = F(b[4])[0];
  float *p2 = F(b[5]), *buf2 = F(b[6]);
  shardc::runtime::SGDScalars s = shardc::runtime::sgdScalars(h, is1D);
  for (int64_t k = 0; k < n; ++k)
    shardc::runtime::sgdUpdate(s, g[k] * coef, p[k], buf[k], p2[k], buf2[k]);
  launched(ctx, stream);
}

//===----------------------------------------------------------------------===//
// The vocabulary-parallel embedding and loss (--tp): rank r holds rows
// [r R, (r + 1) R) of the embedding table and the LM head.
//===----------------------------------------------------------------------===//

// ids[N] (int32), tp_index[1] -> local[N] (int32), mask[N]: id - r rows and 1
// where that is one of this rank's rows, else 0 and 0
SHARDC_KERNEL(vocab_part) {
  int64_t N = i[A::vocab_part::N], rows = i[A::vocab_part::rows];
  const int32_t *ids = I32(b[0]);
  int64_t first = int64_t(I32(b[1])[0]) * rows;
  auto *local = static_cast<int32_t *>(b[2]);
  float *mask = F(b[3]);
  for (int64_t n = 0; n < N; ++n) {
    int64_t k = int64_t(ids[n]) - first;
    bool mine = k >= 0 && k < rows;
    local[n] = mine ? int32_t(k) : 0;
    mask[n] = mine ? 1.0f : 0.0f;
  }
  launched(ctx, stream);
}

// logits[N,V] (this rank's columns [r V, (r + 1) V)), t[N], tp_index[1] ->
// stats[N,2]: each row's logsumexp, and its target's logit where the target
// is one of this rank's columns (else 0)
SHARDC_KERNEL(vocab_ce_stats) {
  int64_t N = i[A::vocab_ce_stats::N], V = i[A::vocab_ce_stats::V];
  const float *logits = F(b[0]);
  const int32_t *targets = I32(b[1]);
  int64_t first = int64_t(I32(b[2])[0]) * V;
  float *stats = F(b[3]);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float *row = logits + n * V;
    thread_local std::vector<float> scratch;
    scratch.resize(V);
    float mx = rowMax(row, V);
    double sum = expSum(row, V, mx, scratch.data());
    int64_t t = int64_t(targets[n]) - first;
    stats[2 * n] = float(std::log(sum) + mx);
    stats[2 * n + 1] = t >= 0 && t < V ? row[t] : 0.0f;
  }
  launched(ctx, stream);
}

using shardc::runtime::vocabOwner;
using shardc::runtime::vocabWholeRow;

// t[N], stats[tp,N,2], tp_index[1] -> loss[]: the mean over this rank's
// tokens (not ignored) of the whole rows' logsumexp less the target's logit
SHARDC_KERNEL(vocab_ce) {
  namespace K = A::vocab_ce;
  int64_t N = i[K::N], seq = i[K::seq], tp = i[K::tp],
          ignore = i[K::ignore_index];
  const int32_t *targets = I32(b[0]);
  const float *stats = F(b[1]);
  int64_t rank = I32(b[2])[0];
  double total = 0;
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (vocabOwner(n, seq, tp) != rank || targets[n] == ignore)
      continue;
    double lse, target;
    vocabWholeRow(stats, N, tp, n, lse, target);
    total += lse - target;
    ++count;
  }
  F(b[3])[0] = count ? float(total / double(count)) : NAN;
  launched(ctx, stream);
}

// logits[N,V], t[N], stats[tp,N,2], tp_index[1], dloss[] -> dlogits[N,V]:
// dloss (softmax - onehot) on this rank's columns over the row's owner's
// count of targets, zero rows for ignored targets
SHARDC_KERNEL(vocab_ce_grad) {
  namespace K = A::vocab_ce_grad;
  int64_t N = i[K::N], V = i[K::V], seq = i[K::seq], tp = i[K::tp],
          ignore = i[K::ignore_index];
  const float *logits = F(b[0]);
  const int32_t *targets = I32(b[1]);
  const float *stats = F(b[2]);
  int64_t first = int64_t(I32(b[3])[0]) * V;
  float dloss = F(b[4])[0];
  float *dl = F(b[5]);
  std::vector<int64_t> count(size_t(tp), 0);
  for (int64_t n = 0; n < N; ++n) {
    int64_t t = targets[n];
    if (t == ignore)
      continue;
    if (t < 0 || t >= V * tp)
      fatal("vocab_ce_grad: a target is outside the vocabulary of %lld",
            (long long)(V * tp));
    ++count[size_t(vocabOwner(n, seq, tp))];
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float *out = dl + n * V;
    if (targets[n] == ignore) {
      std::memset(out, 0, size_t(V) * sizeof(float));
      continue;
    }
    double lse, target;
    vocabWholeRow(stats, N, tp, n, lse, target);
    float scale = dloss / float(count[size_t(vocabOwner(n, seq, tp))]);
    const float *row = logits + n * V;
    float shift = float(lse);
    for (int64_t v = 0; v < V; ++v)
      out[v] = fastExp(row[v] - shift) * scale;
    int64_t t = int64_t(targets[n]) - first;
    if (t >= 0 && t < V)
      out[t] -= scale;
  }
  launched(ctx, stream);
}
