//===- emu.h - the emulated CUDA device's internals ---------------*- C++ -*-===//
//
// Shared by the parts of the emulated device (no kernel source includes
// this): the sticky error, the streams' deferred work, and the grid runner.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_EMU_EMU_H
#define SHARDC_RUNTIME_CUDA_EMU_EMU_H

#include <cuda_runtime.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace shardc::emu {

/// Prints `message` (one line, "cuda-emulation: ...") and records `error`
/// as the last error, returned by the next cudaGetLastError; a sticky
/// error (a kernel fault) is returned by every call after it, as a GPU's
/// context is lost.
cudaError_t report(cudaError_t error, const std::string &message,
                   bool sticky = false);
/// The sticky error, or cudaSuccess.
cudaError_t stickyError();

/// Work on `stream`, run in stream order when the host waits for it (a
/// synchronization, a copy to pageable memory) or, on the legacy default
/// stream, at once after every other stream's work. While the stream is
/// captured, the work goes into the graph instead.
cudaError_t enqueue(cudaStream_t stream, const char *what,
                    std::function<void()> work);
/// Runs every stream's pending work.
cudaError_t synchronizeAll(const char *caller);

/// Enqueues a kernel launch (device.h's launch calls it).
void launchKernel(const char *kernel, const void *entry, dim3 grid,
                  dim3 block, size_t smem, cudaStream_t stream,
                  std::function<void()> body);

/// Runs every block of a launch now (called by the launch's work).
/// A fault inside (a divergent barrier, dynamic shared memory beyond the
/// launch's) is reported sticky, naming the kernel.
void runGrid(const char *kernel, dim3 grid, dim3 block, size_t sharedBytes,
             const std::function<void()> &body);

/// A fault inside a kernel: unwinds the faulting thread's fiber.
struct KernelFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Whether [p, p + bytes) lies in one allocation of cudaMalloc or
/// cudaMallocHost.
bool isDeviceMemory(const void *p);
bool isPinnedMemory(const void *p);

/// Sets the order in which ready streams run, as SHARDC_EMU_STREAM_ORDER
/// does (last, first or seed:N); for tests. False if `order` is none.
bool setStreamOrder(const std::string &order);

/// The emulated device's streaming multiprocessors: the OpenMP threads
/// that run its blocks.
int multiprocessorCount();

} // namespace shardc::emu

#endif // SHARDC_RUNTIME_CUDA_EMU_EMU_H
