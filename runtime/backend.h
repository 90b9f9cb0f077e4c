//===- backend.h - what main needs of a device --------------------*- C++ -*-===//
//
// The trainer's main owns flags, the loop, data, logging and checkpoints; a
// backend owns the memory the compiled program addresses (host or device),
// the copies between it and the host, and runs compiled entry points (launch
// tables) on its streams, events, kernels and collectives. main has no code
// per device: it asks the backend the target was compiled for.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_BACKEND_H
#define SHARDC_RUNTIME_BACKEND_H

#include "runtime/abi/abi.h"

#include <cstdint>
#include <memory>
#include <string>

namespace shardc::runtime {

class Mesh;
class Trace;

class Backend {
public:
  virtual ~Backend() = default;
  /// "cpu", "cuda".
  virtual const char *name() const = 0;
  /// Sets aside the planned total of every region's (aligned) bytes, before
  /// the first allocate: a device backend makes it one allocation.
  virtual void reserve(int64_t bytes) {}
  /// A region of `bytes` of the backend's memory, aligned to
  /// abi::kBufferAlignment, zeroed when `zero` (otherwise its pages are
  /// committed as kernels first write them). Lives as long as the backend.
  /// Throws std::runtime_error naming `what` when it cannot.
  virtual char *allocate(int64_t bytes, const char *what, bool zero = true) = 0;
  /// A region of `bytes` of host memory that the backend's kernels may also
  /// address at the same pointer (pinned and mapped on a GPU), zeroed: the
  /// regions --offload=cpu keeps on the host. A host-memory backend
  /// allocates as `allocate` does. Throws naming `what` when it cannot.
  virtual char *allocateHost(int64_t bytes, const char *what) {
    return allocate(bytes, what, /*zero=*/true);
  }
  /// The device's name as its driver reports it (a GPU's), or empty.
  virtual std::string deviceName() const { return ""; }
  /// What computes the GEMMs: the library and the instruction set or
  /// device it runs on (the trainer's header, --calibrate).
  virtual std::string gemmLibrary() const = 0;
  /// Whether the backend's memory is host memory, which the host may then
  /// write in place (no staging copy, no second resident copy).
  virtual bool hostMemory() const = 0;
  /// Copies between host memory and the backend's memory.
  virtual void copyToDevice(void *dst, const void *src, int64_t bytes) = 0;
  virtual void copyToHost(void *dst, const void *src, int64_t bytes) = 0;
  /// Runs a compiled entry point over the regions; returns once its work is
  /// complete (a host copy of its outputs is then safe).
  virtual void run(const int64_t *program,
                   void *const regions[abi::kNumRegions]) = 0;
  /// Per-kernel time (SHARDC_PROFILE=1): the kernels run since `run` began
  /// are charged; printProfile prints kernels by total time.
  virtual void setProfiling(bool on) = 0;
  virtual void printProfile() const = 0;
  /// Launches of the runs that follow go to `trace` (null: none).
  virtual void setTrace(Trace *trace) = 0;
  /// Whether the runs of an entry point after its first are captured once
  /// and replayed (CUDA graphs); a backend without graphs ignores it.
  virtual void setGraphs(bool on) {}
  /// Whether f32 GEMMs may run on TF32 tensor cores (the program's
  /// --allow-tf32); a backend without TF32 refuses `on`, naming itself.
  virtual void setAllowTf32(bool on);
};

/// The CPU backend: host memory, oneDNN GEMMs and OpenMP kernels, MPI
/// collectives over `mesh` (null: one rank), streams run in program order.
std::unique_ptr<Backend> makeCpuBackend(const Mesh *mesh);

/// The backend a program compiled for `target` runs on ("cpu", "cuda"):
/// throws std::runtime_error if this executable was not linked with it.
std::unique_ptr<Backend> makeBackend(const std::string &target,
                                     const Mesh *mesh, int64_t constantsBytes);

} // namespace shardc::runtime

extern "C" {
/// The CPU backend (runtime/cpu, linked with --target cpu executables).
shardc::runtime::Backend *
shardc_make_cpu_backend(const shardc::runtime::Mesh *mesh)
    __attribute__((weak));
/// The CUDA backend (runtime/cuda, linked with --target cuda executables
/// only; null otherwise): GPU memory, CUDA streams and events, CUDA kernels
/// and cuBLASLt. Throws std::runtime_error if no GPU is found.
shardc::runtime::Backend *shardc_make_cuda_backend(
    const shardc::runtime::Mesh *mesh, int64_t constantsBytes)
    __attribute__((weak));
}

#endif // SHARDC_RUNTIME_BACKEND_H
