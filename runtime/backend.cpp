//===- backend.cpp - the backend a program was compiled for ---------------===//
//
// Each backend is linked only into the executables of its target and found
// through its weak factory, so that an executable holds no other backend
// (a one-rank CUDA executable no CPU collectives, and so no MPI).
//
//===----------------------------------------------------------------------===//
#include "runtime/backend.h"

#include <stdexcept>

using namespace shardc::runtime;

void Backend::setAllowTf32(bool on) {
  if (on)
    throw std::runtime_error(std::string("the program allows TF32 GEMMs "
                                         "(--allow-tf32), which the ") +
                             name() + " backend does not have");
}

std::unique_ptr<Backend> shardc::runtime::makeBackend(const std::string &target,
                                                      const Mesh *mesh,
                                                      int64_t constantsBytes) {
  if (target.empty() || target == "cpu") {
    if (!shardc_make_cpu_backend)
      throw std::runtime_error("the program was compiled for the cpu "
                               "target, but this executable has no CPU "
                               "backend linked in");
    return std::unique_ptr<Backend>(shardc_make_cpu_backend(mesh));
  }
  if (target == "cuda") {
    if (!shardc_make_cuda_backend)
      throw std::runtime_error("the program was compiled for the cuda "
                               "target, but this executable has no CUDA "
                               "runtime linked in");
    return std::unique_ptr<Backend>(shardc_make_cuda_backend(mesh, constantsBytes));
  }
  throw std::runtime_error("the program was compiled for target '" + target +
                           "', which this runtime does not know");
}
