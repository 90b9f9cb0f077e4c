//===- float8.cu - CUDA float8 casts and the FP8 product's scaling --------===//
//
// --float8 on the CUDA target (kernels.def's cast_fp8; matmul_fp8 is
// gemm.cu's cuBLASLt FP8 GEMM, whose product this file scales). The
// per-element math is runtime/math.h's, shared with the CPU kernels
// (runtime/cpu/float8.cpp), so both round alike.
//
// cast_fp8 is two launches: the scales (a block reduces each scaled row's
// amax: one block over the whole tensor for tensorwise, one a row, or one
// a column when the cast transposes), then the cast, a grid-stride loop
// that writes q in its layout (transposed stores when trans). The scaled
// product is one grid-stride loop.
//
// To do on a GPU (issue 63): the tensorwise amax as a multi-block
// reduction, 128-bit loads in the cast, a tiled transpose, and the
// tensorwise scales as cuBLASLt's A/B scale pointers instead of the
// scaling pass.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/context.h"
#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/launch.h"
#include "runtime/math.h"

#include <cstdint>

namespace A = shardc::abi;
using namespace shardc::runtime;
using namespace shardc::runtime::cuda;

namespace {

/// How cast_fp8's scales are taken: one over x, one per row of x, or one
/// per column of x (the rows of a transposed q).
enum ScaleMode { kTensor, kRows, kColumns };

// x[R,C] -> scale[1] (kTensor, one block), scale[R] (kRows, a block a row)
// or scale[C] (kColumns, a block a column) = fp8Scale(amax of its part).
template <typename T>
__global__ void fp8ScalesKernel(const T *x, int64_t R, int64_t C, int mode,
                                int64_t format, bool pow2, float *scale) {
  int64_t part = blockIdx.x;
  int64_t n = mode == kTensor ? R * C : mode == kRows ? C : R;
  float m = 0.0f;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    int64_t at = mode == kTensor ? k : mode == kRows ? part * C + k
                                                     : k * C + part;
    m = fmaxf(m, fabsf(toFloat(x[at])));
  }
  m = blockMax(m);
  if (threadIdx.x == 0)
    scale[part] = fp8Scale(m, format, pow2);
}

// x[R,C] -> q[R,C] (or [C,R] when trans) = fp8(x * its scale).
template <typename T>
__global__ void fp8CastKernel(const T *x, int64_t R, int64_t C, int mode,
                              bool trans, int64_t format, const float *scale,
                              uint8_t *q) {
  int64_t n = R * C;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = k / C, c = k % C;
    float s = scale[mode == kTensor ? 0 : mode == kRows ? r : c];
    q[trans ? c * R + r : k] = floatToFp8(toFloat(x[k]) * s, format);
  }
}

// d[M,N] f32 -> y[M,N] = d / sa / sb rounded to T, + bias[N] rounded again.
template <typename T>
__global__ void fp8ProductKernel(Fp8Product p) {
  int64_t n = p.M * p.N;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    int64_t m = k / p.N, c = k % p.N;
    float v = p.d[k] / p.sa[p.rowwise ? m : 0] / p.sb[p.rowwise ? c : 0];
    T y = fromFloat<T>(v);
    if (p.bias)
      y = fromFloat<T>(toFloat(y) + toFloat(static_cast<const T *>(p.bias)[c]));
    static_cast<T *>(p.y)[k] = y;
  }
}

// x[n] -> amax[0] = max(amax[0], max |x|): a block's max, then an atomic
// max on the bits (amax >= 0, so the int order is the float order).
template <typename T>
__global__ void fp8AmaxKernel(const T *x, int64_t n, float *amax) {
  float m = 0.0f;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(toFloat(x[k])));
  m = blockMax(m);
  if (threadIdx.x == 0)
    atomicMax(reinterpret_cast<int *>(amax), __float_as_int(m));
}

// amax[P,k] -> scale[k] = fp8Scale(max_p amax[p,j], rounded to bf16 when
// bf16), a thread a weight.
__global__ void fp8GlobalScalesKernel(const float *amax, int64_t P, int64_t k,
                                      int64_t format, bool bf16,
                                      float *scale) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < k;
       j += int64_t(gridDim.x) * blockDim.x) {
    float m = 0.0f;
    for (int64_t p = 0; p < P; ++p)
      m = fmaxf(m, amax[p * k + j]);
    scale[j] = fp8Scale(bf16 ? roundToBf16(m) : m, format, false);
  }
}

// q[R,C] -> t[C,R] bytes.
__global__ void fp8TransposeKernel(const uint8_t *q, int64_t R, int64_t C,
                                   uint8_t *t) {
  int64_t n = R * C;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x)
    t[(k % C) * R + k / C] = q[k];
}

} // namespace

void shardc::runtime::cuda::scaleFp8Product(Context &c, int64_t stream,
                                            const Fp8Product &p) {
  if (p.M * p.N == 0)
    return;
  cudaStream_t s = c.stream(stream);
  if (p.bf16)
    SHARDC_LAUNCH(fp8ProductKernel<__nv_bfloat16>, gridFor(p.M * p.N),
                  kThreads, 0, s, p);
  else
    SHARDC_LAUNCH(fp8ProductKernel<float>, gridFor(p.M * p.N), kThreads, 0,
                  s, p);
}

