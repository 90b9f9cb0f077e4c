//===- Driver.h - shardc's compilation, from model to executable -*- C++ -*-===//
#ifndef SHARDC_COMPILER_DRIVER_H
#define SHARDC_COMPILER_DRIVER_H

#include "compiler/Options.h"

#include "llvm/Support/Error.h"

namespace shardc {

/// Imports the model, writes an ONNX model's side files (initial weights,
/// graph template), runs the pipeline up to what `--emit` asks and writes
/// it. Errors name the file, op or flag at fault.
llvm::Error compile(const DriverOptions &options);

/// What compile() is doing now ("importing model.onnx", "linking train"),
/// for the message of a failure that is not an llvm::Error (out of memory).
const std::string &compileActivity();

} // namespace shardc

#endif // SHARDC_COMPILER_DRIVER_H
