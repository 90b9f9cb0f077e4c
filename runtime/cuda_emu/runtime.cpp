//===- runtime.cpp - the CUDA runtime API of the emulated device ----------===//
//
// Host versions of the CUDA runtime calls the backend makes, with the real
// declarations of cuda_runtime_api.h:
//  - device memory (host memory the device "owns"), pinned host memory;
//  - streams as queues of deferred work, run in stream order when the host
//    waits, as far as it waits: a stream's synchronization runs that
//    stream's work (and the work it waits on), the legacy stream's calls
//    the blocking streams' (cudaStreamNonBlocking ones go on without it),
//    cudaDeviceSynchronize everything. SHARDC_EMU_STREAM_ORDER says which
//    ready stream runs next: `last` (default), the one created last, so a
//    schedule that relies on the order work was enqueued in, rather than
//    on its events, sees the other order; `first`, the one created first
//    (the compute stream runs as far as its events let it, ahead of the
//    copies and collectives it forgot to wait for); `seed:N`, a stream
//    drawn at random (seeded) before every op, in graph replays too (the
//    captured streams replayed as streams), so that any order the events
//    allow can happen;
//  - events, stream waits on them, timing (host clock);
//  - graph capture (work of captured streams goes into the graph; a stream
//    that waits on a captured event joins the capture and must be joined
//    back before it ends; a synchronizing call during capture is an error)
//    and replay;
//  - the sticky error of a faulting kernel, and the last error;
//  - a node of SHARDC_EMU_DEVICES devices (default 8), each with its own
//    UUID: the process uses one (all share the host's memory), and local
//    ranks beyond the count share one, as on an oversubscribed node;
//  - host functions in stream order, each run on a thread of their own
//    (as CUDA's are) that may make no CUDA call; mapped pinned memory;
//  - for cudnn-frontend: capture info, user objects (graphs and their
//    instantiations hold references; the destructor runs on the
//    host-function thread), pointer attributes, the capture-mode exchange,
//    no driver entry points, and no device code loaded at run time
//    (cudaLibraryLoadData, cudaLaunchKernel refused);
//  - what CUDA refuses: during a capture, the calls it calls unsafe
//    (allocation, freeing, cudaFuncSetAttribute) and copies from or to
//    pageable memory into the captured streams, but for a pageable
//    host-to-device cudaMemcpyAsync of at most 64 KiB, which current
//    drivers take (the graph's node reads the host source at each replay);
//    overlapping copies; a copy whose pointers are not of the kind it
//    names.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda_emu/emu.h"

#include <omp.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace shardc::emu {
namespace {

struct Graph;

struct EventState {
  bool timing = true;
  uint64_t enqueued = 0;  ///< records enqueued
  uint64_t completed = 0; ///< records run
  double ms = 0;          ///< host time of the last record run
  int recordedOn = -1; ///< the creation order of the last record's stream
  // Capture: the graph and stream of the record, its op index.
  Graph *capture = nullptr;
  struct StreamState *captureStream = nullptr;
  size_t captureIndex = 0;
};

struct Op {
  enum Kind { Work, Record, Wait } kind = Work;
  std::string what;
  std::function<void()> work;
  EventState *event = nullptr;
  uint64_t gen = 0;
  struct StreamState *stream = nullptr; ///< in a graph: the captured stream
};

struct StreamState {
  std::deque<Op> queue;
  int order = 0;         ///< creation order
  bool blocking = true;  ///< not cudaStreamNonBlocking: the legacy stream
                         ///< synchronizes with it
  Graph *capture = nullptr;
};

void runOnHostFunctionThread(std::function<void()> fn);

/// A user object (cudaUserObjectCreate): its destructor runs on the
/// host-function thread when its last reference is released.
struct UserObject {
  void *ptr = nullptr;
  cudaHostFn_t destroy = nullptr;
  unsigned refs = 0;
};

void release(UserObject *o, unsigned count) {
  o->refs -= std::min(count, o->refs);
  if (o->refs)
    return;
  runOnHostFunctionThread([o] { o->destroy(o->ptr); });
  delete o;
}

/// The user object references a graph (or an instantiated graph) holds.
struct References {
  std::map<UserObject *, unsigned> held;
  References() = default;
  References(const References &other) : held(other.held) {
    for (auto &[o, n] : held)
      o->refs += n;
  }
  References &operator=(const References &) = delete;
  ~References() {
    for (auto &[o, n] : held)
      release(o, n);
  }
};

struct Graph {
  uint64_t id = 0; ///< the capture's (cudaStreamGetCaptureInfo)
  References retained;
  StreamState *origin = nullptr;
  std::vector<Op> ops;
  /// Per joined stream: the index of its last captured op, and how far the
  /// origin has waited on it.
  std::map<StreamState *, size_t> last, joinedUpTo;
  bool invalid = false;
  std::string why;
};

struct GraphExec {
  std::vector<Op> ops; ///< captured order, each op with its stream
  References retained;
};

struct State {
  std::vector<StreamState *> streams; ///< live, in creation order
  int created = 0;
  std::map<uintptr_t, size_t> device, pinned;
  cudaError_t last = cudaSuccess, sticky = cudaSuccess;
  int activeCaptures = 0;
  /// Per kernel: the dynamic shared memory cudaFuncSetAttribute allowed.
  std::map<const void *, int> maxDynamicShared;
};

State &state() {
  static State s;
  return s;
}

/// The devices of the emulated node: SHARDC_EMU_DEVICES (default 8, as on
/// an 8-GPU node); the local ranks of a job beyond it share devices.
int deviceCount() {
  static int count = [] {
    const char *v = std::getenv("SHARDC_EMU_DEVICES");
    int n = v ? std::atoi(v) : 8;
    if (n < 1 || n > 1024) {
      std::fprintf(stderr,
                   "cuda-emulation: SHARDC_EMU_DEVICES=%s is not a device "
                   "count (1 to 1024); using 8\n",
                   v);
      n = 8;
    }
    return n;
  }();
  return count;
}

int &currentDevice() {
  static int device = 0;
  return device;
}

double nowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch())
      .count();
}

