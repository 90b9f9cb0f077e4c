// RUN: shardc-opt %s --split-input-file --convert-nn-to-rt | FileCheck %s

// A tensorwise float8 linear y = x w^T and GEMMs of the backward's forms
// (nn-autodiff's: the input gradient dy w, the weight gradient dy^T x),
// each operand cast K-major. The linear's input x (its weight gradient
// reads x^T) and the output gradient, here y (dy and dy^T), are cast once
// into both layouts (cast_fp8's both: q [R,C] and qt [C,R]); the weight w
// is not (its transposed copy would live from forward to backward): a cast
// a layout. A tensor read in one layout only (dx) gets one cast. The
// tensorwise scales are {s, 1/s}: 8 bytes.
// CHECK-LABEL: func.func @shardc_forward
// CHECK-DAG: %[[X:.*]] = rt.view %arg1[0]
// CHECK-DAG: %[[W:.*]] = rt.view %arg1[6144]
// CHECK: %[[QX:.*]] = rt.alloc 1536
// CHECK-NEXT: %[[SX:.*]] = rt.alloc 8
// CHECK-NEXT: %[[QXT:.*]] = rt.alloc 1536
// CHECK-NEXT: rt.kernel %{{.*}}, "cast_fp8"(%[[X]], %[[QX]], %[[SX]], %[[QXT]]) {{.*}}ints = array<i64: 32, 48, 0, 7, 0, 0, 1>}
// CHECK: rt.kernel %{{.*}}, "cast_fp8"(%[[W]], %[[QW:.*]], %[[SW:.*]]) {{.*}}ints = array<i64: 16, 48, 0, 7, 0, 0, 0>}
// CHECK: rt.kernel %{{.*}}, "matmul_fp8"(%[[QX]], %[[QW]], %[[SX]], %[[SW]], %[[Y:.*]]) {{.*}}ints = array<i64: 32, 48, 16, 7, 7, 0, 0, 0, 0>}
// CHECK: rt.kernel %{{.*}}, "cast_fp8"(%[[Y]], %[[QY:.*]], %[[SY:.*]], %[[QYT:.*]]) {{.*}}ints = array<i64: 32, 16, 0, 8, 0, 0, 1>}
// CHECK: rt.kernel %{{.*}}, "cast_fp8"(%[[W]], %[[QWT:.*]], %[[SWT:.*]]) {{.*}}ints = array<i64: 16, 48, 0, 7, 0, 1, 0>}
// CHECK: rt.kernel %{{.*}}, "matmul_fp8"(%[[QY]], %[[QWT]], %[[SY]], %[[SWT]], %[[DX:.*]]) {{.*}}ints = array<i64: 32, 16, 48, 8, 7, 0, 0, 0, 0>}
// CHECK: rt.kernel %{{.*}}, "cast_fp8"(%[[DX]], %[[QDX:.*]], %[[SDX:.*]]) {{.*}}ints = array<i64: 32, 48, 0, 7, 0, 1, 0>}
// CHECK: rt.kernel %{{.*}}, "matmul_fp8"(%[[QYT]], %[[QDX]], %[[SY]], %[[SDX]], %{{.*}}) {{.*}}ints = array<i64: 16, 32, 48, 8, 7, 0, 0, 0, 0>}
// CHECK: rt.kernel %{{.*}}, "matmul_fp8"(%[[QYT]], %[[QXT]], %[[SY]], %[[SX]], %{{.*}}) {{.*}}ints = array<i64: 16, 32, 48, 8, 7, 0, 0, 0, 0>}
// CHECK-NOT: "cast_fp8"
func.func @forward(%x: tensor<32x48xf32> {nn.param = "x"}, %w: tensor<16x48xf32> {nn.param = "w"}) -> tensor<16x48xf32> {
  %y = nn.linear %x, %w {float8 = "tensorwise"} : (tensor<32x48xf32>, tensor<16x48xf32>) -> tensor<32x16xf32>
  %dx = nn.matmul %y, %w {float8 = "tensorwise", float8_grad = "lhs"} : (tensor<32x16xf32>, tensor<16x48xf32>) -> tensor<32x48xf32>
  %dw = nn.matmul %y, %dx {float8 = "tensorwise", float8_grad = "lhs", transpose_a} : (tensor<32x16xf32>, tensor<32x48xf32>) -> tensor<16x48xf32>
  %dw2 = nn.matmul %y, %x {float8 = "tensorwise", float8_grad = "lhs", transpose_a} : (tensor<32x16xf32>, tensor<32x48xf32>) -> tensor<16x48xf32>
  %s = nn.add %dw, %dw2 : (tensor<16x48xf32>, tensor<16x48xf32>) -> tensor<16x48xf32>
  return %s : tensor<16x48xf32>
}

// -----

// Rowwise: a row's scale depends on the layout (the rows of q), so x is
// cast once a layout, with a scale a row of each.
// CHECK-LABEL: func.func @shardc_forward
// CHECK: rt.kernel %{{.*}}, "cast_fp8"(%[[X:.*]], %{{.*}}, %{{.*}}) {{.*}}ints = array<i64: 32, 48, 0, 7, 1, 0, 0>}
// CHECK: rt.kernel %{{.*}}, "cast_fp8"(%[[X]], %{{.*}}, %{{.*}}) {{.*}}ints = array<i64: 32, 48, 0, 7, 1, 1, 0>}
func.func @forward(%x: tensor<32x48xf32> {nn.param = "x"}, %w: tensor<16x48xf32> {nn.param = "w"}) -> tensor<16x48xf32> {
  %y = nn.linear %x, %w {float8 = "rowwise"} : (tensor<32x48xf32>, tensor<16x48xf32>) -> tensor<32x16xf32>
  %dw = nn.matmul %y, %x {float8 = "rowwise", float8_grad = "lhs", transpose_a} : (tensor<32x16xf32>, tensor<32x48xf32>) -> tensor<16x48xf32>
  return %dw : tensor<16x48xf32>
}
