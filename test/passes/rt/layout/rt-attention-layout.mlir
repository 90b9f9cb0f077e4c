// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(rt-attention-layout))' | FileCheck %s

// GPT-2's attention (B=2 T=16 H=2 D=4, C=8) as convert-nn-to-rt lowers it,
// f32: q, k, v sliced out of the QKV projection [32, 24] and transposed,
// o transposed back; in backward dO transposed, dq, dk, dv transposed,
// padded into [32, 24] and summed. Afterwards the attention reads q, k and
// v in rows of 24 elements at columns 0, 8 and 16 (byte offsets 0, 32, 64;
// each view spans 31 * 24 + 8 elements; q at offset 0 is the buffer
// itself), writes o as [32, 8] rows where
// the transpose put it, and its gradient reads dO rows and writes dq, dk,
// dv into the columns of the summed gradient. No layout kernel is left.
// CHECK-LABEL: func.func @gpt2
// CHECK: %[[QKV:.*]] = rt.alloc 3072
// CHECK: %[[K:.*]] = rt.view %[[QKV]][32] size 3008
// CHECK-NEXT: %[[V:.*]] = rt.view %[[QKV]][64] size 3008
// CHECK-NEXT: %[[Z:.*]] = rt.alloc 1024
// CHECK-NEXT: rt.kernel %{{.*}}, "attention"(%[[QKV]], %[[K]], %[[V]], %[[Z]]) {floats = array<f64: 5.000000e-01>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 0, 1, 24, 24, 24, 8>}
// CHECK: rt.kernel %{{.*}}, "linear"(%[[Z]],
// CHECK: %[[SUM:.*]] = rt.alloc 3072
// CHECK-NEXT: %[[DK:.*]] = rt.view %[[SUM]][32] size 3008
// CHECK-NEXT: %[[DV:.*]] = rt.view %[[SUM]][64] size 3008
// CHECK-NEXT: rt.kernel %{{.*}}, "attention_grad"(%[[QKV]], %[[K]], %[[V]], %[[DZ:.*]], %[[SUM]], %[[DK]], %[[DV]]) {floats = array<f64: 5.000000e-01>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 0, 1, 24, 24, 24, 8>}
// CHECK: rt.kernel %{{.*}}, "matmul"(%[[SUM]],
// CHECK-NOT: "transpose"
// CHECK-NOT: "slice
// CHECK-NOT: "add"
func.func @gpt2(%ctx: !rt.context, %w: !rt.buffer, %x: !rt.buffer, %dy: !rt.buffer) {
  %qkv = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "fill"(%qkv) {floats = array<f64: 1.0>, ints = array<i64: 768, 0>}
  %sq = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "slice"(%qkv, %sq) {floats = array<f64>, ints = array<i64: 32, 24, 0, 8, 1, 0>}
  %q = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%sq, %q) {floats = array<f64>, ints = array<i64: 4, 0, 2, 16, 2, 4, 0, 2, 1, 3>}
  %sk = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "slice"(%qkv, %sk) {floats = array<f64>, ints = array<i64: 32, 24, 8, 8, 1, 0>}
  %k = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%sk, %k) {floats = array<f64>, ints = array<i64: 4, 0, 2, 16, 2, 4, 0, 2, 1, 3>}
  %sv = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "slice"(%qkv, %sv) {floats = array<f64>, ints = array<i64: 32, 24, 16, 8, 1, 0>}
  %v = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%sv, %v) {floats = array<f64>, ints = array<i64: 4, 0, 2, 16, 2, 4, 0, 2, 1, 3>}
  %o = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "attention"(%q, %k, %v, %o) {floats = array<f64: 0.5>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 0, 0, 0, 0, 0, 0>}
  %z = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%o, %z) {floats = array<f64>, ints = array<i64: 4, 0, 2, 2, 16, 4, 0, 2, 1, 3>}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "linear"(%z, %w, %y) {floats = array<f64>, ints = array<i64: 32, 8, 8, 1, 0, 0>}
  // backward
  %dz = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "linear"(%dy, %w, %dz) {floats = array<f64>, ints = array<i64: 32, 8, 8, 0, 0, 0>}
  %do = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dz, %do) {floats = array<f64>, ints = array<i64: 4, 0, 2, 16, 2, 4, 0, 2, 1, 3>}
  %dq = rt.alloc 1024 : !rt.buffer
  %dk = rt.alloc 1024 : !rt.buffer
  %dv = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "attention_grad"(%q, %k, %v, %do, %dq, %dk, %dv) {floats = array<f64: 0.5>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 0, 0, 0, 0, 0, 0>}
  %tv = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dv, %tv) {floats = array<f64>, ints = array<i64: 4, 0, 2, 2, 16, 4, 0, 2, 1, 3>}
  %pv = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "slice_grad"(%tv, %pv) {floats = array<f64>, ints = array<i64: 32, 24, 16, 8, 1, 0>}
  %tk = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dk, %tk) {floats = array<f64>, ints = array<i64: 4, 0, 2, 2, 16, 4, 0, 2, 1, 3>}
  %pk = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "slice_grad"(%tk, %pk) {floats = array<f64>, ints = array<i64: 32, 24, 8, 8, 1, 0>}
  %t = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "add"(%pv, %pk, %t) {floats = array<f64>, ints = array<i64: 3, 0, 2, 16, 24, 384, 24, 1, 384, 24, 1>}
  %tq = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dq, %tq) {floats = array<f64>, ints = array<i64: 4, 0, 2, 2, 16, 4, 0, 2, 1, 3>}
  %pq = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "slice_grad"(%tq, %pq) {floats = array<f64>, ints = array<i64: 32, 24, 0, 8, 1, 0>}
  %sum = rt.alloc 3072 : !rt.buffer
  rt.kernel %ctx, "add"(%t, %pq, %sum) {floats = array<f64>, ints = array<i64: 3, 0, 2, 16, 24, 384, 24, 1, 384, 24, 1>}
  %dw = rt.alloc 768 : !rt.buffer
  rt.kernel %ctx, "matmul"(%sum, %x, %dw) {floats = array<f64>, ints = array<i64: 24, 32, 8, 1, 0, 0, 0>}
  return
}

