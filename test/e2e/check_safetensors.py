"""The safetensors reader against the reference implementation.

A seeded campaign of mutants of a real weights file (Inputs/safetensors/
base.safetensors, written by ./train --save-weights: see
make_safetensors_base.sh) is judged by the reference (PyPI safetensors:
safe_open, every tensor read) and read by shardc-weights-check, which
reads a file as ./train --init-from does. shardc must refuse every file
the reference rejects, and never crash or hang.

In CI the reference is absent: the verdicts come from the committed
corpus (Inputs/safetensors/judged.json, written by --judge where the
reference is installed), each case pinned by the SHA-256 of its bytes so
that a changed mutator cannot pass with stale verdicts. Where the
reference is present, every case is judged again and must agree.

--roundtrip (where the reference is installed) writes weights, an HF
export (one file and sharded) and a checkpoint with ./train, and loads
each of their safetensors files in the reference, comparing the values.

--crafted writes the three crafted files of the issue (offsets shifted by
4 bytes, two tensors sharing bytes, bytes after the last tensor) and NaN
and infinity cases, and runs them through ./train --init-from.
"""
import argparse
import copy
import hashlib
import json
import os
import random
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "Inputs", "safetensors")
BASE = os.path.join(INPUTS, "base.safetensors")
CORPUS = os.path.join(INPUTS, "judged.json")

DTYPES = ["F32", "F16", "BF16", "F64", "I64", "I32", "U8", "BOOL", "F8_E4M3", "f32", "Q4", ""]


def split(raw):
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def join(header_text, data, size=None):
    text = header_text.encode() if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(text) if size is None else size) + text + data


def tensors(header):
    return [k for k in header if k != "__metadata__"]


