//===- watchdog.h - a deadline on every collective ---------------*- C++ -*-===//
//
// A rank that dies or stops leaves the others waiting in a collective that
// never completes (MPI has no timeouts). Each collective marks itself in
// flight; a thread checks the mark, and when one has been in flight longer
// than the deadline (--collective-timeout) it prints an error naming the
// collective and this rank and exits, so that the launcher (mpirun, srun)
// takes the job down.
//
// A device backend's collectives run asynchronously on its streams, so they
// cannot mark themselves: it gives the watchdog a probe instead, asked from
// the watchdog's thread which collective the device is waiting on, and an
// abort (ncclCommAbort of its communicators) called before the exit.
//
// The abort frees what the backend's own thread uses (NCCL frees a
// communicator in ncclCommAbort), so the two are ordered by one lock: the
// backend holds a DeviceUse around every call on what the abort frees, and
// the abort runs holding the same lock, at most once, and never gives it
// back (the process exits holding it). So an abort never runs during a
// use, and no use starts after an abort: a DeviceUse that finds the abort
// done exits instead of touching freed communicators.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_TRAINER_WATCHDOG_H
#define SHARDC_RUNTIME_TRAINER_WATCHDOG_H

#include <cstdint>
#include <functional>

namespace shardc::runtime::watchdog {

/// Starts the checking thread (once) for this `rank` with a deadline of
/// `seconds` (<= 0: none).
void start(int rank, double seconds);
/// A collective `what` (a static string) of `bytes` is in flight.
void enter(const char *what, int64_t bytes);
/// No collective is in flight.
void leave();

/// The deadline start() was given, in seconds (0: none).
double seconds();

/// What a device probe reports: the collective the device waits on, its
/// bytes, and an id that changes when another collective is waited on.
struct Pending {
  const char *what = nullptr;
  int64_t bytes = 0;
  uint64_t id = 0;
};
/// Watches a device: `probe` fills in the collective in flight (false:
/// none); one that stays in flight past the deadline is reported, `abort`
/// is called (holding the DeviceUse lock), and the process exits. Called
/// again (null, null: stop watching) it waits for an abort under way.
void watchDevice(std::function<bool(Pending &)> probe,
                 std::function<void()> abort);

/// Holds the device's abort off for its scope (see the file comment): the
/// backend's calls on its communicators run inside one. Waits while an
/// abort runs; if the device was aborted, prints that `what` cannot run and
/// exits (3), as the abort's own thread does. Not reentrant.
class DeviceUse {
public:
  explicit DeviceUse(const char *what);
  ~DeviceUse();
  DeviceUse(const DeviceUse &) = delete;
  DeviceUse &operator=(const DeviceUse &) = delete;
  /// Runs the device's abort now, from this thread (a wait that timed out
  /// here), once; the caller then exits, still holding this.
  void abort();
};

/// Marks a collective in flight for its scope.
struct Scope {
  Scope(const char *what, int64_t bytes) { enter(what, bytes); }
  ~Scope() { leave(); }
};

} // namespace shardc::runtime::watchdog

#endif // SHARDC_RUNTIME_TRAINER_WATCHDOG_H