// -----

// The bf16 fused pair (sdpa keeps o for sdpa_grad): the same rewrite, its
// layout after ws_bytes; o is z, which both read.
// CHECK-LABEL: func.func @sdpa
// CHECK: "sdpa"(%{{.*}}, %{{.*}}, %{{.*}}, %[[Z:.*]], %{{.*}}, %{{.*}}) {dtype = bf16, floats = array<f64: 5.000000e-01>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 1, 4194304, 1, 24, 24, 24, 8>}
// CHECK: "sdpa_grad"(%{{.*}}, %{{.*}}, %{{.*}}, %[[Z]], %{{.*}}, %[[DZ:.*]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {dtype = bf16, floats = array<f64: 5.000000e-01>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 1, 4194304, 1, 24, 24, 24, 8, 1>}
// CHECK-NOT: "transpose"
func.func @sdpa(%ctx: !rt.context, %w: !rt.buffer, %dz: !rt.buffer) {
  %qkv = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "fill"(%qkv) {dtype = bf16, floats = array<f64: 1.0>, ints = array<i64: 768, 1>}
  %sq = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "slice"(%qkv, %sq) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 0, 8, 1, 1>}
  %q = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%sq, %q) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 16, 2, 4, 0, 2, 1, 3>}
  %sk = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "slice"(%qkv, %sk) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 8, 8, 1, 1>}
  %k = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%sk, %k) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 16, 2, 4, 0, 2, 1, 3>}
  %sv = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "slice"(%qkv, %sv) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 16, 8, 1, 1>}
  %v = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%sv, %v) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 16, 2, 4, 0, 2, 1, 3>}
  %o = rt.alloc 512 : !rt.buffer
  %lse = rt.alloc 256 : !rt.buffer
  %ws = rt.alloc 4194304 : !rt.buffer
  rt.kernel %ctx, "sdpa"(%q, %k, %v, %o, %lse, %ws) {dtype = bf16, floats = array<f64: 0.5>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 1, 4194304, 0, 0, 0, 0, 0>}
  %z = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%o, %z) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 2, 16, 4, 0, 2, 1, 3>}
  %y = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "linear"(%z, %w, %y) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 8, 8, 1, 0, 1>}
  %do = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dz, %do) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 16, 2, 4, 0, 2, 1, 3>}
  %dq = rt.alloc 512 : !rt.buffer
  %dk = rt.alloc 512 : !rt.buffer
  %dv = rt.alloc 512 : !rt.buffer
  %wsb = rt.alloc 4194304 : !rt.buffer
  rt.kernel %ctx, "sdpa_grad"(%q, %k, %v, %o, %lse, %do, %dq, %dk, %dv, %wsb) {dtype = bf16, floats = array<f64: 0.5>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 1, 4194304, 0, 0, 0, 0, 0, 1>}
  %tq = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dq, %tq) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 2, 16, 4, 0, 2, 1, 3>}
  %pq = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "slice_grad"(%tq, %pq) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 0, 8, 1, 1>}
  %tk = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dk, %tk) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 2, 16, 4, 0, 2, 1, 3>}
  %pk = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "slice_grad"(%tk, %pk) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 8, 8, 1, 1>}
  %tv = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dv, %tv) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 2, 16, 4, 0, 2, 1, 3>}
  %pv = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "slice_grad"(%tv, %pv) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 16, 8, 1, 1>}
  %t = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "add"(%pq, %pk, %t) {dtype = bf16, floats = array<f64>, ints = array<i64: 3, 1, 2, 16, 24, 384, 24, 1, 384, 24, 1>}
  %sum = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "add"(%pv, %t, %sum) {dtype = bf16, floats = array<f64>, ints = array<i64: 3, 1, 2, 16, 24, 384, 24, 1, 384, 24, 1>}
  rt.kernel %ctx, "silu"(%sum, %sum) {dtype = bf16, floats = array<f64>, ints = array<i64: 768, 1>}
  return
}

