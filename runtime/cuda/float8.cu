//===- float8.cu - CUDA float8 casts and the FP8 product's scaling --------===//
//
// --float8 on the CUDA target (kernels.def's cast_fp8, the float8
// all-gather's kernels; matmul_fp8 is gemm.cu's cuBLASLt FP8 GEMM, whose
// product scaleFp8Product scales when cuBLASLt has not). The per-element
// math is runtime/math.h's, shared with the CPU kernels
// (runtime/cpu/float8.cpp), so both round alike, bit for bit.
//
// cast_fp8 is its scales, then its cast:
//  - tensorwise, a grid of blocks each reducing a grid-stride share of x
//    (128-bit loads) to its max, atomically max'ed into scale[0] (zeroed
//    first; amax >= 0, so the int order of the bits is the float order),
//    then one thread turns the amax into {s, 1/s};
//  - rowwise, a block a row (128-bit loads); or, when the cast transposes
//    (the scales are x's columns'), blocks of kColSlots x kRowLanes
//    threads over a strip of columns and a chunk of rows, a warp reading
//    one row's consecutive columns, max'ed atomically into each column's
//    amax and then turned into scales;
//  - the cast in q's layout: a grid-stride loop of 128-bit loads of x and
//    4- or 8-byte stores of q; or, transposed (trans, or q and qt at once
//    with both), by tiles of kTileRows x kTileCols elements through shared
//    memory (ByteTile), so that both x's reads and qt's writes are
//    coalesced; the edges of R and C, and unaligned buffers, element by
//    element.
// transpose_fp8 is the tiled transpose of bytes.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/context.h"
#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/launch.h"
#include "runtime/math.h"

#include <algorithm>
#include <cstdint>

namespace A = shardc::abi;
using namespace shardc::runtime;
using namespace shardc::runtime::cuda;

