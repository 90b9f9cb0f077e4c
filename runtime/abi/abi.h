//===- abi.h - the one contract between compiler and runtime -----*- C++ -*-===//
//
// Everything the compiled program and the runtime must agree on, defined
// once, with no MLIR dependency: the compiler packs through it, every backend
// unpacks through it, and the rt verifier checks against it.
//
//  - kernels: ids, buffers, integer and float arguments (kernels.def), and
//    the C signature every backend implements;
//  - dtype codes and unary-function codes;
//  - the optimizer's hyper-parameter layout, io slot and state names;
//  - streams, buffer alignment, memory regions;
//  - the launch table the compiled program is (program encoding).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_ABI_ABI_H
#define SHARDC_RUNTIME_ABI_ABI_H

#include <cstdint>
#include <string>
#include <string_view>

namespace shardc::abi {

/// The manifest's "format": bumped whenever anything below changes, so that
/// a runtime refuses a program compiled against another contract.
inline constexpr int64_t kFormatVersion = 14;

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Every kernel has this C signature: `b` the buffers, `i` and `f` the
/// integer and float arguments of its row in kernels.def.
#define SHARDC_ABI_KERNEL_SIGNATURE(name)                                      \
  void shardc_k_##name(void *ctx, void **b, const int64_t *i,                  \
                       const double *f, int64_t stream)

#define SHARDC_ABI_UNPAREN(...) __VA_ARGS__

/// Per kernel, the positions of its named integer and float arguments:
/// `i[abi::linear::M]`, `f[abi::layer_norm::f::eps]`.
#define SHARDC_ABI_KERNEL(name, buffers, nbuf, nbufPer, ints, tailPer, tail,   \
                          trailing, floats, count)                             \
  namespace name {                                                             \
  enum : int64_t { SHARDC_ABI_UNPAREN ints kNumInts, kNone = -1 };             \
  namespace f {                                                                \
  enum : int64_t { SHARDC_ABI_UNPAREN floats kNumFloats };                     \
  }                                                                            \
  }
#include "runtime/abi/kernels.def"

/// Kernel ids: the row of each kernel in kernels.def.
enum class KernelId : int64_t {
#define SHARDC_ABI_KERNEL(name, ...) name,
#include "runtime/abi/kernels.def"
  kNumKernels
};
constexpr int64_t kNumKernels = int64_t(KernelId::kNumKernels);

struct KernelInfo {
  const char *name;
  const char *buffers;   ///< the buffers, with shapes
  const char *ints;      ///< the named integers, as written in kernels.def
  const char *tail;      ///< the variable integers after them
  const char *floats;    ///< the named floats
  int64_t numBuffers, buffersPer;
  int64_t numInts, tailPer, trailing;
  int64_t numFloats;
  int64_t count;         ///< index of the integer counting the variable parts
};

inline constexpr KernelInfo kKernels[] = {
#define SHARDC_ABI_KERNEL(name, buffers, nbuf, nbufPer, ints, tailPer, tail,   \
                          trailing, floats, count)                             \
  {#name,    buffers,       #ints,                                             \
   tail,     #floats,       nbuf,                                              \
   nbufPer,  name::kNumInts, tailPer,                                          \
   trailing, name::f::kNumFloats, name::count},
#include "runtime/abi/kernels.def"
};
static_assert(sizeof(kKernels) / sizeof(kKernels[0]) == size_t(kNumKernels));

inline const KernelInfo &kernelInfo(KernelId id) {
  return kKernels[int64_t(id)];
}

/// The index of kernel `k`'s named integer `dtype`, or -1 if it is not a
/// typed kernel (kernels.def).
constexpr int64_t dtypeArg(const KernelInfo &k) {
  // The named integers as written: "(M, K, N, dtype, )".
  std::string_view ints = k.ints;
  int64_t index = 0;
  for (size_t at = 0; at < ints.size();) {
    while (at < ints.size() && (ints[at] == '(' || ints[at] == ' '))
      ++at;
    size_t end = ints.find(',', at);
    if (end == std::string_view::npos)
      break;
    if (ints.substr(at, end - at) == "dtype")
      return index;
    ++index;
    at = end + 1;
  }
  return -1;
}

