//===- typed.cpp - the CPU's typed kernels on bf16 storage ----------------===//
#include "runtime/cpu/typed.h"

#include "runtime/math.h"
#include "runtime/runtime.h"

#include <cstring>

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

namespace {
/// Per-thread copies of attention operands (DenseAttention), grown to the
/// largest launch.
std::vector<std::vector<char>> &attentionScratch() {
  static thread_local std::vector<std::vector<char>> pool;
  return pool;
}
} // namespace

DenseAttention::DenseAttention(void **b, int64_t count, const AttentionArgs &a,
                               std::initializer_list<Operand> ops)
    : b(b), a(a), operands(ops), dense(b, b + count) {
  if (a.layout != abi::kAttentionBHTD && a.layout != abi::kAttentionRows)
    fatal("attention: layout code %lld is not one of the ABI's",
          (long long)a.layout);
  if (!gathered())
    return;
  std::vector<std::vector<char>> &pool = attentionScratch();
  if (pool.size() < operands.size())
    pool.resize(operands.size());
  int64_t esize = a.dtype == abi::kBF16 ? 2 : 4;
  for (size_t n = 0; n < operands.size(); ++n) {
    const Operand &o = operands[n];
    bool kv = o.role == 'k' || o.role == 'v';
    int64_t bytes = a.B * (kv ? a.G * a.S : a.H * a.T) * a.D * esize;
    if (int64_t(pool[n].size()) < bytes)
      pool[n].resize(size_t(bytes));
    dense[size_t(o.k)] = pool[n].data();
    if (!o.out)
      copy(o, true);
  }
}

void DenseAttention::copy(const Operand &o, bool gather) {
  bool kv = o.role == 'k' || o.role == 'v';
  int64_t heads = kv ? a.G : a.H, rows = kv ? a.S : a.T;
  int64_t ld = o.role == 'q' ? a.ld_q
               : o.role == 'k' ? a.ld_k
               : o.role == 'v' ? a.ld_v
                               : a.ld_o;
  abi::AttentionStrides s = abi::attentionStrides(a.layout, heads, rows, a.D, ld);
  int64_t esize = a.dtype == abi::kBF16 ? 2 : 4, row = a.D * esize;
  char *strided = static_cast<char *>(b[o.k]);
  char *packed = static_cast<char *>(dense[size_t(o.k)]);
#pragma omp parallel for schedule(static) if (a.B * heads * rows * a.D > 65536)
  for (int64_t bh = 0; bh < a.B * heads; ++bh) {
    int64_t bi = bh / heads, h = bh % heads;
    for (int64_t t = 0; t < rows; ++t) {
      char *p = packed + (bh * rows + t) * row;
      char *q = strided + (bi * s.b + h * s.h + t * s.t) * esize;
      if (gather)
        std::memcpy(p, q, size_t(row));
      else
        std::memcpy(q, p, size_t(row));
    }
  }
}

AttentionLayout DenseAttention::strides() const {
  int64_t layout = gathered() ? abi::kAttentionBHTD : a.layout;
  return {abi::attentionStrides(layout, a.H, a.T, a.D, a.ld_q),
          abi::attentionStrides(layout, a.G, a.S, a.D, a.ld_k),
          abi::attentionStrides(layout, a.G, a.S, a.D, a.ld_v),
          abi::attentionStrides(layout, a.H, a.T, a.D, a.ld_o)};
}

void DenseAttention::finish() {
  if (!gathered())
    return;
  for (const Operand &o : operands)
    if (o.out)
      copy(o, false);
}

HeadBlock::HeadBlock(float *rows, int64_t n, int64_t D, int64_t ld, bool load)
    : rows(rows), block(rows), n(n), D(D), ld(ld) {
  if (ld == D)
    return;
  copy.resize(size_t(n * D));
  block = copy.data();
  if (load)
    for (int64_t r = 0; r < n; ++r)
      std::memcpy(block + r * D, rows + r * ld, size_t(D) * sizeof(float));
}

void HeadBlock::store() {
  if (block == rows)
    return;
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(rows + r * ld, block + r * D, size_t(D) * sizeof(float));
}
