//===- CudaAttentionTest.cpp - the fused attention kernels against the CPU ===//
//
// The CUDA attention and attention_grad kernels (runtime/cuda/attention.cu)
// against their CPU twins, within a relative 1e-5: causal and not, grouped
// query heads and not, sequence lengths that are not a multiple of the
// tiles, keys of another length than the queries, and head dimensions in
// each of the kernels' tile configurations (D <= 64, <= 128, <= 256).
// Sizes stay small: on the emulated device every GPU thread is a fiber.
//
//===----------------------------------------------------------------------===//
#include "test/unit/CudaCompare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace shardc::test;
using Id = A::KernelId;

struct Case {
  int64_t B, H, G, T, S, D;
  bool causal;
};

std::string describe(const Case &c) {
  return "B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) +
         " G=" + std::to_string(c.G) + " T=" + std::to_string(c.T) +
         " S=" + std::to_string(c.S) + " D=" + std::to_string(c.D) +
         (c.causal ? " causal" : "");
}

/// The integer arguments of attention or attention_grad (the same names
/// in both; checked by packInts against each kernel's layout).
#define ATTENTION_INTS(K, c)                                                   \
  packInts(Id::K, {{A::K::B, (c).B},                                           \
                   {A::K::H, (c).H},                                           \
                   {A::K::G, (c).G},                                           \
                   {A::K::T, (c).T},                                           \
                   {A::K::S, (c).S},                                           \
                   {A::K::D, (c).D},                                           \
                   {A::K::causal, (c).causal ? 1 : 0}})

/// Inputs of one case from `seed`: q, k, v, dO of standard deviation 1.
struct Inputs {
  Vec q, k, v, dO;
  Inputs(const Case &c, unsigned seed)
      : q(randomVec(c.B * c.H * c.T * c.D, seed)),
        k(randomVec(c.B * c.G * c.S * c.D, seed + 1)),
        v(randomVec(c.B * c.G * c.S * c.D, seed + 2)),
        dO(randomVec(c.B * c.H * c.T * c.D, seed + 3)) {}
};

class CudaAttention : public CudaKernels {
protected:
  void forward(const Case &c, unsigned seed = 1) {
    SCOPED_TRACE("attention " + describe(c));
    Inputs in(c, seed);
    compare(Id::attention, shardc_k_attention,
            {floats(in.q), floats(in.k), floats(in.v),
             out(size_t(c.B * c.H * c.T * c.D))},
            ATTENTION_INTS(attention, c),
            packFloats(Id::attention,
                       {{A::attention::f::scale, 1.0 / std::sqrt(c.D)}}));
  }

  void grad(const Case &c, unsigned seed = 11) {
    SCOPED_TRACE("attention_grad " + describe(c));
    Inputs in(c, seed);
    size_t qn = size_t(c.B * c.H * c.T * c.D),
           kn = size_t(c.B * c.G * c.S * c.D);
    compare(Id::attention_grad, shardc_k_attention_grad,
            {floats(in.q), floats(in.k), floats(in.v), floats(in.dO), out(qn),
             out(kn), out(kn)},
            ATTENTION_INTS(attention_grad, c),
            packFloats(Id::attention_grad,
                       {{A::attention_grad::f::scale, 1.0 / std::sqrt(c.D)}}));
  }

  void both(const Case &c) {
    forward(c);
    grad(c);
  }
};

// One query tile (T = 37 < 64), every head its own key/value head.
TEST_F(CudaAttention, NonCausal) { both({2, 4, 4, 37, 37, 16, false}); }
TEST_F(CudaAttention, Causal) { both({2, 4, 4, 37, 37, 16, true}); }

// Several query and key tiles, the last ones partial (T = 100): causal
// tiles above the diagonal are skipped, tiles across it masked.
TEST_F(CudaAttention, CausalSeveralTiles) {
  both({1, 2, 2, 100, 100, 64, true});
  both({1, 4, 2, 200, 200, 32, true});
}
TEST_F(CudaAttention, NonCausalSeveralTiles) {
  both({1, 2, 2, 100, 100, 64, false});
}

