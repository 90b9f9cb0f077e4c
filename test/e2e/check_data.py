"""End-to-end: --data as shards, bounded memory, --shuffle, bad data.

Compiles the GPT-2 test config and trains it on token files written here
(torch_models.write_tokens: llm.c's formats), comparing --log curves:
  * shards: one file against the same tokens split in three (cut inside
    batches, so batches cross the boundaries), as a glob, a directory and a
    list: the curves equal bit for bit;
  * resume: a run checkpointed after the step whose batch crosses the
    first shard boundary and resumed equals the uninterrupted run bit for
    bit;
  * --shuffle: one seed twice gives one curve, another seed another, the
    unshuffled one a third; a resumed shuffled run is bit-exact;
  * rss: the trainer's peak resident set with a 1 GB token file and with
    a 1 MB one (os.wait4's ru_maxrss); the difference must be under 64 MB;
  * bad: mixed formats, a glob that matches nothing, a truncated shard and
    a token outside the vocabulary in a shard: one error naming the file.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402
from harness import read_log, run  # noqa: E402

B, T = 4, 16


def tokens_for(n, vocab, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, vocab, size=n)


def train(exe, data, workdir, name, steps, extra=()):
    log = os.path.join(workdir, f"log-{name}.jsonl")
    if os.path.exists(log):
        os.remove(log)
    out = run([exe, "--data", data, "--steps", str(steps), "--log", log, *extra])
    return [(r["step"], r["loss"], r["grad_norm"]) for r in read_log(log)], out


def shards(args, exe, vocab):
    w = args.workdir
    toks = tokens_for(B * T * 12 + 1, vocab)
    one = os.path.join(w, "one.bin")
    tm.write_tokens(one, toks)
    d = os.path.join(w, "shards")
    os.makedirs(d, exist_ok=True)
    cuts = [0, B * T * 2 + 5, B * T * 5 + 17, len(toks)]  # inside batches
    parts = []
    for s in range(3):
        p = os.path.join(d, f"part_train_{s + 1:06d}.bin")
        tm.write_tokens(p, toks[cuts[s]:cuts[s + 1]])
        parts.append(p)
    base, _ = train(exe, one, w, "one", 10)
    for name, spec in (("glob", os.path.join(d, "part_train_*.bin")), ("dir", d),
                       ("list", ",".join(parts))):
        got, out = train(exe, spec, w, name, 10)
        if got != base:
            sys.exit(f"FAIL: --data as {name} differs from the one file:\n{got}\n{base}")
    print(f"one file against three shards (glob, directory, list): 10 steps, "
          f"the same curve bit for bit (loss {base[0][1]:.6f} -> {base[-1][1]:.6f})")
    print([l for l in out.splitlines() if l.startswith("data:")][0].replace(w + "/", ""))
    # Resume across a boundary: 3 steps read tokens 0..192 of the stream (in
    # the second shard, from 133); the resumed run reads on from token 192
    # and crosses into the third shard (at 337) in step 5.
    ck = os.path.join(w, "ckpt")
    spec = os.path.join(d, "part_train_*.bin")
    train(exe, spec, w, "first", 10, ["--checkpoint-dir", ck, "--run-steps", "3"])
    rest, _ = train(exe, spec, w, "rest", 10, ["--checkpoint-dir", ck, "--resume"])
    if not rest or rest[0][0] != 3 or rest != base[3:]:
        sys.exit(f"FAIL: the resumed run differs:\n{rest}\n{base}")
    print("resumed at step 3 (in the second shard), crossing into the third in step 5: "
          "steps 3-9 equal the uninterrupted run's bit for bit")
    # --shuffle.
    a, _ = train(exe, spec, w, "shuffle-a", 10, ["--shuffle=7"])
    b, _ = train(exe, spec, w, "shuffle-b", 10, ["--shuffle=7"])
    c, _ = train(exe, spec, w, "shuffle-c", 10, ["--shuffle=8"])
    if a != b or a == c or a == base:
        sys.exit("FAIL: --shuffle is not a seeded order")
    ck2 = os.path.join(w, "ckpt-shuffle")
    train(exe, spec, w, "shuffle-first", 10, ["--shuffle=7", "--checkpoint-dir", ck2,
                                               "--run-steps", "3"])
    r, _ = train(exe, spec, w, "shuffle-rest", 10, ["--shuffle=7", "--checkpoint-dir", ck2,
                                                     "--resume"])
    if not r or r[0][0] != 3 or r != a[3:]:
        sys.exit("FAIL: the resumed shuffled run differs")
    print(f"--shuffle=7 twice: the same curve; --shuffle=8 and unshuffled: others "
          f"(final losses {a[-1][1]:.6f}, {c[-1][1]:.6f}, {base[-1][1]:.6f}); resumed at "
          f"step 3: bit for bit")
    print("PASS")


MEASURE = """
import os, sys
pid = os.posix_spawn(sys.argv[1], [sys.argv[1], "--data", sys.argv[2], "--steps", "20"],
                     os.environ, file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
_, status, usage = os.wait4(pid, 0)
sys.exit(f"exit status {status}") if status else print(usage.ru_maxrss)
"""


def rss(args, exe, vocab):
    w = args.workdir
    peaks = {}
    for name, n in (("1 MB", 1 << 19), ("1 GB", 1 << 29)):
        path = os.path.join(w, f"tokens-{n}.bin")
        # Written in pieces: the token file, not this script, is large.
        with open(path, "wb") as f:
            header = np.zeros(256, dtype=np.int32)
            header[0], header[1], header[2] = 20240520, 1, n
            f.write(header.tobytes())
            rng = np.random.default_rng(1)
            left = n
            while left:
                k = min(left, 1 << 22)
                f.write(rng.integers(0, vocab, size=k).astype(np.uint16).tobytes())
                left -= k
        # Spawned (no fork of this process, whose pages a forked child's
        # peak would count) from a small interpreter, and waited for with
        # its own resource usage.
        r = subprocess.run([sys.executable, "-c", MEASURE, exe, path], capture_output=True,
                           text=True)
        if r.returncode != 0:
            sys.exit(f"FAIL: the run on {name} failed: {r.stderr}")
        peaks[name] = float(r.stdout.split()[-1]) / 1024  # KiB -> MiB
        os.remove(path)
    diff = peaks["1 GB"] - peaks["1 MB"]
    print(f"peak RSS: {peaks['1 MB']:.1f} MiB with a 1 MB token file, {peaks['1 GB']:.1f} MiB "
          f"with a 1 GB one: difference {diff:.1f} MiB (bound 64)")
    if diff >= 64:
        sys.exit("FAIL")
    print("PASS")


def bad(args, exe, vocab):
    w = args.workdir
    d = os.path.join(w, "bad")
    os.makedirs(d, exist_ok=True)
    toks = tokens_for(2000, vocab)
    cases = []
    mixed = os.path.join(d, "mixed")
    os.makedirs(mixed, exist_ok=True)
    tm.write_tokens(os.path.join(mixed, "a_000001.bin"), toks)
    big = np.concatenate([toks[:10], [70000]])  # an id past 16 bits: uint32 format
    tm.write_tokens(os.path.join(mixed, "a_000002.bin"), big)
    cases.append(("mixed formats", mixed))
    cases.append(("a glob that matches nothing", os.path.join(d, "none_*.bin")))
    trunc = os.path.join(d, "trunc")
    os.makedirs(trunc, exist_ok=True)
    tm.write_tokens(os.path.join(trunc, "t_000001.bin"), toks)
    tm.write_tokens(os.path.join(trunc, "t_000002.bin"), toks)
    with open(os.path.join(trunc, "t_000002.bin"), "r+b") as f:
        f.truncate(1024 + 2 * 1000 + 1)
    cases.append(("a truncated shard", os.path.join(trunc, "t_*.bin")))
    vocab_dir = os.path.join(d, "vocab")
    os.makedirs(vocab_dir, exist_ok=True)
    tm.write_tokens(os.path.join(vocab_dir, "v_000001.bin"), toks[:100])
    outside = toks[:300].copy()
    outside[37] = vocab
    tm.write_tokens(os.path.join(vocab_dir, "v_000002.bin"), outside)
    cases.append(("a token outside the vocabulary", vocab_dir))
    for what, spec in cases:
        r = subprocess.run([exe, "--data", spec, "--steps", "10"], capture_output=True, text=True)
        errors = [l for l in r.stderr.splitlines() if l.startswith("error")]
        print(f"{what}: exit {r.returncode}: {errors[0] if errors else r.stderr.strip()}"
              .replace(w + "/", ""))
        if r.returncode == 0 or len(errors) != 1:
            sys.exit(f"FAIL: {what}: {r.stderr}")
    print("PASS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--check", choices=["shards", "rss", "bad"], required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    exe = os.path.join(args.workdir, "train")
    run([args.shardc, args.config, "--micro-batch", str(B), "--seq-len", str(T), "-o", exe])
    vocab = tm.load_config(args.config)["vocab_size"]
    {"shards": shards, "rss": rss, "bad": bad}[args.check](args, exe, vocab)


if __name__ == "__main__":
    main()