bool inAllocation(const std::map<uintptr_t, size_t> &m, const void *p) {
  auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(addr);
  if (it == m.begin())
    return false;
  --it;
  return addr < it->first + it->second;
}

StreamState *stateOf(cudaStream_t s) {
  return reinterpret_cast<StreamState *>(s);
}
EventState *stateOf(cudaEvent_t e) { return reinterpret_cast<EventState *>(e); }

bool isLegacy(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

/// Which ready stream runs next (SHARDC_EMU_STREAM_ORDER: last, first or
/// seed:N).
struct StreamOrder {
  enum Kind { Last, First, Seeded } kind = Last;
  std::mt19937_64 rng;
};

bool parseStreamOrder(const std::string &text, StreamOrder &o) {
  if (text == "last" || text == "first") {
    o.kind = text == "last" ? StreamOrder::Last : StreamOrder::First;
    return true;
  }
  if (text.rfind("seed:", 0) != 0 || text.size() == 5 ||
      text.size() > 5 + 18 ||
      text.find_first_not_of("0123456789", 5) != std::string::npos)
    return false;
  o.kind = StreamOrder::Seeded;
  o.rng.seed(std::stoull(text.substr(5)));
  return true;
}

StreamOrder &streamOrder() {
  static StreamOrder order = [] {
    StreamOrder o;
    const char *v = std::getenv("SHARDC_EMU_STREAM_ORDER");
    if (v && !parseStreamOrder(v, o))
      std::fprintf(stderr,
                   "cuda-emulation: SHARDC_EMU_STREAM_ORDER=%s is not last, "
                   "first or seed:N; using last\n",
                   v);
    return o;
  }();
  return order;
}

/// SHARDC_EMU_DROP_WAIT=W:R:K: the K-th cudaStreamWaitEvent (from 1) of
/// the stream created W-th (from 0) on an event last recorded on the
/// stream created R-th is ignored, to show what a missing wait does (a race
/// the seeded stream order finds).
bool dropThisWait(const StreamState *waiter, const EventState *e) {
  struct Drop {
    int waiter = -1, recorder = -1;
    long k = 0, seen = 0;
  };
  static Drop drop = [] {
    Drop d;
    const char *v = std::getenv("SHARDC_EMU_DROP_WAIT");
    if (v && (std::sscanf(v, "%d:%d:%ld", &d.waiter, &d.recorder, &d.k) != 3 ||
              d.k < 1)) {
      std::fprintf(stderr,
                   "cuda-emulation: SHARDC_EMU_DROP_WAIT=%s is not "
                   "W:R:K (streams W and R by creation order, K from 1); "
                   "ignored\n",
                   v);
      d.k = 0;
    }
    return d;
  }();
  if (drop.k == 0 || !waiter || waiter->order != drop.waiter ||
      e->recordedOn != drop.recorder || ++drop.seen != drop.k)
    return false;
  std::fprintf(stderr,
               "cuda-emulation: SHARDC_EMU_DROP_WAIT: dropped wait %ld of "
               "stream %d on stream %d%s\n",
               drop.k, drop.waiter, drop.recorder,
               waiter->capture ? " (captured)" : "");
  return true;
}

/// The host-function thread: CUDA runs host functions on a thread of its
/// own, which may make no CUDA call. The stream waits until it returns.
struct HostFunctionThread {
  std::mutex m;
  std::condition_variable cv;
  std::function<void()> task;
  bool busy = false;
  std::thread thread;

  HostFunctionThread() {
    thread = std::thread([this] { loop(); });
    thread.detach();
  }
  void loop();
  void run(std::function<void()> fn) {
    std::unique_lock<std::mutex> lock(m);
    task = std::move(fn);
    busy = true;
    cv.notify_all();
    cv.wait(lock, [this] { return !busy; });
  }
};

thread_local bool onHostFunctionThread = false;

void HostFunctionThread::loop() {
  onHostFunctionThread = true;
  std::unique_lock<std::mutex> lock(m);
  for (;;) {
    cv.wait(lock, [this] { return busy; });
    std::function<void()> fn = std::move(task);
    lock.unlock();
    fn();
    lock.lock();
    busy = false;
    cv.notify_all();
  }
}

void runOnHostFunctionThread(std::function<void()> fn) {
  static HostFunctionThread *t = new HostFunctionThread; // lives to the end
  t->run(std::move(fn));
}

void runOp(Op &op) {
  if (state().sticky != cudaSuccess)
    return;
  switch (op.kind) {
  case Op::Work:
    op.work();
    break;
  case Op::Record:
    op.event->completed = op.gen;
    op.event->ms = nowMs();
    break;
  case Op::Wait:
    break;
  }
}

bool ready(const Op &op) {
  return op.kind != Op::Wait || op.event->completed >= op.gen;
}

/// Of `candidates` (streams with work), one whose next op is ready, by the
/// stream order; null if none is.
StreamState *pickReady(const std::vector<StreamState *> &candidates) {
  std::vector<StreamState *> readyOnes;
  for (StreamState *s : candidates)
    if (!s->queue.empty() && ready(s->queue.front()))
      readyOnes.push_back(s);
  if (readyOnes.empty())
    return nullptr;
  StreamOrder &order = streamOrder();
  switch (order.kind) {
  case StreamOrder::First:
    return readyOnes.front();
  case StreamOrder::Seeded:
    return readyOnes[order.rng() % readyOnes.size()];
  case StreamOrder::Last:
    break;
  }
  return readyOnes.back();
}

void cycle() {
  // Unreachable: a wait names a record enqueued before it.
  report(cudaErrorUnknown, "streams wait on each other in a cycle", true);
  for (StreamState *s : state().streams)
    s->queue.clear();
}

/// Runs the front op of `pick`.
void runFront(StreamState *pick) {
  Op op = std::move(pick->queue.front());
  pick->queue.pop_front();
  runOp(op);
}

/// The stream whose queue holds the record `wait` waits for, or null.
StreamState *recorderOf(const Op &wait) {
  for (StreamState *s : state().streams)
    for (const Op &op : s->queue)
      if (op.kind == Op::Record && op.event == wait.event &&
          op.gen >= wait.gen)
        return s;
  return nullptr;
}

/// `targets` and, transitively, the streams their next waits wait on, in
/// the device's creation order.
std::vector<StreamState *>
withDependencies(const std::vector<StreamState *> &targets) {
  std::set<StreamState *> in(targets.begin(), targets.end());
  for (bool grew = true; grew;) {
    grew = false;
    for (StreamState *s : std::vector<StreamState *>(in.begin(), in.end())) {
      if (s->queue.empty() || ready(s->queue.front()))
        continue;
      StreamState *r = recorderOf(s->queue.front());
      if (r && in.insert(r).second)
        grew = true;
    }
  }
  std::vector<StreamState *> out;
  for (StreamState *s : state().streams)
    if (in.count(s))
      out.push_back(s);
  return out;
}

/// Runs work until `done()`: ops of `targets`, and of the streams they
/// wait on when they do (the seeded order draws from every stream). The
/// streams are the device's, in creation order.
template <typename Done>
void runUntil(const std::vector<StreamState *> &targets, Done done) {
  State &st = state();
  bool seeded = streamOrder().kind == StreamOrder::Seeded;
  while (!done()) {
    StreamState *pick = pickReady(seeded ? st.streams : targets);
    if (!pick)
      pick = pickReady(withDependencies(targets));
    if (!pick)
      return cycle();
    runFront(pick);
  }
}

bool allEmpty(const std::vector<StreamState *> &streams) {
  for (StreamState *s : streams)
    if (!s->queue.empty())
      return false;
  return true;
}

/// Runs queued work until every stream is empty.
void drain() {
  const std::vector<StreamState *> &all = state().streams;
  runUntil(all, [&] { return allEmpty(all); });
}

/// Runs `s`'s queued work, and what it waits on.
void drainStream(StreamState *s) {
  runUntil({s}, [s] { return s->queue.empty(); });
}

/// Runs the blocking streams' queued work (what a legacy-stream call
/// waits for), and what it waits on.
void drainBlocking() {
  std::vector<StreamState *> blocking;
  for (StreamState *s : state().streams)
    if (s->blocking)
      blocking.push_back(s);
  runUntil(blocking, [&] { return allEmpty(blocking); });
}

/// Runs work until `e`'s last enqueued record has run.
void drainEvent(EventState *e) {
  runUntil(state().streams, [e] { return e->completed >= e->enqueued; });
}

/// A graph replay in the seeded order: each captured stream replayed as a
/// stream of its own, its records and waits ordering it against the others
/// as they did when captured.
void replaySeeded(const GraphExec &x) {
  std::map<StreamState *, std::deque<const Op *>> queues;
  std::vector<StreamState *> order;
  for (const Op &op : x.ops) {
    if (!queues.count(op.stream))
      order.push_back(op.stream);
    queues[op.stream].push_back(&op);
  }
  std::map<EventState *, uint64_t> recorded;
  std::mt19937_64 &rng = streamOrder().rng;
  for (;;) {
    std::vector<StreamState *> readyOnes;
    bool pending = false;
    for (StreamState *s : order) {
      auto &q = queues[s];
      if (q.empty())
        continue;
      pending = true;
      const Op *op = q.front();
      if (op->kind != Op::Wait || recorded[op->event] >= op->gen)
        readyOnes.push_back(s);
    }
    if (!pending)
      return;
    if (readyOnes.empty())
      return cycle();
    auto &q = queues[readyOnes[rng() % readyOnes.size()]];
    const Op *op = q.front();
    q.pop_front();
    if (state().sticky != cudaSuccess)
      return;
    if (op->kind == Op::Work)
      op->work();
    else if (op->kind == Op::Record)
      recorded[op->event] = op->gen;
  }
}

/// During a capture: invalidates every live capture (`why` said when it
/// ends) and reports `error` with `message`; outside one, success.
cudaError_t invalidateCaptures(cudaError_t error, const std::string &why,
                               const std::string &message) {
  State &st = state();
  if (st.activeCaptures == 0)
    return cudaSuccess;
  for (StreamState *s : st.streams)
    if (s->capture && !s->capture->invalid) {
      s->capture->invalid = true;
      s->capture->why = why;
    }
  return report(error, message + " (capture invalidated)");
}

/// A call that waits for the device during a capture.
cudaError_t captureViolation(const char *caller) {
  return invalidateCaptures(
      cudaErrorStreamCaptureImplicit,
      std::string(caller) + " synchronizes during capture",
      std::string(caller) + " waits for the device while a stream is captured");
}

/// A call CUDA calls unsafe during a capture (cudaStreamCaptureModeGlobal
/// or ThreadLocal, the backend's; this device has one host thread that
/// captures): it fails and invalidates the capture.
cudaError_t captureUnsafe(const std::string &caller) {
  return invalidateCaptures(
      cudaErrorStreamCaptureUnsupported,
      caller + " is not permitted during capture",
      caller + " while a stream is captured: not permitted");
}

/// A CUDA call from a host function: CUDA forbids it.
cudaError_t fromHostFunction(const char *caller) {
  return report(cudaErrorNotPermitted,
                std::string(caller) +
                    " called from a host function (cudaLaunchHostFunc): "
                    "host functions may make no CUDA call");
}

void append(StreamState *s, Op op) {
  Graph *g = s->capture;
  op.stream = s;
  g->last[s] = g->ops.size();
  g->ops.push_back(std::move(op));
}

} // namespace

