"""Reference GPT-2 and Llama forward passes in plain PyTorch.

Written from the Hugging Face model definitions (GPT2LMHeadModel,
LlamaForCausalLM), independently of shardc: it reads the same config.json and
state-dict names, and nothing else of shardc's.
"""
import json
import math
import struct

import numpy as np
import torch
import torch.nn.functional as F


def load_config(path):
    with open(path) as f:
        return json.load(f)


# --- data and checkpoints, in the formats shardc reads ---------------------

def write_tokens(path, tokens):
    """An llm.c token file: the GPT-2 format (20240520 v1, uint16 tokens),
    or the Llama 3 format (20240801 v7, uint32) when an id passes 65535."""
    tokens = np.asarray(tokens)
    wide = len(tokens) > 0 and int(tokens.max()) > 65535
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = (20240801, 7, len(tokens)) if wide else (20240520, 1, len(tokens))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.uint32 if wide else np.uint16).tobytes())


def batch(tokens, step, B, T):
    """Row b of step s starts at token (s*B + b)*T; targets shift by one."""
    x = np.stack([tokens[(step * B + b) * T:(step * B + b) * T + T] for b in range(B)])
    y = np.stack([tokens[(step * B + b) * T + 1:(step * B + b) * T + T + 1] for b in range(B)])
    return torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64))


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", info
        a, b = info["data_offsets"]
        out[name] = torch.from_numpy(
            np.frombuffer(data[a:b], dtype=np.float32).copy()).reshape(info["shape"])
    return out


# --- parameters --------------------------------------------------------------