namespace {

/// How cast_fp8's scales are taken: one over x, one per row of x, or one
/// per column of x (the rows of a transposed q).
enum ScaleMode { kTensor, kRows, kColumns };

/// a b and 1 / a rounded to nearest as IEEE's, whatever the compiler's
/// flags: a product never fused into an add after it (nvcc contracts
/// a * b + c into an FMA; the CPU rounds the product first), a reciprocal
/// never approximate (--use_fast_math).
__device__ inline float mulRounded(float a, float b) {
#ifdef SHARDC_CUDA_EMULATION
  return a * b;
#else
  return __fmul_rn(a, b);
#endif
}
__device__ inline float reciprocal(float a) {
#ifdef SHARDC_CUDA_EMULATION
  return 1.0f / a;
#else
  return __frcp_rn(a);
#endif
}

/// A tensorwise scale: pair = {s, 1 / s} (kernels.def).
__device__ inline void setScalePair(float *pair, float s) {
  pair[0] = s;
  pair[1] = reciprocal(s);
}

/// kN bytes to p (kN-byte aligned) in one store, b[0] at the lowest
/// address.
template <int kN>
__device__ inline void storeBytes(uint8_t *p, const uint8_t (&b)[kN]) {
  static_assert(kN == 4 || kN == 8, "4- or 8-byte stores");
  uint32_t w[kN / 4];
#pragma unroll
  for (int k = 0; k < kN / 4; ++k)
    w[k] = uint32_t(b[4 * k]) | uint32_t(b[4 * k + 1]) << 8 |
           uint32_t(b[4 * k + 2]) << 16 | uint32_t(b[4 * k + 3]) << 24;
  if constexpr (kN == 4)
    *reinterpret_cast<uint32_t *>(p) = w[0];
  else
    *reinterpret_cast<uint2 *>(p) = uint2{w[0], w[1]};
}

/// v = row[c, c + kN) as f32: one 128-bit load when vec (C a multiple of
/// kN, the row 16-byte aligned), else the columns below C one at a time
/// (0 beyond C).
template <typename T>
__device__ inline void loadPack(const T *row, int64_t c, int64_t C, bool vec,
                                float (&v)[Pack<T>::kN]) {
  constexpr int kN = Pack<T>::kN;
  if (vec && c + kN <= C) {
    Pack<T> p;
    p.load(row + c, 0);
#pragma unroll
    for (int e = 0; e < kN; ++e)
      v[e] = p.v[e];
    return;
  }
#pragma unroll
  for (int e = 0; e < kN; ++e)
    v[e] = c + e < C ? toFloat(row[c + e]) : 0.0f;
}

/// row[c, c + kN) = b, bytes below column C: one store when vec (C a
/// multiple of kN, the row kN-byte aligned), else one at a time.
template <int kN>
__device__ inline void storeRowBytes(uint8_t *row, int64_t c, int64_t C,
                                     bool vec, const uint8_t (&b)[kN]) {
  if (vec && c + kN <= C) {
    storeBytes<kN>(row + c, b);
    return;
  }
#pragma unroll
  for (int e = 0; e < kN; ++e)
    if (c + e < C)
      row[c + e] = b[e];
}

/// The transposing kernels' tile: kTileRows x kTileCols bytes of q (rows
/// r0.., columns c0..), a block of kThreads threads a tile. It is loaded
/// by items of kW columns times 4 rows (item p, g: columns p kW.., rows
/// 4g..4g+3), each from kW-element loads of 4 rows, and stored to
/// qt[C,R] a column of q at a time as kTileWords 4-byte words (a warp
/// writes kTileRows consecutive bytes of a row of qt).
constexpr int kTileRows = 128, kTileCols = 64, kTileWords = kTileRows / 4;

/// The tile held transposed in shared memory: w[c][.] holds column c, a
/// word the bytes of 4 consecutive rows (the first in the low byte). A
/// row of kTileWords + 1 words, and the words of the right half of the
/// columns rotated by kW / 2 (slot), make both phases free of bank
/// conflicts: a warp's puts (32 items: kTileCols / kW column items times
/// 32 kW / kTileCols row groups g) write word c (kTileWords + 1) +
/// slot(c, g), bank (c + g + rotation) mod 32, 32 distinct banks for each
/// e; a warp's stores read the 32 words of one column.
template <int kW> struct ByteTile {
  static constexpr int kItems = kTileCols / kW * kTileWords;
  uint32_t w[kTileCols][kTileWords + 1];

  __device__ static int slot(int c, int word) {
    return (word + (c >= kTileCols / 2 ? kW / 2 : 0)) % kTileWords;
  }
  /// Item `it` (of kItems): its first column p kW and first row 4 g.
  __device__ static int column(int it) { return it % (kTileCols / kW) * kW; }
  __device__ static int rowGroup(int it) { return it / (kTileCols / kW); }
  /// Item it's bytes: b[j][e] is row 4 g + j, column p kW + e.
  __device__ void put(int it, const uint8_t (&b)[4][kW]) {
    int c0 = column(it), g = rowGroup(it);
#pragma unroll
    for (int e = 0; e < kW; ++e)
      w[c0 + e][slot(c0 + e, g)] = uint32_t(b[0][e]) | uint32_t(b[1][e]) << 8 |
                                   uint32_t(b[2][e]) << 16 |
                                   uint32_t(b[3][e]) << 24;
  }
  /// The tile (rows r0.., columns c0.. of q[R,C]) into qt[C,R]: 4-byte
  /// stores when vec (R a multiple of 4, qt 4-byte aligned), else the
  /// bytes below row R one at a time. After a barrier following the puts.
  __device__ void store(uint8_t *qt, int64_t R, int64_t C, int64_t r0,
                        int64_t c0, bool vec) const {
    for (int k = threadIdx.x; k < kTileCols * kTileWords; k += blockDim.x) {
      int c = k / kTileWords, word = k % kTileWords;
      int64_t col = c0 + c, r = r0 + 4 * word;
      if (col >= C || r >= R)
        continue;
      uint32_t v = w[c][slot(c, word)];
      uint8_t *out = qt + col * R + r;
      if (vec && r + 4 <= R) {
        *reinterpret_cast<uint32_t *>(out) = v;
        continue;
      }
      for (int j = 0; j < 4 && r + j < R; ++j)
        out[j] = uint8_t(v >> (8 * j));
    }
  }
};

/// The tiles of R x C: kTileRows x kTileCols each, row-major.
struct Tiles {
  int64_t across, count;
  SHARDC_HD Tiles(int64_t R, int64_t C)
      : across((C + kTileCols - 1) / kTileCols),
        count((R + kTileRows - 1) / kTileRows * across) {}
  SHARDC_HD int64_t r0(int64_t at) const { return at / across * kTileRows; }
  SHARDC_HD int64_t c0(int64_t at) const { return at % across * kTileCols; }
};

// x[n] -> amax[0] = max(amax[0], max |x|): a grid-stride share of x a
// block (x[0, head) and what follows the last 16 bytes' pack one at a
// time, the packs between with 128-bit loads), the block's max, then an
// atomic max on the bits (amax >= 0, so the int order is the float
// order; amax zeroed before the launch).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    fp8AmaxKernel(const T *x, int64_t n, int64_t head, float *amax) {
  constexpr int kN = Pack<T>::kN;
  int64_t packs = (n - head) / kN, after = head + packs * kN;
  const T *aligned = x + head;
  float m = 0.0f;
  FOR_EACH(j, packs) {
    Pack<T> v;
    v.load(aligned, j);
#pragma unroll
    for (int e = 0; e < kN; ++e)
      m = fmaxf(m, fabsf(v.v[e]));
  }
  FOR_EACH(k, head + (n - after)) { // the elements outside the packs
    m = fmaxf(m, fabsf(toFloat(x[k < head ? k : after + (k - head)])));
  }
  blockAmaxInto(amax, m);
}

