//===- Report.cpp - per-rank memory and communication report --------------===//
#include "compiler/Report.h"

#include "dialects/rt/RtDialect.h"
#include "passes/Passes.h"

#include "llvm/Support/Format.h"

#include <map>

using namespace mlir;

namespace {

int64_t intOf(DictionaryAttr d, StringRef key) {
  auto v = d ? d.getAs<IntegerAttr>(key) : IntegerAttr();
  return v ? v.getInt() : 0;
}

/// Sums the bytes of the `state` slots whose name starts with a prefix.
int64_t stateBytes(DictionaryAttr manifest, ArrayRef<StringRef> prefixes) {
  int64_t total = 0;
  auto slots = manifest.getAs<ArrayAttr>("state");
  for (Attribute a : slots ? slots : ArrayAttr()) {
    auto slot = cast<DictionaryAttr>(a);
    StringRef name = slot.getAs<StringAttr>("name").getValue();
    for (StringRef p : prefixes)
      if (name.starts_with(p))
        total += shardc::alignTo(intOf(slot, "bytes"));
  }
  return total;
}

std::string mib(int64_t bytes) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%10.3f MiB", double(bytes) / (1024.0 * 1024.0))
     << llvm::format("  %12lld bytes", (long long)bytes);
  return s;
}

} // namespace

void shardc::printReport(ModuleOp module, llvm::raw_ostream &os) {
  auto manifest = module->getAttrOfType<DictionaryAttr>(attrs::kManifest);
  if (!manifest) {
    os << "shardc report: no manifest (the module is not lowered to rt)\n";
    return;
  }
  int64_t replicas = 1, shards = 1;
  if (auto mesh = manifest.getAs<DenseI64ArrayAttr>("mesh")) {
    replicas = mesh[0];
    shards = mesh[1];
  }
  int64_t params = intOf(manifest, "param_bytes");
  int64_t grads = stateBytes(manifest, {abi::kStateGrad});
  int64_t optimizer = stateBytes(
      manifest, {abi::kStateExpAvg, abi::kStateExpAvgSq, abi::kStateMomentum});
  int64_t io = intOf(manifest, "io_bytes");

  int64_t arena = 0, microArena = 0, gathered = 0;
  // (kind, axis) -> (count, bytes), per entry point.
  std::map<std::string, std::map<std::pair<std::string, int64_t>,
                                 std::pair<int64_t, int64_t>>> traffic;
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto bytes = fn->getAttrOfType<IntegerAttr>(attrs::kArenaBytes);
    int64_t a = bytes ? bytes.getInt() : 0;
    arena = std::max(arena, a);
    StringRef entry = fn.getName();
    if (entry.ends_with("micro_step")) {
      microArena = a;
      if (auto g = fn->getAttrOfType<IntegerAttr>(attrs::kPeakGatheredBytes))
        gathered = g.getInt();
    }
    // Bytes of the full buffer each rank takes part in: the gathered
    // result, the reduced input, the all-reduced buffer.
    auto count = [&](StringRef kind, int64_t axis, int64_t bytes) {
      auto &cell = traffic[entry.str()][{kind.str(), axis}];
      cell.first += 1;
      cell.second += bytes;
    };
    auto ranksOn = [&](int64_t axis) {
      return replicas > 1 && axis == 0 ? replicas : shards;
    };
    auto bytesOf = [](Type dtype) {
      return abi::dtypeBytes(rt::dtypeCode(dtype));
    };
    fn.walk([&](Operation *op) {
      if (auto g = dyn_cast<rt::AllGatherOp>(op)) {
        int64_t elements = 0;
        for (int64_t n : g.getCounts())
          elements += n;
        int64_t ranks = g.getSubgroup() ? g.getSubgroup() : ranksOn(g.getAxis());
        count("all_gather", g.getAxis(), elements * bytesOf(g.getDtype()) * ranks);
      } else if (auto r = dyn_cast<rt::ReduceScatterOp>(op)) {
        count("reduce_scatter", r.getAxis(),
              r.getCount() * bytesOf(r.getDtype()) * ranksOn(r.getAxis()));
      } else if (auto r = dyn_cast<rt::AllReduceOp>(op)) {
        count("all_reduce", r.getAxis(), r.getCount() * bytesOf(r.getDtype()));
      }
    });
  }

  os << "shardc report: mesh " << replicas << "x" << shards << " (replicate "
     << replicas << ", shard " << shards << "), per rank\n";
  os << "  parameters (sharded)     " << mib(params) << "\n";
  os << "  gradients (sharded)      " << mib(grads) << "\n";
  os << "  optimizer state          " << mib(optimizer) << "\n";
  os << "  peak gathered parameters " << mib(gathered)
     << "  (in the param dtype, live at once)\n";
  os << "  activations              " << mib(microArena - gathered)
     << "  (micro-step arena less the gathered parameters)\n";
  os << "  inputs and outputs       " << mib(io) << "\n";
  int64_t peak = params + intOf(manifest, "state_bytes") + io + arena;
  os << "  planned peak             " << mib(peak) << "\n";
  os << "collectives (bytes of the full buffer each rank takes part in):\n";
  if (traffic.empty())
    os << "  none\n";
  for (const auto &[entry, kinds] : traffic)
    for (const auto &[key, cell] : kinds) {
      const char *axisName =
          replicas > 1 && key.second == 0 ? "replicate" : "shard";
      os << "  " << entry << ": " << key.first << " on the " << axisName
         << " axis: " << cell.first << " calls, " << mib(cell.second) << "\n";
    }
}
