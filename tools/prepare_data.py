#!/usr/bin/env python3
"""Text to llm.c token shards, with the model's own tokenizer.

    python3 tools/prepare_data.py --tokenizer PATH --out PREFIX \\
        [--shard-tokens N] [--val-tokens N] FILES...

PATH is a tokenizer.json, or a model directory holding one, read with
PyPI's `tokenizers` (no BPE of our own). FILES are .txt (one document per
file), .jsonl (a "text" field per line) and .parquet (a "text" column;
needs pyarrow). Each document is preceded by the tokenizer's end-of-text or
begin-of-text token (--doc-token to name another). The first --val-tokens
tokens go to PREFIX_val_000000.bin, the rest to PREFIX_train_000001.bin,
... of at most --shard-tokens each: llm.c's GPT-2 format (magic 20240520,
version 1, uint16) when the vocabulary fits 16 bits, else its Llama 3
format (20240801, version 7, uint32) — what ./train --data reads, e.g.
--data 'PREFIX_train_*.bin'. Documents are tokenized on every core; a
progress line shows tokens per second; the end states the documents and
tokens written. Bad input (a jsonl line without "text", a file of another
kind) is one error naming the file and line.
"""
import argparse
import json
import multiprocessing
import os
import struct
import sys
import time

DOC_TOKENS = ["<|endoftext|>", "<|begin_of_text|>", "<s>", "<|im_start|>", "[CLS]", "<bos>"]


def fail(message):
    sys.exit(f"error: {message}")


def tokenizer_path(path):
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(path):
        fail(f"{path}: no tokenizer.json there (--tokenizer takes a tokenizer.json "
             f"or a model directory holding one)")
    return path


