//===- memory.h - a compiled program's memory on its backend -*- C++ -*-===//
#ifndef SHARDC_RUNTIME_TRAINER_MEMORY_H
#define SHARDC_RUNTIME_TRAINER_MEMORY_H

#include "runtime/abi/abi.h"
#include "runtime/backend.h"
#include "runtime/mesh.h"
#include "runtime/program/model.h"
#include "runtime/program/trace.h"

#include <cstdint>
#include <memory>
#include <set>
#include <vector>

namespace shardc::runtime {

/// A line of /proc/self/status in bytes (VmRSS, VmHWM), or -1.
int64_t procStatusBytes(const char *key);

/// Bytes of the host pages of [p, p + n) now resident (mincore), or -1
/// where the range is not host memory (a GPU's).
int64_t residentBytes(const void *p, int64_t n);

/// Bytes in MiB, as the trainer prints them.
inline double mib(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

/// The memory of a compiled program on its backend: the regions it
/// addresses, and a host copy of the io region for inputs and outputs.
/// With --offload=cpu the parameters, state and io regions are pinned host
/// memory the device also addresses, and the entries the manifest marks
/// "host" (the optimizer step) run on the host with the CPU backend, over
/// them and a host arena.
struct Memory {
  Memory(Backend &backend, const Manifest &m, bool touchArena,
         const Mesh *mesh = nullptr);
  char *region(abi::Region r) const { return static_cast<char *>(base[r]); }
  template <typename T> T *host(const TensorSlot &slot) {
    return reinterpret_cast<T *>(io.data() + slot.offset);
  }
  /// Host io slot -> backend.
  void put(const TensorSlot &slot);
  /// Backend io slot -> host.
  void get(const TensorSlot &slot);
  /// Bytes resident of the regions the plan counts (parameters, state, io,
  /// the arena and the host optimizer's arena), or -1 where they are not
  /// host memory: the measured counterpart of the planned peak.
  int64_t plannedRegionsResident() const;
  /// Runs compiled entry `program` (checked against the ABI first).
  void run(const int64_t *program, const char *name);

  Backend &backend;
  const Manifest &manifest;
  void *base[abi::kNumRegions] = {};
  int64_t bytes[abi::kNumRegions] = {};
  /// --offload=cpu: the host's backend, regions and their sizes.
  std::unique_ptr<Backend> hostBackend;
  void *hostBase[abi::kNumRegions] = {};
  int64_t hostBytes[abi::kNumRegions] = {};
  std::vector<char> io;
  std::set<const int64_t *> checked;
  /// The FLOPs of the runs since it was last reset (the compiler's count of
  /// each entry's GEMMs and attention, on this rank).
  int64_t flops = 0;
  /// Launches go to `trace`, labelled with the entry and `step`.
  Trace *trace = nullptr;
  int64_t step = 0;

private:
  /// The CPU backend and host arena of the entries that run on the host.
  void placeHostEntries(const Manifest &m, const Mesh *mesh);
};

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_TRAINER_MEMORY_H
