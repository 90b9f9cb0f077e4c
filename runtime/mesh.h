//===- mesh.h - the device mesh over MPI -------------------------*- C++ -*-===//
//
// The compiled mesh is R x S x T (R = 1 without replication, T = 1 without
// tensor parallelism), its ranks and grid axes numbered by abi::MeshGrid:
// tp innermost, then shard, then replicate. One communicator per grid axis.
//
// Two implementations: mesh.cpp over MPI (libshardc_mesh_mpi), and
// mesh_local.cpp, one process and no MPI (libshardc_mesh_local), which a
// one-rank executable of a target that needs no collectives on one rank
// (cuda) links instead, so that it runs without mpirun or libmpi.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_MESH_H
#define SHARDC_RUNTIME_MESH_H

#include <mpi.h>

#include "runtime/abi/abi.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardc::runtime {

class Mesh {
public:
  /// Initializes MPI and checks the launch against the compiled mesh; on a
  /// mismatch every rank prints the same one-line error and exits 1.
  static Mesh init(int *argc, char ***argv, int64_t replicas, int64_t shards,
                   int64_t tp = 1);
  /// Finalizes MPI.
  static void finalize();

  int rank = 0, world = 1;
  int64_t replicas = 1, shards = 1, tp = 1;
  /// MPI's thread level (`provided` of MPI_Init_thread). The runtime calls
  /// MPI from the main thread only, while other threads run (the
  /// watchdog's, OpenMP's, CUDA's): it needs MPI_THREAD_FUNNELED, which
  /// init requires. It asks for MPI_THREAD_SERIALIZED: the emulated NCCL
  /// may call MPI from the emulated device's thread, one call at a time,
  /// and checks the level itself.
  int threadLevel = MPI_THREAD_SINGLE;
  /// Why MPI's thread level `provided` is too low for the runtime, naming
  /// it; empty if it is enough. (mesh.cpp)
  static std::string threadLevelProblem(int provided);
  abi::MeshGrid grid() const { return {replicas, shards, tp}; }
  int64_t shardIndex() const { return grid().shardIndex(rank); }
  int64_t replicaIndex() const { return grid().replicaIndex(rank); }
  int64_t tpIndex() const { return grid().tpIndex(rank); }
  /// The data-parallel ranks (replicas x shards) and this rank's index
  /// among them: a tp group's ranks read the same rows.
  int64_t dataRanks() const { return replicas * shards; }
  int64_t dataIndex() const { return grid().dataIndex(rank); }
  /// The communicator of grid axis `axis` of the compiled grid.
  MPI_Comm axis(int64_t axis) const;
  /// This rank's index along grid axis `axis`, and the axis's ranks.
  int axisRank(int64_t axis) const;
  int axisSize(int64_t axis) const;
  /// The communicator of the shard axis (the ranks of one replica and tp
  /// index).
  MPI_Comm shardComm() const { return shardComm_; }

  /// The communicator of the group of `n` consecutive ranks of grid axis
  /// `axis` this rank belongs to (created on first use).
  MPI_Comm subgroup(int64_t axis, int64_t n) const;

  /// Sum over all ranks.
  double sumAll(double value) const;
  /// Every rank's `value` in rank order, on rank 0 (empty elsewhere).
  std::vector<std::string> gatherStrings(const std::string &value) const;
  /// Rank 0's `value`, on every rank.
  std::string broadcastString(const std::string &value) const;
  void barrier() const;
  /// The n floats of every rank of this rank's shard axis, in rank order,
  /// into `full` (n x shards) on the axis's rank `root` (its shard index);
  /// false on failure.
  bool gatherShards(const float *local, int64_t n, float *full,
                    int64_t root = 0) const;
  /// The same over this rank's tp axis, onto its tp rank `root`.
  bool gatherTp(const float *local, int64_t n, float *full,
                int64_t root = 0) const;
  /// Ends every rank of the job with `code` (after an error on this one).
  [[noreturn]] void abort(int code) const;

private:
  mutable std::vector<std::pair<std::pair<int64_t, int64_t>, MPI_Comm>> subgroups_;
  /// Per grid axis (at most 3): this rank's index and the axis's ranks,
  /// asked of MPI once, at init, so that no MPI call is made while a run's
  /// collectives may be calling MPI on another thread.
  int axisRanks_[3] = {0, 0, 0}, axisSizes_[3] = {1, 1, 1};
  // Set by init (no MPI symbol is named here: mesh_local links no MPI).
  MPI_Comm shardComm_{}, replicaComm_{}, tpComm_{};
};

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_MESH_H
