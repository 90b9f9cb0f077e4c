#!/usr/bin/env python3
"""Makes the ONNX exports of transformers' GPT-2 and Llama that
test/e2e/onnx_tp.test trains under --tp, and PyTorch's curves for them.

Not run by the tests (CI has Debian's PyTorch 1.13 and no transformers):
its outputs are committed beside it. Run with PyPI's torch 2.x and
transformers, once per exporter:

    python3 make_hf_onnx.py --exporter dynamo      # transformers 5
    PYTHONPATH=/path/to/transformers4 python3 make_hf_onnx.py --exporter torchscript

(transformers 5's masks do not export with TorchScript: aten::diff.) Each
model is a tiny config (vocabulary 96, hidden 32, 2 layers, 4 heads; Llama
with 2 key/value heads, untied; GPT-2 tied, its fused c_attn) whose
parameters are redrawn from a seeded generator, as a trained model's would
be, so that no two are equal (the dynamo exporter stores equal
initializers once, and GPT-2's zero biases and unit norms would be one
tensor). Writes, for MODEL in gpt2, llama and EXPORTER:
- MODEL-EXPORTER.onnx (weights inline; the batch dynamic, the sequence 16);
- MODEL.safetensors-free reference: MODEL-curves.json, PyTorch's AdamW
  losses for 20 steps on tokens.bin at global batches 2 and 4 (rows as
  the trainer reads them: row b of step s is window s*G + b) — written by
  either exporter's run (the same weights, the same model);
- tokens.bin (llm.c GPT-2 format).
"""
import argparse
import json
import os

import numpy as np
import torch

V, C, L, H, T = 96, 32, 2, 4, 16
STEPS, LR = 20, 3e-3
HERE = os.path.dirname(os.path.abspath(__file__))


def causal_attention(module, q, k, v, attention_mask, scaling=None, dropout=0.0, **kw):
    """Causal attention without a mask tensor, GQA by repeating k and v:
    transformers 4.57 builds its masks with vmap, which TorchScript cannot
    trace, and asks for none from an implementation it does not know."""
    B, kv, S, D = k.shape
    rep = q.shape[1] // kv
    if rep > 1:  # as transformers' repeat_kv: Expand and Reshape
        k = k[:, :, None].expand(B, kv, rep, S, D).reshape(B, kv * rep, S, D)
        v = v[:, :, None].expand(B, kv, rep, S, D).reshape(B, kv * rep, S, D)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                           scale=scaling)
    return out.transpose(1, 2).contiguous(), None


def make_model(kind, exporter):
    import transformers as tf
    attn = "eager"
    if exporter == "torchscript":
        tf.AttentionInterface.register("causal_nomask", causal_attention)
        attn = "causal_nomask"
    if kind == "gpt2":
        cfg = tf.GPT2Config(vocab_size=V, n_embd=C, n_layer=L, n_head=H, n_positions=T,
                            activation_function="gelu_new", attn_pdrop=0.0,
                            resid_pdrop=0.0, embd_pdrop=0.0)
        cls = tf.GPT2LMHeadModel
    else:
        cfg = tf.LlamaConfig(vocab_size=V, hidden_size=C, intermediate_size=2 * C,
                             num_hidden_layers=L, num_attention_heads=H,
                             num_key_value_heads=2, max_position_embeddings=T,
                             tie_word_embeddings=False, rms_norm_eps=1e-5)
        cls = tf.LlamaForCausalLM
    cfg.use_cache = False
    model = cls._from_config(cfg, attn_implementation=attn)
    g = torch.Generator().manual_seed(1 if kind == "gpt2" else 2)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() == 1 and ("ln" in name or "norm" in name) and "bias" not in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
    return model


class Logits(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False).logits


def export(kind, exporter, model):
    path = os.path.join(HERE, f"{kind}-{exporter}.onnx")
    ids = torch.zeros(2, T, dtype=torch.long)
    model.eval()
    if exporter == "torchscript":
        torch.onnx.export(Logits(model), (ids,), path, opset_version=17, dynamo=False,
                          input_names=["input_ids"], output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}})
    else:
        batch = torch.export.Dim("batch", min=1, max=64)
        prog = torch.onnx.export(Logits(model), (ids,), dynamo=True, opset_version=18,
                                 input_names=["input_ids"], output_names=["logits"],
                                 dynamic_shapes={"ids": {0: batch}})
        prog.save(path, external_data=False)
    print("wrote", path)


def tokens():
    rng = np.random.default_rng(7)
    n = 4 * T * (STEPS + 1) + 1
    t = np.empty(n, dtype=np.int64)
    t[0] = 1
    for i in range(1, n):
        t[i] = (t[i - 1] * 5 + 2) % V if rng.random() < 0.8 else rng.integers(0, V)
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, n
    with open(os.path.join(HERE, "tokens.bin"), "wb") as f:
        f.write(header.tobytes())
        f.write(t.astype(np.uint16).tobytes())
    return t


def curve(kind, toks, G):
    model = make_model(kind, "dynamo")
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    losses = []
    for s in range(STEPS):
        rows = [(s * G + b) * T for b in range(G)]
        x = torch.from_numpy(np.stack([toks[r:r + T] for r in rows]))
        y = torch.from_numpy(np.stack([toks[r + 1:r + T + 1] for r in rows]))
        logits = model(input_ids=x, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", choices=["dynamo", "torchscript"], required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    toks = tokens()
    for kind in ["gpt2", "llama"]:
        export(kind, a.exporter, make_model(kind, a.exporter))
        out = {"global_batch": {str(G): curve(kind, toks, G) for G in [2, 4]},
               "lr": LR, "steps": STEPS, "seq_len": T}
        with open(os.path.join(HERE, f"{kind}-curves.json"), "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
