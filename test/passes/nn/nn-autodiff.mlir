// RUN: shardc-opt %s --split-input-file --nn-autodiff | FileCheck %s
// RUN: shardc-opt %s --split-input-file --nn-autodiff=recompute=block | FileCheck %s --check-prefix=RECOMPUTE
// RUN: shardc-opt %s --split-input-file --nn-autodiff=recompute=selective | FileCheck %s --check-prefix=SELECTIVE

// The micro-step: forward args, one accumulator per parameter, the
// accumulate control; loss out, accumulators updated in place. Each op's
// VJP follows the forward in reverse order.

// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32> {nn.param = "x"}
// CHECK-SAME: %[[W:[^:]*]]: tensor<6x8xf32> {nn.param = "w"}
// CHECK-SAME: %[[B:[^:]*]]: tensor<6xf32> {nn.param = "b"}
// CHECK-SAME: %[[T:[^:]*]]: tensor<2x4xi32> {nn.input = "targets"}
// CHECK-SAME: %[[GX:[^:]*]]: tensor<2x4x8xf32> {nn.state = "grad.x"}
// CHECK-SAME: %[[GW:[^:]*]]: tensor<6x8xf32> {nn.state = "grad.w"}
// CHECK-SAME: %[[GB:[^:]*]]: tensor<6xf32> {nn.state = "grad.b"}
// CHECK-SAME: %[[CTL:[^:]*]]: tensor<2xf32> {nn.input = "accumulate"}
// CHECK-SAME: -> (tensor<f32> {nn.output = "loss"}, tensor<2x4x8xf32> {nn.updates = 4 : i64}, tensor<6x8xf32> {nn.updates = 5 : i64}, tensor<6xf32> {nn.updates = 6 : i64})
// CHECK: %[[Y:.*]] = nn.linear %[[X]], %[[W]], %[[B]]
// CHECK: %[[L:.*]] = nn.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[ONE:.*]] = nn.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK: %[[DY:.*]] = nn.cross_entropy_grad %[[Y]], %[[T]], %[[ONE]]
// dx = dy @ W, read as [in, out].
// CHECK: %[[DX:.*]] = nn.linear %[[DY]], %[[W]] {weight_in_out} : (tensor<2x4x6xf32>, tensor<6x8xf32>) -> tensor<2x4x8xf32>
// dW = dy^T x on the flattened rows.
// CHECK: %[[X2:.*]] = nn.reshape %[[X]] : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
// CHECK: %[[DY2:.*]] = nn.reshape %[[DY]] : (tensor<2x4x6xf32>) -> tensor<8x6xf32>
// CHECK: %[[DW:.*]] = nn.matmul %[[DY2]], %[[X2]] {transpose_a} : (tensor<8x6xf32>, tensor<8x8xf32>) -> tensor<6x8xf32>
// CHECK: %[[DB:.*]] = nn.sum_to %[[DY]] : (tensor<2x4x6xf32>) -> tensor<6xf32>
// CHECK: %[[AX:.*]] = nn.accumulate %[[GX]], %[[DX]], %[[CTL]]
// CHECK: %[[AW:.*]] = nn.accumulate %[[GW]], %[[DW]], %[[CTL]]
// CHECK: %[[AB:.*]] = nn.accumulate %[[GB]], %[[DB]], %[[CTL]]
// CHECK: return %[[L]], %[[AX]], %[[AW]], %[[AB]]
// CHECK-NOT: func.func @forward
func.func @forward(%x: tensor<2x4x8xf32> {nn.param = "x"}, %w: tensor<6x8xf32> {nn.param = "w"},
                   %b: tensor<6xf32> {nn.param = "b"}, %t: tensor<2x4xi32> {nn.input = "targets"}) -> tensor<f32> {
  %y = nn.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<2x4x6xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Conv1D layout: dx = dy @ W^T, dW = x^T dy.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[DY:.*]] = nn.cross_entropy_grad
