//===- Predict.cpp - each step function's time, played out on a machine ---===//
//
// The schedule is known at compile time: every kernel with its shapes,
// every collective with its bytes and axis, the streams and the events
// that order them. This pass costs each launch on a machine description
// (target/Machine.h) and plays the function out in program order with one
// clock per stream (one clock in all where the machine runs its streams in
// order). See the pass's description in Passes.td for the model.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/rt/RtMatch.h"
#include "passes/rt/RtFlops.h"
#include "target/Machine.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <map>

namespace shardc {
#define GEN_PASS_DEF_RTPREDICT
#include "passes/Passes.h.inc"
} // namespace shardc

using namespace mlir;
using namespace shardc;

namespace {

/// The sizes of the manifest's slots in one region: offset -> bytes.
using Slots = std::map<int64_t, int64_t>;

/// The bytes of the buffer `v` names: an allocation's size, a constant's,
/// or the slot of the parameters, state or inputs at a view's offset (the
/// remainder of the slot when the view starts inside it).
int64_t bufferBytes(Value v, const std::array<Slots, abi::kNumRegions> &slots) {
  if (auto alloc = v.getDefiningOp<rt::AllocOp>())
    return alloc.getSize();
  if (auto constant = v.getDefiningOp<rt::ConstantOp>()) {
    auto type = cast<ShapedType>(constant.getValue().getType());
    return type.getNumElements() *
           std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  }
  auto view = v.getDefiningOp<rt::ViewOp>();
  if (!view)
    return 0;
  if (std::optional<int64_t> size = view.getSize())
    return *size;
  int64_t offset = view.getOffset();
  Value base = view.getBase();
  if (auto alloc = base.getDefiningOp<rt::AllocOp>())
    return std::max<int64_t>(0, alloc.getSize() - offset);
  auto arg = dyn_cast<BlockArgument>(base);
  if (!arg || arg.getArgNumber() < 1)
    return 0;
  int64_t region = arg.getArgNumber() - 1;
  if (region >= abi::kNumRegions)
    return 0;
  const Slots &s = slots[size_t(region)];
  auto it = s.upper_bound(offset);
  if (it == s.begin())
    return 0;
  --it;
  return std::max<int64_t>(0, it->first + it->second - offset);
}

struct Player {
  const Machine &m;
  std::string dtype; ///< what the program's GEMMs compute in, for MFU
  abi::MeshGrid mesh; ///< the compiled mesh (the manifest's)
  /// --allow-tf32 (the manifest's abi::kManifestAllowTf32): f32 GEMMs at
  /// the TF32 peak.
  bool tf32 = false;
  std::array<Slots, abi::kNumRegions> slots;

  double memorySeconds(double bytes) const {
    return bytes / (m.memoryBandwidth * m.memoryEfficiency);
  }

  /// FLOP/s of an attention kernel (`id`) with ints `i`: a calibration's
  /// measured rate; else cuDNN's fused rate for sdpa (by head dimension),
  /// and for the target's own kernels the f32 peak's share (they compute
  /// on CUDA cores in f32 whatever the dtype).
  double attentionFlops(abi::KernelId id, ArrayRef<int64_t> i) const {
    bool grad = id == abi::KernelId::attention_grad ||
                id == abi::KernelId::sdpa_grad;
    if (m.calibrated)
      return grad ? m.attentionGradFlops : m.attentionFlops;
    if (id == abi::KernelId::attention || id == abi::KernelId::attention_grad)
      return m.peak("f32") * m.attentionEfficiency;
    bool longHeads = i[abi::sdpa::D] >= 128;
    double fraction = longHeads ? (grad ? m.fusedAttentionGrad
                                        : m.fusedAttention)
                                : (grad ? m.fusedAttentionGradShort
                                        : m.fusedAttentionShort);
    if (fraction <= 0) // a machine with no fused-attention figure
      fraction = m.attentionEfficiency;
    return m.peak("bf16") * fraction;
  }

