//===- Options.cpp - the driver's options, bound once ---------------------===//
#include "compiler/Options.h"

#include "dialects/nn/Float8.h"
#include "frontends/meta/ModelConfig.h"
#include "target/Machine.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Regex.h"

using namespace llvm;
using namespace shardc;

namespace {

cl::OptionCategory category("shardc options");

Error fail(const Twine &message) { return createStringError(message); }

/// Registers one option bound to `field`. The options live as long as the
/// process (cl::opt registers itself globally).
template <typename T, typename... Mods>
void bind(T &field, const char *name, Mods &&...mods) {
  new cl::opt<T, true>(StringRef(name), cl::location(field), cl::cat(category),
                       std::forward<Mods>(mods)...);
}

} // namespace

bool ModelOptions::isOnnx() const { return StringRef(model).ends_with(".onnx"); }

void DriverOptions::bindOptions() {
  new cl::opt<std::string, true>(
      cl::Positional, cl::location(model.model),
      cl::desc("<model: preset name, config.json or model.onnx>"),
      cl::cat(category));
  bind(output.output, "o",
       cl::desc("Output file (default: 'train' for exe, 'model.o' for obj, "
                "stdout for text)"),
       cl::value_desc("file"));
  new cl::opt<Emit, true>(
      "emit", cl::desc("What to produce"), cl::location(output.emit),
      cl::values(clEnumValN(Emit::MLIR, "mlir", "the nn forward graph (MLIR)"),
                 clEnumValN(Emit::Train, "train",
                            "the training step in the nn dialect (MLIR)"),
                 clEnumValN(Emit::Rt, "rt", "the scheduled rt program (MLIR)"),
                 clEnumValN(Emit::LLVM, "llvm",
                            "LLVM IR (the launch tables and manifest)"),
                 clEnumValN(Emit::Obj, "obj", "an object file"),
                 clEnumValN(Emit::Exe, "exe", "a training executable")),
      cl::cat(category));
  // cl::desc keeps a reference: the text must outlive the option.
  static const std::string targetHelp =
      "The backend the executable runs on: " + targetNames() +
      " (default cpu)";
  bind(output.target, "target", cl::desc(targetHelp));
  bind(output.cudaEmulation, "cuda-emulation",
       cl::desc("With --target cuda: link the executable against the "
                "emulated CUDA device (the same CUDA kernels compiled for "
                "the host, run under CUDA's execution model, with host "
                "versions of the CUDA runtime and cuBLASLt) instead of the "
                "GPU's libraries. It runs a CUDA program, slowly, on any "
                "machine: for tests and debugging, never the default"));
  bind(model.seqLen, "seq-len",
       cl::desc("Tokens per sequence (default: the model's positions, at "
                "most 1024)"));
  new cl::opt<int64_t, true>(
      "micro-batch",
      cl::desc("Sequences per micro-batch (ONNX: re-specializes dim 0 of the "
               "inputs; default: the model's)"),
      cl::location(model.microBatch), cl::cat(category),
      cl::callback([this](const int64_t &) { model.microBatchGiven = true; }));
  bind(model.loss, "loss",
       cl::desc("ONNX: the training loss: cross_entropy[:OUTPUT] (next-token "
                "cross-entropy on the logits output, by default 'logits' or "
                "the first output) or output:OUTPUT (a scalar output is the "
                "loss)"));
  bind(model.infer, "infer",
       cl::desc("ONNX: compile the graph as it is (no loss, no training) into "
                "an executable that reads its inputs and writes its outputs"));
  new cl::list<std::string>(
      "bind",
      cl::desc("ONNX: fix graph input NAME at compile time to the TensorProto "
               "in FILE (inputs that determine shapes)"),
      cl::value_desc("NAME=FILE"), cl::cat(category),
      cl::callback([this](const std::string &spec) {
        auto [name, file] = StringRef(spec).split('=');
        // An empty side is reported by validate().
        model.bindings[name.str()] = file.str();
        if (name.empty() || file.empty())
          model.bindings[""] = spec;
      }));
  bind(model.allowExternalDataOutside, "allow-external-data-outside",
       cl::desc("ONNX: read external data files outside the model's folder "
                "(after symlinks; by default a location that resolves "
                "elsewhere is an error); regular files only either way"));
  bind(model.foldBudgetMiB, "fold-budget",
       cl::desc("ONNX: MiB of values that may be evaluated at compile time "
                "(8 bytes an element; default 1024); a node beyond it is an "
                "error naming it"),
       cl::value_desc("MiB"));
  bind(model.retieHead, "retie-head",
       cl::desc("ONNX: a trained initializer that is another's transpose "
                "bit for bit (a tied head the exporter folded to a copy) is "
                "computed from it, tied; =false trains each apart, as the "
                "file has them"));
  bind(model.fusePatterns, "fuse-patterns",
       cl::desc("Rewrite the decomposed forms exporters write (GELU, SiLU, "
                "layer and RMS norm, rotary embedding, attention) into the "
                "fused ops; =false keeps the graph's own ops"));
  bind(output.supportedOps, "supported-ops",
       cl::desc("Print the ONNX op types shardc imports and exit"));
  new cl::list<std::string>(
      "freeze", cl::CommaSeparated,
      cl::desc("ONNX: initializers kept constant instead of trained (besides "
               "non-finite, integer and scalar ones)"),
      cl::value_desc("name,..."), cl::cat(category),
      cl::callback(
          [this](const std::string &name) { model.frozen.push_back(name); }));
  bind(model.train, "train",
       cl::desc("ONNX: train exactly the floating-point initializers whose "
                "whole name matches this regex (default: the exporter's "
                "parameter marks, else every finite one); --freeze still "
                "applies"),
       cl::value_desc("regex"));
  bind(training.recompute, "recompute",
       cl::desc("Activations recomputed in backward instead of kept: none; "
                "block (each transformer block's, activation "
                "checkpointing); or selective (each block's element-wise, "
                "norm and layout ops, from the GEMM and attention outputs, "
                "which are kept: torchtitan's per-op policy)"));
  bind(training.mesh, "mesh",
       cl::desc("Device mesh: N (fully sharded over N ranks) or RxS (HSDP: "
                "replicate R, shard S); 1 = one rank"));
  bind(training.tp, "tp",
       cl::desc("Tensor parallelism over N ranks, the mesh's innermost axis "
                "(adjacent ranks, one node): the world is --mesh's ranks "
                "times N (--mesh 2 --tp 2: 4 ranks). torchtitan's plan with "
                "sequence parallelism: q/k/v and MLP gate/up column-parallel, "
                "output and MLP down row-parallel, norms and residuals on "
                "1/N of the sequence, the embedding and LM head "
                "vocabulary-parallel with the loss on vocab-sharded logits "
                "where N divides the vocabulary (else whole on each rank); "
                "GPT-2, Llama, Mistral and Qwen2 config.json models by their "
                "parameter names, ONNX models by their ops (projections into "
                "and out of attention and the MLP; an error names the node "
                "where the pattern is not found); f32 or bf16 compute; not "
                "with --offload"),
       cl::value_desc("N"));
  bind(training.tpVocab, "tp-vocab",
       cl::desc("With --tp: the embedding and LM head 'parallel' (each tp "
                "rank holds its rows of the vocabulary, the loss on "
                "vocab-sharded logits; where --tp divides the vocabulary, "
                "else whole) or 'whole' (every tp rank holds them, on its "
                "tokens)"),
       cl::value_desc("parallel|whole"));
  bind(training.wrap, "wrap",
       cl::desc("FSDP wrap policy: a regex whose first capture names a "
                "parameter's group (default: one group per transformer "
                "block; the rest is the root group)"));
  bind(training.reshardAfterForward, "reshard-after-forward",
       cl::desc("true: free gathered parameters after forward and gather "
                "again in backward (root group: false, as FSDP2); false: "
                "keep them; N: keep them sharded over groups of N ranks and "
                "gather within the group in backward"));
  bind(training.prefetchForward, "prefetch-forward",
       cl::desc("All-gathers issued this many groups ahead in forward"));
  bind(training.prefetchBackward, "prefetch-backward",
       cl::desc("All-gathers issued this many groups ahead in backward"));
  bind(training.lossChunkRows, "loss-chunk-rows",
       cl::desc("The LM head and its loss run over chunks of "
                "this many token rows, so the [tokens, vocab] logits are "
                "never whole (0, the default: as many rows as fit 256 MiB "
                "of logits; a count of at least the micro-step's tokens "
                "keeps them whole)"),
       cl::value_desc("N"));
  bind(training.paramDtype, "param-dtype",
       cl::desc("Mixed precision: the dtype parameters are all-gathered and "
                "used in (f32 or bf16); master weights stay f32"));
  bind(training.float8, "float8",
       cl::desc("Float8 training with torchao's recipe: 'tensorwise' "
                "(a dynamic scale per tensor; e4m3 inputs and weights, e5m2 "
                "output gradients) or 'rowwise' (power-of-two scales per "
                "row along each GEMM's reduction axis, e4m3 throughout). "
                "Every linear of the transformer blocks runs its three "
                "GEMMs on fp8 operands with f32 sums; the embedding, the LM "
                "head and linears whose features are not multiples of 16 "
                "(each named in a remark) stay in the --param-dtype. Master "
                "weights and checkpoints stay f32"),
       cl::value_desc("recipe"));
  bind(training.float8AllGather, "float8-all-gather",
       cl::desc("With --float8=tensorwise on a sharded mesh (on unless "
                "=false): FSDP2's float8 all-gather (torchao's "
                "enable_fsdp_float8_all_gather). Each float8 weight's shard "
                "is cast to e4m3 with the whole weight's scale (computed "
                "once a micro-step from the shards' amaxes, one collective "
                "for all of them) and the shard axis gathers those bytes, "
                "half of bf16's; the fp8 weight is the one gathered and "
                "then cast, bit for bit. Not with rowwise, as in torchao"),
       cl::callback([this](const bool &) {
         training.float8AllGatherGiven = true;
       }));
  bind(training.reduceDtype, "reduce-dtype",
       cl::desc("Mixed precision: the dtype gradients are reduce-scattered "
                "in (f32 or bf16)"));
  bind(training.outputDtype, "output-dtype",
       cl::desc("Mixed precision: the dtype of the model's output, the loss "
                "(f32)"));
  bind(training.allowTf32, "allow-tf32",
       cl::desc("--target cuda: the f32 GEMMs run on TF32 tensor cores "
                "(cuBLASLt's CUBLAS_COMPUTE_32F_FAST_TF32: operands rounded "
                "to 10 mantissa bits, f32 sums), as PyTorch's "
                "torch.backends.cuda.matmul.allow_tf32; off by default, as "
                "there. bf16 GEMMs are unaffected"));
  bind(training.fuseEpilogues, "fuse-epilogues",
       cl::desc("Fuse a linear's tanh GELU, and in backward the GELU's "
                "gradient and the bias gradient, into the GEMM (cuBLASLt "
                "epilogues on --target cuda). On bf16 the fused kernel "
                "rounds its outputs once from the GEMM's f32 result, "
                "skipping the rounding of the GEMM's own output that "
                "PyTorch's unfused bf16 step does; =false keeps every "
                "rounding PyTorch's has"));
  bind(training.fusedAttention, "fused-attention",
       cl::desc("--target cuda: bf16 attention and its gradient on cuDNN's "
                "fused SDPA (rt-fused-attention; the forward keeps each "
                "row's log-sum-exp for the backward); =false keeps them on "
                "shardc's f32-math attention kernels"));
  bind(training.deterministicAttention, "deterministic-attention",
       cl::desc("--target cuda: cuDNN's SDPA backward =true deterministic "
                "(the default: the same dq, dk and dv bits run after run; "
                "its workspace holds the bf16 dP matrix, O(seq^2): 8,966 "
                "MiB a layer's launch for llama3-8b at micro-batch 2 x "
                "8192) or =false non-deterministic (dq accumulated in f32 "
                "atomics as FlashAttention's: bitwise run-to-run "
                "differences in dq, dk and dv, and an O(seq) workspace: 774 "
                "MiB there). The memory plan and --report size the "
                "workspace by it. The CPU target, and attention off cuDNN "
                "(--fused-attention=false, f32), ignore it: always "
                "deterministic"));
  bind(training.fuseLayout, "fuse-layout",
       cl::desc("Layout as a compiler decision: attention reads q, k and v "
                "from the QKV projection's rows and writes o and its "
                "gradients where the next GEMM reads them "
                "(rt-attention-layout); a bf16 gradient's cast to f32 is "
                "fused into the kernel writing it, unrounded "
                "(rt-fuse-casts); concatenations and contiguous slices are "
                "views (rt-concat-views, rt-slice-views); a group's "
                "gradient accumulations, and the optimizer's casts to the "
                "bf16 working copy, are one launch each "
                "(rt-group-elementwise); bf16 residual adds fuse with the "
                "norm after them, and the residual gradient's add with the "
                "norm's gradient, the same bits (rt-fuse-norm-grad-add); "
                "SwiGLU's silu and product are one kernel each way, the "
                "same bits (rt-fuse-swiglu). "
                "=false keeps the layout kernels"));
  bind(training.gradSync, "grad-sync",
       cl::desc("With --grad-accum on a mesh: 'every' micro-batch reduces "
                "its gradients, or only the 'last' one (unsharded gradients "
                "are accumulated until then, FSDP2's "
                "set_requires_gradient_sync)"));
  bind(training.offload, "offload",
       cl::desc("none, or cpu (with --target cuda, FSDP2's CPUOffloadPolicy): "
                "the sharded parameters, the gradients and the optimizer "
                "state live in pinned host memory; each group's shard is "
                "copied to the GPU on a copy stream before its all-gather, "
                "gradients go back to the host as they are reduced, and "
                "clipping and the optimizer step run on the host with the "
                "CPU kernels"));
  bind(output.report, "report",
       cl::desc("Print per-rank memory (parameters, gradients, optimizer "
                "state, gathered parameters, activations, planned peak) and "
                "the bytes each collective moves per mesh axis, then compile "
                "as asked"));
  static const std::string predictHelp =
      "With --report: after the memory report, the predicted step time "
      "(compute, communication, exposed communication), tokens/s per rank, "
      "MFU and the costliest kernels and collectives, the compiled schedule "
      "played out on MACHINE: a bundled machine (" +
      bundledMachineNames() + ") or a file written by --calibrate";
  bind(predict.machine, "predict", cl::desc(predictHelp),
       cl::value_desc("MACHINE"));
  bind(predict.gpusPerNode, "gpus-per-node",
       cl::desc("With --predict: GPUs a node (default: the machine's, 8); "
                "a mesh axis within a node communicates over NVLink, one "
                "across nodes over the network"),
       cl::value_desc("N"));
  bind(predict.gradAccum, "grad-accum",
       cl::desc("With --predict or --plan=auto: the trainer's --grad-accum "
                "(micro-steps a step; default 1); --plan=auto keeps "
                "micro-batch x grad-accum"),
       cl::value_desc("N"));
  bind(predict.plan, "plan",
       cl::desc("manual (default), or auto: compile each candidate of "
                "--tp (1, 2, 4 and 8 within a node, the ranks kept), "
                "--reshard-after-forward, the prefetch depths, --recompute "
                "and the micro-batch (--grad-accum keeping the global "
                "batch), print each one's predicted step time and peak "
                "memory, and build the fastest (tokens a second a rank) "
                "within --memory-budget (needs --predict)"));
  bind(predict.memoryBudget, "memory-budget",
       cl::desc("With --plan=auto: the most memory a rank may plan, e.g. "
                "70GiB or 512MiB (default: the machine's memory less its "
                "reserve: 4 GiB on a GPU, a fifth of a calibrated host's)"),
       cl::value_desc("SIZE"));
  bind(predict.calibrate, "calibrate",
       cl::desc("Measure this machine with the runtime's own kernels (GEMMs "
                "by shape, attention, memory bandwidth, launch overhead; MPI "
                "between two local ranks) at the thread count the "
                "environment gives (OMP_NUM_THREADS), write FILE for "
                "--predict FILE, and exit. With --target cuda: the GPU's "
                "cuBLASLt GEMMs by dtype (f32, tf32, bf16, fp8) and shape, "
                "cuDNN's attention by head dimension, bandwidth and "
                "launches (--cuda-emulation: the emulated device, tiny "
                "sizes)"),
       cl::value_desc("FILE"));
  bind(training.optimizer, "optimizer",
       cl::desc("The compiled optimizer: adamw or sgd (with momentum)"));
  cl::HideUnrelatedOptions(category);
}

