//===- main.cpp - the trainer's main: a run in named phases ---------------===//
//
// Linked with a compiled model object into the executable shardc produces.
// A run is the sequence of phases below (trainer.h says where each lives);
// an --infer build runs its graph once (infer.cpp). The compiled entry
// points are launch tables that the backend walks; the trainer reaches
// memory only through the backend (runtime/backend.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/mesh.h"
#include "runtime/runtime.h"
#include "runtime/text.h"
#include "runtime/trainer/flags.h"
#include "runtime/program/model.h"
#include "runtime/trainer/trainer.h"

#include <cstdio>
#include <string>

using namespace shardc;
using namespace shardc::runtime;

namespace {

int run(const Manifest &m, const Mesh &mesh, int argc, char **argv) {
  Trainer trainer(m, mesh, argc, argv);
  trainer.initialWeights();
  trainer.resume();
  trainer.refreshWorkingCopies();
  trainer.openData();
  trainer.openLog();
  trainer.printBanner();
  trainer.prepareLaunches();
  trainer.openValidation();
  trainer.train();
  trainer.finish();
  trainer.exportModel();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Manifest m;
  try {
    m = Manifest::parse(shardc_manifest);
  } catch (...) {
    std::fprintf(stderr, "error: %s\n",
                 describeCurrentException("reading the compiled manifest").c_str());
    return 1;
  }
  if (shardc_program_infer) {
    try {
      return runInfer(m, argc, argv);
    } catch (...) {
      std::fprintf(stderr, "error: %s\n",
                   describeCurrentException(doing).c_str());
      return 1;
    }
  }
  // --help needs no launcher: answered before MPI starts.
  if (wantsHelp(argc, argv)) {
    printUsage(argv[0], m);
    return 0;
  }
  Mesh mesh = Mesh::init(&argc, &argv, m.replicas, m.shards, m.tp);
  try {
    int rc = run(m, mesh, argc, argv);
    Mesh::finalize();
    return rc;
  } catch (...) {
    std::fflush(stdout);
    // Each rank reports its own error, with its rank on a mesh; then the
    // others are aborted so that no rank waits in a collective.
    std::string message = describeCurrentException(doing);
    if (mesh.world == 1)
      std::fprintf(stderr, "error: %s\n", message.c_str());
    else
      std::fprintf(stderr, "error: rank %d: %s\n", mesh.rank, message.c_str());
    std::fflush(stderr);
    if (mesh.world > 1)
      mesh.abort(1);
    Mesh::finalize();
    return 1;
  }
}
