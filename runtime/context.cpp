//===- context.cpp - streams and events of the CPU backend ----------------===//
#include "runtime/runtime.h"
#include "runtime/trainer/watchdog.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

using namespace shardc::runtime;

void shardc::runtime::fatal(const char *format, ...) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: ");
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::exit(1);
}

static void checkStream(int64_t stream) {
  if (stream < 0 || stream >= kNumStreams)
    fatal("compiled step uses stream %lld; the runtime has %d",
          (long long)stream, int(kNumStreams));
}

void Context::countLaunch(int64_t stream, const char *kernel) {
  checkStream(stream);
  watchdog::leave(); // a collective that was in flight has completed
  ++launched[stream];
  if (!profiling || !kernel)
    return;
  auto now = std::chrono::steady_clock::now();
  KernelTime &t = profile[kernel];
  t.seconds += std::chrono::duration<double>(now - last).count();
  ++t.calls;
  last = now;
}

void Context::printProfile() const {
  std::vector<std::pair<std::string, KernelTime>> rows(profile.begin(),
                                                       profile.end());
  double total = 0;
  for (const auto &r : rows)
    total += r.second.seconds;
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.seconds > b.second.seconds;
  });
  std::printf("%-22s %10s %8s %7s\n", "kernel", "ms", "calls", "share");
  for (const auto &[name, t] : rows)
    std::printf("%-22s %10.1f %8lld %6.1f%%\n", name.c_str(), t.seconds * 1e3,
                (long long)t.calls, 100.0 * t.seconds / total);
}

void Context::recordEvent(int64_t event, int64_t stream) {
  checkStream(stream);
  if (event < 0)
    fatal("compiled step records negative event %lld", (long long)event);
  if (size_t(event) >= eventStream.size()) {
    eventStream.resize(event + 1, -1);
    eventPosition.resize(event + 1, -1);
  }
  eventStream[event] = stream;
  eventPosition[event] = launched[stream];
}

void Context::waitEvent(int64_t event, int64_t stream) {
  checkStream(stream);
  if (event < 0 || size_t(event) >= eventStream.size() ||
      eventStream[event] < 0)
    fatal("compiled step waits on event %lld before recording it "
          "(schedule bug)",
          (long long)event);
  // In-order execution: everything before the record has already run.
}

void Context::resetEvents() {
  eventStream.assign(eventStream.size(), -1);
  eventPosition.assign(eventPosition.size(), -1);
}

extern "C" void shardc_event_record(void *ctx, int64_t event, int64_t stream) {
  static_cast<Context *>(ctx)->recordEvent(event, stream);
}

extern "C" void shardc_event_wait(void *ctx, int64_t event, int64_t stream) {
  static_cast<Context *>(ctx)->waitEvent(event, stream);
}
