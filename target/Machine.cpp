//===- Machine.cpp - the bundled machines and calibration files -----------===//
#include "target/Machine.h"

#include "target/Calibration.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cctype>
#include <cmath>

using namespace shardc;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// What every bundled GPU shares: the efficiencies the model assumes (not
/// published figures; docs/predictions.md's anchor table says how they land).
/// - A large bf16 GEMM through cuBLASLt attains 70% of the dense peak.
/// - The CUDA target's own attention kernels (FlashAttention-2's tiling,
///   f32 math on CUDA cores whatever the dtype), forward and backward,
///   attain 40% of the f32 peak.
/// - cuDNN's fused bf16 SDPA (sdpa, sdpa_grad), as a fraction of the bf16
///   peak, by head dimension D:
///   - D >= 128: forward 550 / 989 TFLOP/s, the middle of NVIDIA's
///     published cuDNN 9 figures on an H100 SXM (520 to 590 at head
///     dimension 128, causal, 4k to 8k tokens); backward 0.727 of the
///     forward, the ratio shardc's own cuDNN graphs gave on an H200 at
///     Llama-3-8B's shape (624.4 and 453.9 TFLOP/s, cuDNN 9.14,
///     CudaSdpa.Rates in tools/bench/results/h200-2026-11-26-sdpa-run2.log);
///   - D < 128: forward 272.1 and backward 201.1 of 989, measured there at
///     GPT-2's shape (16 x 12 x 1024 x 64, causal), for want of a
///     published figure (short heads keep the tensor cores far from their
///     peak); the step's trace on that H200 agrees (sdpa 1.1 and sdpa_grad
///     3.8 ms a step for 12 layers; this model: 1.15 and 3.9).
/// - An FP8 GEMM (--float8) keeps 0.88 of a bf16 GEMM's efficiency: large
///   GEMMs on an H100 reach about 795 of 989 TFLOP/s in bf16 and 1,400 of
///   1,979 in FP8 (issue 63's figures; cuBLASLt's FP8 kernels stay further
///   from their peak), (1400 / 1979) / (795 / 989) = 0.88.
/// - A streaming kernel attains 80% of HBM bandwidth.
/// - A launch costs 3 us beyond its work (kernels replayed from a CUDA
///   graph).
/// - A collective attains 80% of the link's bandwidth (NCCL's bus bandwidth
///   over NVLink's), and pays 8 us a ring step.
Machine gpu(const std::string &name, const std::string &summary) {
  Machine m;
  m.name = name;
  m.summary = summary;
  m.gemmEfficiency = 0.70;
  m.fp8GemmShare = (1400.0 / 1979.0) / (795.0 / 989.0);
  m.attentionEfficiency = 0.40;
  m.fusedAttention = 550.0 / 989.0;
  m.fusedAttentionGrad = 0.727 * 550.0 / 989.0;
  m.fusedAttentionShort = 272.1 / 989.0;
  m.fusedAttentionGradShort = 201.1 / 989.0;
  m.memoryEfficiency = 0.80;
  m.launchSeconds = 3e-6;
  m.collectiveLatency = 8e-6;
  m.collectiveEfficiency = 0.80;
  m.gpusPerNode = 8;
  m.concurrentStreams = true;
  return m;
}

