// RUN: shardc-opt %s --split-input-file --verify-diagnostics

func.func @alloc_size() {
  // expected-error @+1 {{size must be positive, got 0}}
  %y = rt.alloc 0 : !rt.buffer
  return
}

// -----

func.func @view_offset(%p: !rt.buffer) {
  // expected-error @+1 {{offset must be non-negative, got -64}}
  %x = rt.view %p[-64] : !rt.buffer
  return
}

// -----

func.func @view_past_alloc() {
  %y = rt.alloc 4096 : !rt.buffer
  // expected-error @+1 {{spans bytes 2048 to 6144 of a buffer of 4096}}
  %x = rt.view %y[2048] size 4096 : !rt.buffer
  return
}

// -----

func.func @view_size(%p: !rt.buffer) {
  // expected-error @+1 {{size must be non-negative, got -1}}
  %x = rt.view %p[0] size -1 : !rt.buffer
  return
}

// -----

func.func @kernel_name(%ctx: !rt.context, %p: !rt.buffer) {
  // expected-error @+1 {{unknown kernel 'a-b' (the kernels are listed in runtime/abi/kernels.def)}}
  rt.kernel %ctx, "a-b"(%p) {ints = array<i64>, floats = array<f64>}
  return
}

// -----

// The argument counts of every kernel are checked against the ABI table,
// and the message gives the kernel's layout.
func.func @kernel_ints(%ctx: !rt.context, %x: !rt.buffer, %y: !rt.buffer) {
  // expected-error @+1 {{kernel 'silu' takes 2 integers, got 3; expected silu(x[n] y[n]; ints n, dtype; floats none)}}
  rt.kernel %ctx, "silu"(%x, %y) {ints = array<i64: 1024, 0, 1>, floats = array<f64>}
  return
}

// -----

func.func @kernel_buffers(%ctx: !rt.context, %x: !rt.buffer, %y: !rt.buffer) {
  // expected-error @+1 {{kernel 'rms_norm' takes 3 buffers, got 2; expected rms_norm(x[M,C] w[C] y[M,C]; ints M, C, dtype; floats eps)}}
  rt.kernel %ctx, "rms_norm"(%x, %y) {ints = array<i64: 8, 4, 0>, floats = array<f64: 1.0e-5>}
  return
}

// -----

func.func @kernel_floats(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer, %y: !rt.buffer) {
  // expected-error @+1 {{kernel 'rms_norm' takes 1 floats, got 0}}
  rt.kernel %ctx, "rms_norm"(%x, %w, %y) {ints = array<i64: 8, 4, 0>, floats = array<f64>}
  return
}

// -----

// A bias is one more buffer: has_bias counts it.
func.func @kernel_optional_buffer(%ctx: !rt.context, %x: !rt.buffer, %w: !rt.buffer, %y: !rt.buffer) {
  // expected-error @+1 {{kernel 'linear' takes 4 buffers, got 3}}
  rt.kernel %ctx, "linear"(%x, %w, %y) {ints = array<i64: 4, 8, 16, 0, 1, 0>, floats = array<f64>}
  return
}

// -----

// Broadcasting kernels take rank R (and add its dtype), then R dims and R
// strides per operand.
func.func @kernel_variadic(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %y: !rt.buffer) {
  // expected-error @+1 {{kernel 'add' takes 8 integers, got 7}}
  rt.kernel %ctx, "add"(%a, %b, %y) {ints = array<i64: 2, 0, 4, 8, 8, 1, 0>, floats = array<f64>}
  return
}

// -----

func.func @kernel_stream(%ctx: !rt.context, %x: !rt.buffer, %y: !rt.buffer) {
  // expected-error @+1 {{stream 3 is not one of the 3 runtime streams}}
  rt.kernel %ctx, "silu"(%x, %y) {ints = array<i64: 8, 0>, floats = array<f64>, stream = 3 : i64}
  return
}

// -----

// A typed kernel's dtype attribute and its dtype integer agree.
func.func @kernel_dtype_mismatch(%ctx: !rt.context, %x: !rt.buffer, %y: !rt.buffer) {
  // expected-error @+1 {{kernel 'silu' has dtype 'bf16' (code 1) but its dtype integer is 0}}
  rt.kernel %ctx, "silu"(%x, %y) {dtype = bf16, ints = array<i64: 8, 0>, floats = array<f64>}
  return
}

