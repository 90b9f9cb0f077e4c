//===- collectives.cpp - CPU collectives through MPI ----------------------===//
//
// Arguments as defined in runtime/abi/kernels.def: element counts, the grid
// axis whose communicator carries the collective, the elements' dtype code
// (f32 or bf16).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels.h"
#include "runtime/mesh.h"
#include "runtime/runtime.h"
#include "runtime/trainer/watchdog.h"
#include "runtime/cpu/fastmath.h"
#include "runtime/cpu/kernel_util.h"

#include <cstring>

namespace A = shardc::abi;
using shardc::runtime::bf16ToFloat;
using shardc::runtime::Context;
using shardc::runtime::fatal;
using shardc::runtime::floatToBf16;
using shardc::runtime::cpu::abiRow;

namespace {

/// The communicator of `axis`; marks collective `what` of `bytes` in
/// flight for the watchdog until the kernel's launched().
MPI_Comm comm(void *ctx, int64_t axis, const char *what, int64_t bytes) {
  auto *c = static_cast<Context *>(ctx);
  if (!c || !c->mesh)
    fatal("a collective ran without a device mesh");
  shardc::runtime::watchdog::enter(what, bytes);
  return c->mesh->axis(axis);
}

void check(int rc, const char *what) {
  if (rc != MPI_SUCCESS)
    fatal("%s failed with MPI error %d", what, rc);
}

/// Bytes per element of a collective's dtype code: f32 or bf16, and for a
/// gather (which only moves bytes) also fp8 (the float8 all-gather).
int64_t elementBytes(int64_t code, bool gather = false) {
  bool fp8 = code == A::kF8E4M3 || code == A::kF8E5M2;
  if (code == A::kF32 || code == A::kBF16 || (gather && fp8))
    return A::dtypeBytes(code);
  fatal("collectives support f32 and bf16 data (gathers also fp8), not "
        "dtype code %lld",
        (long long)code);
}

/// A ring all-gather over `c` writing straight into `out` (no memory
/// outside the plan): this rank's block `in` first, then P - 1 exchanges of
/// one block of `bytes`.
void ringAllGather(const char *in, char *out, int64_t bytes, MPI_Comm c) {
  int rank, size;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  std::memcpy(out + rank * bytes, in, bytes);
  for (int k = 0; k + 1 < size; ++k) {
    int sendBlock = (rank - k + size) % size;
    int recvBlock = (rank - k - 1 + size) % size;
    check(MPI_Sendrecv(out + sendBlock * bytes, int(bytes), MPI_BYTE, right, k,
                       out + recvBlock * bytes, int(bytes), MPI_BYTE, left, k,
                       c, MPI_STATUS_IGNORE),
          "MPI_Sendrecv");
  }
}

} // namespace

// in[n] -> out[P*n], the ranks' blocks in rank order
SHARDC_KERNEL(all_gather) {
  ringAllGather(static_cast<const char *>(b[0]), static_cast<char *>(b[1]),
                i[A::all_gather::n] * elementBytes(i[A::all_gather::dtype], true),
                comm(ctx, i[A::all_gather::axis], "all_gather",
                     i[A::all_gather::n] * elementBytes(i[A::all_gather::dtype], true)));
  launched(ctx, stream);
}

// in_1..in_k[n_j] -> out_1..out_k[P*n_j], through pack[sum n_j] and
// gathered[P*sum n_j]
SHARDC_KERNEL(all_gather_group) {
  // One all-gather for a group of k parameters: pack the local shards, one
  // ring exchange of the packed block, unpack every rank's piece of each.
  int64_t k = i[A::all_gather_group::k],
          eb = elementBytes(i[A::all_gather_group::dtype], true);
  const int64_t *counts = i + A::all_gather_group::kNumInts;
  // The k inputs and the k outputs come first, then pack and gathered.
  void **fixed = b + abiRow(A::KernelId::all_gather_group).buffersPer * k;
  char *pack = static_cast<char *>(fixed[0]);
  char *gathered = static_cast<char *>(fixed[1]);
  int64_t block = 0;
  for (int64_t j = 0; j < k; ++j) {
    std::memcpy(pack + block, b[j], counts[j] * eb);
    block += counts[j] * eb;
  }
  MPI_Comm c = comm(ctx, i[A::all_gather_group::axis], "all_gather_group",
                    block);
  ringAllGather(pack, gathered, block, c);
  int size;
  MPI_Comm_size(c, &size);
  for (int p = 0; p < size; ++p) {
    int64_t offset = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t bytes = counts[j] * eb;
      std::memcpy(static_cast<char *>(b[k + j]) + p * bytes,
                  gathered + p * block + offset, bytes);
      offset += bytes;
    }
  }
  launched(ctx, stream);
}