Error DriverOptions::validate() {
  if (output.cudaEmulation && output.target != "cuda")
    return fail("--cuda-emulation emulates the CUDA target: it needs "
                "--target cuda (got --target " + output.target + ")");
  output.targetDesc = lookupTarget(output.target, output.cudaEmulation);
  if (!output.targetDesc && output.cudaEmulation && lookupTarget("cuda"))
    return fail("--cuda-emulation: this shardc was built without the "
                "emulated CUDA device (it needs the CUDA toolkit's headers "
                "and Boost.Context at build time)");
  if (!output.targetDesc && output.target == "cuda" && !output.cudaEmulation &&
      lookupTarget("cuda", /*emulated=*/true))
    return fail("--target cuda: this shardc was built without nvcc, so it "
                "cannot link for a GPU; --cuda-emulation links the emulated "
                "CUDA device instead");
  if (!output.targetDesc)
    return fail("--target must be one of " + targetNames() +
                " (the targets this shardc was built with), got '" +
                output.target + "'");
  if (training.recompute != "none" && training.recompute != "block" &&
      training.recompute != "selective")
    return fail("--recompute must be 'none', 'block' or 'selective', got '" +
                training.recompute + "'");
  if (training.optimizer != abi::kOptimizerAdamW &&
      training.optimizer != abi::kOptimizerSGD)
    return fail("--optimizer must be 'adamw' or 'sgd', got '" +
                training.optimizer + "'");
  if (training.allowTf32 && !output.targetDesc->tf32)
    return fail("--allow-tf32 lets f32 GEMMs run on TF32 tensor cores: "
                "--target " + output.target + " has none (--target cuda "
                "has)");
  std::string error;
  if (!parseMesh(training.mesh, training.meshShape, error))
    return fail(error);
  if (!checkTp(training.tp, error))
    return fail(error);
  training.meshShape.tp = training.tp;
  if (!parseReshard(training.reshardAfterForward, &training.meshShape,
                    training.reshard, error))
    return fail(error);
  if (Error e = checkTpSupported())
    return e;
  if (training.lossChunkRows < 0)
    return fail("--loss-chunk-rows must be >= 0 (0: as many rows as fit 64 "
                "MiB of logits)");
  if (training.prefetchForward < 0 || training.prefetchBackward < 0)
    return fail("--prefetch-forward and --prefetch-backward must be >= 0");
  for (const auto &[flag, value] :
       {std::pair<StringRef, StringRef>{"--param-dtype", training.paramDtype},
        {"--reduce-dtype", training.reduceDtype}})
    if (value != "f32" && value != "bf16")
      return fail(flag + " must be f32 or bf16, got '" + value + "'");
  if (!training.float8.empty() && !nn::isFloat8Recipe(training.float8))
    return fail("--float8 must be " + nn::float8RecipeList() +
                " (torchao's recipe names), got '" + training.float8 + "'");
  if (training.float8AllGatherGiven && training.float8AllGather &&
      training.float8 != "tensorwise")
    return fail(training.float8.empty()
                    ? Twine("--float8-all-gather needs --float8=tensorwise")
                    : "--float8-all-gather with --float8=" + training.float8 +
                          ": torchao's float8 all-gather takes the "
                          "tensorwise recipe only (a " +
                          training.float8 +
                          " weight has a scale per row of each GEMM, not "
                          "one its shards can share)");
  if (training.float8 == "rowwise" && training.tp > 1)
    return fail("--float8=rowwise with --tp: not supported yet (a row's "
                "scale along a reduction axis split over the tp ranks needs "
                "their max); --float8=tensorwise composes with --tp");
  if (!training.float8.empty() && training.offload != abi::kOffloadNone)
    return fail("--float8 with --offload=" + training.offload +
                ": not supported yet (the float8 casts run on the device)");
  if (!training.float8.empty() && model.infer)
    return fail("--float8 trains in float8: an --infer build has no "
                "training step");
  if (training.outputDtype != "f32")
    return fail("--output-dtype must be f32: the loss is computed and "
                "reported in f32, got '" +
                training.outputDtype + "'");
  std::string regexError;
  if (!training.wrap.empty() && !Regex(training.wrap).isValid(regexError))
    return fail("--wrap '" + training.wrap +
                "' is not a valid regex: " + regexError);
  if (training.gradSync != "every" && training.gradSync != "last")
    return fail("--grad-sync must be 'every' or 'last', got '" +
                training.gradSync + "'");
  if (training.offload != abi::kOffloadNone &&
      training.offload != abi::kOffloadCpu)
    return fail("--offload must be 'none' or 'cpu', got '" + training.offload +
                "'");
  if (training.offload == abi::kOffloadCpu && output.target != "cuda")
    return fail("--offload=cpu moves GPU memory to the host: it means nothing "
                "with --target " + output.target +
                ", whose memory is host memory already");
  if (training.offload == abi::kOffloadCpu && model.infer)
    return fail("--offload=cpu offloads a training step's parameters, "
                "gradients and optimizer state: an --infer build has none");
  if (training.gradSync == "last" && training.meshShape.ranks() == 1)
    return fail("--grad-sync=last needs a mesh (--mesh): one rank reduces "
                "nothing");
  // Shapes far beyond any real run are refused before any size arithmetic
  // can wrap (2^24 each; their products are bounded in the frontends).
  constexpr int64_t kShapeLimit = int64_t(1) << 24;
  if (model.microBatchGiven &&
      (model.microBatch < 1 || model.microBatch > kShapeLimit))
    return fail("--micro-batch must be between 1 and 2^24 (16777216), got " +
                llvm::Twine(model.microBatch));
  if (model.seqLen < 0 || model.seqLen > kShapeLimit)
    return fail("--seq-len must be between 1 and 2^24 (16777216), got " +
                llvm::Twine(model.seqLen));
  if (model.foldBudgetMiB < 1 || model.foldBudgetMiB > (int64_t(1) << 30))
    return fail("--fold-budget must be between 1 and 2^30 MiB, got " +
                llvm::Twine(model.foldBudgetMiB));
  if (auto bad = model.bindings.find(""); bad != model.bindings.end())
    return fail("--bind expects NAME=FILE, got '" + bad->second + "'");
  if (!model.isOnnx() && (model.infer || !model.bindings.empty() ||
                          !model.frozen.empty() || !model.train.empty() ||
                          model.loss != "cross_entropy" ||
                          model.allowExternalDataOutside || !model.retieHead))
    return fail("--infer, --bind, --freeze, --train, --loss, "
                "--allow-external-data-outside and --retie-head apply to "
                "ONNX models");
  if (model.infer && (training.meshShape.ranks() != 1 ||
                      training.recompute != "none"))
    return fail("--infer compiles for one rank without recomputation");
  if (model.infer && output.emit == Emit::Train)
    return fail("--emit train: an --infer build has no training step");
  if (predict.gpusPerNode < 0)
    return fail("--gpus-per-node must be at least 1, got " +
                llvm::Twine(predict.gpusPerNode));
  if (predict.gradAccum < 1)
    return fail("--grad-accum must be at least 1, got " +
                llvm::Twine(predict.gradAccum));
  if (predict.plan != "manual" && predict.plan != "auto")
    return fail("--plan must be 'manual' or 'auto', got '" + predict.plan +
                "'");
  if (predict.plan == "auto" && predict.machine.empty())
    return fail("--plan=auto chooses by predicted step time: it needs "
                "--predict MACHINE");
  if (predict.plan == "auto" && model.infer)
    return fail("--plan=auto chooses a training plan: an --infer build has "
                "none");
  if (!predict.memoryBudget.empty()) {
    StringRef text = StringRef(predict.memoryBudget).trim();
    double scale = double(int64_t(1) << 30);
    for (auto [suffix, factor] : {std::pair<StringRef, double>{"GiB", 1 << 30},
                                  {"MiB", 1 << 20},
                                  {"KiB", 1 << 10},
                                  {"GB", 1e9},
                                  {"MB", 1e6},
                                  {"B", 1}})
      if (text.consume_back(suffix)) {
        scale = factor;
        break;
      }
    double value = 0;
    if (text.trim().getAsDouble(value) || !(value > 0))
      return fail("--memory-budget expects a size such as 70GiB or 512MiB, "
                  "got '" + predict.memoryBudget + "'");
    predict.memoryBudgetBytes = value * scale;
  }
  return Error::success();
}

