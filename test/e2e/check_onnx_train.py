"""A language model exported by torch.onnx.export (opset 17) trains in shardc
as in PyTorch.

Models: `encoder`, PyTorch's own nn.TransformerEncoder (causal mask, GELU,
norm_first) with embeddings and a head; `gpt`, a GPT block written out by
hand, whose layer norms, GELUs and attention the exporter writes as chains
of elementwise ops, reductions and matmuls.

Exports the model with its weights and prints which fused ops the compiled
training step holds and which of the decomposed ops are left (the
nn-fuse-patterns pass). Compiles it with shardc (one rank and the given
meshes, with and without --fuse-patterns), trains 20 steps and compares
every step's loss with PyTorch's AdamW on the same batches (relative
difference below 1e-4). Then writes the trained model with --export-onnx,
checks it with onnx.checker, loads its initializers back into the PyTorch
module and compares that model's loss with shardc's loss computed from the
same weights.
"""
import argparse
import itertools
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
import torch_models as tm  # noqa: E402

V, C, H, L, T = 61, 32, 4, 2, 16


def leaky(x):
    return nn.functional.leaky_relu(x, 0.1)


class EncoderLM(nn.Module):
    def __init__(self, activation="gelu"):
        super().__init__()
        self.tok = nn.Embedding(V, C)
        self.pos = nn.Embedding(T, C)
        layer = nn.TransformerEncoderLayer(C, H, 4 * C, dropout=0.0, batch_first=True,
                                           norm_first=True, activation=activation)
        self.enc = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(C)
        self.head = nn.Linear(C, V)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(T))

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(t))
        x = self.enc(x, mask=self.mask[:t, :t])
        return self.head(self.ln(x))


class DecomposedLayerNorm(nn.Module):
    """LayerNorm as arithmetic: ReduceMean, Sub, Pow, Add, Sqrt, Div, Mul, Add."""

    def __init__(self, c, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.eps = eps

    def forward(self, x):
        d = x - x.mean(-1, keepdim=True)
        var = (d ** 2).mean(-1, keepdim=True)
        return d / torch.sqrt(var + self.eps) * self.weight + self.bias


def erf_gelu(x):
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


class GPTBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = DecomposedLayerNorm(C), DecomposedLayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, mask):
        b, t, _ = x.shape
        q, k, v = (z.view(b, t, H, C // H).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(C, dim=-1))
        s = q @ k.transpose(-2, -1) / math.sqrt(C // H)
        if mask.dtype == torch.bool:  # a select, as torch.where writes it
            s = torch.where(mask, s, torch.finfo(s.dtype).min)
        else:
            s = s + mask
        a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, C)
        x = x + self.proj(a)
        return x + self.out(erf_gelu(self.fc(self.ln2(x))))


class GPTLM(nn.Module):
    def __init__(self, where_mask=False):
        super().__init__()
        self.tok = nn.Embedding(V, C)
        self.pos = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(GPTBlock() for _ in range(L))
        self.ln = DecomposedLayerNorm(C)
        self.head = nn.Linear(C, V)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)) if where_mask
                             else nn.Transformer.generate_square_subsequent_mask(T))

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(t))
        for block in self.blocks:
            x = block(x, self.mask[:t, :t])
        return self.head(self.ln(x))


MODELS = {"encoder": EncoderLM, "gpt": GPTLM,
          # The causal mask as a boolean select: Where(mask, scores, lowest).
          "gpt-where": lambda: GPTLM(where_mask=True),
          # nn.TransformerEncoderLayer's default activation: ONNX Relu.
          "encoder-relu": lambda: EncoderLM(activation="relu"),
          # A leaky ReLU activation (slope 0.1): ONNX LeakyRelu.
          "encoder-leaky": lambda: EncoderLM(activation=leaky)}
FUSED = ["attention", "gelu", "layer_norm"]
DECOMPOSED = ["batch_matmul", "softmax", "erf", "sqrt", "pow", "sub", "div"]


def op_counts(text, names):
    return {n: len(re.findall(rf"\bnn\.{n}\b", text)) for n in names}


def params_of(model_proto):
    """The initializers that are trained parameters (float, not the mask)."""
    return [t for t in model_proto.graph.initializer
            if t.data_type == 1 and t.name != "mask" and len(t.dims) > 0]


