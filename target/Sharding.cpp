//===- Sharding.cpp - the sharding plan's flags, parsed once --------------===//
#include "target/Sharding.h"

#include <cerrno>
#include <cstdlib>

using namespace shardc;

/// A positive decimal integer that fits in 32 bits (a rank count).
static bool positive(const std::string &s, int64_t &value) {
  if (s.empty() || s.size() > 9)
    return false;
  for (char c : s)
    if (c < '0' || c > '9')
      return false;
  value = std::strtoll(s.c_str(), nullptr, 10);
  return value > 0;
}

bool shardc::parseMesh(const std::string &text, MeshShape &mesh,
                       std::string &error) {
  size_t x = text.find('x');
  int64_t a = 0, b = 0;
  bool ok = x == std::string::npos
                ? positive(text, b)
                : text.find('x', x + 1) == std::string::npos &&
                      positive(text.substr(0, x), a) &&
                      positive(text.substr(x + 1), b);
  if (!ok) {
    error = "--mesh must be N or RxS with positive sizes, got '" + text + "'";
    return false;
  }
  mesh.replicas = x == std::string::npos ? 1 : a;
  mesh.shards = b;
  return true;
}

bool shardc::parseReshard(const std::string &text, const MeshShape *mesh,
                          ReshardPolicy &policy, std::string &error) {
  if (text == "true" || text == "false") {
    policy = {text == "true" ? ReshardPolicy::kFree : ReshardPolicy::kKeep, 0};
    return true;
  }
  int64_t n = 0;
  if (!positive(text, n)) {
    error = "--reshard-after-forward must be true, false or a number of "
            "ranks N, got '" +
            text + "'";
    return false;
  }
  if (mesh && mesh->shards % n != 0) {
    error = "--reshard-after-forward=" + text + " must divide the " +
            std::to_string(mesh->shards) + " ranks of the shard axis";
    return false;
  }
  if (mesh && n == mesh->shards)
    policy = {ReshardPolicy::kFree, 0}; // groups of all ranks: true
  else
    policy = {ReshardPolicy::kGroups, n};
  return true;
}

bool shardc::checkTp(int64_t tp, std::string &error) {
  if (tp >= 1 && tp <= 64)
    return true;
  error = "--tp must be between 1 and 64 (the tensor-parallel ranks of one "
          "node), got " + std::to_string(tp);
  return false;
}