bool setStreamOrder(const std::string &order) {
  return parseStreamOrder(order, streamOrder());
}

cudaError_t report(cudaError_t error, const std::string &message,
                   bool sticky) {
  std::fprintf(stderr, "cuda-emulation: %s\n", message.c_str());
  std::fflush(stderr);
  State &st = state();
  st.last = error;
  if (sticky && st.sticky == cudaSuccess)
    st.sticky = error;
  return error;
}

cudaError_t stickyError() { return state().sticky; }

cudaError_t enqueue(cudaStream_t stream, const char *what,
                    std::function<void()> work) {
  State &st = state();
  if (st.sticky != cudaSuccess)
    return st.sticky;
  Op op;
  op.what = what;
  op.work = std::move(work);
  if (onHostFunctionThread)
    return fromHostFunction(what);
  if (isLegacy(stream)) {
    if (cudaError_t err = captureViolation(what))
      return err;
    drainBlocking();
    runOp(op);
    return st.sticky;
  }
  StreamState *s = stateOf(stream);
  if (s->capture)
    append(s, std::move(op));
  else
    s->queue.push_back(std::move(op));
  return cudaSuccess;
}

cudaError_t synchronizeAll(const char *caller) {
  if (onHostFunctionThread)
    return fromHostFunction(caller);
  if (cudaError_t err = captureViolation(caller))
    return err;
  drain();
  return state().sticky;
}

