// One Llama-like block as an ONNX import gives it: no Hugging Face names
// (the dynamo exporter's val_N for a Linear's transposed weight), weights
// stored [in, out] (weight_in_out), q's bias added after the projection,
// a gated MLP (SiLU(gate) * up) and an LM head [hidden, vocab]. 2 heads of
// 4, hidden 8, MLP width 12, vocabulary 10, batch 2 x 4 tokens.
module attributes {nn.model = {family = "onnx"}} {
  func.func @forward(%tok: tensor<2x4xi32> {nn.input = "tokens"},
                     %tgt: tensor<2x4xi32> {nn.input = "targets"},
                     %emb: tensor<10x8xf32> {nn.param = "embed.weight"},
                     %ln: tensor<8xf32> {nn.param = "norm.weight"},
                     %wq: tensor<8x8xf32> {nn.param = "val_1"},
                     %bq: tensor<8xf32> {nn.param = "q.bias"},
                     %wk: tensor<8x8xf32> {nn.param = "val_2"},
                     %wv: tensor<8x8xf32> {nn.param = "val_3"},
                     %wo: tensor<8x8xf32> {nn.param = "val_4"},
                     %wg: tensor<8x12xf32> {nn.param = "val_5"},
                     %wu: tensor<8x12xf32> {nn.param = "val_6"},
                     %wd: tensor<12x8xf32> {nn.param = "val_7"},
                     %head: tensor<8x10xf32> {nn.param = "val_8"}) -> tensor<f32> {
    %x = nn.embedding %tok, %emb : (tensor<2x4xi32>, tensor<10x8xf32>) -> tensor<2x4x8xf32>
    %h = nn.rms_norm %x, %ln : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %q0 = nn.linear %h, %wq {weight_in_out} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %q = nn.add %q0, %bq : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %q4 = nn.reshape %q : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %qt = nn.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %k = nn.linear %h, %wk {weight_in_out} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %k4 = nn.reshape %k : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %kt = nn.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %v = nn.linear %h, %wv {weight_in_out} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %v4 = nn.reshape %v : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
    %vt = nn.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
    %a = nn.attention %qt, %kt, %vt {causal} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %at = nn.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
    %a3 = nn.reshape %at : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
    %o = nn.linear %a3, %wo {weight_in_out} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %r = nn.add %x, %o : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %g = nn.linear %r, %wg {weight_in_out} : (tensor<2x4x8xf32>, tensor<8x12xf32>) -> tensor<2x4x12xf32>
    %s = nn.silu %g : tensor<2x4x12xf32>
    %u = nn.linear %r, %wu {weight_in_out} : (tensor<2x4x8xf32>, tensor<8x12xf32>) -> tensor<2x4x12xf32>
    %su = nn.mul %s, %u : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
    %d = nn.linear %su, %wd {weight_in_out} : (tensor<2x4x12xf32>, tensor<12x8xf32>) -> tensor<2x4x8xf32>
    %r2 = nn.add %r, %d : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %logits = nn.linear %r2, %head {weight_in_out} : (tensor<2x4x8xf32>, tensor<8x10xf32>) -> tensor<2x4x10xf32>
    %loss = nn.cross_entropy %logits, %tgt : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
