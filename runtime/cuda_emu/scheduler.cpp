//===- scheduler.cpp - blocks, fibers, barriers and warps -----------------===//
//
// A launch runs every block of its grid; blocks are spread over OpenMP
// threads (the emulated device's multiprocessors), each running one block
// at a time. The threads of a block are Boost.Context fibers on that OS
// thread, resumed in turn: a thread runs until it reaches a barrier, a warp
// exchange (shuffle, vote, __syncwarp) or its end, then the next runs. A
// barrier opens when every thread of the block has reached it; a warp
// exchange when every lane of its mask has. So a kernel whose reduction
// lacks a barrier reads shared memory before the other threads wrote it,
// as a GPU may, and gives wrong results.
//
// Errors, each naming the kernel and the block:
//  - a __syncthreads() that some threads reach while others exit;
//  - a warp exchange whose mask names a lane that exited, waits at a
//    barrier, or is not in the block;
//  - dynamic shared memory beyond what the launch asked for.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda_emu/device.h"
#include "runtime/cuda_emu/emu.h"

#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>
#include <omp.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ctx = boost::context;

namespace shardc::emu {

thread_local ThreadState tls;

namespace {

/// Fiber stacks, one pool per OS thread, reused from block to block; each
/// has a guard page below it, so an overflow faults instead of corrupting
/// a neighbour.
class StackPool {
public:
  static constexpr size_t kStackBytes = size_t(256) << 10;
  static constexpr size_t kGuardBytes = size_t(4) << 10;

