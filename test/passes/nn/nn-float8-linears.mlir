// RUN: shardc-opt %s --split-input-file --nn-float8-linears --verify-diagnostics | FileCheck %s
// RUN: shardc-opt %s --split-input-file '--nn-float8-linears=recipe=rowwise' --verify-diagnostics | FileCheck %s --check-prefix=ROW
// RUN: not shardc-opt %s --split-input-file '--nn-float8-linears=recipe=blockwise' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: --float8 must be tensorwise|rowwise, got 'blockwise'

// A block's linears (parameters as weights, features and rows multiples of
// 16) compute in float8 with the recipe; the LM head (its result the
// loss's logits, through a reshape), the embedding, a linear of
// activations and a linear of 8 out features stay as they were, the last
// with a remark naming its parameter.
// CHECK-LABEL: func.func @forward
// CHECK: nn.embedding
// CHECK: nn.linear %{{.*}}, %arg2 {float8 = "tensorwise"}
// CHECK: nn.linear %{{.*}}, %arg3 {float8 = "tensorwise", weight_in_out}
// CHECK: nn.linear %{{.*}}, %arg4 :
// CHECK: nn.linear %{{.*}}, %{{.*}} :
// CHECK: nn.linear %{{.*}}, %arg5 :
// ROW: nn.linear %{{.*}}, %arg2 {float8 = "rowwise"}
// ROW: nn.linear %{{.*}}, %arg3 {float8 = "rowwise", weight_in_out}
func.func @forward(%ids: tensor<2x16xi32> {nn.input = "tokens"},
                   %emb: tensor<50x32xf32> {nn.param = "wte"},
                   %wq: tensor<48x32xf32> {nn.param = "h.0.q.weight"},
                   %wo: tensor<48x32xf32> {nn.param = "h.0.o.weight"},
                   %wsmall: tensor<8x32xf32> {nn.param = "h.0.small.weight"},
                   %head: tensor<50x32xf32> {nn.param = "lm_head.weight"},
                   %t: tensor<32xi32> {nn.input = "targets"}) -> tensor<f32> {
  %x = nn.embedding %ids, %emb : (tensor<2x16xi32>, tensor<50x32xf32>) -> tensor<2x16x32xf32>
  %q = nn.linear %x, %wq : (tensor<2x16x32xf32>, tensor<48x32xf32>) -> tensor<2x16x48xf32>
  %o = nn.linear %q, %wo {weight_in_out} : (tensor<2x16x48xf32>, tensor<48x32xf32>) -> tensor<2x16x32xf32>
  // expected-remark @below {{--float8: h.0.small.weight stays in f32: its features (in 32, out 8) are not multiples of 16, which FP8 GEMMs need}}
  %s = nn.linear %o, %wsmall : (tensor<2x16x32xf32>, tensor<8x32xf32>) -> tensor<2x16x8xf32>
  %x2 = nn.reshape %x : (tensor<2x16x32xf32>) -> tensor<32x32xf32>
  %xx = nn.linear %x, %x2 : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
  %logits = nn.linear %o, %head : (tensor<2x16x32xf32>, tensor<50x32xf32>) -> tensor<2x16x50xf32>
  %l2 = nn.reshape %logits : (tensor<2x16x50xf32>) -> tensor<32x50xf32>
  %loss = nn.cross_entropy %l2, %t : (tensor<32x50xf32>, tensor<32xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Nothing to compute in float8: one error naming the flag.
// expected-error @below {{: no linear of the model can compute in float8 (1 linear layers, none of them a transformer block's with features and rows that are multiples of 16)}}
module {
func.func @forward(%x: tensor<4x32xf32> {nn.input = "x"},
                   %head: tensor<50x32xf32> {nn.param = "lm_head.weight"},
                   %t: tensor<4xi32> {nn.input = "targets"}) -> tensor<f32> {
  %logits = nn.linear %x, %head : (tensor<4x32xf32>, tensor<50x32xf32>) -> tensor<4x50xf32>
  %loss = nn.cross_entropy %logits, %t : (tensor<4x50xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}
