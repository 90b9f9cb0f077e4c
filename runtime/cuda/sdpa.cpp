//===- sdpa.cpp - cuDNN's fused attention for the CUDA backend ------------===//
//
// See sdpa.h. The graphs (sdpa_graph.h) are cudnn-frontend's SDPA node
// forward with stats, and its backward with the deterministic algorithm or
// not (SdpaShape::deterministic, sdpa_grad's int; the forward's graphs are
// built with the deterministic backward, the default);
// every operand is given by its strides: dense [B,H,T,D] / [B,G,S,D], or
// rows of a fused projection's output (abi::kAttentionRows).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/sdpa_graph.h"

#include "runtime/abi/abi.h"
#include "runtime/cuda/context.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

namespace fe = cudnn_frontend;
using namespace shardc::runtime;
using namespace shardc::runtime::cuda;

#define CUDNN_CHECK(call)                                                      \
  do {                                                                         \
    cudnnStatus_t st_ = (call);                                                \
    if (st_ != CUDNN_STATUS_SUCCESS)                                           \
      ::shardc::runtime::fatal("%s failed at %s:%d: %s", #call, __FILE__,      \
                               __LINE__, cudnnGetErrorString(st_));            \
  } while (0)

namespace abi = shardc::abi;

namespace {

using Graph = fe::graph::Graph;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

/// `t` as a dense row-major 4-d tensor [n0, n1, n2, n3] with `uid`.
fe::graph::Tensor_attributes &dense(fe::graph::Tensor_attributes &t,
                                    int64_t uid, int64_t n0, int64_t n1,
                                    int64_t n2, int64_t n3) {
  return t.set_uid(uid)
      .set_dim({n0, n1, n2, n3})
      .set_stride({n1 * n2 * n3, n2 * n3, n3, 1});
}

/// The operands of an attention of shape `s`, by role: q (dq), k (dk),
/// v (dv), o (dO) -- [B, heads, rows, D] at the strides of s's layout.
struct Operand {
  int64_t heads, rows, ld;
};
Operand operandOf(const SdpaShape &s, char role) {
  switch (role) {
  case 'q':
    return {s.H, s.T, s.ld_q};
  case 'k':
    return {s.G, s.S, s.ld_k};
  case 'v':
    return {s.G, s.S, s.ld_v};
  default:
    return {s.H, s.T, s.ld_o};
  }
}

/// `t` as operand `role` of `s` with `uid`.
fe::graph::Tensor_attributes &laidOut(fe::graph::Tensor_attributes &t,
                                      int64_t uid, const SdpaShape &s,
                                      char role) {
  Operand o = operandOf(s, role);
  abi::AttentionStrides st =
      abi::attentionStrides(s.layout, o.heads, o.rows, s.D, o.ld);
  return t.set_uid(uid)
      .set_dim({s.B, o.heads, o.rows, s.D})
      .set_stride({st.b, st.h, st.t, 1});
}

/// An input of the graph: operand `role` of `s`.
TensorPtr tensor(Graph &g, const char *name, int64_t uid, const SdpaShape &s,
                 char role) {
  fe::graph::Tensor_attributes t;
  t.set_name(name);
  return g.tensor(laidOut(t, uid, s, role));
}

/// The dense f32 stats [B,H,T,1] (an input of the backward).
TensorPtr statsTensor(Graph &g, const SdpaShape &s) {
  fe::graph::Tensor_attributes t;
  t.set_name("Stats");
  auto stats = g.tensor(dense(t, kUidStats, s.B, s.H, s.T, 1));
  stats->set_data_type(fe::DataType_t::FLOAT);
  return stats;
}

/// `t`, a node's result, as output operand `role` of `s`.
void output(const TensorPtr &t, int64_t uid, const SdpaShape &s, char role) {
  laidOut(t->set_output(true), uid, s, role);
}

/// A described device's SM version (90 for sm_90): its JSON's "deviceVer"
/// (900); 0 if it has none.
int32_t smVersionOf(const fe::DeviceProperties &device) {
  std::vector<uint8_t> json;
  if (device.serialize(json).is_bad())
    return 0;
  std::string text(json.begin(), json.end());
  size_t at = text.find("\"deviceVer\"");
  if (at == std::string::npos || (at = text.find(':', at)) == std::string::npos)
    return 0;
  return int32_t(std::atoi(text.c_str() + at + 1) / 10);
}

/// A graph with bf16 io and f32 math, for `device` if set. The frontend's
/// SDPA checks ask the current GPU for its SM version unless the graph
/// names one: a described device names its own.
std::shared_ptr<Graph>
newGraph(std::shared_ptr<const fe::DeviceProperties> device) {
  auto g = std::make_shared<Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  if (device) {
    g->set_device_properties(device);
    if (int32_t sm = smVersionOf(*device))
      g->set_sm_version(sm);
  }
  return g;
}

/// O[B,H,T,D] bf16 and Stats[B,H,T,1] f32 from Q, K, V.
std::shared_ptr<Graph>
forwardGraph(const SdpaShape &s,
             std::shared_ptr<const fe::DeviceProperties> device) {
  auto g = newGraph(device);
  auto q = tensor(*g, "Q", kUidQ, s, 'q');
  auto k = tensor(*g, "K", kUidK, s, 'k');
  auto v = tensor(*g, "V", kUidV, s, 'v');
  auto attrs = fe::graph::SDPA_attributes()
                   .set_name("shardc_sdpa")
                   .set_generate_stats(true)
                   .set_attn_scale(s.scale)
                   .set_causal_mask(s.causal)
                   .set_implementation(fe::AttentionImplementation_t::COMPOSITE);
  auto [o, stats] = g->sdpa(q, k, v, attrs);
  output(o, kUidO, s, 'o');
  dense(stats->set_output(true), kUidStats, s.B, s.H, s.T, 1);
  stats->set_data_type(fe::DataType_t::FLOAT);
  return g;
}

/// dQ, dK, dV (bf16) from Q, K, V, O, dO and Stats; deterministic or not
/// by s.deterministic (without, cudnn-frontend takes an f32 dQ accumulator
/// [B,H,T,D] in its workspace instead of the engine's dP buffer).
std::shared_ptr<Graph>
backwardGraph(const SdpaShape &s,
              std::shared_ptr<const fe::DeviceProperties> device) {
  auto g = newGraph(device);
  auto q = tensor(*g, "Q", kUidQ, s, 'q');
  auto k = tensor(*g, "K", kUidK, s, 'k');
  auto v = tensor(*g, "V", kUidV, s, 'v');
  auto o = tensor(*g, "O", kUidO, s, 'o');
  auto dO = tensor(*g, "dO", kUidDO, s, 'o');
  auto stats = statsTensor(*g, s);
  auto attrs = fe::graph::SDPA_backward_attributes()
                   .set_name("shardc_sdpa_backward")
                   .set_attn_scale(s.scale)
                   .set_causal_mask(s.causal)
                   .set_deterministic_algorithm(s.deterministic);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dO, stats, attrs);
  output(dq, kUidDQ, s, 'q');
  output(dk, kUidDK, s, 'k');
  output(dv, kUidDV, s, 'v');
  return g;
}