// -----

func.func @kernel_dtype_absent_is_f32(%ctx: !rt.context, %x: !rt.buffer, %y: !rt.buffer) {
  // expected-error @+1 {{kernel 'silu' has dtype 'f32' (code 0) but its dtype integer is 1}}
  rt.kernel %ctx, "silu"(%x, %y) {ints = array<i64: 8, 1>, floats = array<f64>}
  return
}

// -----

func.func @kernel_dtype_f16(%ctx: !rt.context, %x: !rt.buffer, %y: !rt.buffer) {
  // expected-error @+1 {{kernel 'silu' computes on f32 or bf16, not 'f16'}}
  rt.kernel %ctx, "silu"(%x, %y) {dtype = f16, ints = array<i64: 8, 2>, floats = array<f64>}
  return
}

// -----

// An untyped kernel computes in f32 only.
func.func @kernel_untyped_bf16(%ctx: !rt.context, %x: !rt.buffer, %y: !rt.buffer) {
  // expected-error @+1 {{kernel 'cross_entropy' is not typed (it has no dtype integer in runtime/abi/kernels.def) and computes in f32, not 'bf16'}}
  rt.kernel %ctx, "cross_entropy"(%x, %y, %y) {dtype = bf16, ints = array<i64: 4, 8, -100>, floats = array<f64>}
  return
}

// -----

func.func @gather_counts(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %out: !rt.buffer) {
  // expected-error @+1 {{needs one output and one count per input, got 2 inputs, 1 outputs and 2 counts}}
  rt.all_gather %ctx (%a, %b) -> (%out) {axis = 0 : i64, counts = array<i64: 4, 4>, dtype = f32}
  return
}

// -----

func.func @gather_scratch(%ctx: !rt.context, %a: !rt.buffer, %b: !rt.buffer, %x: !rt.buffer, %y: !rt.buffer) {
  // expected-error @+1 {{gathering 2 inputs needs 2 scratch buffers (pack, gathered), got 0}}
  rt.all_gather %ctx (%a, %b) -> (%x, %y) {axis = 0 : i64, counts = array<i64: 4, 4>, dtype = f32}
  return
}

// -----

func.func @gather_dtype(%ctx: !rt.context, %a: !rt.buffer, %x: !rt.buffer) {
  // expected-error @+1 {{moves f32, bf16 or fp8 (f8E4M3FN, f8E5M2) data, not 'i32'}}
  rt.all_gather %ctx (%a) -> (%x) {axis = 0 : i64, counts = array<i64: 4>, dtype = i32}
  return
}

// -----

// fp8 is gathered (bytes), never summed.
func.func @reduce_fp8(%ctx: !rt.context, %a: !rt.buffer, %x: !rt.buffer, %t: !rt.buffer) {
  // expected-error @+1 {{moves f32 or bf16 data, not 'f8E4M3FN'}}
  rt.reduce_scatter %ctx %a -> %x scratch %t {axis = 0 : i64, count = 4 : i64, dtype = f8E4M3FN}
  return
}

// -----

func.func @reduce_axis(%ctx: !rt.context, %a: !rt.buffer, %x: !rt.buffer, %t: !rt.buffer) {
  // expected-error @+1 {{axis must be 0, 1 or 2 (a mesh has at most three: replicate, shard, tp), got 3}}
  rt.reduce_scatter %ctx %a -> %x scratch %t {axis = 3 : i64, count = 4 : i64, dtype = f32}
  return
}

// -----

func.func @all_reduce_bf16(%ctx: !rt.context, %a: !rt.buffer) {
  // expected-error @+1 {{sums f32 data only}}
  rt.all_reduce %ctx %a -> %a {axis = 0 : i64, count = 4 : i64, dtype = bf16}
  return
}

// -----

func.func @gather_subgroup(%ctx: !rt.context, %a: !rt.buffer, %x: !rt.buffer) {
  // expected-error @+1 {{subgroup must be non-negative}}
  rt.all_gather %ctx (%a) -> (%x) {axis = 0 : i64, counts = array<i64: 16>, dtype = f32, subgroup = -2 : i64}
  return
}