// x[R,C] (f32 or bf16) -> q[R,C]|[C,R] fp8, scale[1]|[R]|[C] (kernels.def)
SHARDC_CUDA_KERNEL(cast_fp8) {
  namespace K = A::cast_fp8;
  int64_t R = i[K::R], C = i[K::C], format = i[K::format];
  bool rowwise = i[K::rowwise] != 0, trans = i[K::trans] != 0;
  if (format != A::kF8E4M3 && format != A::kF8E5M2)
    fatal("cast_fp8: format %lld is not an fp8 dtype code", (long long)format);
  if (R * C == 0)
    return;
  int mode = !rowwise ? kTensor : trans ? kColumns : kRows;
  unsigned parts = unsigned(mode == kTensor ? 1 : mode == kRows ? R : C);
  cudaStream_t s = streamOf(ctx, stream);
  withDtype(i[K::dtype], "cast_fp8", [&](auto t) {
    using T = decltype(t);
    const T *x = static_cast<const T *>(b[0]);
    float *scale = F(b[2]);
    SHARDC_LAUNCH(fp8ScalesKernel<T>, parts, kThreads, 0, s, x, R, C, mode,
                  format, rowwise, scale);
    SHARDC_LAUNCH(fp8CastKernel<T>, gridFor(R * C), kThreads, 0, s, x, R, C,
                  mode, trans, format, static_cast<const float *>(scale),
                  static_cast<uint8_t *>(b[1]));
  });
}

// The float8 all-gather (kernels.def): x_1..x_k -> amax[k], a launch a
// weight (once a micro-step).
SHARDC_CUDA_KERNEL(amax_group) {
  namespace K = A::amax_group;
  int64_t k = i[K::k];
  const int64_t *n = i + K::kNumInts;
  cudaStream_t s = streamOf(ctx, stream);
  float *amax = F(b[k]);
  CUDA_CHECK(cudaMemsetAsync(amax, 0, size_t(k) * sizeof(float), s));
  withDtype(i[K::dtype], "amax_group", [&](auto t) {
    using T = decltype(t);
    for (int64_t j = 0; j < k; ++j)
      if (n[j] > 0)
        SHARDC_LAUNCH(fp8AmaxKernel<T>, gridFor(n[j]), kThreads, 0, s,
                      static_cast<const T *>(b[j]), n[j], amax + j);
  });
}

// amax[P,k] -> scale[k] (kernels.def).
SHARDC_CUDA_KERNEL(fp8_scales) {
  namespace K = A::fp8_scales;
  int64_t P = i[K::P], k = i[K::k];
  if (k == 0)
    return;
  SHARDC_LAUNCH(fp8GlobalScalesKernel, gridFor(k), kThreads, 0,
                streamOf(ctx, stream), static_cast<const float *>(F(b[0])), P,
                k, i[K::format], i[K::amax_dtype] == A::kBF16, F(b[1]));
}

// x[R,C] (f32 or bf16), scale[1] -> q[R,C]|[C,R] fp8 (kernels.def).
SHARDC_CUDA_KERNEL(cast_fp8_scaled) {
  namespace K = A::cast_fp8_scaled;
  int64_t R = i[K::R], C = i[K::C];
  if (R * C == 0)
    return;
  cudaStream_t s = streamOf(ctx, stream);
  withDtype(i[K::dtype], "cast_fp8_scaled", [&](auto t) {
    using T = decltype(t);
    // cast_fp8's cast with its one scale given.
    SHARDC_LAUNCH(fp8CastKernel<T>, gridFor(R * C), kThreads, 0, s,
                  static_cast<const T *>(b[0]), R, C, int(kTensor),
                  i[K::trans] != 0, i[K::format],
                  static_cast<const float *>(F(b[1])),
                  static_cast<uint8_t *>(b[2]));
  });
}

// q[R,C] -> t[C,R] bytes (kernels.def).
SHARDC_CUDA_KERNEL(transpose_fp8) {
  namespace K = A::transpose_fp8;
  int64_t R = i[K::R], C = i[K::C];
  if (R * C == 0)
    return;
  SHARDC_LAUNCH(fp8TransposeKernel, gridFor(R * C), kThreads, 0,
                streamOf(ctx, stream), static_cast<const uint8_t *>(b[0]), R,
                C, static_cast<uint8_t *>(b[1]));
}

void shardc::runtime::cuda::addFloat8Kernels(KernelFn *table) {
  table[int64_t(A::KernelId::cast_fp8)] = &shardc_cuda_k_cast_fp8;
  table[int64_t(A::KernelId::amax_group)] = &shardc_cuda_k_amax_group;
  table[int64_t(A::KernelId::fp8_scales)] = &shardc_cuda_k_fp8_scales;
  table[int64_t(A::KernelId::cast_fp8_scaled)] =
      &shardc_cuda_k_cast_fp8_scaled;
  table[int64_t(A::KernelId::transpose_fp8)] = &shardc_cuda_k_transpose_fp8;
}
