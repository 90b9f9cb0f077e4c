//===- FuzzInput.h - a fuzz input as files on disk ---------------*- C++ -*-===//
//
// The parsers under test read files by path, as the tools do, so each fuzz
// target writes its input's parts into a scratch directory of its own
// (under $TMPDIR, one per process) and hands the reader their paths. An
// input is a one-byte `mode`, then parts separated by kPartMarker; the
// dictionaries (test/fuzz/*.dict) carry the marker, so libFuzzer's
// mutations add and drop parts.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TEST_FUZZ_FUZZINPUT_H
#define SHARDC_TEST_FUZZ_FUZZINPUT_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

namespace shardc::fuzz {

constexpr std::string_view kPartMarker = "\n--part--\n";

struct FuzzInput {
  uint8_t mode = 0;
  std::vector<std::string_view> parts;
};

/// data -> mode (its first byte, 0 when empty) and the parts after it.
inline FuzzInput splitInput(const uint8_t *data, size_t size) {
  FuzzInput in;
  std::string_view rest(reinterpret_cast<const char *>(data), size);
  if (!rest.empty()) {
    in.mode = uint8_t(rest[0]);
    rest.remove_prefix(1);
  }
  for (;;) {
    size_t at = rest.find(kPartMarker);
    in.parts.push_back(rest.substr(0, at));
    if (at == std::string_view::npos)
      break;
    rest.remove_prefix(at + kPartMarker.size());
  }
  return in;
}

inline const std::string &scratchDir();

/// Removes the scratch directory (at exit).
inline void removeScratchDir() {
  std::string cmd = "rm -rf '" + scratchDir() + "'";
  if (std::system(cmd.c_str()) != 0)
    std::fprintf(stderr, "could not remove %s\n", scratchDir().c_str());
}

/// This process's scratch directory (made once, removed at exit; the files
/// in it are rewritten by each input). Never destroyed: the exit handler
/// that removes it reads it.
inline const std::string &scratchDir() {
  static const std::string *dir = [] {
    const char *tmp = std::getenv("TMPDIR");
    auto *d = new std::string(std::string(tmp && *tmp ? tmp : "/tmp") +
                              "/shardc-fuzz-" + std::to_string(getpid()));
    std::string cmd = "mkdir -p '" + *d + "'";
    if (std::system(cmd.c_str()) != 0)
      std::abort();
    return d;
  }();
  static const bool cleaned = std::atexit(removeScratchDir) == 0;
  (void)cleaned;
  return *dir;
}

/// Writes `bytes` to scratchDir()/name and returns its path.
inline std::string writePart(const std::string &name, std::string_view bytes) {
  std::string path = scratchDir() + "/" + name;
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size())
    std::abort();
  std::fclose(f);
  return path;
}

/// Removes scratchDir()/name if it is there.
inline void removePart(const std::string &name) {
  std::remove((scratchDir() + "/" + name).c_str());
}

} // namespace shardc::fuzz

#endif // SHARDC_TEST_FUZZ_FUZZINPUT_H
