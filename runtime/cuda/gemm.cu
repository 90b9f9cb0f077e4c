//===- gemm.cu - linear and matmul through cuBLASLt -----------------------===//
//
// Row-major GEMMs as column-major cuBLASLt calls: row-major Y[M,N] is
// column-major Y^T[N,M], so Y = op(A) op(B) is computed as
// Y^T = op(B)^T op(A)^T with the operands swapped. f32 in, f32 out, f32
// compute without TF32 (CUBLAS_COMPUTE_32F), so curves compare with the
// CPU's; with the program's --allow-tf32 (Context::allowTf32), f32 GEMMs
// on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32). For the typed
// kernels on bf16: bf16 A, B, bias and D (CUDA_R_16BF) with f32
// accumulation (CUBLAS_COMPUTE_32F: the tensor cores' bf16 MMA), D rounded
// once, or D in f32 (RowGemm::f32Out). The bias of `linear` is cuBLASLt's
// BIAS epilogue. The algorithm is chosen by cuBLASLt's heuristic once per
// shape and alignment class of the pointers (arena views are 4-, 16- or
// 64-byte aligned, not the 256 bytes cuBLASLt's heuristic assumes by
// default), and kept.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/context.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <string>
#include <tuple>

namespace A = shardc::abi;
using namespace shardc::runtime;

namespace {

/// One GEMM shape: column-major C[m,n] = op(A) op(B), op given by transA
/// and transB, leading dimensions of the stored matrices, and whether a
/// bias epilogue adds a vector of m.
struct Shape {
  int64_t m, n, k, lda, ldb, ldc;
  bool transA, transB, bias;
  /// The epilogue (CUBLASLT_EPILOGUE_BIAS when `bias` and none given).
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  /// A, B, C/D and the bias: CUDA_R_32F or CUDA_R_16BF.
  cudaDataType_t type = CUDA_R_32F;
  /// C and D in f32 whatever `type` (bf16 operands, an f32 product).
  bool f32Out = false;
  /// f32 operands on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
  bool tf32 = false;
  /// FP8 A and B (CUDA_R_8F_E4M3 or _E5M2; `type` is then C's and D's).
  bool fp8 = false;
  cudaDataType_t fp8A = CUDA_R_8F_E4M3, fp8B = CUDA_R_8F_E4M3;
  /// FP8 with A's and B's dequantizing scales (CUBLASLT_MATMUL_DESC_A/B_
  /// SCALE_POINTER: D = scaleA scaleB op(A) op(B)), given with each call.
  bool fp8Scaled = false;
  cudaDataType_t outType() const { return f32Out ? CUDA_R_32F : type; }
  cudaDataType_t typeA() const { return fp8 ? fp8A : type; }
  cudaDataType_t typeB() const { return fp8 ? fp8B : type; }
  auto key() const {
    return std::make_tuple(m, n, k, lda, ldb, ldc, transA, transB, bias,
                           int(epilogue), int(type), f32Out, tf32,
                           int(typeA()), int(typeB()), fp8Scaled);
  }
  cublasLtEpilogue_t effectiveEpilogue() const {
    return epilogue == CUBLASLT_EPILOGUE_DEFAULT && bias
               ? CUBLASLT_EPILOGUE_BIAS
               : epilogue;
  }
};

/// `count` GEMMs of one Shape whose stored operands lie strideA, strideB and
/// strideC elements apart (0: the same matrix for every product); count 1:
/// one GEMM, no batch.
struct BatchedShape {
  Shape s;
  int64_t count = 1, strideA = 0, strideB = 0, strideC = 0;
};

/// The alignment class of a pointer: the largest power of two dividing its
/// address, at most 256 bytes (cuBLASLt's default
/// CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, the most a preference asks);
/// 0 for no pointer. cuBLASLt's heuristic is told each operand's class (as
/// PyTorch does since pytorch#92201), so the algorithm it picks runs on every
/// pointer of that class. Arena views are 4-byte aligned at least (f32); one
/// that is not gets a class below its element, for which cuBLASLt has no
/// algorithm (said with the shape, below).
struct Alignments {
  uint32_t a = 0, b = 0, c = 0, bias = 0, aux = 0;
  auto key() const { return std::make_tuple(a, b, c, bias, aux); }
};

uint32_t alignmentOf(const void *p) {
  if (!p)
    return 0;
  uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && v % align != 0)
    align /= 2;
  return align;
}

