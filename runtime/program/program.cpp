//===- program.cpp - walking a compiled launch table ----------------------===//
#include "runtime/program/program.h"
#include "runtime/runtime.h"

#include <string>
#include <vector>

using namespace shardc;
using namespace shardc::runtime;

namespace {

/// Buffers per launch without a heap allocation; all_gather_group of a
/// large group may need more.
constexpr int64_t kInlineBuffers = 64;

} // namespace

void shardc::runtime::runProgram(const int64_t *program,
                                 void *const regions[abi::kNumRegions],
                                 const ProgramTarget &target) {
  void *inlineBuffers[kInlineBuffers];
  std::vector<void *> heapBuffers;
  for (const int64_t *p = program;;) {
    switch (p[0]) {
    case abi::kOpEnd:
      return;
    case abi::kOpEventRecord:
      target.recordEvent(target.ctx, p[1], p[2]);
      p += 3;
      continue;
    case abi::kOpEventWait:
      target.waitEvent(target.ctx, p[1], p[2]);
      p += 3;
      continue;
    case abi::kOpKernel: {
      int64_t id = p[1], stream = p[2], nb = p[3], ni = p[4], nf = p[5];
      const int64_t *refs = p + abi::kKernelHeaderWords;
      void **bufs = inlineBuffers;
      if (nb > kInlineBuffers) {
        heapBuffers.resize(size_t(nb));
        bufs = heapBuffers.data();
      }
      for (int64_t k = 0; k < nb; ++k)
        bufs[k] = static_cast<char *>(regions[refs[k] >> abi::kRegionShift]) +
                  (refs[k] & abi::kOffsetMask);
      const int64_t *ints = refs + nb;
      const double *floats = reinterpret_cast<const double *>(ints + ni);
      if (target.trace) {
        double begin = target.trace->now();
        target.kernels[id](target.ctx, bufs, ints, floats, stream);
        target.trace->add(id, stream, ints, begin, target.trace->now());
      } else if (target.aroundLaunch) {
        target.aroundLaunch(target.hookCtx, false, id, stream, ints);
        target.kernels[id](target.ctx, bufs, ints, floats, stream);
        target.aroundLaunch(target.hookCtx, true, id, stream, ints);
      } else {
        target.kernels[id](target.ctx, bufs, ints, floats, stream);
      }
      p = ints + ni + nf;
      continue;
    }
    default:
      fatal("compiled program: unknown opcode %lld at word %lld",
            (long long)p[0], (long long)(p - program));
    }
  }
}

std::string
shardc::runtime::validateProgram(const int64_t *program,
                                 const int64_t regionBytes[abi::kNumRegions]) {
  auto at = [&](const int64_t *p) {
    return " (record at word " + std::to_string(p - program) + ")";
  };
  for (const int64_t *p = program;;) {
    switch (p[0]) {
    case abi::kOpEnd:
      return "";
    case abi::kOpEventRecord:
    case abi::kOpEventWait:
      if (p[1] < 0 || p[2] < 0 || p[2] >= abi::kNumStreams)
        return "event " + std::to_string(p[1]) + " on stream " +
               std::to_string(p[2]) + " is out of range" + at(p);
      p += 3;
      continue;
    case abi::kOpKernel: {
      int64_t id = p[1], stream = p[2], nb = p[3], ni = p[4], nf = p[5];
      if (id < 0 || id >= abi::kNumKernels)
        return "unknown kernel id " + std::to_string(id) + at(p);
      const abi::KernelInfo &k = abi::kKernels[id];
      if (stream < 0 || stream >= abi::kNumStreams)
        return std::string(k.name) + " on stream " + std::to_string(stream) +
               ", which the runtime does not have" + at(p);
      const int64_t *refs = p + abi::kKernelHeaderWords;
      std::string wrong = abi::checkKernelArgs(k, nb, refs + nb, ni, nf);
      if (!wrong.empty())
        return std::string(k.name) + " " + wrong + "; expected " +
               abi::kernelLayout(k) + at(p);
      for (int64_t b = 0; b < nb; ++b) {
        int64_t region = refs[b] >> abi::kRegionShift;
        int64_t offset = refs[b] & abi::kOffsetMask;
        if (region < 0 || region >= abi::kNumRegions ||
            offset > regionBytes[region])
          return std::string(k.name) + " buffer #" + std::to_string(b) +
                 " lies outside its region" + at(p);
      }
      p = refs + nb + ni + nf;
      continue;
    }
    default:
      return "unknown opcode " + std::to_string(p[0]) + at(p);
    }
  }
}

int64_t shardc::runtime::programWords(const int64_t *program) {
  const int64_t *p = program;
  while (p[0] != abi::kOpEnd)
    p += abi::recordWords(p);
  return int64_t(p - program) + 1;
}
