// tp-partition of a model without Hugging Face names (an ONNX import,
// family "onnx"): the plan read off the ops (passes/tp/TPStructure.cpp).
// q, k and v reach attention through reshapes and transposes (q through its
// bias too): column-parallel, [in, out] weights split on dim 1, q's bias
// with them; the projection reading attention's result: row-parallel (dim
// 0); the gate and up read by SiLU(gate) * up into the down projection:
// column and row; the embedding and the [hidden, vocab] LM head:
// vocabulary-parallel (rows, columns); the norm whole.
// RUN: shardc-opt %S/../Inputs/tp-block-onnx.mlir '--tp-partition=tp=2' | FileCheck %s
// CHECK: module attributes {{{.*}}tp.whole_tokens
// CHECK: func.func @forward(
// CHECK-SAME: tensor<5x8xf32> {nn.param = "embed.weight", tp.dim = 0 : i64}
// CHECK-SAME: tensor<8xf32> {nn.param = "norm.weight", tp.dim = -1 : i64}
// CHECK-SAME: tensor<8x4xf32> {nn.param = "val_1", tp.dim = 1 : i64}
// CHECK-SAME: tensor<4xf32> {nn.param = "q.bias", tp.dim = 0 : i64}
// CHECK-SAME: tensor<8x4xf32> {nn.param = "val_2", tp.dim = 1 : i64}
// CHECK-SAME: tensor<8x4xf32> {nn.param = "val_3", tp.dim = 1 : i64}
// CHECK-SAME: tensor<4x8xf32> {nn.param = "val_4", tp.dim = 0 : i64}
// CHECK-SAME: tensor<8x6xf32> {nn.param = "val_5", tp.dim = 1 : i64}
// CHECK-SAME: tensor<8x6xf32> {nn.param = "val_6", tp.dim = 1 : i64}
// CHECK-SAME: tensor<6x8xf32> {nn.param = "val_7", tp.dim = 0 : i64}
// CHECK-SAME: tensor<8x5xf32> {nn.param = "val_8", tp.dim = 1 : i64}
// CHECK: nn.attention {{.*}} -> tensor<2x1x4x4xf32>
// CHECK: shard.reduce_scatter
// CHECK: nn.vocab_cross_entropy
//
// q made without a projection (scaled by a vector): attention is not split: one error, at attention,
// naming the op that makes its query.
// RUN: sed -e 's/%q0 = nn.linear %h, %wq {weight_in_out} : (tensor<2x4x8xf32>, tensor<8x8xf32>)/%q0 = nn.mul %h, %ln : (tensor<2x4x8xf32>, tensor<8xf32>)/' %S/../Inputs/tp-block-onnx.mlir > %t.mlir
// RUN: not shardc-opt %t.mlir '--tp-partition=tp=2' 2>&1 | FileCheck %s --check-prefix=NOTPLANNED
// NOTPLANNED: error: 'nn.attention' op --tp: attention's query must come from a column-parallel projection {{.*}}; this model's is not in the plan (the query is made by 'nn.transpose' at
