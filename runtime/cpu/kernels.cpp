//===- kernels.cpp - CPU backend kernels (OpenBLAS for GEMMs) -------------===//
//
// Reductions accumulate in double so that results track PyTorch's f32
// numerics closely; GEMMs are OpenBLAS sgemm.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels.h"
#include "runtime/runtime.h"
#include "runtime/cpu/fastmath.h"
#include "runtime/cpu/kernel_util.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

using shardc::runtime::expSum;
using shardc::runtime::bf16ToFloat;
using shardc::runtime::fastExp;
using shardc::runtime::floatToBf16;
using shardc::runtime::rowMax;
using shardc::runtime::fastSigmoid;
using shardc::runtime::fastTanh;
using shardc::runtime::fatal;

using shardc::runtime::cpu::F;
using shardc::runtime::cpu::I32;
using shardc::runtime::cpu::broadcastBinary;

namespace {

/// y = x @ op(w) for row-major x [M,K]; w [N,K] (transposed) or [K,N].
void gemm(const float *x, const float *w, float *y, int64_t M, int64_t K,
          int64_t N, bool inOut, float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, inOut ? CblasNoTrans : CblasTrans,
              M, N, K, 1.0f, x, K, w, inOut ? N : K, beta, y, N);
}

} // namespace

SHARDC_KERNEL(embedding) {
  int64_t N = i[0], V = i[1], C = i[2];
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
  launched(ctx, stream);
}

SHARDC_KERNEL(linear) {
  int64_t M = i[0], K = i[1], N = i[2];
  bool inOut = i[3], hasBias = i[4];
  float *y = F(b[hasBias ? 3 : 2]);
  if (hasBias) {
    const float *bias = F(b[2]);
    for (int64_t m = 0; m < M; ++m)
      std::memcpy(y + m * N, bias, N * sizeof(float));
  }
  gemm(F(b[0]), F(b[1]), y, M, K, N, inOut, hasBias ? 1.0f : 0.0f);
  launched(ctx, stream);
}

SHARDC_KERNEL(add) {
  broadcastBinary(b, i, [](float x, float y) { return x + y; });
  launched(ctx, stream);
}

SHARDC_KERNEL(mul) {
  broadcastBinary(b, i, [](float x, float y) { return x * y; });
  launched(ctx, stream);
}

SHARDC_KERNEL(layer_norm) {
  int64_t M = i[0], C = i[1];
  bool hasBias = i[2];
  float eps = float(f[0]);
  const float *x = F(b[0]), *w = F(b[1]);
  const float *bias = hasBias ? F(b[2]) : nullptr;
  float *y = F(b[hasBias ? 3 : 2]);
#pragma omp parallel for schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    const float *row = x + m * C;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c)
      mean += row[c];
    mean /= C;
    for (int64_t c = 0; c < C; ++c)
      var += (row[c] - mean) * (row[c] - mean);
    var /= C;
    float rstd = float(1.0 / std::sqrt(var + eps));
    for (int64_t c = 0; c < C; ++c) {
      float v = float(row[c] - mean) * rstd * w[c];
      y[m * C + c] = bias ? v + bias[c] : v;
    }
  }
  launched(ctx, stream);
}

SHARDC_KERNEL(rms_norm) {
  int64_t M = i[0], C = i[1];
  float eps = float(f[0]);
  const float *x = F(b[0]), *w = F(b[1]);
  float *y = F(b[2]);
  for (int64_t m = 0; m < M; ++m) {
    const float *row = x + m * C;
    double ss = 0;
    for (int64_t c = 0; c < C; ++c)
      ss += double(row[c]) * row[c];
    float rstd = float(1.0 / std::sqrt(ss / C + eps));
    for (int64_t c = 0; c < C; ++c)
      y[m * C + c] = w[c] * (row[c] * rstd);
  }
  launched(ctx, stream);
}

SHARDC_KERNEL(gelu) {
  int64_t n = i[0];
  bool tanhForm = i[1];
  const float *x = F(b[0]);
  float *y = F(b[1]);
  const float kAlpha = std::sqrt(2.0f / float(M_PI));
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < n; ++k) {
    float v = x[k];
    y[k] = tanhForm
               ? 0.5f * v * (1.0f + fastTanh(kAlpha * (v + 0.044715f * v * v * v)))
               : 0.5f * v * (1.0f + std::erf(v * float(M_SQRT1_2)));
  }
  launched(ctx, stream);
}

SHARDC_KERNEL(silu) {
  int64_t n = i[0];
  const float *x = F(b[0]);
  float *y = F(b[1]);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < n; ++k)
    y[k] = x[k] * fastSigmoid(x[k]);
  launched(ctx, stream);
}