def gpt2_param_shapes(c):
    C, V, P = c["n_embd"], c["vocab_size"], c["n_positions"]
    I = c.get("n_inner") or 4 * C
    shapes = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (P, C)}
    for l in range(c["n_layer"]):
        p = f"transformer.h.{l}."
        shapes.update({
            p + "ln_1.weight": (C,), p + "ln_1.bias": (C,),
            p + "attn.c_attn.weight": (C, 3 * C), p + "attn.c_attn.bias": (3 * C,),
            p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
            p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
            p + "mlp.c_fc.weight": (C, I), p + "mlp.c_fc.bias": (I,),
            p + "mlp.c_proj.weight": (I, C), p + "mlp.c_proj.bias": (C,),
        })
    shapes.update({"transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,)})
    if not c.get("tie_word_embeddings", True):
        shapes["lm_head.weight"] = (V, C)
    return shapes


def llama_param_shapes(c):
    C, V, I = c["hidden_size"], c["vocab_size"], c["intermediate_size"]
    H = c["num_attention_heads"]
    G = c.get("num_key_value_heads", H)
    D = c.get("head_dim", C // H)
    shapes = {"model.embed_tokens.weight": (V, C)}
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        shapes.update({
            p + "input_layernorm.weight": (C,),
            p + "self_attn.q_proj.weight": (H * D, C),
            p + "self_attn.k_proj.weight": (G * D, C),
            p + "self_attn.v_proj.weight": (G * D, C),
            p + "self_attn.o_proj.weight": (C, H * D),
            p + "post_attention_layernorm.weight": (C,),
            p + "mlp.gate_proj.weight": (I, C),
            p + "mlp.up_proj.weight": (I, C),
            p + "mlp.down_proj.weight": (C, I),
        })
        qkv_bias, o_bias = llama_attention_biases(c)
        if qkv_bias:
            shapes.update({p + "self_attn.q_proj.bias": (H * D,),
                           p + "self_attn.k_proj.bias": (G * D,),
                           p + "self_attn.v_proj.bias": (G * D,)})
        if o_bias:
            shapes[p + "self_attn.o_proj.bias"] = (C,)
        if c.get("mlp_bias", False):
            shapes.update({p + "mlp.gate_proj.bias": (I,), p + "mlp.up_proj.bias": (I,),
                           p + "mlp.down_proj.bias": (C,)})
    shapes["model.norm.weight"] = (C,)
    if not c.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (V, C)
    return shapes


def llama_attention_biases(c):
    """(q/k/v bias, o_proj bias): Qwen2 has the first only; Llama's
    attention_bias gives both."""
    if c["model_type"] == "qwen2":
        return True, False
    b = c.get("attention_bias", False)
    return b, b


def param_shapes(c):
    return gpt2_param_shapes(c) if c["model_type"] == "gpt2" else llama_param_shapes(c)


def random_params(c, seed, std=0.2):
    """Weights far from any default init, so that every op matters."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in param_shapes(c).items():
        t = torch.randn(shape, generator=g) * std
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight", "layernorm.weight", "norm.weight")):
            t = 1.0 + t
        out[name] = t
    return out


# --- forward passes ----------------------------------------------------------

def causal_attention(q, k, v, scale=None):
    """q [B,H,T,D], k/v [B,G,T,D]: query head h reads kv head h // (H/G).
    Scores are scaled by `scale` (default 1/sqrt(D))."""
    H, G = q.shape[1], k.shape[1]
    k = k.repeat_interleave(H // G, dim=1)
    v = v.repeat_interleave(H // G, dim=1)
    T = q.shape[2]
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    att = (q @ k.transpose(-2, -1)) * scale
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(-1)
    return att @ v


def gpt2_loss(c, W, x, y):
    B, T = x.shape
    C, H = c["n_embd"], c["n_head"]
    eps = c.get("layer_norm_epsilon", 1e-5)
    approx = "none" if c.get("activation_function", "gelu_new") == "gelu" else "tanh"
    h = W["transformer.wte.weight"][x] + W["transformer.wpe.weight"][:T]
    for l in range(c["n_layer"]):
        p = f"transformer.h.{l}."
        a = F.layer_norm(h, (C,), W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        qkv = a @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=-1)
        heads = lambda t: t.view(B, T, H, C // H).transpose(1, 2)
        # scale_attn_weights / scale_attn_by_inverse_layer_idx, as
        # transformers' GPT2Attention applies them.
        scale = 1.0 / math.sqrt(C // H) if c.get("scale_attn_weights", True) else 1.0
        if c.get("scale_attn_by_inverse_layer_idx", False):
            scale /= float(l + 1)
        a = causal_attention(heads(q), heads(k), heads(v), scale)
        a = a.transpose(1, 2).reshape(B, T, C)
        h = h + a @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        m = F.layer_norm(h, (C,), W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        m = F.gelu(m @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"], approximate=approx)
        h = h + m @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    h = F.layer_norm(h, (C,), W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)
    head = W.get("lm_head.weight", W["transformer.wte.weight"])
    logits = h @ head.t()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_inv_freq(c, D):
    """transformers' rope init: default, or llama3 (_compute_llama3_parameters),
    from rope_parameters (transformers 5) or rope_theta/rope_scaling (4)."""
    rope = c.get("rope_parameters") or c.get("rope_scaling") or {}
    theta = rope.get("rope_theta", c.get("rope_theta", 10000.0))
    kind = rope.get("rope_type", rope.get("type", "default"))
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    if kind == "default":
        return inv_freq
    assert kind == "llama3", kind
    factor = rope["factor"]
    low_freq_factor = rope["low_freq_factor"]
    high_freq_factor = rope["high_freq_factor"]
    old_context_len = rope["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (
        high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama)


def apply_rotary(x, theta, inv_freq=None):
    T, D = x.shape[2], x.shape[3]
    if inv_freq is None:
        inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2).float() / D))
    freqs = torch.outer(torch.arange(T).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def llama_loss(c, W, x, y):
    B, T = x.shape
    C, H = c["hidden_size"], c["num_attention_heads"]
    G = c.get("num_key_value_heads", H)
    D = c.get("head_dim", C // H)
    eps, theta = c.get("rms_norm_eps", 1e-6), c.get("rope_theta", 10000.0)
    inv_freq = rope_inv_freq(c, D)
    rot = lambda t: apply_rotary(t, theta, inv_freq)

    def lin(t, name):
        """t @ W.T, plus the bias when the model has one."""
        out = t @ W[name + ".weight"].t()
        return out + W[name + ".bias"] if name + ".bias" in W else out

    h = W["model.embed_tokens.weight"][x]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = rms_norm(h, W[p + "input_layernorm.weight"], eps)
        q = lin(a, p + "self_attn.q_proj").view(B, T, H, D).transpose(1, 2)
        k = lin(a, p + "self_attn.k_proj").view(B, T, G, D).transpose(1, 2)
        v = lin(a, p + "self_attn.v_proj").view(B, T, G, D).transpose(1, 2)
        o = causal_attention(rot(q), rot(k), v)
        o = o.transpose(1, 2).reshape(B, T, H * D)
        h = h + lin(o, p + "self_attn.o_proj")
        m = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        m = F.silu(lin(m, p + "mlp.gate_proj")) * lin(m, p + "mlp.up_proj")
        h = h + lin(m, p + "mlp.down_proj")
    h = rms_norm(h, W["model.norm.weight"], eps)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    logits = h @ head.t()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))


def loss(c, W, x, y):
    return gpt2_loss(c, W, x, y) if c["model_type"] == "gpt2" else llama_loss(c, W, x, y)
