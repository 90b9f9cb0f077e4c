//===- Report.h - per-rank memory and communication report -----*- C++ -*-===//
#ifndef SHARDC_COMPILER_REPORT_H
#define SHARDC_COMPILER_REPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace shardc {

/// Prints, for a module lowered to planned rt step functions (after
/// buildNNToRtPipeline), the bytes each rank holds (parameters, gradients,
/// optimizer state, peak gathered parameters, activations, the planned
/// peak) and the bytes each kind of collective moves on each mesh axis.
void printReport(mlir::ModuleOp module, llvm::raw_ostream &os);

/// What rt-predict found (attrs::kPredict on the step functions) for a
/// step of `gradAccum` micro-steps and one optimizer step, per rank.
struct Prediction {
  double seconds = 0, compute = 0, communication = 0, exposed = 0;
  double tokens = 0; ///< a step's tokens on one rank
  double flops = 0;  ///< a step's GEMM and attention FLOPs on one rank
  double peakFlops = 0;
  std::string machine, summary, dtype;
  double memoryBudget = 0;
  /// (name, calls, seconds) per kind of launch, costliest first.
  std::vector<std::tuple<std::string, int64_t, double>> costs;
  double tokensPerSecond() const { return seconds > 0 ? tokens / seconds : 0; }
  double mfu() const {
    return seconds > 0 && peakFlops > 0 ? flops / seconds / peakFlops : 0;
  }
};
/// The prediction of a module rt-predict ran on; nullopt without one.
std::optional<Prediction> readPrediction(mlir::ModuleOp module,
                                         int64_t gradAccum);
/// The planned peak of a rank's memory (the report's last figure): what
/// is on the device, or on the host for a CPU program.
int64_t plannedPeakBytes(mlir::ModuleOp module);
/// "predicted step time: ..." and the costliest launches.
void printPrediction(const Prediction &p, llvm::raw_ostream &os);

} // namespace shardc

#endif // SHARDC_COMPILER_REPORT_H