/// What a plan is kept by: the batched shape and its pointers' classes.
auto planKey(const BatchedShape &bs, const Alignments &al) {
  return std::make_tuple(bs.s.key(), bs.count, bs.strideA, bs.strideB,
                         bs.strideC, al.key());
}
using PlanKey = decltype(planKey(BatchedShape{}, Alignments{}));

/// The descriptors and algorithm of a batched shape and alignment classes,
/// made once.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
  /// cuBLASLt has no algorithm, and the caller said it would do without.
  bool declined = false;
};

const char *epilogueName(cublasLtEpilogue_t e) {
  switch (e) {
  case CUBLASLT_EPILOGUE_DEFAULT:
    return "DEFAULT";
  case CUBLASLT_EPILOGUE_BIAS:
    return "BIAS";
  case CUBLASLT_EPILOGUE_GELU_AUX:
    return "GELU_AUX";
  case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    return "GELU_AUX_BIAS";
  case CUBLASLT_EPILOGUE_DGELU:
    return "DGELU";
  case CUBLASLT_EPILOGUE_DGELU_BGRAD:
    return "DGELU_BGRAD";
  case CUBLASLT_EPILOGUE_BGRADA:
    return "BGRADA";
  case CUBLASLT_EPILOGUE_BGRADB:
    return "BGRADB";
  default:
    return "other";
  }
}

/// Fatal: cuBLASLt has no algorithm for the GEMM, named with everything the
/// heuristic was told.
[[noreturn]] void noAlgorithm(const BatchedShape &bs, const Alignments &al,
                              cublasStatus_t status) {
  const Shape &s = bs.s;
  fatal("cuBLASLt has no algorithm (%s) for %lld %s %lld x %lld x %lld "
        "(m x n x k, column-major) %s GEMM%s: op(A) %s, op(B) %s, lda %lld, "
        "ldb %lld, ldc %lld, batch strides %lld %lld %lld, epilogue %s (%d); "
        "pointers aligned to A %u, B %u, C/D %u, bias %u, aux %u bytes (0: "
        "none)",
        status == CUBLAS_STATUS_SUCCESS ? "the heuristic returned none"
                                        : cublasLtGetStatusString(status),
        (long long)bs.count, bs.count > 1 ? "batched" : "single",
        (long long)s.m, (long long)s.n, (long long)s.k,
        s.fp8 ? "fp8" : s.type == CUDA_R_16BF ? "bf16" : "f32",
        bs.count > 1 ? "s" : "",
        s.transA ? "T" : "N", s.transB ? "T" : "N", (long long)s.lda,
        (long long)s.ldb, (long long)s.ldc, (long long)bs.strideA,
        (long long)bs.strideB, (long long)bs.strideC,
        epilogueName(s.effectiveEpilogue()), int(s.effectiveEpilogue()), al.a,
        al.b, al.c, al.bias, al.aux);
}

/// cuBLASLt's heuristic choice for the plan's descriptors, within the
/// workspace, for pointers of the classes `al`, into p.algo; if it has none,
/// false when `mayDecline`, else fatal.
bool pickAlgorithm(cuda::Context &ctx, Plan &p, const BatchedShape &bs,
                   const Alignments &al, bool mayDecline) {
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ctx.workspaceBytes,
      sizeof(ctx.workspaceBytes)));
  // D is C: both have C's class.
  std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al.c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al.c}};
  for (auto [attr, bytes] : alignments)
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes,
                                                      sizeof(bytes)));
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      ctx.lt, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  // NOT_SUPPORTED, or none found: no algorithm for these descriptors.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED ||
      (status == CUBLAS_STATUS_SUCCESS && found == 0)) {
    if (mayDecline)
      return false;
    noAlgorithm(bs, al, status);
  }
  CUBLAS_CHECK(status);
  p.algo = result.algo;
  return true;
}

