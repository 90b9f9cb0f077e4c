//===- runtime.h - the runtime's C ABI: context, streams, events -*- C++ -*-===//
//
// What compiled step functions call besides kernels. A context owns the
// backend's streams (0: compute, 1: communication) and events. The CPU backend
// runs every stream in program order, so an event is a marker: waiting on one
// that was never recorded is a schedule bug and aborts with a message.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_RUNTIME_H
#define SHARDC_RUNTIME_RUNTIME_H

#include "runtime/abi/abi.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardc::runtime {

class Mesh;

using abi::kCommStream;
using abi::kComputeStream;
using abi::kNumStreams;

struct Context {
  /// Kernels launched per stream so far.
  std::vector<int64_t> launched = std::vector<int64_t>(kNumStreams, 0);
  /// Per event: the stream and position it was recorded at, or -1.
  std::vector<int64_t> eventStream, eventPosition;

  void recordEvent(int64_t event, int64_t stream);
  void waitEvent(int64_t event, int64_t stream);
  /// Called by every kernel as it returns. With profiling on, the time since
  /// the previous kernel returned is charged to `kernel`.
  void countLaunch(int64_t stream, const char *kernel = nullptr);
  /// Forgets recorded events: called between steps.
  void resetEvents();

  /// The device mesh the collectives run on (null: one rank).
  const Mesh *mesh = nullptr;

  /// Per-kernel time, when enabled (SHARDC_PROFILE=1 in the trainer).
  bool profiling = false;
  void startProfileInterval() { last = std::chrono::steady_clock::now(); }
  /// Prints kernels by total time, largest first.
  void printProfile() const;

private:
  struct KernelTime {
    double seconds = 0;
    int64_t calls = 0;
  };
  std::map<std::string, KernelTime> profile;
  std::chrono::steady_clock::time_point last;
};

/// Prints "error: <message>" and exits non-zero: the runtime's answer to an
/// impossible state inside a compiled step, where no caller can handle it.
[[noreturn]] void fatal(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

} // namespace shardc::runtime

extern "C" {
/// The compiled entry points, as launch tables (runtime/abi/abi.h; null when
/// the program has no such entry). A micro-step runs forward and backward on
/// one micro-batch and accumulates gradients; the optimizer step clips and
/// updates the parameters and optimizer states in place.
extern const int64_t shardc_program_micro_step[] __attribute__((weak));
extern const int64_t shardc_program_opt_step[] __attribute__((weak));
/// Compiled with --infer: the graph as it is, inputs and outputs in io.
extern const int64_t shardc_program_infer[] __attribute__((weak));
/// Compiled with --grad-sync=last: a micro-step that accumulates unsharded
/// gradients and reduces nothing (every micro-batch but the last).
extern const int64_t shardc_program_micro_step_nosync[] __attribute__((weak));
/// One rank's bf16 working copies of the parameters, cast from them
/// (rt-working-copy): run after the parameters are initialized or loaded.
extern const int64_t shardc_program_refresh[] __attribute__((weak));
/// The constants region (rt.constant values), if the program has any.
extern const char shardc_constants[] __attribute__((weak));
/// The compiled model's manifest: JSON, NUL-terminated.
extern const char shardc_manifest[];

void shardc_event_record(void *ctx, int64_t event, int64_t stream);
void shardc_event_wait(void *ctx, int64_t event, int64_t stream);
}

#endif // SHARDC_RUNTIME_RUNTIME_H
