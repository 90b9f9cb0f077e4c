// RUN: shardc-opt %s --nn-build-optimizer | FileCheck %s
// RUN: shardc-opt %s --nn-build-optimizer=optimizer=sgd | FileCheck %s --check-prefix=SGD

// CHECK-LABEL: func.func @opt_step
// CHECK-SAME: (%[[W:[^:]*]]: tensor<4x2xf32> {nn.param = "w"}, %[[B:[^:]*]]: tensor<2xf32> {nn.param = "b"},
// CHECK-SAME: %[[GW:[^:]*]]: tensor<4x2xf32> {nn.state = "grad.w"}, %[[GB:[^:]*]]: tensor<2xf32> {nn.state = "grad.b"},
// CHECK-SAME: %[[MW:[^:]*]]: tensor<4x2xf32> {nn.state = "exp_avg.w"}, %[[MB:[^:]*]]: tensor<2xf32> {nn.state = "exp_avg.b"},
// CHECK-SAME: %[[VW:[^:]*]]: tensor<4x2xf32> {nn.state = "exp_avg_sq.w"}, %[[VB:[^:]*]]: tensor<2xf32> {nn.state = "exp_avg_sq.b"},
// CHECK-SAME: %[[H:[^:]*]]: tensor<7xf32> {nn.input = "optimizer"}, %[[MAX:[^:]*]]: tensor<f32> {nn.input = "max_grad_norm"})
// CHECK-SAME: -> (tensor<f32> {nn.output = "grad_sq_norm"}, tensor<4x2xf32> {nn.updates = 0 : i64}, tensor<2xf32> {nn.updates = 1 : i64}, tensor<4x2xf32> {nn.updates = 4 : i64}, tensor<2xf32> {nn.updates = 5 : i64}, tensor<4x2xf32> {nn.updates = 6 : i64}, tensor<2xf32> {nn.updates = 7 : i64})
// The global norm over every gradient, then the clipping coefficient.
// CHECK: %[[S1:.*]] = nn.squared_norm %[[GW]]
// CHECK: %[[S2:.*]] = nn.squared_norm %[[GB]]
// CHECK: %[[SQ:.*]] = nn.add %[[S1]], %[[S2]]
// CHECK: %[[C:.*]] = nn.clip_coef %[[SQ]], %[[MAX]]
// CHECK: %[[PW:.*]], %[[MW2:.*]], %[[VW2:.*]] = nn.adamw %[[W]], %[[GW]], %[[MW]], %[[VW]], %[[H]], %[[C]]
// CHECK: %[[PB:.*]], %[[MB2:.*]], %[[VB2:.*]] = nn.adamw %[[B]], %[[GB]], %[[MB]], %[[VB]], %[[H]], %[[C]]
// CHECK: return %[[SQ]], %[[PW]], %[[PB]], %[[MW2]], %[[MB2]], %[[VW2]], %[[VB2]]

// SGD-LABEL: func.func @opt_step
// SGD-SAME: {nn.state = "momentum.w"}
// SGD: nn.sgd
// SGD-SAME: : tensor<4x2xf32>, tensor<7xf32>, tensor<f32>
func.func @micro_step(%w: tensor<4x2xf32> {nn.param = "w"}, %b: tensor<2xf32> {nn.param = "b"},
                      %gw: tensor<4x2xf32> {nn.state = "grad.w"}, %gb: tensor<2xf32> {nn.state = "grad.b"}) {
  return
}