def mutate(raw, rng):
    """One mutant of raw and the name of its mutation."""
    header, data = split(raw)
    h = copy.deepcopy(header)
    names = tensors(h)
    a = rng.choice(names)
    b = rng.choice([n for n in names if n != a])
    op = rng.choice([
        "shift_all", "shift_one", "share", "trailing", "truncate", "header_size",
        "dtype", "shape", "offsets_form", "duplicate", "metadata", "prefix",
        "suffix", "flip_header", "flip_data", "drop", "swap", "huge_header",
        "zero_tensor", "end_before_begin"])
    extra = b""
    if op == "shift_all":
        k = rng.choice([-8, -4, -2, -1, 1, 2, 4, 8])
        for n in names:
            s, e = h[n]["data_offsets"]
            h[n]["data_offsets"] = [max(0, s + k), max(0, e + k)]
        extra = b"\0" * rng.choice([0, abs(k)])
    elif op == "shift_one":
        k = rng.choice([-4, -1, 1, 4, 64])
        s, e = h[a]["data_offsets"]
        h[a]["data_offsets"] = [max(0, s + k), max(0, e + k)]
    elif op == "share":
        h[b]["data_offsets"] = list(h[a]["data_offsets"])
        h[b]["shape"] = list(h[a]["shape"])
        h[b]["dtype"] = h[a]["dtype"]
    elif op == "trailing":
        extra = bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 8, 100])))
    elif op == "truncate":
        k = rng.choice([1, 4, 100, len(data) // 2])
        return join(json.dumps(h), data[:-k]), op
    elif op == "header_size":
        text = json.dumps(h).encode()
        return join(text, data, len(text) + rng.choice([-3, -1, 1, 2, 8, 1 << 20])), op
    elif op == "dtype":
        h[a]["dtype"] = rng.choice(DTYPES)
    elif op == "shape":
        shape = list(h[a]["shape"])
        i = rng.randrange(len(shape)) if shape else 0
        v = rng.choice([0, -1, 1, shape[i] + 1 if shape else 2, 2.0, "4", None, 1 << 62, 1 << 64])
        if shape:
            shape[i] = v
        else:
            shape = [v]
        if rng.random() < 0.3:
            shape = shape + [1]
        h[a]["shape"] = shape
    elif op == "offsets_form":
        s, e = h[a]["data_offsets"]
        h[a]["data_offsets"] = rng.choice([[s], [s, e, e], [float(s), e], [s, float(e)],
                                           [-1, e], [str(s), e], {"0": s, "1": e}, s, None])
    elif op == "duplicate":
        text = json.dumps(h)
        entry = json.dumps({a: h[a]})[1:-1]
        text = text[:-1] + ", " + entry + "}"
        return join(text, data), op
    elif op == "metadata":
        h["__metadata__"] = rng.choice([{"format": 1}, {"format": ["pt"]}, "pt", [1],
                                        {"format": None}, None, {"a": {"b": "c"}}, {}])
    elif op == "prefix":
        return join(rng.choice([" ", "\n", "\t", "x"]) + json.dumps(h), data), op
    elif op == "suffix":
        return join(json.dumps(h) + rng.choice(["x", "}", ",", "\0", "   "]), data), op
    elif op == "flip_header":
        text = bytearray(json.dumps(h).encode())
        for _ in range(rng.choice([1, 2, 3])):
            text[rng.randrange(len(text))] = rng.randrange(256)
        return join(bytes(text), data), op
    elif op == "flip_data":
        d = bytearray(data)
        for _ in range(rng.choice([1, 4, 16])):
            d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
        return join(json.dumps(h), bytes(d)), op
    elif op == "drop":
        del h[a]
    elif op == "swap":
        h[a]["data_offsets"], h[b]["data_offsets"] = h[b]["data_offsets"], h[a]["data_offsets"]
    elif op == "huge_header":
        text = json.dumps(h).encode()
        return struct.pack("<Q", rng.choice([100_000_001, 1 << 40, (1 << 64) - 1])) + text + data, op
    elif op == "zero_tensor":
        s, _ = h[a]["data_offsets"]
        h[a]["shape"] = [0] + list(h[a]["shape"])[1:]
        h[a]["data_offsets"] = [s, s]
    elif op == "end_before_begin":
        s, e = h[a]["data_offsets"]
        h[a]["data_offsets"] = [e, s]
    return join(json.dumps(h), data + extra), op


def reference_verdict(path):
    """'ok' or 'rejected: why', by the reference (None if not installed)."""
    try:
        from safetensors import safe_open
    except ImportError:
        return None
    try:
        with safe_open(path, framework="numpy") as f:
            for k in f.keys():
                f.get_tensor(k)
        return "ok"
    except Exception as e:  # the reference's refusals are exceptions
        return "rejected: " + str(e).splitlines()[0][:80]


def shardc_verdicts(tool, paths):
    out = subprocess.run([tool] + paths, capture_output=True, text=True, errors="replace")
    verdicts = {}
    for line in out.stdout.splitlines():
        path, verdict, why = (line.split("\t") + ["", ""])[:3]
        verdicts[path] = (verdict, why)
    return verdicts


def campaign(args):
    raw = open(BASE, "rb").read()
    os.makedirs(args.workdir, exist_ok=True)
    corpus = None if args.judge else json.load(open(CORPUS))
    seed = args.seed if args.judge else corpus["seed"]
    count = args.cases if args.judge else len(corpus["cases"])
    cases, paths = [], []
    for i in range(count):
        rng = random.Random(seed * 1_000_003 + i)
        data, op = mutate(raw, rng)
        path = os.path.join(args.workdir, f"case-{i:04d}-{op}.safetensors")
        with open(path, "wb") as f:
            f.write(data)
        digest = hashlib.sha256(data).hexdigest()[:16]
        if corpus:
            want = corpus["cases"][i]
            if want["sha256"] != digest or want["op"] != op:
                sys.exit(f"case {i}: the mutator no longer makes the judged file "
                         f"({op} {digest}, judged {want['op']} {want['sha256']}); "
                         f"re-judge with --judge where the reference is installed")
        cases.append({"case": i, "op": op, "sha256": digest})
        paths.append(path)
    live = reference_verdict(paths[0]) is not None
    for c, path in zip(cases, paths):
        verdict = reference_verdict(path) if live else None
        if corpus:
            judged = corpus["cases"][c["case"]]["reference"]
            if verdict is not None and verdict.split(":")[0] != judged.split(":")[0]:
                sys.exit(f"case {c['case']}: the reference now says {verdict}, the corpus {judged}")
            verdict = judged
        c["reference"] = verdict
    if args.judge:
        if not live:
            sys.exit("--judge needs the reference (pip install safetensors numpy)")
        with open(CORPUS, "w") as f:
            json.dump({"seed": seed, "base_sha256": hashlib.sha256(raw).hexdigest(),
                       "reference": "safetensors (PyPI), safe_open + get_tensor of every tensor",
                       "cases": cases}, f, indent=0)
            f.write("\n")
    got = shardc_verdicts(args.tool, paths)
    rejected = [c for c, p in zip(cases, paths) if c["reference"] != "ok"]
    accepted = [c for c, p in zip(cases, paths) if c["reference"] == "ok"]
    by_path = dict(zip([c["case"] for c in cases], paths))
    refused = [c for c in rejected if got[by_path[c["case"]]][0] == "refused"]
    loaded = [c for c in rejected if got[by_path[c["case"]]][0] == "ok"]
    crashes = [p for p in paths if got.get(p, ("crash",))[0] == "crash"]
    hangs = [p for p in paths if got.get(p, ("",))[0] == "hang"]
    over = [c for c in accepted if got[by_path[c["case"]]][0] == "refused"]
    nonfinite = [c for c in over if "non-finite" in got[by_path[c["case"]]][1]]
    unclear = [p for p in paths if got[p][0] == "refused" and not got[p][1].startswith(p + ": ")]
    print(f"{len(cases)} mutants of base.safetensors (seed {seed}; reference "
          f"{'judged live' if live else 'from the committed corpus'}): "
          f"{len(rejected)} rejected by the reference, {len(refused)} of them refused by shardc; "
          f"{len(loaded)} loaded but rejected; {len(crashes)} crashes; {len(hangs)} hangs")
    print(f"{len(accepted)} accepted by the reference: {len(accepted) - len(over)} loaded by "
          f"shardc, {len(over)} refused ({len(nonfinite)} for non-finite values)")
    for c in loaded[:50]:
        print(f"LOADED BUT REJECTED: {by_path[c['case']]} ({c['reference']})")
    for p in (crashes + hangs)[:10]:
        print(f"CRASH OR HANG: {p}: {got[p]}")
    for p in unclear[:10]:
        print(f"UNCLEAR: {p}: {got[p][1]}")
    if loaded or crashes or hangs or unclear:
        sys.exit("FAIL")
    print("PASS")


def random_tokens(workdir):
    """llm.c's token file (256 int32 of header, then uint16 tokens) of
    seeded random tokens of the GPT-2 test config's vocabulary."""
    path = os.path.join(workdir, "tokens.bin")
    rng = random.Random(0)
    tokens = [rng.randrange(97) for _ in range(4096)]
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))
    return path


