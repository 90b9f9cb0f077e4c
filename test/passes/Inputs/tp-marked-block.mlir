// One Llama MLP block whose ops carry their layer (nn.block, as the
// frontends mark them for --recompute): hidden 8, MLP width 12, vocabulary
// 11 (whole on every tp rank: only the block's collectives), batch 2 x 4
// tokens.
module attributes {nn.model = {family = "llama", num_heads = 2 : i64, num_kv_heads = 2 : i64}} {
  func.func @forward(%tok: tensor<2x4xi32> {nn.input = "tokens"},
                     %tgt: tensor<2x4xi32> {nn.input = "targets"},
                     %emb: tensor<11x8xf32> {nn.param = "model.embed_tokens.weight"},
                     %ln: tensor<8xf32> {nn.param = "model.layers.0.post_attention_layernorm.weight"},
                     %wu: tensor<12x8xf32> {nn.param = "model.layers.0.mlp.up_proj.weight"},
                     %wd: tensor<8x12xf32> {nn.param = "model.layers.0.mlp.down_proj.weight"},
                     %head: tensor<11x8xf32> {nn.param = "lm_head.weight"}) -> tensor<f32> {
    %x = nn.embedding %tok, %emb : (tensor<2x4xi32>, tensor<11x8xf32>) -> tensor<2x4x8xf32>
    %h = nn.rms_norm %x, %ln {nn.block = 0 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %u = nn.linear %h, %wu {nn.block = 0 : i64} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
    %s = nn.silu %u {nn.block = 0 : i64} : tensor<2x4x12xf32>
    %d = nn.linear %s, %wd {nn.block = 0 : i64} : (tensor<2x4x12xf32>, tensor<8x12xf32>) -> tensor<2x4x8xf32>
    %r = nn.add %x, %d {nn.block = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %logits = nn.linear %r, %head : (tensor<2x4x8xf32>, tensor<11x8xf32>) -> tensor<2x4x11xf32>
    %loss = nn.cross_entropy %logits, %tgt : (tensor<2x4x11xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
