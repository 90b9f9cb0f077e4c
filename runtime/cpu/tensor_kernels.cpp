//===- tensor_kernels.cpp - generic tensor kernels of imported models -----===//
//
// Elementwise math, selection, broadcasting, batched GEMMs and data movement:
// what ONNX graphs are made of besides the fused transformer ops. The
// elementwise functions compute in double and round once, as ONNX Runtime's
// f32 results are expected to be correctly rounded to within an ulp.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernel_util.h"
#include "runtime/cpu/typed.h"
#include "runtime/kernels.h"
#include "runtime/math.h"
#include "runtime/runtime.h"

#include "runtime/cpu/gemm.h"

#include <cmath>
#include <cstring>

namespace A = shardc::abi;
using shardc::runtime::fatal;
using shardc::runtime::cpu::AsF32;
using shardc::runtime::cpu::broadcastBinary;
using shardc::runtime::cpu::broadcastExtent;
using shardc::runtime::cpu::broadcastRows;
using shardc::runtime::cpu::F;
using shardc::runtime::cpu::sgemm;
using shardc::runtime::cpu::trailingStart;

// a, b broadcast to y[dims] -> y = a - b
SHARDC_KERNEL(sub) {
  broadcastBinary<A::KernelId::sub>(b, i,
                                    [](float x, float y) { return x - y; });
  launched(ctx, stream);
}

// a, b broadcast to y[dims] -> y = a / b
SHARDC_KERNEL(div) {
  broadcastBinary<A::KernelId::div>(b, i,
                                    [](float x, float y) { return x / y; });
  launched(ctx, stream);
}

// a, b broadcast to y[dims] -> y = a^b
SHARDC_KERNEL(pow) {
  broadcastBinary<A::KernelId::pow>(b, i, [](float x, float y) {
    // x^2 and x^0.5 are common (norms): exact forms, as PyTorch uses.
    if (y == 2.0f)
      return x * x;
    return float(std::pow(double(x), double(y)));
  });
  launched(ctx, stream);
}

// c (one byte per bool), a, b broadcast to y[dims] -> y = c ? a : b
SHARDC_KERNEL(where) {
  const uint8_t *c = static_cast<const uint8_t *>(b[0]);
  const float *x = F(b[1]), *y = F(b[2]);
  float *out = F(b[3]);
  broadcastRows<A::KernelId::where>(
      i, [&](int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
        for (int64_t k = 0; k < n; ++k)
          out[o + k] = c[off[0] + k * st[0]] ? x[off[1] + k * st[1]]
                                             : y[off[2] + k * st[2]];
      });
  launched(ctx, stream);
}

// a, b broadcast to y[dims] (bool) -> y = a == b, compared as `dtype`
SHARDC_KERNEL(equal) {
  // The dtype code follows the tail dims[R] astr[R] bstr[R].
  int64_t dtype = i[trailingStart(A::KernelId::equal, i)];
  uint8_t *out = static_cast<uint8_t *>(b[2]);
  auto compare = [&](auto *x, auto *y) {
    broadcastRows<A::KernelId::equal>(
        i, [&](int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
          for (int64_t k = 0; k < n; ++k)
            out[o + k] = x[off[0] + k * st[0]] == y[off[1] + k * st[1]];
        });
  };
  if (dtype == A::kF32)
    compare(F(b[0]), F(b[1]));
  else if (dtype == A::kI32)
    compare(static_cast<const int32_t *>(b[0]),
            static_cast<const int32_t *>(b[1]));
  else if (dtype == A::kBool)
    compare(static_cast<const uint8_t *>(b[0]),
            static_cast<const uint8_t *>(b[1]));
  else
    fatal("equal: dtype code %lld is not supported", (long long)dtype);
  launched(ctx, stream);
}

// y[n] = fn(x[n]), fn an abi::UnaryFn code
SHARDC_KERNEL(unary) {
  int64_t n = i[A::unary::n], fn = i[A::unary::fn];
  if (!shardc::runtime::isUnaryFn(fn))
    fatal("unary: unknown function code %lld", (long long)fn);
  const float *x = F(b[0]);
  float *y = F(b[1]);
  // The math is runtime/math.h's, shared with the CUDA kernel.
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t k = 0; k < n; ++k)
    y[k] = float(shardc::runtime::unaryFn(fn, double(x[k])));
  launched(ctx, stream);
}

// x[n], y[n] = fn(x), dy[n] -> dx[n] = dy fn'(x)
SHARDC_KERNEL(unary_grad) {
  int64_t n = i[A::unary_grad::n], fn = i[A::unary_grad::fn];
  if (!shardc::runtime::isUnaryFn(fn))
    fatal("unary_grad: unknown function code %lld", (long long)fn);
  const float *x = F(b[0]), *y = F(b[1]), *dy = F(b[2]);
  float *dx = F(b[3]);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t k = 0; k < n; ++k)
    dx[k] = float(double(dy[k]) * shardc::runtime::unaryFnDerivative(
                                      fn, double(x[k]), double(y[k])));
  launched(ctx, stream);
}

