// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fused-attention{target=cuda}))' | FileCheck %s
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fused-attention{target=cpu}))' | FileCheck %s --check-prefix=CPU
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-fused-attention{target=cuda deterministic=false}))' | FileCheck %s --check-prefix=NONDET

// A bf16 causal attention (B=1 H=4 G=2 T=S=16 D=8) and its gradient: sdpa
// keeps o and the log-sum-exp rows (1*4*16 f32 = 256 bytes) for sdpa_grad;
// each gets its workspace (abi::sdpaWorkspaceBytes: forward 4 MiB;
// backward dP 4*64*128*2 + rows 256 + dQ 2048 + grouped dK/dV 2*4*16*8*4
// (each rounded up to 64) + 4 MiB = 4266240).
// CHECK-LABEL: func.func @pair
// CHECK: %[[LSE:.*]] = rt.alloc 256
// CHECK-NEXT: %[[WF:.*]] = rt.alloc 4194304
// CHECK-NEXT: rt.kernel %{{.*}}, "sdpa"(%[[Q:.*]], %[[K:.*]], %[[V:.*]], %[[O:.*]], %[[LSE]], %[[WF]]) {dtype = bf16, floats = array<f64: 3.500000e-01>, ints = array<i64: 1, 4, 2, 16, 16, 8, 1, 1, 4194304, 0, 0, 0, 0, 0>}
// CHECK: rt.kernel %{{.*}}, "linear"
// CHECK: %[[WB:.*]] = rt.alloc 4266240
// CHECK-NEXT: rt.kernel %{{.*}}, "sdpa_grad"(%[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO:.*]], %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]], %[[WB]]) {dtype = bf16, floats = array<f64: 3.500000e-01>, ints = array<i64: 1, 4, 2, 16, 16, 8, 1, 1, 4266240, 0, 0, 0, 0, 0, 1>}
// CHECK-NOT: "attention
// deterministic=false (--deterministic-attention=false): sdpa_grad's last
// int is 0 and its workspace has no dP (4266240 - 4*64*128*2 = 4200704);
// the forward is unchanged.
// NONDET-LABEL: func.func @pair
// NONDET: rt.alloc 4194304
// NONDET-NEXT: "sdpa"({{.*}}ints = array<i64: 1, 4, 2, 16, 16, 8, 1, 1, 4194304, 0, 0, 0, 0, 0>}
// NONDET: %[[WB:.*]] = rt.alloc 4200704
// NONDET-NEXT: "sdpa_grad"({{.*}}, %[[WB]]) {{.*}}ints = array<i64: 1, 4, 2, 16, 16, 8, 1, 1, 4200704, 0, 0, 0, 0, 0, 0>}
// NONDET-NOT: "attention
// CPU-LABEL: func.func @pair
// CPU: "attention"
// CPU: "attention_grad"
// CPU-NOT: sdpa
func.func @pair(%ctx: !rt.context, %q: !rt.buffer, %k: !rt.buffer, %v: !rt.buffer, %w: !rt.buffer, %do: !rt.buffer) {
  %o = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "attention"(%q, %k, %v, %o) {dtype = bf16, floats = array<f64: 0.35>, ints = array<i64: 1, 4, 2, 16, 16, 8, 1, 1, 0, 0, 0, 0, 0>}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "linear"(%o, %w, %y) {dtype = bf16, floats = array<f64>, ints = array<i64: 64, 8, 8, 0, 0, 1>}
  %dq = rt.alloc 1024 : !rt.buffer
  %dk = rt.alloc 512 : !rt.buffer
  %dv = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "attention_grad"(%q, %k, %v, %do, %dq, %dk, %dv) {dtype = bf16, floats = array<f64: 0.35>, ints = array<i64: 1, 4, 2, 16, 16, 8, 1, 1, 0, 0, 0, 0, 0>}
  return
}

// -----

// f32 attention stays on the target's kernels.
// CHECK-LABEL: func.func @f32
// NONDET-LABEL: func.func @f32
// CHECK: "attention"(
// CHECK: "attention_grad"(
// CHECK-NOT: sdpa
func.func @f32(%ctx: !rt.context, %q: !rt.buffer, %k: !rt.buffer, %v: !rt.buffer, %do: !rt.buffer) {
  %o = rt.alloc 2048 : !rt.buffer
  rt.kernel %ctx, "attention"(%q, %k, %v, %o) {floats = array<f64: 0.35>, ints = array<i64: 1, 4, 4, 16, 16, 8, 0, 0, 0, 0, 0, 0, 0>}
  %dq = rt.alloc 2048 : !rt.buffer
  %dk = rt.alloc 2048 : !rt.buffer
  %dv = rt.alloc 2048 : !rt.buffer
  rt.kernel %ctx, "attention_grad"(%q, %k, %v, %do, %dq, %dk, %dv) {floats = array<f64: 0.35>, ints = array<i64: 1, 4, 4, 16, 16, 8, 0, 0, 0, 0, 0, 0, 0>}
  return
}

// -----

// A gradient whose attention has another shape or mask (here: not causal)
// stays on the target's kernel; every bf16 forward, paired or not (here
// the first, whose gradient does not match, and an inference one), runs
// through sdpa, its lse dropped.
// CHECK-LABEL: func.func @unmatched
// CHECK: rt.alloc 256
// CHECK-NEXT: rt.alloc 4194304
// CHECK-NEXT: "sdpa"(
// CHECK: "attention_grad"(
// CHECK: "sdpa"(
// CHECK-NOT: "attention"(
func.func @unmatched(%ctx: !rt.context, %q: !rt.buffer, %k: !rt.buffer, %v: !rt.buffer, %do: !rt.buffer) {
  %o = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "attention"(%q, %k, %v, %o) {dtype = bf16, floats = array<f64: 0.35>, ints = array<i64: 1, 4, 4, 16, 16, 8, 1, 1, 0, 0, 0, 0, 0>}
  %dq = rt.alloc 1024 : !rt.buffer
  %dk = rt.alloc 1024 : !rt.buffer
  %dv = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "attention_grad"(%q, %k, %v, %do, %dq, %dk, %dv) {dtype = bf16, floats = array<f64: 0.35>, ints = array<i64: 1, 4, 4, 16, 16, 8, 0, 1, 0, 0, 0, 0, 0>}
  %o2 = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "attention"(%q, %k, %v, %o2) {dtype = bf16, floats = array<f64: 0.35>, ints = array<i64: 1, 4, 4, 16, 16, 8, 1, 1, 0, 0, 0, 0, 0>}
  return
}
