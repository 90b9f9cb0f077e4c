//===- float8.cpp - the CPU's float8 kernels (--float8) -------------------===//
//
// torchao's float8 training on the CPU, exactly: cast_fp8 rounds each
// element of its operand, scaled, to e4m3 or e5m2 (runtime::floatToFp8, the
// math CUDA's cast kernel shares) and stores the byte (in q's layout, and
// with `both` in q's transpose too); matmul_fp8 widens the bytes and
// multiplies in f32 with oneDNN's sgemm: tensorwise, the raw values, the
// sum then times sa[1] sb[1] (the scales' reciprocals, as cuBLASLt's scale
// pointers apply them); rowwise, the values divided by their rows' scales
// (torchao's emulated _scaled_mm: mm(a.float() / sa, b.float() / sb)). The
// shapes are kernels.def's.
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/kernel_util.h"
#include "runtime/cpu/typed.h"
#include "runtime/kernels.h"
#include "runtime/math.h"

#include <cmath>
#include <vector>

using namespace shardc::runtime;
using namespace shardc::runtime::cpu;
namespace A = shardc::abi;

namespace {

/// Element (r, c) of x [R, C] in f32 (bf16 widened exactly).
struct Rows {
  const void *x;
  bool bf16;
  int64_t C;
  float at(int64_t r, int64_t c) const {
    int64_t k = r * C + c;
    return bf16 ? bf16ToFloat(BF16(const_cast<void *>(x))[k])
                : static_cast<const float *>(x)[k];
  }
};

/// The amax of each of q's rows: x's rows [R, C], or x's columns when
/// trans (q is then [C, R]); one amax of everything when !rowwise.
std::vector<float> amaxes(const Rows &x, int64_t R, int64_t C, bool rowwise,
                          bool trans) {
  std::vector<float> amax(rowwise ? (trans ? C : R) : 1, 0.0f);
#pragma omp parallel for schedule(static) if (R * C >= kParallelMin && !trans)
  for (int64_t r = 0; r < R; ++r) {
    float m = 0.0f;
    for (int64_t c = 0; c < C; ++c) {
      float a = std::fabs(x.at(r, c));
      if (rowwise && trans)
        amax[c] = std::fmax(amax[c], a); // trans: serial, see the pragma
      else
        m = std::fmax(m, a);
    }
    if (rowwise && !trans)
      amax[r] = m;
    else if (!rowwise) {
#pragma omp critical
      amax[0] = std::fmax(amax[0], m);
    }
  }
  return amax;
}

/// q = fp8(x * its scale): x's rows [R, C] into q [R, C], or into q [C, R]
/// when trans; with qt (tensorwise, !trans: cast_fp8's `both`) each byte
/// also into qt [C, R], q transposed. The scale of q's row (scale[R] or,
/// with trans, scale[C]) when rowwise, else scale[0].
void castRows(const Rows &x, int64_t R, int64_t C, const float *scale,
              bool rowwise, bool trans, int64_t format, uint8_t *q,
              uint8_t *qt) {
#pragma omp parallel for schedule(static) if (R * C >= kParallelMin)
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      // q's row: x's row r, or x's column c when transposed.
      float s = rowwise ? scale[trans ? c : r] : scale[0];
      uint8_t v = floatToFp8(x.at(r, c) * s, format);
      if (trans)
        q[c * R + r] = v;
      else
        q[r * C + c] = v;
      if (qt)
        qt[c * R + r] = v;
    }
}

/// A cast's format is an fp8 dtype code; `both` (q and qt from one read
/// of x) only on a tensorwise cast without trans. Otherwise fatal, naming
/// `kernel`.
void checkCast(const char *kernel, int64_t format, bool rowwise, bool trans,
               bool both) {
  if (format != A::kF8E4M3 && format != A::kF8E5M2)
    fatal("%s: format %lld is not an fp8 dtype code", kernel,
          static_cast<long long>(format));
  if (both && (rowwise || trans))
    fatal("%s: both (q and qt) is a tensorwise cast's without trans, not "
          "rowwise %d trans %d",
          kernel, int(rowwise), int(trans));
}

} // namespace

// x[R,C] (f32 or bf16) -> q[R,C] or [C,R] fp8, scale[2] = {s, 1/s} | [R] |
// [C] f32, qt[C,R] fp8 when both.
SHARDC_KERNEL(cast_fp8) {
  namespace K = A::cast_fp8;
  int64_t R = i[K::R], C = i[K::C], format = i[K::format];
  bool rowwise = i[K::rowwise], trans = i[K::trans], both = i[K::both];
  checkCast("cast_fp8", format, rowwise, trans, both);
  Rows x{b[0], i[K::dtype] == A::kBF16, C};
  std::vector<float> amax = amaxes(x, R, C, rowwise, trans);
  float *scale = F(b[2]);
  if (rowwise) {
    for (size_t k = 0; k < amax.size(); ++k)
      scale[k] = fp8Scale(amax[k], format, true);
  } else {
    scale[0] = fp8Scale(amax[0], format, false);
    scale[1] = 1.0f / scale[0]; // the dequantizing factor
  }
  castRows(x, R, C, scale, rowwise, trans, format, static_cast<uint8_t *>(b[1]),
           both ? static_cast<uint8_t *>(b[3]) : nullptr);
  launchedAs(ctx, stream, "cast_fp8");
}