bool isDeviceMemory(const void *p) { return inAllocation(state().device, p); }
bool isPinnedMemory(const void *p) { return inAllocation(state().pinned, p); }

namespace {

enum class Memory { Device, Pinned, Pageable };

Memory kindOf(const void *p) {
  if (isDeviceMemory(p))
    return Memory::Device;
  return isPinnedMemory(p) ? Memory::Pinned : Memory::Pageable;
}

/// What CUDA refuses of a copy: pointers not of the kind `kind` names
/// (pinned host memory is mapped, so either side may be it), and, as
/// memcpy's, source and destination that overlap.
cudaError_t checkCopy(const char *caller, void *dst, const void *src,
                      size_t count, cudaMemcpyKind kind) {
  if (count == 0)
    return cudaSuccess;
  auto d = reinterpret_cast<uintptr_t>(dst);
  auto s = reinterpret_cast<uintptr_t>(src);
  if (d < s + count && s < d + count)
    return report(cudaErrorInvalidValue,
                  std::string(caller) + " of " + std::to_string(count) +
                      " bytes between overlapping ranges");
  Memory to = kindOf(dst), from = kindOf(src);
  bool ok = true;
  switch (kind) {
  case cudaMemcpyHostToHost:
    ok = to != Memory::Device && from != Memory::Device;
    break;
  case cudaMemcpyHostToDevice:
    ok = from != Memory::Device && to != Memory::Pageable;
    break;
  case cudaMemcpyDeviceToHost:
    ok = from != Memory::Pageable && to != Memory::Device;
    break;
  case cudaMemcpyDeviceToDevice:
    ok = from != Memory::Pageable && to != Memory::Pageable;
    break;
  case cudaMemcpyDefault:
    break;
  default:
    return report(cudaErrorInvalidMemcpyDirection,
                  std::string(caller) + ": not a cudaMemcpyKind");
  }
  if (ok)
    return cudaSuccess;
  const char *names[] = {"device", "pinned host", "pageable host"};
  static const char *kinds[] = {"cudaMemcpyHostToHost",
                                "cudaMemcpyHostToDevice",
                                "cudaMemcpyDeviceToHost",
                                "cudaMemcpyDeviceToDevice"};
  return report(cudaErrorInvalidValue,
                std::string(caller) + " with " + kinds[kind] + " from " +
                    names[int(from)] + " memory to " + names[int(to)] +
                    " memory");
}

} // namespace

void launchKernel(const char *kernel, const void *entry, dim3 grid,
                  dim3 block, size_t smem, cudaStream_t stream,
                  std::function<void()> body) {
  uint64_t threads = uint64_t(block.x) * block.y * block.z;
  std::string bad;
  if (threads == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0)
    bad = "an empty grid or block";
  else if (threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64)
    bad = "a block of " + std::to_string(threads) +
          " threads (at most 1024, and 1024 x 1024 x 64)";
  else if (grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u)
    bad = "a grid beyond 2^31-1 x 65535 x 65535 blocks";
  else if (smem > size_t(48) << 10 &&
           int64_t(smem) > state().maxDynamicShared[entry])
    bad = std::to_string(smem) +
          " bytes of dynamic shared memory, over 48 KiB, and "
          "cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) "
          "allowed " +
          std::to_string(state().maxDynamicShared[entry]);
  if (!bad.empty()) {
    report(cudaErrorInvalidConfiguration,
           "launch of kernel '" + std::string(kernel) + "' asks for " + bad);
    return;
  }
  cudaError_t err = enqueue(
      stream, kernel,
      [kernel, grid, block, smem, body = std::move(body)]() {
        runGrid(kernel, grid, block, smem, body);
      });
  if (err != cudaSuccess && state().last == cudaSuccess)
    state().last = err;
}

} // namespace shardc::emu

using namespace shardc::emu;

/// No CUDA call from a host function.
#define NOT_FROM_HOST_FUNCTION()                                               \
  do {                                                                         \
    if (onHostFunctionThread)                                                  \
      return fromHostFunction(__func__);                                       \
  } while (0)
