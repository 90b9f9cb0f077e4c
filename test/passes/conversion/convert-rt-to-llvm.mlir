// RUN: shardc-opt %s --split-input-file --convert-rt-to-llvm --verify-diagnostics | FileCheck %s

// Each step function becomes a launch table (runtime/abi/abi.h): records of
// int64 words. A kernel record is [1, kernel id, stream, #buffers, #ints,
// #floats, buffers..., ints..., floats as IEEE bits]; a buffer is region << 56
// | byte offset (regions: 0 params, 1 state, 2 io, 3 arena, 4 constants);
// events are [2 record | 3 wait, event, stream]; 0 ends the table.
// The manifest gains each entry's arena, their maximum and the constants'
// size.
//
// rms_norm is kernel 7: x = params + 64 (0 << 56 | 64), w = params + 0,
// y = arena + 0 (3 << 56 = 216172782113783808); ints 8, 4; eps 1e-5
// (4532020583610935537). silu (9) on stream 1 from the arena to io + 128
// (2 << 56 | 128 = 144115188075856000). Then the two events, the end.
// CHECK-DAG: llvm.mlir.global external constant @shardc_manifest("{\22arena_bytes\22:4096,\22arenas\22:[{\22arena_bytes\22:4096,\22entry\22:\22step\22,\22flops\22:0,\22symbol\22:\22shardc_step\22}],\22constants_bytes\22:0,\22format\22:4}\00")
// CHECK-DAG: llvm.mlir.global external constant @shardc_program_step(dense<[1, 7, 0, 3, 3, 1, 64, 0, 216172782113783808, 8, 4, 0, 4532020583610935537, 1, 9, 1, 2, 2, 0, 216172782113783808, 144115188075856000, 8, 0, 2, 0, 1, 3, 0, 0, 0]> : tensor<30xi64>) {addr_space = 0 : i32, alignment = 8 : i64} : !llvm.array<30 x i64>
// CHECK-NOT: func.func
module attributes {rt.manifest = {format = 4 : i64}} {
func.func @shardc_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) attributes {rt.arena_bytes = 4096 : i64} {
  %x = rt.view %p[64] : !rt.buffer
  %w = rt.view %p[0] : !rt.buffer
  %y = rt.view %arena[0] : !rt.buffer
  rt.kernel %ctx, "rms_norm"(%x, %w, %y) {ints = array<i64: 8, 4, 0>, floats = array<f64: 1.0e-5>}
  %out = rt.view %io[128] : !rt.buffer
  rt.kernel %ctx, "silu"(%y, %out) {ints = array<i64: 8, 0>, floats = array<f64>, stream = 1 : i64}
  rt.event_record %ctx {event = 0 : i64, stream = 1 : i64}
  rt.event_wait %ctx {event = 0 : i64, stream = 0 : i64}
  return
}
}

// -----

// Each entry's FLOPs (passes/rt/RtFlops.h), counted by hand: linear 8x4 by
// 4x16, 2*8*4*16 = 1024; matmul 4x8 by 8x2, 128; batch_matmul 5 of 2x3 by
// 3x4, 2*5*2*3*4 = 240; causal attention, 1 sequence, 2 heads of 8, 4
// positions: 4+3+2+1 = 10 pairs, 4*2*8*10 = 640 forward, 10*2*8*10 = 1600
// backward; the norm counts nothing. 3632 in all.
// CHECK: llvm.mlir.global external constant @shardc_manifest({{.*}}\22entry\22:\22flops\22,\22flops\22:3632,
module attributes {rt.manifest = {format = 5 : i64}} {
func.func @shardc_flops(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) attributes {rt.arena_bytes = 64 : i64} {
  %a = rt.view %arena[0] : !rt.buffer
  rt.kernel %ctx, "linear"(%a, %a, %a) {ints = array<i64: 8, 4, 16, 0, 0, 0>, floats = array<f64>}
  rt.kernel %ctx, "matmul"(%a, %a, %a) {ints = array<i64: 4, 8, 2, 0, 0, 0, 0>, floats = array<f64>}
  rt.kernel %ctx, "batch_matmul"(%a, %a, %a) {ints = array<i64: 2, 3, 4, 0, 0, 1, 5, 1, 1>, floats = array<f64>}
  rt.kernel %ctx, "attention"(%a, %a, %a, %a) {ints = array<i64: 1, 2, 2, 4, 4, 8, 1, 0, 0, 0, 0, 0, 0>, floats = array<f64: 0.35>}
  rt.kernel %ctx, "attention_grad"(%a, %a, %a, %a, %a, %a, %a) {ints = array<i64: 1, 2, 2, 4, 4, 8, 1, 0, 0, 0, 0, 0, 0>, floats = array<f64: 0.35>}
  rt.kernel %ctx, "rms_norm"(%a, %a, %a) {ints = array<i64: 8, 4, 0>, floats = array<f64: 1.0e-5>}
  return
}
}