// a[M,K] b[N,K] fp8, sa[2]|[M] sb[2]|[N], bias[N]? -> y[M,N] in dtype (f32
// when y_f32).
SHARDC_KERNEL(matmul_fp8) {
  namespace K = A::matmul_fp8;
  int64_t M = i[K::M], Kd = i[K::K], N = i[K::N];
  bool rowwise = i[K::rowwise], hasBias = i[K::has_bias], yF32 = i[K::y_f32];
  const float *sa = F(b[2]), *sb = F(b[3]);
  // The operands widened: tensorwise as they are (the scales multiply the
  // sum, as cuBLASLt's scale pointers do), rowwise divided by their rows'
  // scales (torchao's emulation).
  auto widen = [&](void *q, const float *scale, int64_t rows, int64_t format) {
    std::vector<float> out(rows * Kd);
    const auto *bytes = static_cast<const uint8_t *>(q);
#pragma omp parallel for schedule(static) if (rows * Kd >= kParallelMin)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < Kd; ++k) {
        float v = fp8ToFloat(bytes[r * Kd + k], format);
        out[r * Kd + k] = rowwise ? v / scale[r] : v;
      }
    return out;
  };
  std::vector<float> a = widen(b[0], sa, M, i[K::format_a]);
  std::vector<float> w = widen(b[1], sb, N, i[K::format_b]);
  // bias? y: through AsF32, so that a bf16 y is rounded once (a y_f32 y is
  // written as it is).
  void **io = b + 4;
  int64_t yk = hasBias ? 1 : 0;
  AsF32 t(io, yk + 1, i[K::dtype], "matmul_fp8");
  if (hasBias)
    t.in(0, N);
  if (!yF32)
    t.out(yk, M * N);
  float *y = F(t.buffers()[yk]);
  sgemm(false, true, M, N, Kd, 1.0f, a.data(), Kd, w.data(), Kd, 0.0f, y, N);
  if (!rowwise) {
    // The sum times the reciprocals' product (in f32, first). A pass of
    // its own: the product is rounded before the bias is added (no FMA).
    float s = sa[1] * sb[1];
#pragma omp parallel for schedule(static) if (M * N >= kParallelMin)
    for (int64_t k = 0; k < M * N; ++k)
      y[k] *= s;
  }
  if (hasBias) {
    // torchao adds the bias after the GEMM's output is rounded to its dtype.
    const float *bias = F(t.buffers()[0]);
    bool round = t.bf16() && !yF32;
#pragma omp parallel for schedule(static) if (M * N >= kParallelMin)
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < N; ++c) {
        float v = y[r * N + c];
        y[r * N + c] = (round ? roundToBf16(v) : v) + bias[c];
      }
  }
  t.finish();
  launchedAs(ctx, stream, "matmul_fp8");
}

float shardc::runtime::cpu::amaxOf(const void *x, bool bf16, int64_t n) {
  Rows rows{x, bf16, n};
  float m = 0.0f;
#pragma omp parallel for schedule(static) reduction(max : m) if (n >= kParallelMin)
  for (int64_t e = 0; e < n; ++e)
    m = std::fmax(m, std::fabs(rows.at(0, e)));
  return m;
}

// The float8 all-gather (rt-float8-all-gather).

// x_1..x_k (dtype) -> amax[k] f32: amax_j = max |x_j|.
SHARDC_KERNEL(amax_group) {
  namespace K = A::amax_group;
  int64_t k = i[K::k];
  bool bf16 = i[K::dtype] == A::kBF16;
  const int64_t *n = i + K::kNumInts;
  float *amax = F(b[k]);
  for (int64_t j = 0; j < k; ++j)
    amax[j] = amaxOf(b[j], bf16, n[j]);
  launchedAs(ctx, stream, "amax_group");
}

// amax[P,k] -> scale[k,2] = {s, 1/s}, s = fp8Scale(max over p, rounded to
// amax_dtype).
SHARDC_KERNEL(fp8_scales) {
  namespace K = A::fp8_scales;
  int64_t P = i[K::P], k = i[K::k], format = i[K::format];
  bool bf16 = i[K::amax_dtype] == A::kBF16;
  const float *amax = F(b[0]);
  float *scale = F(b[1]);
  for (int64_t j = 0; j < k; ++j) {
    float m = 0.0f;
    for (int64_t p = 0; p < P; ++p)
      m = std::fmax(m, amax[p * k + j]);
    scale[2 * j] = fp8Scale(bf16 ? roundToBf16(m) : m, format, false);
    scale[2 * j + 1] = 1.0f / scale[2 * j];
  }
  launchedAs(ctx, stream, "fp8_scales");
}

// x[R,C] (dtype), scale[2] -> q[R,C] (or [C,R] when trans) fp8 =
// fp8(x * scale[0]), and qt[C,R] when both: cast_fp8's cast with its scale
// given.
SHARDC_KERNEL(cast_fp8_scaled) {
  namespace K = A::cast_fp8_scaled;
  int64_t R = i[K::R], C = i[K::C], format = i[K::format];
  bool trans = i[K::trans], both = i[K::both];
  checkCast("cast_fp8_scaled", format, false, trans, both);
  Rows x{b[0], i[K::dtype] == A::kBF16, C};
  castRows(x, R, C, F(b[1]), false, trans, format, static_cast<uint8_t *>(b[2]),
           both ? static_cast<uint8_t *>(b[3]) : nullptr);
  launchedAs(ctx, stream, "cast_fp8_scaled");
}

// q[R,C] -> t[C,R], one byte an element.
SHARDC_KERNEL(transpose_fp8) {
  namespace K = A::transpose_fp8;
  int64_t R = i[K::R], C = i[K::C];
  const auto *q = static_cast<const uint8_t *>(b[0]);
  auto *t = static_cast<uint8_t *>(b[1]);
#pragma omp parallel for schedule(static) if (R * C >= kParallelMin)
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      t[c * R + r] = q[r * C + c];
  launchedAs(ctx, stream, "transpose_fp8");
}
