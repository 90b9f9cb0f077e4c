//===- backend.cpp - the CPU backend: host memory, in-order streams --------===//
#include "runtime/backend.h"
#include "runtime/cpu/gemm.h"
#include "runtime/kernels.h"
#include "runtime/program/program.h"
#include "runtime/runtime.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

using namespace shardc;
using namespace shardc::runtime;

namespace {

/// Kernel functions by abi::KernelId.
const KernelFn kCpuKernels[] = {
#define SHARDC_ABI_KERNEL(name, ...) &shardc_k_##name,
#include "runtime/abi/kernels.def"
};
static_assert(sizeof(kCpuKernels) / sizeof(kCpuKernels[0]) ==
              size_t(abi::kNumKernels));

class CpuBackend : public Backend {
public:
  explicit CpuBackend(const Mesh *mesh) { ctx.mesh = mesh; }
  ~CpuBackend() override {
    for (char *p : regions)
      std::free(p);
  }

  const char *name() const override { return "cpu"; }

  char *allocate(int64_t bytes, const char *what, bool zero) override {
    size_t size = size_t(abi::alignTo(bytes < 1 ? 1 : bytes));
    char *p = static_cast<char *>(std::aligned_alloc(abi::kBufferAlignment, size));
    if (!p)
      throw std::runtime_error(std::string("cannot allocate ") +
                               std::to_string(bytes) + " bytes for " + what);
    if (zero)
      std::memset(p, 0, size);
    regions.push_back(p);
    return p;
  }

  bool hostMemory() const override { return true; }
  std::string gemmLibrary() const override { return cpu::gemmLibrary(); }

  void copyToDevice(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, size_t(bytes));
  }
  void copyToHost(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, size_t(bytes));
  }

  void run(const int64_t *program,
           void *const regionBases[abi::kNumRegions]) override {
    ctx.startProfileInterval();
    ProgramTarget target{kCpuKernels, &ctx, &shardc_event_record,
                         &shardc_event_wait, trace};
    runProgram(program, regionBases, target);
    ctx.resetEvents();
  }

  void setProfiling(bool on) override { ctx.profiling = on; }
  void printProfile() const override { ctx.printProfile(); }
  void setTrace(Trace *t) override { trace = t; }

private:
  Context ctx;
  std::vector<char *> regions;
  Trace *trace = nullptr;
};

} // namespace

std::unique_ptr<Backend> shardc::runtime::makeCpuBackend(const Mesh *mesh) {
  return std::make_unique<CpuBackend>(mesh);
}

extern "C" Backend *shardc_make_cpu_backend(const Mesh *mesh) {
  return new CpuBackend(mesh);
}