def crafted(args):
    """The issue's crafted files and the non-finite cases, through ./train."""
    header, data = split(open(BASE, "rb").read())
    os.makedirs(args.workdir, exist_ok=True)
    args.data = args.data or random_tokens(args.workdir)
    names = tensors(header)
    files = {}
    h = copy.deepcopy(header)
    for n in names:
        s, e = h[n]["data_offsets"]
        h[n]["data_offsets"] = [s + 4, e + 4]
    files["shifted"] = join(json.dumps(h), data + b"\0" * 4)
    h = copy.deepcopy(header)
    by_shape = {}
    for n in names:
        by_shape.setdefault((h[n]["dtype"], tuple(h[n]["shape"])), []).append(n)
    a, b = next(v for v in by_shape.values() if len(v) > 1)[:2]
    h[b]["data_offsets"] = list(h[a]["data_offsets"])
    files["shared"] = join(json.dumps(h), data)
    files["trailing"] = join(json.dumps(header), data + b"\0" * 16)
    victim = max(names, key=lambda n: header[n]["data_offsets"][1] - header[n]["data_offsets"][0])
    s = header[victim]["data_offsets"][0]
    for name, values in (("nan", [float("nan")]), ("inf", [float("inf"), float("-inf"), float("nan")])):
        d = bytearray(data)
        for k, v in enumerate(values):
            d[s + 8 * k:s + 8 * k + 4] = struct.pack("<f", v)
        files[name] = join(json.dumps(header), bytes(d))
    for name, content in files.items():
        path = os.path.join(args.workdir, name + ".safetensors")
        with open(path, "wb") as f:
            f.write(content)
        verdict = reference_verdict(path)
        for flags in ([], ["--allow-nonfinite-init"]) if name in ("nan", "inf") else ([],):
            r = subprocess.run([args.train, "--data", args.data, "--steps", "0",
                                "--init-from", path] + flags, capture_output=True, text=True)
            errors = [l for l in r.stderr.splitlines() if l.startswith("error")]
            what = f"exit {r.returncode}: " + (errors[0] if errors else "loaded")
            print(f"{name}{' ' + flags[0] if flags else ''}: {what}"
                  + (f" [reference: {verdict}]" if verdict else ""))
            if (r.returncode == 0) != bool(flags) or (r.returncode != 0 and len(errors) != 1):
                sys.exit(f"FAIL: {name} {flags}: {r.stderr}")
    print("PASS")