/// The device pointers a call gives besides its matrices: the epilogue's
/// bias and aux matrix, and an FP8 GEMM's A and B scales (none where null).
struct CallPointers {
  const void *bias = nullptr, *aux = nullptr;
  const float *scaleA = nullptr, *scaleB = nullptr;
};

/// `c`'s pointers into `p`'s descriptor: set before its heuristic, which
/// depends on their alignment and presence, and before each call.
void setCallPointers(const Plan &p, const CallPointers &c) {
  std::pair<cublasLtMatmulDescAttributes_t, const void *> pointers[] = {
      {CUBLASLT_MATMUL_DESC_BIAS_POINTER, c.bias},
      {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, c.aux},
      {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, c.scaleA},
      {CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, c.scaleB}};
  for (auto [attr, ptr] : pointers)
    if (ptr)
      CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p.desc, attr, &ptr, sizeof(ptr)));
}

/// The descriptors of `bs` with the call's pointers (whose alignment the
/// heuristic reads from them), then its algorithm; a plan with `declined`
/// set if cuBLASLt has none and `mayDecline`.
Plan makePlan(cuda::Context &ctx, const BatchedShape &bs, const Alignments &al,
              const CallPointers &call, bool mayDecline) {
  const Shape &s = bs.s;
  Plan p;
  cublasComputeType_t compute =
      s.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, compute, CUDA_R_32F));
  cublasOperation_t ta = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  cublasLtEpilogue_t epilogue = s.effectiveEpilogue();
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (epilogue & 128) { // an aux matrix (GELU's input), laid out as C
    int64_t ld = s.ldc;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
  }
  setCallPointers(p, call);
  // Stored shapes: A is [m,k] (or [k,m] transposed), B [k,n] (or [n,k]).
  if (call.bias) { // the bias in D's type, said rather than left to the default
    cudaDataType_t biasType = s.outType();
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
        sizeof(biasType)));
  }
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(
      &p.a, s.typeA(), s.transA ? s.k : s.m, s.transA ? s.m : s.k, s.lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(
      &p.b, s.typeB(), s.transB ? s.n : s.k, s.transB ? s.k : s.n, s.ldb));
  CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&p.c, s.outType(), s.m, s.n, s.ldc));
  if (bs.count > 1) {
    int32_t count = int32_t(bs.count);
    std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {
        {p.a, bs.strideA}, {p.b, bs.strideB}, {p.c, bs.strideC}};
    for (auto [layout, stride] : layouts) {
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
          sizeof(stride)));
    }
  }
  p.declined = !pickAlgorithm(ctx, p, bs, al, mayDecline);
  return p;
}

