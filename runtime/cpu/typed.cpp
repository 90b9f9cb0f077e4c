//===- typed.cpp - the CPU's typed kernels on bf16 storage ----------------===//
#include "runtime/cpu/typed.h"

#include "runtime/math.h"

using namespace shardc::runtime;
using namespace shardc::runtime::cpu;

namespace {
/// The f32 scratch of this thread: one growing vector per buffer slot.
std::vector<std::vector<float>> &scratch() {
  thread_local std::vector<std::vector<float>> pool;
  return pool;
}
} // namespace

AsF32::AsF32(void **b, int64_t count, int64_t dtype, const char *kernel)
    : b(b), dtype(dtype), kernel(kernel), f32(b, b + count) {
  if (dtype != abi::kF32 && dtype != abi::kBF16)
    fatal("%s: the CPU backend computes on f32 or bf16, not dtype code %lld",
          kernel, (long long)dtype);
}

AsF32 &AsF32::bind(int64_t k, int64_t n, bool read, bool write) {
  if (!bf16())
    return *this;
  std::vector<std::vector<float>> &pool = scratch();
  if (int64_t(pool.size()) <= used)
    pool.resize(size_t(used + 1));
  std::vector<float> &s = pool[size_t(used++)];
  if (int64_t(s.size()) < n)
    s.resize(size_t(n));
  if (read) {
    const uint16_t *h = static_cast<const uint16_t *>(b[k]);
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t e = 0; e < n; ++e)
      s[size_t(e)] = bf16ToFloat(h[e]);
  }
  f32[size_t(k)] = s.data();
  if (write)
    outs.push_back({k, n});
  return *this;
}

void AsF32::finish() {
  for (const Out &o : outs) {
    const float *s = static_cast<const float *>(f32[size_t(o.k)]);
    uint16_t *h = static_cast<uint16_t *>(b[o.k]);
#pragma omp parallel for schedule(static) if (o.n > 65536)
    for (int64_t e = 0; e < o.n; ++e)
      h[e] = floatToBf16(s[e]);
  }
  outs.clear();
}

int64_t shardc::runtime::cpu::broadcastExtent(int64_t R, const int64_t *dims,
                                              const int64_t *strides) {
  int64_t n = 1;
  for (int64_t d = 0; d < R; ++d)
    n += (dims[d] - 1) * strides[d];
  return n;
}