/// Every entry point: none from a host function; none after a sticky
/// error (a lost context).
#define STICKY()                                                               \
  do {                                                                         \
    NOT_FROM_HOST_FUNCTION();                                                  \
    if (state().sticky != cudaSuccess)                                         \
      return state().sticky;                                                   \
  } while (0)
/// A call CUDA calls unsafe during a capture.
#define CAPTURE_UNSAFE()                                                       \
  do {                                                                         \
    if (cudaError_t err = captureUnsafe(__func__))                             \
      return err;                                                              \
  } while (0)

extern "C" {

cudaError_t cudaGetDeviceCount(int *count) {
  *count = deviceCount();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= deviceCount())
    return report(cudaErrorInvalidDevice,
                  "cudaSetDevice(" + std::to_string(device) +
                      "): the emulated node has " +
                      std::to_string(deviceCount()) +
                      " devices (SHARDC_EMU_DEVICES)");
  currentDevice() = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = currentDevice();
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr,
                                   int device) {
  switch (attr) {
  case cudaDevAttrMultiProcessorCount:
    *value = multiprocessorCount();
    return cudaSuccess;
  case cudaDevAttrMaxThreadsPerBlock:
    *value = 1024;
    return cudaSuccess;
  case cudaDevAttrWarpSize:
    *value = 32;
    return cudaSuccess;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin:
    *value = 227 << 10;
    return cudaSuccess;
  case cudaDevAttrMaxSharedMemoryPerBlock:
    *value = 48 << 10;
    return cudaSuccess;
  case cudaDevAttrComputeCapabilityMajor:
    *value = 9;
    return cudaSuccess;
  case cudaDevAttrComputeCapabilityMinor:
    *value = 0;
    return cudaSuccess;
  case cudaDevAttrMaxThreadsPerMultiProcessor:
    *value = 2048;
    return cudaSuccess;
  default:
    return report(cudaErrorInvalidValue,
                  "cudaDeviceGetAttribute: attribute " +
                      std::to_string(int(attr)) +
                      " is not emulated");
  }
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name),
                "shardc emulated CUDA device %d", device);
  // One node's devices: the same host name, a bus id and UUID per ordinal.
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  uint64_t h = 1469598103934665603ull;
  for (const char *c = host; *c; ++c)
    h = (h ^ uint8_t(*c)) * 1099511628211ull;
  std::memcpy(prop->uuid.bytes, &h, sizeof(h));
  uint64_t ordinal = uint64_t(device);
  std::memcpy(prop->uuid.bytes + 8, &ordinal, sizeof(ordinal));
  prop->pciBusID = device;
  struct sysinfo info;
  sysinfo(&info);
  prop->totalGlobalMem = size_t(info.totalram) * info.mem_unit;
  prop->sharedMemPerBlock = 48 << 10;
  prop->sharedMemPerBlockOptin = 227 << 10;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = multiprocessorCount();
  prop->maxThreadsPerMultiProcessor = 2048;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
  struct sysinfo info;
  sysinfo(&info);
  *free = size_t(info.freeram) * info.mem_unit;
  *total = size_t(info.totalram) * info.mem_unit;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size) {
  STICKY();
  CAPTURE_UNSAFE();
  // 256-byte aligned, as cudaMalloc's.
  void *p = std::aligned_alloc(256, (size + 255) / 256 * 256 + 256);
  if (!p) {
    *ptr = nullptr;
    return report(cudaErrorMemoryAllocation,
                  "cudaMalloc of " + std::to_string(size) + " bytes failed");
  }
  state().device[reinterpret_cast<uintptr_t>(p)] = size ? size : 1;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
  NOT_FROM_HOST_FUNCTION();
  CAPTURE_UNSAFE();
  if (!ptr)
    return cudaSuccess;
  State &st = state();
  drain();
  auto it = st.device.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == st.device.end())
    return report(cudaErrorInvalidValue,
                  "cudaFree of a pointer cudaMalloc did not return");
  st.device.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) {
  STICKY();
  CAPTURE_UNSAFE();
  void *p = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096 + 4096);
  if (!p)
    return report(cudaErrorMemoryAllocation,
                  "cudaMallocHost of " + std::to_string(size) +
                      " bytes failed");
  state().pinned[reinterpret_cast<uintptr_t>(p)] = size ? size : 1;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int) {
  STICKY();
  CAPTURE_UNSAFE();
  return cudaMallocHost(ptr, size);
}

cudaError_t cudaHostGetDevicePointer(void **device, void *host, unsigned int) {
  if (!isPinnedMemory(host))
    return report(cudaErrorInvalidValue,
                  "cudaHostGetDevicePointer of memory cudaHostAlloc did not "
                  "return");
  *device = host; // the device sees host memory at its own address
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn,
                               void *userData) {
  STICKY();
  return enqueue(stream, "host function", [fn, userData]() {
    runOnHostFunctionThread([fn, userData]() { fn(userData); });
  });
}

cudaError_t cudaFreeHost(void *ptr) {
  NOT_FROM_HOST_FUNCTION();
  CAPTURE_UNSAFE();
  if (!ptr)
    return cudaSuccess;
  State &st = state();
  drain();
  auto it = st.pinned.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == st.pinned.end())
    return report(cudaErrorInvalidValue,
                  "cudaFreeHost of a pointer cudaMallocHost did not return");
  st.pinned.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                       cudaMemcpyKind kind) {
  STICKY();
  if (cudaError_t err = checkCopy("cudaMemcpy", dst, src, count, kind))
    return err;
  // On the legacy stream: after the blocking streams' work, not the
  // non-blocking streams'.
  if (cudaError_t err = captureViolation("cudaMemcpy"))
    return err;
  drainBlocking();
  std::memcpy(dst, src, count);
  return state().sticky;
}