// -----

// The same under --recompute=selective: o is transposed again in backward
// for the output projection's weight gradient. That transpose goes too,
// its reader reading z (o, which sdpa_grad keeps alive anyway).
// CHECK-LABEL: func.func @sdpa_recompute
// CHECK: "sdpa"(%{{.*}}, %{{.*}}, %{{.*}}, %[[Z:.*]], %{{.*}}, %{{.*}}) {dtype = bf16, floats = array<f64: 5.000000e-01>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 1, 4194304, 1, 24, 24, 24, 8>}
// CHECK: "matmul"(%[[DZ]], %[[Z]], %{{.*}})
// CHECK: "sdpa_grad"(%{{.*}}, %{{.*}}, %{{.*}}, %[[Z]], %{{.*}}, %[[DZ:.*]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {dtype = bf16, floats = array<f64: 5.000000e-01>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 1, 4194304, 1, 24, 24, 24, 8, 1>}
// CHECK-NOT: "transpose"
func.func @sdpa_recompute(%ctx: !rt.context, %w: !rt.buffer, %dz: !rt.buffer) {
  %qkv = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "fill"(%qkv) {dtype = bf16, floats = array<f64: 1.0>, ints = array<i64: 768, 1>}
  %sq = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "slice"(%qkv, %sq) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 0, 8, 1, 1>}
  %q = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%sq, %q) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 16, 2, 4, 0, 2, 1, 3>}
  %sk = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "slice"(%qkv, %sk) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 8, 8, 1, 1>}
  %k = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%sk, %k) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 16, 2, 4, 0, 2, 1, 3>}
  %sv = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "slice"(%qkv, %sv) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 16, 8, 1, 1>}
  %v = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%sv, %v) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 16, 2, 4, 0, 2, 1, 3>}
  %o = rt.alloc 512 : !rt.buffer
  %lse = rt.alloc 256 : !rt.buffer
  %ws = rt.alloc 4194304 : !rt.buffer
  rt.kernel %ctx, "sdpa"(%q, %k, %v, %o, %lse, %ws) {dtype = bf16, floats = array<f64: 0.5>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 1, 4194304, 0, 0, 0, 0, 0>}
  %z = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%o, %z) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 2, 16, 4, 0, 2, 1, 3>}
  %y = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "linear"(%z, %w, %y) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 8, 8, 1, 0, 1>}
  %z2 = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%o, %z2) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 2, 16, 4, 0, 2, 1, 3>}
  %dw = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "matmul"(%dz, %z2, %dw) {dtype = bf16, floats = array<f64>, ints = array<i64: 8, 32, 8, 1, 0, 1, 0>}
  %do = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dz, %do) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 16, 2, 4, 0, 2, 1, 3>}
  %dq = rt.alloc 512 : !rt.buffer
  %dk = rt.alloc 512 : !rt.buffer
  %dv = rt.alloc 512 : !rt.buffer
  %wsb = rt.alloc 4194304 : !rt.buffer
  rt.kernel %ctx, "sdpa_grad"(%q, %k, %v, %o, %lse, %do, %dq, %dk, %dv, %wsb) {dtype = bf16, floats = array<f64: 0.5>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 1, 4194304, 0, 0, 0, 0, 0, 1>}
  %tq = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dq, %tq) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 2, 16, 4, 0, 2, 1, 3>}
  %pq = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "slice_grad"(%tq, %pq) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 0, 8, 1, 1>}
  %tk = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dk, %tk) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 2, 16, 4, 0, 2, 1, 3>}
  %pk = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "slice_grad"(%tk, %pk) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 8, 8, 1, 1>}
  %tv = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dv, %tv) {dtype = bf16, floats = array<f64>, ints = array<i64: 4, 1, 2, 2, 16, 4, 0, 2, 1, 3>}
  %pv = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "slice_grad"(%tv, %pv) {dtype = bf16, floats = array<f64>, ints = array<i64: 32, 24, 16, 8, 1, 1>}
  %t = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "add"(%pq, %pk, %t) {dtype = bf16, floats = array<f64>, ints = array<i64: 3, 1, 2, 16, 24, 384, 24, 1, 384, 24, 1>}
  %sum = rt.alloc 1536 : !rt.buffer
  rt.kernel %ctx, "add"(%pv, %t, %sum) {dtype = bf16, floats = array<f64>, ints = array<i64: 3, 1, 2, 16, 24, 384, 24, 1, 384, 24, 1>}
  rt.kernel %ctx, "silu"(%sum, %sum) {dtype = bf16, floats = array<f64>, ints = array<i64: 768, 1>}
  return
}

