// tp-block.mlir with a vocabulary of 11, which tp 2 does not divide: the
// embedding and LM head stay whole on every tp rank.
module attributes {nn.model = {family = "llama", num_heads = 2 : i64, num_kv_heads = 2 : i64}} {
  func.func @forward(%tok: tensor<2x4xi32> {nn.input = "tokens"},
                     %tgt: tensor<2x4xi32> {nn.input = "targets"},
                     %emb: tensor<11x8xf32> {nn.param = "model.embed_tokens.weight"},
                     %ln: tensor<8xf32> {nn.param = "model.layers.0.input_layernorm.weight"},
                     %wq: tensor<8x8xf32> {nn.param = "model.layers.0.self_attn.q_proj.weight"},
                     %wk: tensor<8x8xf32> {nn.param = "model.layers.0.self_attn.k_proj.weight"},
                     %wv: tensor<8x8xf32> {nn.param = "model.layers.0.self_attn.v_proj.weight"},
                     %wo: tensor<8x8xf32> {nn.param = "model.layers.0.self_attn.o_proj.weight"},
                     %wu: tensor<12x8xf32> {nn.param = "model.layers.0.mlp.up_proj.weight"},
                     %wd: tensor<8x12xf32> {nn.param = "model.layers.0.mlp.down_proj.weight"},
                     %head: tensor<11x8xf32> {nn.param = "lm_head.weight"}) -> tensor<f32> {
    %x = nn.embedding %tok, %emb : (tensor<2x4xi32>, tensor<11x8xf32>) -> tensor<2x4x8xf32>
    %h = nn.rms_norm %x, %ln : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %q = nn.linear %h, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %q4 = nn.reshape %q : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %qt = nn.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %k = nn.linear %h, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %k4 = nn.reshape %k : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %kt = nn.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %v = nn.linear %h, %wv : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %v4 = nn.reshape %v : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %vt = nn.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %a = nn.attention %qt, %kt, %vt {causal} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %at = nn.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
    %a3 = nn.reshape %at : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
    %o = nn.linear %a3, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %r = nn.add %x, %o : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %u = nn.linear %r, %wu : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
    %s = nn.silu %u : tensor<2x4x12xf32>
    %d = nn.linear %s, %wd : (tensor<2x4x12xf32>, tensor<8x12xf32>) -> tensor<2x4x8xf32>
    %r2 = nn.add %r, %d : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %logits = nn.linear %r2, %head : (tensor<2x4x8xf32>, tensor<11x8xf32>) -> tensor<2x4x11xf32>
    %loss = nn.cross_entropy %logits, %tgt : (tensor<2x4x11xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
