//===- gemm.h - the CPU backend's f32 GEMM, dispatched on CPU features ----===//
//
// Every GEMM of the CPU backend (matmul, batch_matmul, the linear kernels
// and their epilogues, attention, the chunked LM head) and of the emulated
// cuBLASLt goes through sgemm() below, so that one library computes them
// all and the emulated-versus-CPU comparisons stay exact.
//
// The library is oneDNN's matmul primitive (Debian's libdnnl; gemm.cpp),
// whose kernels are chosen by the CPU's features (CPUID: AVX2, AVX-512,
// AVX512-BF16, AMX), not by its model number as OpenBLAS 0.3.21's are: a
// CPU newer than the distribution's OpenBLAS gets its SSE3 (Prescott)
// kernels there, 4.5x slower. A call allocates nothing once its shape has
// been seen.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CPU_GEMM_H
#define SHARDC_RUNTIME_CPU_GEMM_H

#include <cstdint>
#include <string>

namespace shardc::runtime::cpu {

/// c[M,N] = alpha op(a)[M,K] op(b)[K,N] + beta c, row-major: a is stored
/// [M,K] (row stride lda), or [K,M] when ta; b is stored [K,N] (row stride
/// ldb), or [N,K] when tb; c's row stride is ldc. beta 0 never reads c.
/// Deterministic for a given thread count (OMP_NUM_THREADS); inside an
/// OpenMP parallel region it runs on the calling thread.
void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
           float *c, int64_t ldc);

/// sgemm on bf16 operands (a and b as bf16 bits; c f32): their products are
/// exact in f32 and summed in f32, by oneDNN's bf16 matmul, which runs on
/// the cores' bf16 instructions (AVX512-BF16, AMX) where they have them.
void gemmBf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
              float beta, float *c, int64_t ldc);

/// Whether the cores have bf16 instructions oneDNN uses (then gemmBf16 is
/// the faster way to a bf16 GEMM; without, widening to f32 and sgemm is).
/// SHARDC_CPU_BF16_GEMM=widen says no, to measure the two.
bool nativeBf16();

/// What computes the GEMMs, for logs and reports: the library, its version
/// and the instruction set its kernels were chosen for, e.g. "oneDNN 2.6.3
/// matmul (avx512_core_bf16)".
std::string gemmLibrary();

} // namespace shardc::runtime::cpu

#endif