// -----

// Kept: o is read by something besides the transpose back (here a silu),
// so it must stay [B,H,T,D]; then nothing of the pair moves.
// CHECK-LABEL: func.func @kept
// CHECK: "transpose"
// CHECK: "attention"({{.*}}) {floats = array<f64: 5.000000e-01>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 0, 0, 0, 0, 0, 0>}
// CHECK: "transpose"
func.func @kept(%ctx: !rt.context, %x: !rt.buffer) {
  %q = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%x, %q) {floats = array<f64>, ints = array<i64: 4, 0, 2, 16, 2, 4, 0, 2, 1, 3>}
  %o = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "attention"(%q, %q, %q, %o) {floats = array<f64: 0.5>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 0, 0, 0, 0, 0, 0>}
  %z = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%o, %z) {floats = array<f64>, ints = array<i64: 4, 0, 2, 2, 16, 4, 0, 2, 1, 3>}
  %s = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "silu"(%o, %s) {floats = array<f64>, ints = array<i64: 256, 0>}
  return
}

// -----

// Kept: one transposed buffer as q, k and v at once.
// CHECK-LABEL: func.func @shared
// CHECK: "transpose"
// CHECK: "attention"(%[[Q:.*]], %[[Q]], %[[Q]], %{{.*}}) {floats = array<f64: 5.000000e-01>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 0, 0, 0, 0, 0, 0>}
// CHECK: "transpose"
func.func @shared(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer) {
  %q = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%x, %q) {floats = array<f64>, ints = array<i64: 4, 0, 2, 16, 2, 4, 0, 2, 1, 3>}
  %o = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "attention"(%q, %q, %q, %o) {floats = array<f64: 0.5>, ints = array<i64: 2, 2, 2, 16, 16, 4, 1, 0, 0, 0, 0, 0, 0>}
  %z = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%o, %z) {floats = array<f64>, ints = array<i64: 4, 0, 2, 2, 16, 4, 0, 2, 1, 3>}
  return
}