/// The largest pageable host-to-device copy a capture accepts: current
/// drivers write a 1-D one of up to 64 KiB straight into the command
/// stream (larger ones are staged, and refused during a capture).
constexpr size_t kCapturedPageableCopyBytes = 64 << 10;

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  STICKY();
  if (cudaError_t err = checkCopy("cudaMemcpyAsync", dst, src, count, kind))
    return err;
  bool toPageable = kindOf(dst) == Memory::Pageable;
  bool fromPageable = kindOf(src) == Memory::Pageable;
  bool captured = !isLegacy(stream) && stateOf(stream)->capture;
  if (captured && fromPageable && kindOf(dst) == Memory::Device &&
      count <= kCapturedPageableCopyBytes) {
    // As current drivers: a small 1-D pageable host-to-device copy goes
    // into the command stream at launch, so the graph's node reads its host
    // source at each replay (cudnn-frontend keeps its sources alive with a
    // user object the graph retains).
    return enqueue(stream, "cudaMemcpyAsync",
                   [dst, src, count]() { std::memcpy(dst, src, count); });
  }
  if (captured && (toPageable || fromPageable))
    return captureUnsafe("cudaMemcpyAsync from or to pageable memory");
  if (toPageable && !isLegacy(stream)) {
    // To pageable memory the copy completes, in stream order, before the
    // call returns.
    drainStream(stateOf(stream));
    std::memcpy(dst, src, count);
    return state().sticky;
  }
  if (fromPageable) {
    // From pageable memory the source is staged when the call is made.
    auto staged = std::make_shared<std::vector<char>>(
        static_cast<const char *>(src), static_cast<const char *>(src) + count);
    return enqueue(stream, "cudaMemcpyAsync", [dst, staged]() {
      std::memcpy(dst, staged->data(), staged->size());
    });
  }
  return enqueue(stream, "cudaMemcpyAsync",
                 [dst, src, count]() { std::memcpy(dst, src, count); });
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                              size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind, cudaStream_t stream) {
  STICKY();
  if (width > dpitch || width > spitch)
    return report(cudaErrorInvalidValue,
                  "cudaMemcpy2DAsync: a row wider than its pitch");
  if (!isDeviceMemory(dst) || !isDeviceMemory(src))
    return report(cudaErrorNotSupported,
                  "cudaMemcpy2DAsync is emulated between device buffers");
  size_t span = height ? (height - 1) * std::max(dpitch, spitch) + width : 0;
  if (cudaError_t err = checkCopy("cudaMemcpy2DAsync", dst, src, span,
                                  cudaMemcpyDeviceToDevice))
    return err;
  return enqueue(stream, "cudaMemcpy2DAsync", [=]() {
    for (size_t r = 0; r < height; ++r)
      std::memcpy(static_cast<char *>(dst) + r * dpitch,
                   static_cast<const char *>(src) + r * spitch, width);
  });
}

cudaError_t cudaMemset(void *dst, int value, size_t count) {
  STICKY();
  if (cudaError_t err = captureViolation("cudaMemset"))
    return err;
  drainBlocking();
  std::memset(dst, value, count);
  return state().sticky;
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t count,
                            cudaStream_t stream) {
  STICKY();
  return enqueue(stream, "cudaMemsetAsync",
                 [dst, value, count]() { std::memset(dst, value, count); });
}

cudaError_t cudaMemset2DAsync(void *dst, size_t pitch, int value,
                              size_t width, size_t height,
                              cudaStream_t stream) {
  STICKY();
  if (width > pitch)
    return report(cudaErrorInvalidValue,
                  "cudaMemset2DAsync: a row wider than its pitch");
  return enqueue(stream, "cudaMemset2DAsync", [=]() {
    for (size_t r = 0; r < height; ++r)
      std::memset(static_cast<char *>(dst) + r * pitch, value, width);
  });
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream,
                                      unsigned int flags) {
  STICKY();
  State &st = state();
  auto *s = new StreamState;
  s->order = st.created++;
  s->blocking = !(flags & cudaStreamNonBlocking);
  st.streams.push_back(s);
  *stream = reinterpret_cast<cudaStream_t>(s);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  NOT_FROM_HOST_FUNCTION();
  if (isLegacy(stream))
    return cudaSuccess;
  State &st = state();
  StreamState *s = stateOf(stream);
  drainStream(s);
  st.streams.erase(std::find(st.streams.begin(), st.streams.end(), s));
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  NOT_FROM_HOST_FUNCTION();
  if (cudaError_t err = captureViolation("cudaStreamSynchronize"))
    return err;
  if (isLegacy(stream))
    drainBlocking();
  else
    drainStream(stateOf(stream));
  return state().sticky;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return cudaStreamSynchronize(stream);
}

