//===- watchdog.cpp - a deadline on every collective ----------------------===//
#include "runtime/trainer/watchdog.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unistd.h>

using namespace shardc::runtime;

namespace {

std::atomic<const char *> current{nullptr};
std::atomic<int64_t> since{0}, inFlightBytes{0};
std::atomic<bool> started{false};
std::atomic<double> deadline{0};
std::atomic<int> watchedRank{0};
std::mutex deviceMutex;
std::function<bool(watchdog::Pending &)> deviceProbe;
std::function<void()> deviceAbort;
/// Ordering of the device's abort against the backend's uses (DeviceUse):
/// held by each use and by the abort, which never releases it. Lock order:
/// useMutex, then deviceMutex (the probe's), then the backend's own.
std::timed_mutex useMutex;
bool deviceAborted = false; ///< guarded by useMutex
/// How long the watchdog waits for a use in progress before it exits
/// without the abort (a use is one non-blocking NCCL call: microseconds).
constexpr auto kUseWait = std::chrono::seconds(5);

/// The registered abort, run once; useMutex is held.
void abortDeviceOnce() {
  std::function<void()> abort;
  {
    std::lock_guard<std::mutex> lock(deviceMutex);
    abort = deviceAbort;
  }
  if (abort && !deviceAborted) {
    deviceAborted = true;
    abort();
  }
}

[[noreturn]] void expire(int rank, const char *what, int64_t bytes,
                         double seconds) {
  std::fflush(stdout);
  std::fprintf(stderr,
               "error: rank %d: collective %s (%lld bytes) did not "
               "complete within %.0f s (--collective-timeout): another "
               "rank died, hangs or is stopped; exiting\n",
               rank, what, (long long)bytes, seconds);
  std::fflush(stderr);
  // The abort waits for the backend's use of its communicators in progress
  // and keeps them from any later one: the lock is never released, the
  // process exits holding it. A use that does not end (a blocking call
  // that hangs) leaves the communicators to the exit.
  if (useMutex.try_lock_for(kUseWait))
    abortDeviceOnce();
  else
    std::fprintf(stderr, "error: rank %d: the device's communicators are in "
                         "use: exiting without aborting them\n", rank);
  std::fflush(stderr);
  _exit(3);
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

void watchdog::enter(const char *what, int64_t bytes) {
  inFlightBytes.store(bytes, std::memory_order_relaxed);
  since.store(nowNs(), std::memory_order_relaxed);
  current.store(what, std::memory_order_release);
}

void watchdog::leave() { current.store(nullptr, std::memory_order_release); }

double watchdog::seconds() { return deadline.load(); }

void watchdog::watchDevice(std::function<bool(Pending &)> probe,
                           std::function<void()> abort) {
  // Waits for an abort under way (which then exits): once this returns,
  // the old abort can no longer run, and its backend may go.
  std::lock_guard<std::timed_mutex> use(useMutex);
  std::lock_guard<std::mutex> lock(deviceMutex);
  deviceProbe = std::move(probe);
  deviceAbort = std::move(abort);
  deviceAborted = false;
}

watchdog::DeviceUse::DeviceUse(const char *what) {
  useMutex.lock();
  if (deviceAborted) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "error: rank %d: %s after the device's communicators were "
                 "aborted (--collective-timeout); exiting\n",
                 watchedRank.load(), what);
    std::fflush(stderr);
    _exit(3);
  }
}

watchdog::DeviceUse::~DeviceUse() { useMutex.unlock(); }

void watchdog::DeviceUse::abort() { abortDeviceOnce(); }

void watchdog::start(int rank, double seconds) {
  if (seconds <= 0 || started.exchange(true))
    return;
  deadline.store(seconds);
  watchedRank.store(rank);
  std::thread([rank, seconds] {
    uint64_t deviceId = 0;
    int64_t deviceSince = 0;
    bool deviceWaiting = false;
    const int64_t limit = int64_t(seconds * 1e9);
    // Checked a few times per deadline, at most every second.
    const auto period = std::chrono::milliseconds(
        int64_t(std::min(1000.0, std::max(10.0, seconds * 1000.0 / 10.0))));
    for (;;) {
      std::this_thread::sleep_for(period);
      // The device's collective in flight, if a device is watched.
      Pending pending;
      bool waiting = false;
      {
        std::lock_guard<std::mutex> lock(deviceMutex);
        waiting = deviceProbe && deviceProbe(pending);
      }
      if (!waiting) {
        deviceWaiting = false;
      } else if (!deviceWaiting || pending.id != deviceId) {
        deviceWaiting = true;
        deviceId = pending.id;
        deviceSince = nowNs();
      } else if (nowNs() - deviceSince >= limit) {
        expire(rank, pending.what, pending.bytes, seconds);
      }
      // A host collective marked in flight.
      const char *what = current.load(std::memory_order_acquire);
      if (!what)
        continue;
      int64_t waited = nowNs() - since.load(std::memory_order_relaxed);
      if (waited < limit || current.load(std::memory_order_acquire) != what)
        continue;
      expire(rank, what, inFlightBytes.load(), seconds);
    }
  }).detach();
}
