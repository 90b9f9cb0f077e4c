//===- infer.cpp - an --infer build's run ---------------------------------===//
#include "runtime/formats/checkpoint_io.h"
#include "runtime/formats/files.h"
#include "runtime/runtime.h"
#include "runtime/trainer/flags.h"
#include "runtime/trainer/memory.h"
#include "runtime/trainer/trainer.h"

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

using namespace shardc;
using namespace shardc::runtime;

/// An --infer build: reads each input slot from a raw file, runs the graph
/// once, writes each output slot to a raw file (little-endian, row-major;
/// f32, int32, bool as one byte; f64, f16 or bf16 where the model's file
/// declares the input or output so, converted from and to f32).
int shardc::runtime::runInfer(const Manifest &m, int argc, char **argv) {
  doing = "running inference";
  std::map<std::string, std::string> inputs, outputs;
  for (int k = 1; k < argc; ++k) {
    std::string arg = argv[k];
    if ((arg == "--input" || arg == "--output") && k + 1 < argc) {
      std::string spec = argv[++k];
      size_t eq = spec.rfind('=');
      if (eq == std::string::npos || eq == 0)
        throw std::runtime_error(arg + " expects NAME=FILE, got '" + spec + "'");
      (arg == "--input" ? inputs : outputs)[spec.substr(0, eq)] = spec.substr(eq + 1);
    } else {
      throw std::runtime_error("unknown option '" + arg +
                               "' (an --infer build takes --input NAME=FILE "
                               "and --output NAME=FILE)");
    }
  }
  // Outputs are checked before anything runs, as the trainer's are: each a
  // compiled output, a regular file (or a new one in a writable
  // directory), never one of the inputs.
  std::vector<std::pair<std::string, std::string>> inputFiles;
  for (const auto &[name, file] : inputs)
    inputFiles.push_back({"--input " + name, file});
  for (const auto &[name, file] : outputs) {
    m.ioSlot(name);
    checkOutputPath("--output " + name + "=" + file, file, false, inputFiles);
  }
  std::unique_ptr<Backend> backend =
      makeBackend(m.target, nullptr, m.constantsBytes);
  Memory mem(*backend, m, /*touchArena=*/true);
  if (!m.params.empty())
    loadParameters(m, besideExecutable(m.initFile), *backend,
                   mem.region(abi::kRegionParams), 0);
  for (const auto &[name, file] : inputs) {
    const TensorSlot &slot = m.ioSlot(name);
    std::string error;
    uint64_t size = 0;
    FileHandle f = openInputFile(file, UINT64_MAX, "", error, &size);
    if (!f)
      throw std::runtime_error(error + " (input '" + name + "')");
    // An f32 slot whose file is f64, f16 or bf16 is read in that type and
    // converted (the graph computes in f32).
    bool converted = slot.convertsFile();
    int64_t bytes = fileBytes(slot);
    if (size != uint64_t(bytes))
      throw std::runtime_error(file + ": input '" + name + "' needs exactly " +
                               std::to_string(bytes) + " bytes (" +
                               (converted ? slot.fileDtype : slot.dtype) + " " +
                               shapeString(slot.shape) + ")");
    if (converted) {
      std::vector<char> raw(static_cast<size_t>(bytes));
      readAt(f.fd(), file, 0, raw.data(), uint64_t(bytes));
      decodeFile(slot, raw.data(), mem.host<float>(slot));
    } else {
      readAt(f.fd(), file, 0, mem.host<char>(slot), uint64_t(slot.bytes));
    }
    mem.put(slot);
  }
  mem.run(shardc_program_infer, "infer");
  for (const auto &[name, file] : outputs) {
    const TensorSlot &slot = m.ioSlot(name);
    mem.get(slot);
    const char *data = mem.host<char>(slot);
    int64_t bytes = fileBytes(slot);
    std::vector<char> encoded;
    if (slot.convertsFile()) {
      encoded.resize(static_cast<size_t>(bytes));
      encodeFile(slot, mem.host<float>(slot), encoded.data());
      data = encoded.data();
    }
    DurableFile out(file); // a temporary, fsynced and renamed into place
    out.write(data, uint64_t(bytes));
    out.commit();
  }
  return 0;
}

