"""End-to-end: Hugging Face checkpoints in (--init-from) and out (--export-hf).

in    Random weights for CONFIG (torch_models.random_params, independent of
      shardc) are written as one safetensors file, and split into several
      files with a model.safetensors.index.json as transformers'
      save_pretrained writes them (half the tensors with, half without the
      model prefix). --init-from FILE, DIR and DIR/index give the same first
      loss, bit for bit, on 1 rank and on --mesh 2 (where each rank reads
      only its rows); and --init-from FILE equals the PyTorch loss of those
      weights on the first batch within 1e-5.
out   --export-hf with a small --max-shard-size writes several files: read
      back by the independent reader, every tensor equals --save-weights'
      output exactly, the index maps each to the file holding it, its
      total_size is the sum of the tensors' bytes, and config.json has the
      architecture and every value of CONFIG. Exported again into the same
      directory with the default size: one model.safetensors, the earlier
      split's files and index gone.
onnx  a model compiled from ONNX exports its tensors (one model.safetensors,
      equal to --save-weights) and says that no config.json was written.
errors  an index naming a missing file, or a tensor its file lacks, a
      missing parameter, a shape mismatch: one-line errors naming the file;
      --max-shard-size without --export-hf, or not a size: errors naming it.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402
from harness import MPIRUN, read_log, run  # noqa: E402

B, T = 4, 16


def split_like_transformers(weights, dirname, parts):
    """save_pretrained's sharded layout, written by hand."""
    os.makedirs(dirname, exist_ok=True)
    names = list(weights)
    chunks = [names[k::parts] for k in range(parts)]
    weight_map, total = {}, 0
    for k, chunk in enumerate(chunks):
        fname = f"model-{k + 1:05d}-of-{parts:05d}.safetensors"
        tm.write_safetensors(os.path.join(dirname, fname), {n: weights[n] for n in chunk})
        for n in chunk:
            weight_map[n] = fname
            total += weights[n].numel() * 4
    with open(os.path.join(dirname, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


class TinyLM(torch.nn.Module):
    """Embedding and head: the smallest language model ONNX can carry."""

    def __init__(self, vocab=37, dim=16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, ids):
        return self.head(torch.tanh(self.embed(ids)))


def check_onnx(args):
    w = args.workdir
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    torch.manual_seed(0)
    model = TinyLM()
    path = os.path.join(w, "tiny.onnx")
    torch.onnx.export(model, (torch.zeros(B, T, dtype=torch.long),), path,
                      opset_version=17, input_names=["input_ids"],
                      output_names=["logits"], do_constant_folding=False)
    tok = os.path.join(w, "tokens.bin")
    tm.write_tokens(tok, np.random.default_rng(0).integers(0, 37, size=B * T * 4 + 1))
    exe = os.path.join(w, "train")
    run([args.shardc, path, "--micro-batch", str(B), "-o", exe])
    saved, hf = os.path.join(w, "saved.safetensors"), os.path.join(w, "hf")
    out = run([exe, "--data", tok, "--steps", "1", "--save-weights", saved,
               "--export-hf", hf])
    note = [line for line in out.splitlines() if "no config.json" in line]
    files = sorted(os.listdir(hf))
    got, want = (tm.read_safetensors(os.path.join(hf, "model.safetensors")),
                 tm.read_safetensors(saved))
    if not note or files != ["model.safetensors"]:
        sys.exit(f"ONNX export-hf: {files}, output:\n{out}")
    if sorted(got) != sorted(want) or any(not torch.equal(got[n], want[n]) for n in want):
        sys.exit("ONNX export-hf differs from --save-weights")
    print(f"onnx: {files}, {len(got)} tensors equal to --save-weights; {note[0]}")
    print("PASS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["in", "out", "onnx", "errors"])
    ap.add_argument("--config", required=True)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    w = args.workdir
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    if args.mode == "onnx":
        return check_onnx(args)
    c = tm.load_config(args.config)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, c["vocab_size"], size=B * T * 8 + 1)
    tok = os.path.join(w, "tokens.bin")
    tm.write_tokens(tok, tokens)
    exes = {}
    for mesh in ("1", "2"):
        exes[mesh] = os.path.join(w, f"train-{mesh}")
        run([args.shardc, args.config, "--mesh", mesh, "--micro-batch",
             str(B // int(mesh)), "--seq-len", str(T), "-o", exes[mesh]])

    def train(mesh, *flags):
        n = int(mesh)
        return run((MPIRUN + ["-np", str(n)] if n > 1 else []) +
                   [exes[mesh], "--data", tok, *flags])

    weights = tm.random_params(c, seed=3)
    single = os.path.join(w, "single.safetensors")
    tm.write_safetensors(single, weights)

    if args.mode == "in":
        sharded = os.path.join(w, "sharded")
        prefix = "transformer." if c["model_type"] == "gpt2" else "model."
        renamed = {(n[len(prefix):] if i % 2 and n.startswith(prefix) else n): t
                   for i, (n, t) in enumerate(weights.items())}
        split_like_transformers(renamed, sharded, 3)
        x, y = tm.batch(tokens, 0, B, T)
        ref = float(tm.loss(c, weights, x, y))
        for mesh in ("1", "2"):
            losses = {}
            for label, src in (("file", single), ("dir", sharded),
                               ("index", os.path.join(sharded, "model.safetensors.index.json"))):
                log = os.path.join(w, f"log-{mesh}-{label}.jsonl")
                train(mesh, "--steps", "1", "--init-from", src, "--log", log)
                losses[label] = read_log(log)[0]["loss"]
            same = len(set(losses.values())) == 1
            print(f"mesh {mesh}: first loss from file / dir / index: "
                  f"{losses['file']!r} / {losses['dir']!r} / {losses['index']!r}"
                  f" ({'identical' if same else 'DIFFER'}); PyTorch {ref:.7f}")
            if not same:
                sys.exit("the sharded checkpoint does not give the single file's loss")
            if abs(losses["file"] - ref) > 1e-5 * abs(ref):
                sys.exit(f"first loss {losses['file']} is not PyTorch's {ref}")
    elif args.mode == "out":
        saved = os.path.join(w, "saved.safetensors")
        hf = os.path.join(w, "hf")
        total = sum(t.numel() * 4 for t in weights.values())
        limit = total // 3 + 1
        train("2", "--steps", "2", "--init-from", single, "--save-weights", saved,
              "--export-hf", hf, "--max-shard-size", str(limit))
        index = json.load(open(os.path.join(hf, "model.safetensors.index.json")))
        files = sorted(f for f in os.listdir(hf) if f.endswith(".safetensors"))
        got = {}
        for f in files:
            part = tm.read_safetensors(os.path.join(hf, f))
            for n in part:
                if index["weight_map"].get(n) != f:
                    sys.exit(f"{n} is in {f} but the index says {index['weight_map'].get(n)}")
            got.update(part)
        want = tm.read_safetensors(saved)
        if sorted(got) != sorted(want) or sorted(index["weight_map"]) != sorted(want):
            sys.exit(f"exported tensors {sorted(got)} != saved {sorted(want)}")
        for n in want:
            if not torch.equal(got[n], want[n]):
                sys.exit(f"{n} differs between --export-hf and --save-weights")
        size = sum(t.numel() * 4 for t in got.values())
        if index["metadata"]["total_size"] != size:
            sys.exit(f"total_size {index['metadata']['total_size']} != {size}")
        config = json.load(open(os.path.join(hf, "config.json")))
        source = json.load(open(args.config))
        arch = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM"}[c["model_type"]]
        wrong = {k: config.get(k) for k, v in source.items() if config.get(k) != v}
        if config.get("architectures") != [arch] or wrong:
            sys.exit(f"config.json: {config}; differs from {args.config} in {wrong}")
        print(f"export-hf (mesh 2, max shard {limit} bytes): {len(files)} files, "
              f"{len(got)} tensors equal to --save-weights, index and total_size "
              f"{size} right, config.json {arch} with the {len(source)} values "
              f"of {os.path.basename(args.config)}")
        # Again into the same directory, in one file: nothing of the split
        # export may stay beside it (transformers would read it).
        train("2", "--steps", "2", "--init-from", single, "--export-hf", hf)
        left = sorted(os.listdir(hf))
        if left != ["config.json", "model.safetensors"]:
            sys.exit(f"after the one-file export {hf} holds {left}")
        again = tm.read_safetensors(os.path.join(hf, "model.safetensors"))
        if sorted(again) != sorted(want) or any(not torch.equal(again[n], want[n])
                                                 for n in want):
            sys.exit("the one-file export differs from --save-weights")
        print(f"export-hf (default size) into the same directory: {left}")
    else:
        def expect(flags, needle, what):
            r = subprocess.run([exes["1"], "--data", tok, *flags], capture_output=True,
                               text=True)
            msg = (r.stderr.strip().splitlines() or [""])[-1]
            if r.returncode == 0 or needle not in msg:
                sys.exit(f"{what}: expected '{needle}', got rc {r.returncode}: {r.stderr}")
            print(f"{what}: {msg}")
        bad = os.path.join(w, "missing")
        split_like_transformers(weights, bad, 3)
        os.remove(os.path.join(bad, "model-00002-of-00003.safetensors"))
        expect(["--steps", "1", "--init-from", bad], "model-00002-of-00003.safetensors: missing",
               "missing shard")
        lie = os.path.join(w, "lie")
        split_like_transformers(weights, lie, 2)
        idx = os.path.join(lie, "model.safetensors.index.json")
        j = json.load(open(idx))
        name = next(iter(j["weight_map"]))
        j["weight_map"][name] = ("model-00002-of-00002.safetensors"
                                 if j["weight_map"][name].startswith("model-00001")
                                 else "model-00001-of-00002.safetensors")
        json.dump(j, open(idx, "w"))
        expect(["--steps", "1", "--init-from", idx], f"has no tensor '{name}'",
               "index maps a tensor to the wrong file")
        short = os.path.join(w, "short")
        split_like_transformers({n: t for n, t in weights.items() if n != name}, short, 2)
        expect(["--steps", "1", "--init-from", short],
               f"model.safetensors.index.json: missing parameter '{name}'",
               "missing parameter")
        bent = os.path.join(w, "bent.safetensors")
        name2d = next(n for n, t in weights.items() if t.dim() == 2 and t.shape[0] != t.shape[1])
        tm.write_safetensors(bent, {n: (t.t().contiguous() if n == name2d else t)
                                    for n, t in weights.items()})
        expect(["--steps", "1", "--init-from", bent],
               f"bent.safetensors: parameter '{name2d}' has shape",
               "shape mismatch")
        expect(["--steps", "1", "--max-shard-size", "10KB"],
               "--max-shard-size needs --export-hf DIR", "max-shard-size alone")
        expect(["--steps", "1", "--export-hf", os.path.join(w, "hf"), "--max-shard-size", "5XB"],
               "--max-shard-size expects a size such as 5GB, 500MB or 1048576, got '5XB'",
               "bad size")
    print("PASS")


if __name__ == "__main__":
    main()