/// C[count] = op(A[count]) op(B[count]) (+ bias) on `stream`, then the
/// shape's epilogue: `aux` its aux matrix, `bias` its bias (BIAS) or bias
/// gradient (BGRAD). One cublasLtMatmul, with the plan of the shape and the
/// pointers' alignment classes (a map lookup once made). False, with
/// nothing launched, where cuBLASLt has no algorithm and `mayDecline`.
bool gemm(cuda::Context &ctx, int64_t stream, BatchedShape bs, const void *a,
          const void *b, const CallPointers &call, void *c, float beta = 0.0f,
          bool mayDecline = false) {
  // Made once per key and kept for the process: never destroyed, so its
  // descriptors stay reachable at exit (LeakSanitizer reported them when a
  // static map was destroyed before its check).
  static auto &plans = *new std::map<PlanKey, Plan>();
  bs.s.tf32 = ctx.allowTf32 && bs.s.type == CUDA_R_32F;
  if (bs.s.fp8Scaled != (call.scaleA && call.scaleB))
    fatal("an FP8 GEMM's scale pointers: the shape says %s, the call gives "
          "%s", bs.s.fp8Scaled ? "both" : "none",
          call.scaleA || call.scaleB ? "some" : "none");
  Alignments al{alignmentOf(a), alignmentOf(b), alignmentOf(c),
                alignmentOf(call.bias), alignmentOf(call.aux)};
  PlanKey key = planKey(bs, al);
  auto it = plans.find(key);
  if (it == plans.end())
    it = plans.emplace(key, makePlan(ctx, bs, al, call, mayDecline)).first;
  const Plan &p = it->second;
  if (p.declined)
    return false;
  setCallPointers(p, call);
  float alpha = 1.0f;
  CUBLAS_CHECK(cublasLtMatmul(ctx.lt, p.desc, &alpha, a, p.a, b, p.b, &beta, c,
                              p.c, c, p.c, &p.algo, ctx.workspace,
                              ctx.workspaceBytes, ctx.stream(stream)));
  return true;
}

void gemm(void *ctxPtr, int64_t stream, const Shape &s, const void *a,
          const void *b, const void *bias, void *c,
          const void *aux = nullptr, float beta = 0.0f) {
  CallPointers call;
  call.bias = bias;
  call.aux = aux;
  gemm(*static_cast<cuda::Context *>(ctxPtr), stream, BatchedShape{s}, a, b,
       call, c, beta);
}

/// RowGemm's column-major shape: Y^T = op(b)^T op(a)^T, b's rows the first
/// operand's columns.
Shape rowShape(const cuda::RowGemm &g) {
  int64_t M = g.M, N = g.N, K = g.K;
  Shape s{N, M, K, g.ldb ? g.ldb : (g.tb ? K : N),
          g.lda ? g.lda : (g.ta ? M : K), g.ldy ? g.ldy : N, g.tb, g.ta, false};
  s.type = g.bf16 ? CUDA_R_16BF : CUDA_R_32F;
  s.f32Out = g.f32Out;
  return s;
}

float *F(void *p) { return static_cast<float *>(p); }

/// The cuBLASLt type of a typed kernel's dtype code: f32 or bf16.
cudaDataType_t typeOf(int64_t dtype, const char *kernel) {
  return cuda::isBf16(dtype, kernel) ? CUDA_R_16BF : CUDA_R_32F;
}

} // namespace

// y[M,N] = x[M,K] @ w^T (w[N,K]), or x @ w (w[K,N] when in_out), + b[N]
// (f32, or bf16 with f32 accumulation and the bias added before the one
// rounding of y)
SHARDC_CUDA_KERNEL(linear) {
  int64_t M = i[A::linear::M], K = i[A::linear::K], N = i[A::linear::N];
  bool inOut = i[A::linear::in_out] != 0, hasBias = i[A::linear::has_bias] != 0;
  // Y^T[N,M] = op(w) x^T: w stored column-major [K,N] (transposed) or
  // [N,K] (in_out), x^T stored [K,M].
  Shape s{N, M, K, inOut ? N : K, K, N, !inOut, false, hasBias};
  s.type = typeOf(i[A::linear::dtype], "linear");
  gemm(ctx, stream, s, b[1], b[0], hasBias ? b[2] : nullptr,
       b[hasBias ? 3 : 2]);
}

