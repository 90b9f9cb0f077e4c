//===- Report.cpp - per-rank memory and communication report --------------===//
#include "compiler/Report.h"

#include "dialects/rt/RtDialect.h"
#include "passes/Passes.h"
#include "passes/rt/RtFlops.h"
#include "passes/rt/RtMatch.h"

#include "llvm/Support/Format.h"

#include <algorithm>
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

int64_t shardc::plannedPeakBytes(ModuleOp module) {
  auto manifest = module->getAttrOfType<DictionaryAttr>(attrs::kManifest);
  if (!manifest)
    return 0;
  int64_t arena = 0;
  for (auto fn : module.getOps<func::FuncOp>())
    if (!fn->hasAttr(attrs::kOnHost))
      if (auto bytes = fn->getAttrOfType<IntegerAttr>(attrs::kArenaBytes))
        arena = std::max(arena, bytes.getInt());
  bool offload = manifest.getAs<StringAttr>("offload") &&
                 manifest.getAs<StringAttr>("offload").getValue() ==
                     abi::kOffloadCpu;
  if (offload) // the regions are on the host
    return arena;
  return intOf(manifest, "param_bytes") + intOf(manifest, "state_bytes") +
         intOf(manifest, "io_bytes") + arena;
}

/// The ranks that share the tokens of the token input: under sequence
/// parallelism a rank trains on its 1/tp of each sequence, also where its
/// token input holds the whole sequences (abi::kManifestTpWholeTokens: the
/// vocabulary-parallel embedding and loss read them all).
static double wholeSequenceRanks(DictionaryAttr manifest) {
  auto sizes = manifest.getAs<DenseI64ArrayAttr>("mesh");
  auto whole = manifest.getAs<BoolAttr>(shardc::abi::kManifestTpWholeTokens);
  if (!sizes || !whole || !whole.getValue())
    return 1.0;
  return double(shardc::abi::MeshGrid::of(sizes.asArrayRef()).tp);
}

std::optional<shardc::Prediction> shardc::readPrediction(ModuleOp module,
                                                         int64_t gradAccum) {
  auto machine = module->getAttrOfType<DictionaryAttr>(attrs::kPredictMachine);
  auto manifest = module->getAttrOfType<DictionaryAttr>(attrs::kManifest);
  if (!machine || !manifest)
    return std::nullopt;
  Prediction p;
  auto str = [](DictionaryAttr d, StringRef key) {
    auto v = d.getAs<StringAttr>(key);
    return v ? v.getValue().str() : std::string();
  };
  auto num = [](DictionaryAttr d, StringRef key) {
    auto v = d.getAs<FloatAttr>(key);
    return v ? v.getValueAsDouble() : 0.0;
  };
  p.machine = str(machine, "name");
  p.summary = str(machine, "summary");
  p.dtype = str(machine, "dtype");
  p.peakFlops = num(machine, "peak_flops");
  if (auto budget = machine.getAs<IntegerAttr>("memory_budget"))
    p.memoryBudget = double(budget.getInt());
  std::map<std::string, std::pair<int64_t, double>> costs;
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto d = fn->getAttrOfType<DictionaryAttr>(attrs::kPredict);
    if (!d)
      continue;
    // A step: gradAccum micro-steps, then the optimizer step.
    double times = fn.getName().ends_with("micro_step") ? double(gradAccum)
                   : fn.getName().ends_with("opt_step") ? 1.0
                                                        : 0.0;
    if (times == 0)
      continue;
    p.seconds += times * num(d, "seconds");
    p.compute += times * num(d, "compute");
    p.communication += times * num(d, "communication");
    p.exposed += times * num(d, "exposed");
    if (fn.getName().ends_with("micro_step"))
      p.flops += times * double(entryFlops(fn));
    if (auto list = d.getAs<ArrayAttr>("costs"))
      for (Attribute a : list) {
        auto item = cast<ArrayAttr>(a);
        auto &cell = costs[cast<StringAttr>(item[0]).getValue().str()];
        cell.first += int64_t(times) * cast<IntegerAttr>(item[1]).getInt();
        cell.second += times * cast<FloatAttr>(item[2]).getValueAsDouble();
      }
  }
  for (const auto &[name, cell] : costs)
    p.costs.emplace_back(name, cell.first, cell.second);
  std::sort(p.costs.begin(), p.costs.end(), [](const auto &a, const auto &b) {
    return std::get<2>(a) > std::get<2>(b);
  });
  if (auto io = manifest.getAs<ArrayAttr>("io"))
    for (Attribute a : io) {
      auto slot = cast<DictionaryAttr>(a);
      if (slot.getAs<StringAttr>("name") &&
          slot.getAs<StringAttr>("name").getValue() == "tokens")
        if (auto shape = slot.getAs<ArrayAttr>("shape")) {
          double n = 1;
          for (Attribute d : shape)
            n *= double(cast<IntegerAttr>(d).getInt());
          p.tokens = n * double(gradAccum) / wholeSequenceRanks(manifest);
        }
    }
  return p;
}

