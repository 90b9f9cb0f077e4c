//===- shardc-weights-check.cpp - would --init-from accept these files? ---===//
//
//   shardc-weights-check [--allow-nonfinite] FILE...
//
// Reads each safetensors file as `./train --init-from` does: the header
// through the one reader (runtime/formats/safetensors.h, held to the
// format's rules), then every tensor as f32, counting NaN and infinity.
// Each file is read in a child process under a 20 s alarm, so that a file
// that crashed or hung the reader is reported as such and the rest go on.
// One line per file, tab-separated: FILE, then "ok", "refused", "crash"
// or "hang", then the reason. Exit status: 0 if every file was read or
// refused (what a campaign wants), 1 if any crashed or hung.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/safetensors.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

using namespace shardc::runtime;

namespace {

/// What --init-from does with the file: "" or the refusal.
std::string read(const std::string &path, bool allowNonfinite) {
  try {
    SafetensorsFile file(path);
    std::vector<float> values;
    for (const auto &[name, entry] : file.entries()) {
      values.resize(size_t(entry.numel()));
      file.readF32(name, 0, entry.numel(), values.data());
      int64_t bad = 0;
      for (float v : values)
        bad += !std::isfinite(v);
      if (bad && !allowNonfinite)
        return path + ": tensor '" + name + "' holds " + std::to_string(bad) +
               " non-finite values (NaN or infinity)";
    }
    return "";
  } catch (const std::exception &e) {
    return e.what();
  }
}

} // namespace

int main(int argc, char **argv) {
  bool allowNonfinite = false;
  std::vector<std::string> files;
  for (int k = 1; k < argc; ++k) {
    if (std::strcmp(argv[k], "--allow-nonfinite") == 0)
      allowNonfinite = true;
    else if (std::strcmp(argv[k], "--help") == 0) {
      std::printf("usage: shardc-weights-check [--allow-nonfinite] FILE...\n"
                  "Reads each safetensors file as ./train --init-from does; "
                  "one line per file: FILE<TAB>ok|refused|crash|hang<TAB>why\n");
      return 0;
    } else
      files.push_back(argv[k]);
  }
  if (files.empty()) {
    std::fprintf(stderr, "error: shardc-weights-check: no file given\n");
    return 2;
  }
  bool failed = false;
  for (const std::string &path : files) {
    int pipefd[2];
    if (pipe(pipefd) != 0) {
      std::perror("pipe");
      return 2;
    }
    std::fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
      close(pipefd[0]);
      alarm(20);
      std::string why = read(path, allowNonfinite);
      ssize_t ignored = write(pipefd[1], why.data(), why.size());
      (void)ignored;
      _exit(why.empty() ? 0 : 1);
    }
    close(pipefd[1]);
    std::string why;
    char buf[4096];
    for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof(buf))) > 0;)
      why.append(buf, size_t(n));
    close(pipefd[0]);
    int status = 0;
    waitpid(child, &status, 0);
    const char *verdict = "ok";
    if (WIFSIGNALED(status)) {
      verdict = WTERMSIG(status) == SIGALRM ? "hang" : "crash";
      why = strsignal(WTERMSIG(status));
      failed = true;
    } else if (WEXITSTATUS(status) != 0) {
      verdict = "refused";
    }
    for (char &c : why)
      if (c == '\n' || c == '\t')
        c = ' ';
    std::printf("%s\t%s\t%s\n", path.c_str(), verdict, why.c_str());
  }
  return failed ? 1 : 0;
}
