//===- Sharding.h - the sharding plan's flags, parsed once ---------*- C++ -*-===//
//
// `--mesh` and `--reshard-after-forward` as the driver and the FSDP passes
// both read them: one parser, one set of messages. No MLIR dependency.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TARGET_SHARDING_H
#define SHARDC_TARGET_SHARDING_H

#include <cstdint>
#include <string>

namespace shardc {

/// A device mesh: `replicas` x `shards` ranks (replicas = 1 without HSDP).
struct MeshShape {
  int64_t replicas = 1, shards = 1;
  int64_t ranks() const { return replicas * shards; }
};

/// Parses "N" or "RxS" (positive sizes). Returns false and sets `error`
/// (naming the text) otherwise.
bool parseMesh(const std::string &text, MeshShape &mesh, std::string &error);

/// FSDP2's reshard_after_forward: free gathered parameters after forward
/// (true), keep them (false), or keep 1/N of them within groups of N ranks.
struct ReshardPolicy {
  enum Kind { kFree, kKeep, kGroups } kind = kFree;
  int64_t groupSize = 0; ///< N, for kGroups
};

/// Parses "true", "false" or a positive N; with a mesh, N must divide its
/// shard axis (and N equal to the shard count is "true"). Returns false and
/// sets `error` otherwise.
bool parseReshard(const std::string &text, const MeshShape *mesh,
                  ReshardPolicy &policy, std::string &error);

} // namespace shardc

#endif // SHARDC_TARGET_SHARDING_H
