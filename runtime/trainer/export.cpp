//===- export.cpp - the trained weights out: safetensors, HF, ONNX --------===//
#include "runtime/formats/checkpoint_io.h"
#include "runtime/formats/hf_io.h"
#include "runtime/formats/onnx_export.h"
#include "runtime/trainer/trainer.h"

#include <cstdio>
#include <vector>

using namespace shardc;
using namespace shardc::runtime;

void Trainer::exportModel() {
  char *params = mem_->region(abi::kRegionParams);
  if (!o_.saveWeights.empty()) {
    saveTensors(m_, mesh_, *backend_, o_.saveWeights, params, "");
    if (leader_)
      std::printf("saved weights to %s\n", o_.saveWeights.c_str());
  }
  if (!o_.exportHf.empty()) {
    int64_t files =
        exportHf(m_, mesh_, *backend_, params, o_.exportHf, o_.maxShardBytes);
    if (leader_)
      std::printf("exported the trained model to %s (%lld safetensors "
                  "file%s)\n",
                  o_.exportHf.c_str(), (long long)files, files == 1 ? "" : "s");
  }
  if (o_.exportOnnx.empty())
    return;
  std::vector<std::vector<float>> storage;
  std::vector<NamedTensor> tensors =
      gatherTensors(m_, mesh_, *backend_, params, "", storage);
  if (!leader_)
    return;
  std::vector<ExportTensor> weights;
  for (const NamedTensor &t : tensors)
    weights.push_back({t.name, t.shape, t.data});
  exportOnnx(besideExecutable(m_.graphFile), o_.exportOnnx, weights,
             o_.exportExternal);
  std::printf("exported the trained model to %s\n", o_.exportOnnx.c_str());
}
