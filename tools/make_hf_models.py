#!/usr/bin/env python3
"""Writes the Hugging Face test models of test/e2e/Inputs/hf, and PyTorch's
training curves for them.

Needs PyPI's torch 2.x, transformers 5, onnx and onnxscript (CI does not: it
uses the committed files). Run from the repository root:

    python3 tools/make_hf_models.py test/e2e/Inputs/hf

Models (random init, no hub), small, with every norm weight and bias
perturbed so that no two parameters are equal:
  gpt2          GPT2LMHeadModel, tied head
  llama-tied    LlamaForCausalLM, tied head, 4 heads over 2 kv heads (GQA)
  llama         LlamaForCausalLM, untied head, GQA

Each is written as
  NAME-ts.onnx          torch.onnx.export(dynamo=False), opset 17, dynamic batch
  NAME-dynamo.onnx      torch.onnx.export (dynamo), static batch B
  NAME/                 save_pretrained: config.json + model.safetensors
  NAME-sharded/         save_pretrained(max_shard_size): index + shards

and curves.json holds, per model, the 20-step loss curve of PyTorch's AdamW
(lr 3e-3, weight decay 0.01) at global batch B (one rank) and 4B (a 2x2 mesh)
on tokens.bin (rows as test/e2e/torch_models.batch takes them), and the
names of the parameters PyTorch trains.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "e2e"))
import torch_models as tm  # noqa: E402

V, C, T, B, STEPS, LR = 61, 32, 16, 2, 20, 3e-3


def make(name):
    if name == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=2,
                                      n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                                      attn_pdrop=0.0)
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        cfg = transformers.LlamaConfig(vocab_size=V, hidden_size=C, intermediate_size=64,
                                       num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, max_position_embeddings=T,
                                       tie_word_embeddings=(name == "llama-tied"))
        model = transformers.LlamaForCausalLM(cfg)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:  # norm weights and biases: ones and zeros as initialized
                p.add_(0.1 * torch.randn(p.shape, generator=g))
    model.eval()
    return model


class Logits(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).logits


def curve(model, tokens, G):
    state = {k: v.clone() for k, v in model.state_dict().items()}
    m = type(model)(model.config)
    m.load_state_dict(state)
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=LR, weight_decay=0.01)
    losses = []
    for s in range(STEPS):
        x, y = tm.batch(tokens, s, G, T)
        logits = m(input_ids=x, use_cache=False).logits
        loss = nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    rng = np.random.default_rng(7)
    tokens = np.empty(4 * B * T * (STEPS + 1) + 1, dtype=np.int64)
    tokens[0] = 1
    for i in range(1, len(tokens)):
        tokens[i] = (tokens[i - 1] * 5 + 2) % V if rng.random() < 0.8 else rng.integers(0, V)
    tm.write_tokens(os.path.join(out, "tokens.bin"), tokens)
    curves = {"versions": {"torch": torch.__version__,
                           "transformers": transformers.__version__},
              "lr": LR, "weight_decay": 0.01, "micro_batch": B, "seq_len": T}
    for name in ["gpt2", "llama-tied", "llama"]:
        torch.manual_seed(0)
        model = make(name)
        wrap = Logits(model).eval()
        ids = torch.zeros(B, T, dtype=torch.long)
        # transformers 5 looks for packed sequences in the position ids with
        # torch.diff, which the TorchScript exporter has no symbolic for; the
        # inputs here are never packed, so the check is skipped for it.
        packed = transformers.masking_utils.find_packed_sequence_indices
        transformers.masking_utils.find_packed_sequence_indices = lambda position_ids: None
        # Its symbolic for scaled_dot_product_attention has no GQA either, so
        # the export runs the eager attention (repeat_kv: Expand and Reshape).
        model.set_attn_implementation("eager")
        torch.onnx.export(wrap, (ids,), os.path.join(out, f"{name}-ts.onnx"), dynamo=False,
                          opset_version=17, input_names=["input_ids"],
                          output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}})
        transformers.masking_utils.find_packed_sequence_indices = packed
        model.set_attn_implementation("sdpa")
        torch.onnx.export(wrap, (ids,), os.path.join(out, f"{name}-dynamo.onnx"),
                          dynamo=True, input_names=["input_ids"], output_names=["logits"],
                          external_data=False)
        model.save_pretrained(os.path.join(out, name))
        model.save_pretrained(os.path.join(out, f"{name}-sharded"), max_shard_size="20KB")
        trained = [n for n, _ in model.named_parameters()]
        curves[name] = {"trained": trained,
                        "mesh1": curve(model, tokens, B),
                        "mesh2x2": curve(model, tokens, 4 * B)}
        print(f"{name}: {len(trained)} parameters, loss {curves[name]['mesh1'][0]:.6f} -> "
              f"{curves[name]['mesh1'][-1]:.6f}")
    with open(os.path.join(out, "curves.json"), "w") as f:
        json.dump(curves, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
