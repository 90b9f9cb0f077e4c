// RUN: shardc-opt %s | shardc-opt | FileCheck %s
// RUN: shardc-opt %s --mlir-print-op-generic | shardc-opt | FileCheck %s

// CHECK-LABEL: func.func @embedding
func.func @embedding(%ids: tensor<2x8xi32>, %wte: tensor<50x16xf32>) -> tensor<2x8x16xf32> {
  // CHECK: nn.embedding %{{.*}}, %{{.*}} : (tensor<2x8xi32>, tensor<50x16xf32>) -> tensor<2x8x16xf32>
  %x = nn.embedding %ids, %wte : (tensor<2x8xi32>, tensor<50x16xf32>) -> tensor<2x8x16xf32>
  return %x : tensor<2x8x16xf32>
}

// CHECK-LABEL: func.func @linear
func.func @linear(%x: tensor<2x8x16xbf16>, %w: tensor<16x48xbf16>, %b: tensor<48xbf16>, %w2: tensor<4x16xbf16>) -> (tensor<2x8x48xbf16>, tensor<2x8x4xbf16>) {
  // CHECK: nn.linear %{{.*}}, %{{.*}}, %{{.*}} {weight_in_out} : (tensor<2x8x16xbf16>, tensor<16x48xbf16>, tensor<48xbf16>) -> tensor<2x8x48xbf16>
  %y = nn.linear %x, %w, %b {weight_in_out} : (tensor<2x8x16xbf16>, tensor<16x48xbf16>, tensor<48xbf16>) -> tensor<2x8x48xbf16>
  // CHECK: nn.linear %{{.*}}, %{{.*}} : (tensor<2x8x16xbf16>, tensor<4x16xbf16>) -> tensor<2x8x4xbf16>
  %z = nn.linear %x, %w2 : (tensor<2x8x16xbf16>, tensor<4x16xbf16>) -> tensor<2x8x4xbf16>
  return %y, %z : tensor<2x8x48xbf16>, tensor<2x8x4xbf16>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<2x8x16xf16>, %p: tensor<8x16xf16>) -> tensor<2x8x16xf16> {
  // CHECK: nn.add %{{.*}}, %{{.*}} : (tensor<2x8x16xf16>, tensor<8x16xf16>) -> tensor<2x8x16xf16>
  %a = nn.add %x, %p : (tensor<2x8x16xf16>, tensor<8x16xf16>) -> tensor<2x8x16xf16>
  // CHECK: nn.mul %{{.*}}, %{{.*}} : (tensor<2x8x16xf16>, tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  %m = nn.mul %a, %x : (tensor<2x8x16xf16>, tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  // CHECK: nn.gelu %{{.*}} : tensor<2x8x16xf16>
  %g = nn.gelu %m : tensor<2x8x16xf16>
  // CHECK: nn.gelu %{{.*}} {approximate = "tanh"} : tensor<2x8x16xf16>
  %t = nn.gelu %g {approximate = "tanh"} : tensor<2x8x16xf16>
  // CHECK: nn.silu %{{.*}} : tensor<2x8x16xf16>
  %s = nn.silu %t : tensor<2x8x16xf16>
  return %s : tensor<2x8x16xf16>
}

