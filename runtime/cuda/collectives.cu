//===- collectives.cu - the collectives of one rank on the CUDA backend ---===//
//
// The collectives of the runtime ABI over an axis of one rank: every one is
// a device copy on the schedule's stream (a gather of one block, a sum over
// one rank). This is what `--param-dtype bf16` and the other FSDP policies
// need on one GPU. A mesh of several ranks needs NCCL communicators, which
// this backend does not make yet: such a program is refused, naming the
// collective.
//
//===----------------------------------------------------------------------===//
#include "runtime/abi/abi.h"
#include "runtime/cuda/kernel_util.cuh"
#include "runtime/mesh.h"

namespace A = shardc::abi;
using namespace shardc::runtime;
using namespace shardc::runtime::cuda;

namespace {

/// Bytes of `n` elements of dtype `code` (f32, bf16).
int64_t bytesOf(int64_t n, int64_t code, const char *what) {
  int64_t eb = A::dtypeBytes(code);
  if (code != A::kF32 && code != A::kBF16)
    fatal("%s: dtype %s is not supported (f32, bf16)", what,
          A::dtypeName(code));
  return n * eb;
}

/// The stream of a collective of one rank; refuses a mesh of several.
cudaStream_t oneRank(void *ctx, int64_t stream, const char *what) {
  auto &c = *static_cast<cuda::Context *>(ctx);
  if (c.mesh && c.mesh->world > 1)
    fatal("%s over %d ranks: the CUDA backend has no NCCL communicators "
          "yet; it runs a mesh of one rank",
          what, c.mesh->world);
  return c.stream(stream);
}

void copy(void *dst, const void *src, int64_t bytes, cudaStream_t s) {
  if (dst != src && bytes > 0)
    CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes),
                               cudaMemcpyDeviceToDevice, s));
}

} // namespace

// in[n] -> out[n * 1]
SHARDC_CUDA_KERNEL(all_gather) {
  cudaStream_t s = oneRank(ctx, stream, "all_gather");
  copy(b[1], b[0],
       bytesOf(i[A::all_gather::n], i[A::all_gather::dtype], "all_gather"), s);
}

// in_1..in_k -> out_1..out_k (pack and gathered unused on one rank)
SHARDC_CUDA_KERNEL(all_gather_group) {
  cudaStream_t s = oneRank(ctx, stream, "all_gather_group");
  int64_t k = i[A::all_gather_group::k];
  const int64_t *counts = i + A::all_gather_group::kNumInts;
  for (int64_t j = 0; j < k; ++j)
    copy(b[k + j], b[j],
         bytesOf(counts[j], i[A::all_gather_group::dtype], "all_gather_group"),
         s);
}

// in[n * 1] -> out[n], the sum over one rank
SHARDC_CUDA_KERNEL(reduce_scatter) {
  cudaStream_t s = oneRank(ctx, stream, "reduce_scatter");
  copy(b[1], b[0],
       bytesOf(i[A::reduce_scatter::n], i[A::reduce_scatter::dtype],
               "reduce_scatter"),
       s);
}

// in[n] -> out[n], the sum over one rank
SHARDC_CUDA_KERNEL(all_reduce) {
  cudaStream_t s = oneRank(ctx, stream, "all_reduce");
  copy(b[1], b[0],
       bytesOf(i[A::all_reduce::n], i[A::all_reduce::dtype], "all_reduce"), s);
}

// full[N * bytes] -> chunk[bytes]: block rank % N = 0
SHARDC_CUDA_KERNEL(reshard_chunk) {
  cudaStream_t s = oneRank(ctx, stream, "reshard_chunk");
  copy(b[1], b[0], i[A::reshard_chunk::bytes], s);
}

// chunk[n] -> full[n * N] within N = 1 rank
SHARDC_CUDA_KERNEL(all_gather_subgroup) {
  cudaStream_t s = oneRank(ctx, stream, "all_gather_subgroup");
  if (i[A::all_gather_subgroup::N] != 1)
    fatal("all_gather_subgroup within %lld ranks on a mesh of one",
          (long long)i[A::all_gather_subgroup::N]);
  copy(b[1], b[0],
       bytesOf(i[A::all_gather_subgroup::n], i[A::all_gather_subgroup::dtype],
               "all_gather_subgroup"),
       s);
}

void shardc::runtime::cuda::addCollectives(KernelFn *table) {
  auto set = [&](A::KernelId id, KernelFn fn) { table[int64_t(id)] = fn; };
  set(A::KernelId::all_gather, &shardc_cuda_k_all_gather);
  set(A::KernelId::all_gather_group, &shardc_cuda_k_all_gather_group);
  set(A::KernelId::reduce_scatter, &shardc_cuda_k_reduce_scatter);
  set(A::KernelId::all_reduce, &shardc_cuda_k_all_reduce);
  set(A::KernelId::reshard_chunk, &shardc_cuda_k_reshard_chunk);
  set(A::KernelId::all_gather_subgroup, &shardc_cuda_k_all_gather_subgroup);
}
