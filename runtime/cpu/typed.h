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

/// Elements an operand of a broadcasting kernel spans: 1 + the sum of
/// (dim - 1) * stride over its dims.
int64_t broadcastExtent(int64_t R, const int64_t *dims, const int64_t *strides);

} // namespace shardc::runtime::cpu

#endif