void shardc::printPrediction(const Prediction &p, llvm::raw_ostream &os) {
  os << "prediction on " << p.machine << " (" << p.summary << "; GEMMs in "
     << p.dtype << ", peak " << llvm::format("%.1f", p.peakFlops / 1e12)
     << " TFLOP/s):\n";
  os << llvm::format("predicted step time: %.3f ms (compute %.3f ms, "
                     "communication %.3f ms, exposed %.3f ms), %.0f tok/s "
                     "per rank, MFU %.1f%%\n",
                     p.seconds * 1e3, p.compute * 1e3, p.communication * 1e3,
                     p.exposed * 1e3, p.tokensPerSecond(), p.mfu() * 100);
  os << "  costliest (a step, per rank):\n";
  size_t shown = 0;
  for (const auto &[name, calls, seconds] : p.costs) {
    if (shown++ == 8)
      break;
    os << llvm::format("    %-28s %6lld calls %10.3f ms  %5.1f%%\n",
                       name.c_str(), (long long)calls, seconds * 1e3,
                       p.seconds > 0 ? 100 * seconds / p.seconds : 0.0);
  }
}

void shardc::printReport(ModuleOp module, llvm::raw_ostream &os) {
  auto manifest = module->getAttrOfType<DictionaryAttr>(attrs::kManifest);
  if (!manifest) {
    os << "shardc report: no manifest (the module is not lowered to rt)\n";
    return;
  }
  abi::MeshGrid mesh;
  if (auto sizes = manifest.getAs<DenseI64ArrayAttr>("mesh"))
    mesh = abi::MeshGrid::of(sizes.asArrayRef());
  int64_t params = intOf(manifest, "param_bytes");
  int64_t grads = stateBytes(manifest, {abi::kStateGrad});
  int64_t optimizer = stateBytes(
      manifest, {abi::kStateExpAvg, abi::kStateExpAvgSq, abi::kStateMomentum});
  int64_t io = intOf(manifest, "io_bytes");

  int64_t microArena = 0, gathered = 0, hostArena = 0;
  int64_t microFlops = 0;
  // The fused attention's buffers in the micro-step (rt-fused-attention):
  // its largest workspace (one launch's at a time) and the log-sum-exp
  // rows its forwards keep for the backward.
  int64_t attentionWorkspace = 0, attentionStats = 0;
  // Its backward's algorithm (sdpa_grad's deterministic): -1 none, 0
  // non-deterministic, 1 deterministic.
  int64_t attentionDeterministic = -1;
  // --float8: the micro-step's FP8 GEMMs, and the fp8 bytes their casts
  // write.
  int64_t fp8Gemms = 0, fp8Bytes = 0;
  // Launches per entry (kernels and collectives; views, allocations and
  // events launch nothing), and the micro-step's by kernel.
  std::map<std::string, int64_t> launches;
  std::map<std::string, int64_t> microLaunches;
  // (kind, axis) -> (count, bytes), per entry point.
  std::map<std::string, std::map<std::pair<std::string, int64_t>,
                                 std::pair<int64_t, int64_t>>> traffic;
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto bytes = fn->getAttrOfType<IntegerAttr>(attrs::kArenaBytes);
    int64_t a = bytes ? bytes.getInt() : 0;
    // An entry run on the host (--offload=cpu) has a host arena (the
    // device's arenas are plannedPeakBytes's).
    if (fn->hasAttr(attrs::kOnHost))
      hostArena = std::max(hostArena, a);
    StringRef entry = fn.getName();
    if (entry.ends_with("micro_step")) {
      microArena = a;
      microFlops = entryFlops(fn);
      if (auto g = fn->getAttrOfType<IntegerAttr>(attrs::kPeakGatheredBytes))
        gathered = g.getInt();
      fn.walk([&](rt::KernelOp k) {
        if (isKernel(k, abi::KernelId::matmul_fp8))
          ++fp8Gemms;
        ArrayRef<int64_t> i = k.getInts();
        // A layout a cast writes (two with both).
        if (isKernel(k, abi::KernelId::cast_fp8))
          fp8Bytes += i[abi::cast_fp8::R] * i[abi::cast_fp8::C] *
                      (1 + i[abi::cast_fp8::both]);
        // The float8 all-gather's: the shards it casts, the transposes of
        // the gathered weights (the gathered bytes are gathered
        // parameters).
        if (isKernel(k, abi::KernelId::cast_fp8_scaled))
          fp8Bytes += i[abi::cast_fp8_scaled::R] * i[abi::cast_fp8_scaled::C] *
                      (1 + i[abi::cast_fp8_scaled::both]);
        if (isKernel(k, abi::KernelId::transpose_fp8))
          fp8Bytes += i[abi::transpose_fp8::R] * i[abi::transpose_fp8::C];
        bool fwd = isKernel(k, abi::KernelId::sdpa);
        if (!fwd && !isKernel(k, abi::KernelId::sdpa_grad))
          return;
        attentionWorkspace =
            std::max(attentionWorkspace, i[abi::sdpa::ws_bytes]);
        if (fwd)
          attentionStats += i[abi::sdpa::B] * i[abi::sdpa::H] *
                            i[abi::sdpa::T] * int64_t(sizeof(float));
        else
          attentionDeterministic = i[abi::sdpa_grad::deterministic];
      });
    }
    fn.walk([&](Operation *op) {
      if (streamOf(op) < 0)
        return;
      ++launches[entry.str()];
      if (entry.ends_with("micro_step")) {
        auto k = dyn_cast<rt::KernelOp>(op);
        ++microLaunches[k ? k.getName().str()
                          : op->getName().stripDialect().str()];
      }
      // Bytes of the full buffer each rank takes part in: the gathered
      // result, the reduced input, the all-reduced buffer.
      if (std::optional<CollectiveTraffic> c =
              collectiveTraffic(op, mesh)) {
        auto &cell = traffic[entry.str()][{c->kind.str(), c->axis}];
        cell.first += 1;
        cell.second += c->bytes;
      }
    });
  }

  bool offload = manifest.getAs<StringAttr>("offload") &&
                 manifest.getAs<StringAttr>("offload").getValue() ==
                     abi::kOffloadCpu;
  int64_t state = intOf(manifest, "state_bytes");
  os << "shardc report: mesh " << mesh.replicas << "x" << mesh.shards;
  if (mesh.tp > 1)
    os << " --tp " << mesh.tp;
  os << " (replicate " << mesh.replicas << ", shard " << mesh.shards;
  if (mesh.tp > 1)
    os << ", tp " << mesh.tp;
  os << "), per rank"
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
  if (int64_t work = stateBytes(manifest, {abi::kStateWork}))
    moved("bf16 working copy        ", work);
  row("peak gathered parameters ", gathered, 0,
      "(in the param dtype, or fp8 under the float8 all-gather; live at "
      "once)");
  row("activations              ", microArena - gathered, 0,
      "(micro-step arena less the gathered parameters)");
  if (attentionWorkspace) {
    row("  attention workspace    ", attentionWorkspace, 0,
        attentionDeterministic == 0
            ? "(of the activations: cuDNN SDPA, the largest launch's; "
              "non-deterministic backward, --deterministic-attention=false: "
              "no O(seq^2) dP buffer)"
        : attentionDeterministic == 1
            ? "(of the activations: cuDNN SDPA, the largest launch's; "
              "deterministic backward, --deterministic-attention=true: its "
              "O(seq^2) dP buffer)"
            : "(of the activations: cuDNN SDPA, the largest launch's)");
    row("  attention stats        ", attentionStats, 0,
        "(of the activations: log-sum-exp rows kept for backward)");
  }
  moved("inputs and outputs       ", io);
  if (offload)
    row("host optimizer arena     ", 0, hostArena,
        "(the optimizer step runs on the host)");
  row("planned peak             ", plannedPeakBytes(module),
      atHost + hostArena);
  os << "  FLOPs per micro-step      " << microFlops
     << "  (GEMMs and attention, per rank)\n";
  if (fp8Gemms) {
    os << "  float8 GEMMs per micro-step " << fp8Gemms << "\n";
    row("  their fp8 operands     ", fp8Bytes, 0,
        "(written by the casts and transposes, a micro-step; transient)");
  }
  os << "launches (kernels and collectives, per rank):";
  for (const auto &[entry, n] : launches) {
    StringRef name(entry);
    name.consume_front("shardc_");
    os << " " << name << " " << n;
  }
  os << "\n";
  // The micro-step's kernels by launches, most first (the layout glue
  // shows here).
  std::vector<std::pair<int64_t, std::string>> byCount;
  for (const auto &[name, n] : microLaunches)
    byCount.push_back({-n, name});
  std::sort(byCount.begin(), byCount.end());
  os << "  micro-step:";
  for (size_t i = 0; i < byCount.size() && i < 8; ++i)
    os << " " << byCount[i].second << " " << -byCount[i].first;
  if (byCount.size() > 8)
    os << " ...";
  os << "\n";
  os << "collectives (bytes of the full buffer each rank takes part in):\n";
  if (traffic.empty())
    os << "  none\n";
  for (const auto &[entry, kinds] : traffic)
    for (const auto &[key, cell] : kinds) {
      os << "  " << entry << ": " << key.first << " on the "
         << mesh.axisName(key.second)
         << " axis: " << cell.first << " calls, " << mib(cell.second) << "\n";
    }
}
