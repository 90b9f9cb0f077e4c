//===- cudnn_graph.h - the emulated cuDNN's operation graphs ------*- C++ -*-===//
//
// What cudnn.cpp (the backend API: descriptors, attributes, finalize,
// heuristics, plans) hands to cudnn_graph.cpp (the engine): the finalized
// tensors and operations of an operation graph, checked and ordered into a
// Program once, then evaluated on the host for each execute, in stream
// order.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_EMU_CUDNN_GRAPH_H
#define SHARDC_RUNTIME_CUDA_EMU_CUDNN_GRAPH_H

#include <cudnn.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardc::emu::cudnn {

/// A refusal or a misuse: the status the API call returns and the message
/// cudnnGetLastErrorString gives.
struct Error : std::runtime_error {
  cudnnStatus_t status;
  Error(cudnnStatus_t status, const std::string &message)
      : std::runtime_error(message), status(status) {}
};

[[noreturn]] inline void fail(cudnnStatus_t status, const std::string &why) {
  throw Error(status, why);
}

/// The header's name of an enumerator: `prefix` (e.g. "CUDNN_POINTWISE_")
/// and value; "<prefix>? (value)" when the header has none.
std::string enumName(const char *prefix, int64_t value);

/// A finalized CUDNN_BACKEND_TENSOR_DESCRIPTOR.
struct TensorInfo {
  int64_t uid = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::vector<int64_t> dims, strides;
  bool isVirtual = false, byValue = false;
};

enum class OpKind { Pointwise, Matmul, Reduction, Reshape };

/// A finalized operation: its kind, its mode and its tensors, in the order
/// of the op's ports (pointwise: x, b, t; matmul: a, b; reduction and
/// reshape: x).
struct OpInfo {
  OpKind kind = OpKind::Pointwise;
  cudnnPointwiseMode_t pointwise = CUDNN_POINTWISE_IDENTITY;
  cudnnReduceTensorOp_t reduction = CUDNN_REDUCE_TENSOR_ADD;
  int64_t axis = -1;                           ///< GEN_INDEX's
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;  ///< math precision
  double alpha1 = 1, alpha2 = 1;               ///< pointwise input scales
  std::vector<TensorInfo> inputs;
  TensorInfo output;
  /// Matmul: the GEMM M, N and K override tensors
  /// (CUDNN_ATTR_OPERATION_MATMUL_GEMM_{M,N,K}_OVERRIDE_DESC), where set:
  /// per batch entry, the rows, columns and reduction length computed.
  std::optional<TensorInfo> overrides[3];
  double padding = 0; ///< matmul: CUDNN_ATTR_MATMUL_PADDING_VALUE
  /// What the emulated engine lacks to run it ("" if nothing): set where
  /// the descriptor is finalized, reported by the engine's heuristics.
  std::string unsupported;
};

struct Program;

/// Checks `ops` (one operation graph) and orders them: malformed graphs
/// throw Error(BAD_PARAM); what the engine does not implement is recorded
/// (unsupportedReason).
std::shared_ptr<const Program> buildProgram(const std::vector<OpInfo> &ops);

/// `p`'s steps, one a line: kind and mode, input and output tensors.
std::string describe(const Program &p);

/// Why the emulated engine cannot run `p` ("" if it can).
const std::string &unsupportedReason(const Program &p);

/// The workspace (bytes) the real cuDNN's engine asks for `p` beyond the
/// frontend's own (which cudnn-frontend sizes and places itself): for the
/// SDPA backward (a graph reading f32 Stats [B,H,T,1]) in its dP form --
/// set_deterministic_algorithm(true), whose dQ is the dS.K matmul's output
/// itself -- the engine's bf16 dP matrix [B,H,T up to 64,S up to 128], the
/// ABI's bound's term (abi::sdpaWorkspaceBytes); 0 for every other graph,
/// the non-deterministic backward's included (its dQ goes through an f32
/// dQ accumulator, the frontend's workspace). The emulated engine asks for
/// this much, and scribbles over it on each run, as the real one uses it.
int64_t engineWorkspace(const Program &p);

/// One execute's tensors: device pointers and by-value scalars by uid.
struct Binding {
  std::map<int64_t, void *> pointers;
  std::map<int64_t, double> scalars;
};

/// Binds a variant pack's uids and pointers to `p`'s tensors: every tensor
/// the graph reads or writes must have one; by-value scalars are read now
/// (from host memory, as cuDNN reads them when it launches). Device
/// tensors must lie in emulated device (or pinned) memory.
Binding bind(const Program &p, const std::vector<int64_t> &uids,
             const std::vector<void *> &pointers);

/// Evaluates `p` on the host: f32 math, each output rounded to its
/// declared type and stored at its declared strides. A matmul override
/// length outside [0, dim] is a fault: the emulated CUDA runtime's sticky
/// cudaErrorIllegalAddress, the rest of the graph not run.
void run(const Program &p, const Binding &b);

} // namespace shardc::emu::cudnn

#endif // SHARDC_RUNTIME_CUDA_EMU_CUDNN_GRAPH_H
