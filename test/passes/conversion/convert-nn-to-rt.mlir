// RUN: shardc-opt %s --split-input-file --convert-nn-to-rt --verify-diagnostics | FileCheck %s
// RUN: not shardc-opt %S/../Inputs/silu-f32.mlir --convert-nn-to-rt=target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: error: unknown target 'tpu' (this shardc has: cpu{{(, cuda)?}})

// Parameters, states and inputs become views of their regions at aligned
// offsets; every op becomes a kernel with the arguments of
// runtime/kernels.h; the returned loss is written straight into the io
// region. The module's manifest records the layout.

// CHECK: module attributes {rt.manifest = {compute_dtype = "f32", entries = ["forward"], format = 14 : i64
// CHECK-SAME: io = [{bytes = 32 : i64, dtype = "i32", name = "tokens", offset = 0 : i64, shape = [2, 4]}, {bytes = 32 : i64, dtype = "i32", name = "targets", offset = 64 : i64, shape = [2, 4]}, {bytes = 4 : i64, dtype = "f32", name = "loss", offset = 128 : i64, shape = []}]
// CHECK-SAME: io_bytes = 192 : i64, mesh = array<i64: 1, 1>, param_bytes = 256 : i64
// CHECK-SAME: params = [{bytes = 160 : i64, dtype = "f32", init = "normal", name = "wte", offset = 0 : i64, shape = [10, 4], std = 2.000000e-02 : f64}, {bytes = 16 : i64, dtype = "f32", init = "ones", name = "g", offset = 192 : i64, shape = [4]}]
// CHECK-SAME: state = [], state_bytes = 0 : i64
// CHECK-LABEL: func.func @shardc_forward
// CHECK-SAME: (%[[CTX:.*]]: !rt.context, %[[P:.*]]: !rt.buffer, %{{.*}}: !rt.buffer, %[[IO:.*]]: !rt.buffer, %{{.*}}: !rt.buffer)
// CHECK-DAG: %[[TOK:.*]] = rt.view %[[IO]][0]
// CHECK-DAG: %[[TGT:.*]] = rt.view %[[IO]][64]
// CHECK-DAG: %[[WTE:.*]] = rt.view %[[P]][0]
// CHECK-DAG: %[[G:.*]] = rt.view %[[P]][192]
// CHECK-DAG: %[[LOSS:.*]] = rt.view %[[IO]][128]
// CHECK: %[[X:.*]] = rt.alloc 128
// CHECK: rt.kernel %[[CTX]], "embedding"(%[[TOK]], %[[WTE]], %[[X]]) {floats = array<f64>, ints = array<i64: 8, 10, 4, 0>}
// CHECK: %[[N:.*]] = rt.alloc 128
// CHECK: rt.kernel %[[CTX]], "rms_norm"(%[[X]], %[[G]], %[[N]]) {floats = array<f64: 9.9999999999999995E-7>, ints = array<i64: 8, 4, 0>}
// Reshapes alias their input: no kernel, no buffer.
// CHECK-NEXT: %[[L:.*]] = rt.alloc 320
// CHECK-NEXT: rt.kernel %[[CTX]], "linear"(%[[N]], %[[WTE]], %[[L]]) {floats = array<f64>, ints = array<i64: 8, 4, 10, 0, 0, 0>}
// CHECK-NEXT: rt.kernel %[[CTX]], "cross_entropy"(%[[L]], %[[TGT]], %[[LOSS]]) {floats = array<f64>, ints = array<i64: 8, 10, -100>}
// CHECK-NEXT: return
func.func @forward(%tok: tensor<2x4xi32> {nn.input = "tokens"},
                   %tgt: tensor<2x4xi32> {nn.input = "targets"},
                   %wte: tensor<10x4xf32> {nn.param = "wte", nn.init = "normal", nn.init_std = 0.02 : f64},
                   %g: tensor<4xf32> {nn.param = "g", nn.init = "ones"}) -> (tensor<f32> {nn.output = "loss"}) {
  %x = nn.embedding %tok, %wte : (tensor<2x4xi32>, tensor<10x4xf32>) -> tensor<2x4x4xf32>
  %n = nn.rms_norm %x, %g : (tensor<2x4x4xf32>, tensor<4xf32>) -> tensor<2x4x4xf32>
  %n2 = nn.reshape %n : (tensor<2x4x4xf32>) -> tensor<8x4xf32>
  %l = nn.linear %n2, %wte : (tensor<8x4xf32>, tensor<10x4xf32>) -> tensor<8x10xf32>
  %r = nn.reshape %l : (tensor<8x10xf32>) -> tensor<2x4x10xf32>
  %loss = nn.cross_entropy %r, %tgt : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Broadcast strides, transposes, slices, attention and the rest.
// CHECK-LABEL: func.func @shardc_forward
func.func @forward(%x: tensor<2x4x8xf32> {nn.param = "x"},
                   %pos: tensor<4x8xf32> {nn.param = "pos"},
                   %b: tensor<24xf32> {nn.param = "b", nn.init = "zeros"},
                   %w: tensor<8x24xf32> {nn.param = "w"},
                   %g: tensor<8xf32> {nn.param = "g"}) -> tensor<2x4x8xf32> {
  // CHECK: rt.kernel %{{.*}}, "add"(%{{.*}}, %{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 3, 0, 2, 4, 8, 32, 8, 1, 0, 8, 1>}
  %a = nn.add %x, %pos : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: "layer_norm"(%{{.*}}, %{{.*}}, %{{.*}}) {floats = array<f64: 1.000000e-05>, ints = array<i64: 8, 8, 0, 0>}
  %n = nn.layer_norm %a, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // CHECK: "linear"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 8, 8, 24, 1, 1, 0>}
  %qkv = nn.linear %n, %w, %b {weight_in_out} : (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
  // CHECK: "slice"(%{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 8, 24, 8, 8, 1, 0>}
  %k = nn.slice %qkv {dim = 2 : i64, start = 8 : i64} : (tensor<2x4x24xf32>) -> tensor<2x4x8xf32>
  %r = nn.reshape %k : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  // CHECK: "transpose"(%{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 4, 0, 2, 4, 2, 4, 0, 2, 1, 3>}
  %t = nn.transpose %r {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  // CHECK: "rotary"(%{{.*}}, %{{.*}}) {floats = array<f64: 1.000000e+04>, ints = array<i64: 2, 2, 4, 4, 0, 0, 0, 0>}
  %q = nn.rotary %t : tensor<2x2x4x4xf32>
  // CHECK: "attention"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {floats = array<f64: 5.000000e-01>, ints = array<i64: 2, 2, 2, 4, 4, 4, 1, 0, 0, 0, 0, 0, 0>}
  %o = nn.attention %q, %t, %t {causal} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  // CHECK: "softmax"(%{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 4, 4, 4, 0>}
  %s = nn.softmax %o {axis = 2 : i64} : tensor<2x2x4x4xf32>
  // CHECK: "gelu"(%{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 64, 1, 0>}
  %ge = nn.gelu %s {approximate = "tanh"} : tensor<2x2x4x4xf32>
  // CHECK: "silu"(%{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 64, 0>}
  %si = nn.silu %ge : tensor<2x2x4x4xf32>
  // CHECK: "mul"(%{{.*}}, %{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 4, 0, 2, 2, 4, 4, 32, 16, 4, 1, 32, 16, 4, 1>}
  %m = nn.mul %si, %ge : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  // A returned reshape needs its own bytes: a copy into the io region.
  // CHECK: "copy"(%{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 256>}
  %out = nn.reshape %m : (tensor<2x2x4x4xf32>) -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

// -----

// expected-error @+1 {{argument #0 is neither a parameter ('nn.param'), a state ('nn.state') nor an input ('nn.input')}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = nn.silu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @forward(%x: tensor<4xf16> {nn.param = "x"}) -> tensor<4xf16> {
  // expected-error @+1 {{'nn.silu' op on 'f16' is not supported by the cpu target, which computes in f32, bf16}}
  %y = nn.silu %x : tensor<4xf16>
  return %y : tensor<4xf16>
}

// -----

// A typed kernel computes on its op's element type: bf16 storage (f32 math
// inside), the dtype integer and attribute saying so; the manifest says the
// program computes in bf16 (the trainer's mfu peak).
// CHECK: rt.manifest = {compute_dtype = "bf16"
// CHECK-LABEL: func.func @shardc_typed
// CHECK: rt.kernel %{{.*}}, "silu"(%{{.*}}, %{{.*}}) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 1>}
// CHECK: rt.kernel %{{.*}}, "linear"(%{{.*}}, %{{.*}}, %{{.*}}) {dtype = bf16, floats = array<f64>, ints = array<i64: 2, 4, 8, 0, 0, 1>}
// CHECK: rt.kernel %{{.*}}, "cast"(%{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 16, 1, 0>}
func.func @typed(%x: tensor<2x4xbf16> {nn.param = "x"}, %w: tensor<8x4xbf16> {nn.param = "w"})
    -> (tensor<2x8xf32> {nn.output = "y"}) {
  %s = nn.silu %x : tensor<2x4xbf16>
  %y = nn.linear %s, %w : (tensor<2x4xbf16>, tensor<8x4xbf16>) -> tensor<2x8xbf16>
  %f = nn.cast %y : tensor<2x8xbf16> to tensor<2x8xf32>
  return %f : tensor<2x8xf32>
}

// -----

// An op with only f32 kernels refuses bf16 (nn-propagate-dtype computes it
// in f32).
func.func @forward(%x: tensor<4xbf16> {nn.param = "x"}) -> tensor<4xbf16> {
  // expected-error @+1 {{'nn.sqrt' op on 'bf16' has only f32 kernels (nn-propagate-dtype computes it in f32)}}
  %y = nn.sqrt %x : tensor<4xbf16>
  return %y : tensor<4xbf16>
}

// -----

// expected-error @+1 {{no model function to lower}}
module {
  func.func private @other()
}

// -----

// Results update arguments in place; two functions share slots by name.
// CHECK: rt.manifest = {compute_dtype = "f32", entries = ["a", "b"]
// CHECK-SAME: io = [{bytes = 8 : i64, dtype = "f32", name = "ctl", offset = 0 : i64, shape = [2]}
// CHECK-SAME: state = [{bytes = 16 : i64, dtype = "f32", name = "acc", offset = 0 : i64, shape = [4]}]
// CHECK-LABEL: func.func @shardc_a
// CHECK-SAME: %[[P:[^:]*]]: !rt.buffer, %[[S:[^:]*]]: !rt.buffer, %[[IO:[^:]*]]: !rt.buffer
// CHECK: %[[X:.*]] = rt.view %[[P]][0]
// CHECK: %[[ACC:.*]] = rt.view %[[S]][0]
// CHECK: %[[CTL:.*]] = rt.view %[[IO]][0]
// CHECK: rt.kernel %{{.*}}, "accumulate"(%[[ACC]], %[[X]], %[[CTL]], %[[ACC]]) {floats = array<f64>, ints = array<i64: 4>}
// CHECK-LABEL: func.func @shardc_b
// CHECK: %[[ACC2:.*]] = rt.view %{{.*}}[0]
// CHECK: "squared_norm"(%[[ACC2]],
func.func @a(%x: tensor<4xf32> {nn.param = "x"}, %acc: tensor<4xf32> {nn.state = "acc"},
             %ctl: tensor<2xf32> {nn.input = "ctl"}) -> (tensor<4xf32> {nn.updates = 1 : i64}) {
  %r = nn.accumulate %acc, %x, %ctl : tensor<4xf32>, tensor<2xf32>
  return %r : tensor<4xf32>
}
func.func @b(%acc: tensor<4xf32> {nn.state = "acc"}) -> tensor<f32> {
  %s = nn.squared_norm %acc : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// tp-partition's whole tokens (tp.whole_tokens on the module) are the
// manifest's tp_whole_tokens, which the trainer and --report read.
// CHECK: rt.manifest = {{{.*}}tp_whole_tokens = true
module attributes {tp.whole_tokens} {
  func.func @b(%acc: tensor<4xf32> {nn.state = "acc"}) -> tensor<f32> {
    %s = nn.squared_norm %acc : (tensor<4xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// An in-place update must be the last reader of what it overwrites.
func.func @c(%acc: tensor<4xf32> {nn.state = "acc"}, %ctl: tensor<2xf32> {nn.input = "ctl"}) -> (tensor<4xf32> {nn.updates = 0 : i64}, tensor<f32>) {
  %r = nn.accumulate %acc, %acc, %ctl : tensor<4xf32>, tensor<2xf32>
  // expected-error @+1 {{reads argument #0 after result #0 overwrote it in place}}
  %s = nn.squared_norm %acc : (tensor<4xf32>) -> tensor<f32>
  return %r, %s : tensor<4xf32>, tensor<f32>
}

// -----

// Every training op lowers to its kernel.
// CHECK-LABEL: func.func @shardc_grads
func.func @grads(%x: tensor<2x4x8xf32> {nn.param = "x"}, %w: tensor<8xf32> {nn.param = "w"},
                 %ids: tensor<2x4xi32> {nn.input = "ids"}, %q: tensor<1x4x4x8xf32> {nn.param = "q"},
                 %kv: tensor<1x2x4x8xf32> {nn.param = "kv"}, %h: tensor<7xf32> {nn.input = "h"},
                 %m: tensor<8xf32> {nn.state = "m"}, %v: tensor<8xf32> {nn.state = "v"})
    -> (tensor<8xf32> {nn.updates = 1 : i64}, tensor<8xf32> {nn.updates = 6 : i64}, tensor<8xf32> {nn.updates = 7 : i64}) {
  // CHECK: "fill"(%{{.*}}) {floats = array<f64: 1.000000e+00>, ints = array<i64: 1, 0>}
  %one = nn.fill {value = 1.0 : f64} : tensor<f32>
  // CHECK: "sum_to"(%{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 3, 8, 0, 0, 2, 4, 8, 0, 0, 1>}
  %s = nn.sum_to %x : (tensor<2x4x8xf32>) -> tensor<8xf32>
  // CHECK: "matmul"(%{{.*}}, %{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 8, 8, 8, 1, 0, 0, 0>}
  %x3 = nn.reshape %x : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %mm = nn.matmul %x3, %x3 {transpose_a} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  // CHECK: "embedding_grad"(%{{.*}}, %{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 8, 5, 8, 0>}
  %eg = nn.embedding_grad %ids, %x : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<5x8xf32>
  // CHECK: "layer_norm_grad"({{.*}}) {floats = array<f64: 1.000000e-05>, ints = array<i64: 8, 8, 0, 0, 0>}
  %dx, %dw, %db = nn.layer_norm_grad %x, %w, %x : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: "rms_norm_grad"({{.*}}) {floats = array<f64: 9.9999999999999995E-7>, ints = array<i64: 8, 8, 0, 0>}
  %rx, %rw = nn.rms_norm_grad %x, %w, %x : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  // CHECK: "gelu_grad"({{.*}}) {floats = array<f64>, ints = array<i64: 64, 1, 0>}
  %gg = nn.gelu_grad %x, %x {approximate = "tanh"} : tensor<2x4x8xf32>
  // CHECK: "silu_grad"({{.*}}) {floats = array<f64>, ints = array<i64: 64, 0>}
  %sg = nn.silu_grad %x, %x : tensor<2x4x8xf32>
  // CHECK: "leaky_relu"({{.*}}) {floats = array<f64: 2.500000e-01>, ints = array<i64: 64>}
  %lr = nn.leaky_relu %x {alpha = 0.25 : f64} : tensor<2x4x8xf32>
  // CHECK: "leaky_relu_grad"({{.*}}) {floats = array<f64: 2.500000e-01>, ints = array<i64: 64>}
  %lrg = nn.leaky_relu_grad %x, %lr {alpha = 0.25 : f64} : tensor<2x4x8xf32>
  // CHECK: "softmax_grad"({{.*}}) {floats = array<f64>, ints = array<i64: 8, 8, 1, 0>}
  %smg = nn.softmax_grad %x, %x : tensor<2x4x8xf32>
  // CHECK: "rotary"({{.*}}) {floats = array<f64: 1.000000e+04>, ints = array<i64: 1, 4, 4, 8, 1, 0, 0, 0>}
  %ri = nn.rotary %q {inverse} : tensor<1x4x4x8xf32>
  // CHECK: "rotary_table"({{.*}}, {{.*}}, {{.*}}, {{.*}}) {floats = array<f64>, ints = array<i64: 1, 4, 4, 8, 1, 0, 0>}
  %tab = nn.constant dense<0.5> : tensor<4x4xf32> -> tensor<4x4xf32>
  %rti = nn.rotary_table %q, %tab, %tab {inverse} : (tensor<1x4x4x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4x8xf32>
  // CHECK: "attention_grad"({{.*}}) {floats = array<f64: 5.000000e-01>, ints = array<i64: 1, 4, 2, 4, 4, 8, 1, 0, 0, 0, 0, 0, 0>}
  %dq, %dk, %dv = nn.attention_grad %q, %kv, %kv, %q {causal, scale = 0.5 : f64} : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x4x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  // CHECK: "slice_grad"({{.*}}) {floats = array<f64>, ints = array<i64: 8, 24, 8, 8, 1, 0>}
  %slg = nn.slice_grad %x {dim = 2 : i64, start = 8 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x24xf32>
  // CHECK: "cross_entropy_grad"({{.*}}) {floats = array<f64>, ints = array<i64: 8, 8, -100>}
  %ceg = nn.cross_entropy_grad %x, %ids, %one : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x8xf32>
  // CHECK: "clip_coef"({{.*}}) {floats = array<f64>, ints = array<i64>}
  %c = nn.clip_coef %one, %one : tensor<f32>
  // CHECK: "adamw"({{.*}}) {floats = array<f64>, ints = array<i64: 8, 1>}
  %p2, %m2, %v2 = nn.adamw %w, %s, %m, %v, %h, %c : tensor<8xf32>, tensor<7xf32>, tensor<f32>
  return %p2, %m2, %v2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// An input or output computed in f32 whose file holds f64, f16 or bf16
// (nn.file_dtype) keeps its f32 slot; the manifest names the file's type.
// Rounding to f16 and bf16 is the unary kernel.

// CHECK: io = [{bytes = 24 : i64, dtype = "f32", file_dtype = "f64", name = "x", offset = 0 : i64, shape = [2, 3]}, {bytes = 24 : i64, dtype = "f32", file_dtype = "f16", name = "y", offset = 64 : i64, shape = [2, 3]}, {bytes = 24 : i64, dtype = "f32", name = "z", offset = 128 : i64, shape = [2, 3]}]
// CHECK: rt.kernel %{{.*}}, "unary"(%{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 6, 11>}
// CHECK: rt.kernel %{{.*}}, "unary"(%{{.*}}, %{{.*}}) {floats = array<f64>, ints = array<i64: 6, 12>}
func.func @infer(%x: tensor<2x3xf32> {nn.input = "x", nn.file_dtype = "f64"})
    -> (tensor<2x3xf32> {nn.output = "y", nn.file_dtype = "f16"},
        tensor<2x3xf32> {nn.output = "z"}) {
  %h = nn.round_f16 %x : tensor<2x3xf32>
  %b = nn.round_bf16 %x : tensor<2x3xf32>
  return %h, %b : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// A slot whose size overflows, or is over 2^40 bytes, is an error naming it
// rather than a wrapped offset.
// expected-error @+1 {{io slot 'x' of 'tensor<4611686018427387905x64xf32>' is over the limit of 2^40 bytes (1 TiB)}}
func.func @infer(%x: tensor<4611686018427387905x64xf32> {nn.input = "x"}) -> (tensor<4611686018427387905x64xf32> {nn.output = "y"}) {
  %y = nn.neg %x : tensor<4611686018427387905x64xf32>
  return %y : tensor<4611686018427387905x64xf32>
}