def loss_of(model, x, y):
    logits = model(x)
    return nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--meshes", default="1,2x2")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tp", type=int, default=1,
                    help="tensor parallelism: each mesh's ranks times this many")
    ap.add_argument("--model", choices=sorted(MODELS), default="encoder")
    ap.add_argument("--fuse", default="true",
                    help="--fuse-patterns settings to train with: true, false or both")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.manual_seed(0)
    Model = MODELS[args.model]
    model = Model()
    # As initialized: the exporter stores parameters that are equal (all-ones
    # norms, the layers nn.TransformerEncoder copies) once, and shardc must
    # still train them apart as PyTorch does.
    model.eval()
    B = 2
    onnx_path = os.path.join(args.workdir, f"{args.model}.onnx")
    torch.onnx.export(model, (torch.zeros(B, T, dtype=torch.long),), onnx_path,
                      opset_version=17, input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}},
                      do_constant_folding=False)
    W0 = {k: v.clone() for k, v in model.state_dict().items()}

    rng = np.random.default_rng(7)
    S = args.steps + 1
    tokens = np.empty(8 * B * T * S + 1, dtype=np.int64)
    tokens[0] = 1
    for i in range(1, len(tokens)):
        tokens[i] = (tokens[i - 1] * 5 + 2) % V if rng.random() < 0.8 else rng.integers(0, V)
    tok_path = os.path.join(args.workdir, "tokens.bin")
    tm.write_tokens(tok_path, tokens)
    lr = 3e-3

    # Parameters the exporter stored once (Identity of an initializer).
    import onnx
    exported = onnx.load(onnx_path)
    init_names = {t.name for t in exported.graph.initializer}
    shared = sum(n.op_type == "Identity" and n.input[0] in init_names
                 for n in exported.graph.node)
    print(f"exported: {len(init_names)} initializers, {shared} parameters stored as "
          "Identity of an equal one")

    # What the training step is made of, with the pattern pass.
    step = harness.run([args.shardc, onnx_path, "--micro-batch", str(B), "--emit=train",
                        "-o", "-"])
    fused, left = op_counts(step, FUSED), op_counts(step, DECOMPOSED)
    print("fused ops: " + ", ".join(f"{n} {c}" for n, c in fused.items()) +
          "; decomposed ops left: " +
          (", ".join(f"{n} {c}" for n, c in left.items() if c) or "none"))

    def reference(G, steps):
        m = Model()
        m.load_state_dict(W0)
        m.train()
        opt = torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=0.01)
        losses = []
        for s in range(steps):
            x, y = tm.batch(tokens, s, G, T)
            loss = loss_of(m, x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, m

    ok = True
    fuse_settings = ["true", "false"] if args.fuse == "both" else [args.fuse]
    for mesh, fuse in itertools.product(args.meshes.split(","), fuse_settings):
        data_ranks = int(np.prod([int(d) for d in mesh.split("x")]))
        ranks = data_ranks * args.tp
        exe = os.path.join(args.workdir, f"train_{mesh}" + ("" if fuse == "true" else "_unfused"))
        harness.run([args.shardc, onnx_path, "--micro-batch", str(B), "--mesh", mesh,
                     "--tp", str(args.tp), f"--fuse-patterns={fuse}", "-o", exe])
        log = exe + ".log"
        cmd = [exe, "--data", tok_path, "--steps", str(args.steps), "--lr", str(lr), "--log", log]
        if mesh == "1" and fuse == "true":
            cmd += ["--export-onnx", os.path.join(args.workdir, "trained.onnx")]
        harness.run(harness.MPIRUN + ["-np", str(ranks)] + cmd if ranks > 1 else cmd)
        got = [r["loss"] for r in harness.read_log(log)]
        ref, _ = reference(B * data_ranks, args.steps)
        worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
        print(f"mesh {mesh:>4}{'' if fuse == 'true' else ' (unfused)'}"
              f"{f' --tp {args.tp}' if args.tp > 1 else ''}: {args.steps} steps, "
              f"loss {got[0]:.5f} -> {got[-1]:.5f} "
              f"(PyTorch {ref[0]:.5f} -> {ref[-1]:.5f}), worst relative difference {worst:.2e}")
        ok &= worst < 1e-4 and len(got) == args.steps

    # The exported model: onnx.checker, then its weights in PyTorch against
    # shardc's loss from the same weights (step `steps` of a longer run).
    import onnx.numpy_helper
    trained = onnx.load(os.path.join(args.workdir, "trained.onnx"))
    onnx.checker.check_model(trained)
    exe = os.path.join(args.workdir, "train_1")
    log = exe + ".more.log"
    # train_1 runs on the tp ranks of mesh 1.
    harness.run((harness.MPIRUN + ["-np", str(args.tp)] if args.tp > 1 else []) + [exe, "--data", tok_path, "--steps", str(args.steps + 1), "--lr", str(lr),
                 "--log", log])
    shardc_loss = harness.read_log(log)[args.steps]["loss"]
    reloaded = Model()
    state = dict(W0)
    inits = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy())
             for t in trained.graph.initializer}
    for name in state:
        if name in inits and name != "mask":
            state[name] = inits[name]
    reloaded.load_state_dict(state)
    x, y = tm.batch(tokens, args.steps, B, T)
    with torch.no_grad():
        torch_loss = loss_of(reloaded.train(), x, y).item()
    diff = abs(torch_loss - shardc_loss) / abs(shardc_loss)
    print(f"exported model: onnx.checker ok, {len(inits)} initializers; PyTorch loss "
          f"{torch_loss:.6f}, shardc {shardc_loss:.6f}, relative difference {diff:.2e}")
    ok &= diff < 1e-4

    # The same export with the weights as ONNX external data (how models
    # over 2 GB are written): checked by path, its tensors equal the inline
    # file's, and shardc imports it again.
    ext_path = os.path.join(args.workdir, "trained_ext.onnx")
    harness.run((harness.MPIRUN + ["-np", str(args.tp)] if args.tp > 1 else []) + [exe, "--data", tok_path, "--steps", str(args.steps), "--lr", str(lr),
                 "--export-onnx", ext_path, "--export-external-data"])
    onnx.checker.check_model(ext_path)
    raw = onnx.load(ext_path, load_external_data=False)
    external = sum(t.data_location == onnx.TensorProto.EXTERNAL for t in raw.graph.initializer)
    ext = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(ext_path).graph.initializer}
    same = all(np.array_equal(ext[t.name], onnx.numpy_helper.to_array(t))
               for t in trained.graph.initializer)
    harness.run([args.shardc, ext_path, "--micro-batch", str(B), "--emit=mlir", "-o", os.devnull])
    print(f"external-data export: onnx.checker ok, {external} initializers in "
          f"{os.path.basename(ext_path)}.data, {'equal to' if same else 'DIFFERENT from'} "
          "the inline export, imported again by shardc")
    ok &= same and external == len(params_of(trained))
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
