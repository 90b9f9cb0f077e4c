//===- shardc-calibrate.cpp - measure this machine for --predict ----------===//
//
// Usage: shardc-calibrate FILE   (what `shardc --calibrate FILE` runs). It
// measures the runtime's own CPU kernels in this one process, at the thread
// count the environment gives (OMP_NUM_THREADS, as the trainer's), and
// names the GEMM library and ISA that ran (runtime/cpu/gemm.h):
//   - matmul (x w^T, f32) at every shape of target/Calibration.h's grid;
//   - attention and its gradient at one shape (GPT-2 small's heads);
//   - accumulate over 3 x 128 MiB: the memory bandwidth;
//   - a one-element fill: the launch overhead.
// Then it runs itself on two local ranks under mpirun (--collectives):
// they time MPI_Allgather over sizes from 4 KiB to 64 MiB, and a
// least-squares line through them gives the ring's latency and bandwidth.
// It writes FILE in the format of target/Calibration.h. Progress goes to
// stderr.
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "runtime/cpu/gemm.h"
#include "runtime/kernels.h"
#include "target/Calibration.h"
#include "tools/shardc-calibrate/Common.h"

#include <mpi.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace A = shardc::abi;
using shardc::calibrate::packed;
namespace C = shardc::calibration;

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Seconds per call of f: one call to warm up, then calls until at least
/// `minSeconds` have passed (at least one), their mean.
template <typename F> double timeIt(F f, double minSeconds = 0.2) {
  f();
  int calls = 0;
  double start = now(), elapsed = 0;
  do {
    f();
    ++calls;
    elapsed = now() - start;
  } while (elapsed < minSeconds);
  return elapsed / calls;
}

double gemmRate(int64_t m, int64_t n, int64_t k) {
  std::vector<float> a(size_t(m * k), 0.5f), b(size_t(n * k), 0.25f),
      y(size_t(m * n));
  void *bufs[3] = {a.data(), b.data(), y.data()};
  namespace Mm = A::matmul;
  auto ints = packed(A::KernelId::matmul, {{Mm::M, m},
                                           {Mm::K, k},
                                           {Mm::N, n},
                                           {Mm::trans_a, 0},
                                           {Mm::trans_b, 1}});
  double s = timeIt([&] {
    shardc_k_matmul(nullptr, bufs, ints.data(), nullptr, A::kComputeStream);
  });
  return 2.0 * double(m) * double(n) * double(k) / s;
}

/// FLOP/s of attention (grad false) or its gradient at B 4, H 12, T 256,
/// D 64, causal: the counts of passes/rt/RtFlops.h (4 and 10 per kept pair).
double attentionRate(bool grad) {
  const int64_t B = 4, H = 12, T = 256, D = 64;
  size_t n = size_t(B * H * T * D);
  std::vector<std::vector<float>> t(7, std::vector<float>(n, 0.01f));
  namespace At = A::attention;
  auto ints = packed(A::KernelId::attention, {{At::B, B},
                                              {At::H, H},
                                              {At::G, H},
                                              {At::T, T},
                                              {At::S, T},
                                              {At::D, D},
                                              {At::causal, 1}});
  double scale = 0.125;
  void *bufs[7];
  for (int j = 0; j < 7; ++j)
    bufs[j] = t[size_t(j)].data();
  double s = timeIt([&] {
    if (grad)
      shardc_k_attention_grad(nullptr, bufs, ints.data(), &scale,
                              A::kComputeStream);
    else
      shardc_k_attention(nullptr, bufs, ints.data(), &scale,
                         A::kComputeStream);
  });
  double pairs = double(T) * double(T + 1) / 2;
  return (grad ? 10.0 : 4.0) * double(B * H * D) * pairs / s;
}

double memoryBandwidth() {
  const int64_t n = int64_t(32) << 20; // 128 MiB a buffer
  std::vector<float> acc(size_t(n), 1.0f), g(size_t(n), 2.0f), out(size_t(n), 0.0f);
  float ctl[2] = {1.0f, 0.5f};
  void *bufs[4] = {acc.data(), g.data(), ctl, out.data()};
  auto ints = packed(A::KernelId::accumulate, {{A::accumulate::n, n}});
  double s = timeIt([&] {
    shardc_k_accumulate(nullptr, bufs, ints.data(), nullptr,
                        A::kComputeStream);
  });
  return 3.0 * 4.0 * double(n) / s;
}

double launchSeconds() {
  float y = 0;
  void *bufs[1] = {&y};
  auto ints = packed(A::KernelId::fill, {{A::fill::n, 1}});
  double value = 1.0;
  return timeIt([&] {
    for (int r = 0; r < 1000; ++r)
      shardc_k_fill(nullptr, bufs, ints.data(), &value, A::kComputeStream);
  }) / 1000.0;
}

/// The ring's (latency, bandwidth) between the ranks: MPI_Allgather of
/// full buffers of B bytes (B / P a rank) over sizes, and the least-squares
/// line t = latency + (B / P) / bandwidth (P - 1 steps of B / P for P = 2).
void collectiveFit(int ranks, double &latency, double &bandwidth) {
  std::vector<double> xs, ts;
  for (int64_t bytes = 4096; bytes <= (int64_t(64) << 20); bytes *= 4) {
    int64_t per = bytes / ranks;
    std::vector<char> in(size_t(per), 1), out(size_t(bytes), 0);
    // The same number of calls on every rank (a time limit per rank would
    // let them disagree and hang): 3 to 100, fewer for larger buffers.
    int calls = int(std::clamp<int64_t>((int64_t(256) << 20) / bytes, 3, 100));
    auto gather = [&] {
      MPI_Allgather(in.data(), int(per), MPI_BYTE, out.data(), int(per),
                    MPI_BYTE, MPI_COMM_WORLD);
    };
    gather();
    MPI_Barrier(MPI_COMM_WORLD);
    double start = now();
    for (int c = 0; c < calls; ++c)
      gather();
    double s = (now() - start) / calls;
    // Every rank agrees on the slowest rank's time.
    MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    xs.push_back(double(per) * (ranks - 1));
    ts.push_back(s);
  }
  double n = double(xs.size()), sx = 0, st = 0, sxx = 0, sxt = 0;
  for (size_t j = 0; j < xs.size(); ++j) {
    sx += xs[j];
    st += ts[j];
    sxx += xs[j] * xs[j];
    sxt += xs[j] * ts[j];
  }
  double slope = (n * sxt - sx * st) / (n * sxx - sx * sx);
  double intercept = (st - slope * sx) / n;
  bandwidth = 1.0 / slope;
  // A ring of P ranks takes P - 1 steps.
  latency = std::max(intercept / (ranks - 1), 1e-7);
}

