// RUN: shardc-opt %s --split-input-file --nn-fuse-patterns | FileCheck %s

// erf-GELU as torch.onnx.export writes it: ((x * (erf(x / sqrt2) + 1)) * 0.5.
// CHECK-LABEL: func.func @gelu_torch
// CHECK-NEXT: %[[Y:.*]] = nn.gelu %arg0 : tensor<2x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_torch(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s2 = nn.constant dense<1.41421354> : tensor<f32> -> tensor<f32>
  %d = nn.div %x, %s2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = nn.erf %d : tensor<2x8xf32>
  %one = nn.constant dense<1.0> : tensor<f32> -> tensor<f32>
  %a = nn.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = nn.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %half = nn.constant dense<5.0e-01> : tensor<f32> -> tensor<f32>
  %y = nn.mul %m, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Another association and operand order, x * (1/sqrt2) inside erf, and
// scalars of shape [1]: the same function.
// CHECK-LABEL: func.func @gelu_reassociated
// CHECK-NEXT: %[[Y:.*]] = nn.gelu %arg0 : tensor<2x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_reassociated(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %r = nn.constant dense<0.707106769> : tensor<1xf32> -> tensor<1xf32>
  %d = nn.mul %r, %x : (tensor<1xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %e = nn.erf %d : tensor<2x8xf32>
  %one = nn.fill {value = 1.0 : f64} : tensor<1xf32>
  %a = nn.add %one, %e : (tensor<1xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %half = nn.fill {value = 0.5 : f64} : tensor<f32>
  %h = nn.mul %half, %x : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = nn.mul %a, %h : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Not GELU: 1.414 is not sqrt(2) in f32; erf of another tensor; the erf
// term also returned (the fused op would not produce it).
// CHECK-LABEL: func.func @gelu_variants_kept
// CHECK-NOT: nn.gelu
// CHECK: return
func.func @gelu_variants_kept(%x: tensor<8xf32>, %z: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %s2 = nn.constant dense<1.414> : tensor<f32> -> tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32> -> tensor<f32>
  %half = nn.constant dense<5.0e-01> : tensor<f32> -> tensor<f32>
  %d = nn.div %x, %s2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %e = nn.erf %d : tensor<8xf32>
  %a = nn.add %e, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %m = nn.mul %x, %a : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y = nn.mul %m, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>

  %exact = nn.constant dense<1.41421354> : tensor<f32> -> tensor<f32>
  %d2 = nn.div %z, %exact : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %e2 = nn.erf %d2 : tensor<8xf32>
  %a2 = nn.add %e2, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %m2 = nn.mul %x, %a2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y2 = nn.mul %m2, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>

  %d3 = nn.div %x, %exact : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %e3 = nn.erf %d3 : tensor<8xf32>
  %a3 = nn.add %e3, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %m3 = nn.mul %x, %a3 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y3 = nn.mul %m3, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %y, %y2, %y3, %a3 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Layer norm as a decomposed ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div,
// then * weight + bias: one nn.layer_norm with the weight and bias.
// CHECK-LABEL: func.func @layer_norm_affine
// CHECK-NEXT: %[[Y:.*]] = nn.layer_norm %arg0, %arg1, %arg2 {eps = 9.9999997473787516E-6 : f64} : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm_affine(%x: tensor<2x4x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %c = nn.fill {value = 16.0 : f64} : tensor<f32>
  %s = nn.sum_to %x : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %mean = nn.div %s, %c : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %d = nn.sub %x, %mean : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %two = nn.constant dense<2.0> : tensor<f32> -> tensor<f32>
  %sq = nn.pow %d, %two : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %ss = nn.sum_to %sq : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %var = nn.div %ss, %c : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %eps = nn.constant dense<9.99999974E-6> : tensor<f32> -> tensor<f32>
  %ve = nn.add %var, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %std = nn.sqrt %ve : tensor<2x4x1xf32>
  %n = nn.div %d, %std : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %nw = nn.mul %n, %w : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %y = nn.add %b, %nw : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// The square as a self-product, eps first, no affine: the weight is ones.
// A [1, C] bias is read as [C].
// CHECK-LABEL: func.func @layer_norm_plain
// CHECK: %[[ONES:.*]] = nn.fill {value = 1.000000e+00 : f64} : tensor<8xf32>
// CHECK: %[[B:.*]] = nn.reshape %arg1 : (tensor<1x8xf32>) -> tensor<8xf32>
// CHECK: %[[Y:.*]] = nn.layer_norm %arg0, %[[ONES]], %[[B]] {eps = 1.000000e-03 : f64}
// CHECK-NOT: nn.sqrt
// CHECK: return %[[Y]]
func.func @layer_norm_plain(%x: tensor<3x8xf32>, %b: tensor<1x8xf32>) -> tensor<3x8xf32> {
  %c = nn.fill {value = 8.0 : f64} : tensor<f32>
  %s = nn.sum_to %x : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %mean = nn.div %s, %c : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %d = nn.sub %x, %mean : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %sq = nn.mul %d, %d : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %ss = nn.sum_to %sq : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %var = nn.div %ss, %c : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %eps = nn.fill {value = 1.0e-3 : f64} : tensor<f32>
  %ve = nn.add %eps, %var : (tensor<f32>, tensor<3x1xf32>) -> tensor<3x1xf32>
  %std = nn.sqrt %ve : tensor<3x1xf32>
  %n = nn.div %d, %std : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %y = nn.add %n, %b : (tensor<3x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

// Not layer norm: the mean over the first dimension; the divisor not the
// dimension's size; the variance of x instead of x - mean(x).
// CHECK-LABEL: func.func @layer_norm_variants_kept
// CHECK-NOT: nn.layer_norm
// CHECK: return
func.func @layer_norm_variants_kept(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %c = nn.fill {value = 4.0 : f64} : tensor<f32>
  %two = nn.fill {value = 2.0 : f64} : tensor<f32>
  %eps = nn.fill {value = 1.0e-5 : f64} : tensor<f32>
  %s0 = nn.sum_to %x : (tensor<4x4xf32>) -> tensor<1x4xf32>
  %m0 = nn.div %s0, %c : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  %d0 = nn.sub %x, %m0 : (tensor<4x4xf32>, tensor<1x4xf32>) -> tensor<4x4xf32>
  %q0 = nn.pow %d0, %two : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %v0s = nn.sum_to %q0 : (tensor<4x4xf32>) -> tensor<1x4xf32>
  %v0 = nn.div %v0s, %c : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  %e0 = nn.add %v0, %eps : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  %r0 = nn.sqrt %e0 : tensor<1x4xf32>
  %y0 = nn.div %d0, %r0 : (tensor<4x4xf32>, tensor<1x4xf32>) -> tensor<4x4xf32>

  %three = nn.fill {value = 3.0 : f64} : tensor<f32>
  %s1 = nn.sum_to %x : (tensor<4x4xf32>) -> tensor<4x1xf32>
  %m1 = nn.div %s1, %three : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %d1 = nn.sub %x, %m1 : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
  %q1 = nn.pow %d1, %two : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %v1s = nn.sum_to %q1 : (tensor<4x4xf32>) -> tensor<4x1xf32>
  %v1 = nn.div %v1s, %three : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %e1 = nn.add %v1, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r1 = nn.sqrt %e1 : tensor<4x1xf32>
  %y1 = nn.div %d1, %r1 : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>

  %s2 = nn.sum_to %x : (tensor<4x4xf32>) -> tensor<4x1xf32>
  %m2 = nn.div %s2, %c : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %d2 = nn.sub %x, %m2 : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
  %q2 = nn.pow %x, %two : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %v2s = nn.sum_to %q2 : (tensor<4x4xf32>) -> tensor<4x1xf32>
  %v2 = nn.div %v2s, %c : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %e2 = nn.add %v2, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r2 = nn.sqrt %e2 : tensor<4x1xf32>
  %y2 = nn.div %d2, %r2 : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
  return %y0, %y1, %y2 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// The attention of torch 1.13's MultiheadAttention export on [B*H, T, D]:
// q / sqrt(D), times k laid out [D, T] by a transpose, times 1, plus the
// causal mask, softmax, times v. The transposes compose into one, the
// scale is 1 / 1.41421354 (the f32 constant) and the heads are
// [B*H, 1, T, D].
// CHECK-LABEL: func.func @attention_torch
// CHECK-DAG: %[[Q:.*]] = nn.reshape %arg0 : (tensor<4x3x2xf32>) -> tensor<4x1x3x2xf32>
// CHECK-DAG: %[[KT:.*]] = nn.transpose %arg1 {permutation = array<i64: 1, 0, 2>} : (tensor<3x4x2xf32>) -> tensor<4x3x2xf32>
// CHECK-DAG: %[[K:.*]] = nn.reshape %[[KT]] : (tensor<4x3x2xf32>) -> tensor<4x1x3x2xf32>
// CHECK-DAG: %[[V:.*]] = nn.reshape %arg2 : (tensor<4x3x2xf32>) -> tensor<4x1x3x2xf32>
// CHECK: %[[A:.*]] = nn.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.70710679328816484 : f64}
// CHECK: %[[O:.*]] = nn.reshape %[[A]] : (tensor<4x1x3x2xf32>) -> tensor<4x3x2xf32>
// CHECK-NOT: nn.softmax
// CHECK: return %[[O]]
func.func @attention_torch(%q: tensor<4x3x2xf32>, %k: tensor<3x4x2xf32>, %v: tensor<4x3x2xf32>) -> tensor<4x3x2xf32> {
  %c = nn.constant dense<1.41421354> : tensor<f32> -> tensor<f32>
  %qs = nn.div %q, %c : (tensor<4x3x2xf32>, tensor<f32>) -> tensor<4x3x2xf32>
  %kt = nn.transpose %k {permutation = array<i64: 1, 2, 0>} : (tensor<3x4x2xf32>) -> tensor<4x2x3xf32>
  %s = nn.batch_matmul %qs, %kt : (tensor<4x3x2xf32>, tensor<4x2x3xf32>) -> tensor<4x3x3xf32>
  %one = nn.constant dense<1.0> : tensor<f32> -> tensor<f32>
  %s1 = nn.mul %s, %one : (tensor<4x3x3xf32>, tensor<f32>) -> tensor<4x3x3xf32>
  %mask = nn.constant dense<[[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]]> : tensor<1x3x3xf32> -> tensor<1x3x3xf32>
  %sm = nn.add %s1, %mask : (tensor<4x3x3xf32>, tensor<1x3x3xf32>) -> tensor<4x3x3xf32>
  %p = nn.softmax %sm {axis = 2 : i64} : tensor<4x3x3xf32>
  %o = nn.batch_matmul %p, %v : (tensor<4x3x3xf32>, tensor<4x3x2xf32>) -> tensor<4x3x2xf32>
  return %o : tensor<4x3x2xf32>
}

// -----

// [B, H, T, D] with k given as [..., S, D] (transpose_b), the scores
// divided by sqrt(D) (GPT-2's form) and no mask: non-causal attention read
// in place, with cross-attention lengths T != S.
// CHECK-LABEL: func.func @attention_4d
// CHECK-NEXT: %[[A:.*]] = nn.attention %arg0, %arg1, %arg2 {scale = 2.500000e-01 : f64} : (tensor<2x2x3x16xf32>, tensor<2x2x5x16xf32>, tensor<2x2x5x16xf32>) -> tensor<2x2x3x16xf32>
// CHECK-NEXT: return %[[A]]
func.func @attention_4d(%q: tensor<2x2x3x16xf32>, %k: tensor<2x2x5x16xf32>, %v: tensor<2x2x5x16xf32>) -> tensor<2x2x3x16xf32> {
  %s = nn.batch_matmul %q, %k {transpose_b} : (tensor<2x2x3x16xf32>, tensor<2x2x5x16xf32>) -> tensor<2x2x3x5xf32>
  %c = nn.fill {value = 4.0 : f64} : tensor<f32>
  %ss = nn.div %s, %c : (tensor<2x2x3x5xf32>, tensor<f32>) -> tensor<2x2x3x5xf32>
  %p = nn.softmax %ss : tensor<2x2x3x5xf32>
  %o = nn.batch_matmul %p, %v : (tensor<2x2x3x5xf32>, tensor<2x2x5x16xf32>) -> tensor<2x2x3x16xf32>
  return %o : tensor<2x2x3x16xf32>
}

// -----

// Not attention: a mask that is not causal (the diagonal masked); the
// probabilities also returned; k broadcast over the batch.
// CHECK-LABEL: func.func @attention_variants_kept
// CHECK-NOT: nn.attention
// CHECK: return
func.func @attention_variants_kept(%q: tensor<2x2x4xf32>, %k: tensor<2x2x4xf32>, %k1: tensor<1x2x4xf32>, %v: tensor<2x2x4xf32>) -> (tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x2x2xf32>, tensor<2x2x4xf32>) {
  %mask = nn.constant dense<[[0xFF800000, 0xFF800000], [0.0, 0xFF800000]]> : tensor<2x2xf32> -> tensor<2x2xf32>
  %s = nn.batch_matmul %q, %k {transpose_b} : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x2x2xf32>
  %sm = nn.add %s, %mask : (tensor<2x2x2xf32>, tensor<2x2xf32>) -> tensor<2x2x2xf32>
  %p = nn.softmax %sm : tensor<2x2x2xf32>
  %o = nn.batch_matmul %p, %v : (tensor<2x2x2xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>

  %s2 = nn.batch_matmul %q, %k {transpose_b} : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x2x2xf32>
  %p2 = nn.softmax %s2 : tensor<2x2x2xf32>
  %o2 = nn.batch_matmul %p2, %v : (tensor<2x2x2xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>

  %s3 = nn.batch_matmul %q, %k1 {transpose_b} : (tensor<2x2x4xf32>, tensor<1x2x4xf32>) -> tensor<2x2x2xf32>
  %p3 = nn.softmax %s3 : tensor<2x2x2xf32>
  %o3 = nn.batch_matmul %p3, %v : (tensor<2x2x2xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  return %o, %o2, %p2, %o3 : tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x2x2xf32>, tensor<2x2x4xf32>
}

// -----

// A causal mask through a select, as masked_fill and torch.where write it:
// where(causal, s, lowest) and where(above, -inf, s). The condition is a
// constant [T, S] boolean broadcast over the batch. Both are causal
// attention; a condition with the diagonal masked is not.
// CHECK-LABEL: func.func @attention_where_mask
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 5.000000e-01 : f64}
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.000000e+00 : f64}
// CHECK: nn.where
// CHECK: nn.softmax
// CHECK-NOT: nn.attention
// CHECK: return
func.func @attention_where_mask(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %keep = nn.constant dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1> -> tensor<3x3xi1>
  %above = nn.constant dense<[[false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1> -> tensor<3x3xi1>
  %strict = nn.constant dense<[[false, false, false], [true, false, false], [true, true, false]]> : tensor<3x3xi1> -> tensor<3x3xi1>
  %lowest = nn.constant dense<-3.40282347E+38> : tensor<f32> -> tensor<f32>
  %ninf = nn.fill {value = 0xFFF0000000000000 : f64} : tensor<f32>
  %half = nn.fill {value = 0.5 : f64} : tensor<f32>

  %s = nn.batch_matmul %q, %k {transpose_b} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x3xf32>
  %ss = nn.mul %s, %half : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %m = nn.where %keep, %ss, %lowest : (tensor<3x3xi1>, tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %p = nn.softmax %m : tensor<2x3x3xf32>
  %o = nn.batch_matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>

  %s2 = nn.batch_matmul %q, %k {transpose_b} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x3xf32>
  %m2 = nn.where %above, %ninf, %s2 : (tensor<3x3xi1>, tensor<f32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  %p2 = nn.softmax %m2 : tensor<2x3x3xf32>
  %o2 = nn.batch_matmul %p2, %v : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>

  %s3 = nn.batch_matmul %q, %k {transpose_b} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x3xf32>
  %m3 = nn.where %strict, %s3, %ninf : (tensor<3x3xi1>, tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %p3 = nn.softmax %m3 : tensor<2x3x3xf32>
  %o3 = nn.batch_matmul %p3, %v : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %o, %o2, %o3 : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// tanh-GELU as transformers' NewGELUActivation exports it:
// (x * 0.5) * (1 + tanh(0.797884583 * (x + 0.044715 * x^3))).
// CHECK-LABEL: func.func @gelu_tanh
// CHECK-NEXT: %[[Y:.*]] = nn.gelu %arg0 {approximate = "tanh"} : tensor<2x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_tanh(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = nn.constant dense<5.000000e-01> : tensor<f32> -> tensor<f32>
  %h = nn.mul %x, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %three = nn.constant dense<3.000000e+00> : tensor<f32> -> tensor<f32>
  %c3 = nn.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %k = nn.constant dense<4.471500e-02> : tensor<f32> -> tensor<f32>
  %kc = nn.mul %c3, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %in = nn.add %x, %kc : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = nn.constant dense<0.797884583> : tensor<f32> -> tensor<f32>
  %t0 = nn.mul %in, %a : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %t = nn.tanh %t0 : tensor<2x8xf32>
  %one = nn.constant dense<1.000000e+00> : tensor<f32> -> tensor<f32>
  %t1 = nn.add %t, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = nn.mul %h, %t1 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Not tanh-GELU: another cubic coefficient (0.0447); x * x * x is a cube.
// CHECK-LABEL: func.func @gelu_tanh_variants
// CHECK: nn.tanh
// CHECK: nn.gelu %arg0 {approximate = "tanh"}
func.func @gelu_tanh_variants(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %half = nn.constant dense<5.000000e-01> : tensor<f32> -> tensor<f32>
  %a = nn.constant dense<0.797884583> : tensor<f32> -> tensor<f32>
  %one = nn.constant dense<1.000000e+00> : tensor<f32> -> tensor<f32>
  %three = nn.constant dense<3.000000e+00> : tensor<f32> -> tensor<f32>
  %bad = nn.constant dense<4.470000e-02> : tensor<f32> -> tensor<f32>
  %k = nn.constant dense<4.471500e-02> : tensor<f32> -> tensor<f32>
  %h = nn.mul %x, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %c3 = nn.pow %x, %three : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %kc = nn.mul %c3, %bad : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %in = nn.add %x, %kc : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %t0 = nn.mul %in, %a : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %t = nn.tanh %t0 : tensor<8xf32>
  %t1 = nn.add %t, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %y = nn.mul %h, %t1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %h2 = nn.mul %half, %x : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %sq = nn.mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %cube = nn.mul %sq, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %kc2 = nn.mul %k, %cube : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %in2 = nn.add %kc2, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %u0 = nn.mul %a, %in2 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %u = nn.tanh %u0 : tensor<8xf32>
  %u1 = nn.add %one, %u : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %y2 = nn.mul %u1, %h2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y, %y2 : tensor<8xf32>, tensor<8xf32>
}

// -----

// SiLU: x * sigmoid(x) in either order; a sigmoid of another value, or one
// read twice, stays.
// CHECK-LABEL: func.func @silu
// CHECK: %[[A:.*]] = nn.silu %arg0 : tensor<8xf32>
// CHECK: nn.sigmoid %arg1
// CHECK: nn.mul
// CHECK: return %[[A]]
func.func @silu(%x: tensor<8xf32>, %z: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %s = nn.sigmoid %x : tensor<8xf32>
  %a = nn.mul %s, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %sz = nn.sigmoid %z : tensor<8xf32>
  %b = nn.mul %x, %sz : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// RMS norm as LlamaRMSNorm exports: TorchScript's x * (1 / sqrt(mean(x^2) +
// eps)), then * w; the dynamo exporter's reciprocal(sqrt(...)).
// CHECK-LABEL: func.func @rms_norm
// CHECK: %[[A:.*]] = nn.rms_norm %arg0, %arg1 {eps = 9.9999999747524271E-7 : f64} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK: %[[B:.*]] = nn.rms_norm %[[A]], %arg1 {eps = 9.9999999747524271E-7 : f64}
// CHECK-NOT: nn.sqrt
// CHECK: return %[[B]]
func.func @rms_norm(%x: tensor<2x4x16xf32>, %w: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %two = nn.constant dense<2.000000e+00> : tensor<f32> -> tensor<f32>
  %n = nn.fill {value = 1.600000e+01 : f64} : tensor<f32>
  %eps = nn.constant dense<9.99999997E-7> : tensor<f32> -> tensor<f32>
  %one = nn.constant dense<1.000000e+00> : tensor<f32> -> tensor<f32>
  %p = nn.pow %x, %two : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %s = nn.sum_to %p : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %m = nn.div %s, %n : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %a = nn.add %m, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %r = nn.sqrt %a : tensor<2x4x1xf32>
  %i = nn.div %one, %r : (tensor<f32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %y = nn.mul %x, %i : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %yw = nn.mul %w, %y : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %p2 = nn.mul %yw, %yw : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s2 = nn.sum_to %p2 : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %m2 = nn.div %s2, %n : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %a2 = nn.add %eps, %m2 : (tensor<f32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %r2 = nn.sqrt %a2 : tensor<2x4x1xf32>
  %i2 = nn.reciprocal %r2 : tensor<2x4x1xf32>
  %y2 = nn.mul %i2, %yw : (tensor<2x4x1xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %yw2 = nn.mul %y2, %w : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  return %yw2 : tensor<2x4x16xf32>
}

// -----

// Not RMS norm: the mean over the wrong size (15); the root of another
// value's squares.
// CHECK-LABEL: func.func @rms_norm_variants_kept
// CHECK-NOT: nn.rms_norm
// CHECK: return
func.func @rms_norm_variants_kept(%x: tensor<4x16xf32>, %z: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %two = nn.constant dense<2.000000e+00> : tensor<f32> -> tensor<f32>
  %n = nn.fill {value = 1.500000e+01 : f64} : tensor<f32>
  %n16 = nn.fill {value = 1.600000e+01 : f64} : tensor<f32>
  %eps = nn.constant dense<9.99999997E-7> : tensor<f32> -> tensor<f32>
  %p = nn.pow %x, %two : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %s = nn.sum_to %p : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %m = nn.div %s, %n : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %a = nn.add %m, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r = nn.sqrt %a : tensor<4x1xf32>
  %i = nn.reciprocal %r : tensor<4x1xf32>
  %y = nn.mul %x, %i : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %pz = nn.pow %z, %two : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %sz = nn.sum_to %pz : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %mz = nn.div %sz, %n16 : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %az = nn.add %mz, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %rz = nn.sqrt %az : tensor<4x1xf32>
  %iz = nn.reciprocal %rz : tensor<4x1xf32>
  %y2 = nn.mul %x, %iz : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  return %y, %y2 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Hugging Face attention as the dynamo exporter writes it: grouped-query
// (4 query heads over 2 key/value heads through repeat_kv's reshape,
// broadcast and reshape), k^T as a transpose of the flattened heads, q and
// k each scaled by D^-1/4, the causal mask filled with float32's lowest
// value, and the NaN guard after the softmax. One nn.attention reads the
// two key/value heads; the scale is the product of the two constants.
// CHECK-LABEL: func.func @attention_hf_gqa
// CHECK: %[[A:.*]] = nn.attention %arg0, %arg1, %arg2 {causal, scale = {{.*}} : f64} : (tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> tensor<1x4x3x8xf32>
// CHECK-NOT: nn.softmax
// CHECK: return %[[A]]
func.func @attention_hf_gqa(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x4x3x8xf32> {
  %k1 = nn.reshape %k : (tensor<1x2x3x8xf32>) -> tensor<1x2x1x3x8xf32>
  %k2 = nn.broadcast_to %k1 : (tensor<1x2x1x3x8xf32>) -> tensor<1x2x2x3x8xf32>
  %v1 = nn.reshape %v : (tensor<1x2x3x8xf32>) -> tensor<1x2x1x3x8xf32>
  %v2 = nn.broadcast_to %v1 : (tensor<1x2x1x3x8xf32>) -> tensor<1x2x2x3x8xf32>
  %v3 = nn.reshape %v2 : (tensor<1x2x2x3x8xf32>) -> tensor<1x4x3x8xf32>
  %kf = nn.reshape %k2 : (tensor<1x2x2x3x8xf32>) -> tensor<4x3x8xf32>
  %kft = nn.transpose %kf {permutation = array<i64: 0, 2, 1>} : (tensor<4x3x8xf32>) -> tensor<4x8x3xf32>
  %kt = nn.reshape %kft : (tensor<4x8x3xf32>) -> tensor<1x4x8x3xf32>
  %c = nn.constant dense<0.594603539> : tensor<f32> -> tensor<f32>
  %qs = nn.mul %q, %c : (tensor<1x4x3x8xf32>, tensor<f32>) -> tensor<1x4x3x8xf32>
  %ks = nn.mul %kt, %c : (tensor<1x4x8x3xf32>, tensor<f32>) -> tensor<1x4x8x3xf32>
  %s = nn.batch_matmul %qs, %ks : (tensor<1x4x3x8xf32>, tensor<1x4x8x3xf32>) -> tensor<1x4x3x3xf32>
  %mask = nn.constant dense<[[[[0.0, 0xFF7FFFFF, 0xFF7FFFFF], [0.0, 0.0, 0xFF7FFFFF], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32> -> tensor<1x1x3x3xf32>
  %sm = nn.add %s, %mask : (tensor<1x4x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x4x3x3xf32>
  %p = nn.softmax %sm {axis = 3 : i64} : tensor<1x4x3x3xf32>
  %pc = nn.nan_to_zero %p : tensor<1x4x3x3xf32>
  %o = nn.batch_matmul %pc, %v3 : (tensor<1x4x3x3xf32>, tensor<1x4x3x8xf32>) -> tensor<1x4x3x8xf32>
  return %o : tensor<1x4x3x8xf32>
}

// -----

// Not attention: a finite mask too small to zero a probability exactly
// (-1e4); the NaN guard's result also returned.
// CHECK-LABEL: func.func @attention_finite_mask_kept
// CHECK-NOT: nn.attention
// CHECK: return
func.func @attention_finite_mask_kept(%q: tensor<2x2x4xf32>, %k: tensor<2x2x4xf32>, %v: tensor<2x2x4xf32>) -> (tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x2x2xf32>) {
  %mask = nn.constant dense<[[0.0, -1.0e4], [0.0, 0.0]]> : tensor<2x2xf32> -> tensor<2x2xf32>
  %s = nn.batch_matmul %q, %k {transpose_b} : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x2x2xf32>
  %sm = nn.add %s, %mask : (tensor<2x2x2xf32>, tensor<2x2xf32>) -> tensor<2x2x2xf32>
  %p = nn.softmax %sm : tensor<2x2x2xf32>
  %o = nn.batch_matmul %p, %v : (tensor<2x2x2xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %mask2 = nn.constant dense<[[0.0, 0xFF7FFFFF], [0.0, 0.0]]> : tensor<2x2xf32> -> tensor<2x2xf32>
  %s2 = nn.batch_matmul %q, %k {transpose_b} : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x2x2xf32>
  %sm2 = nn.add %s2, %mask2 : (tensor<2x2x2xf32>, tensor<2x2xf32>) -> tensor<2x2x2xf32>
  %p2 = nn.softmax %sm2 : tensor<2x2x2xf32>
  %pc2 = nn.nan_to_zero %p2 : tensor<2x2x2xf32>
  %o2 = nn.batch_matmul %pc2, %v : (tensor<2x2x2xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  return %o, %o2, %pc2 : tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x2x2xf32>
}

// -----

// Rotary embedding as Llama exports write it: q * cos + cat(-q[..., 4:],
// q[..., :4]) * sin with [1, 1, T, D] tables whose halves are equal (cos and
// sin of cat(freqs, freqs)). The tables become [T, D/2] constants. A table
// with unequal halves is not a rotation: kept.
// CHECK-LABEL: func.func @rotary_tables
// CHECK-DAG: %[[C:.*]] = nn.constant dense<{{\[}}[1.000000e+00, 5.000000e-01], [2.500000e-01, 1.250000e-01]]> : tensor<2x2xf32>
// CHECK-DAG: %[[S:.*]] = nn.constant dense<{{\[}}[0.000000e+00, 7.500000e-01], [5.000000e-01, 2.000000e+00]]> : tensor<2x2xf32>
// CHECK: %[[Y:.*]] = nn.rotary_table %arg0, %[[C]], %[[S]] : (tensor<1x3x2x4xf32>, tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<1x3x2x4xf32>
// CHECK: nn.concat
// CHECK: return %[[Y]],
func.func @rotary_tables(%q: tensor<1x3x2x4xf32>) -> (tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>) {
  %cos = nn.constant dense<[[[[1.0, 0.5, 1.0, 0.5], [0.25, 0.125, 0.25, 0.125]]]]> : tensor<1x1x2x4xf32> -> tensor<1x1x2x4xf32>
  %sin = nn.constant dense<[[[[0.0, 0.75, 0.0, 0.75], [0.5, 2.0, 0.5, 2.0]]]]> : tensor<1x1x2x4xf32> -> tensor<1x1x2x4xf32>
  %a = nn.mul %q, %cos : (tensor<1x3x2x4xf32>, tensor<1x1x2x4xf32>) -> tensor<1x3x2x4xf32>
  %lo = nn.slice %q {dim = 3 : i64, start = 0 : i64} : (tensor<1x3x2x4xf32>) -> tensor<1x3x2x2xf32>
  %hi = nn.slice %q {dim = 3 : i64, start = 2 : i64} : (tensor<1x3x2x4xf32>) -> tensor<1x3x2x2xf32>
  %n = nn.neg %hi : tensor<1x3x2x2xf32>
  %r = nn.concat %n, %lo {dim = 3 : i64} : (tensor<1x3x2x2xf32>, tensor<1x3x2x2xf32>) -> tensor<1x3x2x4xf32>
  %b = nn.mul %r, %sin : (tensor<1x3x2x4xf32>, tensor<1x1x2x4xf32>) -> tensor<1x3x2x4xf32>
  %y = nn.add %a, %b : (tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>) -> tensor<1x3x2x4xf32>
  %bad = nn.constant dense<[[[[1.0, 0.5, 1.0, 0.6], [0.25, 0.125, 0.25, 0.125]]]]> : tensor<1x1x2x4xf32> -> tensor<1x1x2x4xf32>
  %a2 = nn.mul %q, %bad : (tensor<1x3x2x4xf32>, tensor<1x1x2x4xf32>) -> tensor<1x3x2x4xf32>
  %lo2 = nn.slice %q {dim = 3 : i64, start = 0 : i64} : (tensor<1x3x2x4xf32>) -> tensor<1x3x2x2xf32>
  %hi2 = nn.slice %q {dim = 3 : i64, start = 2 : i64} : (tensor<1x3x2x4xf32>) -> tensor<1x3x2x2xf32>
  %n2 = nn.neg %hi2 : tensor<1x3x2x2xf32>
  %r2 = nn.concat %n2, %lo2 {dim = 3 : i64} : (tensor<1x3x2x2xf32>, tensor<1x3x2x2xf32>) -> tensor<1x3x2x4xf32>
  %b2 = nn.mul %sin, %r2 : (tensor<1x1x2x4xf32>, tensor<1x3x2x4xf32>) -> tensor<1x3x2x4xf32>
  %y2 = nn.add %b2, %a2 : (tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>) -> tensor<1x3x2x4xf32>
  return %y, %y2 : tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>
}