// CHECK-LABEL: func.func @norms
func.func @norms(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  // CHECK: nn.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-03 : f64}
  %a = nn.layer_norm %x, %g, %b {eps = 1.0e-03 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // The default eps (1e-5) is elided.
  // CHECK: nn.layer_norm %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %n = nn.layer_norm %x, %g : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: nn.rms_norm %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64}
  %r = nn.rms_norm %x, %g {eps = 1.0e-05 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return %a, %n, %r : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x8x16x8xf32>, %k: tensor<2x2x16x8xf32>, %v: tensor<2x2x16x8xf32>) -> tensor<2x8x16x8xf32> {
  // CHECK: nn.rotary %{{.*}} {theta = 5.000000e+05 : f64} : tensor<2x8x16x8xf32>
  %qr0 = nn.rotary %q {theta = 500000.0 : f64} : tensor<2x8x16x8xf32>
  // CHECK: nn.rotary_table %{{.*}}, %{{.*}}, %{{.*}} {inverse} : (tensor<2x8x16x8xf32>, tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<2x8x16x8xf32>
  %tab = nn.constant dense<0.25> : tensor<16x4xf32> -> tensor<16x4xf32>
  %qr = nn.rotary_table %qr0, %tab, %tab {inverse} : (tensor<2x8x16x8xf32>, tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<2x8x16x8xf32>
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal} : (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x8x16x8xf32>
  %o = nn.attention %qr, %k, %v {causal} : (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x8x16x8xf32>
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f64}
  %f = nn.attention %o, %k, %v {scale = 0.25 : f64} : (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x8x16x8xf32>
  // CHECK: nn.softmax %{{.*}} {axis = 2 : i64} : tensor<2x8x16x8xf32>
  %s = nn.softmax %f {axis = 2 : i64} : tensor<2x8x16x8xf32>
  return %s : tensor<2x8x16x8xf32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x8x48xf32>) -> tensor<2x4x8x4xf32> {
  // CHECK: nn.slice %{{.*}} {dim = 2 : i64, start = 16 : i64} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %q = nn.slice %x {dim = 2 : i64, start = 16 : i64} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  // CHECK: nn.reshape %{{.*}} : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
  %r = nn.reshape %q : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
  // CHECK: nn.transpose %{{.*}} {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x4xf32>) -> tensor<2x4x8x4xf32>
  %t = nn.transpose %r {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x4xf32>) -> tensor<2x4x8x4xf32>
  return %t : tensor<2x4x8x4xf32>
}

// CHECK-LABEL: func.func @loss
func.func @loss(%logits: tensor<2x8x50xf32>, %y: tensor<2x8xi64>) -> tensor<f32> {
  // CHECK: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x8x50xf32>, tensor<2x8xi64>) -> tensor<f32>
  %l = nn.cross_entropy %logits, %y : (tensor<2x8x50xf32>, tensor<2x8xi64>) -> tensor<f32>
  // CHECK: nn.cross_entropy %{{.*}}, %{{.*}} {ignore_index = 0 : i64}
  %m = nn.cross_entropy %logits, %y {ignore_index = 0 : i64} : (tensor<2x8x50xf32>, tensor<2x8xi64>) -> tensor<f32>
  return %m : tensor<f32>
}

// CHECK-LABEL: func.func @cast
func.func @cast(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: nn.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
  %h = nn.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
  // CHECK: nn.cast %{{.*}} {grad_type = bf16} : tensor<4x8xbf16> to tensor<4x8xf32>
  %f = nn.cast %h {grad_type = bf16} : tensor<4x8xbf16> to tensor<4x8xf32>
  return %f : tensor<4x8xf32>
}

// The vocabulary-parallel embedding and loss (tp-partition, --tp 4).
// CHECK-LABEL: func.func @vocab_parallel
func.func @vocab_parallel(%ids: tensor<2x8xi32>, %r: tensor<1xi32>, %logits: tensor<2x8x50xf32>, %all: tensor<8x8x2xf32>, %g: tensor<f32>) -> (tensor<2x8xi32>, tensor<2x8x1xf32>, tensor<2x8x2xf32>, tensor<f32>, tensor<2x8x50xf32>) {
  // CHECK: nn.vocab_part %{{.*}}, %{{.*}} {rows = 50 : i64} : (tensor<2x8xi32>, tensor<1xi32>) -> (tensor<2x8xi32>, tensor<2x8x1xf32>)
  %l, %m = nn.vocab_part %ids, %r {rows = 50 : i64} : (tensor<2x8xi32>, tensor<1xi32>) -> (tensor<2x8xi32>, tensor<2x8x1xf32>)
  // CHECK: nn.vocab_stats %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<1xi32>) -> tensor<2x8x2xf32>
  %s = nn.vocab_stats %logits, %ids, %r : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<1xi32>) -> tensor<2x8x2xf32>
  // CHECK: nn.vocab_cross_entropy %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = 0 : i64} : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<8x8x2xf32>, tensor<1xi32>) -> tensor<f32>
  %loss = nn.vocab_cross_entropy %logits, %ids, %all, %r {ignore_index = 0 : i64} : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<8x8x2xf32>, tensor<1xi32>) -> tensor<f32>
  // CHECK: nn.vocab_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<8x8x2xf32>, tensor<1xi32>, tensor<f32>) -> tensor<2x8x50xf32>
  %dl = nn.vocab_cross_entropy_grad %logits, %ids, %all, %r, %g : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<8x8x2xf32>, tensor<1xi32>, tensor<f32>) -> tensor<2x8x50xf32>
  return %l, %m, %s, %loss, %dl : tensor<2x8xi32>, tensor<2x8x1xf32>, tensor<2x8x2xf32>, tensor<f32>, tensor<2x8x50xf32>
}
