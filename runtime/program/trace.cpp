//===- trace.cpp - a timeline of kernels and collectives ------------------===//
#include "runtime/program/trace.h"
#include "runtime/abi/abi.h"
#include "runtime/formats/files.h"

#include <algorithm>
#include <cstdio>

using namespace shardc;
using namespace shardc::runtime;

int64_t shardc::runtime::collectiveBytes(int64_t id, const int64_t *ints) {
  auto bytes = [](int64_t n, int64_t dtype) {
    return n * abi::dtypeBytes(int(dtype));
  };
  switch (abi::KernelId(id)) {
  case abi::KernelId::all_gather:
    return bytes(ints[abi::all_gather::n], ints[abi::all_gather::dtype]);
  case abi::KernelId::all_gather_subgroup:
    return bytes(ints[abi::all_gather_subgroup::n],
                 ints[abi::all_gather_subgroup::dtype]);
  case abi::KernelId::all_gather_group: {
    int64_t k = ints[abi::all_gather_group::k], n = 0;
    for (int64_t j = 0; j < k; ++j)
      n += ints[abi::all_gather_group::kNumInts + j];
    return bytes(n, ints[abi::all_gather_group::dtype]);
  }
  case abi::KernelId::reduce_scatter:
    // Its input: a block of n per rank; the block count is the axis size,
    // which the launch does not carry: report the block it keeps.
    return bytes(ints[abi::reduce_scatter::n], ints[abi::reduce_scatter::dtype]);
  case abi::KernelId::all_reduce:
    return bytes(ints[abi::all_reduce::n], ints[abi::all_reduce::dtype]);
  default:
    return -1;
  }
}

Trace::Trace() : originUs_(unixMicros()) {}

double Trace::unixMicros() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Trace::now() const { return unixMicros() - originUs_; }

void Trace::beginRun(const char *entry, int64_t step) {
  entry_ = entry;
  step_ = step;
  runStart_ = events_.size();
}

void Trace::add(int64_t id, int64_t stream, const int64_t *ints, double begin,
                double end) {
  events_.push_back({id, stream, step_, collectiveBytes(id, ints), entry_,
                     begin, std::max(begin, end)});
}

void Trace::endRun() {
  // Exposed communication: the parts of collective intervals that no
  // compute interval of the same run covers.
  std::vector<std::pair<double, double>> compute;
  for (size_t k = runStart_; k < events_.size(); ++k)
    if (events_[k].bytes < 0)
      compute.push_back({events_[k].begin, events_[k].end});
  std::sort(compute.begin(), compute.end());
  std::vector<std::pair<double, double>> merged;
  for (const auto &c : compute)
    if (!merged.empty() && c.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, c.second);
    else
      merged.push_back(c);
  for (size_t k = runStart_; k < events_.size(); ++k) {
    const Event &e = events_[k];
    if (e.bytes < 0)
      continue;
    double covered = 0;
    for (const auto &c : merged)
      covered += std::max(0.0, std::min(e.end, c.second) -
                                   std::max(e.begin, c.first));
    commUs_ += e.end - e.begin;
    exposedUs_ += (e.end - e.begin) - covered;
  }
  if (!keep_)
    events_.resize(runStart_);
}

void Trace::writeJson(const std::string &path, int rank) const {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, "
                "\"args\": {\"name\": \"rank %d\"}},\n",
                rank, rank);
  out += buf;
  for (int s = 0; s < int(abi::kNumStreams); ++s) {
    std::snprintf(buf, sizeof(buf),
                  "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, "
                  "\"tid\": %d, \"args\": {\"name\": \"%s\"}},\n",
                  rank, s,
                  s == abi::kCommStream   ? "stream 1 (communication)"
                  : s == abi::kCopyStream ? "stream 2 (host copies)"
                                          : "stream 0 (compute)");
    out += buf;
  }
  for (size_t k = 0; k < events_.size(); ++k) {
    const Event &e = events_[k];
    const char *name = abi::kKernels[e.id].name;
    int n = std::snprintf(
        buf, sizeof(buf),
        "{\"ph\": \"X\", \"name\": \"%s\", \"cat\": \"%s\", \"pid\": %d, "
        "\"tid\": %lld, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"entry\": "
        "\"%s\", \"step\": %lld",
        name, e.bytes >= 0 ? "collective" : "kernel", rank,
        (long long)e.stream, e.begin, e.end - e.begin, e.entry,
        (long long)e.step);
    out.append(buf, size_t(n));
    if (e.bytes >= 0) {
      n = std::snprintf(buf, sizeof(buf), ", \"bytes\": %lld",
                        (long long)e.bytes);
      out.append(buf, size_t(n));
    }
    out += k + 1 < events_.size() ? "}},\n" : "}}\n";
  }
  out += "]}\n";
  writeFileDurably(path, out);
}
