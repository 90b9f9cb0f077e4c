//===- cublaslt.cpp - cuBLASLt of the emulated device ---------------------===//
//
// Host versions of the cuBLASLt calls the backend makes, with the real
// declarations of cublasLt.h: matmul descriptors (transposes, epilogues,
// bias and aux pointers, compute type), column-major matrix layouts with
// batch counts and strides, preferences and the heuristic (one algorithm,
// no workspace). What the real library refuses, this one refuses, with
// NOT_SUPPORTED and the documented rule printed (cublasLt.h):
//
//   - the heuristic: an aux leading dimension unset, below D's rows or not
//     a multiple of 8, an aux batch stride not a multiple of 8, TRANSC other
//     than N, a minimum alignment preference below an operand's element;
//   - the matmul: an A, B, C or D pointer less aligned than the preference
//     (MIN_ALIGNMENT_*_BYTES, 256 by default) the algorithm was chosen for,
//     capped by what the layout's leading dimension and batch stride allow;
//     a bias or aux pointer less aligned than it was when the heuristic ran
//     (the heuristic "depends on its value to determine expected pointer
//     alignment"); a pointer not aligned to its element;
//   - SHARDC_EMU_CUBLASLT_NO_ALGO=1 (or =empty) makes every heuristic find no
//     algorithm: NOT_SUPPORTED (or SUCCESS) with 0 results, as the real one
//     does for a GEMM it has no kernel for.
//
// A matmul is enqueued on its stream and computed there by
// a reference GEMM: operands widened to f32, the CPU backend's sgemm
// (runtime/cpu/gemm.h), then the epilogue:
//
//   D = alpha op(A) op(B) + beta C          (column-major D[m,n])
//   BIAS      D += bias[m] per column
//   GELU      D = gelu_tanh(D)   (_AUX: aux = D before the GELU)
//   DGELU     D = D * gelu_tanh'(aux)   (_BGRAD: bias[m] = sum_n D); on
//             a bf16 D, D is rounded to bf16 before the product (bias
//             sums the unrounded products), as an H200's cuBLASLt 13 does
//             (test/unit CudaKernels.Bf16EpilogueRounding: 99.8% of dx bit
//             for bit; the single-rounding reading matched 74%)
//   BGRADA    bias[m] = sum over k of op(A)     (rows of D)
//   BGRADB    bias[n] = sum over k of op(B)     (columns of D)
//
// FP8 A and B (CUDA_R_8F_E4M3, _E5M2; checkFp8 refuses what Hopper's
// cuBLASLt refuses), widened exactly (runtime::fp8ToFloat); the A and B
// scale pointers (CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER, FP8 only) multiply
// the f32 sum of products by their f32 product (with beta 0).
// Data types f32 and bf16 (D, C, aux and bias as described); compute type
// CUBLAS_COMPUTE_32F (also _FAST_16BF, computed in f32), and _FAST_TF32,
// whose f32 operands are rounded to TF32 first (roundToTf32).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/gemm.h"
#include "runtime/cuda_emu/emu.h"
#include "runtime/math.h"

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Desc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasOperation_t transC = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  cudaDataType_t biasType = CUDA_R_32F;
  bool biasTypeSet = false;
  int64_t biasBatchStride = 0;
  void *aux = nullptr;
  int64_t auxLd = 0, auxBatchStride = 0;
  cudaDataType_t auxType = CUDA_R_32F;
  bool auxTypeSet = false;
  /// CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER: device f32s multiplying the
  /// product (FP8 A and B only); null: 1.
  const float *scaleA = nullptr, *scaleB = nullptr;
};

struct Layout {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t batchStride = 0;
};

cublasStatus_t fail(const std::string &why) {
  shardc::emu::report(cudaErrorInvalidValue, "cuBLASLt: " + why);
  return CUBLAS_STATUS_INVALID_VALUE;
}