// Grouped-query heads: 6 query heads share 2 key/value heads (dK and dV
// sum over the 3 heads of a group).
TEST_F(CudaAttention, GroupedQueryHeads) {
  both({2, 6, 2, 37, 37, 24, false});
  both({1, 6, 2, 100, 100, 16, true});
}
// Multi-query: every head shares one key/value head.
TEST_F(CudaAttention, MultiQuery) { both({1, 4, 1, 45, 45, 16, true}); }

// Keys of another length than the queries: more keys, fewer keys, and
// causal with more keys (top-left aligned: query t sees keys s <= t).
TEST_F(CudaAttention, KeysNotQueries) {
  both({1, 3, 3, 37, 83, 16, false});
  both({1, 6, 2, 70, 29, 24, false});
  both({1, 2, 2, 37, 83, 16, true});
  // Causal with fewer keys than queries: queries t >= S see every key (the
  // CPU twin read past the row here before).
  both({1, 2, 2, 70, 29, 24, true});
}

// Head dimensions in each tile configuration (D <= 64, 128, 256), odd ones
// included.
TEST_F(CudaAttention, HeadDims) {
  for (int64_t D : {1, 24, 64, 65, 100, 128, 129, 256})
    both({1, 2, 1, 21, 21, D, true});
  both({1, 2, 2, 70, 70, 128, false});
}

// On bf16: q, k, v, dO read as bf16, f32 math, o, dq, dk and dv rounded
// once, against the CPU's (which computes on f32 copies and rounds once):
// causal and not, grouped-query heads, several tiles, an odd head dim.
TEST_F(CudaAttention, Bf16) {
  const double tol = 8e-3;
  for (Case c : {Case{2, 4, 4, 37, 37, 16, false},
                 Case{1, 6, 2, 100, 100, 64, true},
                 Case{1, 2, 1, 21, 21, 65, true}}) {
    SCOPED_TRACE("bf16 " + describe(c));
    Inputs in(c, 21);
    size_t qn = size_t(c.B * c.H * c.T * c.D),
           kn = size_t(c.B * c.G * c.S * c.D);
    std::vector<int64_t> fwd = ATTENTION_INTS(attention, c);
    fwd[A::attention::dtype] = A::kBF16;
    compare(Id::attention, shardc_k_attention,
            {bf16s(in.q), bf16s(in.k), bf16s(in.v), outBf16(qn)}, fwd,
            packFloats(Id::attention,
                       {{A::attention::f::scale, 1.0 / std::sqrt(c.D)}}),
            tol);
    std::vector<int64_t> bwd = ATTENTION_INTS(attention_grad, c);
    bwd[A::attention_grad::dtype] = A::kBF16;
    compare(Id::attention_grad, shardc_k_attention_grad,
            {bf16s(in.q), bf16s(in.k), bf16s(in.v), bf16s(in.dO), outBf16(qn),
             outBf16(kn), outBf16(kn)},
            bwd,
            packFloats(Id::attention_grad,
                       {{A::attention_grad::f::scale, 1.0 / std::sqrt(c.D)}}),
            tol);
  }
}

// A head dimension beyond the kernels' tiles is a clear error naming the
// kernel, never a wrong result.
using CudaAttentionDeathTest = CudaAttention;
TEST_F(CudaAttentionDeathTest, HeadDimBeyondTheLimit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Case c{1, 1, 1, 4, 4, 257, false};
  std::vector<float> q(4 * 257), o(4 * 257);
  std::vector<void *> buffers = {q.data(), q.data(), q.data(), o.data()};
  std::vector<int64_t> ints = ATTENTION_INTS(attention, c);
  std::vector<double> fl = {0.0625};
  KernelFn kernel = cuda::kernelTable()[int64_t(Id::attention)];
  ASSERT_NE(kernel, nullptr);
  EXPECT_EXIT(
      kernel(&ctx, buffers.data(), ints.data(), fl.data(), A::kComputeStream),
      testing::ExitedWithCode(1),
      "attention: head dimension D = 257 is outside the CUDA "
      "kernel's range 1 to 256");
}

} // namespace