// x[M,K], w[N,K] (or [K,N] when in_out), b[N]? -> pre[M,N] = x w^T + b,
// y[M,N] = gelu_tanh(pre): one GEMM, cuBLASLt's GELU_AUX(_BIAS) epilogue
// writing y and, as its aux matrix, pre (kept for the backward pass); on
// bf16 both rounded once, y from the unrounded pre
SHARDC_CUDA_KERNEL(linear_gelu) {
  namespace L = A::linear_gelu;
  int64_t M = i[L::M], K = i[L::K], N = i[L::N];
  bool inOut = i[L::in_out] != 0, hasBias = i[L::has_bias] != 0;
  Shape s{N, M, K, inOut ? N : K, K, N, !inOut, false, hasBias};
  s.epilogue = hasBias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                       : CUBLASLT_EPILOGUE_GELU_AUX;
  s.type = typeOf(i[L::dtype], "linear_gelu"); // y, pre and the bias
  int out = hasBias ? 3 : 2;
  gemm(ctx, stream, s, b[1], b[0], hasBias ? b[2] : nullptr, b[out + 1],
       b[out]);
}

// dy[M,K], w as linear's, pre[M,N] -> dx[M,N] = linear(dy, w) *
// gelu_tanh'(pre), db[N]? = sum over rows of dx: one GEMM, cuBLASLt's
// DGELU(_BGRAD) epilogue (on bf16 it rounds linear(dy, w) to bf16 first:
// see CudaKernels.Bf16EpilogueRounding)
SHARDC_CUDA_KERNEL(linear_dgelu) {
  namespace L = A::linear_dgelu;
  int64_t M = i[L::M], K = i[L::K], N = i[L::N];
  bool inOut = i[L::in_out] != 0, hasBias = i[L::has_bias] != 0;
  Shape s{N, M, K, inOut ? N : K, K, N, !inOut, false, false};
  s.epilogue =
      hasBias ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
  s.type = typeOf(i[L::dtype], "linear_dgelu"); // dx, pre and db
  gemm(ctx, stream, s, b[1], b[0], hasBias ? b[4] : nullptr, b[3], b[2]);
}

// a[M,K] b[N,K] fp8 (format_a, format_b), sa sb (tensorwise: {s, 1/s}
// each; rowwise: [M] and [N]), bias[N]? -> y[M,N] (f32 when y_f32):
// cuBLASLt's FP8 GEMM in the TN format Hopper requires, Y^T[N,M] = b
// (stored K-major, transposed) times a^T (stored K-major).
// - tensorwise without a bias: cuBLASLt's A and B scale pointers (the
//   casts' reciprocals sb[1] and sa[1]) and y as D, in its dtype: one
//   launch, the product rounded once;
// - tensorwise with a bias: the same into an f32 scratch D, then float8.cu
//   rounds it to y's dtype and adds the bias (torchao adds it after the
//   rounding);
// - rowwise: unit scales into an f32 D (y itself when f32), then float8.cu
//   divides by the row scales, rounds and adds the bias, as torchao's
//   emulation does.
SHARDC_CUDA_KERNEL(matmul_fp8) {
  namespace K8 = A::matmul_fp8;
  cuda::Context &c = *static_cast<cuda::Context *>(ctx);
  int64_t M = i[K8::M], K = i[K8::K], N = i[K8::N];
  bool hasBias = i[K8::has_bias] != 0, rowwise = i[K8::rowwise] != 0;
  bool bf16 = typeOf(i[K8::dtype], "matmul_fp8") == CUDA_R_16BF;
  bool yF32 = !bf16 || i[K8::y_f32] != 0;
  void *y = b[hasBias ? 5 : 4];
  const float *sa = F(b[2]), *sb = F(b[3]);
  auto fp8 = [](int64_t format) {
    return format == A::kF8E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
  };
  Shape s{N, M, K, K, K, N, /*transA=*/true, /*transB=*/false, false};
  s.fp8 = true;
  s.fp8A = fp8(i[K8::format_b]);
  s.fp8B = fp8(i[K8::format_a]);
  s.fp8Scaled = !rowwise;
  bool direct = !rowwise && !hasBias;
  s.type = direct && !yF32 ? CUDA_R_16BF : CUDA_R_32F;
  float *d = direct || (yF32 && !hasBias)
                 ? static_cast<float *>(y)
                 : static_cast<float *>(c.scratch(size_t(M * N) * 4));
  CallPointers call;
  if (!rowwise) {
    call.scaleA = sb + 1;
    call.scaleB = sa + 1;
  }
  gemm(c, stream, BatchedShape{s}, b[1], b[0], call, d);
  if (direct)
    return;
  cuda::Fp8Product p{d,         sa,      sb,      hasBias ? b[4] : nullptr,
                     y,         M,       N,       rowwise,
                     bf16};
  p.scaled = !rowwise;
  p.yF32 = yF32;
  cuda::scaleFp8Product(c, stream, p);
}

