//===- Sharding.h - the sharding plan's flags, parsed once ---------*- C++ -*-===//
//
// `--mesh`, `--tp` and `--reshard-after-forward` as the driver and the FSDP passes
// both read them: one parser, one set of messages. No MLIR dependency.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TARGET_SHARDING_H
#define SHARDC_TARGET_SHARDING_H

#include "runtime/abi/abi.h"

#include <cstdint>
#include <string>

namespace shardc {

/// A device mesh: `replicas` x `shards` x `tp` ranks (replicas = 1 without
/// HSDP, tp = 1 without tensor parallelism), its grid axes numbered as the
/// runtime numbers them.
using MeshShape = abi::MeshGrid;

/// Parses "N" or "RxS" (positive sizes) into `replicas` and `shards`
/// (`tp` is --tp's). Returns false and sets `error` (naming the text)
/// otherwise.
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

/// Checks --tp's degree `tp` (the tp axis, within a node): positive and at
/// most 64. Returns false and sets `error` otherwise.
bool checkTp(int64_t tp, std::string &error);

} // namespace shardc

#endif // SHARDC_TARGET_SHARDING_H
