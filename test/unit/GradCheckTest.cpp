//===- GradCheckTest.cpp - every VJP rule against finite differences ------===//
//
// For each differentiable nn op: a model `loss = cross_entropy(op(params))`
// is compiled by the real pipeline (autodiff, lowering, LLVM, link) into a
// shared library; its micro-step's gradients are compared with central
// finite differences of its loss.
//
//===----------------------------------------------------------------------===//
#include "compiler/Pipelines.h"
#include "compiler/Registration.h"
#include "compiler/Target.h"
#include "runtime/backend.h"
#include "runtime/program/model.h"
#include "runtime/runtime.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct GradCase {
  const char *name;
  const char *body; // the model function; its loss is the function result
};

/// A compiled model: its manifest, regions and micro-step.
class Compiled {
public:
  /// Compiles `source`; reports failures through gtest assertions.
  void compile(const std::string &source) {
    mlir::DialectRegistry registry;
    shardc::registerAllDialects(registry);
    mlir::MLIRContext context(registry);
    context.loadAllAvailableDialects();
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    ASSERT_TRUE(module) << "cannot parse:\n" << source;
    mlir::PassManager pm(&context);
    shardc::buildLoweringPipeline(pm, shardc::PipelineOptions());
    ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
    llvm::LLVMContext llvmContext;
    auto llvmModule = shardc::translateToLLVMIR(*module, llvmContext);
    ASSERT_TRUE(llvmModule);
    llvm::SmallString<128> obj, lib;
    ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("gradcheck", "o", obj));
    ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("gradcheck", "so", lib));
    std::string error;
    ASSERT_TRUE(shardc::emitObjectFile(*llvmModule, obj, error)) << error;
    ASSERT_TRUE(shardc::linkSharedLibrary(obj, lib, shardc::defaultTarget(),
                                          error))
        << error;
    // Never unloaded: OpenMP's worker threads outlive a dlclose.
    handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    llvm::sys::fs::remove(obj);
    llvm::sys::fs::remove(lib);
    ASSERT_TRUE(handle) << dlerror();
    micro = static_cast<const int64_t *>(
        dlsym(handle, "shardc_program_micro_step"));
    constants = static_cast<char *>(dlsym(handle, "shardc_constants"));
    auto *json = static_cast<const char *>(dlsym(handle, "shardc_manifest"));
    ASSERT_TRUE(micro && json);
    manifest = shardc::runtime::Manifest::parse(json);
    params.assign(manifest.paramBytes, 0);
    state.assign(manifest.stateBytes, 0);
    io.assign(manifest.ioBytes, 0);
    arena.assign(manifest.arenaBytes + 64, 0);
  }
  float run() {
    float *ctl = reinterpret_cast<float *>(
        io.data() + manifest.ioSlot(shardc::abi::kIoAccumulate).offset);
    ctl[0] = 0.0f; // overwrite the accumulators
    ctl[1] = 1.0f;
    void *regions[shardc::abi::kNumRegions] = {
        params.data(), state.data(), io.data(), arena.data(), constants};
    backend->run(micro, regions);
    float loss;
    std::memcpy(&loss, io.data() + manifest.ioSlot(shardc::abi::kIoLoss).offset, 4);
    return loss;
  }

  float *param(const shardc::runtime::TensorSlot &p) {
    return reinterpret_cast<float *>(params.data() + p.offset);
  }
  const float *grad(const shardc::runtime::TensorSlot &p) {
    return reinterpret_cast<const float *>(
        state.data() +
        manifest.stateSlot(shardc::abi::kStateGrad + p.name).offset);
  }

  shardc::runtime::Manifest manifest;
  std::vector<char> params, state, io, arena;

private:
  void *handle = nullptr;
  const int64_t *micro = nullptr;
  char *constants = nullptr;
  std::unique_ptr<shardc::runtime::Backend> backend =
      shardc::runtime::makeCpuBackend(nullptr);
};

class GradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const GradCase &c = GetParam();
  std::string source =
      "module attributes {nn.model = {vocab_size = 1 : i64, micro_batch = 1 : "
      "i64, seq_len = 1 : i64}} {\n" +
      std::string(c.body) + "\n}\n";
  Compiled m;
  m.compile(source);
  if (HasFatalFailure())
    return;
  std::mt19937 gen(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto &p : m.manifest.params) {
    float *w = m.param(p);
    for (int64_t k = 0; k < p.numel(); ++k)
      w[k] = normal(gen) * (p.init == "ones" ? 0.3f : 1.0f) +
             (p.init == "ones" ? 1.0f : 0.0f);
  }
  // Integer inputs: targets within the last dimension of the logits (one
  // of them ignored), ids within the table.
  for (const auto &s : m.manifest.io) {
    if (s.dtype != "i32")
      continue;
    int32_t *v = reinterpret_cast<int32_t *>(m.io.data() + s.offset);
    for (int64_t k = 0; k < s.numel(); ++k)
      v[k] = int32_t(gen() % 3); // every case has logits of width >= 3
    if (s.name == "targets" && s.numel() > 2)
      v[1] = -100;
  }

  m.run();
  std::vector<std::vector<float>> analytic;
  for (const auto &p : m.manifest.params)
    analytic.emplace_back(m.grad(p), m.grad(p) + p.numel());

  const float h = 1e-2f;
  int checked = 0;
  for (size_t pi = 0; pi < m.manifest.params.size(); ++pi) {
    const auto &p = m.manifest.params[pi];
    float *w = m.param(p);
    for (int64_t k = 0; k < p.numel(); k += p.numel() > 48 ? 7 : 1) {
      float saved = w[k];
      w[k] = saved + h;
      double up = m.run();
      w[k] = saved - h;
      double down = m.run();
      w[k] = saved;
      double fd = (up - down) / (2.0 * h);
      double g = analytic[pi][k];
      EXPECT_NEAR(g, fd, 1e-3 + 5e-3 * std::fabs(fd))
          << c.name << ": d loss / d " << p.name << "[" << k << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

const GradCase kCases[] = {
    {"embedding", R"(
func.func @forward(%ids: tensor<2x3xi32> {nn.input = "ids"}, %t: tensor<2x3xi32> {nn.input = "targets"},
                   %e: tensor<5x6xf32> {nn.param = "e"}) -> tensor<f32> {
  %y = nn.embedding %ids, %e : (tensor<2x3xi32>, tensor<5x6xf32>) -> tensor<2x3x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"linear_bias", R"(
func.func @forward(%t: tensor<2x3xi32> {nn.input = "targets"}, %x: tensor<2x3x5xf32> {nn.param = "x"},
                   %w: tensor<6x5xf32> {nn.param = "w"}, %b: tensor<6xf32> {nn.param = "b"}) -> tensor<f32> {
  %y = nn.linear %x, %w, %b : (tensor<2x3x5xf32>, tensor<6x5xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"linear_in_out", R"(
func.func @forward(%t: tensor<4xi32> {nn.input = "targets"}, %x: tensor<4x5xf32> {nn.param = "x"},
                   %w: tensor<5x6xf32> {nn.param = "w"}) -> tensor<f32> {
  %y = nn.linear %x, %w {weight_in_out} : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"add_broadcast", R"(
func.func @forward(%t: tensor<2x3xi32> {nn.input = "targets"}, %x: tensor<2x3x6xf32> {nn.param = "x"},
                   %p: tensor<6xf32> {nn.param = "p"}) -> tensor<f32> {
  %y = nn.add %x, %p : (tensor<2x3x6xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"mul_broadcast", R"(
func.func @forward(%t: tensor<2x3xi32> {nn.input = "targets"}, %x: tensor<2x3x6xf32> {nn.param = "x"},
                   %p: tensor<3x1xf32> {nn.param = "p"}) -> tensor<f32> {
  %y = nn.mul %x, %p : (tensor<2x3x6xf32>, tensor<3x1xf32>) -> tensor<2x3x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"layer_norm", R"(
func.func @forward(%t: tensor<4xi32> {nn.input = "targets"}, %x: tensor<4x6xf32> {nn.param = "x"},
                   %g: tensor<6xf32> {nn.param = "g", nn.init = "ones"}, %b: tensor<6xf32> {nn.param = "b"}) -> tensor<f32> {
  %y = nn.layer_norm %x, %g, %b : (tensor<4x6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"rms_norm", R"(
func.func @forward(%t: tensor<4xi32> {nn.input = "targets"}, %x: tensor<4x6xf32> {nn.param = "x"},
                   %g: tensor<6xf32> {nn.param = "g", nn.init = "ones"}) -> tensor<f32> {
  %y = nn.rms_norm %x, %g : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"gelu_erf_and_tanh", R"(
func.func @forward(%t: tensor<4xi32> {nn.input = "targets"}, %x: tensor<4x6xf32> {nn.param = "x"}) -> tensor<f32> {
  %a = nn.gelu %x : tensor<4x6xf32>
  %y = nn.gelu %a {approximate = "tanh"} : tensor<4x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"silu", R"(
func.func @forward(%t: tensor<4xi32> {nn.input = "targets"}, %x: tensor<4x6xf32> {nn.param = "x"}) -> tensor<f32> {
  %y = nn.silu %x : tensor<4x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"softmax_axis0", R"(
func.func @forward(%t: tensor<4xi32> {nn.input = "targets"}, %x: tensor<4x6xf32> {nn.param = "x"}) -> tensor<f32> {
  %s = nn.softmax %x {axis = 0 : i64} : tensor<4x6xf32>
  %y = nn.mul %s, %s : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"rotary", R"(
func.func @forward(%t: tensor<1x2x3xi32> {nn.input = "targets"}, %x: tensor<1x2x3x6xf32> {nn.param = "x"}) -> tensor<f32> {
  %y = nn.rotary %x {theta = 100.0 : f64} : tensor<1x2x3x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<1x2x3x6xf32>, tensor<1x2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"leaky_relu", R"(
func.func @forward(%t: tensor<4xi32> {nn.input = "targets"}, %x: tensor<4x6xf32> {nn.param = "x"}) -> tensor<f32> {
  %y = nn.leaky_relu %x {alpha = 0.2 : f64} : tensor<4x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"rotary_table", R"(
func.func @forward(%t: tensor<1x2x3xi32> {nn.input = "targets"}, %x: tensor<1x2x3x6xf32> {nn.param = "x"}) -> tensor<f32> {
  %c = nn.constant dense<[[1.0, 0.5, -0.25], [0.75, -1.5, 0.125], [0.3, 0.9, -0.6]]> : tensor<3x3xf32> -> tensor<3x3xf32>
  %s = nn.constant dense<[[0.0, 0.8, 0.4], [-0.7, 0.2, 1.1], [0.6, -0.3, 0.5]]> : tensor<3x3xf32> -> tensor<3x3xf32>
  %y = nn.rotary_table %x, %c, %s : (tensor<1x2x3x6xf32>, tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<1x2x3x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<1x2x3x6xf32>, tensor<1x2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"attention_gqa_causal", R"(
func.func @forward(%t: tensor<1x4x3xi32> {nn.input = "targets"}, %q: tensor<1x4x3x4xf32> {nn.param = "q"},
                   %k: tensor<1x2x3x4xf32> {nn.param = "k"}, %v: tensor<1x2x3x4xf32> {nn.param = "v"}) -> tensor<f32> {
  %y = nn.attention %q, %k, %v {causal} : (tensor<1x4x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x4x3x4xf32>
  %l = nn.cross_entropy %y, %t : (tensor<1x4x3x4xf32>, tensor<1x4x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"attention_full", R"(
func.func @forward(%t: tensor<1x2x3xi32> {nn.input = "targets"}, %q: tensor<1x2x3x4xf32> {nn.param = "q"},
                   %k: tensor<1x2x5x4xf32> {nn.param = "k"}, %v: tensor<1x2x5x4xf32> {nn.param = "v"}) -> tensor<f32> {
  %y = nn.attention %q, %k, %v {scale = 0.7 : f64} : (tensor<1x2x3x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>) -> tensor<1x2x3x4xf32>
  %l = nn.cross_entropy %y, %t : (tensor<1x2x3x4xf32>, tensor<1x2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"reshape_transpose", R"(
func.func @forward(%t: tensor<4x3xi32> {nn.input = "targets"}, %x: tensor<2x18xf32> {nn.param = "x"}) -> tensor<f32> {
  %r = nn.reshape %x : (tensor<2x18xf32>) -> tensor<3x2x6xf32>
  %y = nn.transpose %r {permutation = array<i64: 1, 0, 2>} : (tensor<3x2x6xf32>) -> tensor<2x3x6xf32>
  %z = nn.reshape %y : (tensor<2x3x6xf32>) -> tensor<4x3x3xf32>
  %l = nn.cross_entropy %z, %t : (tensor<4x3x3xf32>, tensor<4x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"slice", R"(
func.func @forward(%t: tensor<4xi32> {nn.input = "targets"}, %x: tensor<4x10xf32> {nn.param = "x"}) -> tensor<f32> {
  %y = nn.slice %x {dim = 1 : i64, start = 3 : i64} : (tensor<4x10xf32>) -> tensor<4x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    // The generic tensor ops of imported ONNX models.
    {"sub_div_broadcast", R"(
func.func @forward(%t: tensor<2x3xi32> {nn.input = "targets"}, %x: tensor<2x3x6xf32> {nn.param = "x"},
                   %p: tensor<6xf32> {nn.param = "p"}, %q: tensor<3x1xf32> {nn.param = "q"}) -> tensor<f32> {
  %d = nn.sub %x, %p : (tensor<2x3x6xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
  %e = nn.exp %q : tensor<3x1xf32>
  %y = nn.div %d, %e : (tensor<2x3x6xf32>, tensor<3x1xf32>) -> tensor<2x3x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"pow_base_and_exponent", R"(
func.func @forward(%t: tensor<4xi32> {nn.input = "targets"}, %x: tensor<4x6xf32> {nn.param = "x"},
                   %p: tensor<6xf32> {nn.param = "p"}, %z: tensor<4x6xf32> {nn.param = "z"}) -> tensor<f32> {
  %th = nn.tanh %x : tensor<4x6xf32>
  %base = nn.exp %th : tensor<4x6xf32>
  %y = nn.pow %base, %p : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %two = nn.constant dense<2.0> : tensor<f32> -> tensor<f32>
  %sq = nn.pow %z, %two : (tensor<4x6xf32>, tensor<f32>) -> tensor<4x6xf32>
  %s = nn.add %y, %sq : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %l = nn.cross_entropy %s, %t : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    // One parameter per function, side by side (concat): each parameter's
    // gradient checks one function's derivative.
    {"math_sqrt_erf_tanh_sigmoid", R"(
func.func @forward(%t: tensor<4xi32> {nn.input = "targets"}, %a: tensor<4x2xf32> {nn.param = "a"},
                   %b: tensor<4x2xf32> {nn.param = "b"}, %c: tensor<4x2xf32> {nn.param = "c"},
                   %d: tensor<4x2xf32> {nn.param = "d"}) -> tensor<f32> {
  %ea = nn.exp %a : tensor<4x2xf32>
  %ya = nn.sqrt %ea : tensor<4x2xf32>
  %yb = nn.erf %b : tensor<4x2xf32>
  %yc = nn.tanh %c : tensor<4x2xf32>
  %yd = nn.sigmoid %d : tensor<4x2xf32>
  %y = nn.concat %ya, %yb, %yc, %yd {dim = 1 : i64} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  %l = nn.cross_entropy %y, %t : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"math_neg_reciprocal_log_exp", R"(
func.func @forward(%t: tensor<4xi32> {nn.input = "targets"}, %a: tensor<4x2xf32> {nn.param = "a"},
                   %b: tensor<4x2xf32> {nn.param = "b"}, %c: tensor<4x2xf32> {nn.param = "c"},
                   %d: tensor<4x2xf32> {nn.param = "d"}) -> tensor<f32> {
  %ya = nn.neg %a : tensor<4x2xf32>
  %two = nn.fill {value = 2.0 : f64} : tensor<f32>
  %sb = nn.sigmoid %b : tensor<4x2xf32>
  %pb = nn.add %sb, %two : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  %yb = nn.reciprocal %pb : tensor<4x2xf32>
  %sc = nn.sigmoid %c : tensor<4x2xf32>
  %yc = nn.log %sc : tensor<4x2xf32>
  %yd = nn.exp %d : tensor<4x2xf32>
  %y = nn.concat %ya, %yb, %yc, %yd {dim = 1 : i64} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  %l = nn.cross_entropy %y, %t : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"where_constant_condition", R"(
func.func @forward(%t: tensor<2x3xi32> {nn.input = "targets"}, %x: tensor<2x3x4xf32> {nn.param = "x"},
                   %p: tensor<4xf32> {nn.param = "p"}) -> tensor<f32> {
  %c = nn.constant dense<[[true, false, true, true], [false, false, true, false], [true, true, false, false]]> : tensor<3x4xi1> -> tensor<3x4xi1>
  %y = nn.where %c, %x, %p : (tensor<3x4xi1>, tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"broadcast_to_sum_to_constant", R"(
func.func @forward(%t: tensor<3xi32> {nn.input = "targets"}, %x: tensor<2x3x6xf32> {nn.param = "x"},
                   %p: tensor<3x1xf32> {nn.param = "p"}) -> tensor<f32> {
  %b = nn.broadcast_to %p : (tensor<3x1xf32>) -> tensor<2x3x6xf32>
  %m = nn.mul %b, %x : (tensor<2x3x6xf32>, tensor<2x3x6xf32>) -> tensor<2x3x6xf32>
  %s = nn.sum_to %m : (tensor<2x3x6xf32>) -> tensor<3x6xf32>
  %c = nn.constant dense<[0.5, -1.0, 2.0, 1.5, 0.25, -0.75]> : tensor<6xf32> -> tensor<6xf32>
  %y = nn.mul %s, %c : (tensor<3x6xf32>, tensor<6xf32>) -> tensor<3x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<3x6xf32>, tensor<3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"batch_matmul_transposed_broadcast", R"(
func.func @forward(%t: tensor<2x3xi32> {nn.input = "targets"}, %a: tensor<2x4x3xf32> {nn.param = "a"},
                   %b: tensor<1x5x4xf32> {nn.param = "b"}, %c: tensor<2x3x4xf32> {nn.param = "c"},
                   %d: tensor<4x5xf32> {nn.param = "d"}) -> tensor<f32> {
  %x = nn.batch_matmul %a, %b {transpose_a, transpose_b} : (tensor<2x4x3xf32>, tensor<1x5x4xf32>) -> tensor<2x3x5xf32>
  %y = nn.batch_matmul %c, %d : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %s = nn.add %x, %y : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %l = nn.cross_entropy %s, %t : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"trilu", R"(
func.func @forward(%t: tensor<2x4xi32> {nn.input = "targets"}, %x: tensor<2x4x4xf32> {nn.param = "x"}) -> tensor<f32> {
  %u = nn.trilu %x {upper, k = -1 : i64} : tensor<2x4x4xf32>
  %y = nn.trilu %u {k = 1 : i64} : tensor<2x4x4xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
    {"cross_entropy_ignore_index", R"(
func.func @forward(%t: tensor<5xi32> {nn.input = "targets"}, %x: tensor<5x6xf32> {nn.param = "x"}) -> tensor<f32> {
  %l = nn.cross_entropy %x, %t : (tensor<5x6xf32>, tensor<5xi32>) -> tensor<f32>
  return %l : tensor<f32>
})"},
};

INSTANTIATE_TEST_SUITE_P(AllOps, GradCheck, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<GradCase> &info) {
                           return std::string(info.param.name);
                         });

} // namespace
