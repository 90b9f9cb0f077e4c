//===- checkpoint.h - training checkpoints: sharded save, resume -*- C++ -*-===//
//
// A checkpoint is the whole training state: parameters, optimizer state,
// the step, the data position, the schedule and the seed. On disk (docs/checkpoints-and-hf.md,
// "Checkpoints"):
//
//   DIR/latest                          "step-00000010", the newest published
//   DIR/step-00000010/metadata.json     every tensor's global shape, dtype and
//                                       shards; the run's progress; hashes
//   DIR/step-00000010/shard-00000-of-00002.safetensors
//                                       one per shard rank of replica 0: its
//                                       rows of every tensor (padding not kept)
//
// Tensors are stored whole, by rows of dim 0 of the whole tensor, whatever
// the mesh. Under --tp the ranks hold tp parts, not rows of it: such a run
// gathers each tensor whole onto one rank of replica 0, the tensors dealt
// out in turn, and each of those ranks writes its own whole tensors into
// its own shard file. A tp rank reading a checkpoint reads the whole rows
// that hold its part's elements and keeps those.
//
// Each shard's bytes are hashed in chunks (XXH3-64), so a reader checks the
// chunks it reads. A save is written under DIR/.tmp-step-..., fsynced, and
// published by one rename; `latest` is then replaced the same way. A killed
// save leaves the last published checkpoint as it was (the next save removes
// the leftovers). Loading reshards: each rank reads the byte ranges of the
// shards that hold its rows, whatever mesh wrote them.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_FORMATS_CHECKPOINT_H
#define SHARDC_RUNTIME_FORMATS_CHECKPOINT_H

#include "runtime/backend.h"
#include "runtime/mesh.h"
#include "runtime/program/model.h"
#include "runtime/program/options.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardc::runtime {

/// Where a run is, besides its tensors.
struct TrainProgress {
  int64_t step = 0;    // optimizer steps completed
  int64_t dataRow = 0; // global batch rows (sequences of seq-len tokens) used
};

/// What a checkpoint holds of the compiled model: its parameters and the
/// optimizer state (gradient accumulators are not training state), each
/// with the region it lives in and how it is sharded.
struct CheckpointTensor {
  std::string key;          // the parameter's name; "exp_avg.<name>", ...
  const char *kind;         // "param" or "optimizer"
  abi::Region region;       // kRegionParams or kRegionState
  int64_t offset = 0;       // bytes into the region
  std::vector<int64_t> globalShape; // the whole tensor's, as stored
  int64_t storedRowElements = 1;    // elements per row of the whole tensor
  /// This rank's part, as FSDP shards it: under --tp the tp part of a split
  /// tensor (`slot` says which), else the whole tensor.
  const TensorSlot *slot = nullptr; // the slot whose layout it has
  int64_t partRows = 1;     // rows of dim 0 of the part (unpadded)
  int64_t localRows = 1;    // rows of dim 0 this rank holds (padded)
  int64_t rowElements = 1;  // elements per row of the part
  bool sharded = false;     // dim 0 split over the shard axis
  bool tpSplit = false;     // a tp part of the whole tensor (--tp > 1)
};

/// The tensors of a checkpoint of `m`, in manifest order.
std::vector<CheckpointTensor> checkpointTensors(const Manifest &m);

/// A hash of what makes two runs' checkpoints interchangeable: the names,
/// global shapes and dtypes of the tensors and the optimizer (not the mesh).
std::string modelHash(const Manifest &m);

/// A hash of the compiled program, its manifest and launch tables: what the
/// ranks compare at start-up and a checkpoint records as program_hash.
std::string programFingerprint(const Manifest &m);

class Checkpointer {
public:
  Checkpointer(const Manifest &m, const Mesh &mesh, Backend &backend,
               void *const regions[abi::kNumRegions]);

  /// Writes the training state at `progress` under `dir` and publishes it
  /// as DIR/step-<step>; then keeps the newest `keep` (0: all). Every rank
  /// calls it. Prints what it wrote and how fast (rank 0).
  void save(const std::string &dir, const TrainProgress &progress,
            const Options &o, int64_t keep);

  /// Loads the checkpoint directory `path` (a step-... directory) into the
  /// regions, resharding to this mesh; returns its progress. Every rank
  /// calls it. Throws std::runtime_error naming the file and what differs
  /// (another model or precision, a missing or truncated shard, a checksum
  /// mismatch) before the run trains on any of it.
  TrainProgress load(const std::string &path, const Options &o);

private:
  /// Writes this rank's shard file of the step `step` checkpoint into
  /// `tmp` (a shard rank of replica 0), adding its tensor bytes to
  /// `written`; returns the JSON fragment rank 0 makes the metadata of.
  std::string writeShard(const std::string &tmp, int64_t step,
                         uint64_t &written) const;
  /// Under --tp: tensor k gathered whole onto rank k mod (shards x tp) of
  /// replica 0, in rounds of one tensor a rank, each rank writing its
  /// tensors into its own shard file; every rank calls it. Returns this
  /// rank's fragment (empty where it wrote none), adding its bytes to
  /// `written`.
  std::string writeGathered(const std::string &tmp, int64_t step,
                            uint64_t &written) const;

  const Manifest &m_;
  const Mesh &mesh_;
  Backend &backend_;
  void *const *regions_;
  std::vector<CheckpointTensor> tensors_;
};

/// The published checkpoint to resume from under `dir` (a checkpoint
/// directory, or a step-... directory itself): the one `latest` names, or
/// the newest published one if `latest` is missing; "" when there is none.
std::string findCheckpoint(const std::string &dir);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_FORMATS_CHECKPOINT_H