/// What the real library has no algorithm for, with the documented rule.
cublasStatus_t unsupported(const std::string &why) {
  std::fprintf(stderr, "cuda-emulation: cuBLASLt: %s\n", why.c_str());
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

/// The epilogue's documented restrictions (cublasLt.h), for a D of `rows`:
/// - CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER "requires setting
///   CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD", and the GELU input matrix's
///   leading dimension "must be divisible by 8 and be no less than the number
///   of rows in the output matrix"; its batch stride "must be divisible by 8";
/// - CUBLASLT_MATMUL_DESC_TRANSC: "currently only CUBLAS_OP_N is supported".
/// cublasLt.h documents no transpose restriction for the epilogues emulated
/// (BIAS, GELU, GELU_AUX, GELU_BIAS, GELU_AUX_BIAS, DGELU, DGELU_BGRAD,
/// BGRADA, BGRADB), so none is enforced.
cublasStatus_t checkEpilogue(const Desc &d, uint64_t rows) {
  if (d.transC != CUBLAS_OP_N)
    return unsupported("CUBLASLT_MATMUL_DESC_TRANSC " +
                       std::to_string(int(d.transC)) +
                       ": only CUBLAS_OP_N is supported (cublasLt.h)");
  if (!(int(d.epilogue) & 128))
    return CUBLAS_STATUS_SUCCESS;
  if (d.auxLd % 8 != 0 || d.auxBatchStride % 8 != 0)
    return unsupported("the epilogue's aux leading dimension (" +
                       std::to_string(d.auxLd) + ") and batch stride (" +
                       std::to_string(d.auxBatchStride) +
                       ") must be multiples of 8 (cublasLt.h)");
  if (d.auxLd < int64_t(rows))
    return unsupported("the epilogue's aux leading dimension (" +
                       std::to_string(d.auxLd) +
                       ", set by CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD) must "
                       "be no less than D's rows (" +
                       std::to_string(rows) + ") (cublasLt.h)");
  return CUBLAS_STATUS_SUCCESS;
}

template <typename T>
cublasStatus_t setValue(T &field, const void *buf, size_t size,
                        const char *name) {
  if (size != sizeof(T))
    return fail(std::string(name) + " set with " + std::to_string(size) +
                " bytes, not " + std::to_string(sizeof(T)));
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

size_t typeBytes(cudaDataType_t t) {
  switch (t) {
  case CUDA_R_32F:
    return 4;
  case CUDA_R_16BF:
  case CUDA_R_16F:
    return 2;
  case CUDA_R_8F_E4M3:
  case CUDA_R_8F_E5M2:
    return 1;
  default:
    return 0;
  }
}

bool isFp8(cudaDataType_t t) {
  return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2;
}

float load(const void *p, cudaDataType_t t, int64_t k) {
  switch (t) {
  case CUDA_R_32F:
    return static_cast<const float *>(p)[k];
  case CUDA_R_16BF:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[k]);
  case CUDA_R_8F_E4M3:
  case CUDA_R_8F_E5M2:
    return shardc::runtime::fp8ToFloat(
        static_cast<const uint8_t *>(p)[k],
        t == CUDA_R_8F_E4M3 ? shardc::abi::kF8E4M3 : shardc::abi::kF8E5M2);
  default:
    return __half2float(static_cast<const __half *>(p)[k]);
  }
}

void store(void *p, cudaDataType_t t, int64_t k, float v) {
  switch (t) {
  case CUDA_R_32F:
    static_cast<float *>(p)[k] = v;
    break;
  case CUDA_R_16BF:
    static_cast<__nv_bfloat16 *>(p)[k] = __float2bfloat16(v);
    break;
  default:
    static_cast<__half *>(p)[k] = __float2half(v);
    break;
  }
}

/// cuBLASLt's GELU: the tanh form.
float gelu(float x) {
  float z = 0.7978845608f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(z));
}
float geluGrad(float x) {
  float z = 0.7978845608f * (x + 0.044715f * x * x * x);
  float t = std::tanh(z);
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * 0.7978845608f *
             (1.0f + 3.0f * 0.044715f * x * x);
}

/// f32 operands of a CUBLAS_COMPUTE_32F_FAST_TF32 matmul as the tensor
/// cores take them: TF32, 10 mantissa bits, rounded to nearest with ties
/// away from zero (PTX cvt.rna.tf32.f32); the products then accumulate in
/// f32. Other operand types are left as they are.
void roundToTf32(std::vector<float> &v, cudaDataType_t type) {
  if (type != CUDA_R_32F)
    return;
  for (float &x : v) {
    if (!std::isfinite(x))
      continue;
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    bits = (bits + 0x1000u) & ~0x1fffu;
    std::memcpy(&x, &bits, 4);
  }
}

