#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora and dictionaries under test/fuzz/
(committed; re-run after changing the input format in test/fuzz/FuzzInput.h):

    tools/fuzz/make_seeds.py [--shardc build/bin/shardc]

The checkpoint target's seeds are checkpoints that trainers compiled by
shardc saved (on 1, 2 and 3 ranks, with mpirun), and its programs the
manifests shardc compiled for them.

Each seed is a valid input of its target: a one-byte mode, then parts
separated by the marker (FuzzInput.h)."""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FUZZ = os.path.join(ROOT, "test", "fuzz")
MARKER = b"\n--part--\n"


def safetensors(tensors, metadata=None):
    """A safetensors file: {name: (dtype, shape, raw bytes)}."""
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def tokens(magic, version, values):
    """An llm.c token shard: 256 int32 of header, then the tokens."""
    fmt = "<%dH" if version == 1 else "<%dI"
    head = struct.pack("<3i", magic, version, len(values)) + b"\0" * (256 * 4 - 12)
    return head + struct.pack(fmt % len(values), *values)


def write(target, name, mode, parts):
    d = os.path.join(FUZZ, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(bytes([mode]) + MARKER.join(parts))


def onnx_seeds():
    """The onnx target's seeds: the models of test/frontends/onnx's
    generators (as a micro-batch of 2, 4 tokens: mode 26) and the
    hand-found hostile models of test/onnx/Inputs/crashers; the external
    data model's location renamed data.bin, its bytes as part 1."""
    import subprocess
    import tempfile
    import onnx
    with tempfile.TemporaryDirectory() as tmp:
        gen = os.path.join(ROOT, "test", "frontends", "onnx")
        subprocess.run(["/usr/bin/python3", os.path.join(gen, "make_models.py"), tmp], check=True)
        subprocess.run(["/usr/bin/python3", os.path.join(gen, "make_hostile.py"),
                        os.path.join(tmp, "h")], check=True)
        for dirpath, _, files in sorted(os.walk(tmp)):
            for name in sorted(files):
                if not name.endswith(".onnx") or name in ("link.onnx", "zero.onnx",
                                                           "fifo.onnx", "dotdot.onnx"):
                    continue
                path = os.path.join(dirpath, name)
                model = onnx.load(path, load_external_data=False)
                parts = [model.SerializeToString()]
                if name == "ok.onnx":
                    for t in model.graph.initializer:
                        for entry in t.external_data:
                            if entry.key == "location":
                                entry.value = "data.bin"
                    parts = [model.SerializeToString()]
                    with open(os.path.join(dirpath, "ok.bin"), "rb") as f:
                        parts.append(f.read())
                write("onnx", name[:-5], 26, parts)
    crashers = os.path.join(ROOT, "test", "onnx", "Inputs", "crashers")
    for name in sorted(os.listdir(crashers)):
        with open(os.path.join(crashers, name), "rb") as f:
            write("onnx", "crasher-" + name[:-5], 26, [f.read()])
    ops = ["Add", "Cast", "Concat", "Constant", "ConstantOfShape", "Div", "Equal", "Expand",
           "Gather", "GatherND", "Gemm", "Identity", "LayerNormalization", "MatMul", "Mul",
           "Range", "Reshape", "Shape", "Slice", "Softmax", "Split", "Sqrt", "Squeeze", "Sub",
           "Transpose", "Unsqueeze", "Where", "Pow", "ReduceMean", "Erf", "Tanh", "Sigmoid"]
    with open(os.path.join(FUZZ, "onnx.dict"), "w") as f:
        for word in ops + ["data.bin", "location", "offset", "length", "axis", "perm",
                           "value", "ai.onnx", "logits"]:
            f.write('"%s"\n' % word)


CHECKPOINT_MODEL = os.path.join(FUZZ, "checkpoint-model")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def manifest_of(shardc, config, ranks, work):
    """The manifest shardc compiles for `config` on `ranks` ranks (the
    shardc_manifest constant of its LLVM IR)."""
    ll = os.path.join(work, "m%d.ll" % ranks)
    subprocess.run([os.path.abspath(shardc), config, "--mesh", str(ranks), "--micro-batch", "1", "--seq-len",
                    "4", "--emit=llvm", "-o", ll], check=True, stdout=subprocess.DEVNULL,
                   cwd=CHECKPOINT_MODEL)
    text = open(ll).read()
    # LLVM writes a byte as \\XX in hex, a backslash as \\\\.
    escape = r"\\(\\|[0-9A-Fa-f]{2})"
    found = re.search(r'@shardc_manifest = [^"]*c"((?:[^"\\]|%s)*)\\00"' % escape, text)
    raw = re.sub(escape, lambda g: "\\" if g.group(1) == "\\" else chr(int(g.group(1), 16)),
                 found.group(1))
    return json.loads(raw)


