//===- CudaEmulatedMeshTest.cpp - the CUDA backend's NCCL groups, 2 ranks -===//
//
// Run under mpirun with 2 ranks (ctest does). Hand-written launch tables run
// by the CUDA backend on the emulated device over a mesh of 2:
//  - two adjacent, independent all-gathers on the communication stream are
//    issued in one NCCL group (the emulated NCCL's log marks grouped
//    calls), and their results are the gathers written out by hand;
//  - a reduce-scatter followed by an all-reduce of its output, adjacent
//    but dependent, is not grouped (the emulated NCCL runs a group's calls
//    in reverse order, so grouping them would give a wrong sum);
//  - an all-gather grouped with a subgroup all-gather: the subgroup's
//    communicator exists before the group opens;
//  - the abort order: the watchdog's abort of the communicators never
//    overlaps the backend's use of them (watchdog::DeviceUse), and runs
//    once;
//  - MPI's thread level: below MPI_THREAD_FUNNELED is refused, naming it.
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "runtime/backend.h"
#include "runtime/mesh.h"
#include "runtime/trainer/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <fstream>
#include <string>
#include <vector>

namespace A = shardc::abi;
using namespace shardc::runtime;

namespace {

Mesh *mesh = nullptr;
std::string logPath;

/// A launch of collective `id` on the communication stream over the arena
/// buffers at `offsets`, with `ints`.
void launch(std::vector<int64_t> &program, A::KernelId id,
            const std::vector<int64_t> &offsets,
            const std::vector<int64_t> &ints) {
  program.insert(program.end(),
                 {A::kOpKernel, int64_t(id), A::kCommStream,
                  int64_t(offsets.size()), int64_t(ints.size()), 0});
  for (int64_t o : offsets)
    program.push_back(A::bufferRef(A::kRegionArena, o));
  program.insert(program.end(), ints.begin(), ints.end());
}

std::vector<int64_t> intsOf(int64_t count, int64_t n, int64_t axis,
                            int64_t dtype) {
  std::vector<int64_t> ints(size_t(count), 0);
  ints[A::all_gather::n] = n;
  ints[A::all_gather::axis] = axis;
  ints[A::all_gather::dtype] = dtype;
  return ints;
}

/// The lines rank 0's emulated NCCL logged so far.
std::vector<std::string> logged() {
  std::ifstream in(logPath + ".0");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

class CudaMesh : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(mesh->world, 2) << "run under mpirun -np 2";
    backend = makeBackend("cuda", mesh, 0);
    backend->reserve(1 << 16);
    arena = backend->allocate(1 << 14, "arena");
    for (int r = 0; r < A::kNumRegions; ++r)
      regions[r] = nullptr;
    regions[A::kRegionArena] = arena;
  }
  void put(int64_t offset, const std::vector<float> &v) {
    backend->copyToDevice(arena + offset, v.data(), int64_t(v.size() * 4));
  }
  std::vector<float> get(int64_t offset, size_t n) {
    std::vector<float> v(n);
    backend->copyToHost(v.data(), arena + offset, int64_t(n * 4));
    return v;
  }
  /// This rank's chunks of two gathers: x[n] at 0, y[n] at 512.
  void putChunks(int64_t n) {
    std::vector<float> x(n), y(n);
    for (int k = 0; k < n; ++k) {
      x[k] = float(10 * mesh->rank + k);
      y[k] = float(-100 * mesh->rank - k);
    }
    put(0, x);
    put(512, y);
  }
  /// Both ranks' chunks gathered: x's at 256, y's at 768.
  void expectGathered(int64_t n) {
    std::vector<float> gx = get(256, 2 * n), gy = get(768, 2 * n);
    for (int r = 0; r < 2; ++r)
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(gx[r * n + k], float(10 * r + k));
        EXPECT_EQ(gy[r * n + k], float(-100 * r - k));
      }
  }
  std::unique_ptr<Backend> backend;
  char *arena = nullptr;
  void *regions[A::kNumRegions];
};

TEST_F(CudaMesh, IndependentAllGathersAreOneGroup) {
  const int64_t n = 4;
  // x[4] at 0 -> gx[8] at 256; y[4] at 512 -> gy[8] at 768.
  putChunks(n);
  std::vector<int64_t> program;
  auto ints = intsOf(A::all_gather::kNumInts, n, 0, A::kF32);
  launch(program, A::KernelId::all_gather, {0, 256}, ints);
  launch(program, A::KernelId::all_gather, {512, 768}, ints);
  program.push_back(A::kOpEnd);
  size_t before = logged().size();
  backend->run(program.data(), regions);
  expectGathered(n);
  mesh->barrier();
  if (mesh->rank == 0) {
    std::vector<std::string> lines = logged();
    ASSERT_EQ(lines.size(), before + 2);
    for (size_t k = before; k < lines.size(); ++k)
      EXPECT_NE(lines[k].find("ncclAllGather"), std::string::npos);
    EXPECT_NE(lines[before].find(" grouped"), std::string::npos);
    EXPECT_NE(lines[before + 1].find(" grouped"), std::string::npos);
  }
}

