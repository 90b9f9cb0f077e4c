// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(rt-predict{machine=h100-sxm})' | FileCheck %s
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(rt-predict{machine=%S/../../Inputs/calibration-round.json})' | FileCheck %s --check-prefix=INORDER
// RUN: shardc-opt %s --split-input-file --pass-pipeline='builtin.module(rt-predict{machine=h100-sxm gpus-per-node=4})' | FileCheck %s --check-prefix=NODES
// RUN: not shardc-opt %s --pass-pipeline='builtin.module(rt-predict{machine=h100-pcie})' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not shardc-opt %s --pass-pipeline='builtin.module(rt-predict{machine=%S/../../Inputs/calibration-v2.json})' 2>&1 | FileCheck %s --check-prefix=VERSION
// RUN: not shardc-opt %s --pass-pipeline='builtin.module(rt-predict{machine=%S/../../Inputs/calibration-threads.json})' 2>&1 | FileCheck %s --check-prefix=THREADS

// A GEMM on the compute stream beside an all-gather on the communication
// stream of 8 ranks (the shard axis), then a wait for the gather and a fill.
// The expected figures, by hand, on h100-sxm (target/Machine.cpp's figures):
// - all_gather: full buffer 8 x 1 MiB; within a node (8 <= 8 GPUs): 450
//   GB/s x 0.8; 7 steps of (8 us + 1 MiB / 360 GB/s = 2.9127 us), plus a
//   3 us launch: 79.389 us.
// - linear 1024 x 1024 x 1024 in f32: 2.147 GFLOP at 67 TFLOP/s x 0.7 x
//   (1024/1088)^3 = 39.10 TFLOP/s: 54.92 us (its 12 MiB at 2.68 TB/s take
//   4.69 us, less), plus 3 us: 57.92 us.
// - the wait moves the compute clock to the gather's end, 79.389 us; the
//   fill of 4 MiB: 1.565 us + 3 us: the step ends at 83.954 us.
// - compute 57.92 + 4.565 = 62.49 us, exposed 83.954 - 62.49 = 21.47 us.
// CHECK: rt.predict_machine = {dtype = "f32", memory_budget = 75705032704 : i64, name = "h100-sxm", peak_flops = 6.7{{0*}}e+13 : f64
// CHECK: func.func @shardc_micro_step
// CHECK-SAME: rt.predict = {communication = 7.938{{[0-9]*}}E-5 : f64, compute = 6.24{{[0-9]*}}E-5 : f64,
// CHECK-SAME: costs = [
// CHECK-SAME: ["all_gather (shard)", 1, 7.938{{[0-9]*}}E-5]
// CHECK-SAME: ["linear", 1, 5.79{{[0-9]*}}E-5]
// CHECK-SAME: ["fill", 1, 4.56{{[0-9]*}}E-6]
// CHECK-SAME: exposed = 2.14{{[0-9]*}}E-5 : f64, seconds = 8.395{{[0-9]*}}E-5 : f64}
//
// On a machine whose streams run in order (a calibration: every GEMM at 100
// GFLOP/s, 10 GB/s, 1 us a launch, a ring step 10 us + bytes at 1 GB/s) one
// clock serves both streams: all_gather 7 x (10 us + 1048.576 us) + 1 us =
// 7411.03 us; linear 21474.84 us + 1 us; fill 419.43 us + 1 us; the step is
// their sum, 29307.30 us, and every microsecond of communication is exposed.
// INORDER: func.func @shardc_micro_step
// INORDER-SAME: rt.predict = {communication = 0.007411{{[0-9]*}} : f64, compute = 0.021896{{[0-9]*}} : f64,
// INORDER-SAME: exposed = 0.007411{{[0-9]*}} : f64, seconds = 0.029307{{[0-9]*}} : f64}
//
// With 4 GPUs a node the 8 ranks span two: the ring runs at each GPU's
// share of the node's network, 400 / 4 GB/s x 0.8 = 80 GB/s: 7 x (8 us +
// 13.107 us) + 3 us = 150.75 us, and the step ends at 150.75 + 4.565 us.
// NODES: communication = 1.507{{[0-9]*}}E-4 : f64
// NODES-SAME: seconds = 1.553{{[0-9]*}}E-4 : f64
//
// UNKNOWN: unknown machine 'h100-pcie': neither a bundled machine (h100-sxm, h200, a100-sxm-80, b200) nor a calibration file
// VERSION: calibration-v2.json: calibration format version 2, this shardc reads version 1: calibrate again with shardc --calibrate
// THREADS: calibration-threads.json: calibration key "threads" is not a whole number of threads (1 to 1048576)
module attributes {rt.manifest = {mesh = array<i64: 1, 8>}} {
  func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
    %x = rt.alloc 4194304 : !rt.buffer
    %w = rt.alloc 4194304 : !rt.buffer
    %y = rt.alloc 4194304 : !rt.buffer
    %shard = rt.alloc 1048576 : !rt.buffer
    %full = rt.alloc 8388608 : !rt.buffer
    rt.all_gather %ctx (%shard) -> (%full) {axis = 0 : i64, counts = array<i64: 262144>, dtype = f32, stream = 1 : i64}
    rt.event_record %ctx {event = 0 : i64, stream = 1 : i64}
    rt.kernel %ctx, "linear"(%x, %w, %y) {floats = array<f64>, ints = array<i64: 1024, 1024, 1024, 0, 0, 0>}
    rt.event_wait %ctx {event = 0 : i64, stream = 0 : i64}
    rt.kernel %ctx, "fill"(%y) {floats = array<f64: 0.0>, ints = array<i64: 1048576, 0>}
    return
  }
}