def roundtrip(args):
    """Every safetensors file the trainer writes loads in the reference, with
    the values shardc wrote (read back by an independent parse here)."""
    try:
        from safetensors import safe_open
    except ImportError:
        sys.exit("the reference (PyPI safetensors) is not installed")
    import numpy as np
    os.makedirs(args.workdir, exist_ok=True)
    w = args.workdir
    args.data = args.data or random_tokens(w)
    run = lambda cmd: subprocess.run(cmd, check=True, capture_output=True, text=True)
    run([args.train, "--data", args.data, "--steps", "2",
         "--save-weights", f"{w}/weights.safetensors",
         "--export-hf", f"{w}/hf", "--checkpoint-dir", f"{w}/ckpt"])
    run([args.train, "--data", args.data, "--steps", "1",
         "--export-hf", f"{w}/hf-sharded", "--max-shard-size", "20KB"])
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(w) for f in fs
                   if f.endswith(".safetensors"))
    tensors_read = 0
    for path in files:
        raw = open(path, "rb").read()
        header, data = split(raw)
        with safe_open(path, framework="numpy") as f:
            keys = list(f.keys())
            for k in keys:
                got = f.get_tensor(k)
                s, e = header[k]["data_offsets"]
                mine = np.frombuffer(data[s:e], dtype=np.float32).reshape(header[k]["shape"])
                if got.dtype != np.float32 or not np.array_equal(got, mine, equal_nan=True):
                    sys.exit(f"FAIL: {path}: tensor {k} differs in the reference")
                tensors_read += 1
        print(f"ok {os.path.relpath(path, w)}: {len(keys)} tensors")
    kinds = sorted({os.path.relpath(p, w).split(os.sep)[0] for p in files})
    print(f"{len(files)} files ({', '.join(kinds)}), {tensors_read} tensors: all load in the reference")
    print("PASS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--tool", default="shardc-weights-check")
    ap.add_argument("--judge", action="store_true",
                    help="judge a new corpus with the reference and write it")
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--cases", type=int, default=1500)
    ap.add_argument("--crafted", action="store_true")
    ap.add_argument("--roundtrip", action="store_true",
                    help="every file ./train writes loads in the reference")
    ap.add_argument("--train", help="--crafted: a ./train of the base's model")
    ap.add_argument("--data", help="--crafted, --roundtrip: its tokens (default: "
                                   "random tokens of the GPT-2 test config)")
    args = ap.parse_args()
    if args.crafted:
        crafted(args)
    elif args.roundtrip:
        roundtrip(args)
    else:
        campaign(args)


if __name__ == "__main__":
    main()