// CHECK: nn.linear %[[DY]], %{{.*}} : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x8xf32>
// CHECK: nn.matmul %{{.*}}, %[[DY]] {transpose_a} : (tensor<8x8xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
func.func @forward(%x: tensor<8x8xf32> {nn.param = "x"}, %w: tensor<8x6xf32> {nn.param = "w"},
                   %t: tensor<8xi32> {nn.input = "targets"}) -> tensor<f32> {
  %y = nn.linear %x, %w {weight_in_out} : (tensor<8x8xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %l = nn.cross_entropy %y, %t : (tensor<8x6xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Broadcast add and mul: gradients summed back to each operand's shape; a
// value used twice gets the sum of its gradients.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[DZ:.*]] = nn.cross_entropy_grad
// CHECK: %[[DA:.*]] = nn.mul %[[DZ]], %[[P:.*]] : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[DP0:.*]] = nn.mul %[[DZ]], %[[A:.*]] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[DP:.*]] = nn.sum_to %[[DP0]] : (tensor<2x4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[DPOS:.*]] = nn.sum_to %[[DA]] : (tensor<2x4x8xf32>) -> tensor<4x8xf32>
// CHECK: nn.add %[[DP]], %[[DPOS]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
func.func @forward(%x: tensor<2x4x8xf32> {nn.param = "x"}, %p: tensor<4x8xf32> {nn.param = "p"},
                   %t: tensor<2x4xi32> {nn.input = "targets"}) -> tensor<f32> {
  %a = nn.add %x, %p : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %z = nn.mul %a, %p : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %l = nn.cross_entropy %z, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Norms, activations, softmax.
// CHECK-LABEL: func.func @micro_step
// CHECK: nn.cross_entropy_grad
// CHECK: nn.softmax_grad %{{.*}}, %{{.*}} {axis = 1 : i64} : tensor<4x8xf32>
// CHECK: nn.silu_grad
// CHECK: nn.gelu_grad %{{.*}}, %{{.*}} {approximate = "tanh"} : tensor<4x8xf32>
// CHECK: nn.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
// CHECK: nn.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
func.func @forward(%x: tensor<4x8xf32> {nn.param = "x"}, %g: tensor<8xf32> {nn.param = "g"},
                   %b: tensor<8xf32> {nn.param = "b"}, %t: tensor<4xi32> {nn.input = "targets"}) -> tensor<f32> {
  %n = nn.layer_norm %x, %g, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = nn.rms_norm %n, %g {eps = 1.0e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %ge = nn.gelu %r {approximate = "tanh"} : tensor<4x8xf32>
  %s = nn.silu %ge : tensor<4x8xf32>
  %sm = nn.softmax %s {axis = 1 : i64} : tensor<4x8xf32>
  %l = nn.cross_entropy %sm, %t : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Attention, rotary, shapes, embedding.
// CHECK-LABEL: func.func @micro_step
// CHECK: nn.cross_entropy_grad
// CHECK: nn.slice_grad %{{.*}} {dim = 2 : i64, start = 2 : i64} : (tensor<1x4x4xf32>) -> tensor<1x4x8xf32>
// CHECK: nn.reshape %{{.*}} : (tensor<1x4x8xf32>) -> tensor<1x4x2x4xf32>
// CHECK: nn.transpose %{{.*}} {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 5.000000e-01 : f64}
// The rotary gradient rotates back.
// CHECK: nn.rotary %[[DQ]] {inverse} : tensor<1x2x4x4xf32>
// CHECK: nn.embedding_grad %{{.*}}, %{{.*}} : (tensor<1x4xi32>, tensor<1x4x8xf32>) -> tensor<10x8xf32>
func.func @forward(%ids: tensor<1x4xi32> {nn.input = "tokens"}, %e: tensor<10x8xf32> {nn.param = "e"},
                   %kv: tensor<1x1x4x4xf32> {nn.param = "kv"}, %t: tensor<1x4xi32> {nn.input = "targets"}) -> tensor<f32> {
  %x = nn.embedding %ids, %e : (tensor<1x4xi32>, tensor<10x8xf32>) -> tensor<1x4x8xf32>
  %r = nn.reshape %x : (tensor<1x4x8xf32>) -> tensor<1x4x2x4xf32>
  %q = nn.transpose %r {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %qr = nn.rotary %q : tensor<1x2x4x4xf32>
  %o = nn.attention %qr, %kv, %kv {causal} : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = nn.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %m = nn.reshape %ot : (tensor<1x4x2x4xf32>) -> tensor<1x4x8xf32>
  %s = nn.slice %m {dim = 2 : i64, start = 2 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x4xf32>
  %l = nn.cross_entropy %s, %t : (tensor<1x4x4xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Recomputation: the ops of a block run again right before its gradient,
// and the backward ops read the recomputed values (recomputed values that
// no gradient reads are dropped).
// RECOMPUTE-LABEL: func.func @micro_step
// RECOMPUTE: %[[H:.*]] = nn.gelu %[[X:.*]] {nn.block = 0 : i64}
// RECOMPUTE: %[[S:.*]] = nn.silu %[[H]] {nn.block = 0 : i64}
// RECOMPUTE: nn.cross_entropy %[[S]]
// RECOMPUTE: %[[DS:.*]] = nn.cross_entropy_grad %[[S]]
// RECOMPUTE-NEXT: %[[H2:.*]] = nn.gelu %[[X]] {nn.block = 0 : i64}
// RECOMPUTE-NEXT: %[[DH:.*]] = nn.silu_grad %[[H2]], %[[DS]]
// RECOMPUTE-NEXT: nn.gelu_grad %[[X]], %[[DH]]
// Without recomputation the forward values are read.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[H:.*]] = nn.gelu
// CHECK: nn.silu_grad %[[H]],
// CHECK-NOT: nn.gelu %
func.func @forward(%x: tensor<4x8xf32> {nn.param = "x"}, %t: tensor<4xi32> {nn.input = "targets"}) -> tensor<f32> {
  %h = nn.gelu %x {nn.block = 0 : i64} : tensor<4x8xf32>
  %s = nn.silu %h {nn.block = 0 : i64} : tensor<4x8xf32>
  %l = nn.cross_entropy %s, %t : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Selective recomputation (torchtitan's per-op policy): in backward the
// block's norm runs again, its GEMM does not: the GELU's gradient reads the
// forward's GEMM output, the GEMM's weight gradient the recomputed norm
// (the GELU's output, read by no gradient, is not recomputed).
// SELECTIVE: %[[N:.*]] = nn.rms_norm %arg0, %arg1 {nn.block = 0 : i64}
// SELECTIVE-NEXT: %[[Y:.*]] = nn.linear %[[N]], %arg2 {nn.block = 0 : i64}
// SELECTIVE: nn.cross_entropy_grad
// SELECTIVE-NEXT: %[[N2:.*]] = nn.rms_norm %arg0, %arg1 {nn.block = 0 : i64}
// SELECTIVE-NOT: nn.linear %{{.*}} {nn.block
// SELECTIVE: %[[DY:.*]] = nn.gelu_grad %[[Y]],
// SELECTIVE: nn.matmul %[[DY]], %[[N2]] {transpose_a}
func.func @forward(%x: tensor<4x8xf32> {nn.param = "x"}, %g: tensor<8xf32> {nn.param = "g"}, %w: tensor<8x8xf32> {nn.param = "w"}, %t: tensor<4xi32> {nn.input = "targets"}) -> tensor<f32> {
  %n = nn.rms_norm %x, %g {nn.block = 0 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = nn.linear %n, %w {nn.block = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h = nn.gelu %y {nn.block = 0 : i64} : tensor<4x8xf32>
  %l = nn.cross_entropy %h, %t : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An unused parameter gets a zero gradient.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[Z:.*]] = nn.fill {value = 0.000000e+00 : f64} : tensor<3xf32>
// CHECK: nn.accumulate %{{.*}}, %[[Z]], %{{.*}} : tensor<3xf32>, tensor<2xf32>
func.func @forward(%x: tensor<4x8xf32> {nn.param = "x"}, %u: tensor<3xf32> {nn.param = "unused"},
                   %t: tensor<4xi32> {nn.input = "targets"}) -> tensor<f32> {
  %l = nn.cross_entropy %x, %t : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An activation's all-gather marked with a sum dtype (tensor parallelism's
// sequence gather under bf16): its adjoint reduce-scatters the bf16
// gradient cast up to f32, and casts the sum back.
// CHECK-LABEL: func.func @micro_step(%arg0: tensor<2x4xbf16>
// CHECK: %[[G:.*]] = shard.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 {tp.sum_dtype = f32} : tensor<2x4xbf16> -> tensor<4x4xbf16>
// CHECK: %[[DX:.*]] = nn.linear %{{.*}} {weight_in_out} : (tensor<4x6xbf16>, tensor<6x4xbf16>) -> tensor<4x4xbf16>
// CHECK: %[[UP:.*]] = nn.cast %[[DX]] : tensor<4x4xbf16> to tensor<4x4xf32>
// CHECK: %[[RS:.*]] = shard.reduce_scatter %[[UP]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK: nn.cast %[[RS]] : tensor<2x4xf32> to tensor<2x4xbf16>
shard.grid @mesh(shape = 2)
func.func @forward(%x: tensor<2x4xbf16> {nn.param = "x"}, %w: tensor<6x4xbf16> {nn.param = "w"},
                   %t: tensor<4xi32> {nn.input = "targets"}) -> tensor<f32> {
  %g = shard.all_gather %x on @mesh grid_axes = [0] gather_axis = 0 {tp.sum_dtype = f32} : tensor<2x4xbf16> -> tensor<4x4xbf16>
  %y = nn.linear %g, %w : (tensor<4x4xbf16>, tensor<6x4xbf16>) -> tensor<4x6xbf16>
  %l = nn.cross_entropy %y, %t : (tensor<4x6xbf16>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
