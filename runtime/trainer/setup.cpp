//===- setup.cpp - the trainer's set-up and the run's inputs and outputs --===//
//
// Set-up: the flags, the ranks' agreement on program and flags, the outputs'
// check, the watchdog, the backend and the program's memory. Then, once the
// weights are in place, what the steps read and write: the token stream,
// the log, the summary line, the io slots and trace, the validation data.
//
//===----------------------------------------------------------------------===//
#include "runtime/runtime.h"
#include "runtime/trainer/trainer.h"
#include "runtime/trainer/watchdog.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

using namespace shardc;
using namespace shardc::runtime;

std::string shardc::runtime::doing = "starting";

namespace {

/// The flags of a command line as (flag, value) pairs, in order.
std::vector<std::pair<std::string, std::string>> flagList(int argc,
                                                          char **argv) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int k = 1; k < argc; ++k) {
    std::string a = argv[k];
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos)
      out.push_back({a.substr(0, eq), a.substr(eq + 1)});
    else if (a.rfind("--", 0) == 0 && k + 1 < argc &&
             std::string(argv[k + 1]).rfind("--", 0) != 0)
      out.push_back({a, argv[++k]});
    else
      out.push_back({a, ""});
  }
  return out;
}

/// The lines of `s`.
std::vector<std::string> lines(const std::string &s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t nl = s.find('\n', at);
    out.push_back(s.substr(at, nl == std::string::npos ? nl : nl - at));
    if (nl == std::string::npos)
      break;
    at = nl + 1;
  }
  return out;
}

/// A (flag, value) pair of a rank's fingerprint as the command line had it.
std::string shown(const std::string &pair) {
  size_t sep = pair.find('\x1f');
  std::string flag = pair.substr(0, sep), value = pair.substr(sep + 1);
  return value.empty() ? flag : flag + " " + value;
}

/// How rank `r`'s program and flags (`theirs`) differ from rank 0's
/// (`mine`); "" where they do not.
std::string difference(size_t r, const std::string &mine,
                       const std::string &theirs) {
  if (theirs == mine)
    return "";
  std::vector<std::string> a = lines(mine), b = lines(theirs);
  if (a[0] != b[0])
    return "rank " + std::to_string(r) +
           " runs another compiled program than rank 0 (fingerprint " + b[0] +
           ", rank 0's " + a[0] + "): launch the same executable on every rank";
  for (size_t k = 1; k < std::max(a.size(), b.size()); ++k) {
    if (k < a.size() && k < b.size() && a[k] == b[k])
      continue;
    return "rank " + std::to_string(r) + " was started with " +
           (k < b.size() ? shown(b[k]) : "fewer flags") + ", rank 0 with " +
           (k < a.size() ? shown(a[k]) : "fewer flags") +
           ": every rank must be given the same flags";
  }
  return "";
}

} // namespace

void shardc::runtime::checkRanksAgree(const Manifest &m, const Mesh &mesh,
                                      int argc, char **argv) {
  std::string mine = programFingerprint(m);
  for (const auto &[flag, value] : flagList(argc, argv))
    mine += "\n" + flag + "\x1f" + value;
  std::vector<std::string> all = mesh.gatherStrings(mine);
  std::string verdict;
  for (size_t r = 1; r < all.size() && verdict.empty(); ++r)
    verdict = difference(r, all[0], all[r]);
  verdict = mesh.broadcastString(verdict);
  if (!verdict.empty())
    throw std::runtime_error(verdict);
}

Trainer::Trainer(const Manifest &m, const Mesh &mesh, int argc, char **argv)
    : m_(m), mesh_(mesh) {
  doing = "reading the command line";
  if (m.params.empty())
    throw std::runtime_error("the compiled model has no parameters");
  o_ = parseOptions(argc, argv, m);
  if (mesh.world > 1)
    checkRanksAgree(m, mesh, argc, argv);
  if (mesh.rank == 0)
    checkOutputs(o_);
  if (mesh.world > 1)
    watchdog::start(mesh.rank, o_.collectiveTimeout);
  // Rows of the global batch: per micro-batch, every rank's micro-batch.
  B_ = m.microBatch;
  T_ = m.seqLen;
  P_ = mesh.world;
  D_ = mesh.dataRanks();
  G_ = B_ * D_ * o_.gradAccum;
  leader_ = mesh.rank == 0;
  baselineRss_ = procStatusBytes("VmRSS");
  doing = "allocating the model's memory";
  backend_ = makeBackend(m.target, &mesh, m.constantsBytes);
  mem_ = std::make_unique<Memory>(*backend_, m, /*touchArena=*/false, &mesh);
  // The device's peak, for mfu (GPUs the table knows).
  peak_ = devicePeak(backend_->deviceName());
  totalBytes_ =
      m.paramBytes + m.stateBytes + m.ioBytes + m.arenaBytes + m.hostArenaBytes;
}

