"""Reference GPT-2 and Llama forward passes in plain PyTorch.

Written from the Hugging Face model definitions (GPT2LMHeadModel,
LlamaForCausalLM), independently of shardc: it reads the same config.json and
state-dict names, and nothing else of shardc's.

With dtype=torch.bfloat16 they compute in mixed precision, as FSDP2's
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=f32) defines it (on one
rank): the f32 master weights are cast to bf16 in the graph, so their .grad
is the bf16 gradient upcast; activations are bf16; each GEMM, norm, softmax
(the whole attention), activation function and rotary does its math in f32
on the upcast bf16 inputs and rounds its output to bf16 once (see in_f32);
residual adds and SwiGLU's product are bf16; the logits are upcast to f32
for the loss. Backward follows from autograd: each such op's math in f32,
the gradient of each of its inputs rounded to bf16 once; a value used
twice (the residual stream, GPT-2's tied embedding) has its gradients
summed in bf16, as autograd sums them.
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

# A hook for the transformer blocks' linear layers (Llama's q/k/v/o and
# gate/up/down projections, GPT-2's c_attn, c_fc and c_projs), e.g. a float8
# linear. None (the default): each computes its own GEMM (gemm, or f32 math).
# Otherwise LINEAR(t, weight, bias, name, dtype) returns the layer's output
# t @ weight.T (+ bias) in its place: weight [out, in] (GPT-2's Conv1D
# [in, out] weights transposed), under mixed precision the param_dtype
# (bf16) cast of the master weight as the layer uses it; bias the layer's
# bias (cast alike) or None; name the parameter's name without ".weight"
# ("model.layers.0.self_attn.q_proj"); dtype the compute dtype (None: f32).
# The embedding and the LM head never go through it. Not used by the tp
# reference (llama_loss_tp, gpt2_loss_tp).
LINEAR = None


def mixed(dtype):
    """Whether dtype (None: f32) asks for mixed precision."""
    return dtype not in (None, torch.float32)


def in_f32(f, dtype):
    """f itself under f32; under mixed precision, f's math in f32 on the
    upcast floating-point inputs, its output rounded to dtype once. Autograd
    then also does f's backward in f32, and the gradient of each input is
    rounded to dtype once, at its cast."""
    if not mixed(dtype):
        return f

    def g(*args):
        return f(*[a.float() if torch.is_tensor(a) and a.is_floating_point() else a
                   for a in args]).to(dtype)
    return g


def cast_params(W, dtype):
    """FSDP2's param_dtype cast of the f32 master weights, in the graph."""
    return {n: w.to(dtype) for n, w in W.items()} if mixed(dtype) else W


def embedding(table, x, dtype):
    """Rows x of table; under mixed precision the backward scatter-adds in
    f32 and rounds the table's gradient once."""
    return in_f32(lambda t, i: t[i], dtype)(table, x)


def gemm(a, b, bias, dtype):
    """a @ b (+ bias). Under mixed precision the bf16 operands are upcast and
    multiplied in f32 (f32 accumulation), the bias added in f32 and the sum
    rounded to bf16 once, as cuBLAS's bf16 GEMM with a bias epilogue (torch's
    own bf16 matmul is not used: its accumulation is the backend's choice)."""
    if not mixed(dtype):
        return a @ b if bias is None else a @ b + bias
    out = a.float() @ b.float()
    return (out if bias is None else out + bias.float()).to(dtype)


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


# Which rounding the mixed-precision attention follows: "f32" (the whole
# attention in f32, its output and each input's gradient rounded once, as
# shardc's CPU kernels and CUDA-core kernels compute) or "fused" (cuDNN's
# fused SDPA, FusedAttention below). check_train.py --attention sets it.
ATTENTION_ROUNDING = "f32"