TEST_F(CudaMesh, DependentCollectivesAreNotGrouped) {
  const int64_t n = 4;
  // in[8] at 0 -> rs[4] at 256 (tmp at 384) -> ar[4] at 512.
  std::vector<float> in(2 * n);
  for (int k = 0; k < 2 * n; ++k)
    in[k] = float(k + 1) * float(mesh->rank + 1);
  put(0, in);
  put(512, std::vector<float>(n, -1));
  std::vector<int64_t> program;
  launch(program, A::KernelId::reduce_scatter, {0, 256, 384},
         intsOf(A::reduce_scatter::kNumInts, n, 0, A::kF32));
  launch(program, A::KernelId::all_reduce, {256, 512},
         intsOf(A::all_reduce::kNumInts, n, 0, A::kF32));
  program.push_back(A::kOpEnd);
  size_t before = logged().size();
  backend->run(program.data(), regions);
  // Block r of the sum is 3 * (r*n + k + 1); summed over both blocks.
  std::vector<float> ar = get(512, n);
  for (int k = 0; k < n; ++k)
    EXPECT_EQ(ar[k], 3.0f * float(k + 1) + 3.0f * float(n + k + 1));
  mesh->barrier();
  if (mesh->rank == 0) {
    std::vector<std::string> lines = logged();
    ASSERT_EQ(lines.size(), before + 2);
    for (size_t k = before; k < lines.size(); ++k)
      EXPECT_EQ(lines[k].find(" grouped"), std::string::npos);
  }
}

TEST_F(CudaMesh, SubgroupMadeBeforeItsGroupOpens) {
  // An all-gather and an independent all-gather within groups of 2 ranks,
  // adjacent: one NCCL group. A subgroup communicator split inside that
  // group would be NULL until its end (as NCCL's, and the emulated NCCL's);
  // the backend makes it before the program runs.
  const int64_t n = 4;
  putChunks(n);
  std::vector<int64_t> program;
  launch(program, A::KernelId::all_gather, {0, 256},
         intsOf(A::all_gather::kNumInts, n, 0, A::kF32));
  std::vector<int64_t> sub(size_t(A::all_gather_subgroup::kNumInts), 0);
  sub[A::all_gather_subgroup::n] = n;
  sub[A::all_gather_subgroup::axis] = 0;
  sub[A::all_gather_subgroup::dtype] = A::kF32;
  sub[A::all_gather_subgroup::N] = 2;
  launch(program, A::KernelId::all_gather_subgroup, {512, 768}, sub);
  program.push_back(A::kOpEnd);
  size_t before = logged().size();
  backend->run(program.data(), regions);
  expectGathered(n);
  mesh->barrier();
  if (mesh->rank == 0) {
    std::vector<std::string> lines = logged();
    ASSERT_EQ(lines.size(), before + 2);
    EXPECT_NE(lines[before + 1].find(" grouped"), std::string::npos)
        << "the two gathers were not one group: the test shows nothing";
  }
}

// The watchdog's abort (ncclCommAbort frees the communicators) against the
// backend's calls on them, from another thread, as backend.cu makes them:
// the abort waits for the call in progress, runs between calls, once, and
// the process exits (3) before any other call. In a forked child, which
// the watchdog ends; an abort during a call exits 4, a second one 5.
std::atomic<bool> inUse{false};
std::atomic<int> aborts{0};

[[noreturn]] void useCommunicatorsUntilAborted() {
  watchdog::watchDevice(
      [](watchdog::Pending &p) {
        p.what = "a collective that never completes";
        p.bytes = 4;
        p.id = 1;
        return true;
      },
      [] {
        if (inUse.load())
          _exit(4);
        if (aborts++ > 0)
          _exit(5);
        std::fprintf(stderr, "aborted once\n");
      });
  watchdog::start(mesh->rank, 0.2);
  for (;;) {
    {
      watchdog::DeviceUse use("ncclCommGetAsyncError");
      inUse = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      inUse = false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST(AbortOrder, AbortNeverOverlapsACallOnTheCommunicators) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(useCommunicatorsUntilAborted(), ::testing::ExitedWithCode(3),
              "did not complete within 0 s(.|\n)*aborted once");
}

TEST(ThreadLevel, BelowFunneledRefusedNamingTheLevel) {
  EXPECT_GE(mesh->threadLevel, MPI_THREAD_FUNNELED);
  std::string single = Mesh::threadLevelProblem(MPI_THREAD_SINGLE);
  EXPECT_NE(single.find("MPI gave thread level MPI_THREAD_SINGLE"),
            std::string::npos)
      << single;
  EXPECT_NE(single.find("MPI_THREAD_FUNNELED"), std::string::npos);
  EXPECT_EQ(Mesh::threadLevelProblem(MPI_THREAD_FUNNELED), "");
  EXPECT_EQ(Mesh::threadLevelProblem(MPI_THREAD_SERIALIZED), "");
}

} // namespace

int main(int argc, char **argv) {
  Mesh m = Mesh::init(&argc, &argv, 1, 2);
  mesh = &m;
  // Every rank logs under rank 0's new directory (set before the emulated
  // NCCL's first call opens the log).
  char dir[] = "/tmp/shardc-cuda-mesh-test-XXXXXX";
  if (m.rank == 0 && !mkdtemp(dir))
    return 2;
  logPath = m.broadcastString(std::string(dir) + "/nccl");
  setenv("SHARDC_NCCL_EMU_LOG", logPath.c_str(), 1);
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  m.barrier();
  if (m.rank == 0) {
    std::remove((logPath + ".0").c_str());
    std::remove((logPath + ".1").c_str());
    rmdir(dir);
  }
  Mesh::finalize();
  return rc;
}
