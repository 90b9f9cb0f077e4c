//===- Common.h - what the calibration tools share ------------*- C++ -*-===//
//
// shardc-calibrate (the CPU) and shardc-calibrate-cuda (a GPU, or the
// emulated device) launch the runtime's kernels with packed integer
// arguments and write their calibration file (target/Calibration.h) the
// same way.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TOOLS_CALIBRATE_COMMON_H
#define SHARDC_TOOLS_CALIBRATE_COMMON_H

#include "runtime/abi/abi.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace shardc::calibrate {

/// Kernel `id`'s named integers (kernels.def), `named` set by their enum
/// index, the others 0.
inline std::vector<int64_t>
packed(abi::KernelId id, const std::vector<std::pair<int, int64_t>> &named) {
  std::vector<int64_t> ints(size_t(abi::kernelInfo(id).numInts), 0);
  for (auto [k, v] : named)
    ints[size_t(k)] = v;
  return ints;
}

/// Writes `json` to `file`; false, with one line naming `tool` and the file
/// on stderr, if it cannot.
inline bool writeCalibration(const char *tool, const std::string &file,
                             const std::string &json) {
  FILE *f = std::fopen(file.c_str(), "w");
  if (!f || std::fputs(json.c_str(), f) < 0 || std::fclose(f) != 0) {
    std::fprintf(stderr, "%s: cannot write '%s': %s\n", tool, file.c_str(),
                 std::strerror(errno));
    return false;
  }
  std::fprintf(stderr, "%s: wrote %s\n", tool, file.c_str());
  return true;
}

} // namespace shardc::calibrate

#endif // SHARDC_TOOLS_CALIBRATE_COMMON_H
