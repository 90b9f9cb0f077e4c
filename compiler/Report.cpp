//===- Report.cpp - per-rank memory and communication report --------------===//
#include "compiler/Report.h"

#include "dialects/rt/RtDialect.h"
#include "passes/Passes.h"
#include "passes/RtFlops.h"

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
  if (!slots)
    return 0;
  for (Attribute a : slots) {
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

  int64_t arena = 0, microArena = 0, gathered = 0, hostArena = 0;
  int64_t microFlops = 0;
  // (kind, axis) -> (count, bytes), per entry point.
  std::map<std::string, std::map<std::pair<std::string, int64_t>,
                                 std::pair<int64_t, int64_t>>> traffic;
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto bytes = fn->getAttrOfType<IntegerAttr>(attrs::kArenaBytes);
    int64_t a = bytes ? bytes.getInt() : 0;
    // An entry run on the host (--offload=cpu) has a host arena.
    (fn->hasAttr(attrs::kOnHost) ? hostArena : arena) =
        std::max(fn->hasAttr(attrs::kOnHost) ? hostArena : arena, a);
    StringRef entry = fn.getName();
    if (entry.ends_with("micro_step")) {
      microArena = a;
      microFlops = entryFlops(fn);
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

  bool offload = manifest.getAs<StringAttr>("offload") &&
                 manifest.getAs<StringAttr>("offload").getValue() ==
                     abi::kOffloadCpu;
  int64_t state = intOf(manifest, "state_bytes");
  os << "shardc report: mesh " << replicas << "x" << shards << " (replicate "
     << replicas << ", shard " << shards << "), per rank"
     << (offload ? ", --offload=cpu" : "") << "\n";
  // Without offload every figure is the device's (its device and host
  // parts summed); with it, the device's then the pinned host memory's.
  auto row = [&](StringRef name, int64_t device, int64_t host,
                 StringRef note = "") {
    os << "  " << name << mib(offload ? device : device + host);
    if (offload)
      os << "  | host " << mib(host);
    if (!note.empty())
      os << "  " << note;
    os << "\n";
  };
  // What --offload=cpu moves to the host (on the device without it).
  int64_t atHost = offload ? params + state + io : 0;
  auto moved = [&](StringRef name, int64_t bytes) {
    row(name, offload ? 0 : bytes, offload ? bytes : 0);
  };
  moved("parameters (sharded)     ", params);
  moved("gradients (sharded)      ", grads);
  moved("optimizer state          ", optimizer);
  row("peak gathered parameters ", gathered, 0,
      "(in the param dtype, live at once)");
  row("activations              ", microArena - gathered, 0,
      "(micro-step arena less the gathered parameters)");
  moved("inputs and outputs       ", io);
  if (offload)
    row("host optimizer arena     ", 0, hostArena,
        "(the optimizer step runs on the host)");
  row("planned peak             ", params + state + io - atHost + arena,
      atHost + hostArena);
  os << "  FLOPs per micro-step      " << microFlops
     << "  (GEMMs and attention, per rank)\n";
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
