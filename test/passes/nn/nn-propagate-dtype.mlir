// RUN: shardc-opt %s --split-input-file --nn-propagate-dtype | FileCheck %s
// RUN: shardc-opt %s --split-input-file '--nn-propagate-dtype=target=cuda' | FileCheck %s
// RUN: not shardc-opt %s --split-input-file '--nn-propagate-dtype=target=tpu' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: unknown target 'tpu'

// Both targets compute in bf16 (a target computing in f32 only would have
// every bf16 operand cast up, a bf16 constant made an f32 one, and a bf16
// function result cast back). Ops with typed kernels on the target compute
// in bf16; an op with only f32 kernels (sqrt, the loss) computes in f32 on
// its bf16 operands cast up, and the next typed op casts its f32 operand
// back. A function result keeps its type.
// CHECK-LABEL: func.func @forward
// CHECK-DAG: %[[C:.*]] = nn.constant dense<1.250000e-01> : tensor<8xbf16> -> tensor<8xbf16>
// CHECK: %[[Y:.*]] = nn.linear %arg0, %arg1 : (tensor<2x4xbf16>, tensor<8x4xbf16>) -> tensor<2x8xbf16>
// CHECK: %[[YF:.*]] = nn.cast %[[Y]] : tensor<2x8xbf16> to tensor<2x8xf32>
// CHECK: %[[S:.*]] = nn.sqrt %[[YF]] : tensor<2x8xf32>
// CHECK: %[[SB:.*]] = nn.cast %[[S]] : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK: %[[A:.*]] = nn.add %[[SB]], %[[Y]] : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
// CHECK: %[[A2:.*]] = nn.add %[[A]], %[[C]] : (tensor<2x8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
// CHECK: %[[G:.*]] = nn.gelu %[[A2]] {{.*}}: tensor<2x8xbf16>
// CHECK: %[[LF:.*]] = nn.cast %[[G]] : tensor<2x8xbf16> to tensor<2x8xf32>
// CHECK: %[[L:.*]] = nn.cross_entropy %[[LF]], %arg2 : (tensor<2x8xf32>, tensor<2xi32>) -> tensor<f32>
// CHECK: return %[[L]], %[[G]] : tensor<f32>, tensor<2x8xbf16>

func.func @forward(%x: tensor<2x4xbf16>, %w: tensor<8x4xbf16>, %t: tensor<2xi32>)
    -> (tensor<f32>, tensor<2x8xbf16>) {
  %c = nn.constant dense<0.125> : tensor<8xbf16> -> tensor<8xbf16>
  %y = nn.linear %x, %w : (tensor<2x4xbf16>, tensor<8x4xbf16>) -> tensor<2x8xbf16>
  %s = nn.sqrt %y : tensor<2x8xbf16>
  %a = nn.add %s, %y : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %a2 = nn.add %a, %c : (tensor<2x8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
  %g = nn.gelu %a2 {approximate = "tanh"} : tensor<2x8xbf16>
  %l = nn.cross_entropy %g, %t : (tensor<2x8xbf16>, tensor<2xi32>) -> tensor<f32>
  return %l, %g : tensor<f32>, tensor<2x8xbf16>
}