class FusedAttention(torch.autograd.Function):
    """Causal attention on bf16 q [B,H,T,D], k and v [B,G,T,D] with the
    rounding points of a fused flash-attention kernel, as cudnn-frontend
    1.32's SDPA graphs declare their tensors (written from that
    description, not from shardc's code): scores and softmax in f32; the
    probabilities P rounded to bf16 before P.V; o rounded to bf16.
    Backward, from the saved bf16 o: dP = dO V^T and dS = P (dP - rowsum(dO
    o)) in f32; dV = (P in bf16)^T dO; dK = (dS in bf16)^T Q scale; dQ = dS K
    scale (dS in f32); grouped heads' dK and dV rounded to bf16 per query
    head, then summed over the group; each gradient rounded to bf16."""

    @staticmethod
    def forward(ctx, q, k, v, scale):
        H, G, T = q.shape[1], k.shape[1], q.shape[2]
        kr = k.float().repeat_interleave(H // G, dim=1)
        vr = v.float().repeat_interleave(H // G, dim=1)
        s = (q.float() @ kr.transpose(-2, -1)) * scale
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        p = s.masked_fill(~mask, float("-inf")).softmax(-1)
        o = (p.to(q.dtype).float() @ vr).to(q.dtype)
        ctx.save_for_backward(q, k, v, o, p)
        ctx.scale = scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, p = ctx.saved_tensors
        H, G = q.shape[1], k.shape[1]
        scale = ctx.scale
        kr = k.float().repeat_interleave(H // G, dim=1)
        vr = v.float().repeat_interleave(H // G, dim=1)
        do32 = do.float()
        dp = do32 @ vr.transpose(-2, -1)
        rows = (do32 * o.float()).sum(-1, keepdim=True)
        ds = p * (dp - rows)
        dv = p.to(q.dtype).float().transpose(-2, -1) @ do32
        dk = (ds.to(q.dtype).float().transpose(-2, -1) @ q.float()) * scale
        dq = ((ds @ kr) * scale).to(q.dtype)

        def grouped(d):
            if H == G:
                return d.to(q.dtype)
            d = d.to(q.dtype).float()
            B, _, T, D = d.shape
            return d.view(B, G, H // G, T, D).sum(2).to(q.dtype)
        return dq, grouped(dk), grouped(dv), None


def mixed_attention(dtype):
    """The model's attention: causal_attention in f32 math, or under
    mixed precision with ATTENTION_ROUNDING's rounding points."""
    if mixed(dtype) and ATTENTION_ROUNDING == "fused":
        def fused(q, k, v, scale=None):
            if scale is None:
                scale = 1.0 / math.sqrt(q.shape[-1])
            return FusedAttention.apply(q, k, v, scale)
        return fused
    return in_f32(causal_attention, dtype)


def gpt2_loss(c, W, x, y, dtype=None):
    B, T = x.shape
    C, H = c["n_embd"], c["n_head"]
    eps = c.get("layer_norm_epsilon", 1e-5)
    approx = "none" if c.get("activation_function", "gelu_new") == "gelu" else "tanh"
    W = cast_params(W, dtype)
    ln = in_f32(lambda t, w, b: F.layer_norm(t, (C,), w, b, eps), dtype)
    gelu = in_f32(lambda t: F.gelu(t, approximate=approx), dtype)
    attention = mixed_attention(dtype)

    def proj(h, t, name):
        """h + t @ weight + bias: the residual add after the GEMM (under f32
        in this order, as before)."""
        if LINEAR is not None:
            return h + lin(t, name)
        if not mixed(dtype):
            return h + t @ W[name + ".weight"] + W[name + ".bias"]
        return h + gemm(t, W[name + ".weight"], W[name + ".bias"], dtype)

    def lin(t, name):
        """t @ weight + bias, or LINEAR's (given weight as [out, in])."""
        w, b = W[name + ".weight"], W[name + ".bias"]
        if LINEAR is not None:
            return LINEAR(t, w.t(), b, name, dtype)
        return gemm(t, w, b, dtype)

    h = embedding(W["transformer.wte.weight"], x, dtype) + W["transformer.wpe.weight"][:T]
    for l in range(c["n_layer"]):
        p = f"transformer.h.{l}."
        a = ln(h, W[p + "ln_1.weight"], W[p + "ln_1.bias"])
        qkv = lin(a, p + "attn.c_attn")
        q, k, v = qkv.split(C, dim=-1)
        heads = lambda t: t.view(B, T, H, C // H).transpose(1, 2)
        # scale_attn_weights / scale_attn_by_inverse_layer_idx, as
        # transformers' GPT2Attention applies them.
        scale = 1.0 / math.sqrt(C // H) if c.get("scale_attn_weights", True) else 1.0
        if c.get("scale_attn_by_inverse_layer_idx", False):
            scale /= float(l + 1)
        a = attention(heads(q), heads(k), heads(v), scale)
        a = a.transpose(1, 2).reshape(B, T, C)
        h = proj(h, a, p + "attn.c_proj")
        m = ln(h, W[p + "ln_2.weight"], W[p + "ln_2.bias"])
        m = gelu(lin(m, p + "mlp.c_fc"))
        h = proj(h, m, p + "mlp.c_proj")
    h = ln(h, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"])
    head = W.get("lm_head.weight", W["transformer.wte.weight"])
    logits = gemm(h, head.t(), None, dtype).float()
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


def llama_sizes(c):
    """A Llama config's width, heads, kv heads, head dim, norm epsilon, rope
    theta and rotary inverse frequencies."""
    C, H = c["hidden_size"], c["num_attention_heads"]
    G = c.get("num_key_value_heads", H)
    D = c.get("head_dim", C // H)
    eps, theta = c.get("rms_norm_eps", 1e-6), c.get("rope_theta", 10000.0)
    inv_freq = rope_inv_freq(c, D)
    return C, H, G, D, eps, theta, inv_freq


def llama_loss(c, W, x, y, dtype=None):
    B, T = x.shape
    C, H, G, D, eps, theta, inv_freq = llama_sizes(c)
    W = cast_params(W, dtype)
    rot = in_f32(lambda t: apply_rotary(t, theta, inv_freq), dtype)
    norm = in_f32(lambda t, w: rms_norm(t, w, eps), dtype)
    silu = in_f32(F.silu, dtype)
    attention = mixed_attention(dtype)

    def lin(t, name):
        """t @ W.T, plus the bias when the model has one (or LINEAR's)."""
        if LINEAR is not None:
            return LINEAR(t, W[name + ".weight"], W.get(name + ".bias"), name, dtype)
        if mixed(dtype):
            return gemm(t, W[name + ".weight"].t(), W.get(name + ".bias"), dtype)
        out = t @ W[name + ".weight"].t()
        return out + W[name + ".bias"] if name + ".bias" in W else out

    h = embedding(W["model.embed_tokens.weight"], x, dtype)
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = norm(h, W[p + "input_layernorm.weight"])
        q = lin(a, p + "self_attn.q_proj").view(B, T, H, D).transpose(1, 2)
        k = lin(a, p + "self_attn.k_proj").view(B, T, G, D).transpose(1, 2)
        v = lin(a, p + "self_attn.v_proj").view(B, T, G, D).transpose(1, 2)
        o = attention(rot(q), rot(k), v)
        o = o.transpose(1, 2).reshape(B, T, H * D)
        h = h + lin(o, p + "self_attn.o_proj")
        m = norm(h, W[p + "post_attention_layernorm.weight"])
        m = silu(lin(m, p + "mlp.gate_proj")) * lin(m, p + "mlp.up_proj")
        h = h + lin(m, p + "mlp.down_proj")
    h = norm(h, W["model.norm.weight"])
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    logits = gemm(h, head.t(), None, dtype).float()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))


def tp_gather(parts):
    """Sequence parallelism's all-gather of the tp ranks' [B, T/tp, C] bf16
    chunks, and its adjoint: the whole gradient summed over the ranks' uses
    in f32 (the reduce dtype), rounded to bf16 once, then split. Returns one
    input per tp rank, each its own f32 -> bf16 cast of the gathered chunks,
    so that autograd sums the ranks' gradients in f32."""
    whole = torch.cat(parts, dim=1).float()
    return lambda: whole.to(parts[0].dtype)


def tp_scatter(partials, tp, dtype):
    """Row-parallel partial outputs [B, T, C] (each bf16) summed in f32 and
    reduce-scattered: rank j's [B, T/tp, C] chunk, rounded to bf16."""
    total = sum(p.float() for p in partials)
    return [t.to(dtype) for t in total.chunk(tp, dim=1)]


def tp_loss(h, y, heads, dtype):
    """The mean cross-entropy over all tokens, rank j's from its chunk of
    the final hidden states h[j] and its cast of the LM head heads[j]."""
    B, T = y.shape
    n = T // len(h)
    total = 0.0
    for j, (hj, head) in enumerate(zip(h, heads)):
        logits = gemm(hj, head.t(), None, dtype).float()
        total = total + F.cross_entropy(logits.view(-1, logits.shape[-1]),
                                        y[:, j * n:(j + 1) * n].reshape(-1),
                                        reduction="sum")
    return total / (B * T)


def tp_embed(Wr, name, x, tp, dtype):
    """Each tp rank's [B, T/tp, C] chunk of the token embedding. Where tp
    divides the vocabulary (tp-partition's vocabulary-parallel embedding),
    rank r looks up every token in its rows of the table (zero rows for the
    tokens it does not hold) and the partials are reduce-scattered (summed
    in f32); otherwise each rank looks up its own tokens in the whole
    table."""
    B, T = x.shape
    n = T // tp
    V = Wr[0][name].shape[0]
    if V % tp:
        return [embedding(Wr[j][name], x[:, j * n:(j + 1) * n], dtype)
                for j in range(tp)]
    part = V // tp
    partials = []
    for r in range(tp):
        local = x - r * part
        mine = (local >= 0) & (local < part)
        rows = Wr[r][name][r * part:(r + 1) * part]
        e = embedding(rows, torch.where(mine, local, torch.zeros_like(local)), dtype)
        partials.append(e * mine.unsqueeze(-1).to(e.dtype))
    return tp_scatter(partials, tp, dtype)


def tp_head_loss(h, y, heads, dtype):
    """tp_loss, or where tp divides the vocabulary the loss on
    vocab-sharded logits (loss parallel): rank r's columns of every token's
    logits, from the all-gathered final hidden states and its rows of the
    head; the rows' loss from the whole logits (computed in f32)."""
    tp = len(h)
    V = heads[0].shape[0]
    if V % tp:
        return tp_loss(h, y, heads, dtype)
    part = V // tp
    a = tp_gather(h)
    logits = torch.cat([gemm(a(), heads[r][r * part:(r + 1) * part].t(), None,
                             dtype).float() for r in range(tp)], dim=-1)
    return F.cross_entropy(logits.view(-1, V), y.reshape(-1))


def llama_loss_tp(c, W, x, y, dtype, tp):
    """llama_loss under mixed precision on tp ranks, as tp-partition
    computes it (torchtitan's plan with sequence parallelism): rank j holds
    tokens [j T/tp, (j+1) T/tp) of the residual stream, its norms and the
    loss; q/k/v, gate and up are split by rows (heads) and o and down by
    columns over the ranks; an all-gather feeds the split projections and a
    reduce-scatter sums their partial outputs (both sums in f32). Each rank
    casts the f32 master weights to bf16 itself, so a whole parameter's
    gradient is each rank's bf16 part summed in f32."""
    B, T = x.shape
    C, H, G, D, eps, theta, inv_freq = llama_sizes(c)
    Wr = [cast_params(W, dtype) for _ in range(tp)]
    rot = in_f32(lambda t: apply_rotary(t, theta, inv_freq), dtype)
    norm = in_f32(lambda t, w: rms_norm(t, w, eps), dtype)
    silu = in_f32(F.silu, dtype)
    attention = mixed_attention(dtype)

    def rows(r, name, n):
        """Rank r's rows of W[name] (and of its bias) when split in n parts."""
        w = Wr[r][name + ".weight"]
        b = Wr[r].get(name + ".bias")
        part = w.shape[0] // n
        return (w[r * part:(r + 1) * part],
                None if b is None else b[r * part:(r + 1) * part])

    def col_lin(t, r, name):
        w, b = rows(r, name, tp)
        return gemm(t, w.t(), b, dtype)

    def row_lin(t, r, name):
        assert name + ".bias" not in W, "a row-parallel bias"
        w = Wr[r][name + ".weight"]
        part = w.shape[1] // tp
        return gemm(t, w[:, r * part:(r + 1) * part].t(), None, dtype)

    n = T // tp
    h = tp_embed(Wr, "model.embed_tokens.weight", x, tp, dtype)
    Hr, Gr = H // tp, G // tp
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = tp_gather([norm(h[j], Wr[j][p + "input_layernorm.weight"]) for j in range(tp)])
        partials = []
        for r in range(tp):
            ar = a()
            q = col_lin(ar, r, p + "self_attn.q_proj").view(B, T, Hr, D).transpose(1, 2)
            k = col_lin(ar, r, p + "self_attn.k_proj").view(B, T, Gr, D).transpose(1, 2)
            v = col_lin(ar, r, p + "self_attn.v_proj").view(B, T, Gr, D).transpose(1, 2)
            o = attention(rot(q), rot(k), v).transpose(1, 2).reshape(B, T, Hr * D)
            partials.append(row_lin(o, r, p + "self_attn.o_proj"))
        h = [hj + sj for hj, sj in zip(h, tp_scatter(partials, tp, dtype))]
        m = tp_gather([norm(h[j], Wr[j][p + "post_attention_layernorm.weight"])
                       for j in range(tp)])
        partials = []
        for r in range(tp):
            mr = m()
            s = silu(col_lin(mr, r, p + "mlp.gate_proj")) * col_lin(mr, r, p + "mlp.up_proj")
            partials.append(row_lin(s, r, p + "mlp.down_proj"))
        h = [hj + sj for hj, sj in zip(h, tp_scatter(partials, tp, dtype))]
    return tp_head_loss([norm(h[j], Wr[j]["model.norm.weight"]) for j in range(tp)], y,
                        [Wr[j].get("lm_head.weight", Wr[j]["model.embed_tokens.weight"])
                         for j in range(tp)], dtype)


def gpt2_loss_tp(c, W, x, y, dtype, tp):
    """gpt2_loss under mixed precision on tp ranks, as llama_loss_tp: c_attn
    split by thirds (each of q, k, v by heads) and c_fc by columns, the
    c_projs by rows with their bias added once to the rank's chunk of the
    sum; each rank adds its rows of the learned positions."""
    B, T = x.shape
    C, H = c["n_embd"], c["n_head"]
    eps = c.get("layer_norm_epsilon", 1e-5)
    approx = "none" if c.get("activation_function", "gelu_new") == "gelu" else "tanh"
    Wr = [cast_params(W, dtype) for _ in range(tp)]
    ln = in_f32(lambda t, w, b: F.layer_norm(t, (C,), w, b, eps), dtype)
    gelu = in_f32(lambda t: F.gelu(t, approximate=approx), dtype)
    attention = mixed_attention(dtype)
    n, Hr = T // tp, H // tp

    def cols(r, name, blocks):
        """Rank r's columns of each of `blocks` blocks of W[name] ([in,
        out]) and of its bias."""
        w, b = Wr[r][name + ".weight"], Wr[r][name + ".bias"]
        block = w.shape[1] // blocks
        part = block // tp
        idx = torch.cat([torch.arange(k * block + r * part, k * block + (r + 1) * part)
                         for k in range(blocks)])
        return w[:, idx], b[idx]

    def row_proj(h, parts, name):
        """h + the reduce-scattered sum of the ranks' parts of t @ W[name]
        (its rows split), then the bias, on each rank's chunk."""
        partials = []
        for r, t in enumerate(parts):
            w = Wr[r][name + ".weight"]
            part = w.shape[0] // tp
            partials.append(gemm(t, w[r * part:(r + 1) * part], None, dtype))
        return [hj + (sj + Wr[j][name + ".bias"])
                for j, (hj, sj) in enumerate(zip(h, tp_scatter(partials, tp, dtype)))]

    h = [e + Wr[j]["transformer.wpe.weight"][j * n:(j + 1) * n]
         for j, e in enumerate(tp_embed(Wr, "transformer.wte.weight", x, tp, dtype))]
    for l in range(c["n_layer"]):
        p = f"transformer.h.{l}."
        a = tp_gather([ln(h[j], Wr[j][p + "ln_1.weight"], Wr[j][p + "ln_1.bias"])
                       for j in range(tp)])
        scale = 1.0 / math.sqrt(C // H) if c.get("scale_attn_weights", True) else 1.0
        if c.get("scale_attn_by_inverse_layer_idx", False):
            scale /= float(l + 1)
        heads = lambda t: t.view(B, T, Hr, C // H).transpose(1, 2)
        outs = []
        for r in range(tp):
            w, b = cols(r, p + "attn.c_attn", 3)
            q, k, v = gemm(a(), w, b, dtype).split(C // tp, dim=-1)
            o = attention(heads(q), heads(k), heads(v), scale)
            outs.append(o.transpose(1, 2).reshape(B, T, C // tp))
        h = row_proj(h, outs, p + "attn.c_proj")
        m = tp_gather([ln(h[j], Wr[j][p + "ln_2.weight"], Wr[j][p + "ln_2.bias"])
                       for j in range(tp)])
        outs = []
        for r in range(tp):
            w, b = cols(r, p + "mlp.c_fc", 1)
            outs.append(gelu(gemm(m(), w, b, dtype)))
        h = row_proj(h, outs, p + "mlp.c_proj")
    return tp_head_loss([ln(h[j], Wr[j]["transformer.ln_f.weight"],
                            Wr[j]["transformer.ln_f.bias"]) for j in range(tp)], y,
                        [Wr[j].get("lm_head.weight", Wr[j]["transformer.wte.weight"])
                         for j in range(tp)], dtype)


def loss(c, W, x, y, dtype=None, tp=1):
    """The mean cross-entropy of the model; dtype torch.bfloat16: mixed
    precision (the module's docstring), None or torch.float32: f32. With
    tp > 1 under mixed precision, as tp ranks compute it (llama_loss_tp)."""
    if tp > 1 and mixed(dtype):
        f = gpt2_loss_tp if c["model_type"] == "gpt2" else llama_loss_tp
        return f(c, W, x, y, dtype, tp)
    f = gpt2_loss if c["model_type"] == "gpt2" else llama_loss
    return f(c, W, x, y, dtype)
