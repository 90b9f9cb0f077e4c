//===- mesh_local.cpp - a mesh of one process, without MPI ----------------===//
//
// The Mesh of a one-rank executable that links no MPI (libshardc_mesh_local):
// rank 0 of 1. Launched by mpirun or srun with more than one task, every
// task says so and exits, instead of each training alone.
//
//===----------------------------------------------------------------------===//
#include "runtime/mesh.h"
#include "runtime/runtime.h"

#include <cstdio>
#include <cstdlib>

using namespace shardc::runtime;

Mesh Mesh::init(int *, char ***, int64_t replicas, int64_t shards,
                int64_t tp) {
  if (replicas * shards * tp != 1)
    fatal("this executable has no MPI, and its mesh has %lld ranks",
          (long long)(replicas * shards * tp));
  // The launchers' task counts: OpenMPI, MPICH/PMI, Slurm.
  for (const char *var :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}) {
    const char *v = std::getenv(var);
    if (v && std::atoi(v) > 1) {
      std::fprintf(stderr,
                   "error: this executable was compiled for one rank (it "
                   "links no MPI) but was launched as %s tasks (%s); run it "
                   "directly, or compile with --mesh\n",
                   v, var);
      std::exit(1);
    }
  }
  return Mesh();
}

void Mesh::finalize() {}

MPI_Comm Mesh::axis(int64_t) const { return shardComm_; }

int Mesh::axisRank(int64_t) const { return 0; }
int Mesh::axisSize(int64_t) const { return 1; }

MPI_Comm Mesh::subgroup(int64_t, int64_t) const {
  fatal("a one-rank executable has no subgroups");
}

double Mesh::sumAll(double value) const { return value; }

std::vector<std::string> Mesh::gatherStrings(const std::string &value) const {
  return {value};
}

std::string Mesh::broadcastString(const std::string &value) const {
  return value;
}

void Mesh::barrier() const {}

bool Mesh::gatherShards(const float *local, int64_t n, float *full,
                        int64_t) const {
  for (int64_t k = 0; k < n; ++k)
    full[k] = local[k];
  return true;
}

bool Mesh::gatherTp(const float *local, int64_t n, float *full,
                    int64_t root) const {
  return gatherShards(local, n, full, root);
}

void Mesh::abort(int code) const { std::exit(code); }