cudaError_t cudaDeviceSynchronize() {
  return synchronizeAll("cudaDeviceSynchronize");
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  STICKY();
  auto *e = new EventState;
  e->timing = !(flags & cudaEventDisableTiming);
  *event = reinterpret_cast<cudaEvent_t>(e);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete stateOf(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  STICKY();
  EventState *e = stateOf(event);
  Op op;
  op.kind = Op::Record;
  op.what = "cudaEventRecord";
  op.event = e;
  op.gen = ++e->enqueued;
  e->recordedOn = isLegacy(stream) ? -1 : stateOf(stream)->order;
  if (isLegacy(stream)) {
    if (cudaError_t err = captureViolation("cudaEventRecord on the legacy "
                                           "stream"))
      return err;
    drainBlocking();
    runOp(op);
    return cudaSuccess;
  }
  StreamState *s = stateOf(stream);
  if (s->capture) {
    e->capture = s->capture;
    e->captureStream = s;
    e->captureIndex = s->capture->ops.size();
    append(s, std::move(op));
  } else {
    e->capture = nullptr;
    s->queue.push_back(std::move(op));
  }
  return cudaSuccess;
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                     unsigned int) {
  return cudaEventRecord(event, stream);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int) {
  STICKY();
  if (dropThisWait(isLegacy(stream) ? nullptr : stateOf(stream),
                   stateOf(event)))
    return cudaSuccess;
  EventState *e = stateOf(event);
  Op op;
  op.kind = Op::Wait;
  op.what = "cudaStreamWaitEvent";
  op.event = e;
  op.gen = e->enqueued;
  if (isLegacy(stream)) {
    // The legacy stream's next work waits for the event: run up to it.
    if (cudaError_t err = captureViolation("cudaStreamWaitEvent on the "
                                           "legacy stream"))
      return err;
    drainEvent(e);
    return state().sticky;
  }
  StreamState *s = stateOf(stream);
  Graph *g = e->capture;
  if (g && !g->invalid) {
    // A wait on a captured event: the stream joins (or stays in) the
    // capture; the origin waiting on a joined stream's event joins it back.
    if (s->capture && s->capture != g)
      return report(cudaErrorStreamCaptureIsolation,
                    "cudaStreamWaitEvent joins two captures");
    if (!s->capture) {
      s->capture = g;
      g->last[s] = 0;
    }
    if (s == g->origin && e->captureStream != g->origin) {
      size_t &upTo = g->joinedUpTo[e->captureStream];
      upTo = std::max(upTo, e->captureIndex);
    }
    append(s, std::move(op));
    return cudaSuccess;
  }
  if (s->capture)
    return report(cudaErrorStreamCaptureIsolation,
                  "a captured stream waits on an event recorded outside the "
                  "capture");
  s->queue.push_back(std::move(op));
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  NOT_FROM_HOST_FUNCTION();
  if (cudaError_t err = captureViolation("cudaEventSynchronize"))
    return err;
  drainEvent(stateOf(event));
  return state().sticky;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return cudaEventSynchronize(event);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  STICKY();
  EventState *a = stateOf(start), *b = stateOf(end);
  if (!a->timing || !b->timing)
    return report(cudaErrorInvalidResourceHandle,
                  "cudaEventElapsedTime of an event created with "
                  "cudaEventDisableTiming");
  if (cudaError_t err = synchronizeAll("cudaEventElapsedTime"))
    return err;
  if (!a->completed || !b->completed)
    return report(cudaErrorInvalidResourceHandle,
                  "cudaEventElapsedTime of an event never recorded");
  *ms = float(b->ms - a->ms);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
                                   cudaStreamCaptureMode) {
  STICKY();
  if (isLegacy(stream))
    return report(cudaErrorStreamCaptureUnsupported,
                  "the legacy default stream cannot be captured");
  StreamState *s = stateOf(stream);
  if (s->capture)
    return report(cudaErrorIllegalState, "the stream is already captured");
  static uint64_t captures = 0;
  auto *g = new Graph;
  g->id = ++captures;
  g->origin = s;
  s->capture = g;
  ++state().activeCaptures;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  cudaStreamCaptureStatus *status) {
  *status = !isLegacy(stream) && stateOf(stream)->capture
                ? (stateOf(stream)->capture->invalid
                       ? cudaStreamCaptureStatusInvalidated
                       : cudaStreamCaptureStatusActive)
                : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  StreamState *s = stateOf(stream);
  Graph *g = s->capture;
  *graph = nullptr;
  if (!g || g->origin != s)
    return report(cudaErrorIllegalState,
                  "cudaStreamEndCapture on a stream that did not begin one");
  State &st = state();
  --st.activeCaptures;
  std::string unjoined;
  for (StreamState *other : st.streams) {
    if (other->capture != g)
      continue;
    other->capture = nullptr;
    if (other == s)
      continue;
    auto last = g->last.find(other);
    auto joined = g->joinedUpTo.find(other);
    if (last != g->last.end() &&
        (joined == g->joinedUpTo.end() || joined->second < last->second))
      unjoined = "a stream joined the capture and its last work was not "
                 "joined back to the origin stream";
  }
  if (g->invalid) {
    std::string why = g->why;
    delete g;
    return report(cudaErrorStreamCaptureInvalidated,
                  "the capture was invalidated: " + why);
  }
  if (!unjoined.empty()) {
    delete g;
    return report(cudaErrorStreamCaptureUnjoined, unjoined);
  }
  *graph = reinterpret_cast<cudaGraph_t>(g);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long) {
  auto *g = reinterpret_cast<Graph *>(graph);
  // Captured order is an order that respects every captured dependency;
  // the seeded order replays the captured streams as streams. The graph's
  // user objects get one more reference each.
  auto *x = new GraphExec{g->ops, g->retained};
  *exec = reinterpret_cast<cudaGraphExec_t>(x);
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  STICKY();
  auto *x = reinterpret_cast<GraphExec *>(exec);
  return enqueue(stream, "cudaGraphLaunch", [x]() {
    if (streamOrder().kind == StreamOrder::Seeded)
      return replaySeeded(*x);
    for (const Op &op : x->ops) {
      if (state().sticky != cudaSuccess)
        return;
      if (op.kind == Op::Work)
        op.work();
    }
  });
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<Graph *>(graph);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  drain();
  delete reinterpret_cast<GraphExec *>(exec);
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                     cudaStreamCaptureStatus *status,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **dependencies,
                                     const cudaGraphEdgeData **edgeData,
                                     size_t *numDependencies) {
  NOT_FROM_HOST_FUNCTION();
  if (dependencies || edgeData || numDependencies)
    return report(cudaErrorNotSupported,
                  "cudaStreamGetCaptureInfo: the emulated graphs have no node "
                  "handles to name a capture's dependencies");
  cudaStreamIsCapturing(stream, status);
  Graph *g = isLegacy(stream) ? nullptr : stateOf(stream)->capture;
  if (id)
    *id = g ? g->id : 0;
  if (graph)
    *graph = g ? reinterpret_cast<cudaGraph_t>(g) : nullptr;
  return cudaSuccess;
}

/// The emulated device does not restrict calls by capture mode (every
/// capture refuses what cudaStreamCaptureModeGlobal refuses): the mode is
/// only kept, per thread.
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode *mode) {
  thread_local cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
  std::swap(*mode, current);
  return cudaSuccess;
}