// full[N*bytes] -> chunk[bytes], block rank % N of full
SHARDC_KERNEL(reshard_chunk) {
  // This rank's chunk (its index on the axis modulo the group size) of a
  // gathered parameter.
  int rank;
  // No communication: the rank only.
  MPI_Comm_rank(static_cast<Context *>(ctx)->mesh->axis(
                    i[A::reshard_chunk::axis]),
                &rank);
  int64_t bytes = i[A::reshard_chunk::bytes];
  std::memcpy(b[1],
              static_cast<const char *>(b[0]) +
                  (rank % i[A::reshard_chunk::N]) * bytes,
              bytes);
  launched(ctx, stream);
}

// chunk[n] -> full[N*n], within this rank's N consecutive ranks
SHARDC_KERNEL(all_gather_subgroup) {
  // The ring within this rank's group of consecutive ranks.
  int64_t n = i[A::all_gather_subgroup::n] *
              elementBytes(i[A::all_gather_subgroup::dtype], true);
  shardc::runtime::watchdog::enter("all_gather_subgroup", n);
  MPI_Comm group = static_cast<Context *>(ctx)->mesh->subgroup(
      i[A::all_gather_subgroup::axis], i[A::all_gather_subgroup::N]);
  ringAllGather(static_cast<const char *>(b[0]), static_cast<char *>(b[1]),
                i[A::all_gather_subgroup::n] *
                    elementBytes(i[A::all_gather_subgroup::dtype], true),
                group);
  launched(ctx, stream);
}

// in[P*n] -> out[n], the sum over ranks of block `rank`; tmp[n] scratch
SHARDC_KERNEL(reduce_scatter) {
  // A ring over the axis: P - 1 exchanges of one block, partial sums
  // alternating between `out` and the planned `scratch` block, so that no
  // memory outside the plan is needed (and the summation order is fixed).
  // bf16 blocks are added in f32 and rounded once per step.
  const char *in = static_cast<const char *>(b[0]);
  char *out = static_cast<char *>(b[1]), *scratch = static_cast<char *>(b[2]);
  int64_t n = i[A::reduce_scatter::n], dtype = i[A::reduce_scatter::dtype];
  int64_t bytes = n * elementBytes(dtype);
  MPI_Comm c = comm(ctx, i[A::reduce_scatter::axis], "reduce_scatter", bytes);
  int rank, size;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  const char *send = in + int64_t((rank + size - 1) % size) * bytes;
  for (int k = 0; k + 1 < size; ++k) {
    int block = (rank - k - 2 + 2 * size) % size;
    char *recv = (size - 2 - k) % 2 == 0 ? out : scratch;
    check(MPI_Sendrecv(send, int(bytes), MPI_BYTE, right, k, recv, int(bytes),
                       MPI_BYTE, left, k, c, MPI_STATUS_IGNORE),
          "MPI_Sendrecv");
    const char *mine = in + int64_t(block) * bytes;
    if (dtype == A::kF32) {
      float *r = reinterpret_cast<float *>(recv);
      const float *m = reinterpret_cast<const float *>(mine);
      for (int64_t j = 0; j < n; ++j)
        r[j] += m[j];
    } else {
      uint16_t *r = reinterpret_cast<uint16_t *>(recv);
      const uint16_t *m = reinterpret_cast<const uint16_t *>(mine);
      for (int64_t j = 0; j < n; ++j)
        r[j] = floatToBf16(bf16ToFloat(r[j]) + bf16ToFloat(m[j]));
    }
    send = recv;
  }
  if (size == 1)
    std::memcpy(out, in, bytes);
  launched(ctx, stream);
}

// in[n] -> out[n], the sum over ranks (in place if in == out)
SHARDC_KERNEL(all_reduce) {
  if (i[A::all_reduce::dtype] != A::kF32)
    fatal("all_reduce supports f32 data only");
  const void *in = b[0] == b[1] ? MPI_IN_PLACE : b[0];
  check(MPI_Allreduce(in, b[1], int(i[A::all_reduce::n]), MPI_FLOAT, MPI_SUM,
                      comm(ctx, i[A::all_reduce::axis], "all_reduce",
                           4 * i[A::all_reduce::n])),
        "MPI_Allreduce");
  launched(ctx, stream);
}
