//===- step_log.cpp - the --log file: one JSON line a step ----------------===//
#include "runtime/trainer/step_log.h"
#include "runtime/formats/files.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

using namespace shardc::runtime;

namespace {

/// Keeps the lines of a JSON-lines log whose "step" is below `step`.
void truncateLog(const std::string &path, int64_t step) {
  if (!pathExists(path))
    return;
  std::string text = readTextFile(path), kept;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    end = end == std::string::npos ? text.size() : end + 1;
    std::string line = text.substr(at, end - at);
    long long s = -1;
    if (std::sscanf(line.c_str(), "{\"step\": %lld", &s) == 1 && s < step)
      kept += line;
    at = end;
  }
  writeFileDurably(path, kept);
}

} // namespace

std::string shardc::runtime::jsonNumber(double v) {
  char buf[32];
  if (!std::isfinite(v))
    return std::string("null");
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return std::string(buf);
}

StepLog::~StepLog() {
  if (file_)
    std::fclose(file_);
}

void StepLog::open(const std::string &path, int64_t startStep) {
  path_ = path;
  if (startStep > 0)
    truncateLog(path, startStep);
  if (!(file_ = std::fopen(path.c_str(), startStep > 0 ? "a" : "w")))
    throw std::runtime_error(path + ": cannot open log file for writing");
}

void StepLog::check(int wrote) {
  if (wrote < 0 || std::fflush(file_) != 0)
    throw std::runtime_error(path_ + ": --log: write failed: " +
                             std::strerror(errno));
}

void StepLog::step(int64_t step, const StepRecord &r, bool evaluated,
                   double valLoss) {
  std::string val = evaluated ? ", \"val_loss\": " + jsonNumber(valLoss) : "";
  check(std::fprintf(file_,
                     "{\"step\": %lld, \"loss\": %s, \"lr\": %.9g, "
                     "\"grad_norm\": %s, \"ms\": %.3f, \"tok_per_s\": %.1f, "
                     "\"tflops\": %.6g, \"mfu\": %s, \"mem_mib\": %s, "
                     "\"planned_mib\": %.3f%s}\n",
                     (long long)step, jsonNumber(r.loss).c_str(), r.lr,
                     jsonNumber(r.gradNorm).c_str(), r.ms, r.tokPerS,
                     r.tflops, jsonNumber(r.mfu).c_str(),
                     r.memMib < 0 ? "null" : jsonNumber(r.memMib).c_str(),
                     r.plannedMib, val.c_str()));
}

void StepLog::finalValidation(int64_t steps, double valLoss) {
  check(std::fprintf(file_, "{\"step\": %lld, \"val_loss\": %s}\n",
                     (long long)steps, jsonNumber(valLoss).c_str()));
}

void StepLog::close() {
  std::FILE *f = file_;
  file_ = nullptr;
  if (f && std::fclose(f) != 0)
    throw std::runtime_error(path_ + ": --log: write failed: " +
                             std::strerror(errno));
}
