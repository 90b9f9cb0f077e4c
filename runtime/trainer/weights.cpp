//===- weights.cpp - the trainer's initial weights ------------------------===//
#include "runtime/formats/checkpoint_io.h"
#include "runtime/trainer/trainer.h"

#include <vector>

using namespace shardc;
using namespace shardc::runtime;

void Trainer::initialWeights() {
  char *params = mem_->region(abi::kRegionParams);
  doing = o_.initFrom.empty() ? std::string("initializing the parameters")
                              : "reading --init-from " + o_.initFrom;
  if (!o_.initFrom.empty()) {
    loadParameters(m_, o_.initFrom, *backend_, params, mesh_.shardIndex(),
                   o_.allowNonfiniteInit, mesh_.tpIndex());
  } else if (!m_.initFile.empty()) {
    // An ONNX model's initializers, written beside the executable: this
    // rank's part of each tp-split one.
    loadParameters(m_, besideExecutable(m_.initFile), *backend_, params,
                   mesh_.shardIndex(), o_.allowNonfiniteInit, mesh_.tpIndex());
  } else if (backend_->hostMemory()) {
    initParameters(m_, o_.seed, params, mesh_.shardIndex(), mesh_.tpIndex());
  } else {
    std::vector<char> host(size_t(m_.paramBytes), 0);
    initParameters(m_, o_.seed, host.data(), mesh_.shardIndex(),
                   mesh_.tpIndex());
    backend_->copyToDevice(params, host.data(), m_.paramBytes);
  }
}