/// `g` through to its execution plans; "" or the frontend's reason.
std::string buildPlans(Graph &g, cudnnHandle_t handle, int64_t &workspace) {
  auto step = [](fe::error_t e, const char *what) -> std::string {
    return e.is_good() ? "" : std::string(what) + ": " + e.get_message();
  };
  std::string why = step(g.validate(), "validate");
  if (why.empty())
    why = step(g.build_operation_graph(handle), "build_operation_graph");
  if (why.empty())
    why = step(g.create_execution_plans({fe::HeurMode_t::A}),
               "create_execution_plans");
  if (why.empty())
    why = step(g.check_support(handle), "check_support");
  if (why.empty())
    why = step(g.build_plans(handle), "build_plans");
  if (why.empty())
    why = step(g.get_workspace_size(workspace), "get_workspace_size");
  return why;
}

} // namespace

std::string cuda::buildSdpaGraphs(
    const SdpaShape &s, cudnnHandle_t handle,
    std::shared_ptr<const cudnn_frontend::DeviceProperties> device,
    SdpaGraphs &out) {
  try {
    out.forward = forwardGraph(s, device);
    std::string why = buildPlans(*out.forward, handle, out.forwardWorkspace);
    if (!why.empty())
      return "forward: " + why;
    out.backward = backwardGraph(s, device);
    why = buildPlans(*out.backward, handle, out.backwardWorkspace);
    return why.empty() ? "" : "backward: " + why;
  } catch (const std::exception &e) {
    // The frontend throws where it has no error to return (an SDPA it
    // cannot place): a decline like any other.
    return e.what();
  }
}

