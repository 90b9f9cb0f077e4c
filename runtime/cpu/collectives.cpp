//===- collectives.cpp - CPU collectives through MPI ----------------------===//
//
// Arguments as listed in runtime/kernels.h: f32 buffers, element counts,
// the grid axis whose communicator carries the collective.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels.h"
#include "runtime/mesh.h"
#include "runtime/runtime.h"

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
  check(MPI_Allgather(b[0], int(i[0]), MPI_FLOAT, b[1], int(i[0]), MPI_FLOAT,
                      comm(ctx, i[1])),
        "MPI_Allgather");
  launched(ctx, stream, "all_gather");
}

SHARDC_KERNEL(reduce_scatter) {
  check(MPI_Reduce_scatter_block(b[0], b[1], int(i[0]), MPI_FLOAT, MPI_SUM,
                                 comm(ctx, i[1])),
        "MPI_Reduce_scatter_block");
  launched(ctx, stream, "reduce_scatter");
}

SHARDC_KERNEL(all_reduce) {
  const void *in = b[0] == b[1] ? MPI_IN_PLACE : b[0];
  check(MPI_Allreduce(in, b[1], int(i[0]), MPI_FLOAT, MPI_SUM, comm(ctx, i[1])),
        "MPI_Allreduce");
  launched(ctx, stream, "all_reduce");
}