/// The kernel named `name`, or null.
inline const KernelInfo *lookupKernel(std::string_view name) {
  for (const KernelInfo &k : kKernels)
    if (name == k.name)
      return &k;
  return nullptr;
}

inline KernelId kernelId(const KernelInfo &k) {
  return KernelId(&k - kKernels);
}

/// The kernel's layout as one line: `linear(x[M,K] ...; ints M, K, N, ...;
/// floats eps)`.
inline std::string kernelLayout(const KernelInfo &k) {
  auto list = [](std::string s) {
    // "(a, b, )" -> "a, b"
    if (!s.empty() && s.front() == '(')
      s = s.substr(1, s.size() - 2);
    while (!s.empty() && (s.back() == ' ' || s.back() == ','))
      s.pop_back();
    return s.empty() ? std::string("none") : s;
  };
  std::string out = std::string(k.name) + "(" + k.buffers + "; ints " +
                    list(k.ints);
  if (*k.tail)
    out += std::string(", ") + k.tail;
  return out + "; floats " + list(k.floats) + ")";
}

/// Checks the argument counts of a launch of `k`; returns what is wrong, or
/// an empty string.
inline std::string checkKernelArgs(const KernelInfo &k, int64_t numBuffers,
                                   const int64_t *ints, int64_t numInts,
                                   int64_t numFloats) {
  int64_t units = 0;
  if (k.count >= 0) {
    if (numInts <= k.count)
      return "takes at least " + std::to_string(k.count + 1) +
             " integers, got " + std::to_string(numInts);
    units = ints[k.count];
    if (units < 0 || units > (int64_t(1) << 20))
      return "has a count of " + std::to_string(units) +
             " variable parts, which is out of range";
  }
  int64_t wantBuffers = k.numBuffers + k.buffersPer * units;
  int64_t wantInts = k.numInts + k.tailPer * units + k.trailing;
  if (numBuffers != wantBuffers)
    return "takes " + std::to_string(wantBuffers) + " buffers, got " +
           std::to_string(numBuffers);
  if (numInts != wantInts)
    return "takes " + std::to_string(wantInts) + " integers, got " +
           std::to_string(numInts);
  if (numFloats != k.numFloats)
    return "takes " + std::to_string(k.numFloats) + " floats, got " +
           std::to_string(numFloats);
  return "";
}

//===----------------------------------------------------------------------===//
// Element types and function codes
//===----------------------------------------------------------------------===//

/// The largest tensor shardc compiles, in bytes (1 TiB: far beyond any one
/// device, small enough that offsets and region sums of such tensors
/// cannot overflow int64). The importers refuse a larger shape by name.
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 40;
/// Bytes of a tensor of `shape` with `elementBytes` an element (its
/// elements with 1), or -1 if a dim is negative or the product overflows
/// int64: the one checked size product of the importers, the passes and
/// the runtime.
template <typename Shape>
int64_t checkedSize(const Shape &shape, int64_t elementBytes) {
  int64_t n = elementBytes;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return -1;
  return n;
}
/// The largest sum of a region's (or an arena's) buffers the compiler
/// plans, in bytes: every offset is below it, so no offset arithmetic
/// overflows.
inline constexpr int64_t kMaxRegionBytes = int64_t(1) << 60;

/// Element types as the runtime knows them: code, name, bytes.
#define SHARDC_ABI_DTYPES(X)                                                   \
  X(kF32, 0, "f32", 4)                                                         \
  X(kBF16, 1, "bf16", 2)                                                       \
  X(kF16, 2, "f16", 2)                                                         \
  X(kI32, 3, "i32", 4)                                                         \
  X(kBool, 4, "bool", 1)                                                       \
  X(kI64, 5, "i64", 8)                                                         \
  X(kF64, 6, "f64", 8)                                                         \
  X(kF8E4M3, 7, "f8e4m3", 1)                                                   \
  X(kF8E5M2, 8, "f8e5m2", 1)

