//===- checkpoint.cpp - fuzz target: resuming from a checkpoint ------------===//
//
// Bytes -> a checkpoint directory on disk -> findCheckpoint, then
// Checkpointer::load, as `--resume` runs them (runtime/trainer/resume.cpp):
// the metadata is checked against the compiled program, the shard files
// that hold this rank's rows are opened, size-checked, read by byte range
// and hashed chunk by chunk into the backend's regions.
//
// The compiled program is the micro GPT-2 of checkpoint-model/config.json,
// compiled for a mesh of 1, 2 or 3 ranks: its manifests,
// checkpoint-model/mesh-N.json (tools/fuzz/make_seeds.py writes them with
// the seeds, which are checkpoints its trainers saved on those meshes).
// The backend is host memory: a load's copies land in regions the size the
// manifest gives, so AddressSanitizer sees any write past them.
//
// The input (FuzzInput.h): mode % 3 picks the mesh (1, 2 or 3 ranks) and
// mode / 3 this rank on it (modulo its ranks), so a checkpoint written on
// one mesh is resharded onto another. Part 0 is DIR/step-00000002/
// metadata.json; part 1, when there, is DIR/latest; parts 2... are that
// step's shard files shard-0000K-of-0000N.safetensors, N of them (at most
// 3).
//
// A refused checkpoint is a std::runtime_error naming the file: expected
// (SHARDC_FUZZ_VERBOSE=1 prints it). Any other exception, a crash, a
// sanitizer report or more memory than libFuzzer's -rss_limit_mb is a
// finding.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "runtime/formats/checkpoint.h"
#include "runtime/formats/checkpoint_format.h"
#include "runtime/formats/files.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

using namespace shardc;
using namespace shardc::runtime;

// checkpoint.cpp hashes the program's manifest for a save's program_hash;
// a load never reads it.
extern "C" const char shardc_manifest[] = "";

namespace {

constexpr int kMeshes = 3;
constexpr int kMaxShards = 3;
constexpr const char *kStep = "step-00000002";

/// A backend of host memory that only copies (a load runs no program).
class HostBackend final : public Backend {
public:
  const char *name() const override { return "fuzz-host"; }
  char *allocate(int64_t bytes, const char *, bool) override {
    blocks_.push_back(std::make_unique<char[]>(size_t(bytes)));
    return blocks_.back().get();
  }
  std::string gemmLibrary() const override { return "none"; }
  bool hostMemory() const override { return true; }
  void copyToDevice(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, size_t(bytes));
  }
  void copyToHost(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, size_t(bytes));
  }
  void run(const int64_t *, void *const *) override {
    throw std::logic_error("the fuzz backend runs no program");
  }
  void setProfiling(bool) override {}
  void printProfile() const override {}
  void setTrace(Trace *) override {}

private:
  std::vector<std::unique_ptr<char[]>> blocks_;
};

/// The micro GPT-2's manifest compiled for a mesh of `ranks` ranks.
const Manifest &manifestFor(int ranks) {
  static const std::vector<Manifest> manifests = [] {
    std::vector<Manifest> out;
    for (int n = 1; n <= kMeshes; ++n)
      out.push_back(Manifest::parse(
          readTextFile(std::string(SHARDC_FUZZ_CHECKPOINT_MODEL) + "/mesh-" +
                       std::to_string(n) + ".json")
              .c_str()));
    return out;
  }();
  return manifests[size_t(ranks - 1)];
}

/// Writes the input's checkpoint under DIR (the scratch directory): the
/// step's metadata and shards, and `latest` when the input has one.
std::string writeCheckpoint(const fuzz::FuzzInput &in) {
  const std::string dir = fuzz::scratchDir() + "/ck";
  const std::string step = std::string("ck/") + kStep;
  static const bool made = [&] {
    makeDirectories(fuzz::scratchDir() + "/" + step);
    return true;
  }();
  (void)made;
  fuzz::writePart(step + "/metadata.json", in.parts[0]);
  if (in.parts.size() > 1)
    fuzz::writePart("ck/latest", in.parts[1]);
  else
    fuzz::removePart("ck/latest");
  int64_t shards =
      std::min<int64_t>(kMaxShards, std::max<int64_t>(0, int64_t(in.parts.size()) - 2));
  for (int64_t n = 1; n <= kMaxShards; ++n)
    for (int64_t k = 0; k < n; ++k) {
      std::string name =
          step + "/" + checkpoint_format::shardFileName(k, n);
      if (n == shards)
        fuzz::writePart(name, in.parts[size_t(2 + k)]);
      else
        fuzz::removePart(name);
    }
  return dir;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz::FuzzInput in = fuzz::splitInput(data, size);
  std::string dir = writeCheckpoint(in);
  int ranks = 1 + in.mode % kMeshes;
  const Manifest &m = manifestFor(ranks);
  Mesh mesh;
  mesh.world = ranks;
  mesh.shards = ranks;
  mesh.rank = (in.mode / kMeshes) % ranks;
  HostBackend backend;
  void *regions[abi::kNumRegions] = {};
  regions[abi::kRegionParams] = backend.allocate(m.paramBytes, "params", true);
  regions[abi::kRegionState] = backend.allocate(m.stateBytes, "state", true);
  Options o;
  try {
    std::string found = findCheckpoint(dir);
    if (found.empty())
      return 0;
    Checkpointer checkpointer(m, mesh, backend, regions);
    checkpointer.load(found, o);
  } catch (const std::runtime_error &e) {
    if (std::getenv("SHARDC_FUZZ_VERBOSE"))
      std::fprintf(stderr, "refused: %s\n", e.what());
  }
  return 0;
}