// scale[2] holding the amax in scale[0] -> scale = {s, 1/s}, s =
// fp8Scale(amax) (one thread).
__global__ void fp8TensorScaleKernel(float *scale, int64_t format) {
  if (threadIdx.x == 0 && blockIdx.x == 0)
    setScalePair(scale, fp8Scale(scale[0], format, false));
}

// x[R,C] -> scale[R] = fp8Scale(max |x[r,:]|) rounded down to a power of
// two (rowwise): a block a row (grid-stride over rows), 128-bit loads
// when vec.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    fp8RowScalesKernel(const T *x, int64_t R, int64_t C, bool vec,
                       int64_t format, float *scale) {
  constexpr int kN = Pack<T>::kN;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T *row = x + r * C;
    float m = 0.0f;
    forRowPacks<T>(C, vec, [&](int64_t c0, int n) {
      float v[kN];
      loadCols(row, c0, n, v);
      for (int e = 0; e < n; ++e)
        m = fmaxf(m, fabsf(v[e]));
    });
    m = blockMax(m);
    if (threadIdx.x == 0)
      scale[r] = fp8Scale(m, format, true);
  }
}

// x[R,C] -> amax[C] = max(amax[c], max |x[r,c]| over the block's rows):
// block (bx, by) covers columns [bx kColSlots kN, (bx + 1) kColSlots kN)
// and rows [by rows, (by + 1) rows); slot s of kColSlots owns kN
// consecutive columns (a 128-bit load a row when vec), lane l of
// kRowLanes its rows l, l + kRowLanes, ..., so a warp reads kColSlots kN
// consecutive elements of one row. The lanes' maxima meet in shared
// memory, and slot s's are max'ed atomically on the bits into amax
// (zeroed before the launch).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    fp8ColumnAmaxKernel(const T *x, int64_t R, int64_t C, int64_t rows,
                        bool vec, float *amax) {
  constexpr int kN = Pack<T>::kN;
  __shared__ float part[kRowLanes][kN][kColSlots];
  int slot = threadIdx.x % kColSlots, lane = threadIdx.x / kColSlots;
  int64_t c = (int64_t(blockIdx.x) * kColSlots + slot) * kN;
  int64_t first = int64_t(blockIdx.y) * rows, end = std::min(R, first + rows);
  float m[kN];
#pragma unroll
  for (int e = 0; e < kN; ++e)
    m[e] = 0.0f;
  if (c < C)
    for (int64_t r = first + lane; r < end; r += kRowLanes) {
      float v[kN];
      loadPack(x + r * C, c, C, vec, v);
#pragma unroll
      for (int e = 0; e < kN; ++e)
        m[e] = fmaxf(m[e], fabsf(v[e]));
    }
#pragma unroll
  for (int e = 0; e < kN; ++e)
    part[lane][e][slot] = m[e];
  __syncthreads();
  if (lane == 0)
    for (int e = 0; e < kN && c + e < C; ++e) {
      float v = part[0][e][slot];
      for (int l = 1; l < kRowLanes; ++l)
        v = fmaxf(v, part[l][e][slot]);
      atomicMax(reinterpret_cast<int *>(amax + c + e), __float_as_int(v));
    }
}