def documents(files):
    """(file, line, text) of every document, in order."""
    for f in files:
        if f.endswith(".txt"):
            with open(f, encoding="utf-8") as fh:
                yield f, 0, fh.read()
        elif f.endswith(".jsonl"):
            with open(f, encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as e:
                        fail(f"{f}:{n}: not a JSON line: {e.msg}")
                    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                        fail(f"{f}:{n}: the line has no \"text\" string field")
                    yield f, n, obj["text"]
        elif f.endswith(".parquet"):
            try:
                import pyarrow.parquet as pq
            except ImportError:
                fail(f"{f}: reading .parquet needs pyarrow (pip install pyarrow)")
            table = pq.ParquetFile(f)
            if "text" not in table.schema_arrow.names:
                fail(f"{f}: no \"text\" column (columns: {', '.join(table.schema_arrow.names)})")
            n = 0
            for batch in table.iter_batches(columns=["text"]):
                for text in batch.column(0).to_pylist():
                    n += 1
                    if not isinstance(text, str):
                        fail(f"{f}: row {n}: \"text\" is not a string")
                    yield f, n, text
        else:
            fail(f"{f}: not a .txt, .jsonl or .parquet file")


_tokenizer = None


def _init(path):
    global _tokenizer
    from tokenizers import Tokenizer
    _tokenizer = Tokenizer.from_file(path)


def _encode(texts):
    return [_tokenizer.encode(t, add_special_tokens=False).ids for t in texts]


def chunks(docs, size):
    batch = []
    for _, _, text in docs:
        batch.append(text)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class Writer:
    """Shards of llm.c's format: the val shard, then train shards."""

    def __init__(self, prefix, shard_tokens, val_tokens, wide):
        self.prefix, self.shard_tokens, self.val_left = prefix, shard_tokens, val_tokens
        self.wide = wide
        self.buf, self.index, self.files, self.total = [], 0 if val_tokens else 1, [], 0
        self.fmt = "<I" if wide else "<H"

    def _limit(self):
        return self.val_left if self.index == 0 else self.shard_tokens

    def add(self, ids):
        while ids:
            room = self._limit() - len(self.buf)
            self.buf.extend(ids[:room])
            ids = ids[room:]
            if len(self.buf) == self._limit():
                self.flush()

    def flush(self):
        if not self.buf:
            return
        kind = "val" if self.index == 0 else "train"
        path = f"{self.prefix}_{kind}_{self.index:06d}.bin"
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        magic, version = (20240801, 7) if self.wide else (20240520, 1)
        header = struct.pack("<256i", magic, version, len(self.buf), *([0] * 253))
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(header)
            f.write(struct.pack(f"<{len(self.buf)}{self.fmt[1]}", *self.buf))
        os.replace(tmp, path)
        self.files.append(path)
        self.total += len(self.buf)
        self.buf = []
        self.index += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json or a directory with one")
    ap.add_argument("--out", required=True, help="PREFIX of the shards")
    ap.add_argument("--shard-tokens", type=int, default=100_000_000)
    ap.add_argument("--val-tokens", type=int, default=0,
                    help="tokens of PREFIX_val_000000.bin (default: none)")
    ap.add_argument("--doc-token", help="the token before each document (default: the "
                    "tokenizer's end-of-text or begin-of-text token)")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    if args.shard_tokens < 1 or args.val_tokens < 0:
        fail("--shard-tokens must be at least 1 and --val-tokens at least 0")
    for f in args.files:
        if not os.path.isfile(f):
            fail(f"{f}: no such file")
    path = tokenizer_path(args.tokenizer)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        fail("prepare_data.py needs PyPI's tokenizers (pip install tokenizers)")
    try:
        tok = Tokenizer.from_file(path)
    except Exception as e:  # the library's own message
        fail(f"{path}: not a tokenizer.json the tokenizers library reads: {e}")
    vocab = tok.get_vocab_size(with_added_tokens=True)
    names = [args.doc_token] if args.doc_token else DOC_TOKENS
    doc = next(((n, tok.token_to_id(n)) for n in names if tok.token_to_id(n) is not None), None)
    if doc is None:
        fail(f"{path}: none of the tokens {', '.join(names)} is in the vocabulary "
             f"(name the one before each document with --doc-token)")
    wide = vocab > 65536
    writer = Writer(args.out, args.shard_tokens, args.val_tokens, wide)
    docs = 0
    start = last = time.time()
    tty = sys.stderr.isatty()
    # Spawned workers, each loading the tokenizer: a forked one could inherit
    # the tokenizers library's threads mid-flight and deadlock.
    context = multiprocessing.get_context("spawn")
    workers = max(1, args.workers)
    with context.Pool(workers, _init, (path,)) as pool:
        # Documents are read here, in this thread (a bad line ends the run
        # with its error), a few chunks per worker at a time.
        pending = chunks(documents(args.files), 64)
        while True:
            round_ = [c for _, c in zip(range(4 * workers), pending)]
            if not round_:
                break
            for encoded in pool.map(_encode, round_):
                for ids in encoded:
                    writer.add([doc[1]] + ids)
                    docs += 1
            now = time.time()
            if now - last > 0.5 and tty:
                tokens = writer.total + len(writer.buf)
                rate = tokens / max(now - start, 1e-9)
                print(f"\r{docs} documents, {tokens} tokens, {rate / 1e6:.2f} M tok/s",
                      end="", file=sys.stderr, flush=True)
                last = now
    writer.flush()
    if tty:
        print(file=sys.stderr)
    seconds = time.time() - start
    fmt = "Llama 3 (uint32)" if wide else "GPT-2 (uint16)"
    print(f"wrote {docs} documents, {writer.total} tokens ({writer.total / max(seconds, 1e-9) / 1e6:.2f} M "
          f"tok/s, {args.workers} workers) into {len(writer.files)} shards of the {fmt} format; "
          f"each document after {doc[0]} (id {doc[1]}); vocabulary {vocab}")
    for f in writer.files:
        print(f"  {f}")


if __name__ == "__main__":
    main()
