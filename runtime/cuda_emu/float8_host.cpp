// The CUDA backend's runtime/cuda/float8.cu, compiled as host C++ for the
// emulated device (runtime/cuda_emu/device.h gives it CUDA's execution
// model). The source is the GPU's, unchanged.
#include "runtime/cuda/float8.cu"
