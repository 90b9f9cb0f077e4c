//===- collectives.cpp - CPU collectives through MPI ----------------------===//
//
// Arguments as listed in runtime/kernels.h: f32 buffers, element counts,
// the grid axis whose communicator carries the collective.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels.h"
#include "runtime/mesh.h"
#include "runtime/runtime.h"

#include <cstring>

using shardc::runtime::Context;
using shardc::runtime::fatal;

namespace {

MPI_Comm comm(void *ctx, int64_t axis) {
  auto *c = static_cast<Context *>(ctx);
  if (!c || !c->mesh)
    fatal("a collective ran without a device mesh");
  return c->mesh->axis(axis);
}

void check(int rc, const char *what) {
  if (rc != MPI_SUCCESS)
    fatal("%s failed with MPI error %d", what, rc);
}

void launched(void *ctx, int64_t stream, const char *kernel) {
  static_cast<Context *>(ctx)->countLaunch(stream, kernel);
}

} // namespace

SHARDC_KERNEL(all_gather) {
  // A ring over the axis writing straight into `out` (no memory outside the
  // plan): own block first, then P - 1 exchanges of one block.
  const float *in = static_cast<const float *>(b[0]);
  float *out = static_cast<float *>(b[1]);
  int64_t n = i[0];
  MPI_Comm c = comm(ctx, i[1]);
  int rank, size;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  std::memcpy(out + int64_t(rank) * n, in, n * sizeof(float));
  for (int k = 0; k + 1 < size; ++k) {
    int sendBlock = (rank - k + size) % size;
    int recvBlock = (rank - k - 1 + size) % size;
    check(MPI_Sendrecv(out + int64_t(sendBlock) * n, int(n), MPI_FLOAT, right, k,
                       out + int64_t(recvBlock) * n, int(n), MPI_FLOAT, left, k,
                       c, MPI_STATUS_IGNORE),
          "MPI_Sendrecv");
  }
  launched(ctx, stream, "all_gather");
}

SHARDC_KERNEL(reduce_scatter) {
  // A ring over the axis: P - 1 exchanges of one block, partial sums
  // alternating between `out` and the planned `scratch` block, so that no
  // memory outside the plan is needed (and the summation order is fixed).
  const float *in = static_cast<const float *>(b[0]);
  float *out = static_cast<float *>(b[1]), *scratch = static_cast<float *>(b[2]);
  int64_t n = i[0];
  MPI_Comm c = comm(ctx, i[1]);
  int rank, size;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  const float *send = in + int64_t((rank + size - 1) % size) * n;
  for (int k = 0; k + 1 < size; ++k) {
    int block = (rank - k - 2 + 2 * size) % size;
    float *recv = (size - 2 - k) % 2 == 0 ? out : scratch;
    check(MPI_Sendrecv(send, int(n), MPI_FLOAT, right, k, recv, int(n),
                       MPI_FLOAT, left, k, c, MPI_STATUS_IGNORE),
          "MPI_Sendrecv");
    const float *mine = in + int64_t(block) * n;
    for (int64_t j = 0; j < n; ++j)
      recv[j] += mine[j];
    send = recv;
  }
  if (size == 1)
    std::memcpy(out, in, n * sizeof(float));
  launched(ctx, stream, "reduce_scatter");
}

SHARDC_KERNEL(all_reduce) {
  const void *in = b[0] == b[1] ? MPI_IN_PLACE : b[0];
  check(MPI_Allreduce(in, b[1], int(i[0]), MPI_FLOAT, MPI_SUM, comm(ctx, i[1])),
        "MPI_Allreduce");
  launched(ctx, stream, "all_reduce");
}
