//===- flags.h - the trainer's command line ------------------------*- C++ -*-===//
#ifndef SHARDC_RUNTIME_TRAINER_FLAGS_H
#define SHARDC_RUNTIME_TRAINER_FLAGS_H

#include "runtime/program/model.h"
#include "runtime/program/options.h"

#include <cstdint>
#include <string>

namespace shardc::runtime {

/// Whether --help or -h is among the arguments.
bool wantsHelp(int argc, char **argv);
/// Prints the usage of the compiled model `m`.
void printUsage(const char *argv0, const Manifest &m);
/// Parses the flags; throws std::runtime_error naming the flag at fault.
Options parseOptions(int argc, char **argv, const Manifest &m);

/// Checks the files the run will write before its first step: never a
/// device node, a FIFO or a directory (where a file is written), never an
/// input of the same run (--data, --init-from), in an existing writable
/// directory. Throws std::runtime_error naming the flag and the path.
void checkOutputs(const Options &o);

/// The same check for one output: `what` names it in errors ("--log
/// FILE"), `directory` says whether a directory is written there, and
/// `inputs` are the (flag, path) pairs of the run's inputs.
void checkOutputPath(
    const std::string &what, const std::string &path, bool directory,
    const std::vector<std::pair<std::string, std::string>> &inputs);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_TRAINER_FLAGS_H