void cuda::gemmRows(cuda::Context &c, int64_t stream, const RowGemm &g) {
  gemm(&c, stream, rowShape(g), g.b, g.a, nullptr, g.y, nullptr, g.beta);
}


// y[M,N] = op(a) op(b): a[M,K] or [K,M] (trans_a), b[K,N] or [N,K] (trans_b)
// (f32, or bf16 with f32 accumulation; y_f32: bf16 a and b, y in f32, the
// D type of cuBLASLt's GEMM, so a cast after it is fused)
SHARDC_CUDA_KERNEL(matmul) {
  int64_t M = i[A::matmul::M], K = i[A::matmul::K], N = i[A::matmul::N];
  bool ta = i[A::matmul::trans_a] != 0, tb = i[A::matmul::trans_b] != 0;
  cuda::RowGemm g{M, N, K, ta, tb, b[0], b[1], b[2]};
  g.bf16 = typeOf(i[A::matmul::dtype], "matmul") == CUDA_R_16BF;
  g.f32Out = g.bf16 && i[A::matmul::y_f32] != 0;
  cuda::gemmRows(*static_cast<cuda::Context *>(ctx), stream, g);
}

// matmul, and db = the sum over K of op(a) (side 0: db[M]) or of op(b)
// (side 1: db[N]), in y's type: cuBLASLt's bias-gradient epilogue on the
// same GEMM. In Y^T = op(b)^T op(a)^T, b is cuBLASLt's A, so side 1 is
// BGRADA (db over D's rows) and side 0 BGRADB (over its columns). Where
// cuBLASLt has no algorithm for the epilogue, the GEMM alone and then
// sum_to's column sums of the operand (stored [K, count]).
SHARDC_CUDA_KERNEL(matmul_bgrad) {
  namespace K = A::matmul_bgrad;
  std::string bad = A::matmulBgradLayoutError(i);
  if (!bad.empty())
    fatal("%s", bad.c_str());
  int64_t M = i[K::M], Kd = i[K::K], N = i[K::N], side = i[K::side];
  bool ta = i[K::trans_a] != 0, tb = i[K::trans_b] != 0;
  auto &c = *static_cast<cuda::Context *>(ctx);
  cuda::RowGemm g{M, N, Kd, ta, tb, b[0], b[1], b[2]};
  g.bf16 = typeOf(i[K::dtype], "matmul_bgrad") == CUDA_R_16BF;
  g.f32Out = g.bf16 && i[K::y_f32] != 0;
  Shape s = rowShape(g);
  s.epilogue = side ? CUBLASLT_EPILOGUE_BGRADA : CUBLASLT_EPILOGUE_BGRADB;
  CallPointers call;
  call.bias = b[3];
  if (gemm(c, stream, BatchedShape{s}, g.b, g.a, call, g.y, 0.0f,
           /*mayDecline=*/true))
    return;
  static bool said = false; // once a process: the launch still runs
  if (!said) {
    said = true;
    std::fprintf(stderr,
                 "shardc: cuBLASLt has no %s algorithm for the %lld x %lld x "
                 "%lld %s weight gradient; its bias gradient is summed after "
                 "the GEMM instead\n",
                 side ? "BGRADA" : "BGRADB", (long long)M, (long long)N,
                 (long long)Kd, g.bf16 ? "bf16" : "f32");
  }
  cuda::gemmRows(c, stream, g);
  // sum_to of the operand [Kd, count] over its rows: dims, then y's strides.
  namespace S = A::sum_to;
  int64_t count = side ? N : M;
  int64_t sumInts[S::kNumInts + 4];
  sumInts[S::R] = 2;
  sumInts[S::out_n] = count;
  sumInts[S::dtype] = i[K::dtype];
  sumInts[S::y_f32] = i[K::y_f32];
  int64_t tail[] = {Kd, count, 0, 1};
  std::copy(std::begin(tail), std::end(tail), sumInts + S::kNumInts);
  void *sumBufs[] = {b[side ? 1 : 0], b[3]};
  shardc_cuda_k_sum_to(ctx, sumBufs, sumInts, nullptr, stream);
}

