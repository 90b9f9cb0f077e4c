"""End-to-end: tools/prepare_data.py, text to token shards and back.

Trains a small byte-level BPE with PyPI's tokenizers on test text (offline),
writes a corpus of .txt and .jsonl files (and .parquet where pyarrow is
installed), prepares shards with the tool, and checks:
  * the shards decode back to the documents, in order, each after the
    end-of-text token (read here with numpy, not with shardc);
  * the val shard holds --val-tokens tokens, the train shards at most
    --shard-tokens each, in the GPT-2 format, and in the Llama 3 format
    (uint32) for a vocabulary past 65536 (the tokenizer with added tokens);
  * ./train trains on 'PREFIX_train_*.bin' and its loss falls;
  * a jsonl line without "text" is one error naming the file and line.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harness import read_log, run  # noqa: E402

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "prepare_data.py")

WORDS = ("the model shards its parameters across the mesh and gathers them before "
         "use then frees them after the forward pass gradients are reduced and "
         "scattered so that each rank keeps its own shard of the optimizer state "
         "a static schedule overlaps every collective with compute").split()


def corpus(rng, n):
    return [" ".join(rng.choice(WORDS, size=rng.integers(20, 80))) + "." for _ in range(n)]


def read_shard(path):
    header = np.fromfile(path, dtype=np.int32, count=256)
    magic, version, count = header[:3]
    dtype = {(20240520, 1): np.uint16, (20240801, 7): np.uint32}[(magic, version)]
    tokens = np.fromfile(path, dtype=dtype, offset=1024)
    assert len(tokens) == count, path
    return tokens.astype(np.int64), dtype


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    w = args.workdir
    os.makedirs(w, exist_ok=True)
    rng = np.random.default_rng(3)
    docs = corpus(rng, 60)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(docs, trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok_path = os.path.join(w, "tokenizer.json")
    tok.save(tok_path)
    # The corpus: 10 .txt files, 50 documents in two .jsonl files.
    files = []
    for k in range(10):
        p = os.path.join(w, f"doc{k:02d}.txt")
        open(p, "w").write(docs[k])
        files.append(p)
    for k, part in enumerate((docs[10:35], docs[35:60])):
        p = os.path.join(w, f"part{k}.jsonl")
        with open(p, "w") as f:
            for d in part:
                f.write(json.dumps({"text": d, "id": 1}) + "\n")
        files.append(p)
    expected = list(docs)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
        extra = corpus(rng, 5)
        p = os.path.join(w, "part.parquet")
        pq.write_table(pa.table({"text": extra}), p)
        files.append(p)
        expected += extra
        print("parquet: 5 documents")
    except ImportError:
        print("parquet: pyarrow not installed, no .parquet file")

    def prepare(tokenizer, prefix, shard, val):
        out = run([sys.executable, TOOL, "--tokenizer", tokenizer, "--out", prefix,
                   "--shard-tokens", str(shard), "--val-tokens", str(val)] + files)
        print(out.splitlines()[0].replace(w + "/", ""))
        return sorted(glob.glob(prefix + "_val_*.bin")) + sorted(glob.glob(prefix + "_train_*.bin"))

    def check(tokenizer, shards, shard, val, want):
        eot = tokenizer.token_to_id("<|endoftext|>")
        stream, kinds = [], set()
        for i, s in enumerate(shards):
            t, dtype = read_shard(s)
            kinds.add(dtype)
            limit = val if i == 0 else shard
            if len(t) > limit or (i == 0 and len(t) != val):
                sys.exit(f"FAIL: {s} holds {len(t)} tokens")
            stream.extend(t.tolist())
        if kinds != {want}:
            sys.exit(f"FAIL: shards of {kinds}, expected {want}")
        got, cur = [], None
        for t in stream:
            if t == eot:
                if cur is not None:
                    got.append(cur)
                cur = []
            else:
                cur.append(t)
        got.append(cur)
        texts = [tokenizer.decode(ids) for ids in got]
        if texts != expected:
            bad = next(k for k in range(len(expected)) if k >= len(texts) or texts[k] != expected[k])
            sys.exit(f"FAIL: document {bad} decodes to {texts[bad]!r}, wrote {expected[bad]!r}")
        print(f"{len(shards)} shards ({'uint32' if want == np.uint32 else 'uint16'}), "
              f"{len(stream)} tokens: decode back to the {len(expected)} documents")

    prefix = os.path.join(w, "data", "corpus")
    shards = prepare(tok_path, prefix, 1500, 400)
    check(tok, shards, 1500, 400, np.uint16)
    # A vocabulary past 16 bits: the Llama 3 format.
    wide = Tokenizer.from_file(tok_path)
    wide.add_tokens([f"<extra_{k}>" for k in range(66000)])
    wide_dir = os.path.join(w, "wide")
    os.makedirs(wide_dir, exist_ok=True)
    wide.save(os.path.join(wide_dir, "tokenizer.json"))
    wshards = prepare(wide_dir, os.path.join(w, "wide", "corpus"), 1500, 400)
    check(wide, wshards, 1500, 400, np.uint32)
    # Train on it.
    config = {"model_type": "gpt2", "vocab_size": tok.get_vocab_size(), "n_embd": 32,
              "n_layer": 2, "n_head": 4, "n_inner": 128, "n_positions": 64,
              "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
    cpath = os.path.join(w, "config.json")
    json.dump(config, open(cpath, "w"))
    exe = os.path.join(w, "train")
    run([args.shardc, cpath, "--micro-batch", "4", "--seq-len", "32", "-o", exe])
    log = os.path.join(w, "log.jsonl")
    out = run([exe, "--data", prefix + "_train_*.bin", "--steps", "30", "--lr", "3e-3",
               "--log", log])
    losses = [r["loss"] for r in read_log(log)]
    print([l for l in out.splitlines() if l.startswith("data:")][0].replace(w + "/", ""))
    print(f"trained 30 steps on the train shards: loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    if not losses[-1] < losses[0] - 0.5:
        sys.exit("FAIL: the loss did not fall")
    # A jsonl line without "text".
    badf = os.path.join(w, "bad.jsonl")
    with open(badf, "w") as f:
        f.write(json.dumps({"text": "fine"}) + "\n" + json.dumps({"body": "no text"}) + "\n")
    r = subprocess.run([sys.executable, TOOL, "--tokenizer", tok_path, "--out",
                        os.path.join(w, "bad", "x"), badf], capture_output=True, text=True)
    print(f"a jsonl line without text: exit {r.returncode}: {r.stderr.strip()}".replace(w + "/", ""))
    if r.returncode == 0 or len(r.stderr.strip().splitlines()) != 1:
        sys.exit("FAIL")
    print("PASS")


if __name__ == "__main__":
    main()
