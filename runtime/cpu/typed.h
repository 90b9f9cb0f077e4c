//===- typed.h - the CPU's typed kernels on bf16 storage ----------*- C++
//-*-===//
//
// A typed kernel (kernels.def: one with a dtype integer) on bf16 runs its
// f32 body on f32 copies: the inputs widened (exactly), the outputs written
// to f32 scratch and rounded to bf16 once at the end. That is the math the
// dtype promises (f32 inside, one rounding per output; a GEMM of widened
// bf16 operands accumulates their exact products in f32) with one body per
// kernel. On f32 the kernel runs on its buffers, with no copy.
//
// The scratch is per thread and grows to the largest launch, so a step
// allocates nothing once its shapes have been seen.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CPU_TYPED_H
#define SHARDC_RUNTIME_CPU_TYPED_H

#include "runtime/abi/abi.h"
#include "runtime/runtime.h"

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace shardc::runtime::cpu {

/// A buffer of bf16 bits.
inline const uint16_t *BF16(void *p) {
  return static_cast<const uint16_t *>(p);
}

class AsF32 {
public:
  /// The launch's buffers `b` (`count` of them), computed on `dtype`.
  AsF32(void **b, int64_t count, int64_t dtype, const char *kernel);
  AsF32(const AsF32 &) = delete;
  AsF32 &operator=(const AsF32 &) = delete;

  /// Buffer k holds n elements the kernel reads.
  AsF32 &in(int64_t k, int64_t n) { return bind(k, n, true, false); }
  /// Buffer k holds n elements the kernel writes.
  AsF32 &out(int64_t k, int64_t n) { return bind(k, n, false, true); }
  /// Buffer k holds n elements the kernel reads and writes (a part of it).
  AsF32 &inout(int64_t k, int64_t n) { return bind(k, n, true, true); }

  /// The buffers for the f32 body (int buffers as they are).
  void **buffers() { return f32.data(); }
  /// Rounds the outputs into their bf16 buffers (nothing on f32).
  void finish();

  bool bf16() const { return dtype == abi::kBF16; }

private:
  AsF32 &bind(int64_t k, int64_t n, bool read, bool write);

  void **b;
  int64_t dtype;
  const char *kernel;
  std::vector<void *> f32;
  struct Out {
    int64_t k, n;
  };
  std::vector<Out> outs;
  int64_t used = 0; ///< scratch slots taken
};

/// The shape and layout integers every attention kernel has (attention,
/// attention_grad, sdpa, sdpa_grad), read through the kernel's enum `K`.
struct AttentionArgs {
  int64_t B, H, G, T, S, D, dtype, layout, ld_q, ld_k, ld_v, ld_o;
};
/// The AttentionArgs of ints `i` of the kernel whose enum namespace is K.
#define SHARDC_ATTENTION_ARGS(K, i)                                            \
  ::shardc::runtime::cpu::AttentionArgs {                                      \
    (i)[K::B], (i)[K::H], (i)[K::G], (i)[K::T], (i)[K::S], (i)[K::D],          \
        (i)[K::dtype], (i)[K::layout], (i)[K::ld_q], (i)[K::ld_k],             \
        (i)[K::ld_v], (i)[K::ld_o]                                             \
  }

/// The element strides of an attention kernel's q, k, v and o (dq, dk, dv
/// and dO as q, k, v and o).
struct AttentionLayout {
  abi::AttentionStrides q, k, v, o;
};

/// One head of an attention operand, [rows, D] in rows `ld` elements apart,
/// as the dense block the f32 body's GEMMs take: the rows themselves when
/// ld == D, else a copy (loaded from them if `load`; store() writes it
/// back). oneDNN's matmul on strided operands asks for scratchpads of
/// megabytes; a head's copy is rows * D floats.
class HeadBlock {
public:
  HeadBlock(float *rows, int64_t n, int64_t D, int64_t ld, bool load);
  HeadBlock(const float *rows, int64_t n, int64_t D, int64_t ld)
      : HeadBlock(const_cast<float *>(rows), n, D, ld, true) {}
  float *data() { return block; }
  void store();

private:
  float *rows, *block;
  int64_t n, D, ld;
  std::vector<float> copy;
};

/// An attention kernel's operands as the f32 body reads them: f32 buffers
/// pass through, and the body reads them by their strides (strides()); on
/// bf16 under abi::kAttentionRows (where AsF32 widens dense runs of
/// elements) the inputs are gathered into dense per-thread copies and
/// finish() scatters the outputs back by their strides. `role` is the
/// operand whose layout a buffer has: 'q', 'k', 'v' or 'o'.
class DenseAttention {
public:
  struct Operand {
    int64_t k;
    char role;
    bool out;
  };
  DenseAttention(void **b, int64_t count, const AttentionArgs &a,
                 std::initializer_list<Operand> operands);
  DenseAttention(const DenseAttention &) = delete;
  DenseAttention &operator=(const DenseAttention &) = delete;
  void **buffers() { return dense.data(); }
  /// The strides of buffers().
  AttentionLayout strides() const;
  /// Scatters the outputs into their strided buffers.
  void finish();

private:
  void copy(const Operand &o, bool gather);
  bool gathered() const {
    return a.layout == abi::kAttentionRows && a.dtype == abi::kBF16;
  }
  void **b;
  AttentionArgs a;
  std::vector<Operand> operands;
  std::vector<void *> dense;
};

/// Elements an operand of a broadcasting kernel spans: 1 + the sum of
/// (dim - 1) * stride over its dims.
int64_t broadcastExtent(int64_t R, const int64_t *dims, const int64_t *strides);

} // namespace shardc::runtime::cpu

#endif
