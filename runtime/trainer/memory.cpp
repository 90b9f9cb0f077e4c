//===- memory.cpp - a compiled program's memory on its backend ------------===//
#include "runtime/trainer/memory.h"
#include "runtime/runtime.h"
#include "runtime/program/program.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>

using namespace shardc;
using namespace shardc::runtime;

int64_t shardc::runtime::procStatusBytes(const char *key) {
  std::FILE *f = std::fopen("/proc/self/status", "r");
  if (!f)
    return -1;
  char line[256];
  int64_t kib = -1;
  size_t n = std::strlen(key);
  while (std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, key, n) == 0 && line[n] == ':')
      kib = std::atoll(line + n + 1);
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

namespace {

/// [begin, end) of the pages that hold [p, p + n).
std::pair<uintptr_t, uintptr_t> pageSpan(const void *p, int64_t n) {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  return {uintptr_t(p) & ~(page - 1),
          (uintptr_t(p) + uintptr_t(n) + page - 1) & ~(page - 1)};
}

} // namespace

int64_t shardc::runtime::residentBytes(const void *p, int64_t n) {
  if (n <= 0)
    return 0;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  auto [begin, end] = pageSpan(p, n);
  std::vector<unsigned char> pages((end - begin) / page);
  if (mincore(reinterpret_cast<void *>(begin), end - begin, pages.data()))
    return -1;
  int64_t resident = 0;
  for (unsigned char v : pages)
    resident += v & 1;
  return resident * int64_t(page);
}

int64_t Memory::plannedRegionsResident() const {
  // [begin, end) of each region, merged where they share pages, so that a
  // page two regions share counts once.
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  auto add = [&](const void *p, int64_t n) {
    if (p && n > 0)
      ranges.push_back(pageSpan(p, n));
  };
  for (abi::Region r : {abi::kRegionParams, abi::kRegionState, abi::kRegionIo,
                        abi::kRegionArena})
    add(base[r], bytes[r]);
  if (hostBackend)
    add(hostBase[abi::kRegionArena], hostBytes[abi::kRegionArena]);
  std::sort(ranges.begin(), ranges.end());
  int64_t total = 0;
  for (size_t i = 0; i < ranges.size();) {
    uintptr_t begin = ranges[i].first, end = ranges[i].second;
    for (++i; i < ranges.size() && ranges[i].first <= end; ++i)
      end = std::max(end, ranges[i].second);
    int64_t resident = residentBytes(reinterpret_cast<void *>(begin),
                                     int64_t(end - begin));
    if (resident < 0)
      return -1;
    total += resident;
  }
  return total;
}

Memory::Memory(Backend &backend, const Manifest &m, bool touchArena,
               const Mesh *mesh)
    : backend(backend), manifest(m) {
  const bool offload = m.offloaded();
  int64_t onDevice = abi::alignTo(m.ioBytes) + abi::alignTo(m.arenaBytes);
  if (!offload)
    onDevice += abi::alignTo(m.paramBytes) + abi::alignTo(m.stateBytes);
  backend.reserve(onDevice + 4 * abi::kBufferAlignment);
  auto place = [&](int64_t bytes, const char *what) {
    return offload ? backend.allocateHost(bytes, what)
                   : backend.allocate(bytes, what);
  };
  base[abi::kRegionParams] = place(m.paramBytes, "parameters");
  base[abi::kRegionState] = place(m.stateBytes, "gradients and optimizer state");
  base[abi::kRegionIo] = place(m.ioBytes, "inputs and outputs");
  // Untouched, the arena's pages are committed as kernels first write
  // them, so the resident set measures what the step really uses.
  base[abi::kRegionArena] =
      backend.allocate(m.arenaBytes, "activations", touchArena);
  base[abi::kRegionConstants] = const_cast<char *>(shardc_constants);
  io.assign(size_t(m.ioBytes), 0);
  bytes[abi::kRegionParams] = m.paramBytes;
  bytes[abi::kRegionState] = m.stateBytes;
  bytes[abi::kRegionIo] = m.ioBytes;
  bytes[abi::kRegionArena] = m.arenaBytes;
  bytes[abi::kRegionConstants] = m.constantsBytes;
  if (!m.hostEntries.empty())
    placeHostEntries(m, mesh);
}

void Memory::placeHostEntries(const Manifest &m, const Mesh *mesh) {
  // The CPU backend, linked in for them (its weak factory, so that other
  // executables hold no CPU backend).
  hostBackend = makeBackend("cpu", mesh && mesh->world > 1 ? mesh : nullptr, 0);
  for (int r = 0; r < abi::kNumRegions; ++r) {
    hostBase[r] = base[r];
    hostBytes[r] = bytes[r];
  }
  hostBase[abi::kRegionArena] =
      hostBackend->allocate(m.hostArenaBytes, "the host optimizer's arena");
  hostBytes[abi::kRegionArena] = m.hostArenaBytes;
}

void Memory::put(const TensorSlot &slot) {
  backend.copyToDevice(region(abi::kRegionIo) + slot.offset,
                       io.data() + slot.offset, slot.bytes);
}

void Memory::get(const TensorSlot &slot) {
  backend.copyToHost(io.data() + slot.offset,
                     region(abi::kRegionIo) + slot.offset, slot.bytes);
}

void Memory::run(const int64_t *program, const char *name) {
  if (!program)
    throw std::runtime_error(std::string("the compiled program has no '") +
                             name + "' entry point");
  const bool onHost = hostBackend && manifest.runsOnHost(name);
  if (checked.insert(program).second) {
    std::string wrong = validateProgram(program, onHost ? hostBytes : bytes);
    if (!wrong.empty())
      throw std::runtime_error(std::string("compiled entry '") + name +
                               "' is malformed: " + wrong);
  }
  flops += manifest.flopsOf(name);
  if (trace)
    trace->beginRun(name, step);
  if (onHost) {
    // The device's runs are complete when `run` returns: the host reads
    // what they wrote.
    hostBackend->setTrace(trace);
    hostBackend->run(program, hostBase);
  } else {
    backend.run(program, base);
  }
  if (trace)
    trace->endRun();
}