// x broadcast to y[dims] (element strides xstr)
SHARDC_KERNEL(broadcast) {
  const float *x = F(b[0]);
  float *y = F(b[1]);
  broadcastRows<A::KernelId::broadcast>(
      i, [&](int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
        for (int64_t k = 0; k < n; ++k)
          y[o + k] = x[off[0] + k * st[0]];
      });
  launched(ctx, stream);
}

// op(a)[.., M,K] @ op(b)[.., K,N] -> c[batch[R],M,N]; a [.., K,M] with ta, b
// [.., N,K] with tb; the batch of a and b at matrix strides astr, bstr
SHARDC_KERNEL(batch_matmul) {
  int64_t M = i[A::batch_matmul::M], K = i[A::batch_matmul::K],
          N = i[A::batch_matmul::N], R = i[A::batch_matmul::R];
  bool ta = i[A::batch_matmul::ta] != 0, tb = i[A::batch_matmul::tb] != 0;
  const int64_t *dims = i + A::batch_matmul::kNumInts, *as = dims + R,
                *bs = as + R;
  int64_t batches = 1;
  for (int64_t d = 0; d < R; ++d)
    batches *= dims[d];
  const float *a = F(b[0]), *bm = F(b[1]);
  float *c = F(b[2]);
  for (int64_t p = 0; p < batches; ++p) {
    // Matrix offsets of batch p in a and b (0 stride where broadcast).
    int64_t rest = p, ao = 0, bo = 0;
    for (int64_t d = R - 1; d >= 0; --d) {
      int64_t idx = rest % dims[d];
      rest /= dims[d];
      ao += idx * as[d];
      bo += idx * bs[d];
    }
    sgemm(ta, tb, M, N, K, 1.0f, a + ao * M * K, ta ? M : K, bm + bo * K * N,
          tb ? K : N, 0.0f, c + p * M * N, N);
  }
  launched(ctx, stream);
}

// x[outer,n_x,inner] -> y[outer,n_y,inner] at start:start+n_x of dimension 1
static void concat_partF32(void *ctx, void **b, const int64_t *i,
                           const double *f, int64_t stream) {
  int64_t outer = i[A::concat_part::outer], nx = i[A::concat_part::n_x],
          ny = i[A::concat_part::n_y], start = i[A::concat_part::start],
          inner = i[A::concat_part::inner];
  const float *x = F(b[0]);
  float *y = F(b[1]);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(y + (o * ny + start) * inner, x + o * nx * inner,
                size_t(nx * inner) * sizeof(float));
}

// On f32 or bf16 (f32 math, one rounding per output: runtime/cpu/typed.h).
SHARDC_KERNEL(concat_part) {
  namespace K = A::concat_part;
  int64_t outer = i[K::outer], inner = i[K::inner];
  AsF32 t(b, 2, i[K::dtype], "concat_part");
  t.in(0, outer * i[K::n_x] * inner);
  t.inout(1, outer * i[K::n_y] * inner);
  concat_partF32(ctx, t.buffers(), i, f, stream);
  t.finish();
  launched(ctx, stream);
}

// x[batch,rows,cols] -> y, x where c - r >= k (upper) or c - r <= k, else 0
// x[n] -> y[n] = x > 0 ? x : alpha x (f32 arithmetic, as PyTorch)
SHARDC_KERNEL(leaky_relu) {
  int64_t n = i[A::leaky_relu::n];
  float alpha = float(f[A::leaky_relu::f::alpha]);
  const float *x = F(b[0]);
  float *y = F(b[1]);
  for (int64_t k = 0; k < n; ++k)
    y[k] = x[k] > 0 ? x[k] : x[k] * alpha;
  launched(ctx, stream);
}

// x[n], dy[n] -> dx[n] = x > 0 ? dy : alpha dy (alpha at 0, as PyTorch)
SHARDC_KERNEL(leaky_relu_grad) {
  int64_t n = i[A::leaky_relu_grad::n];
  float alpha = float(f[A::leaky_relu_grad::f::alpha]);
  const float *x = F(b[0]), *dy = F(b[1]);
  float *dx = F(b[2]);
  for (int64_t k = 0; k < n; ++k)
    dx[k] = x[k] > 0 ? dy[k] : dy[k] * alpha;
  launched(ctx, stream);
}

SHARDC_KERNEL(trilu) {
  int64_t batch = i[A::trilu::batch], rows = i[A::trilu::rows],
          cols = i[A::trilu::cols], upper = i[A::trilu::upper],
          k = i[A::trilu::k];
  const float *x = F(b[0]);
  float *y = F(b[1]);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        int64_t at = (p * rows + r) * cols + c;
        bool keep = upper ? c - r >= k : c - r <= k;
        y[at] = keep ? x[at] : 0.0f;
      }
  launched(ctx, stream);
}
