#!/usr/bin/env python3
"""Tokenizes data/first_run.txt, byte by byte, into the llm.c token files the
README's first command trains on.

The corpus is project-written English: shardc's README as it stood at commit
770dfd2 (101,751 bytes). Each byte is one token (0..255), which the `tiny`
preset's GPT-2 vocabulary holds, so no tokenizer (and no network) is needed.
The last tenth is the validation split:

    first_run_train.bin  the first 90% of the bytes
    first_run_val.bin    the last 10%

Both in GPT-2's llm.c format: a header of 256 int32 (magic 20240520,
version 1, token count), then the tokens as uint16. Re-run after editing the
text: python3 data/make_first_run.py
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def write_tokens(path, tokens):
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))


def main():
    with open(os.path.join(HERE, "first_run.txt"), "rb") as f:
        data = f.read()
    split = len(data) * 9 // 10
    write_tokens(os.path.join(HERE, "first_run_train.bin"), data[:split])
    write_tokens(os.path.join(HERE, "first_run_val.bin"), data[split:])
    print(f"first_run: {len(data)} bytes: {split} train tokens, "
          f"{len(data) - split} validation tokens")


if __name__ == "__main__":
    sys.exit(main())
