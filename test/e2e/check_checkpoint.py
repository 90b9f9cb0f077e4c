"""End-to-end: training checkpoints (--checkpoint-dir, --resume).

Modes:
  exact   on each --meshes: 20 steps straight, and 10 + resume 10; the logs
          (step, loss, lr, grad_norm) and the final weights are
          bit-identical; --keep and `latest` behave.
  cross   a checkpoint written on one mesh resumes on another (pairs in
          --pairs, e.g. 4:2x2, or 2+tp2:4 for --mesh 2 --tp 2 to --mesh 4);
          the resumed curve is within --rtol of the uninterrupted run on
          the writing mesh.
  kill    kill -9 at seeded random points during saves, repeated; every time
          the last published checkpoint loads, and the run finally continued
          to the end equals the uninterrupted one, bit for bit.
  errors  another model, another precision, a missing, truncated or corrupt
          shard, no checkpoint: one-line errors naming the file.

The uninterrupted runs are the reference: they never write or read a
checkpoint, so nothing in the comparison comes from the code under test.
"""
import argparse
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402
from harness import MPIRUN, run  # noqa: E402

G, T = 4, 16


def layout(mesh):
    """A mesh as the tests name it: "2x2", or with tensor parallelism
    "2+tp2" (--mesh 2 --tp 2) and "1+tp2" (--tp 2): (mesh, tp)."""
    base, _, tp = mesh.partition("+tp")
    return base, int(tp or 1)


def ranks(mesh):
    base, tp = layout(mesh)
    return math.prod(int(x) for x in base.split("x")) * tp


def data_ranks(mesh):
    """The ranks that read different rows: the tp ranks of a group share them."""
    return ranks(mesh) // layout(mesh)[1]


def log_lines(path):
    """The deterministic fields of each line of a --log file, by step."""
    out = {}
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            out[e["step"]] = (e["loss"], e["lr"], e["grad_norm"])
    return out