def checkpoint_seeds(shardc):
    """The checkpoint target's programs (checkpoint-model/mesh-N.json) and
    seeds: the micro GPT-2 trained 2 steps on N = 1, 2, 3 ranks, each
    checkpoint loaded into each mesh's program on its last rank (mode =
    mesh - 1 + 3 * rank); its metadata compacted."""
    config = "config.json"  # named so in the manifests: run in CHECKPOINT_MODEL
    work = tempfile.mkdtemp(prefix="shardc-seeds-")
    try:
        for n in (1, 2, 3):
            with open(os.path.join(CHECKPOINT_MODEL, "mesh-%d.json" % n), "w") as f:
                json.dump(manifest_of(shardc, config, n, work), f, sort_keys=True)
                f.write("\n")
        for n in (1, 2, 3):
            exe, ck = os.path.join(work, "train-%d" % n), os.path.join(work, "ck-%d" % n)
            subprocess.run([os.path.abspath(shardc), config, "--mesh", str(n), "--micro-batch", "1",
                            "--seq-len", "4", "-o", exe], check=True, stdout=subprocess.DEVNULL,
                           cwd=CHECKPOINT_MODEL)
            launch = MPIRUN + ["-np", str(n)] if n > 1 else []
            subprocess.run(launch + [exe, "--steps", "2", "--checkpoint-dir", ck], check=True,
                           stdout=subprocess.DEVNULL)
            step = os.path.join(ck, "step-00000002")
            meta = json.dumps(json.load(open(os.path.join(step, "metadata.json"))),
                              separators=(",", ":"), sort_keys=True).encode()
            shards = [open(os.path.join(step, "shard-%05d-of-%05d.safetensors" % (k, n)),
                           "rb").read() for k in range(n)]
            latest = open(os.path.join(ck, "latest"), "rb").read()
            for into in (1, 2, 3):
                mode = into - 1 + 3 * (into - 1)
                write("checkpoint", "saved-%d-into-%d" % (n, into), mode, [meta, latest] + shards)
    finally:
        shutil.rmtree(work)
    with open(os.path.join(FUZZ, "checkpoint.dict"), "w") as f:
        for word in ['"format"', '"shardc-checkpoint"', '"version"', '"optimizer"', '"adamw"',
                     '"sgd"', '"step"', '"data"', '"tokens_consumed"', '"seq_len"', '"shuffle"',
                     '"file"', '"seed"', '"tensors"', '"files"', '"bytes"', '"dtype"', '"F32"',
                     '"BF16"', '"shape"', '"shards"', '"rows"', '"byte_range"', '"xxh3"',
                     '"step-00000002"', '"shard-00000-of-00002.safetensors"',
                     '"shard-00001-of-00002.safetensors"', '"../"', "[]", "{}", "null", "-1",
                     "9223372036854775807", "18446744073709551615"]:
            f.write('"%s"\n' % word.replace("\\", "\\\\").replace('"', '\\"'))
        f.write('"\\x0a--part--\\x0a"\n')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"),
                        help="the compiler the checkpoint seeds are made with")
    args = parser.parse_args()
    w = ("F32", [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6))
    b = ("BF16", [3], struct.pack("<3H", 0x3f80, 0x4000, 0xbf80))
    h = ("F16", [2], struct.pack("<2H", 0x3c00, 0xc000))
    write("safetensors", "single", 0,
          [safetensors({"w": w, "b": b}, {"format": "pt"})])
    write("safetensors", "single-f16", 0, [safetensors({"h": h})])
    index = json.dumps({"metadata": {"total_size": 30},
                        "weight_map": {"w": "model-00001-of-00002.safetensors",
                                       "b": "model-00002-of-00002.safetensors"}})
    write("safetensors", "index", 1,
          [index.encode(), safetensors({"w": w}), safetensors({"b": b})])
    gpt2 = tokens(20240520, 1, list(range(0, 40, 2)))
    llama = tokens(20240801, 7, list(range(100, 120)))
    vocab = 50 << 2  # mode >> 2 = 50: a vocabulary of 50,001
    write("tokens", "gpt2-list", vocab | 0, [gpt2])
    write("tokens", "llama-file", vocab | 3, [llama])
    write("tokens", "gpt2-directory", vocab | 1, [gpt2, gpt2[:1024] + gpt2[1024:1030]])
    write("tokens", "gpt2-glob", vocab | 2, [gpt2, gpt2, gpt2])
    write("tokens", "small-vocab", 0, [gpt2])
    for name in ("calibration-round.json", "calibration-v2.json"):
        with open(os.path.join(ROOT, "test", "passes", "Inputs", name), "rb") as f:
            write("calibration", name[:-5], 0, [f.read()])
    with open(os.path.join(FUZZ, "calibration.dict"), "w") as f:
        for word in ['"format"', '"shardc-calibration"', '"version"', '"name"', '"threads"',
                     '"memory_bytes"', '"gemm"', '"m"', '"n"', '"k"', '"flops_per_s"',
                     '"attention_flops_per_s"', '"attention_grad_flops_per_s"',
                     '"memory_bytes_per_s"', '"launch_s"', '"collective_latency_s"',
                     '"collective_bytes_per_s"', "1e308", "-0", "4096", "NaN", "[]", "{}"]:
            f.write('"%s"\n' % word.replace("\\", "\\\\").replace('"', '\\"'))
    inputs = os.path.join(ROOT, "test", "e2e", "Inputs")
    for name in ("gpt2-tiny", "gpt2-odd", "gpt2-erf-untied", "gpt2-scale-attn", "llama-tiny",
                 "llama-odd", "llama-bias", "llama3-rope-tf5", "mistral-tiny", "qwen2-tiny"):
        with open(os.path.join(inputs, name + ".json"), "rb") as f:
            write("config", name, 15, [f.read()])  # 16 tokens a sequence
    with open(os.path.join(FUZZ, "config.dict"), "w") as f:
        for word in ['"model_type"', '"gpt2"', '"llama"', '"mistral"', '"qwen2"', '"vocab_size"',
                     '"n_embd"', '"n_layer"', '"n_head"', '"n_inner"', '"n_positions"',
                     '"hidden_size"', '"num_hidden_layers"', '"num_attention_heads"',
                     '"num_key_value_heads"', '"intermediate_size"', '"max_position_embeddings"',
                     '"rope_theta"', '"rope_scaling"', '"rope_type"', '"llama3"', '"factor"',
                     '"tie_word_embeddings"', '"activation_function"', '"gelu_new"',
                     '"hidden_act"', '"silu"', '"rms_norm_eps"', '"layer_norm_epsilon"',
                     '"head_dim"', '"attention_bias"', '"sliding_window"', "true", "false",
                     "null", "0", "-1", "1e308", "2147483648"]:
            f.write('"%s"\n' % word.replace("\\", "\\\\").replace('"', '\\"'))
    onnx_seeds()
    checkpoint_seeds(args.shardc)
    with open(os.path.join(FUZZ, "safetensors.dict"), "w") as f:
        for word in ['"dtype"', '"shape"', '"data_offsets"', '"__metadata__"', '"F32"',
                     '"BF16"', '"F16"', '"F64"', '"I64"', '"weight_map"', '"metadata"',
                     '"total_size"', '"model-00001-of-00002.safetensors"',
                     '"model-00002-of-00002.safetensors"', "[]", "{}", "-1",
                     "18446744073709551615"]:
            f.write('"%s"\n' % word.replace("\\", "\\\\").replace('"', '\\"'))
        f.write('"\\x0a--part--\\x0a"\n')
    with open(os.path.join(FUZZ, "tokens.dict"), "w") as f:
        for value in (20240520, 20240801, 1, 7):
            f.write('"%s"\n' % "".join("\\x%02x" % c for c in struct.pack("<i", value)))
        f.write('"\\xff\\xff\\xff\\x7f"\n"\\xff\\xff"\n"\\x0a--part--\\x0a"\n')


if __name__ == "__main__":
    main()
