// RUN: shardc-opt %s --split-input-file --verify-diagnostics

func.func @embedding_table_rank(%ids: tensor<2x8xi32>, %t: tensor<50xf32>) {
  // expected-error @+1 {{expects a table of rank 2 [vocab, hidden]}}
  %x = nn.embedding %ids, %t : (tensor<2x8xi32>, tensor<50xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @embedding_result(%ids: tensor<2x8xi32>, %t: tensor<50x16xf32>) {
  // expected-error @+1 {{expects result of shape [2, 8, 16], got 'tensor<2x8x8xf32>'}}
  %x = nn.embedding %ids, %t : (tensor<2x8xi32>, tensor<50x16xf32>) -> tensor<2x8x8xf32>
  return
}

// -----

func.func @dynamic(%ids: tensor<?x8xi32>, %t: tensor<50x16xf32>) {
  // expected-error @+1 {{requires statically shaped operands}}
  %x = nn.embedding %ids, %t : (tensor<?x8xi32>, tensor<50x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @linear_k(%x: tensor<2x8x16xf32>, %w: tensor<48x12xf32>) {
  // expected-error @+1 {{input feature size 16 does not match the weight's dim 1 (out, in layout) of size 12}}
  %y = nn.linear %x, %w : (tensor<2x8x16xf32>, tensor<48x12xf32>) -> tensor<2x8x48xf32>
  return
}

// -----

func.func @linear_dtype(%x: tensor<2x16xf32>, %w: tensor<4x16xbf16>) {
  // expected-error @+1 {{expects weight to have element type 'f32', got 'bf16'}}
  %y = nn.linear %x, %w : (tensor<2x16xf32>, tensor<4x16xbf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<2x16xf32>, %w: tensor<16x4xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{expects bias of shape [4]}}
  %y = nn.linear %x, %w, %b {weight_in_out} : (tensor<2x16xf32>, tensor<16x4xf32>, tensor<5xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @add_broadcast(%a: tensor<2x8xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{operand shapes do not broadcast}}
  %y = nn.add %a, %b : (tensor<2x8xf32>, tensor<3xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @mul_dtype(%a: tensor<8xf32>, %b: tensor<8xf16>) {
  // expected-error @+1 {{expects rhs to have element type 'f32', got 'f16'}}
  %y = nn.mul %a, %b : (tensor<8xf32>, tensor<8xf16>) -> tensor<8xf32>
  return
}

// -----

func.func @add_int(%a: tensor<8xi32>, %b: tensor<8xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %y = nn.add %a, %b : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi32>
  return
}

// -----

func.func @gelu_mode(%x: tensor<8xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "fast"}}
  %y = nn.gelu %x {approximate = "fast"} : tensor<8xf32>
  return
}

// -----

func.func @layer_norm_weight(%x: tensor<2x16xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{expects weight of shape [16]}}
  %y = nn.layer_norm %x, %g : (tensor<2x16xf32>, tensor<8xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @rms_norm_eps(%x: tensor<2x16xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{expects eps >= 0}}
  %y = nn.rms_norm %x, %g {eps = -1.0 : f64} : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x16xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = nn.softmax %x {axis = 2 : i64} : tensor<2x16xf32>
  return
}

// -----

func.func @rotary_odd(%x: tensor<1x2x4x7xf32>) {
  // expected-error @+1 {{head dimension 7 must be even for rotary embedding}}
  %y = nn.rotary %x : tensor<1x2x4x7xf32>
  return
}

// -----

func.func @rotary_table_shape(%x: tensor<1x2x4x8xf32>, %c: tensor<4x8xf32>) {
  // expected-error @+1 {{cos and sin tables must be [seq, head_dim / 2] = [4, 4] of 'f32', got 'tensor<4x8xf32>'}}
  %y = nn.rotary_table %x, %c, %c : (tensor<1x2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @rotary_rank(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{expects an input of rank 4 [batch, heads, seq, head_dim]}}
  %y = nn.rotary %x : tensor<2x4x8xf32>
  return
}

// -----

func.func @gqa_heads(%q: tensor<1x6x4x8xf32>, %k: tensor<1x4x4x8xf32>, %v: tensor<1x4x4x8xf32>) {
  // expected-error @+1 {{number of query heads 6 is not a multiple of the number of key/value heads 4}}
  %o = nn.attention %q, %k, %v {causal} : (tensor<1x6x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x6x4x8xf32>
  return
}

// -----

func.func @attention_value(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{expects value of shape [1, 2, 4, 8]}}
  %o = nn.attention %q, %k, %v : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) -> tensor<1x4x4x8xf32>
  return
}

// -----

func.func @attention_causal_len(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>) {
  // expected-error @+1 {{causal attention expects equal query and key lengths, got 4 and 6}}
  %o = nn.attention %q, %k, %v {causal} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{cannot reshape 16 elements into 15 elements}}
  %y = nn.reshape %x : (tensor<2x8xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{permutation is not a permutation of 0..2}}
  %y = nn.transpose %x {permutation = array<i64: 0, 0, 1>} : (tensor<2x8x4xf32>) -> tensor<2x2x8xf32>
  return
}

// -----

func.func @transpose_result(%x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{expects result of shape [2, 4, 8]}}
  %y = nn.transpose %x {permutation = array<i64: 0, 2, 1>} : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<2x8x48xf32>) {
  // expected-error @+1 {{slice [40, 56) is out of bounds for dimension 2 of size 48}}
  %y = nn.slice %x {dim = 2 : i64, start = 40 : i64} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @ce_targets(%l: tensor<2x8x50xf32>, %y: tensor<2x7xi32>) {
  // expected-error @+1 {{expects targets of shape [2, 8]}}
  %x = nn.cross_entropy %l, %y : (tensor<2x8x50xf32>, tensor<2x7xi32>) -> tensor<f32>
  return
}

// -----

func.func @cast_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{changes the shape: 'tensor<4x8xf32>' to 'tensor<8x4xbf16>'}}
  %h = nn.cast %x : tensor<4x8xf32> to tensor<8x4xbf16>
  return
}

// -----

func.func @vocab_part_mask(%ids: tensor<2x8xi32>, %r: tensor<1xi32>) {
  // expected-error @+1 {{expects mask of shape [2, 8, 1]}}
  %l, %m = nn.vocab_part %ids, %r {rows = 50 : i64} : (tensor<2x8xi32>, tensor<1xi32>) -> (tensor<2x8xi32>, tensor<2x8xf32>)
  return
}

// -----

func.func @vocab_loss_stats(%l: tensor<2x8x50xf32>, %y: tensor<2x8xi32>, %s: tensor<3x8x2xf32>, %r: tensor<1xi32>) {
  // expected-error @+1 {{expects stats of every tp rank [tp * 2, ..., 2]}}
  %x = nn.vocab_cross_entropy %l, %y, %s, %r : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<3x8x2xf32>, tensor<1xi32>) -> tensor<f32>
  return
}

// -----

func.func @vocab_loss_seq(%l: tensor<1x6x50xf32>, %y: tensor<1x6xi32>, %s: tensor<4x6x2xf32>, %r: tensor<1xi32>) {
  // expected-error @+1 {{the sequence of 6 tokens does not split over 4 tp ranks}}
  %x = nn.vocab_cross_entropy %l, %y, %s, %r : (tensor<1x6x50xf32>, tensor<1x6xi32>, tensor<4x6x2xf32>, tensor<1xi32>) -> tensor<f32>
  return
}