class Setup:
    def __init__(self, args):
        self.args = args
        self.work = args.workdir
        os.makedirs(self.work, exist_ok=True)
        c = tm.load_config(args.config)
        rng = np.random.default_rng(0)
        self.tokens = os.path.join(self.work, "tokens.bin")
        tm.write_tokens(self.tokens, rng.integers(0, c["vocab_size"], size=G * T * 64 + 1))
        self.exes = {}

    def exe(self, mesh, extra=()):
        key = (mesh, tuple(extra))
        if key not in self.exes:
            name = f"train-{mesh}" + "".join(f"-{e.strip('-')}" for e in extra)
            exe = os.path.join(self.work, name)
            base, tp = layout(mesh)
            run([self.args.shardc, self.args.config, "--mesh", base,
                 *(["--tp", str(tp)] if tp > 1 else []), "--micro-batch",
                 str(G // data_ranks(mesh)), "--seq-len", str(T), *self.args.flags.split(),
                 *extra, "-o", exe])
            self.exes[key] = exe
        return self.exes[key]

    def cmd(self, mesh, exe, *flags):
        base = [exe, "--data", self.tokens, "--seed", "5", "--lr", "3e-3",
                "--lr-schedule", "cosine", "--warmup-steps", "3", "--clip-grad-norm", "1.0"]
        n = ranks(mesh)
        return (MPIRUN + ["-np", str(n)] if n > 1 else []) + base + list(flags)

    def train(self, mesh, *flags, extra=()):
        return run(self.cmd(mesh, self.exe(mesh, extra), *flags))


def exact(s, args):
    for mesh in args.meshes.split(","):
        d = os.path.join(s.work, f"exact-{mesh}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        straight, resumed = os.path.join(d, "straight.jsonl"), os.path.join(d, "resumed.jsonl")
        w0, w1 = os.path.join(d, "w-straight.safetensors"), os.path.join(d, "w-resumed.safetensors")
        ck = os.path.join(d, "ck")
        s.train(mesh, "--steps", "20", "--log", straight, "--save-weights", w0)
        s.train(mesh, "--steps", "20", "--run-steps", "10", "--log", resumed,
                "--checkpoint-dir", ck, "--checkpoint-every", "3", "--keep", "2")
        kept = sorted(x for x in os.listdir(ck) if x.startswith("step-"))
        latest = open(os.path.join(ck, "latest")).read().strip()
        # Saved after steps 3, 6, 9 and the last (10); --keep 2 keeps 9, 10.
        if kept != ["step-00000009", "step-00000010"] or latest != "step-00000010":
            sys.exit(f"mesh {mesh}: after --keep 2: {kept}, latest {latest}")
        out = s.train(mesh, "--steps", "20", "--log", resumed, "--checkpoint-dir", ck,
                      "--resume", "--save-weights", w1)
        if "resumed from" not in out:
            sys.exit(f"mesh {mesh}: the resumed run did not say it resumed:\n{out}")
        a, b = log_lines(straight), log_lines(resumed)
        if sorted(a) != list(range(20)) or a != b:
            diff = [k for k in range(20) if a.get(k) != b.get(k)]
            sys.exit(f"mesh {mesh}: resumed log differs from the straight one at steps {diff}")
        same = open(w0, "rb").read() == open(w1, "rb").read()
        if not same:
            sys.exit(f"mesh {mesh}: final weights differ")
        print(f"exact mesh {mesh:>4}: 20 steps straight == 10 + resume 10: "
              f"20 log lines and the final weights bit-identical")
    print("PASS")


def cross(s, args):
    for pair in args.pairs.split(","):
        src, dst = pair.split(":")
        src_extra = args.src_flags.split() if args.src_flags else []
        dst_extra = args.dst_flags.split() if args.dst_flags else []
        d = os.path.join(s.work, f"cross-{src}-{dst}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        ref = os.path.join(d, "ref.jsonl")
        s.train(src, "--steps", "20", "--log", ref, extra=src_extra)
        ck = os.path.join(d, "ck")
        s.train(src, "--steps", "20", "--run-steps", "10", "--checkpoint-dir", ck,
                extra=src_extra)
        got = os.path.join(d, "resumed.jsonl")
        s.train(dst, "--steps", "20", "--log", got, "--resume=" + ck, extra=dst_extra)
        a, b = log_lines(ref), log_lines(got)
        worst = 0.0
        for k in range(10, 20):
            for x, y in zip(a[k], b[k]):
                worst = max(worst, abs(x - y) / max(abs(x), 1e-12))
        if sorted(b) != list(range(10, 20)):
            sys.exit(f"{src} -> {dst}: resumed log has steps {sorted(b)}")
        print(f"cross {src:>4} -> {dst:<4}: steps 10-19 max relative difference "
              f"{worst:.2e} (loss, lr, grad norm)")
        if worst > args.rtol:
            sys.exit(f"{src} -> {dst}: {worst:.2e} exceeds {args.rtol}")
    print("PASS")


def kill(s, args):
    mesh = args.meshes.split(",")[0]
    d = os.path.join(s.work, f"kill-{mesh}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    steps = 100
    ref = os.path.join(d, "ref.jsonl")
    wref = os.path.join(d, "w-ref.safetensors")
    s.train(mesh, "--steps", str(steps), "--log", ref, "--save-weights", wref)
    ck, log = os.path.join(d, "ck"), os.path.join(d, "run.jsonl")
    rng = random.Random(args.seed)
    flags = ["--steps", str(steps), "--log", log, "--checkpoint-dir", ck,
             "--checkpoint-every", "1", "--keep", "3", "--resume=auto"]
    cmd = s.cmd(mesh, s.exe(mesh), *flags)
    mid_save = trials = 0
    published = []
    while mid_save < args.kills and trials < 4 * args.kills:
        trials += 1
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        # Wait for the n-th save of this run to begin, then kill at a random
        # point within it (or, past its end, in the step after it).
        n, seen = rng.randint(1, 3), set()
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None and len(seen) < n:
            if os.path.isdir(ck):
                seen.update(x for x in os.listdir(ck) if x.startswith(".tmp-step"))
            time.sleep(0.0002)
        time.sleep(rng.uniform(0, args.max_delay))
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()
        # The whole job dies, as on a node failure: ranks that mpirun had
        # started outside its process group are killed too, and the next
        # trial starts only when none is left (an orphan still writing the
        # log or the checkpoint would be another writer, which a run never
        # has).
        exe = s.exe(mesh)
        deadline = time.time() + 30
        while time.time() < deadline:
            out = subprocess.run(["pgrep", "-f", exe + " --data"], capture_output=True,
                                 text=True).stdout.split()
            if not out:
                break
            for pid in out:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        if os.path.isdir(ck) and any(x.startswith(".tmp-step") for x in os.listdir(ck)):
            mid_save += 1
        latest = open(os.path.join(ck, "latest")).read().strip() if os.path.exists(
            os.path.join(ck, "latest")) else None
        published.append(latest)
        if latest and int(latest.split("-")[1]) >= steps - 2:
            break  # too close to the end to go on killing
    # The last published checkpoint loads (checksums included), and the run
    # continued from it ends exactly where the uninterrupted run did.
    w = os.path.join(d, "w-resumed.safetensors")
    out = run(s.cmd(mesh, s.exe(mesh), *flags, "--save-weights", w))
    a, b = log_lines(ref), log_lines(log)
    if a != b:
        diff = [k for k in range(steps) if a.get(k) != b.get(k)]
        sys.exit(f"after the kills, the log differs from the uninterrupted run at steps {diff}")
    if open(w, "rb").read() != open(wref, "rb").read():
        sys.exit("after the kills, the final weights differ from the uninterrupted run")
    print(f"kill mesh {mesh}: {trials} kill -9, {mid_save} of them during a save; "
          f"published checkpoints seen: {', '.join(str(x) for x in published)}")
    print(f"kill mesh {mesh}: resumed to step {steps}: log and final weights bit-identical "
          f"to the uninterrupted run")
    want = args.kills if args.min_mid_save is None else args.min_mid_save
    if mid_save < want:
        sys.exit(f"only {mid_save} kills landed during a save (want {want})")
    print("PASS")


def expect_error(cmd, needle, what):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    err = r.stderr.strip().splitlines()
    msg = err[-1] if err else ""
    if r.returncode == 0 or needle not in msg or "step    0" in r.stdout:
        sys.exit(f"{what}: expected an error with '{needle}' before any step, got rc "
                 f"{r.returncode}:\n{r.stdout}\n{r.stderr}")
    print(f"{what}: {msg}")


def errors(s, args):
    d = os.path.join(s.work, "errors")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    mesh = "1"
    exe = s.exe(mesh)
    ck = os.path.join(d, "ck")
    s.train(mesh, "--steps", "4", "--run-steps", "2", "--checkpoint-dir", ck)
    step = os.path.join(ck, "step-00000002")
    shard = os.path.join(step, "shard-00000-of-00001.safetensors")

    def variant(name, change):
        v = os.path.join(d, name)
        shutil.copytree(ck, v)
        change(os.path.join(v, "step-00000002"))
        return v

    # Another model: the same family, one more layer.
    other = os.path.join(d, "other.json")
    c = tm.load_config(s.args.config)
    c["n_layer"] = c.get("n_layer", 2) + 1
    json.dump(c, open(other, "w"))
    other_exe = os.path.join(d, "train-other")
    run([s.args.shardc, other, "--micro-batch", str(G), "--seq-len", str(T), "-o", other_exe])
    expect_error([other_exe, "--steps", "4", "--resume=" + ck], "another model",
                 "another model")

    def precision(p):
        m = json.load(open(os.path.join(p, "metadata.json")))
        first = next(iter(m["tensors"]))
        m["tensors"][first]["dtype"] = "BF16"
        json.dump(m, open(os.path.join(p, "metadata.json"), "w"))
    expect_error([exe, "--steps", "4", "--resume=" + variant("precision", precision)],
                 "another precision", "another precision")

    expect_error([exe, "--steps", "4", "--resume=" + variant(
        "missing", lambda p: os.remove(os.path.join(p, os.path.basename(shard))))],
        "missing shard file", "missing shard")

    def truncate(p):
        f = os.path.join(p, os.path.basename(shard))
        os.truncate(f, os.path.getsize(f) - 1000)
    expect_error([exe, "--steps", "4", "--resume=" + variant("truncated", truncate)],
                 "truncated", "truncated shard")

    def corrupt(p):
        f = os.path.join(p, os.path.basename(shard))
        with open(f, "r+b") as h:
            h.seek(os.path.getsize(f) // 2)
            b = h.read(1)
            h.seek(-1, 1)
            h.write(bytes([b[0] ^ 0x10]))
    expect_error([exe, "--steps", "4", "--resume=" + variant("corrupt", corrupt)],
                 "checksum mismatch", "corrupt shard")

    def rows_of(p, change):
        """Changes the shard list of the first tensor of two rows or more."""
        m = json.load(open(os.path.join(p, "metadata.json")))
        key = next(k for k, t in m["tensors"].items() if t["shape"] and t["shape"][0] >= 2)
        change(m["tensors"][key])
        json.dump(m, open(os.path.join(p, "metadata.json"), "w"))

    def outside(t):
        t["shards"][0]["rows"][1] += 5

    def overlap(t):
        # Its first half twice: as many rows as it has, the second half none.
        first = t["shards"][0]
        half = t["shape"][0] // 2
        row_bytes = (first["byte_range"][1] - first["byte_range"][0]) // t["shape"][0]
        first["rows"] = [0, half]
        first["byte_range"][1] = first["byte_range"][0] + half * row_bytes
        t["shards"].append(dict(first, rows=[0, t["shape"][0] - half]))
    expect_error([exe, "--steps", "4", "--resume=" + variant(
        "outside", lambda p: rows_of(p, outside))], "not [first, end)", "rows outside")
    expect_error([exe, "--steps", "4", "--resume=" + variant(
        "overlap", lambda p: rows_of(p, overlap))], "overlap", "overlapping shards")

    def float_dim(t):
        # A float where an integer belongs (converting 9.2e20 to int64 was
        # undefined: the checkpoint fuzz target's finding).
        t["shape"][0] = 9.2e20
    expect_error([exe, "--steps", "4", "--resume=" + variant(
        "float", lambda p: rows_of(p, float_dim))], "not an integer", "float shape")

    empty = os.path.join(d, "empty")
    os.makedirs(empty)
    expect_error([exe, "--steps", "4", "--checkpoint-dir", empty, "--resume"],
                 "no checkpoint to resume from", "no checkpoint")
    out = run([exe, "--steps", "1", "--checkpoint-dir", empty, "--resume=auto"])
    if "starting fresh" not in out:
        sys.exit("--resume=auto with no checkpoint did not start fresh:\n" + out)
    print("resume=auto, no checkpoint: " + next(
        line for line in out.splitlines() if "starting fresh" in line))
    # The value as its own argument, as argparse-style CLIs take it (in a
    # directory of its own: the run above saved its step in `empty`).
    empty2 = os.path.join(d, "empty2")
    os.makedirs(empty2)
    out = run([exe, "--steps", "1", "--checkpoint-dir", empty2, "--resume", "auto"])
    if "starting fresh" not in out:
        sys.exit("--resume auto with no checkpoint did not start fresh:\n" + out)
    print("resume auto, no checkpoint: " + next(
        line for line in out.splitlines() if "starting fresh" in line))
    expect_error([exe, "--steps", "1", "--resume=" + ck], "past --steps",
                 "checkpoint past --steps")
    expect_error([exe, "--steps", "1", "--resume", ck], "past --steps",
                 "checkpoint past --steps, --resume DIR")
    print("PASS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["exact", "cross", "kill", "errors"])
    ap.add_argument("--config", required=True)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--meshes", default="1")
    ap.add_argument("--pairs", default="4:2x2")
    ap.add_argument("--flags", default="",
                    help="shardc flags of every build (before --src-flags and "
                         "--dst-flags)")
    ap.add_argument("--src-flags", default="")
    ap.add_argument("--dst-flags", default="")
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--max-delay", type=float, default=0.004)
    ap.add_argument("--min-mid-save", type=int, default=None,
                    help="kills that must land during a save (default --kills)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    s = Setup(args)
    {"exact": exact, "cross": cross, "kill": kill, "errors": errors}[args.mode](s, args)


if __name__ == "__main__":
    main()