/// `shardc-calibrate --collectives` under mpirun: the ring's fit, printed
/// by rank 0 as "latency_s bandwidth".
int collectivesMain(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  double latency = 0, bandwidth = 0;
  if (ranks > 1)
    collectiveFit(ranks, latency, bandwidth);
  if (rank == 0)
    std::printf("%.6g %.6g\n", latency, bandwidth);
  MPI_Finalize();
  return ranks > 1 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 && std::string(argv[1]) == "--collectives")
    return collectivesMain(argc, argv);
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: shardc-calibrate FILE (what shardc "
                         "--calibrate FILE runs)\n");
    return 2;
  }
  std::string file = argv[1];
  // The kernels in this process alone (no MPI: an MPI launcher's processes
  // would take cycles from the measured threads).
  int threads = omp_get_max_threads();
  std::string json;
  char line[256];
  std::string gemms = shardc::runtime::cpu::gemmLibrary();
  std::fprintf(stderr, "shardc-calibrate: %d threads, GEMMs: %s\n", threads,
               gemms.c_str());
  json += "{\"" + std::string(C::kKeyFormat) + "\": \"" + C::kFormat +
          "\", \"" + C::kKeyVersion + "\": " + std::to_string(C::kVersion);
  char host[128] = "this machine";
  gethostname(host, sizeof(host) - 1);
  json += ", \"" + std::string(C::kKeyName) + "\": \"calibrated " +
          std::string(host) + ", " + std::to_string(threads) +
          " threads, GEMMs " + gemms + "\"";
  json += ", \"" + std::string(C::kKeyThreads) +
          "\": " + std::to_string(threads);
  double memory =
      double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  std::snprintf(line, sizeof(line), ", \"%s\": %.0f", C::kKeyMemoryBytes,
                memory);
  json += line;
  json += ", \"" + std::string(C::kKeyGemm) + "\": [";
  bool first = true;
  for (int64_t m : C::kGemmRows)
    for (int64_t n : C::kGemmDims)
      for (int64_t k : C::kGemmDims) {
        double rate = gemmRate(m, n, k);
        std::fprintf(stderr, "  gemm %5lld x %5lld x %5lld: %8.2f GFLOP/s\n",
                     (long long)m, (long long)n, (long long)k, rate / 1e9);
        std::snprintf(line, sizeof(line),
                      "%s{\"%s\": %lld, \"%s\": %lld, \"%s\": %lld, "
                      "\"%s\": %.6g}",
                      first ? "" : ", ", C::kKeyM, (long long)m, C::kKeyN,
                      (long long)n, C::kKeyK, (long long)k, C::kKeyFlopsPerS,
                      rate);
        json += line;
        first = false;
      }
  json += "]";
  double att = attentionRate(false), attGrad = attentionRate(true);
  double bw = memoryBandwidth(), launch = launchSeconds();
  std::fprintf(stderr,
               "  attention %.2f GFLOP/s, its gradient %.2f GFLOP/s\n"
               "  memory %.2f GB/s, launch %.3f us\n",
               att / 1e9, attGrad / 1e9, bw / 1e9, launch * 1e6);
  std::snprintf(line, sizeof(line),
                ", \"%s\": %.6g, \"%s\": %.6g, \"%s\": %.6g, \"%s\": %.6g",
                C::kKeyAttention, att, C::kKeyAttentionGrad, attGrad,
                C::kKeyMemoryBandwidth, bw, C::kKeyLaunch, launch);
  json += line;
  // The collectives: this tool again, on two local ranks under mpirun.
  char self[4096] = {0};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) {
    std::fprintf(stderr, "shardc-calibrate: cannot find its own path\n");
    return 1;
  }
  std::string cmd = "mpirun --allow-run-as-root --oversubscribe -np 2 '" +
                    std::string(self) + "' --collectives";
  FILE *pipe = popen(cmd.c_str(), "r");
  double latency = 0, bandwidth = 0;
  bool got = pipe && std::fscanf(pipe, "%lf %lf", &latency, &bandwidth) == 2;
  if (pipe && pclose(pipe) != 0)
    got = false;
  if (!got || !(bandwidth > 0)) {
    std::fprintf(stderr, "shardc-calibrate: measuring MPI between two local "
                         "ranks failed (%s)\n",
                 cmd.c_str());
    return 1;
  }
  std::fprintf(stderr, "  collectives: latency %.2f us, %.2f GB/s\n",
               latency * 1e6, bandwidth / 1e9);
  std::snprintf(line, sizeof(line), ", \"%s\": %.6g, \"%s\": %.6g}\n",
                C::kKeyCollectiveLatency, latency, C::kKeyCollectiveBandwidth,
                bandwidth);
  json += line;
  return shardc::calibrate::writeCalibration("shardc-calibrate", file, json) ? 0 : 1;
}
