//===- calibration.cpp - fuzz target: --predict's calibration files --------===//
//
// Bytes -> a file -> loadMachine, as --predict FILE reads what --calibrate
// wrote (target/Machine.cpp), then what the predictor asks of the machine:
// its default memory budget, peaks and GEMM times over the measured grid
// and off it.
//
// The input (FuzzInput.h): part 0 is the file; the mode byte is unused.
// A refused file is an error string naming it: expected. A crash, a
// sanitizer report (an out-of-range float-to-integer conversion included)
// or more memory than libFuzzer's -rss_limit_mb is a finding.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "target/Machine.h"

#include <cstdint>
#include <string>

using namespace shardc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz::FuzzInput in = fuzz::splitInput(data, size);
  std::string path = fuzz::writePart("calibration.json", in.parts[0]);
  Machine machine;
  std::string error;
  if (!loadMachine(path, machine, error))
    return 0;
  volatile double sink = machine.defaultBudget() + machine.peak("f32") +
                         machine.peak("bf16");
  for (int64_t m : {1, 64, 100, 4096, 100000})
    for (int64_t n : {1, 64, 768, 50257})
      sink = sink + machine.gemmSeconds(m, n, 768, "f32");
  (void)sink;
  return 0;
}