  ~StackPool() {
    for (ctx::stack_context &s : free_)
      munmap(static_cast<char *>(s.sp) - s.size - kGuardBytes,
             s.size + kGuardBytes);
  }
  ctx::stack_context allocate() {
    if (!free_.empty()) {
      ctx::stack_context s = free_.back();
      free_.pop_back();
      return s;
    }
    size_t total = kStackBytes + kGuardBytes;
    void *base = mmap(nullptr, total, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
      throw std::bad_alloc();
    mprotect(base, kGuardBytes, PROT_NONE);
    ctx::stack_context s;
    s.size = kStackBytes;
    s.sp = static_cast<char *>(base) + total;
    return s;
  }
  void deallocate(ctx::stack_context &s) { free_.push_back(s); }

private:
  std::vector<ctx::stack_context> free_;
};

thread_local StackPool stackPool;

struct PooledStack {
  ctx::stack_context allocate() { return stackPool.allocate(); }
  void deallocate(ctx::stack_context &s) noexcept { stackPool.deallocate(s); }
};

enum class LaneState { Run, Barrier, Warp, Done, Fault };

struct Lane {
  ctx::fiber fiber;
  ctx::fiber back; ///< the scheduler, while the lane runs
  LaneState state = LaneState::Run;
  unsigned mask = 0;  ///< of the warp exchange it waits at
  uint64_t gen = 0;   ///< the exchange's generation in its warp
  const char *what = nullptr;
  dim3 idx;
  bool started = false;
};

struct Warp {
  uint64_t gen = 0;        ///< exchanges completed
  uint64_t slots[2][32] = {}; ///< by generation parity
};

/// The block running on this OS thread.
struct Block {
  const char *kernel = nullptr;
  std::vector<Lane> lanes;
  std::vector<Warp> warps;
  std::vector<char> shared; ///< dynamic shared memory
  size_t sharedBytes = 0;
  std::string fault;
};

thread_local Block *tlsBlock = nullptr;
thread_local Lane *tlsLane = nullptr;

void yieldToScheduler() {
  Lane &lane = *tlsLane;
  lane.back = std::move(lane.back).resume();
}

std::string dimText(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," +
         std::to_string(d.z) + ")";
}

/// Runs one block; returns an empty string, or the fault.
std::string runBlock(Block &blk, dim3 blockIdxV, dim3 grid, dim3 block,
                     const std::function<void()> &body) {
  int n = int(block.x * block.y * block.z);
  blk.lanes.clear();
  blk.lanes.resize(n);
  blk.warps.assign((n + 31) / 32, Warp{});
  blk.fault.clear();
  for (int t = 0; t < n; ++t)
    blk.lanes[t].idx = dim3(t % block.x, t / block.x % block.y,
                            t / (block.x * block.y));
  tls.block = blockIdxV;
  tls.blockDim_ = block;
  tls.gridDim_ = grid;
  tlsBlock = &blk;

  auto resume = [&](int t) {
    Lane &lane = blk.lanes[t];
    tls.thread = lane.idx;
    tls.linear = t;
    tls.lane = t % 32;
    tlsLane = &lane;
    if (!lane.started) {
      lane.started = true;
      lane.fiber = ctx::fiber(std::allocator_arg, PooledStack{},
                              [&lane, &body, &blk](ctx::fiber &&back) {
                                lane.back = std::move(back);
                                try {
                                  body();
                                  lane.state = LaneState::Done;
                                } catch (const KernelFault &f) {
                                  blk.fault = f.what();
                                  lane.state = LaneState::Fault;
                                }
                                return std::move(lane.back);
                              });
    }
    lane.fiber = std::move(lane.fiber).resume();
    tlsLane = nullptr;
  };
  auto threadText = [&](int t) {
    return "thread " + dimText(blk.lanes[t].idx);
  };

  for (;;) {
    for (int t = 0; t < n; ++t)
      if (blk.lanes[t].state == LaneState::Run) {
        resume(t);
        if (blk.lanes[t].state == LaneState::Fault)
          return blk.fault;
      }
    // Every lane now waits or is done. Open the warp exchanges whose lanes
    // have all arrived.
    bool released = false;
    for (size_t w = 0; w < blk.warps.size(); ++w) {
      int first = int(w) * 32, end = std::min(n, first + 32);
      int waiting = -1;
      for (int t = first; t < end; ++t)
        if (blk.lanes[t].state == LaneState::Warp) {
          waiting = t;
          break;
        }
      if (waiting < 0)
        continue;
      unsigned mask = blk.lanes[waiting].mask;
      const char *what = blk.lanes[waiting].what;
      bool ready = true;
      for (int l = 0; l < 32; ++l) {
        if (!(mask >> l & 1u))
          continue;
        int t = first + l;
        if (t >= n)
          return std::string(what) + " in " + threadText(waiting) +
                 ": its mask names lane " + std::to_string(l) +
                 ", which the block of " + std::to_string(n) +
                 " threads does not have";
        const Lane &other = blk.lanes[t];
        if (other.state == LaneState::Done)
          return std::string(what) + " in " + threadText(waiting) +
                 ": lane " + std::to_string(l) + " (" + threadText(t) +
                 ") of its mask exited without reaching it";
        if (other.state == LaneState::Warp && other.mask != mask)
          return std::string(what) + " in " + threadText(waiting) +
                 ": lanes of one warp wait with different masks";
        if (other.state != LaneState::Warp)
          ready = false;
      }
      if (!(mask >> (waiting - first) & 1u))
        return std::string(what) + " in " + threadText(waiting) +
               ": the calling lane is not in its mask";
      if (!ready)
        continue;
      Warp &warp = blk.warps[w];
      // Exchange `gen` opens; the next one's slots start cleared (lanes
      // outside its mask read 0). Slow lanes still read this one's.
      ++warp.gen;
      std::fill(std::begin(warp.slots[warp.gen % 2]),
                std::end(warp.slots[warp.gen % 2]), 0);
      for (int l = 0; l < 32; ++l)
        if (mask >> l & 1u)
          blk.lanes[first + l].state = LaneState::Run;
      released = true;
    }
    if (released)
      continue;
    int atBarrier = 0, done = 0, atWarp = -1, exited = -1, waiter = -1;
    for (int t = 0; t < n; ++t) {
      LaneState s = blk.lanes[t].state;
      if (s == LaneState::Barrier) {
        ++atBarrier;
        waiter = t;
      } else if (s == LaneState::Done) {
        ++done;
        exited = t;
      } else if (s == LaneState::Warp) {
        atWarp = t;
      }
    }
    if (done == n)
      return "";
    if (atWarp >= 0)
      return std::string(blk.lanes[atWarp].what) + " in " +
             threadText(atWarp) +
             " can never complete: lanes of its mask wait at "
             "__syncthreads()";
    if (done > 0)
      return "__syncthreads() reached by " + std::to_string(atBarrier) +
             " of the block's " + std::to_string(n) + " threads (" +
             threadText(waiter) + " waits; " + threadText(exited) +
             " exited without reaching it)";
    for (Lane &lane : blk.lanes)
      lane.state = LaneState::Run;
  }
}

int numWorkers() { return omp_get_max_threads(); }

} // namespace

void syncthreads() {
  if (!tlsLane)
    throw std::logic_error("__syncthreads() outside a kernel");
  tlsLane->state = LaneState::Barrier;
  yieldToScheduler();
}

const uint64_t *warpExchange(unsigned mask, uint64_t value, const char *what) {
  if (!tlsLane)
    throw std::logic_error(std::string(what) + " outside a kernel");
  Block &blk = *tlsBlock;
  Lane &lane = *tlsLane;
  Warp &warp = blk.warps[tls.linear / 32];
  uint64_t gen = warp.gen;
  warp.slots[gen % 2][tls.lane] = value;
  lane.state = LaneState::Warp;
  lane.mask = mask;
  lane.gen = gen;
  lane.what = what;
  yieldToScheduler();
  return warp.slots[gen % 2];
}

void *dynamicShared(size_t bytes) {
  if (!tlsBlock)
    throw std::logic_error("dynamic shared memory outside a kernel");
  Block &blk = *tlsBlock;
  if (bytes > blk.sharedBytes)
    throw KernelFault("uses " + std::to_string(bytes) +
                      " bytes of dynamic shared memory, but the launch asked "
                      "for " +
                      std::to_string(blk.sharedBytes));
  return blk.shared.data();
}

int multiprocessorCount() { return numWorkers(); }

void runGrid(const char *kernel, dim3 grid, dim3 block, size_t sharedBytes,
             const std::function<void()> &body) {
  int64_t blocks = int64_t(grid.x) * grid.y * grid.z;
  std::atomic<bool> failed{false};
  std::mutex faultMutex;
  std::string fault;
  int workers = int(std::min<int64_t>(numWorkers(), blocks));
#pragma omp parallel num_threads(workers) if (workers > 1)
  {
    Block blk;
    blk.kernel = kernel;
    blk.sharedBytes = sharedBytes;
    blk.shared.assign(sharedBytes ? sharedBytes : 1, 0);
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < blocks; ++b) {
      if (failed.load(std::memory_order_relaxed))
        continue;
      dim3 idx(unsigned(b % grid.x), unsigned(b / grid.x % grid.y),
               unsigned(b / (int64_t(grid.x) * grid.y)));
      std::string why = runBlock(blk, idx, grid, block, body);
      if (!why.empty()) {
        std::lock_guard<std::mutex> lock(faultMutex);
        if (!failed.exchange(true))
          fault = "kernel '" + std::string(kernel) + "', block " +
                  dimText(idx) + ": " + why;
      }
      // Suspended fibers of a faulted block unwind here.
      blk.lanes.clear();
    }
    tlsBlock = nullptr;
  }
  if (failed)
    report(cudaErrorLaunchFailure, fault, /*sticky=*/true);
}

} // namespace shardc::emu
