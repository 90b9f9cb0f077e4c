//===- shardc.cpp - the shardc compiler driver ----------------------------===//
//
//   shardc [MODEL] [-o FILE] [--emit mlir|train|rt|llvm|obj|exe]
//          [--target cpu] [--mesh N|RxS] [--seq-len N] [--micro-batch N] ...
//
// MODEL is a preset name, a Hugging Face config.json (or its directory) or
// an ONNX model (*.onnx). The flags are compiler/Options.h's; the work is
// compiler/Driver.cpp's.
//
//===----------------------------------------------------------------------===//
#include "compiler/Driver.h"
#include "compiler/Options.h"
#include "frontends/meta/ModelConfig.h"
#include "frontends/onnx/Importer.h"
#include "runtime/text.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <new>

using namespace llvm;

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // Out of memory is a one-line error saying what was under way, not
  // LLVM's crash report: operator new throws std::bad_alloc again (InitLLVM
  // installed a handler that aborts), caught below; LLVM's own allocation
  // failures end here.
  std::set_new_handler(nullptr);
  install_bad_alloc_error_handler([](void *, const char *, bool) {
    std::fprintf(stderr, "shardc: error: out of memory while %s\n",
                 shardc::compileActivity().c_str());
    std::fflush(stderr);
    std::_Exit(1);
  });
  shardc::DriverOptions options;
  options.bindOptions();
  cl::SetVersionPrinter([](raw_ostream &os) { os << "shardc 0.1\n"; });
  std::string presets;
  for (const std::string &name : shardc::meta::presetNames())
    presets += (presets.empty() ? "" : ", ") + name;
  std::string overview =
      "shardc: compile a transformer into a training executable\n\n"
      "  shardc tiny -o train && ./train --steps 10\n\n"
      "MODEL is a preset (" +
      presets +
      ") or a Hugging Face config.json (model_type gpt2 or llama) or a "
      "directory holding one, or an ONNX model (*.onnx, opsets 13 to 21). "
      "The default is 'tiny'.\n";
  cl::ParseCommandLineOptions(argc, argv, overview);

  if (options.output.supportedOps) {
    for (const std::string &op : shardc::onnx_import::supportedOps())
      outs() << op << "\n";
    return 0;
  }
  // Errors quote names from the input files: printed printable, one line.
  try {
    Error error = options.validate();
    if (!error)
      error = shardc::compile(options);
    if (error) {
      WithColor::error(errs(), "shardc")
          << shardc::runtime::printable(toString(std::move(error))) << "\n";
      return 1;
    }
  } catch (...) {
    WithColor::error(errs(), "shardc")
        << shardc::runtime::describeCurrentException(shardc::compileActivity())
        << "\n";
    return 1;
  }
  return 0;
}