/// A stored matrix widened to f32, column-major, leading dim = rows.
std::vector<float> widen(const void *p, const Layout &l, int64_t batch) {
  std::vector<float> out(l.rows * l.cols);
  const char *base =
      static_cast<const char *>(p) + batch * l.batchStride * typeBytes(l.type);
  for (uint64_t c = 0; c < l.cols; ++c)
    for (uint64_t r = 0; r < l.rows; ++r)
      out[c * l.rows + r] = load(base, l.type, int64_t(c * l.ld + r));
  return out;
}

//===----------------------------------------------------------------------===//
// Alignment: what an algorithm was chosen for, against the pointers given
//===----------------------------------------------------------------------===//

/// cuBLASLt's default CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, the most
/// a preference asks of a pointer.
constexpr uint64_t kMaxAlignment = 256;

/// The largest power of two dividing `v` bytes, at most 256 (0: 256).
uint64_t alignmentOf(uint64_t v) {
  return v == 0 ? kMaxAlignment : std::min(v & (~v + 1), kMaxAlignment);
}
uint64_t alignmentOf(const void *p) {
  return alignmentOf(uint64_t(reinterpret_cast<uintptr_t>(p)));
}

std::string address(const void *p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

/// The heuristic's search preferences (cublasLtMatmulPreferenceAttributes_t)
/// with cublasLt.h's defaults.
struct Preference {
  uint64_t maxWorkspace = 0;
  uint32_t minAlignment[4] = {256, 256, 256, 256}; ///< A, B, C, D
};

/// The pointers of a matmul: A, B, C, D (in the order of the preferences'
/// alignments), then the epilogue's bias and aux.
enum Operand { kA, kB, kC, kD, kBias, kAux, kNumOperands };
const char *const kOperandNames[kNumOperands] = {
    "A", "B", "C", "D", "the bias", "the aux matrix"};

/// An emulated algorithm, as cublasLtMatmulAlgo_t (8 x uint64) carries it:
/// the alignment in bytes it assumes of each operand's pointer.
struct Algo {
  uint64_t magic;
  uint64_t alignment[kNumOperands];
  uint64_t unused;
};
static_assert(sizeof(Algo) == sizeof(cublasLtMatmulAlgo_t));
constexpr uint64_t kAlgoMagic = 0x53484152444c5431; // "SHARDLT1"

int epilogueBits(const Desc &d) { return int(d.epilogue); }
bool usesBias(const Desc &d) {
  int epi = epilogueBits(d);
  return (epi & CUBLASLT_EPILOGUE_BIAS) || (epi & 16) ||
         epi == CUBLASLT_EPILOGUE_BGRADA || epi == CUBLASLT_EPILOGUE_BGRADB;
}
bool usesAux(const Desc &d) { return (epilogueBits(d) & 128) != 0; }
/// cublasLt.h: bias and GELU aux elements are D's type unless set.
cudaDataType_t biasType(const Desc &d, const Layout &dl) {
  return d.biasTypeSet ? d.biasType : dl.type;
}
cudaDataType_t auxType(const Desc &d, const Layout &dl) {
  return d.auxTypeSet ? d.auxType : dl.type;
}

/// What the leading dimension and batch stride of `l` allow an algorithm to
/// assume: CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_*_BYTES is "required for buffer
/// pointer, leading dimension, and possibly other strides" (cublasLt.h), so
/// the heuristic, which sees the layout, picks none needing more.
uint64_t layoutAlignment(const Layout &l) {
  uint64_t elem = typeBytes(l.type);
  uint64_t a = alignmentOf(uint64_t(l.ld) * elem);
  if (l.batch > 1)
    a = std::min(a, alignmentOf(uint64_t(l.batchStride) * elem));
  return a;
}

/// The algorithm the heuristic gives for `d` on layouts A, B, C, D under
/// `pref`, modelled as the strictest one it may return: the heuristic
/// excludes the algorithms needing a pointer more aligned than the
/// preference asks, so one it returns may need exactly that (capped by the
/// layout). The bias and aux pointers have no preference: the heuristic
/// "depends on its value to determine expected pointer alignment"
/// (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER and _EPILOGUE_AUX_POINTER),
/// the value they have when it runs (NULL: any alignment, so 256).
///
/// On an H100 (cuBLASLt 13, driver 580), 1024^3 GEMMs chosen with the
/// default preferences: TF32 and bf16 algorithms needed 16 bytes (A 4 bytes
/// in: NOT_SUPPORTED; a bias given 4 bytes in after the heuristic saw an
/// aligned one: NOT_SUPPORTED; a GELU_AUX aux matrix so: a misaligned-address
/// fault, error 716, on the stream), COMPUTE_32F ones 4; told the real
/// alignments, the heuristic chose 4-byte algorithms and every call ran. The
/// emulator assumes the documented bound, which covers both.
/// FP8 operands as cuBLASLt documents them for Hopper (cublasLt.h and the
/// cuBLAS guide's cublasLtMatmul FP8 requirements): A and B both fp8, not
/// both e5m2, in the "TN" format (A transposed, B not), with k and the
/// leading dimensions of A and B multiples of 16, computed in
/// CUBLAS_COMPUTE_32F into an f32 or bf16 D.
cublasStatus_t checkFp8(const Desc &d, const Layout *const l[4]) {
  bool a = isFp8(l[kA]->type), b = isFp8(l[kB]->type);
  if (!a && !b)
    return CUBLAS_STATUS_SUCCESS;
  if (a != b)
    return unsupported("an fp8 operand with a non-fp8 one");
  if (l[kA]->type == CUDA_R_8F_E5M2 && l[kB]->type == CUDA_R_8F_E5M2)
    return unsupported("FP8 with both A and B e5m2");
  if (d.transA != CUBLAS_OP_T || d.transB != CUBLAS_OP_N)
    return unsupported("FP8 GEMMs take the TN format only (A transposed, B "
                       "not)");
  uint64_t k = l[kA]->rows; // A stored [k, m] (transposed)
  if (k % 16 || l[kA]->ld % 16 || l[kB]->ld % 16)
    return unsupported("FP8 GEMMs need k (" + std::to_string(k) +
                       ") and the leading dimensions of A (" +
                       std::to_string(l[kA]->ld) + ") and B (" +
                       std::to_string(l[kB]->ld) + ") multiples of 16");
  if (d.compute != CUBLAS_COMPUTE_32F)
    return unsupported("FP8 GEMMs compute in CUBLAS_COMPUTE_32F");
  if (l[kD]->type != CUDA_R_32F && l[kD]->type != CUDA_R_16BF)
    return unsupported("an FP8 GEMM's D in f32 or bf16 (emulated)");
  return CUBLAS_STATUS_SUCCESS;
}

/// The A and B scale pointers: cublasLt.h's "if set for an unsupported
/// matrix data, scale, and compute type combination, calling
/// cublasLtMatmul() will return CUBLAS_STATUS_INVALID_VALUE"; they scale
/// FP8 operands only.
cublasStatus_t checkScales(const Desc &d, const Layout &a, const Layout &b) {
  if ((d.scaleA || d.scaleB) && !(isFp8(a.type) && isFp8(b.type)))
    return fail("CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER set for a GEMM whose "
                "A and B are not FP8");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t chooseAlgo(const Desc &d, const Layout *const l[4],
                          const Preference &pref, Algo &algo) {
  if (cublasStatus_t s = checkFp8(d, l))
    return s;
  std::memset(&algo, 0, sizeof(algo));
  algo.magic = kAlgoMagic;
  static const char *const prefNames[4] = {"A", "B", "C", "D"};
  for (int o = kA; o <= kD; ++o) {
    uint64_t elem = typeBytes(l[o]->type);
    if (pref.minAlignment[o] < elem)
      return unsupported("no algorithm for " + std::string(kOperandNames[o]) +
                         " aligned to " + std::to_string(pref.minAlignment[o]) +
                         " bytes (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_" +
                         prefNames[o] + "_BYTES): below its " +
                         std::to_string(elem) + "-byte elements");
    algo.alignment[o] =
        std::min<uint64_t>(pref.minAlignment[o], layoutAlignment(*l[o]));
  }
  const Layout &dl = *l[kD];
  algo.alignment[kBias] = algo.alignment[kAux] = kMaxAlignment;
  if (usesBias(d)) {
    uint64_t a = alignmentOf(d.bias);
    if (dl.batch > 1)
      a = std::min(a, alignmentOf(uint64_t(d.biasBatchStride) *
                                  typeBytes(biasType(d, dl))));
    algo.alignment[kBias] = a;
  }
  if (usesAux(d)) {
    uint64_t elem = typeBytes(auxType(d, dl));
    uint64_t a =
        std::min(alignmentOf(d.aux), alignmentOf(uint64_t(d.auxLd) * elem));
    if (dl.batch > 1)
      a = std::min(a, alignmentOf(uint64_t(d.auxBatchStride) * elem));
    algo.alignment[kAux] = a;
  }
  return CUBLAS_STATUS_SUCCESS;
}

/// `p`, operand `o` of elements of `elem` bytes, against the alignment
/// `algo` was chosen for.
cublasStatus_t checkAlignment(const std::string &gemm, const Algo &algo,
                              Operand o, const void *p, uint64_t elem) {
  uint64_t have = alignmentOf(p);
  std::string what = gemm + ": " + kOperandNames[o] + " at " + address(p);
  if (reinterpret_cast<uintptr_t>(p) % elem != 0)
    return unsupported(what + " is not aligned to its " + std::to_string(elem) +
                       "-byte elements");
  if (have >= algo.alignment[o])
    return CUBLAS_STATUS_SUCCESS;
  static const char *const prefNames[4] = {"A", "B", "C", "D"};
  std::string why =
      o <= kD
          ? std::string("CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_") + prefNames[o] +
                "_BYTES of the heuristic that chose it (256 by default), "
                "as far as the layout allows"
          : "the alignment of this pointer when "
            "cublasLtMatmulAlgoGetHeuristic ran, which cublasLt.h says "
            "it takes the expected alignment from";
  return unsupported(what + " is aligned to " + std::to_string(have) +
                     " bytes, below the " + std::to_string(algo.alignment[o]) +
                     " its algorithm assumes (" + why + ")");
}

/// SHARDC_EMU_CUBLASLT_NO_ALGO: "empty" for SUCCESS with no algorithm,
/// any other value but "0" for NOT_SUPPORTED; unset or "0": off.
const char *noAlgorithmInjected() {
  const char *v = std::getenv("SHARDC_EMU_CUBLASLT_NO_ALGO");
  return v && *v && std::strcmp(v, "0") != 0 ? v : nullptr;
}

struct Matmul {
  Desc d;
  Layout a, b, c, dl;
  float alpha, beta;
  const void *A, *B, *C;
  void *D;

  void run() const {
    bool ta = d.transA == CUBLAS_OP_T, tb = d.transB == CUBLAS_OP_T;
    int64_t m = int64_t(dl.rows), n = int64_t(dl.cols);
    int64_t k = int64_t(ta ? a.rows : a.cols);
    int epi = int(d.epilogue);
    bool hasBias = (epi & CUBLASLT_EPILOGUE_BIAS) && !(epi & 16);
    bool gelu = (epi & CUBLASLT_EPILOGUE_GELU) != 0;
    bool dgelu = (epi & 64) != 0;
    bool bgrad = (epi & 16) != 0;
    bool auxOut = gelu && (epi & 128);
    cudaDataType_t biasType = ::biasType(d, dl);
    cudaDataType_t auxType = ::auxType(d, dl);
    for (int64_t batch = 0; batch < dl.batch; ++batch) {
      std::vector<float> fa = widen(A, a, a.batch > 1 ? batch : 0);
      std::vector<float> fb = widen(B, b, b.batch > 1 ? batch : 0);
      if (d.compute == CUBLAS_COMPUTE_32F_FAST_TF32) {
        roundToTf32(fa, a.type);
        roundToTf32(fb, b.type);
      }
      std::vector<float> acc(size_t(m * n), 0.0f);
      if (beta != 0.0f) {
        std::vector<float> fc = widen(C, c, c.batch > 1 ? batch : 0);
        for (size_t e = 0; e < acc.size(); ++e)
          acc[e] = beta * fc[e];
      }
      // Column-major acc[m,n] = op(A) op(B) is row-major acc^T[n,m] =
      // op(B)^T op(A)^T: the CPU backend's own GEMM (runtime/cpu/gemm.h).
      if (m > 0 && n > 0 && k > 0)
        shardc::runtime::cpu::sgemm(tb, ta, n, m, k, alpha, fb.data(),
                                    int64_t(b.rows), fa.data(),
                                    int64_t(a.rows),
                                    beta != 0.0f ? 1.0f : 0.0f, acc.data(), m);
      // FP8's scaleA scaleB, their f32 product times the f32 sum (alpha
      // 1: the oneDNN GEMM's alpha is a primitive's constant, not a value
      // a call may change).
      if (d.scaleA || d.scaleB) {
        float scale = (d.scaleA ? *d.scaleA : 1.0f) *
                      (d.scaleB ? *d.scaleB : 1.0f);
        for (float &v : acc)
          v *= scale;
      }
      char *aux = static_cast<char *>(d.aux) +
                  batch * d.auxBatchStride * typeBytes(auxType);
      const char *bias = static_cast<const char *>(d.bias) +
                         batch * d.biasBatchStride * typeBytes(biasType);
      if (hasBias)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < m; ++i)
            acc[j * m + i] += load(bias, biasType, i);
      if (gelu)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < m; ++i) {
            float &v = acc[j * m + i];
            if (auxOut)
              store(aux, auxType, j * d.auxLd + i, v);
            v = ::gelu(v);
          }
      if (dgelu)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < m; ++i) {
            float &v = acc[j * m + i];
            if (dl.type == CUDA_R_16BF)
              v = shardc::runtime::roundToBf16(v);
            v *= geluGrad(load(aux, auxType, j * d.auxLd + i));
          }
      if (bgrad && dgelu) {
        for (int64_t i = 0; i < m; ++i) {
          double s = 0;
          for (int64_t j = 0; j < n; ++j)
            s += acc[j * m + i];
          store(const_cast<char *>(bias), biasType, i, float(s));
        }
      }
      if (epi == CUBLASLT_EPILOGUE_BGRADA || epi == CUBLASLT_EPILOGUE_BGRADB) {
        bool onA = epi == CUBLASLT_EPILOGUE_BGRADA;
        const std::vector<float> &src = onA ? fa : fb;
        const Layout &l = onA ? a : b;
        bool t = onA ? ta : tb;
        // op(A) is [m,k]: sum over k of row i. op(B) is [k,n]: sum over k of
        // column j.
        int64_t count = onA ? m : n;
        for (int64_t i = 0; i < count; ++i) {
          double s = 0;
          for (int64_t kk = 0; kk < k; ++kk) {
            int64_t r, col;
            if (onA) {
              r = t ? kk : i;
              col = t ? i : kk;
            } else {
              r = t ? i : kk;
              col = t ? kk : i;
            }
            s += src[col * int64_t(l.rows) + r];
          }
          store(const_cast<char *>(bias), biasType, i, float(s));
        }
      }
      char *out = static_cast<char *>(D) +
                  batch * dl.batchStride * typeBytes(dl.type);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i)
          store(out, dl.type, j * dl.ld + i, acc[j * m + i]);
    }
  }
};

