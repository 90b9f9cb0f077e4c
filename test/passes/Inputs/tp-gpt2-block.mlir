// A GPT-2 attention block, hand-written: hidden 8, 2 heads of 4, fused
// c_attn [8, 24] (Conv1D: [in, out]) with its q, k, v thirds, learned
// positions [6, 8], batch 1 x 4 tokens, tied head.
module attributes {nn.model = {family = "gpt2", num_heads = 2 : i64, num_kv_heads = 2 : i64}} {
  func.func @forward(%tok: tensor<1x4xi32> {nn.input = "tokens"},
                     %tgt: tensor<1x4xi32> {nn.input = "targets"},
                     %wte: tensor<10x8xf32> {nn.param = "transformer.wte.weight"},
                     %wpe: tensor<6x8xf32> {nn.param = "transformer.wpe.weight"},
                     %lnw: tensor<8xf32> {nn.param = "transformer.h.0.ln_1.weight"},
                     %lnb: tensor<8xf32> {nn.param = "transformer.h.0.ln_1.bias"},
                     %wa: tensor<8x24xf32> {nn.param = "transformer.h.0.attn.c_attn.weight"},
                     %ba: tensor<24xf32> {nn.param = "transformer.h.0.attn.c_attn.bias"},
                     %wp: tensor<8x8xf32> {nn.param = "transformer.h.0.attn.c_proj.weight"},
                     %bp: tensor<8xf32> {nn.param = "transformer.h.0.attn.c_proj.bias"}) -> tensor<f32> {
    %e = nn.embedding %tok, %wte : (tensor<1x4xi32>, tensor<10x8xf32>) -> tensor<1x4x8xf32>
    %p = nn.slice %wpe {dim = 0 : i64, start = 0 : i64} : (tensor<6x8xf32>) -> tensor<4x8xf32>
    %x = nn.add %e, %p : (tensor<1x4x8xf32>, tensor<4x8xf32>) -> tensor<1x4x8xf32>
    %h = nn.layer_norm %x, %lnw, %lnb : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
    %qkv = nn.linear %h, %wa, %ba {weight_in_out} : (tensor<1x4x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<1x4x24xf32>
    %q = nn.slice %qkv {dim = 2 : i64, start = 0 : i64} : (tensor<1x4x24xf32>) -> tensor<1x4x8xf32>
    %q4 = nn.reshape %q : (tensor<1x4x8xf32>) -> tensor<1x4x2x4xf32>
    %qt = nn.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
    %k = nn.slice %qkv {dim = 2 : i64, start = 8 : i64} : (tensor<1x4x24xf32>) -> tensor<1x4x8xf32>
    %k4 = nn.reshape %k : (tensor<1x4x8xf32>) -> tensor<1x4x2x4xf32>
    %kt = nn.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
    %v = nn.slice %qkv {dim = 2 : i64, start = 16 : i64} : (tensor<1x4x24xf32>) -> tensor<1x4x8xf32>
    %v4 = nn.reshape %v : (tensor<1x4x8xf32>) -> tensor<1x4x2x4xf32>
    %vt = nn.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
    %a = nn.attention %qt, %kt, %vt {causal} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %at = nn.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
    %a3 = nn.reshape %at : (tensor<1x4x2x4xf32>) -> tensor<1x4x8xf32>
    %o = nn.linear %a3, %wp, %bp {weight_in_out} : (tensor<1x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
    %r = nn.add %x, %o : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    %logits = nn.linear %r, %wte : (tensor<1x4x8xf32>, tensor<10x8xf32>) -> tensor<1x4x10xf32>
    %loss = nn.cross_entropy %logits, %tgt : (tensor<1x4x10xf32>, tensor<1x4xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