std::vector<Machine> makeBundled() {
  std::vector<Machine> all;
  // NVIDIA H100 SXM5 80 GB (HGX H100): 989 TFLOP/s dense bf16, 1,979
  // dense FP8, 495 TF32, 67 f32 (NVIDIA's H100 datasheet: 3,958 FP8 and
  // 1,979 bf16 "with sparsity", half that dense); HBM3 3.35 TB/s; NVLink 4 900 GB/s per GPU (450 each way); 8 x 400 Gb/s
  // ConnectX-7 a node.
  Machine h100 = gpu("h100-sxm", "NVIDIA H100 SXM5 80 GB, 8 a node (HGX "
                                 "H100), NVIDIA's published figures");
  h100.peakBf16 = 989e12;
  h100.peakF32 = 67e12;
  h100.peakTf32 = 494.7e12;
  h100.peakFp8 = 1979e12;
  h100.memoryBytes = 80 * 1e9;
  h100.memoryBandwidth = 3.35e12;
  h100.intraNodeBandwidth = 450e9;
  h100.interNodeBandwidth = 400e9;
  all.push_back(h100);
  // NVIDIA H200 SXM 141 GB: the H100's compute and links; HBM3e 4.8 TB/s.
  Machine h200 = h100;
  h200.name = "h200";
  h200.summary = "NVIDIA H200 SXM 141 GB, 8 a node (HGX H200), NVIDIA's "
                 "published figures";
  h200.memoryBytes = 141 * 1e9;
  h200.memoryBandwidth = 4.8e12;
  all.push_back(h200);
  // NVIDIA A100 SXM4 80 GB: 312 TFLOP/s dense bf16, 156 TF32, 19.5 f32, no
  // FP8 tensor cores;
  // HBM2e 2.04 TB/s; NVLink 3 600 GB/s (300 each way); 8 x 200 Gb/s HDR a node.
  Machine a100 = gpu("a100-sxm-80", "NVIDIA A100 SXM4 80 GB, 8 a node (HGX "
                                    "A100), NVIDIA's published figures");
  a100.peakBf16 = 312e12;
  a100.peakF32 = 19.5e12;
  a100.peakTf32 = 156e12;
  a100.memoryBytes = 80 * 1e9;
  a100.memoryBandwidth = 2.039e12;
  a100.intraNodeBandwidth = 300e9;
  a100.interNodeBandwidth = 200e9;
  all.push_back(a100);
  // NVIDIA B200 (HGX B200): 2.25 PFLOP/s dense bf16, 4.5 dense FP8 (the
  // HGX B200 datasheet's 72 PFLOP/s FP8 for 8 GPUs is with sparsity), 1.1
  // TF32, 75 TFLOP/s f32; 180 GB HBM3e at 7.7 TB/s; NVLink 5 1.8 TB/s (900 GB/s each way); 8 x 400
  // Gb/s a node.
  Machine b200 = gpu("b200", "NVIDIA B200 180 GB, 8 a node (HGX B200), "
                             "NVIDIA's published figures");
  b200.peakBf16 = 2250e12;
  b200.peakF32 = 75e12;
  b200.peakTf32 = 1100e12;
  b200.peakFp8 = 4500e12;
  b200.memoryBytes = 180 * 1e9;
  b200.memoryBandwidth = 7.7e12;
  b200.intraNodeBandwidth = 900e9;
  b200.interNodeBandwidth = 400e9;
  all.push_back(b200);
  return all;
}

/// A dimension's share of a GEMM's attained throughput on a bundled GPU:
/// d / (d + 64), so 4096 keeps 98% and 128 two thirds (tiles that do not
/// fill the machine, a K too short to hide the loads).
double dimFactor(int64_t d) { return double(d) / double(d + 64); }

/// Linear interpolation weight of x between grid points a < b (log2),
/// clamped to [0, 1].
double weight(double x, double a, double b) {
  return std::clamp((x - a) / (b - a), 0.0, 1.0);
}

/// The bracketing grid indices of v (log2) in `grid` and the weight of the
/// upper one.
void bracket(const int64_t *grid, size_t n, int64_t v, size_t &lo, size_t &hi,
             double &w) {
  double x = std::log2(double(std::max<int64_t>(v, 1)));
  lo = 0;
  while (lo + 1 < n && double(std::log2(double(grid[lo + 1]))) <= x)
    ++lo;
  hi = std::min(lo + 1, n - 1);
  w = hi == lo ? 0.0
               : weight(x, std::log2(double(grid[lo])),
                        std::log2(double(grid[hi])));
}

/// Whether `gemms` has a point in `dtype`.
bool hasDtype(const std::vector<GemmPoint> &gemms, const std::string &dtype) {
  return std::any_of(gemms.begin(), gemms.end(),
                     [&](const GemmPoint &g) { return g.dtype == dtype; });
}

/// The sorted distinct m, n and k of `points`.
void gridOf(const std::vector<GemmPoint> &points, std::vector<int64_t> &ms,
            std::vector<int64_t> &ns, std::vector<int64_t> &ks) {
  ms.clear(), ns.clear(), ks.clear();
  for (const GemmPoint &g : points) {
    ms.push_back(g.m);
    ns.push_back(g.n);
    ks.push_back(g.k);
  }
  for (std::vector<int64_t> *v : {&ms, &ns, &ks}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
}

/// FLOP/s at m x n x k: trilinear interpolation of log throughput over the
/// grid ms x ns x ks of `points` (clamped at its edges).
double gridRate(const std::vector<GemmPoint> &points,
                const std::vector<int64_t> &ms, const std::vector<int64_t> &ns,
                const std::vector<int64_t> &ks, int64_t m, int64_t n,
                int64_t k) {
  auto at = [&](size_t im, size_t in, size_t ik) {
    for (const GemmPoint &g : points)
      if (g.m == ms[im] && g.n == ns[in] && g.k == ks[ik])
        return std::log(g.flopsPerS);
    return 0.0;
  };
  size_t m0, m1, n0, n1, k0, k1;
  double wm, wn, wk;
  bracket(ms.data(), ms.size(), m, m0, m1, wm);
  bracket(ns.data(), ns.size(), n, n0, n1, wn);
  bracket(ks.data(), ks.size(), k, k0, k1, wk);
  double logRate = 0;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 2; ++c) {
        double w = (a ? wm : 1 - wm) * (b ? wn : 1 - wn) * (c ? wk : 1 - wk);
        if (w > 0)
          logRate += w * at(a ? m1 : m0, b ? n1 : n0, c ? k1 : k0);
      }
  return std::exp(logRate);
}

