//===- tensor_kernels.cu - CUDA kernels of the runtime ABI ----------------------------===//
#include "runtime/cuda/kernel_util.cuh"

void shardc::runtime::cuda::addTensorKernels(KernelFn *table) {}