// amax[n] -> scale[n] = fp8Scale(amax) rounded down to a power of two
// (rowwise; in place: scale may be amax).
__global__ void fp8RowwiseScalesKernel(const float *amax, int64_t n,
                                       int64_t format, float *scale) {
  FOR_EACH(j, n) { scale[j] = fp8Scale(amax[j], format, true); }
}

// x[R,C] -> q[R,C] = fp8(x * scale[0]) (kTensor) or fp8(x[r,:] *
// scale[r]) (kRows): a grid-stride loop over packs of kN elements when
// vec (a 128-bit load of x, one kN-byte store of q; x 16-byte and q
// kN-byte aligned, and with kRows C a multiple of kN, a pack one row's),
// then the elements after the last pack (all of them without vec) one at
// a time.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    fp8CastKernel(const T *x, int64_t R, int64_t C, int mode, int64_t format,
                  const float *scale, bool vec, uint8_t *q) {
  constexpr int kN = Pack<T>::kN;
  int64_t n = R * C, packs = vec ? n / kN : 0;
  FOR_EACH(j, packs) {
    float s = scale[mode == kRows ? j * kN / C : 0];
    Pack<T> v;
    v.load(x, j);
    uint8_t b[kN];
#pragma unroll
    for (int e = 0; e < kN; ++e)
      b[e] = floatToFp8(v.v[e] * s, format);
    storeBytes<kN>(q + j * kN, b);
  }
  FOR_EACH(e, n - packs * kN) {
    int64_t k = packs * kN + e;
    float s = scale[mode == kRows ? k / C : 0];
    q[k] = floatToFp8(toFloat(x[k]) * s, format);
  }
}

// x[R,C] -> qt[C,R] = fp8(x * scale[0]) (kTensor) or fp8(x[:,c] *
// scale[c]) (kColumns), transposed, and q[R,C] too (untransposed) when q
// is not null (cast_fp8's both): by tiles of kTileRows x kTileCols
// elements (Tiles; grid-stride over them), an item of kN columns times 4
// rows a thread (ByteTile: 128-bit loads of x's rows and kN-byte stores
// of q's when vec, i.e. C a multiple of kN, x 16-byte and q kN-byte
// aligned), qt's columns stored from the tile as 4-byte words (vecT: R a
// multiple of 4, qt 4-byte aligned).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    fp8CastTiledKernel(const T *x, int64_t R, int64_t C, int mode,
                       int64_t format, const float *scale, bool vec, bool vecT,
                       uint8_t *q, uint8_t *qt) {
  constexpr int kN = Pack<T>::kN;
  __shared__ ByteTile<kN> tile;
  Tiles tiles(R, C);
  for (int64_t at = blockIdx.x; at < tiles.count; at += gridDim.x) {
    int64_t r0 = tiles.r0(at), c0 = tiles.c0(at);
    for (int it = threadIdx.x; it < ByteTile<kN>::kItems; it += blockDim.x) {
      int64_t c = c0 + ByteTile<kN>::column(it);
      int64_t r = r0 + 4 * ByteTile<kN>::rowGroup(it);
      float s[kN];
#pragma unroll
      for (int e = 0; e < kN; ++e)
        s[e] = mode == kTensor ? scale[0] : c + e < C ? scale[c + e] : 0.0f;
      uint8_t b[4][kN];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float v[kN];
        if (r + j < R)
          loadPack(x + (r + j) * C, c, C, vec, v);
        else
          for (int e = 0; e < kN; ++e)
            v[e] = 0.0f;
#pragma unroll
        for (int e = 0; e < kN; ++e)
          b[j][e] = floatToFp8(v[e] * s[e], format);
        if (q && r + j < R)
          storeRowBytes<kN>(q + (r + j) * C, c, C, vec, b[j]);
      }
      tile.put(it, b);
    }
    __syncthreads();
    tile.store(qt, R, C, r0, c0, vecT);
    __syncthreads(); // the tile is read before the next one's puts
  }
}

