//===- program.h - walking a compiled launch table ---------------*- C++ -*-===//
//
// A compiled entry point is a launch table (runtime/abi/abi.h, "The
// program"): kernel launches with their buffers as (region, offset), ints
// and floats, and the event records and waits that order the streams. A
// backend walks it with its own kernel table.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_PROGRAM_PROGRAM_H
#define SHARDC_RUNTIME_PROGRAM_PROGRAM_H

#include "runtime/abi/abi.h"
#include "runtime/program/trace.h"

#include <cstdint>

namespace shardc::runtime {

using KernelFn = void (*)(void *ctx, void **b, const int64_t *i,
                          const double *f, int64_t stream);

/// What walking a program calls: one function per kernel id, and the
/// context's event handling.
struct ProgramTarget {
  const KernelFn *kernels; ///< abi::kNumKernels entries
  void *ctx;
  void (*recordEvent)(void *ctx, int64_t event, int64_t stream);
  void (*waitEvent)(void *ctx, int64_t event, int64_t stream);
  /// When set, every launch is timed on the host and added (a backend
  /// whose kernels run on the host: their time is the launch's).
  Trace *trace = nullptr;
  /// When set, called before (`after` false) and after every launch, with
  /// `hookCtx`: a device backend records events around it on its stream.
  void (*aroundLaunch)(void *hookCtx, bool after, int64_t id, int64_t stream,
                       const int64_t *ints) = nullptr;
  void *hookCtx = nullptr;
};

/// Runs `program` over the base addresses of the regions (abi::Region).
/// A malformed table (unknown opcode or kernel, a buffer outside its
/// region's known size) is a fatal error naming the record.
void runProgram(const int64_t *program, void *const regions[abi::kNumRegions],
                const ProgramTarget &target);

/// The words of a valid program, its end record included.
int64_t programWords(const int64_t *program);

/// Checks a program once before it runs: opcodes, kernel ids, argument
/// counts against the ABI, and buffer offsets against the region sizes.
/// Returns an empty string or what is wrong.
std::string validateProgram(const int64_t *program,
                            const int64_t regionBytes[abi::kNumRegions]);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_PROGRAM_PROGRAM_H