namespace {

/// A shape's entry: its graphs, or why cuDNN declined it.
struct Entry {
  SdpaGraphs graphs;
  bool declined = false;
};

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       bool, float, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, int64_t, bool>;

std::mutex cacheMutex;
std::map<Key, Entry> cache;

cudnnHandle_t handleOf(cuda::Context &c) {
  if (!c.cudnn) {
    cudnnHandle_t h = nullptr;
    CUDNN_CHECK(cudnnCreate(&h));
    c.cudnn = h;
  }
  return static_cast<cudnnHandle_t>(c.cudnn);
}

/// "B=.. H=.. ..." for notes.
std::string describe(const SdpaShape &s) {
  char text[160];
  std::snprintf(text, sizeof text,
                "B=%lld H=%lld G=%lld T=%lld S=%lld D=%lld%s",
                (long long)s.B, (long long)s.H, (long long)s.G,
                (long long)s.T, (long long)s.S, (long long)s.D,
                s.causal ? " causal" : "");
  return text;
}

/// The shape's graphs, built on first use with the plan's workspace sizes
/// (`fwdBytes`, `bwdBytes`) as their bound; null if declined.
const SdpaGraphs *graphsFor(cuda::Context &c, const SdpaShape &s, int64_t fwdBytes,
                            int64_t bwdBytes) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  Key key{s.B,       s.H,      s.G,      s.T,    s.S,    s.D,
          s.causal,  s.scale,  fwdBytes, bwdBytes, s.layout, s.ld_q,
          s.ld_k,    s.ld_v,   s.ld_o,   s.deterministic};
  auto it = cache.find(key);
  if (it == cache.end()) {
    Entry e;
    const char *env = std::getenv("SHARDC_ATTENTION");
    bool kernels = env && std::string(env) == "kernels";
    std::string why =
        kernels ? "SHARDC_ATTENTION=kernels"
                : buildSdpaGraphs(s, handleOf(c), nullptr, e.graphs);
    if (why.empty() && (e.graphs.forwardWorkspace > fwdBytes ||
                        e.graphs.backwardWorkspace > bwdBytes))
      why = "its workspace (forward " +
            std::to_string(e.graphs.forwardWorkspace) + ", backward " +
            std::to_string(e.graphs.backwardWorkspace) +
            " bytes) exceeds the plan's (" + std::to_string(fwdBytes) + ", " +
            std::to_string(bwdBytes) + ")";
    e.declined = !why.empty();
    if (e.declined)
      std::fprintf(stderr,
                   "note: attention %s: not cuDNN (%s); it runs on the "
                   "f32-math kernels\n",
                   describe(s).c_str(), why.c_str());
    else
      std::fprintf(stderr,
                   "note: attention %s: cuDNN %lld fused SDPA, %s "
                   "backward (workspace %lld and %lld bytes of the plan's "
                   "%lld and %lld)\n",
                   describe(s).c_str(), (long long)cudnnVersion(),
                   s.deterministic ? "deterministic" : "non-deterministic",
                   (long long)e.graphs.forwardWorkspace,
                   (long long)e.graphs.backwardWorkspace, (long long)fwdBytes,
                   (long long)bwdBytes);
    it = cache.emplace(key, std::move(e)).first;
  }
  return it->second.declined ? nullptr : &it->second.graphs;
}

void execute(cuda::Context &c, Graph &g, std::unordered_map<int64_t, void *> pack,
             void *workspace, int64_t stream) {
  cudnnHandle_t h = handleOf(c);
  CUDNN_CHECK(cudnnSetStream(h, c.stream(stream)));
  fe::error_t e = g.execute(h, pack, workspace);
  if (!e.is_good())
    fatal("cuDNN attention: execute failed: %s", e.get_message().c_str());
}

} // namespace

SdpaPath cuda::sdpaForward(cuda::Context &c, const SdpaShape &s, const void *q,
                           const void *k, const void *v, void *o, float *lse,
                           void *workspace, int64_t workspaceBytes,
                           int64_t stream) {
  int64_t bwdBytes = abi::sdpaWorkspaceBytes(s.B, s.H, s.G, s.T, s.S, s.D,
                                             /*grad=*/true, s.deterministic);
  const SdpaGraphs *g = graphsFor(c, s, workspaceBytes, bwdBytes);
  if (!g)
    return SdpaPath::Declined;
  execute(c, *g->forward,
          {{kUidQ, const_cast<void *>(q)},
           {kUidK, const_cast<void *>(k)},
           {kUidV, const_cast<void *>(v)},
           {kUidO, o},
           {kUidStats, lse}},
          workspace, stream);
  return SdpaPath::Cudnn;
}

SdpaPath cuda::sdpaBackward(cuda::Context &c, const SdpaShape &s, const void *q,
                            const void *k, const void *v, const void *o,
                            const float *lse, const void *dO, void *dq,
                            void *dk, void *dv, void *workspace,
                            int64_t workspaceBytes, int64_t stream) {
  int64_t fwdBytes = abi::sdpaWorkspaceBytes(s.B, s.H, s.G, s.T, s.S, s.D,
                                             /*grad=*/false);
  const SdpaGraphs *g = graphsFor(c, s, fwdBytes, workspaceBytes);
  if (!g)
    return SdpaPath::Declined;
  execute(c, *g->backward,
          {{kUidQ, const_cast<void *>(q)},
           {kUidK, const_cast<void *>(k)},
           {kUidV, const_cast<void *>(v)},
           {kUidO, const_cast<void *>(o)},
           {kUidStats, const_cast<float *>(lse)},
           {kUidDO, const_cast<void *>(dO)},
           {kUidDQ, dq},
           {kUidDK, dk},
           {kUidDV, dv}},
          workspace, stream);
  return SdpaPath::Cudnn;
}

int64_t cuda::cudnnVersion() { return int64_t(cudnnGetVersion()); }

void cuda::sdpaRelease(cuda::Context &c) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  cache.clear();
  if (c.cudnn)
    cudnnDestroy(static_cast<cudnnHandle_t>(c.cudnn));
  c.cudnn = nullptr;
}