// -----

// Llama's attention (B=2 T=16 H=2 G=1 D=4, f32): q and k are rotated
// between their projections and the attention, on [B,heads,T,D] between
// transposes; q by `rotary`, k by `rotary_table`. Afterwards each rotary
// reads its projection's [32, heads*4] rows as they are and writes rows
// (layout 1), the attention reads q, k and v in rows of 8, 4 and 4, and
// in backward dq and dk are written in rows, which the inverse rotaries
// read, writing where the transposes put their results. No transpose is
// left.
// CHECK-LABEL: func.func @llama
// CHECK: %[[PQ:.*]] = rt.alloc 1024
// CHECK: %[[Q:.*]] = rt.alloc 1024
// CHECK-NEXT: rt.kernel %{{.*}}, "rotary"(%[[PQ]], %[[Q]]) {floats = array<f64: 1.000000e+04>, ints = array<i64: 2, 2, 16, 4, 0, 0, 1, 0>}
// CHECK: %[[PK:.*]] = rt.alloc 512
// CHECK: %[[K:.*]] = rt.alloc 512
// CHECK-NEXT: rt.kernel %{{.*}}, "rotary_table"(%[[PK]], %arg4, %arg5, %[[K]]) {floats = array<f64>, ints = array<i64: 2, 1, 16, 4, 0, 0, 1>}
// CHECK: %[[PV:.*]] = rt.alloc 512
// CHECK: %[[Z:.*]] = rt.alloc 1024
// CHECK-NEXT: rt.kernel %{{.*}}, "attention"(%[[Q]], %[[K]], %[[PV]], %[[Z]]) {floats = array<f64: 5.000000e-01>, ints = array<i64: 2, 2, 1, 16, 16, 4, 1, 0, 1, 8, 4, 4, 8>}
// CHECK: "attention_grad"(%[[Q]], %[[K]], %[[PV]], %{{[0-9]+}}, %[[DQ:[0-9]+]], %[[DK:[0-9]+]], %[[GV:[0-9]+]]) {floats = array<f64: 5.000000e-01>, ints = array<i64: 2, 2, 1, 16, 16, 4, 1, 0, 1, 8, 4, 4, 8>}
// CHECK: %[[GQ:.*]] = rt.alloc 1024
// CHECK-NEXT: rt.kernel %{{.*}}, "rotary"(%[[DQ]], %[[GQ]]) {floats = array<f64: 1.000000e+04>, ints = array<i64: 2, 2, 16, 4, 1, 0, 1, 0>}
// CHECK: rt.kernel %{{.*}}, "matmul"(%[[GQ]],
// CHECK: %[[GK:.*]] = rt.alloc 512
// CHECK-NEXT: rt.kernel %{{.*}}, "rotary_table"(%[[DK]], %arg4, %arg5, %[[GK]]) {floats = array<f64>, ints = array<i64: 2, 1, 16, 4, 1, 0, 1>}
// CHECK: rt.kernel %{{.*}}, "matmul"(%[[GK]],
// CHECK: rt.kernel %{{.*}}, "matmul"(%[[GV]],
// CHECK-NOT: "transpose"
func.func @llama(%ctx: !rt.context, %w: !rt.buffer, %x: !rt.buffer, %dy: !rt.buffer, %cos: !rt.buffer, %sin: !rt.buffer) {
  %pq = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "fill"(%pq) {floats = array<f64: 1.0>, ints = array<i64: 256, 0>}
  %tq = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%pq, %tq) {floats = array<f64>, ints = array<i64: 4, 0, 2, 16, 2, 4, 0, 2, 1, 3>}
  %q = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rotary"(%tq, %q) {floats = array<f64: 10000.0>, ints = array<i64: 2, 2, 16, 4, 0, 0, 0, 0>}
  %pk = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "fill"(%pk) {floats = array<f64: 1.0>, ints = array<i64: 128, 0>}
  %tk = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%pk, %tk) {floats = array<f64>, ints = array<i64: 4, 0, 2, 16, 1, 4, 0, 2, 1, 3>}
  %k = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "rotary_table"(%tk, %cos, %sin, %k) {floats = array<f64>, ints = array<i64: 2, 1, 16, 4, 0, 0, 0>}
  %pv = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "fill"(%pv) {floats = array<f64: 1.0>, ints = array<i64: 128, 0>}
  %v = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%pv, %v) {floats = array<f64>, ints = array<i64: 4, 0, 2, 16, 1, 4, 0, 2, 1, 3>}
  %o = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "attention"(%q, %k, %v, %o) {floats = array<f64: 0.5>, ints = array<i64: 2, 2, 1, 16, 16, 4, 1, 0, 0, 0, 0, 0, 0>}
  %z = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%o, %z) {floats = array<f64>, ints = array<i64: 4, 0, 2, 2, 16, 4, 0, 2, 1, 3>}
  %y = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "linear"(%z, %w, %y) {floats = array<f64>, ints = array<i64: 32, 8, 8, 1, 0, 0>}
  // backward
  %dz = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "linear"(%dy, %w, %dz) {floats = array<f64>, ints = array<i64: 32, 8, 8, 0, 0, 0>}
  %do = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dz, %do) {floats = array<f64>, ints = array<i64: 4, 0, 2, 16, 2, 4, 0, 2, 1, 3>}
  %dq = rt.alloc 1024 : !rt.buffer
  %dk = rt.alloc 512 : !rt.buffer
  %dv = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "attention_grad"(%q, %k, %v, %do, %dq, %dk, %dv) {floats = array<f64: 0.5>, ints = array<i64: 2, 2, 1, 16, 16, 4, 1, 0, 0, 0, 0, 0, 0>}
  %rq = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "rotary"(%dq, %rq) {floats = array<f64: 10000.0>, ints = array<i64: 2, 2, 16, 4, 1, 0, 0, 0>}
  %gq = rt.alloc 1024 : !rt.buffer
  rt.kernel %ctx, "transpose"(%rq, %gq) {floats = array<f64>, ints = array<i64: 4, 0, 2, 2, 16, 4, 0, 2, 1, 3>}
  %dwq = rt.alloc 256 : !rt.buffer
  rt.kernel %ctx, "matmul"(%gq, %x, %dwq) {floats = array<f64>, ints = array<i64: 8, 32, 8, 1, 0, 0, 0>}
  %rk = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "rotary_table"(%dk, %cos, %sin, %rk) {floats = array<f64>, ints = array<i64: 2, 1, 16, 4, 1, 0, 0>}
  %gk = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%rk, %gk) {floats = array<f64>, ints = array<i64: 4, 0, 2, 1, 16, 4, 0, 2, 1, 3>}
  %dwk = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "matmul"(%gk, %x, %dwk) {floats = array<f64>, ints = array<i64: 4, 32, 8, 1, 0, 0, 0>}
  %gv = rt.alloc 512 : !rt.buffer
  rt.kernel %ctx, "transpose"(%dv, %gv) {floats = array<f64>, ints = array<i64: 4, 0, 2, 1, 16, 4, 0, 2, 1, 3>}
  %dwv = rt.alloc 128 : !rt.buffer
  rt.kernel %ctx, "matmul"(%gv, %x, %dwv) {floats = array<f64>, ints = array<i64: 4, 32, 8, 1, 0, 0, 0>}
  return
}