SHARDC_KERNEL(rotary) {
  int64_t B = i[0], H = i[1], T = i[2], D = i[3], half = D / 2;
  bool inverse = i[4];
  double theta = f[0];
  const float *x = F(b[0]);
  float *y = F(b[1]);
  // cos/sin tables [T, D/2]; the inverse frequencies are formed in f32 as in
  // Hugging Face's LlamaRotaryEmbedding.
  std::vector<float> cosT(T * half), sinT(T * half);
  for (int64_t k = 0; k < half; ++k) {
    float invFreq = 1.0f / float(std::pow(theta, double(2 * k) / double(D)));
    for (int64_t t = 0; t < T; ++t) {
      float angle = float(t) * invFreq;
      cosT[t * half + k] = std::cos(angle);
      sinT[t * half + k] = inverse ? -std::sin(angle) : std::sin(angle);
    }
  }
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t t = 0; t < T; ++t) {
      const float *xr = x + (bh * T + t) * D;
      float *yr = y + (bh * T + t) * D;
      for (int64_t k = 0; k < half; ++k) {
        float c = cosT[t * half + k], s = sinT[t * half + k];
        float a = xr[k], bb = xr[k + half];
        yr[k] = a * c - bb * s;
        yr[k + half] = bb * c + a * s;
      }
    }
  launched(ctx, stream);
}

SHARDC_KERNEL(attention) {
  int64_t B = i[0], H = i[1], G = i[2], T = i[3], S = i[4], D = i[5];
  bool causal = i[6];
  float scale = float(f[0]);
  const float *q = F(b[0]), *k = F(b[1]), *v = F(b[2]);
  float *o = F(b[3]);
  int64_t group = H / G;
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    int64_t bi = bh / H, h = bh % H;
    std::vector<float> scores(T * S);
    {
      const float *qh = q + (bi * H + h) * T * D;
      const float *kh = k + (bi * G + h / group) * S * D;
      const float *vh = v + (bi * G + h / group) * S * D;
      float *oh = o + (bi * H + h) * T * D;
      // scores [T,S] = scale * q k^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, S, D, scale, qh,
                  D, kh, D, 0.0f, scores.data(), S);
      for (int64_t t = 0; t < T; ++t) {
        float *row = scores.data() + t * S;
        int64_t valid = causal ? t + 1 : S;
        float mx = rowMax(row, valid);
        double sum = expSum(row, valid, mx, row);
        float inv = float(1.0 / sum);
        for (int64_t s = 0; s < valid; ++s)
          row[s] *= inv;
        for (int64_t s = valid; s < S; ++s)
          row[s] = 0.0f;
      }
      // o [T,D] = p v
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, S, 1.0f,
                  scores.data(), S, vh, D, 0.0f, oh, D);
    }
  }
  launched(ctx, stream);
}

SHARDC_KERNEL(softmax) {
  int64_t outer = i[0], n = i[1], inner = i[2];
  const float *x = F(b[0]);
  float *y = F(b[1]);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const float *xs = x + o * n * inner + in;
      float *ys = y + o * n * inner + in;
      float mx = xs[0];
      for (int64_t k = 1; k < n; ++k)
        mx = std::max(mx, xs[k * inner]);
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        ys[k * inner] = fastExp(xs[k * inner] - mx);
        sum += ys[k * inner];
      }
      float inv = float(1.0 / sum);
      for (int64_t k = 0; k < n; ++k)
        ys[k * inner] *= inv;
    }
  launched(ctx, stream);
}

SHARDC_KERNEL(transpose) {
  int64_t R = i[0];
  const int64_t *dims = i + 1, *perm = i + 1 + R;
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
  launched(ctx, stream);
}

SHARDC_KERNEL(slice) {
  int64_t outer = i[0], n = i[1], start = i[2], size = i[3], inner = i[4];
  const float *x = F(b[0]);
  float *y = F(b[1]);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(y + o * size * inner, x + (o * n + start) * inner,
                size * inner * sizeof(float));
  launched(ctx, stream);
}

SHARDC_KERNEL(cross_entropy) {
  int64_t N = i[0], V = i[1], ignore = i[2];
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

SHARDC_KERNEL(copy) {
  std::memcpy(b[1], b[0], size_t(i[0]));
  launched(ctx, stream);
}

SHARDC_KERNEL(cast) {
  // Codes: 0 f32, 1 bf16, 3 i32, 4 bool (one byte); floats to integers
  // truncate toward zero, anything to bool is != 0.
  int64_t n = i[0], from = i[1], to = i[2];
  auto load = [&](int64_t k) -> float {
    switch (from) {
    case 0:
      return F(b[0])[k];
    case 1:
      return bf16ToFloat(static_cast<const uint16_t *>(b[0])[k]);
    case 3:
      return float(static_cast<const int32_t *>(b[0])[k]);
    case 4:
      return float(static_cast<const uint8_t *>(b[0])[k]);
    }
    return 0.0f;
  };
  if ((from != 0 && from != 1 && from != 3 && from != 4) ||
      (to != 0 && to != 1 && to != 3 && to != 4))
    fatal("cast: dtype codes %lld to %lld are not supported on the CPU "
          "backend (f32, bf16, i32, bool)",
          (long long)from, (long long)to);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t k = 0; k < n; ++k) {
    float v = load(k);
    if (to == 0)
      F(b[1])[k] = v;
    else if (to == 1)
      static_cast<uint16_t *>(b[1])[k] = floatToBf16(v);
    else if (to == 3)
      static_cast<int32_t *>(b[1])[k] = int32_t(v);
    else
      static_cast<uint8_t *>(b[1])[k] = v != 0.0f;
  }
  launched(ctx, stream);
}