// q[R,C] -> t[C,R] bytes: by tiles of kTileRows x kTileCols (Tiles,
// ByteTile), an item of 8 columns times 4 rows a thread (an 8-byte load
// a row when vec: C a multiple of 8, q 8-byte aligned), t's columns
// stored as 4-byte words (vecT: R a multiple of 4, t 4-byte aligned).
__global__ void __launch_bounds__(kThreads)
    fp8TransposeKernel(const uint8_t *q, int64_t R, int64_t C, bool vec,
                       bool vecT, uint8_t *t) {
  constexpr int kW = 8;
  __shared__ ByteTile<kW> tile;
  Tiles tiles(R, C);
  for (int64_t at = blockIdx.x; at < tiles.count; at += gridDim.x) {
    int64_t r0 = tiles.r0(at), c0 = tiles.c0(at);
    for (int it = threadIdx.x; it < ByteTile<kW>::kItems; it += blockDim.x) {
      int64_t c = c0 + ByteTile<kW>::column(it);
      int64_t r = r0 + 4 * ByteTile<kW>::rowGroup(it);
      uint8_t b[4][kW];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint8_t *row = q + (r + j < R ? r + j : 0) * C;
        if (r + j < R && vec && c + kW <= C) {
          uint2 raw = *reinterpret_cast<const uint2 *>(row + c);
#pragma unroll
          for (int e = 0; e < kW; ++e)
            b[j][e] = uint8_t((e < 4 ? raw.x : raw.y) >> (8 * (e % 4)));
        } else {
#pragma unroll
          for (int e = 0; e < kW; ++e)
            b[j][e] = r + j < R && c + e < C ? row[c + e] : 0;
        }
      }
      tile.put(it, b);
    }
    __syncthreads();
    tile.store(t, R, C, r0, c0, vecT);
    __syncthreads();
  }
}

// d[M,N] f32 -> y[M,N] (Y: T, or f32 when yF32) = d (scaled) or d sa[1]
// sb[1] (tensorwise: the reciprocals' product first) or d / sa[m] / sb[n]
// (rowwise), rounded to Y, + bias[N] (T) rounded again.
template <typename T, typename Y>
__global__ void __launch_bounds__(kThreads) fp8ProductKernel(Fp8Product p) {
  bool tensorwise = !p.scaled && !p.rowwise;
  float s = tensorwise ? p.sa[1] * p.sb[1] : 1.0f;
  FOR_EACH(k, p.M * p.N) {
    int64_t m = k / p.N, c = k % p.N;
    float v = p.d[k];
    if (tensorwise)
      v = mulRounded(v, s);
    else if (!p.scaled)
      v = v / p.sa[m] / p.sb[c];
    Y y = fromFloat<Y>(v);
    if (p.bias)
      y = fromFloat<Y>(toFloat(y) + toFloat(static_cast<const T *>(p.bias)[c]));
    static_cast<Y *>(p.y)[k] = y;
  }
}

// amax[P,k] -> scale[k,2] = {s, 1/s}, s = fp8Scale(max_p amax[p,j],
// rounded to bf16 when bf16), a thread a weight.
__global__ void fp8GlobalScalesKernel(const float *amax, int64_t P, int64_t k,
                                      int64_t format, bool bf16,
                                      float *scale) {
  FOR_EACH(j, k) {
    float m = 0.0f;
    for (int64_t p = 0; p < P; ++p)
      m = fmaxf(m, amax[p * k + j]);
    setScalePair(scale + 2 * j,
                 fp8Scale(bf16 ? roundToBf16(m) : m, format, false));
  }
}

/// How many of x's first n elements precede its first 16-byte boundary
/// (fp8AmaxKernel's head).
template <typename T> int64_t headTo16(const T *x, int64_t n) {
  auto address = reinterpret_cast<uintptr_t>(x);
  return std::min<int64_t>(n, int64_t((16 - address % 16) % 16 / sizeof(T)));
}

/// Launches fp8AmaxKernel: amax[0] max'ed with max |x[0, n)|.
template <typename T>
void launchAmax(cudaStream_t s, const T *x, int64_t n, float *amax) {
  if (n == 0)
    return;
  auto *kernel = &fp8AmaxKernel<T>;
  SHARDC_LAUNCH(kernel, gridFor((n + Pack<T>::kN - 1) / Pack<T>::kN), kThreads,
                0, s, x, n, headTo16(x, n), amax);
}

