//===- watchdog.h - a deadline on every collective ---------------*- C++ -*-===//
//
// A rank that dies or stops leaves the others waiting in a collective that
// never completes (MPI has no timeouts). Each collective marks itself in
// flight; a thread checks the mark, and when one has been in flight longer
// than the deadline (--collective-timeout) it prints an error naming the
// collective and this rank and exits, so that the launcher (mpirun, srun)
// takes the job down.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_TRAINER_WATCHDOG_H
#define SHARDC_RUNTIME_TRAINER_WATCHDOG_H

#include <cstdint>

namespace shardc::runtime::watchdog {

/// Starts the checking thread (once) for this `rank` with a deadline of
/// `seconds` (<= 0: none).
void start(int rank, double seconds);
/// A collective `what` (a static string) of `bytes` is in flight.
void enter(const char *what, int64_t bytes);
/// No collective is in flight.
void leave();

/// Marks a collective in flight for its scope.
struct Scope {
  Scope(const char *what, int64_t bytes) { enter(what, bytes); }
  ~Scope() { leave(); }
};

} // namespace shardc::runtime::watchdog

#endif // SHARDC_RUNTIME_TRAINER_WATCHDOG_H
