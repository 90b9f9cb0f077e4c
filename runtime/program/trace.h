//===- trace.h - a timeline of kernels and collectives -----------*- C++ -*-===//
//
// What a backend ran, launch by launch: each kernel and collective with its
// stream, start and end (microseconds since the trace began) and, for a
// collective, the bytes it contributes. `./train --trace FILE` writes it in
// the Chrome trace event format (Perfetto and chrome://tracing load it);
// every run also sums how long communication was exposed, i.e. ran while no
// compute did, for the line printed at the end.
//
// The CPU backend times launches on the host (its streams run in program
// order on one thread); the CUDA backend, with --trace, from CUDA events
// recorded around each launch on its stream (the emulated device's events
// keep host time).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_PROGRAM_TRACE_H
#define SHARDC_RUNTIME_PROGRAM_TRACE_H

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace shardc::runtime {

/// The bytes a collective launch of kernel `id` contributes (its input on
/// this rank), or -1 if `id` is not a collective.
int64_t collectiveBytes(int64_t id, const int64_t *ints);

class Trace {
public:
  Trace();
  /// Keep every launch for writeJson (otherwise only the totals).
  void setKeepEvents(bool keep) { keep_ = keep; }
  bool keepsEvents() const { return keep_; }
  /// Labels the launches that follow: compiled entry `entry` of step `step`.
  void beginRun(const char *entry, int64_t step);
  /// Closes the current run: adds its exposed communication to the totals.
  void endRun();
  /// A launch of kernel `id` on `stream`, from `begin` to `end` (us).
  void add(int64_t id, int64_t stream, const int64_t *ints, double begin,
           double end);
  /// Microseconds since the trace began, on the host's wall clock (so that
  /// the ranks of one host share a time axis once they share the origin).
  double now() const;
  /// The origin, in microseconds since the Unix epoch (default: the
  /// trace's construction); unixMicros() is the current such time.
  void setOrigin(double unixUs) { originUs_ = unixUs; }
  static double unixMicros();

  /// Seconds of communication, and of communication with no compute
  /// running, over every run so far.
  double commSeconds() const { return commUs_ * 1e-6; }
  double exposedCommSeconds() const { return exposedUs_ * 1e-6; }

  /// Writes the kept launches as Chrome trace JSON, process `rank`.
  void writeJson(const std::string &path, int rank) const;

private:
  struct Event {
    int64_t id, stream, step, bytes;
    const char *entry;
    double begin, end;
  };
  bool keep_ = false;
  const char *entry_ = "";
  int64_t step_ = 0;
  size_t runStart_ = 0;
  std::vector<Event> events_;
  double commUs_ = 0, exposedUs_ = 0;
  double originUs_ = 0;
};

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_PROGRAM_TRACE_H