Error DriverOptions::checkTpSupported() const {
  if (training.tp == 1)
    return Error::success();
  auto refuse = [&](const Twine &what) {
    return fail("--tp " + Twine(training.tp) + " with " + what +
                ": not supported yet (tensor parallelism runs GPT-2 and "
                "Llama-family models)");
  };
  if (training.offload != abi::kOffloadNone)
    return refuse("--offload=" + training.offload);
  if (model.infer)
    return refuse("--infer");
  return Error::success();
}

PipelineOptions DriverOptions::pipeline() const {
  PipelineOptions p;
  p.training = !model.infer;
  p.fusePatterns = model.fusePatterns;
  p.gradSyncOnce = training.gradSync == "last";
  p.paramDtype = training.paramDtype;
  p.reduceDtype = training.reduceDtype;
  p.float8 = training.float8;
  p.float8AllGather =
      training.float8 == "tensorwise" && training.float8AllGather;
  p.recompute = training.recompute;
  p.optimizer = training.optimizer;
  p.mesh = training.mesh;
  p.tp = training.tp;
  p.tpVocab = training.tpVocab;
  p.wrap = training.wrap;
  p.reshardAfterForward = training.reshardAfterForward;
  p.prefetchForward = training.prefetchForward;
  p.prefetchBackward = training.prefetchBackward;
  p.lossChunkRows = training.lossChunkRows;
  p.target = output.target;
  p.offload = training.offload;
  p.allowTf32 = training.allowTf32;
  p.fuseEpilogues = training.fuseEpilogues;
  p.fusedAttention = training.fusedAttention;
  p.deterministicAttention = training.deterministicAttention;
  p.fuseLayout = training.fuseLayout;
  p.predict = predict.machine;
  p.gpusPerNode = predict.gpusPerNode;
  return p;
}

std::string DriverOptions::outputPath() const {
  if (!output.output.empty())
    return output.output;
  switch (output.emit) {
  case Emit::Exe:
    return "train";
  case Emit::Obj:
    return "model.o";
  default:
    return "-";
  }
}