  /// Bytes an attention kernel moves: its operands' elements (a view in
  /// rows spans other operands' columns too, which it does not read), its
  /// stats and workspace as their buffers are; `buffers` as counted from
  /// the buffers, with each view's whole span.
  static double attentionBytes(rt::KernelOp k, abi::KernelId id,
                               double buffers) {
    namespace At = abi::attention;
    ArrayRef<int64_t> i = k.getInts();
    bool fused = id == abi::KernelId::sdpa || id == abi::KernelId::sdpa_grad;
    bool grad = id == abi::KernelId::attention_grad ||
                id == abi::KernelId::sdpa_grad;
    if (i[fused ? int64_t(abi::sdpa::layout) : int64_t(At::layout)] ==
        abi::kAttentionBHTD)
      return buffers;
    double e = double(abi::dtypeBytes(i[At::dtype]));
    double q = double(i[At::B] * i[At::H] * i[At::T] * i[At::D]) * e;
    double kv = double(i[At::B] * i[At::G] * i[At::S] * i[At::D]) * e;
    // q, k, v, o; a gradient also dO, dq, dk, dv.
    double operands = (grad ? 4 : 2) * (q + kv);
    if (!fused)
      return operands;
    double rows = double(i[At::B] * i[At::H] * i[At::T]) * 4; // lse
    return operands + rows + double(i[abi::sdpa::ws_bytes]);
  }

  /// What matmul_bgrad's bias-gradient epilogue adds to its GEMM: a read of
  /// the summed operand [K, count], as sum_to's column sums cost. Measured
  /// so on an H100 (cuBLASLt 13's BGRADA at GPT-2 124M's four weight
  /// gradients: 15 to 48 us over the GEMM alone, sum_to's 15 to 50;
  /// tools/bench/results/h100-2026-11-26-run6.log).
  double biasGradSeconds(rt::KernelOp k) const {
    namespace Mb = abi::matmul_bgrad;
    ArrayRef<int64_t> i = k.getInts();
    double count = double(i[Mb::side] ? i[Mb::N] : i[Mb::M]);
    double e = double(abi::dtypeBytes(i[Mb::dtype]));
    return memorySeconds(double(i[Mb::K]) * count * e);
  }

  /// What matmul_fp8 adds to its GEMM where the GEMM alone cannot finish
  /// it (rowwise scales, or a bias added after the rounding): the f32
  /// product written and read again, y written (runtime/cuda/gemm.cu).
  /// Tensorwise without a bias is cuBLASLt's scale pointers alone.
  double fp8ScalingSeconds(rt::KernelOp k) const {
    namespace M8 = abi::matmul_fp8;
    ArrayRef<int64_t> i = k.getInts();
    if (!i[M8::rowwise] && !i[M8::has_bias])
      return 0;
    double y = i[M8::y_f32] ? 4.0 : double(abi::dtypeBytes(i[M8::dtype]));
    return memorySeconds(double(i[M8::M] * i[M8::N]) * (8.0 + y));
  }

  /// Bytes a kernel that touches only a part of one of its buffers moves,
  /// or nullopt for the others (costed by their buffers' sizes): a slice
  /// reads its part of x and writes y, and a concatenation's part reads x
  /// and writes its part of y (fsdp-bucket-gradients' parts of a bucket of
  /// a layer's gradients: its whole buffer was charged for each part, nine
  /// times llama3-8b's layer of f32 gradients).
  static std::optional<double> partBytes(rt::KernelOp k,
                                         const abi::KernelInfo *info) {
    if (!info)
      return std::nullopt;
    ArrayRef<int64_t> i = k.getInts();
    switch (abi::kernelId(*info)) {
    case abi::KernelId::slice: {
      namespace S = abi::slice;
      return 2.0 * double(i[S::outer] * i[S::size] * i[S::inner]) *
             double(abi::dtypeBytes(i[S::dtype]));
    }
    case abi::KernelId::concat_part: {
      namespace C = abi::concat_part;
      return 2.0 * double(i[C::outer] * i[C::n_x] * i[C::inner]) *
             double(abi::dtypeBytes(i[C::dtype]));
    }
    case abi::KernelId::cast_fp8: {
      // x read twice (its amax, then the cast), one byte an element
      // written a layout (two with both; the scales are negligible).
      namespace C8 = abi::cast_fp8;
      double n = double(i[C8::R] * i[C8::C]);
      return n * (2.0 * double(abi::dtypeBytes(i[C8::dtype])) + 1.0 +
                  (i[C8::both] ? 1.0 : 0.0));
    }
    default:
      return std::nullopt;
    }
  }