//===----------------------------------------------------------------------===//
// batch_matmul: strided-batched GEMMs
//===----------------------------------------------------------------------===//

// a[batch..,M,K] (or [..,K,M] with ta), b[batch..,K,N] (or [..,N,K] with tb)
// -> c[batch[R],M,N]; the batch of a and b at matrix strides astr, bstr (0
// where broadcast). The innermost batch dimensions whose strides are one
// stride per flattened index (for a and b alike, 0 included) are one
// strided-batched cublasLtMatmul; one such call per index of the others.
SHARDC_CUDA_KERNEL(batch_matmul) {
  namespace K = A::batch_matmul;
  int64_t M = i[K::M], Kd = i[K::K], N = i[K::N], R = i[K::R];
  bool ta = i[K::ta] != 0, tb = i[K::tb] != 0;
  const int64_t *dims = i + K::kNumInts, *as = dims + R, *bs = as + R;
  auto &c = *static_cast<cuda::Context *>(ctx);
  const float *a = F(b[0]), *bm = F(b[1]);
  float *y = F(b[2]);
  int64_t batches = 1;
  for (int64_t d = 0; d < R; ++d)
    batches *= dims[d];
  if (batches == 0 || M == 0 || N == 0)
    return;
  if (Kd == 0) { // empty products: zeros, as sgemm writes
    CUDA_CHECK(cudaMemsetAsync(y, 0, size_t(batches * M * N) * sizeof(float),
                               c.stream(stream)));
    return;
  }
  // The innermost batch dimensions [split, R) with matrix strides sa, sb per
  // flattened index.
  int64_t split = R, count = 1, sa = 0, sb = 0;
  bool strided = false;
  for (; split > 0; --split) {
    int64_t d = split - 1;
    if (dims[d] == 1)
      continue;
    if (!strided) {
      sa = as[d];
      sb = bs[d];
      strided = true;
    } else if (as[d] != sa * count || bs[d] != sb * count) {
      break;
    }
    if (count * dims[d] > INT32_MAX)
      break;
    count *= dims[d];
  }
  if (count == 1)
    sa = sb = 0; // one product a call: no batch strides
  // Y^T = op(b)^T op(a)^T, as matmul: b is cuBLASLt's A, a its B.
  BatchedShape shape{{N, M, Kd, tb ? Kd : N, ta ? M : Kd, N, tb, ta, false},
                     count,
                     sb * Kd * N,
                     sa * M * Kd,
                     M * N};
  // One call per index of the outer dimensions [0, split).
  int64_t outer = batches / count;
  std::vector<int64_t> idx(size_t(split), 0);
  int64_t ao = 0, bo = 0;
  for (int64_t o = 0; o < outer; ++o) {
    gemm(c, stream, shape, bm + bo * Kd * N, a + ao * M * Kd, CallPointers{},
         y + o * count * M * N);
    for (int64_t d = split - 1; d >= 0; --d) {
      ao += as[d];
      bo += bs[d];
      if (++idx[d] < dims[d])
        break;
      ao -= as[d] * dims[d];
      bo -= bs[d] * dims[d];
      idx[d] = 0;
    }
  }
}