// -----

// A kernel that touches a part of a buffer moves that part, not the buffer:
// concat_part copies 2 x 262144 f32 (2 MiB: a read and a write) into a
// 16 MiB bucket, slice 2 x 262144 f32 out of 16 MiB. At 2.68 TB/s each is
// 0.7825 us, plus a 3 us launch: 3.7825 us (charged by their buffers,
// 17 MiB each took 9.65 us).
// CHECK: func.func @shardc_micro_step
// CHECK-SAME: ["concat_part", 1, 3.78{{[0-9]*}}E-6]
// CHECK-SAME: ["slice", 1, 3.78{{[0-9]*}}E-6]
module attributes {rt.manifest = {mesh = array<i64: 1, 8>}} {
  func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
    %x = rt.alloc 1048576 : !rt.buffer
    %bucket = rt.alloc 16777216 : !rt.buffer
    %y = rt.alloc 1048576 : !rt.buffer
    rt.kernel %ctx, "concat_part"(%x, %bucket) {floats = array<f64>, ints = array<i64: 2, 131072, 2097152, 0, 1, 0>}
    rt.kernel %ctx, "slice"(%bucket, %y) {floats = array<f64>, ints = array<i64: 2, 2097152, 4096, 131072, 1, 0>}
    return
  }
}

// -----

// A buffer passed twice is updated in place, read and written: accumulate's
// sum (1 MiB of f32) moves twice, its gradient (1 MiB) and control (8 bytes)
// once. 3 MiB + 8 bytes at 2.68 TB/s is 1.1738 us, plus a 3 us launch:
// 4.1738 us (the sum counted once, 3.78 us).
// CHECK: func.func @shardc_micro_step
// CHECK-SAME: ["accumulate", 1, 4.173{{[0-9]*}}E-6]
module attributes {rt.manifest = {mesh = array<i64: 1, 8>}} {
  func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
    %acc = rt.alloc 1048576 : !rt.buffer
    %g = rt.alloc 1048576 : !rt.buffer
    %ctl = rt.alloc 8 : !rt.buffer
    rt.kernel %ctx, "accumulate"(%acc, %g, %ctl, %acc) {floats = array<f64>, ints = array<i64: 262144>}
    return
  }
}

// -----

// The chunked LM head on bf16 (N 4096, C 768, GPT-2's V 50257, R 2048: two
// chunks): per chunk the logits and dh GEMMs over the vocabulary padded to
// 64 (50304, as the runtime runs them) and the dw GEMM, each at 70% of
// 989 TFLOP/s times d / (d + 64) of each dimension; and at 2.68 TB/s the
// logits' four touches (4 x 2 B x N x V), dw's f32 sums over the chunks
// (3 x 4 B x V x C), its rounding to bf16 (6 B x V x C) and w's copy into
// zero-padded rows (2 B x (2 V + 47) x C): 2.4680 ms with the 3 us launch
// (2.3230 without the rounding, the copy and the padding).
// CHECK: func.func @shardc_micro_step
// CHECK-SAME: ["linear_cross_entropy", 1, 0.0024679{{[0-9]*}}]
module attributes {rt.manifest = {mesh = array<i64: 1, 1>}} {
  func.func @shardc_micro_step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.buffer, %io: !rt.buffer, %arena: !rt.buffer) {
    %h = rt.alloc 6291456 : !rt.buffer
    %w = rt.alloc 77194752 : !rt.buffer
    %t = rt.alloc 16384 : !rt.buffer
    %loss = rt.alloc 4 : !rt.buffer
    %dh = rt.alloc 6291456 : !rt.buffer
    %dw = rt.alloc 77194752 : !rt.buffer
    %scratch = rt.alloc 206045184 : !rt.buffer
    rt.kernel %ctx, "linear_cross_entropy"(%h, %w, %t, %loss, %dh, %dw, %scratch) {dtype = bf16, floats = array<f64>, ints = array<i64: 4096, 768, 50257, 2048, -100, 1>}
    return
  }
}