void Trainer::openData() {
  doing = o_.data.empty() ? std::string("making synthetic tokens")
                          : "reading --data " + o_.data;
  if (o_.data.empty())
    data_.emplace(TokenData::synthetic(
        o_.seed, m_.vocabSize,
        (progress_.dataRow + (o_.steps - startStep_ + 1) * G_) * T_ + 1));
  else
    data_.emplace(TokenData::open(o_.data, m_.vocabSize));
  data_->setShuffle(o_.shuffle, o_.shuffleSeed);
  if (leader_ && !o_.data.empty() && data_->files().size() > 1)
    std::printf("data: %zu shards of the %s format, %lld tokens, read as one "
                "stream (%s ... %s)%s\n",
                data_->files().size(), data_->format(),
                (long long)data_->size(), data_->files().front().c_str(),
                data_->files().back().c_str(),
                o_.shuffle ? ", windows shuffled" : "");
}

void Trainer::openLog() {
  if (leader_ && !o_.log.empty())
    log_.open(o_.log, startStep_);
}

void Trainer::printBanner() {
  if (!leader_)
    return;
  const Manifest &m = m_;
  std::printf("shardc: %s (%s), %.2fM parameters, batch %lld x %lld x %lld "
              "tokens, %s; memory: params %.1f MiB, grads+optimizer %.1f MiB, "
              "activations %.1f MiB",
              m.source.c_str(), m.family.c_str(), m.numParams() / 1e6,
              (long long)o_.gradAccum, (long long)B_, (long long)T_,
              m.optimizer.c_str(), mib(m.paramBytes), mib(m.stateBytes),
              mib(m.arenaBytes));
  std::printf("; %.3f GFLOP a micro-step on this rank (GEMMs and "
              "attention)",
              double(m.flopsOf("micro_step")) / 1e9);
  std::printf("; GEMMs: %s", backend_->gemmLibrary().c_str());
  if (peak_)
    std::printf("; mfu against the %s's %s peak, %.1f TFLOP/s", peak_->model,
                m.computeDtype.c_str(), peak_->of(m.computeDtype) / 1e12);
  if (m.offloaded())
    std::printf("; --offload=cpu: %.1f MiB on the device, %.1f MiB of "
                "pinned host memory",
                mib(m.arenaBytes), mib(totalBytes_ - m.arenaBytes));
  std::printf("\n");
}

void Trainer::prepareLaunches() {
  tokens_ = &m_.ioSlot(abi::kIoTokens);
  targets_ = &m_.ioSlot(abi::kIoTargets);
  loss_ = &m_.ioSlot(abi::kIoLoss);
  control_ = &m_.ioSlot(abi::kIoAccumulate);
  hyper_ = &m_.ioSlot(abi::kIoOptimizer);
  maxNorm_ = &m_.ioSlot(abi::kIoMaxGradNorm);
  gradSq_ = &m_.ioSlot(abi::kIoGradSqNorm);
  for (const TensorSlot &s : m_.io)
    if (s.name == abi::kIoTpIndex)
      tpIndex_ = &s;
  if (hyper_->bytes != abi::kHyperSize * 4)
    throw std::runtime_error("the compiled optimizer input has " +
                             std::to_string(hyper_->bytes) + " bytes, not " +
                             std::to_string(abi::kHyperSize * 4));
  const char *profileEnv = std::getenv("SHARDC_PROFILE");
  profiling_ = profileEnv && *profileEnv && std::string(profileEnv) != "0";
  backend_->setProfiling(profiling_);
  backend_->setGraphs(o_.cudaGraphs);
  backend_->setAllowTf32(m_.allowTf32);
  // Every launch is timed for the exposed-communication line (and kept for
  // --trace); a backend that cannot time them records none.
  trace_.setKeepEvents(!o_.trace.empty());
  trace_.setOrigin(std::stod(
      mesh_.broadcastString(std::to_string((long long)Trace::unixMicros()))));
  backend_->setTrace(&trace_);
  mem_->trace = &trace_;
}

void Trainer::openValidation() {
  if (o_.valData.empty())
    return;
  doing = "reading --val-data " + o_.valData;
  valData_.emplace(TokenData::open(o_.valData, m_.vocabSize));
}