enum DType : int64_t {
#define SHARDC_ABI_DTYPE_ENUM(id, code, name, bytes) id = code,
  SHARDC_ABI_DTYPES(SHARDC_ABI_DTYPE_ENUM)
#undef SHARDC_ABI_DTYPE_ENUM
};

/// Bytes of one element of `code`, or 0 for an unknown code.
constexpr int64_t dtypeBytes(int64_t code) {
#define SHARDC_ABI_DTYPE_BYTES(id, c, name, bytes)                             \
  if (code == c)                                                               \
    return bytes;
  SHARDC_ABI_DTYPES(SHARDC_ABI_DTYPE_BYTES)
#undef SHARDC_ABI_DTYPE_BYTES
  return 0;
}

/// The manifest's name of `code` ("f32", ...), or "unknown".
constexpr const char *dtypeName(int64_t code) {
#define SHARDC_ABI_DTYPE_NAME(id, c, name, bytes)                              \
  if (code == c)                                                               \
    return name;
  SHARDC_ABI_DTYPES(SHARDC_ABI_DTYPE_NAME)
#undef SHARDC_ABI_DTYPE_NAME
  return "unknown";
}

/// The code of a manifest dtype name, or -1.
inline int64_t dtypeCode(std::string_view name) {
#define SHARDC_ABI_DTYPE_CODE(id, c, n, bytes)                                 \
  if (name == n)                                                               \
    return c;
  SHARDC_ABI_DTYPES(SHARDC_ABI_DTYPE_CODE)
#undef SHARDC_ABI_DTYPE_CODE
  return -1;
}

/// The functions of the `unary` and `unary_grad` kernels, by code (their
/// names are the nn ops' mnemonics).
#define SHARDC_ABI_UNARY_FNS(X)                                                \
  X(sqrt) X(erf) X(tanh) X(sigmoid) X(neg) X(reciprocal) X(exp) X(log)        \
  X(relu) X(softplus) X(nan_to_zero) X(round_f16) X(round_bf16)

enum class UnaryFn : int64_t {
#define SHARDC_ABI_UNARY_ENUM(name) name,
  SHARDC_ABI_UNARY_FNS(SHARDC_ABI_UNARY_ENUM)
#undef SHARDC_ABI_UNARY_ENUM
  kNumFns
};