  /// Seconds of one kernel launch. Each buffer argument moves its bytes
  /// once: a buffer passed twice is updated in place (AdamW's parameter and
  /// moments, accumulate's sum), read and written.
  double kernelSeconds(rt::KernelOp k) const {
    double bytes = 0;
    for (Value b : k.getBuffers())
      bytes += double(bufferBytes(b, slots));
    double work = 0;
    // Each kernel at the peak of what it computes in (its typed dtype);
    // under --allow-tf32 an f32 GEMM's is TF32's.
    std::string dtype = k.getComputeType().isBF16() ? "bf16" : "f32";
    std::string gemmDtype = dtype == "f32" && tf32 ? "tf32" : dtype;
    const abi::KernelInfo *info = abi::lookupKernel(k.getName());
    ArrayRef<int64_t> i = k.getInts();
    if (std::optional<double> part = partBytes(k, info))
      bytes = *part;
    if (info && abi::kernelId(*info) == abi::KernelId::matmul_fp8)
      gemmDtype = "fp8"; // --float8: at the FP8 tensor cores' rate
    if (std::optional<GemmShape> g = gemmShape(k)) {
      work = double(g->batch) * m.gemmSeconds(g->m, g->n, g->k, gemmDtype);
      if (info && abi::kernelId(*info) == abi::KernelId::matmul_bgrad)
        work += biasGradSeconds(k);
      if (info && abi::kernelId(*info) == abi::KernelId::matmul_fp8)
        work += fp8ScalingSeconds(k);
    } else if (info) {
      switch (abi::kernelId(*info)) {
      case abi::KernelId::linear_cross_entropy: {
        namespace L = abi::linear_cross_entropy;
        int64_t N = i[L::N], C = i[L::C], V = i[L::V];
        int64_t R = std::max<int64_t>(1, std::min(i[L::R], N));
        double chunks = double(N) / double(R);
        // Per chunk: logits, dh and dw GEMMs (the first two over the
        // vocabulary padded to Vp, as the runtime runs them). Each logit
        // (of the dtype) is written by its GEMM, read twice by the loss
        // (the max and the sum of exps in one pass, then the gradient) and
        // its gradient written in place. dw is summed over the chunks in
        // f32 (on bf16 in the runtime's scratch): from the second chunk on,
        // each dw GEMM reads and writes all of it, and on bf16 it is
        // rounded once at the end (f32 read, bf16 written). Where V is not
        // a multiple of 64 the runtime copies w into zero-padded rows each
        // call ([V, C] read and written, [Vp - V, C] zeroed).
        double e = k.getComputeType().isBF16() ? 2.0 : 4.0;
        double v = double(V), c = double(C), vp = double(abi::lossHeadRowStride(V));
        double dwBytes = 4.0 * v * c;
        double tail = (e == 2.0 && N > R ? 6.0 * v * c : 0.0) +
                      (vp != v ? e * (2.0 * v + (vp - v)) * c : 0.0);
        work = chunks * (m.gemmSeconds(R, int64_t(vp), C, gemmDtype) +
                         m.gemmSeconds(R, C, int64_t(vp), gemmDtype) +
                         m.gemmSeconds(V, C, R, gemmDtype)) +
               memorySeconds(4.0 * e * double(N) * v +
                             (2.0 * std::ceil(chunks) - 1.0) * dwBytes + tail);
        break;
      }
      case abi::KernelId::attention:
      case abi::KernelId::attention_grad:
      case abi::KernelId::sdpa:
      case abi::KernelId::sdpa_grad:
        work = double(kernelFlops(k)) / attentionFlops(abi::kernelId(*info), i);
        bytes = attentionBytes(k, abi::kernelId(*info), bytes);
        break;
      default:
        break;
      }
    }
    return std::max(work, memorySeconds(bytes)) + m.launchSeconds;
  }

