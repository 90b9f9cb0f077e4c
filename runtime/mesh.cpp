//===- mesh.cpp - the device mesh over MPI --------------------------------===//
#include "runtime/mesh.h"
#include "runtime/runtime.h"
#include "runtime/trainer/watchdog.h"

#include <cstdio>
#include <cstdlib>

using namespace shardc::runtime;

#define MPI_CHECK(call)                                                        \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ != MPI_SUCCESS)                                                    \
      fatal("%s failed with MPI error %d", #call, rc_);                        \
  } while (false)

namespace {
const char *threadLevelName(int level) {
  switch (level) {
  case MPI_THREAD_SINGLE:
    return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED:
    return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED:
    return "MPI_THREAD_SERIALIZED";
  case MPI_THREAD_MULTIPLE:
    return "MPI_THREAD_MULTIPLE";
  default:
    return "an unknown thread level";
  }
}
} // namespace

std::string Mesh::threadLevelProblem(int provided) {
  if (provided >= MPI_THREAD_FUNNELED)
    return "";
  return std::string("MPI gave thread level ") + threadLevelName(provided) +
         ", but this runtime calls MPI from its main thread while other "
         "threads run (the collective watchdog, OpenMP, CUDA), which needs "
         "MPI_THREAD_FUNNELED or more: use an MPI built with thread support";
}

Mesh Mesh::init(int *argc, char ***argv, int64_t replicas, int64_t shards,
                int64_t tp) {
  // See threadLevel (mesh.h): FUNNELED is needed, SERIALIZED asked for.
  int provided = MPI_THREAD_SINGLE;
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  Mesh m;
  m.threadLevel = provided;
  m.shardComm_ = m.replicaComm_ = m.tpComm_ = MPI_COMM_SELF;
  m.replicas = replicas;
  m.shards = shards;
  m.tp = tp;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &m.rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &m.world));
  const abi::MeshGrid g = m.grid();
  if (int64_t(m.world) != g.ranks()) {
    std::string shape = std::to_string(replicas) + " x " +
                        std::to_string(shards) +
                        (tp > 1 ? " x tp " + std::to_string(tp) : "");
    std::fprintf(stderr,
                 "error: rank %d: this executable was compiled for a mesh of "
                 "%lld ranks (%s) but was launched with %d; run it with "
                 "mpirun -np %lld\n",
                 m.rank, (long long)g.ranks(), shape.c_str(), m.world,
                 (long long)g.ranks());
    MPI_Finalize();
    std::exit(1);
  }
  // Each axis's communicator: the ranks that differ only along it, keyed
  // by their index on it.
  const int r = m.rank;
  for (int64_t a = 0; a < g.numAxes(); ++a) {
    MPI_Comm &c = a == g.replicaAxis() ? m.replicaComm_
                  : a == g.tpAxis()    ? m.tpComm_
                                       : m.shardComm_;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, int(g.axisColor(a, r)),
                             int(g.axisIndex(a, r)), &c));
  }
  std::string problem = threadLevelProblem(provided);
  if (!problem.empty()) {
    std::fprintf(stderr, "error: rank %d: %s\n", m.rank, problem.c_str());
    MPI_Finalize();
    std::exit(1);
  }
  for (int64_t a = 0; a < g.numAxes(); ++a) {
    MPI_CHECK(MPI_Comm_rank(m.axis(a), &m.axisRanks_[a]));
    MPI_CHECK(MPI_Comm_size(m.axis(a), &m.axisSizes_[a]));
  }
  return m;
}

void Mesh::finalize() { MPI_Finalize(); }

MPI_Comm Mesh::axis(int64_t a) const {
  const abi::MeshGrid g = grid();
  if (a == g.replicaAxis())
    return replicaComm_;
  if (a == g.tpAxis())
    return tpComm_;
  return shardComm_;
}

int Mesh::axisRank(int64_t a) const {
  return a >= 0 && a < 3 ? axisRanks_[a] : 0;
}

int Mesh::axisSize(int64_t a) const {
  return a >= 0 && a < 3 ? axisSizes_[a] : 1;
}

double Mesh::sumAll(double value) const {
  watchdog::Scope inFlight("sum over all ranks", 8);
  double out = 0;
  MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  return out;
}

MPI_Comm Mesh::subgroup(int64_t a, int64_t n) const {
  for (const auto &[key, c] : subgroups_)
    if (key.first == a && key.second == n)
      return c;
  MPI_Comm parent = axis(a), c;
  int r;
  MPI_CHECK(MPI_Comm_rank(parent, &r));
  MPI_CHECK(MPI_Comm_split(parent, int(r / n), int(r % n), &c));
  subgroups_.push_back({{a, n}, c});
  return c;
}

std::vector<std::string> Mesh::gatherStrings(const std::string &value) const {
  if (world == 1)
    return {value};
  watchdog::Scope inFlight("gather to rank 0", int64_t(value.size()));
  int n = int(value.size());
  std::vector<int> sizes(rank == 0 ? world : 0), displs;
  MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0,
                       MPI_COMM_WORLD));
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int s : sizes) {
      displs.push_back(total);
      total += s;
    }
    all.resize(size_t(total));
  }
  MPI_CHECK(MPI_Gatherv(value.data(), n, MPI_CHAR, all.data(), sizes.data(),
                        displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (size_t r = 0; r < sizes.size(); ++r)
    out.push_back(all.substr(size_t(displs[r]), size_t(sizes[r])));
  return out;
}

std::string Mesh::broadcastString(const std::string &value) const {
  if (world == 1)
    return value;
  watchdog::Scope inFlight("broadcast from rank 0", int64_t(value.size()));
  long long n = (long long)value.size();
  MPI_CHECK(MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
  std::string out = rank == 0 ? value : std::string(size_t(n), '\0');
  MPI_CHECK(MPI_Bcast(out.data(), int(n), MPI_CHAR, 0, MPI_COMM_WORLD));
  return out;
}

bool Mesh::gatherShards(const float *local, int64_t n, float *full,
                        int64_t root) const {
  return MPI_Gather(local, int(n), MPI_FLOAT, full, int(n), MPI_FLOAT,
                    int(root), shardComm_) == MPI_SUCCESS;
}

bool Mesh::gatherTp(const float *local, int64_t n, float *full,
                    int64_t root) const {
  return MPI_Gather(local, int(n), MPI_FLOAT, full, int(n), MPI_FLOAT,
                    int(root), tpComm_) == MPI_SUCCESS;
}

void Mesh::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void Mesh::barrier() const {
  watchdog::Scope inFlight("barrier", 0);
  if (world > 1)
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}
