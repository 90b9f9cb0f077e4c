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

func.func @kernel_name(%ctx: !rt.context, %p: !rt.buffer) {
  // expected-error @+1 {{kernel name 'a-b' must be an identifier}}
  rt.kernel %ctx, "a-b"(%p) {ints = array<i64>, floats = array<f64>}
  return
}