/// Whether an fp8 cast's (cast_fp8, cast_fp8_scaled) format is an fp8
/// dtype code, and `both` only on a tensorwise cast without trans;
/// otherwise fatal, naming `kernel` (the CPU kernels' check).
void checkCast(const char *kernel, int64_t format, bool rowwise, bool trans,
               bool both) {
  if (format != A::kF8E4M3 && format != A::kF8E5M2)
    fatal("%s: format %lld is not an fp8 dtype code", kernel,
          (long long)format);
  if (both && (rowwise || trans))
    fatal("%s: both (q and qt) is a tensorwise cast's without trans, not "
          "rowwise %d trans %d",
          kernel, int(rowwise), int(trans));
}

/// The cast of x[R,C] with scales already in `scale` (mode): into q[R,C]
/// (the flat kernel), or q[C,R] when trans, or q[R,C] and qt[C,R] when qt
/// (the tiled kernel).
template <typename T>
void launchCast(cudaStream_t s, const T *x, int64_t R, int64_t C, int mode,
                bool trans, int64_t format, const float *scale, uint8_t *q,
                uint8_t *qt) {
  constexpr int kN = Pack<T>::kN;
  if (R * C == 0)
    return;
  if (!trans && !qt) {
    bool vec = aligned16(x) && reinterpret_cast<uintptr_t>(q) % kN == 0 &&
               (mode == kTensor || C % kN == 0);
    auto *kernel = &fp8CastKernel<T>;
    SHARDC_LAUNCH(kernel, gridFor(vec ? R * C / kN + 1 : R * C), kThreads, 0, s,
                  x, R, C, mode, format, scale, vec, q);
    return;
  }
  uint8_t *straight = trans ? nullptr : q, *transposed = trans ? q : qt;
  bool vec = C % kN == 0 && aligned16(x) &&
             reinterpret_cast<uintptr_t>(straight) % kN == 0;
  bool vecT = R % 4 == 0 && reinterpret_cast<uintptr_t>(transposed) % 4 == 0;
  auto *kernel = &fp8CastTiledKernel<T>;
  unsigned grid =
      unsigned(std::min<int64_t>(Tiles(R, C).count, deviceBlocks()));
  SHARDC_LAUNCH(kernel, grid, kThreads, 0, s, x, R, C, mode, format, scale, vec,
                vecT, straight, transposed);
}

} // namespace

void shardc::runtime::cuda::scaleFp8Product(Context &c, int64_t stream,
                                            const Fp8Product &p) {
  if (p.M * p.N == 0)
    return;
  auto *kernel = p.bf16 && p.yF32 ? &fp8ProductKernel<__nv_bfloat16, float>
                 : p.bf16 ? &fp8ProductKernel<__nv_bfloat16, __nv_bfloat16>
                          : &fp8ProductKernel<float, float>;
  SHARDC_LAUNCH(kernel, gridFor(p.M * p.N), kThreads, 0, c.stream(stream), p);
}

// x[R,C] (f32 or bf16) -> q[R,C]|[C,R] fp8, scale[2]|[R]|[C], qt[C,R]?
// (kernels.def)
SHARDC_CUDA_KERNEL(cast_fp8) {
  namespace K = A::cast_fp8;
  int64_t R = i[K::R], C = i[K::C], format = i[K::format];
  bool rowwise = i[K::rowwise] != 0, trans = i[K::trans] != 0;
  bool both = i[K::both] != 0;
  checkCast("cast_fp8", format, rowwise, trans, both);
  int mode = !rowwise ? kTensor : trans ? kColumns : kRows;
  cudaStream_t s = streamOf(ctx, stream);
  withDtype(i[K::dtype], "cast_fp8", [&](auto t) {
    using T = decltype(t);
    constexpr int kN = Pack<T>::kN;
    const T *x = static_cast<const T *>(b[0]);
    float *scale = F(b[2]);
    if (mode == kTensor) {
      CUDA_CHECK(cudaMemsetAsync(scale, 0, sizeof(float), s));
      launchAmax(s, x, R * C, scale);
      SHARDC_LAUNCH(fp8TensorScaleKernel, 1, 1, 0, s, scale, format);
    } else if (mode == kRows) {
      if (R > 0) {
        auto *kernel = &fp8RowScalesKernel<T>;
        SHARDC_LAUNCH(kernel, unsigned(std::min<int64_t>(R, 1 << 30)), kThreads,
                      0, s, x, R, C, packedRows<T>(C, x), format, scale);
      }
    } else if (C > 0) {
      CUDA_CHECK(cudaMemsetAsync(scale, 0, size_t(C) * sizeof(float), s));
      if (R > 0) {
        ColumnChunks ch = columnChunks(R, C, kN);
        auto *kernel = &fp8ColumnAmaxKernel<T>;
        SHARDC_LAUNCH(kernel, dim3(unsigned(ch.colBlocks), unsigned(ch.chunks)),
                      kThreads, 0, s, x, R, C, ch.rows, packedRows<T>(C, x),
                      scale);
      }
      SHARDC_LAUNCH(fp8RowwiseScalesKernel, gridFor(C), kThreads, 0, s,
                    static_cast<const float *>(scale), C, format, scale);
    }
    launchCast(s, x, R, C, mode, trans, format, scale,
               static_cast<uint8_t *>(b[1]),
               both ? static_cast<uint8_t *>(b[3]) : nullptr);
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
      launchAmax(s, static_cast<const T *>(b[j]), n[j], amax + j);
  });
}