  /// Bytes/s a ring over `ranks` ranks of `axis` attains: NVLink when they
  /// share a node (mesh order, abi::MeshGrid: the tp axis's ranks are
  /// consecutive, the shard axis's tp apart, the replicate axis's shards x
  /// tp), else each GPU's share of its node's network.
  double linkBandwidth(int64_t axis, int64_t ranks) const {
    if (m.calibrated)
      return m.intraNodeBandwidth;
    int64_t span = ranks * mesh.axisStride(axis);
    double bw = span <= m.gpusPerNode
                    ? m.intraNodeBandwidth
                    : m.interNodeBandwidth / double(m.gpusPerNode);
    return bw * m.collectiveEfficiency;
  }

  /// A ring over `ranks`: ranks - 1 steps (twice for an all-reduce) of the
  /// latency and a ranks-th of the full buffer.
  double ringSeconds(int64_t axis, int64_t ranks, double fullBytes,
                     bool allReduce) const {
    if (ranks <= 1)
      return m.launchSeconds;
    double steps = double(ranks - 1) * (allReduce ? 2 : 1);
    return steps * (m.collectiveLatency +
                    fullBytes / double(ranks) / linkBandwidth(axis, ranks)) +
           m.launchSeconds;
  }

  /// Plays `fn` out: its prediction as a dictionary.
  DictionaryAttr play(func::FuncOp fn) const {
    std::array<double, 3> clock{0, 0, 0};
    std::map<int64_t, double> events;
    double compute = 0, communication = 0;
    llvm::StringMap<std::pair<int64_t, double>> costs;
    std::vector<std::string> order;
    auto at = [&](int64_t stream) -> double & {
      if (!m.concurrentStreams)
        return clock[0];
      return clock[size_t(std::clamp<int64_t>(stream, 0, 2))];
    };
    auto add = [&](StringRef name, double seconds) {
      auto [it, inserted] = costs.try_emplace(name, 0, 0.0);
      if (inserted)
        order.push_back(name.str());
      it->second.first += 1;
      it->second.second += seconds;
    };
    fn.walk([&](Operation *op) {
      if (auto k = dyn_cast<rt::KernelOp>(op)) {
        double s = kernelSeconds(k);
        at(k.getStream()) += s;
        if (k.getStream() == abi::kComputeStream)
          compute += s;
        add(k.getName(), s);
      } else if (std::optional<CollectiveTraffic> c =
                     collectiveTraffic(op, mesh)) {
        bool allReduce = c->kind == "all_reduce";
        double s = ringSeconds(c->axis, c->ranks, double(c->bytes), allReduce);
        // A reduce-scatter also sums the blocks each step receives.
        if (c->kind == "reduce_scatter")
          s += memorySeconds(double(c->bytes) * 2);
        at(c->stream) += s;
        communication += s;
        add((c->kind + Twine(" (") + c->axisName + ")").str(),
            s);
      } else if (auto e = dyn_cast<rt::EventRecordOp>(op)) {
        events[e.getEvent()] = at(e.getStream());
      } else if (auto e = dyn_cast<rt::EventWaitOp>(op)) {
        double &c = at(e.getStream());
        c = std::max(c, events[e.getEvent()]);
      }
    });
    double seconds = *std::max_element(clock.begin(), clock.end());
    Builder b(fn.getContext());
    SmallVector<Attribute> list;
    for (const std::string &name : order) {
      auto [calls, s] = costs.lookup(name);
      list.push_back(b.getArrayAttr({b.getStringAttr(name),
                                     b.getI64IntegerAttr(calls),
                                     b.getF64FloatAttr(s)}));
    }
    return b.getDictionaryAttr({
        b.getNamedAttr("seconds", b.getF64FloatAttr(seconds)),
        b.getNamedAttr("compute", b.getF64FloatAttr(compute)),
        b.getNamedAttr("communication", b.getF64FloatAttr(communication)),
        b.getNamedAttr("exposed",
                       b.getF64FloatAttr(std::max(0.0, seconds - compute))),
        b.getNamedAttr("costs", b.getArrayAttr(list)),
    });
  }
};

struct RtPredictPass : public shardc::impl::RtPredictBase<RtPredictPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Machine machine;
    std::string error;
    if (!loadMachine(this->machine, machine, error)) {
      module.emitError() << "--predict: " << error;
      return signalPassFailure();
    }
    if (gpusPerNode < 0) {
      module.emitError() << "--gpus-per-node must be at least 1";
      return signalPassFailure();
    }
    machine.setGpusPerNode(gpusPerNode);
    bool fp8 = false;
    module.walk([&](rt::KernelOp k) {
      fp8 |= k.getName() == abi::kernelInfo(abi::KernelId::matmul_fp8).name;
    });
    if (fp8 && machine.peak("fp8") <= 0) {
      module.emitError() << "--predict " << machine.name
                         << ": the machine has no FP8 tensor cores, so "
                            "--float8's GEMMs cannot run there";
      return signalPassFailure();
    }
    Player player{machine, "f32"};
    if (auto manifest = module->getAttrOfType<DictionaryAttr>(attrs::kManifest)) {
      if (auto tf32 = manifest.getAs<BoolAttr>(abi::kManifestAllowTf32))
        player.tf32 = tf32.getValue();
      if (auto mesh = manifest.getAs<DenseI64ArrayAttr>("mesh"))
        player.mesh = abi::MeshGrid::of(mesh.asArrayRef());
      std::pair<const char *, abi::Region> lists[] = {
          {"params", abi::kRegionParams},
          {"state", abi::kRegionState},
          {"io", abi::kRegionIo}};
      for (auto [key, region] : lists)
        if (auto slots = manifest.getAs<ArrayAttr>(key))
          for (Attribute a : slots) {
            auto slot = cast<DictionaryAttr>(a);
            auto offset = slot.getAs<IntegerAttr>("offset");
            auto bytes = slot.getAs<IntegerAttr>("bytes");
            if (offset && bytes)
              player.slots[size_t(region)][offset.getInt()] = bytes.getInt();
          }
    }
    // The program's peak, for MFU: bf16 where its kernels compute in bf16
    // (FSDP2's mixed precision on a target with bf16 kernels).
    player.dtype = programComputeDtype(module, player.tf32).str();
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn.getName().starts_with(attrs::kEntryPrefix))
        fn->setAttr(attrs::kPredict, player.play(fn));
    Builder b(module.getContext());
    module->setAttr(
        attrs::kPredictMachine,
        b.getDictionaryAttr({
            b.getNamedAttr("name", b.getStringAttr(machine.name)),
            b.getNamedAttr("summary", b.getStringAttr(machine.summary)),
            b.getNamedAttr("peak_flops",
                           b.getF64FloatAttr(machine.peak(player.dtype))),
            b.getNamedAttr("dtype", b.getStringAttr(player.dtype)),
            b.getNamedAttr("memory_budget", b.getI64IntegerAttr(int64_t(
                                                machine.defaultBudget()))),
        }));
  }
};

} // namespace