// -----

// Constants are placed in the constants region at 64-byte aligned offsets;
// views of views add their offsets. The typed collectives become the ABI's
// collective kernels: all_gather (50) of one input, all_gather_group (51) of
// several (k, axis, dtype, counts), reduce_scatter (52), all_reduce (53),
// all_gather_subgroup (55) with the subgroup size last; bf16 is dtype 1.
// CHECK-DAG: llvm.mlir.global external constant @shardc_constants("\01\00\00\00\02\00\00\00{{(\\00)+}}\03\00\00\00")
// CHECK-DAG: llvm.mlir.global external constant @shardc_program_consts(dense<[1, 17, 0, 2, 1, 0, 288230376151711744, 216172782113783872, 4, 1, 17, 0, 2, 1, 0, 288230376151711808, 216172782113783872, 4, 0]>
// CHECK-DAG: llvm.mlir.global external constant @shardc_program_comm(dense<[1, 50, 1, 2, 3, 0, 0, 216172782113783808, 16, 0, 0, 1, 51, 1, 6, 5, 0, 0, 64, 216172782113783808, 216172782113783872, 216172782113783936, 216172782113784000, 2, 1, 1, 16, 8, 1, 52, 1, 3, 3, 0, 216172782113783808, 216172782113783872, 216172782113783936, 16, 1, 0, 1, 53, 1, 2, 3, 0, 72057594037927936, 72057594037927936, 16, 0, 0, 1, 55, 1, 2, 4, 0, 0, 216172782113783808, 16, 0, 0, 2, 0]>
module {
func.func @shardc_consts(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %a = rt.constant dense<[1, 2]> : tensor<2xi32> : !rt.buffer
  %v = rt.view %arena[32] : !rt.buffer
  %y = rt.view %v[32] : !rt.buffer
  rt.kernel %ctx, "copy"(%a, %y) {ints = array<i64: 4>, floats = array<f64>}
  %b = rt.constant dense<3> : tensor<1xi32> : !rt.buffer
  rt.kernel %ctx, "copy"(%b, %y) {ints = array<i64: 4>, floats = array<f64>}
  return
}
func.func @shardc_comm(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  %a = rt.view %p[0] : !rt.buffer
  %b = rt.view %p[64] : !rt.buffer
  %x = rt.view %arena[0] : !rt.buffer
  %y = rt.view %arena[64] : !rt.buffer
  %pk = rt.view %arena[128] : !rt.buffer
  %g = rt.view %arena[192] : !rt.buffer
  %r = rt.view %s[0] : !rt.buffer
  rt.all_gather %ctx (%a) -> (%x) {axis = 0 : i64, counts = array<i64: 16>, dtype = f32}
  rt.all_gather %ctx (%a, %b) -> (%x, %y) scratch(%pk, %g) {axis = 1 : i64, counts = array<i64: 16, 8>, dtype = bf16}
  rt.reduce_scatter %ctx %x -> %y scratch %pk {axis = 1 : i64, count = 16 : i64, dtype = f32}
  rt.all_reduce %ctx %r -> %r {axis = 0 : i64, count = 16 : i64, dtype = f32}
  rt.all_gather %ctx (%a) -> (%x) {axis = 0 : i64, counts = array<i64: 16>, dtype = f32, subgroup = 2 : i64}
  return
}
}

// -----

func.func @shardc_unplanned(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
  // expected-error @+1 {{must be placed by the memory planner (rt-plan-memory) before lowering}}
  %y = rt.alloc 64 : !rt.buffer
  rt.kernel %ctx, "silu"(%p, %y) {ints = array<i64: 16, 0>, floats = array<f64>}
  return
}

// -----

// expected-error @+1 {{a step function takes (context, params, state, io, arena), got 3 arguments}}
func.func @shardc_short(%ctx: !rt.context, %p: !rt.buffer, %arena: !rt.buffer) {
  return
}