/// The code of unary function `name`, or -1.
inline int64_t unaryFnCode(std::string_view name) {
  int64_t code = 0;
#define SHARDC_ABI_UNARY_CODE(fn)                                              \
  if (name == #fn)                                                             \
    return code;                                                               \
  ++code;
  SHARDC_ABI_UNARY_FNS(SHARDC_ABI_UNARY_CODE)
#undef SHARDC_ABI_UNARY_CODE
  return -1;
}

/// "sqrt, erf, ..., exp or log".
inline std::string unaryFnList() {
  std::string s;
  const char *names[] = {
#define SHARDC_ABI_UNARY_NAME(fn) #fn,
      SHARDC_ABI_UNARY_FNS(SHARDC_ABI_UNARY_NAME)
#undef SHARDC_ABI_UNARY_NAME
  };
  size_t n = sizeof(names) / sizeof(names[0]);
  for (size_t k = 0; k < n; ++k)
    s += std::string(k == 0 ? "" : k + 1 == n ? " or " : ", ") + names[k];
  return s;
}

//===----------------------------------------------------------------------===//
// Training inputs: optimizer hyper-parameters, io slots, state names
//===----------------------------------------------------------------------===//

/// The optimizer hyper-parameter input (io slot kIoOptimizer, f32[kHyperSize]).
enum Hyper : int64_t {
  kLr,
  kBeta1, ///< AdamW beta1; SGD momentum
  kBeta2,
  kEps,
  kWeightDecay,
  kWeightDecay1D, ///< weight decay of 1-D parameters
  kStep,          ///< from 1
  kHyperSize
};

/// The device mesh's grid, as compiler and runtime both number it: world
/// = replicas x shards x tp ranks, rank r = (replica * shards + shard) * tp
/// + tp index (tp innermost: adjacent ranks, one node). The compiled
/// `shard.grid` has the axes of size > 1 of replicate and tp, and always
/// the shard axis, outermost first: [S], [R, S], [S, T] or [R, S, T].
struct MeshGrid {
  int64_t replicas = 1, shards = 1, tp = 1;
  constexpr int64_t ranks() const { return replicas * shards * tp; }
  /// Grid axis of each kind; -1 where the grid has none.
  constexpr int64_t replicaAxis() const { return replicas > 1 ? 0 : -1; }
  constexpr int64_t shardAxis() const { return replicas > 1 ? 1 : 0; }
  constexpr int64_t tpAxis() const { return tp > 1 ? shardAxis() + 1 : -1; }
  constexpr int64_t numAxes() const { return shardAxis() + (tp > 1 ? 2 : 1); }
  /// Grid axis `axis`'s ranks, the world-rank distance between its
  /// neighbours, and its name.
  constexpr int64_t axisSize(int64_t axis) const {
    return axis == replicaAxis() ? replicas : axis == tpAxis() ? tp : shards;
  }
  constexpr int64_t axisStride(int64_t axis) const {
    return axis == replicaAxis() ? shards * tp : axis == tpAxis() ? 1 : tp;
  }
  constexpr const char *axisName(int64_t axis) const {
    return axis == replicaAxis() ? "replicate" : axis == tpAxis() ? "tp" : "shard";
  }
  /// From a manifest's or module's mesh sizes: [R, S] or [R, S, T].
  template <typename Sizes> static MeshGrid of(const Sizes &sizes) {
    MeshGrid g;
    if (sizes.size() >= 2) {
      g.replicas = sizes[0];
      g.shards = sizes[1];
    }
    if (sizes.size() >= 3)
      g.tp = sizes[2];
    return g;
  }
  /// Rank `r`'s index along each kind of axis.
  constexpr int64_t tpIndex(int64_t r) const { return r % tp; }
  constexpr int64_t shardIndex(int64_t r) const { return (r / tp) % shards; }
  constexpr int64_t replicaIndex(int64_t r) const { return r / (tp * shards); }
  /// Its data-parallel index: the ranks of one tp group read the same rows.
  constexpr int64_t dataIndex(int64_t r) const { return r / tp; }
  /// Rank `r`'s index along grid axis `axis` (its key in the axis's
  /// communicator), and which of the axis's communicators it is in (its
  /// coordinates on the other axes): as MPI_Comm_split and ncclCommSplit
  /// take them.
  constexpr int64_t axisIndex(int64_t axis, int64_t r) const {
    return axis == replicaAxis() ? replicaIndex(r)
           : axis == tpAxis()    ? tpIndex(r)
                                 : shardIndex(r);
  }
  constexpr int64_t axisColor(int64_t axis, int64_t r) const {
    return axis == replicaAxis() ? shardIndex(r) * tp + tpIndex(r)
           : axis == tpAxis()    ? dataIndex(r)
                                 : replicaIndex(r) * tp + tpIndex(r);
  }
};

/// The io slots of a training program.
inline constexpr const char *kIoTokens = "tokens";        ///< i32[B,T] (T/tp with --tp)
inline constexpr const char *kIoTargets = "targets";      ///< i32[B,T] (T/tp with --tp)
inline constexpr const char *kIoLoss = "loss";            ///< f32[]
inline constexpr const char *kIoAccumulate = "accumulate"; ///< f32[2]: keep, scale
inline constexpr const char *kIoOptimizer = "optimizer";  ///< f32[kHyperSize]
inline constexpr const char *kIoMaxGradNorm = "max_grad_norm"; ///< f32[]
inline constexpr const char *kIoGradSqNorm = "grad_sq_norm";   ///< f32[]
/// Under --tp: this rank's index on the tp axis, i32[1], for the parts of
/// whole tensors a rank's part of the sequence reads (GPT-2's positions).
inline constexpr const char *kIoTpIndex = "tp_index";

/// State slots are named `<prefix><parameter>`.
inline constexpr const char *kStateGrad = "grad.";
/// Optimizer states, by optimizer.
inline constexpr const char *kStateExpAvg = "exp_avg.";
inline constexpr const char *kStateExpAvgSq = "exp_avg_sq.";
inline constexpr const char *kStateMomentum = "momentum.";
/// One rank's bf16 working copy of a parameter (rt-working-copy): written
/// by opt_step and the `refresh` entry from the f32 parameter, never
/// checkpointed.
inline constexpr const char *kStateWork = "work.";

/// The compiled optimizer, as the manifest's "optimizer" names it.
inline constexpr const char *kOptimizerAdamW = "adamw";
inline constexpr const char *kOptimizerSGD = "sgd";

//===----------------------------------------------------------------------===//
// Streams, regions, alignment
//===----------------------------------------------------------------------===//

/// The streams of a compiled schedule. The copy stream carries the copies
/// between host and device memory of `--offload=cpu`.
enum Stream : int64_t {
  kComputeStream = 0,
  kCommStream = 1,
  kCopyStream = 2,
  kNumStreams = 3
};

/// Byte alignment of every buffer in every region.
inline constexpr int64_t kBufferAlignment = 64;
/// The row stride, in elements, of linear_cross_entropy's scratch[R, ld]:
/// V rounded up to 64 (llm.c pads GPT-2's 50,257 to 50,304), so that every
/// row of logits (f32, or bf16 on bf16) starts 128-byte aligned, as
/// cuBLASLt's fast kernels need of each leading dimension.
constexpr int64_t lossHeadRowStride(int64_t V) { return (V + 63) / 64 * 64; }

/// Whether matmul_bgrad's summed operand is stored [K, count], as its bias
/// gradient reads it: a transposed for side 0, b not transposed for side 1
/// (rt-fuse-bias-grad matches only these; the backends refuse others).
constexpr bool matmulBgradSummable(int64_t side, int64_t transA,
                                   int64_t transB) {
  return side == 0 ? transA != 0 : side == 1 && transB == 0;
}
/// The backends' error for a matmul_bgrad launch `i` whose summed operand
/// is not stored [K, count]; empty if it is.
inline std::string matmulBgradLayoutError(const int64_t *i) {
  namespace K = matmul_bgrad;
  if (matmulBgradSummable(i[K::side], i[K::trans_a], i[K::trans_b]))
    return "";
  return "matmul_bgrad: side " + std::to_string(i[K::side]) + " with trans_a " +
         std::to_string(i[K::trans_a]) + ", trans_b " +
         std::to_string(i[K::trans_b]) +
         ": the summed operand must be stored [K, M] (side 0, trans_a) or "
         "[K, N] (side 1, not trans_b)";
}
constexpr int64_t alignTo(int64_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

/// Element strides of one attention operand (attention, attention_grad,
/// sdpa, sdpa_grad): element (b, h, t, d) lies at b*b + h*h + t*t + d.
struct AttentionStrides {
  int64_t b, h, t;
};

/// The layouts of those kernels' `layout` integer.
enum AttentionLayout : int64_t {
  /// [B, heads, rows, D], each operand dense (the nn ops' layout).
  kAttentionBHTD = 0,
  /// [B, rows, heads, D] in rows of `ld` elements: q, k and v read in place
  /// from a fused QKV projection's output [B*T, (H+2G)*D] (ld (H+2G)*D, k
  /// and v at element offsets H*D and (H+G)*D), o written where the output
  /// projection reads it ([B*T, H*D]), and the gradients likewise
  /// (rt-attention-layout).
  kAttentionRows = 1,
};

/// The strides of an operand of `heads` heads of `rows` rows and head
/// dimension D under `layout`, with row stride `ld` (layout 1).
constexpr AttentionStrides attentionStrides(int64_t layout, int64_t heads,
                                            int64_t rows, int64_t D,
                                            int64_t ld) {
  return layout == kAttentionRows ? AttentionStrides{rows * ld, D, ld}
                                  : AttentionStrides{heads * rows * D, rows * D, D};
}

/// attention_grad's integers for an sdpa_grad launch's `g`: the same shape,
/// mask and layout (the backends' fallback when cuDNN, or the CPU, computes
/// sdpa_grad as attention_grad).
inline void attentionGradIntsOf(const int64_t *g,
                                int64_t (&out)[attention_grad::kNumInts]) {
  namespace S = sdpa_grad;
  namespace G = attention_grad;
  const int64_t from[] = {S::B,      S::H,     S::G,      S::T,    S::S,
                          S::D,      S::causal, S::dtype, S::layout, S::ld_q,
                          S::ld_k,   S::ld_v,  S::ld_o};
  const int64_t to[] = {G::B,      G::H,     G::G,      G::T,    G::S,
                        G::D,      G::causal, G::dtype, G::layout, G::ld_q,
                        G::ld_k,   G::ld_v,  G::ld_o};
  static_assert(G::kNumInts == 13, "every attention_grad integer is copied");
  for (int k = 0; k < 13; ++k)
    out[to[k]] = g[from[k]];
}

/// The workspace the plan gives one sdpa (grad: sdpa_grad) launch of
/// q[B,H,T,D], k and v [B,G,S,D]: a bound on what cuDNN's fused attention
/// asks for through cudnn-frontend 1.32 (runtime/cuda/sdpa.cpp declines a
/// shape whose graphs ask for more):
///  - forward: 4 MiB for the engine;
///  - backward, deterministic (set_deterministic_algorithm(true), sdpa_grad's
///    `deterministic` 1, --deterministic-attention=true): the dP matrix,
///    bf16 [B,H,T up to 64,S up to 128], the engine's; the softmax sums,
///    f32 [B,H,T]; a dQ accumulator, f32 [B,H,T,D] (the ordered-dQ engine's
///    instead of dP); with grouped heads (G < H), dK and dV per query head,
///    f32 [B,H,S,D] each, summed into the kv heads; 4 MiB for the engine.
///  - backward, non-deterministic (set_deterministic_algorithm(false),
///    `deterministic` 0): the same less dP, which is O(T S). From
///    cudnn-frontend's SDPA backward node
///    (include/cudnn_frontend/node/scaled_dot_product_flash_attention.h,
///    pre_validate/expand: use_dp_workspace is forced only by dBias or the
///    deterministic algorithm, and on cuDNN >= 9.0 is otherwise false, so
///    the graph takes the non-virtual dQ_accum of b*h_q*s_q*d_qk floats and
///    get_fe_workspace_size_node adds it to softmax_sum's b*h_q*s_q floats):
///    the engine accumulates dQ with f32 atomics, FlashAttention-2's
///    scheme, whose summation order varies run to run. O(T D), not O(T S):
///    llama3-8b at B=2 T=8192 (H=32 G=8 D=128) is 774 MiB instead of
///    8,966 MiB.
constexpr int64_t sdpaWorkspaceBytes(int64_t B, int64_t H, int64_t G,
                                     int64_t T, int64_t S, int64_t D,
                                     bool grad, bool deterministic = true) {
  constexpr int64_t kEngine = int64_t(4) << 20;
  if (!grad)
    return kEngine;
  int64_t rows = B * H * T;
  int64_t dP = deterministic ? B * H * ((T + 63) / 64 * 64) *
                                   ((S + 127) / 128 * 128) * 2
                             : 0;
  int64_t heads = G < H ? 2 * B * H * S * D * 4 : 0;
  return alignTo(dP) + alignTo(rows * 4) + alignTo(rows * D * 4) +
         alignTo(heads) + kEngine;
}

/// The memory regions a compiled program addresses.
enum Region : int64_t {
  kRegionParams,    ///< parameters (sharded)
  kRegionState,     ///< gradients, optimizer states
  kRegionIo,        ///< inputs and outputs
  kRegionArena,     ///< activations, by the memory plan
  kRegionConstants, ///< read-only constants embedded in the program
  kNumRegions
};

/// Where `--offload=cpu` puts things: the parameters, state and io regions
/// in pinned host memory that device kernels may also address (mapped);
/// the entries the manifest marks "host" (the optimizer step) run on the
/// host with the CPU backend's kernels, over those regions and a host arena.
inline constexpr const char *kOffloadNone = "none";
inline constexpr const char *kOffloadCpu = "cpu";
/// The manifest's key, true when `--allow-tf32` let the program's f32 GEMMs
/// run on TF32 tensor cores (the CUDA target's cuBLASLt
/// CUBLAS_COMPUTE_32F_FAST_TF32; absent: full f32).
inline constexpr const char *kManifestAllowTf32 = "allow_tf32";
/// The manifest's key naming what the program's GEMMs compute in: "bf16"
/// (any kernel computes in bf16), "tf32" (f32 under --allow-tf32) or
/// "f32"; the trainer's mfu is against that peak.
inline constexpr const char *kManifestComputeDtype = "compute_dtype";
/// The manifest's key, true where every tp rank's token input holds the
/// whole sequences (tp-partition's vocabulary-parallel embedding and loss
/// read every token); absent (or tp 1): a tp rank's tokens are its 1/tp of
/// each sequence (sequence parallelism). The trainer feeds the tokens by
/// it, and `--report` counts a step's tokens by it.
inline constexpr const char *kManifestTpWholeTokens = "tp_whole_tokens";
constexpr bool hostRegionUnderOffload(int64_t region) {
  return region == kRegionParams || region == kRegionState ||
         region == kRegionIo;
}

//===----------------------------------------------------------------------===//
// The program: a launch table the runtime walks
//===----------------------------------------------------------------------===//
//
// Each entry point (micro_step, opt_step, ...) is an array of int64 words,
// a sequence of records:
//
//   kOpKernel, kernel id, stream, #buffers, #ints, #floats,
//       buffers (each: region << kRegionShift | byte offset),
//       ints, floats (IEEE-754 double bits)
//   kOpEventRecord, event, stream
//   kOpEventWait, event, stream
//   kOpEnd
//
// The compiled object exports, per entry `<name>`, the symbol
// `shardc_program_<name>`; the constants region is `shardc_constants`.

enum Opcode : int64_t {
  kOpEnd = 0,
  kOpKernel = 1,
  kOpEventRecord = 2,
  kOpEventWait = 3
};
inline constexpr int64_t kRegionShift = 56;
inline constexpr int64_t kOffsetMask = (int64_t(1) << kRegionShift) - 1;
inline constexpr int64_t kKernelHeaderWords = 6;

/// The words of the record at `p` (not kOpEnd).
constexpr int64_t recordWords(const int64_t *p) {
  return p[0] == kOpKernel ? kKernelHeaderWords + p[3] + p[4] + p[5] : 3;
}

constexpr int64_t bufferRef(int64_t region, int64_t offset) {
  return (region << kRegionShift) | offset;
}

inline constexpr const char *kProgramSymbolPrefix = "shardc_program_";
inline constexpr const char *kConstantsSymbol = "shardc_constants";
inline constexpr const char *kManifestSymbol = "shardc_manifest";

} // namespace shardc::abi

#endif // SHARDC_RUNTIME_ABI_ABI_H