bool fail(std::string &error, const std::string &message) {
  error = message;
  return false;
}

/// A "gemm" entry's m, n, k and flops_per_s, and its dtype if it has one;
/// nullopt where m, n, k or a positive flops_per_s is missing.
std::optional<GemmPoint> gemmEntry(const llvm::json::Value &v,
                                   std::optional<llvm::StringRef> &dtype) {
  using namespace calibration;
  const llvm::json::Object *g = v.getAsObject();
  dtype = g ? g->getString(kKeyDtype) : std::nullopt;
  std::optional<int64_t> gm = g ? g->getInteger(kKeyM) : std::nullopt,
                         gn = g ? g->getInteger(kKeyN) : std::nullopt,
                         gk = g ? g->getInteger(kKeyK) : std::nullopt;
  std::optional<double> rate = g ? g->getNumber(kKeyFlopsPerS) : std::nullopt;
  if (!gm || !gn || !gk || !rate || !(*rate > 0))
    return std::nullopt;
  return GemmPoint{*gm, *gn, *gk, *rate};
}

} // namespace

const std::vector<Machine> &shardc::bundledMachines() {
  static const std::vector<Machine> all = makeBundled();
  return all;
}

std::string shardc::bundledMachineNames() {
  std::string names;
  for (const Machine &m : bundledMachines())
    names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

double Machine::defaultBudget() const {
  // A GPU keeps 4 GiB for the CUDA context, cuBLASLt's workspace, NCCL's
  // buffers and fragmentation; a calibrated host keeps a fifth of its
  // memory for the system.
  return calibrated ? memoryBytes * 0.8 : memoryBytes - 4 * kGiB;
}

double Machine::peak(const std::string &dtype) const {
  if (calibrated) {
    double best = 0;
    for (const GemmPoint &g : gemms)
      best = std::max(best, g.flopsPerS);
    return best;
  }
  if (dtype == "tf32")
    return peakTf32 > 0 ? peakTf32 : peakF32;
  if (dtype == "fp8")
    return peakFp8;
  return dtype == "bf16" ? peakBf16 : peakF32;
}

double Machine::gemmSeconds(int64_t m, int64_t n, int64_t k,
                            const std::string &dtype) const {
  double flops = 2.0 * double(m) * double(n) * double(k);
  if (flops <= 0)
    return 0;
  if (!calibrated && !measuredGpu)
    return flops / (peak(dtype) * gemmEfficiency *
                    (dtype == "fp8" ? fp8GemmShare : 1.0) * dimFactor(m) *
                    dimFactor(n) * dimFactor(k));
  if (calibrated) {
    using namespace calibration;
    return flops / gridRate(gemms,
                            std::vector<int64_t>(std::begin(kGemmRows),
                                                 std::end(kGemmRows)),
                            std::vector<int64_t>(std::begin(kGemmDims),
                                                 std::end(kGemmDims)),
                            std::vector<int64_t>(std::begin(kGemmDims),
                                                 std::end(kGemmDims)),
                            m, n, k);
  }
  // A GPU's: the dtype's grid; TF32 falls back to f32 and FP8 to bf16
  // where they were not measured.
  std::string d = dtype;
  if (!hasDtype(gemms, d))
    d = d == "tf32" ? "f32" : d == "fp8" ? "bf16" : d;
  std::vector<GemmPoint> points;
  for (const GemmPoint &g : gemms)
    if (g.dtype == d)
      points.push_back(g);
  std::vector<int64_t> ms, ns, ks;
  gridOf(points, ms, ns, ks);
  return flops / gridRate(points, ms, ns, ks, m, n, k);
}

/// A GPU's calibration file (Calibration.h, "device": "cuda"): its
/// measured GEMMs, attention, bandwidth and launches over the bundled GPU
/// of its name (h100-sxm for another), whose published peaks MFU is taken
/// against and whose links and collective efficiency --predict keeps (one
/// GPU measures no NVLink). A GPU none of whose bundled names fits (the
/// emulated device) has for peaks its own best measured rates.
static bool loadGpuCalibration(const std::string &spec,
                               const llvm::json::Object &o, Machine &machine,
                               std::string &error) {
  using namespace calibration;
  std::string name = o.getString(kKeyName).value_or("a GPU").str();
  std::string upper = name;
  for (char &c : upper)
    c = char(std::toupper(static_cast<unsigned char>(c)));
  const char *base = "h100-sxm";
  bool known = true;
  if (upper.find("H200") != std::string::npos)
    base = "h200";
  else if (upper.find("A100") != std::string::npos)
    base = "a100-sxm-80";
  else if (upper.find("B200") != std::string::npos)
    base = "b200";
  else if (upper.find("H100") == std::string::npos)
    known = false;
  Machine m;
  for (const Machine &b : bundledMachines())
    if (b.name == base)
      m = b;
  m.name = name;
  m.measuredGpu = true;
  m.emulated = o.getBoolean(kKeyEmulated).value_or(false);
  auto number = [&](const char *key, double &out) {
    std::optional<double> v = o.getNumber(key);
    if (!v || !(*v > 0))
      return fail(error, spec + ": calibration key \"" + key +
                             "\" is missing or not positive");
    out = *v;
    return true;
  };
  if (!number(kKeyMemoryBytes, m.memoryBytes) ||
      !number(kKeyMemoryBandwidth, m.memoryBandwidth) ||
      !number(kKeyLaunch, m.launchSeconds))
    return false;
  m.memoryEfficiency = 1; // measured: what a streaming kernel attains
  if (std::optional<double> g = o.getNumber(kKeyGraphLaunch)) {
    if (!(*g > 0))
      return fail(error, spec + ": calibration key \"" + kKeyGraphLaunch +
                             "\" is not positive");
    // The trainer replays its steps from CUDA graphs.
    m.graphLaunchSeconds = *g;
    m.launchSeconds = *g;
  }
  const llvm::json::Array *gemms = o.getArray(kKeyGemm);
  if (!gemms)
    return fail(error, spec + ": calibration key \"gemm\" is missing");
  for (const llvm::json::Value &v : *gemms) {
    std::optional<llvm::StringRef> dtype;
    std::optional<GemmPoint> g = gemmEntry(v, dtype);
    if (!g || !dtype || g->m <= 0 || g->n <= 0 || g->k <= 0)
      return fail(error, spec + ": a \"gemm\" entry lacks a dtype, positive "
                                "m, n, k or a positive flops_per_s");
    if (std::none_of(std::begin(kCudaGemmDtypes), std::end(kCudaGemmDtypes),
                     [&](const char *d) { return *dtype == d; }))
      return fail(error, spec + ": a \"gemm\" entry's dtype '" + dtype->str() +
                             "' is none of f32, tf32, bf16, fp8");
    g->dtype = dtype->str();
    m.gemms.push_back(*g);
  }
  // Each dtype's entries a full grid; f32 and bf16 measured.
  for (const char *d : kCudaGemmDtypes) {
    std::vector<GemmPoint> points;
    for (const GemmPoint &g : m.gemms)
      if (g.dtype == d)
        points.push_back(g);
    if (points.empty()) {
      if (std::string(d) == "f32" || std::string(d) == "bf16")
        return fail(error, spec + ": no " + d + " GEMM measured");
      continue;
    }
    std::vector<int64_t> ms, ns, ks;
    gridOf(points, ms, ns, ks);
    for (int64_t r : ms)
      for (int64_t n : ns)
        for (int64_t k : ks)
          if (std::none_of(points.begin(), points.end(),
                           [&](const GemmPoint &g) {
                             return g.m == r && g.n == n && g.k == k;
                           }))
            return fail(error, spec + ": no " + d + " GEMM measured at " +
                                   std::to_string(r) + " x " +
                                   std::to_string(n) + " x " +
                                   std::to_string(k) +
                                   " (each dtype's GEMMs make a full grid)");
  }
  if (const llvm::json::Array *eps = o.getArray(kKeyGemmEpilogue))
    for (const llvm::json::Value &v : *eps) {
      const llvm::json::Object *e = v.getAsObject();
      std::optional<int64_t> em = e ? e->getInteger(kKeyM) : std::nullopt,
                             en = e ? e->getInteger(kKeyN) : std::nullopt,
                             ek = e ? e->getInteger(kKeyK) : std::nullopt;
      std::optional<double> with = e ? e->getNumber(kKeyFlopsPerS)
                                     : std::nullopt,
                            plain = e ? e->getNumber(kKeyPlainFlopsPerS)
                                      : std::nullopt;
      std::optional<llvm::StringRef> kind =
          e ? e->getString(kKeyEpilogue) : std::nullopt;
      if (!em || !en || !ek || !with || !(*with > 0) || !plain ||
          !(*plain > 0) || !kind)
        return fail(error, spec + ": a \"gemm_epilogue\" entry lacks its "
                                  "epilogue, m, n, k or positive rates");
      m.epilogues.push_back({kind->str(),
                             e->getString(kKeyDtype).value_or("bf16").str(),
                             *em, *en, *ek, *with, *plain});
    }
  const llvm::json::Array *sdpa = o.getArray(kKeySdpa);
  if (!sdpa || sdpa->empty())
    return fail(error, spec + ": calibration key \"sdpa\" is missing or "
                              "empty");
  for (const llvm::json::Value &v : *sdpa) {
    const llvm::json::Object *a = v.getAsObject();
    std::optional<int64_t> d = a ? a->getInteger(kKeyHeadDim) : std::nullopt,
                           t = a ? a->getInteger(kKeySeq) : std::nullopt;
    std::optional<double> f = a ? a->getNumber(kKeyFlopsPerS) : std::nullopt,
                          g = a ? a->getNumber(kKeyGradFlopsPerS)
                                : std::nullopt;
    if (!d || !t || *d <= 0 || *t <= 0 || !f || !(*f > 0) || !g ||
        !(*g > 0))
      return fail(error, spec + ": an \"sdpa\" entry lacks a positive "
                                "head_dim, seq, flops_per_s or "
                                "grad_flops_per_s");
    m.sdpa.push_back({*d, *t, *f, *g});
  }
  // The peaks: the bundled GPU's published ones, else the best measured.
  if (!known) {
    auto best = [&](const char *dtype) {
      double r = 0;
      for (const GemmPoint &g : m.gemms)
        if (g.dtype == dtype)
          r = std::max(r, g.flopsPerS);
      return r;
    };
    m.peakF32 = best("f32");
    m.peakBf16 = best("bf16");
    m.peakTf32 = best("tf32");
    m.peakFp8 = best("fp8");
  }
  if (hasDtype(m.gemms, "fp8") && m.peakFp8 <= 0)
    m.peakFp8 = std::max_element(m.gemms.begin(), m.gemms.end(),
                                 [](const GemmPoint &a, const GemmPoint &b) {
                                   return (a.dtype == "fp8" ? a.flopsPerS
                                                            : 0.0) <
                                          (b.dtype == "fp8" ? b.flopsPerS
                                                            : 0.0);
                                 })
                    ->flopsPerS;
  // cuDNN's attention as Predict reads it (fractions of the bf16 peak,
  // head dimensions from 128 and below): at each class's longest length
  // (a training step's), the widest head standing for the long class when
  // none reached 128.
  auto pick = [&](bool longHeads) -> const SdpaPoint * {
    const SdpaPoint *best = nullptr;
    for (const SdpaPoint &p : m.sdpa)
      if ((p.headDim >= 128) == longHeads &&
          (!best || p.seq > best->seq ||
           (p.seq == best->seq && p.headDim > best->headDim)))
        best = &p;
    return best;
  };
  const SdpaPoint *lng = pick(true), *shrt = pick(false);
  if (!lng)
    lng = shrt;
  if (!shrt)
    shrt = lng;
  m.fusedAttention = lng->flopsPerS / m.peakBf16;
  m.fusedAttentionGrad = lng->gradFlopsPerS / m.peakBf16;
  m.fusedAttentionShort = shrt->flopsPerS / m.peakBf16;
  m.fusedAttentionGradShort = shrt->gradFlopsPerS / m.peakBf16;
  m.summary = std::string(m.emulated ? "the emulated device, " : "") +
              "calibrated by shardc --calibrate --target cuda (" + spec +
              "); peaks and links: " +
              (known ? std::string(base) + "'s published figures"
                     : std::string("its best measured rates and h100-sxm's "
                                   "links"));
  machine = m;
  return true;
}

bool shardc::loadMachine(const std::string &spec, Machine &machine,
                         std::string &error) {
  for (const Machine &m : bundledMachines())
    if (m.name == spec) {
      machine = m;
      return true;
    }
  auto buffer = llvm::MemoryBuffer::getFile(spec);
  if (!buffer)
    return fail(error, "unknown machine '" + spec +
                           "': neither a bundled machine (" +
                           bundledMachineNames() +
                           ") nor a calibration file (" +
                           buffer.getError().message() + ")");
  auto parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return fail(error, spec + ": not a calibration file: " +
                           llvm::toString(parsed.takeError()));
  const llvm::json::Object *o = parsed->getAsObject();
  using namespace calibration;
  if (!o || o->getString(kKeyFormat) != llvm::StringRef(kFormat))
    return fail(error, spec + ": not a calibration file (no \"format\": \"" +
                           kFormat + "\"; write one with shardc --calibrate)");
  std::optional<int64_t> version = o->getInteger(kKeyVersion);
  if (version != kVersion)
    return fail(error,
                spec + ": calibration format version " +
                    (version ? std::to_string(*version) : "missing") +
                    ", this shardc reads version " + std::to_string(kVersion) +
                    ": calibrate again with shardc --calibrate");
  std::optional<llvm::StringRef> device = o->getString(kKeyDevice);
  if (o->get(kKeyDevice) && !device)
    return fail(error, spec + ": calibration key \"" + kKeyDevice +
                           "\" is not a string");
  if (device && *device == kDeviceCuda)
    return loadGpuCalibration(spec, *o, machine, error);
  if (device && *device != kDeviceCpu)
    return fail(error, spec + ": a calibration of device '" + device->str() +
                           "': this shardc reads \"cpu\" and \"cuda\"");
  Machine m;
  m.calibrated = true;
  m.concurrentStreams = false; // the CPU backend runs its streams in order
  m.gpusPerNode = 1 << 20;     // every rank on this host
  m.name = o->getString(kKeyName).value_or("calibrated").str();
  m.summary = "calibrated by shardc --calibrate (" + spec + ")";
  auto number = [&](const char *key, double &out) {
    std::optional<double> v = o->getNumber(key);
    if (!v || !(*v > 0))
      return fail(error, spec + ": calibration key \"" + key +
                             "\" is missing or not positive");
    out = *v;
    return true;
  };
  double threads = 0;
  if (!number(kKeyThreads, threads) || !number(kKeyMemoryBytes, m.memoryBytes) ||
      !number(kKeyAttention, m.attentionFlops) ||
      !number(kKeyAttentionGrad, m.attentionGradFlops) ||
      !number(kKeyMemoryBandwidth, m.memoryBandwidth) ||
      !number(kKeyLaunch, m.launchSeconds) ||
      !number(kKeyCollectiveLatency, m.collectiveLatency) ||
      !number(kKeyCollectiveBandwidth, m.intraNodeBandwidth))
    return false;
  // A whole number a host can have (an int64 conversion of 1e300 is
  // undefined: found by fuzzing, test/fuzz/regressions/calibration).
  if (threads != std::floor(threads) || threads > double(1 << 20))
    return fail(error, spec + ": calibration key \"" + kKeyThreads +
                           "\" is not a whole number of threads (1 to " +
                           std::to_string(1 << 20) + ")");
  m.threads = int64_t(threads);
  m.interNodeBandwidth = m.intraNodeBandwidth;
  const llvm::json::Array *gemms = o->getArray(kKeyGemm);
  if (!gemms)
    return fail(error, spec + ": calibration key \"gemm\" is missing");
  for (const llvm::json::Value &v : *gemms) {
    std::optional<llvm::StringRef> dtype; // a host's are f32, unsaid
    std::optional<GemmPoint> g = gemmEntry(v, dtype);
    if (!g)
      return fail(error, spec + ": a \"gemm\" entry lacks m, n, k or a "
                                "positive flops_per_s");
    m.gemms.push_back(*g);
  }
  for (int64_t r : kGemmRows)
    for (int64_t n : kGemmDims)
      for (int64_t k : kGemmDims)
        if (std::none_of(m.gemms.begin(), m.gemms.end(),
                         [&](const GemmPoint &g) {
                           return g.m == r && g.n == n && g.k == k;
                         }))
          return fail(error, spec + ": no GEMM measured at " +
                                 std::to_string(r) + " x " + std::to_string(n) +
                                 " x " + std::to_string(k));
  machine = m;
  return true;
}