// amax[P,k] -> scale[k,2] (kernels.def).
SHARDC_CUDA_KERNEL(fp8_scales) {
  namespace K = A::fp8_scales;
  int64_t P = i[K::P], k = i[K::k];
  if (k == 0)
    return;
  SHARDC_LAUNCH(fp8GlobalScalesKernel, gridFor(k), kThreads, 0,
                streamOf(ctx, stream), static_cast<const float *>(F(b[0])), P,
                k, i[K::format], i[K::amax_dtype] == A::kBF16, F(b[1]));
}

// x[R,C] (f32 or bf16), scale[2] -> q[R,C]|[C,R] fp8, qt[C,R]?
// (kernels.def)
SHARDC_CUDA_KERNEL(cast_fp8_scaled) {
  namespace K = A::cast_fp8_scaled;
  int64_t R = i[K::R], C = i[K::C], format = i[K::format];
  bool trans = i[K::trans] != 0, both = i[K::both] != 0;
  checkCast("cast_fp8_scaled", format, false, trans, both);
  cudaStream_t s = streamOf(ctx, stream);
  withDtype(i[K::dtype], "cast_fp8_scaled", [&](auto t) {
    using T = decltype(t);
    // cast_fp8's cast with its scale given.
    launchCast(s, static_cast<const T *>(b[0]), R, C, kTensor, trans, format,
               static_cast<const float *>(F(b[1])),
               static_cast<uint8_t *>(b[2]),
               both ? static_cast<uint8_t *>(b[3]) : nullptr);
  });
}

// q[R,C] -> t[C,R] bytes (kernels.def).
SHARDC_CUDA_KERNEL(transpose_fp8) {
  namespace K = A::transpose_fp8;
  int64_t R = i[K::R], C = i[K::C];
  if (R * C == 0)
    return;
  const auto *q = static_cast<const uint8_t *>(b[0]);
  auto *t = static_cast<uint8_t *>(b[1]);
  bool vec = C % 8 == 0 && reinterpret_cast<uintptr_t>(q) % 8 == 0;
  bool vecT = R % 4 == 0 && reinterpret_cast<uintptr_t>(t) % 4 == 0;
  unsigned grid =
      unsigned(std::min<int64_t>(Tiles(R, C).count, deviceBlocks()));
  SHARDC_LAUNCH(fp8TransposeKernel, grid, kThreads, 0, streamOf(ctx, stream), q,
                R, C, vec, vecT, t);
}

void shardc::runtime::cuda::addFloat8Kernels(KernelFn *table) {
  table[int64_t(A::KernelId::cast_fp8)] = &shardc_cuda_k_cast_fp8;
  table[int64_t(A::KernelId::amax_group)] = &shardc_cuda_k_amax_group;
  table[int64_t(A::KernelId::fp8_scales)] = &shardc_cuda_k_fp8_scales;
  table[int64_t(A::KernelId::cast_fp8_scaled)] =
      &shardc_cuda_k_cast_fp8_scaled;
  table[int64_t(A::KernelId::transpose_fp8)] = &shardc_cuda_k_transpose_fp8;
}