/// The pointers of `mm` against the alignments `algo` assumes.
cublasStatus_t checkPointers(const Matmul &mm, const Algo &algo) {
  std::string gemm = "cublasLtMatmul of a " + std::to_string(mm.dl.rows) +
                     " x " + std::to_string(mm.dl.cols) + " D";
  struct {
    Operand o;
    const void *p;
    cudaDataType_t type;
  } const operands[] = {{kA, mm.A, mm.a.type},
                        {kB, mm.B, mm.b.type},
                        {kC, mm.C, mm.c.type},
                        {kD, mm.D, mm.dl.type}};
  for (const auto &op : operands)
    if (cublasStatus_t s =
            checkAlignment(gemm, algo, op.o, op.p, typeBytes(op.type)))
      return s;
  if (usesBias(mm.d))
    if (cublasStatus_t s = checkAlignment(gemm, algo, kBias, mm.d.bias,
                                          typeBytes(biasType(mm.d, mm.dl))))
      return s;
  if (usesAux(mm.d))
    if (cublasStatus_t s = checkAlignment(gemm, algo, kAux, mm.d.aux,
                                          typeBytes(auxType(mm.d, mm.dl))))
      return s;
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

struct cublasLtContext {
  int unused = 0;
};

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE (the emulated device printed why)";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED (the emulated device printed why)";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  default:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32 &&
      compute != CUBLAS_COMPUTE_32F_FAST_16BF)
    return fail("compute type " + std::to_string(int(compute)) +
                " is not emulated (32F, 32F_FAST_TF32, 32F_FAST_16BF)");
  if (scale != CUDA_R_32F)
    return fail("scale type " + std::to_string(int(scale)) +
                " is not emulated (CUDA_R_32F)");
  auto *d = new Desc;
  d->compute = compute;
  d->scale = scale;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<Desc *>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
  Desc &d = *reinterpret_cast<Desc *>(desc);
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return setValue(d.transA, buf, size, "TRANSA");
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return setValue(d.transB, buf, size, "TRANSB");
  case CUBLASLT_MATMUL_DESC_TRANSC:
    return setValue(d.transC, buf, size, "TRANSC");
  case CUBLASLT_MATMUL_DESC_EPILOGUE: {
    cublasStatus_t st = setValue(d.epilogue, buf, size, "EPILOGUE");
    switch (d.epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
    case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB:
      return st;
    default:
      return fail("epilogue " + std::to_string(int(d.epilogue)) +
                  " is not emulated");
    }
  }
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return setValue(d.bias, buf, size, "BIAS_POINTER");
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    d.biasTypeSet = true;
    return setValue(d.biasType, buf, size, "BIAS_DATA_TYPE");
  case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
    return setValue(d.biasBatchStride, buf, size, "BIAS_BATCH_STRIDE");
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    return setValue(d.aux, buf, size, "EPILOGUE_AUX_POINTER");
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    return setValue(d.auxLd, buf, size, "EPILOGUE_AUX_LD");
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
    return setValue(d.auxBatchStride, buf, size, "EPILOGUE_AUX_BATCH_STRIDE");
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
    d.auxTypeSet = true;
    return setValue(d.auxType, buf, size, "EPILOGUE_AUX_DATA_TYPE");
  case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
    return setValue(d.scaleA, buf, size, "A_SCALE_POINTER");
  case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
    return setValue(d.scaleB, buf, size, "B_SCALE_POINTER");
  default:
    return fail("matmul descriptor attribute " + std::to_string(int(attr)) +
                " is not emulated");
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!typeBytes(type))
    return fail("matrix type " + std::to_string(int(type)) +
                " is not emulated (f32, bf16, f16, fp8 e4m3 and e5m2)");
  if (ld < int64_t(rows))
    return fail("a leading dimension " + std::to_string(ld) +
                " below the rows " + std::to_string(rows));
  auto *l = new Layout;
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<Layout *>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                 cublasLtMatrixLayoutAttribute_t attr,
                                 const void *buf, size_t size) {
  Layout &l = *reinterpret_cast<Layout *>(layout);
  switch (attr) {
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
    return setValue(l.batch, buf, size, "BATCH_COUNT");
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
    return setValue(l.batchStride, buf, size, "STRIDED_BATCH_OFFSET");
  case CUBLASLT_MATRIX_LAYOUT_ORDER: {
    cublasLtOrder_t order;
    cublasStatus_t st = setValue(order, buf, size, "ORDER");
    if (st == CUBLAS_STATUS_SUCCESS && order != CUBLASLT_ORDER_COL)
      return fail("only column-major layouts are emulated");
    return st;
  }
  default:
    return fail("matrix layout attribute " + std::to_string(int(attr)) +
                " is not emulated");
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete reinterpret_cast<Preference *>(p);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                     cublasLtMatmulPreferenceAttributes_t attr,
                                     const void *buf, size_t size) {
  Preference &pref = *reinterpret_cast<Preference *>(p);
  switch (attr) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    return setValue(pref.maxWorkspace, buf, size, "MAX_WORKSPACE_BYTES");
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    return setValue(pref.minAlignment[kA], buf, size, "MIN_ALIGNMENT_A_BYTES");
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    return setValue(pref.minAlignment[kB], buf, size, "MIN_ALIGNMENT_B_BYTES");
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    return setValue(pref.minAlignment[kC], buf, size, "MIN_ALIGNMENT_C_BYTES");
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return setValue(pref.minAlignment[kD], buf, size, "MIN_ALIGNMENT_D_BYTES");
  default:
    return fail("matmul preference attribute " + std::to_string(int(attr)) +
                " is not emulated");
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
    cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
    cublasLtMatrixLayout_t ld, cublasLtMatmulPreference_t pref, int requested,
    cublasLtMatmulHeuristicResult_t results[], int *returned) {
  *returned = 0;
  if (requested < 1)
    return fail("the heuristic was asked for no algorithm");
  if (!pref)
    return fail("the heuristic was given no preference");
  if (const char *injected = noAlgorithmInjected()) {
    std::fprintf(stderr,
                 "cuda-emulation: cuBLASLt: no algorithm "
                 "(SHARDC_EMU_CUBLASLT_NO_ALGO=%s)\n",
                 injected);
    return std::strcmp(injected, "empty") == 0 ? CUBLAS_STATUS_SUCCESS
                                               : CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const Desc &d = *reinterpret_cast<Desc *>(desc);
  const Layout *const layouts[4] = {
      reinterpret_cast<Layout *>(la), reinterpret_cast<Layout *>(lb),
      reinterpret_cast<Layout *>(lc), reinterpret_cast<Layout *>(ld)};
  if (cublasStatus_t s = checkEpilogue(d, layouts[kD]->rows))
    return s;
  Algo algo;
  if (cublasStatus_t s =
          chooseAlgo(d, layouts, *reinterpret_cast<Preference *>(pref), algo))
    return s;
  std::memset(&results[0], 0, sizeof(results[0]));
  std::memcpy(&results[0].algo, &algo, sizeof(algo));
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc,
                              const void *alpha, const void *A,
                              cublasLtMatrixLayout_t la, const void *B,
                              cublasLtMatrixLayout_t lb, const void *beta,
                              const void *C, cublasLtMatrixLayout_t lc, void *D,
                              cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t *algoIn, void *,
                              size_t, cudaStream_t stream) {
  Matmul mm;
  mm.d = *reinterpret_cast<Desc *>(desc);
  mm.a = *reinterpret_cast<Layout *>(la);
  mm.b = *reinterpret_cast<Layout *>(lb);
  mm.c = *reinterpret_cast<Layout *>(lc);
  mm.dl = *reinterpret_cast<Layout *>(ld);
  mm.alpha = *static_cast<const float *>(alpha);
  mm.beta = *static_cast<const float *>(beta);
  mm.A = A;
  mm.B = B;
  mm.C = C;
  mm.D = D;
  bool ta = mm.d.transA == CUBLAS_OP_T, tb = mm.d.transB == CUBLAS_OP_T;
  uint64_t m = ta ? mm.a.cols : mm.a.rows, k = ta ? mm.a.rows : mm.a.cols;
  uint64_t kb = tb ? mm.b.cols : mm.b.rows, n = tb ? mm.b.rows : mm.b.cols;
  if (k != kb || m != mm.dl.rows || n != mm.dl.cols || m != mm.c.rows ||
      n != mm.c.cols)
    return fail("the shapes do not agree: op(A) " + std::to_string(m) + "x" +
                std::to_string(k) + ", op(B) " + std::to_string(kb) + "x" +
                std::to_string(n) + ", D " + std::to_string(mm.dl.rows) + "x" +
                std::to_string(mm.dl.cols));
  if (usesBias(mm.d) && !mm.d.bias)
    return fail("the epilogue needs a bias pointer");
  if (usesAux(mm.d) && !mm.d.aux)
    return fail("the epilogue needs an aux pointer");
  if (cublasStatus_t s = checkEpilogue(mm.d, m))
    return s;
  if (cublasStatus_t s = checkScales(mm.d, mm.a, mm.b))
    return s;
  if ((mm.d.scaleA || mm.d.scaleB) && mm.beta != 0.0f)
    return fail("FP8 scale pointers with a nonzero beta are not emulated");
  // No algorithm: cublasLt.h's "implicit heuristics query with default
  // search preferences".
  Algo algo;
  if (algoIn) {
    std::memcpy(&algo, algoIn, sizeof(algo));
    if (algo.magic != kAlgoMagic)
      return fail("the algorithm is not one cublasLtMatmulAlgoGetHeuristic "
                  "gave");
  } else {
    const Layout *const layouts[4] = {&mm.a, &mm.b, &mm.c, &mm.dl};
    if (cublasStatus_t s = chooseAlgo(mm.d, layouts, Preference{}, algo))
      return s;
  }
  if (cublasStatus_t s = checkPointers(mm, algo))
    return s;
  cudaError_t err = shardc::emu::enqueue(stream, "cublasLtMatmul",
                                         [mm]() { mm.run(); });
  return err == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                            : CUBLAS_STATUS_EXECUTION_FAILED;
}

} // extern "C"
