//===- model.h - the compiled model's manifest and parameters ---*- C++ -*-===//
//
// The manifest (JSON emitted by the compiler) tells the runtime how large its
// regions are and where every parameter, input and output lives in them.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_PROGRAM_MODEL_H
#define SHARDC_RUNTIME_PROGRAM_MODEL_H

#include "runtime/abi/abi.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace shardc::runtime {

struct TensorSlot {
  std::string name;
  std::string dtype; // "f32", "i32"
  /// io slots: the element type of the --input/--output file when it is
  /// not dtype ("f64", "f16", "bf16" for an f32 slot); else empty.
  std::string fileDtype;
  /// Whether the slot's io file holds another type than the slot, converted
  /// on read and write (decodeFile, encodeFile).
  bool convertsFile() const { return !fileDtype.empty() && fileDtype != dtype; }
  std::vector<int64_t> shape;
  int64_t offset = 0; // bytes into its region
  int64_t bytes = 0;
  std::string init; // parameters: "normal", "zeros", "ones"
  double std = 0.0;
  /// Sharded parameters: the full shape (shape is the local shard, dim 0
  /// padded to a multiple of the shard count) and the FSDP group.
  std::vector<int64_t> globalShape;
  int64_t group = -1;
  /// Under tensor parallelism: the dim of the whole tensor its tp ranks
  /// split (globalShape, or shape if not FSDP-sharded, is then this tp
  /// rank's part, that dim divided by the tp degree); -1 if every tp rank
  /// holds it whole.
  int64_t tpDim = -1;
  /// The split dim is tpBlocks blocks, each split by tp rank (GPT-2's fused
  /// c_attn: 3, its q, k and v).
  int64_t tpBlocks = 1;

  bool sharded() const { return !globalShape.empty(); }
  /// Elements per row (dims after the first).
  int64_t rowSize() const { return shape.empty() ? 1 : numel() / shape[0]; }

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

struct Manifest {
  std::string family, source;
  /// ONNX models: the initial weights and the graph template, files next to
  /// the executable (empty otherwise).
  std::string initFile, graphFile;
  /// Models from a config.json or a preset: that config.json's text.
  std::string hfConfig;
  int64_t vocabSize = 0, microBatch = 0, seqLen = 0, numLayers = 0;
  /// Parameters; persistent training state (gradient accumulators
  /// "grad.<param>", optimizer states "exp_avg.<param>", ...); inputs and
  /// outputs of the entry points.
  std::vector<TensorSlot> params, state, io;
  std::vector<std::string> entries;
  int64_t replicas = 1, shards = 1, tp = 1; // the compiled mesh
  int64_t paramBytes = 0, stateBytes = 0, ioBytes = 0, arenaBytes = 0;
  int64_t constantsBytes = 0;
  /// The target compiled for ("cpu", "cuda").
  std::string target;
  /// The compiled optimizer: abi::kOptimizerAdamW or kOptimizerSGD.
  std::string optimizer;
  /// --offload: abi::kOffloadNone, or abi::kOffloadCpu (the parameters,
  /// state and io regions in pinned host memory; `hostEntries` run on the
  /// host with the CPU backend, over a host arena of `hostArenaBytes`).
  std::string offload = abi::kOffloadNone;
  std::vector<std::string> hostEntries;
  int64_t hostArenaBytes = 0;
  bool offloaded() const { return offload == abi::kOffloadCpu; }
  /// --allow-tf32 (abi::kManifestAllowTf32): f32 GEMMs on TF32 tensor cores.
  bool allowTf32 = false;
  /// What the GEMMs compute in (abi::kManifestComputeDtype): "f32", "tf32"
  /// or "bf16".
  std::string computeDtype = "f32";
  /// Every tp rank's token input holds the whole sequences
  /// (abi::kManifestTpWholeTokens); else its 1/tp of each.
  bool tpWholeTokens = false;
  bool runsOnHost(const std::string &entry) const;
  /// Per entry point, the FLOPs of one run of it (its GEMMs and attention,
  /// counted by the compiler; per rank).
  std::vector<std::pair<std::string, int64_t>> entryFlops;
  int64_t flopsOf(const std::string &entry) const;

  /// Parses the compiler's manifest; throws std::runtime_error when malformed.
  static Manifest parse(const char *json);
  const TensorSlot &ioSlot(const std::string &name) const;
  const TensorSlot &stateSlot(const std::string &name) const;
  bool hasState(const std::string &name) const;
  int64_t numParams() const;
};

/// "[2, 3]": a shape in messages.
std::string shapeString(const std::vector<int64_t> &shape);

/// The io file of an f32 slot held as f64, f16 or bf16 (slot.fileDtype):
/// its size in bytes, and the conversions from and to the slot's f32
/// values (to f16 and bf16 rounding to nearest even, as a Cast does).
/// Throws if the slot's file dtype is not one of those.
int64_t fileBytes(const TensorSlot &slot);
void decodeFile(const TensorSlot &slot, const char *file, float *values);
void encodeFile(const TensorSlot &slot, const float *values, char *file);

/// Initializes every parameter from a counter-based generator keyed by
/// (seed, parameter name, element index), so the value of an element does
/// not depend on how parameters are later sharded. "normal" draws
/// N(0, std^2) by Box-Muller; "zeros" and "ones" are constants.
/// Of a sharded parameter, this shard `shardIndex` holds global rows
/// [shardIndex * rows, ...) of the local row count; rows past the global
/// size are padding (zero). Of a tp-split one, tp rank `tpIndex` holds
/// part `tpIndex` of its `tpDim` (then FSDP shards that part).
void initParameters(const Manifest &m, uint64_t seed, char *params,
                    int64_t shardIndex = 0, int64_t tpIndex = 0);

/// The shape of the whole tensor of parameter `p` (its tp parts joined).
std::vector<int64_t> wholeShape(const TensorSlot &p, int64_t tp);

/// Elements a row (of dim 0) of the whole tensor of `p` holds.
int64_t wholeRowElements(const TensorSlot &p, int64_t tp);

/// The element of the whole tensor that element `k` of tp rank `tpIndex`'s
/// part of `p` is (`k` indexes that part, FSDP's global shape, unpadded).
int64_t tpWholeIndex(const TensorSlot &p, int64_t tp, int64_t tpIndex,
                     int64_t k);

/// The rows [first, end) of the whole tensor (rows of dim 0 of its whole
/// shape) that hold elements [begin, end) of tp rank `tpIndex`'s part of
/// `p`: what a reader of whole rows reads for those elements. (Whole
/// indices grow with the part's, so the first and last elements bound it.)
std::pair<int64_t, int64_t> tpWholeRows(const TensorSlot &p, int64_t tp,
                                        int64_t tpIndex, int64_t begin,
                                        int64_t end);

/// Elements [begin, end) of tp rank `tpIndex`'s part of `p` into `out`,
/// taken from `whole`, which holds the whole tensor's elements from
/// `wholeBegin` on (rows tpWholeRows gave).
void tpTakePart(const TensorSlot &p, int64_t tp, int64_t tpIndex,
                int64_t begin, int64_t end, const float *whole,
                int64_t wholeBegin, float *out);

/// The counter-based generator: a uniform in (0, 1) for (key, counter).
double counterUniform(uint64_t key, uint64_t counter);
/// A standard normal for (key, counter).
double counterNormal(uint64_t key, uint64_t counter);
/// The key of a named stream of random numbers under a seed.
uint64_t streamKey(uint64_t seed, const std::string &name);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_PROGRAM_MODEL_H