cudaError_t cudaUserObjectCreate(cudaUserObject_t *object, void *ptr,
                                 cudaHostFn_t destroy,
                                 unsigned int initialRefcount,
                                 unsigned int flags) {
  if (!object || !destroy || initialRefcount == 0 ||
      flags != cudaUserObjectNoDestructorSync)
    return report(cudaErrorInvalidValue,
                  "cudaUserObjectCreate: a destructor, a reference and "
                  "cudaUserObjectNoDestructorSync are required");
  *object = reinterpret_cast<cudaUserObject_t>(
      new UserObject{ptr, destroy, initialRefcount});
  return cudaSuccess;
}

cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count) {
  release(reinterpret_cast<UserObject *>(object), count);
  return cudaSuccess;
}

cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph,
                                      cudaUserObject_t object,
                                      unsigned int count, unsigned int flags) {
  auto *o = reinterpret_cast<UserObject *>(object);
  if (!(flags & cudaGraphUserObjectMove))
    o->refs += count; // else the caller's references move to the graph
  reinterpret_cast<Graph *>(graph)->retained.held[o] += count;
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attributes,
                                     const void *ptr) {
  std::memset(attributes, 0, sizeof(*attributes));
  attributes->device = currentDevice();
  switch (kindOf(ptr)) {
  case Memory::Device:
    attributes->type = cudaMemoryTypeDevice;
    attributes->devicePointer = const_cast<void *>(ptr);
    break;
  case Memory::Pinned: // mapped
    attributes->type = cudaMemoryTypeHost;
    attributes->devicePointer = attributes->hostPointer =
        const_cast<void *>(ptr);
    break;
  case Memory::Pageable:
    attributes->type = cudaMemoryTypeUnregistered;
    break;
  }
  return cudaSuccess;
}

/// The emulated device has no driver API: no entry point is found.
cudaError_t cudaGetDriverEntryPointByVersion(
    const char *, void **funcPtr, unsigned int, unsigned long long,
    cudaDriverEntryPointQueryResult *driverStatus) {
  *funcPtr = nullptr;
  if (driverStatus)
    *driverStatus = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

// Device code loaded at run time (cudnn-frontend's NVRTC-compiled engines
// link these): the emulated device runs only the kernels compiled into the
// program, so no library is ever loaded.
cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *,
                                cudaJitOption *, void **, unsigned int,
                                cudaLibraryOption *, void **, unsigned int) {
  *library = nullptr;
  return report(cudaErrorNotSupported,
                "cudaLibraryLoadData: the emulated device loads no device "
                "code at run time");
}

cudaError_t cudaLibraryUnload(cudaLibrary_t) {
  return cudaErrorInvalidResourceHandle;
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t *, cudaLibrary_t, const char *) {
  return cudaErrorInvalidResourceHandle;
}

cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t, cudaFuncAttribute,
                                            int, int) {
  return cudaErrorInvalidResourceHandle;
}

cudaError_t cudaLaunchKernel(const void *, dim3, dim3, void **, size_t,
                             cudaStream_t) {
  return report(cudaErrorNotSupported,
                "cudaLaunchKernel: the emulated device launches kernels "
                "compiled into the program (SHARDC_LAUNCH), not by address");
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr,
                                 int value) {
  STICKY();
  CAPTURE_UNSAFE();
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return cudaSuccess; // carveout preferences: nothing to emulate
  if (value < 0 || value > (227 << 10))
    return report(cudaErrorInvalidValue,
                  "cudaFuncSetAttribute: " + std::to_string(value) +
                      " bytes of dynamic shared memory (at most 227 KiB)");
  state().maxDynamicShared[func] = value;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  State &st = state();
  cudaError_t err = st.sticky != cudaSuccess ? st.sticky : st.last;
  st.last = cudaSuccess;
  return err;
}

cudaError_t cudaPeekAtLastError() {
  State &st = state();
  return st.sticky != cudaSuccess ? st.sticky : st.last;
}

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define NAME(e)                                                                \
  case e:                                                                      \
    return #e;
    NAME(cudaSuccess)
    NAME(cudaErrorInvalidValue)
    NAME(cudaErrorMemoryAllocation)
    NAME(cudaErrorInvalidConfiguration)
    NAME(cudaErrorInvalidDevice)
    NAME(cudaErrorInvalidResourceHandle)
    NAME(cudaErrorLaunchFailure)
    NAME(cudaErrorIllegalState)
    NAME(cudaErrorStreamCaptureUnsupported)
    NAME(cudaErrorStreamCaptureInvalidated)
    NAME(cudaErrorStreamCaptureUnjoined)
    NAME(cudaErrorStreamCaptureIsolation)
    NAME(cudaErrorStreamCaptureImplicit)
    NAME(cudaErrorNotSupported)
    NAME(cudaErrorNotPermitted)
    NAME(cudaErrorInvalidMemcpyDirection)
    NAME(cudaErrorUnknown)
#undef NAME
  default:
    return "cudaErrorUnknown";
  }
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure (the emulated device printed why)";
  case cudaErrorStreamCaptureUnsupported:
    return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated:
    return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureUnjoined:
    return "capture was not joined";
  case cudaErrorStreamCaptureIsolation:
    return "operation would make the legacy stream depend on a capturing "
           "blocking stream";
  case cudaErrorStreamCaptureImplicit:
    return "operation would make the legacy stream depend on a capturing "
           "blocking stream";
  default:
    return cudaGetErrorName(error);
  }
}

} // extern "C"
