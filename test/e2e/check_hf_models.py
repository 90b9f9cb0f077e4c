"""Hugging Face models as transformers 5 and torch 2.x write them train in
shardc as in PyTorch.

The inputs (test/e2e/Inputs/hf, written by tools/make_hf_models.py with
PyPI's torch and transformers; CI uses the committed files) are small GPT-2
and Llama models (tied and untied head, GQA) with every norm weight and bias
perturbed, so that no two parameters are equal, in four forms:
  ts        torch.onnx.export(dynamo=False), opset 17, dynamic batch
  dynamo    torch.onnx.export (dynamo), opset 20, static batch 2
  pretrained  save_pretrained: config.json and model.safetensors
  sharded   save_pretrained(max_shard_size): an index and its shards
and curves.json holds PyTorch's 20-step AdamW loss curves at global batch 2
(one rank) and 8 (a 2x2 mesh) and the names of the parameters it trains.

For each model and form: compiles the file unedited (a pretrained form from
its config.json, its weights read with --init-from), prints the fused ops of
the training step and the decomposed ones left, checks that the tensors
shardc trains are exactly PyTorch's parameters (each trained initial value
equal, bit for bit, to one PyTorch parameter or its transpose, and every
parameter matched once), then trains 20 steps on each mesh and compares every
loss with PyTorch's (relative difference below 1e-4).
"""
import argparse
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
import torch_models as tm  # noqa: E402

FORMS = ["ts", "dynamo", "pretrained", "sharded"]
FUSED = ["attention", "gelu", "layer_norm", "rms_norm", "silu", "rotary", "rotary_table"]
DECOMPOSED = ["batch_matmul", "softmax", "erf", "tanh", "sqrt", "pow", "sub", "div",
              "reciprocal", "sigmoid", "where", "nan_to_zero", "broadcast_to", "neg",
              "concat", "slice"]


def read_safetensors(path):
    """name -> float32 array of a safetensors file (F32 only)."""
    return {n: t.numpy() for n, t in tm.read_safetensors(path).items()}


def op_counts(text, names):
    return {n: len(re.findall(rf"\bnn\.{n}\b", text)) for n in names}


def match_trained(trained, params):
    """Pairs each tensor shardc trains with the PyTorch parameter of equal
    value (or transposed value); returns a list of problems."""
    problems, used = [], set()
    for name, value in trained.items():
        # A folded lookup of a whole table keeps its values with unit
        # dimensions added (the dynamo exporter's wpe(arange(T)) for T equal
        # to n_positions): the same tensor, trained alike.
        value = value.reshape([d for d in value.shape if d != 1] or [1]) \
            if value.ndim > 2 else value
        hits = [p for p, v in params.items()
                if (v.shape == value.shape and np.array_equal(v, value)) or
                (v.ndim == 2 and v.T.shape == value.shape and np.array_equal(v.T, value))]
        if len(hits) != 1:
            problems.append(f"{name} {list(value.shape)} equals {len(hits)} parameters")
        elif hits[0] in used:
            problems.append(f"{name} is a second copy of {hits[0]}")
        else:
            used.add(hits[0])
    problems += [f"{p} {list(params[p].shape)} is not trained"
                 for p in params if p not in used]
    return problems


def report_trained(form, params, problems, how):
    print(f"{form}: trains {'exactly' if not problems else 'NOT'} PyTorch's "
          f"{len(params)} parameters ({how})")
    for p in problems:
        print(f"  {p}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--inputs", required=True, help="test/e2e/Inputs/hf")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--model", required=True, choices=["gpt2", "llama-tied", "llama"])
    ap.add_argument("--forms", default=",".join(FORMS))
    ap.add_argument("--meshes", default="1,2x2")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    with open(os.path.join(args.inputs, "curves.json")) as f:
        curves = json.load(f)
    ref = curves[args.model]
    B, lr, wd = curves["micro_batch"], curves["lr"], curves["weight_decay"]
    steps = len(ref["mesh1"])
    tokens = os.path.join(args.inputs, "tokens.bin")
    # PyTorch's parameters as initialized: save_pretrained's file holds each
    # once (a tied head is the embedding).
    saved = read_safetensors(os.path.join(args.inputs, args.model, "model.safetensors"))
    params = {n: saved[n] for n in ref["trained"] if n in saved}
    if len(params) != len(ref["trained"]):
        sys.exit(f"model.safetensors lacks {set(ref['trained']) - set(params)}")
    print(f"{args.model}: PyTorch trains {len(params)} parameters "
          f"(torch {curves['versions']['torch']}, "
          f"transformers {curves['versions']['transformers']})")

    ok = True
    for form in args.forms.split(","):
        if form in ("ts", "dynamo"):
            source = [os.path.join(args.inputs, f"{args.model}-{form}.onnx")]
            init = []
        else:
            d = os.path.join(args.inputs, args.model + ("-sharded" if form == "sharded" else ""))
            source = [os.path.join(d, "config.json")]
            init = ["--init-from", d]
        step = harness.run([args.shardc] + source + ["--micro-batch", str(B), "--emit=train",
                                                     "-o", "-"])
        fused, left = op_counts(step, FUSED), op_counts(step, DECOMPOSED)
        print(f"{form}: fused ops: " +
              ", ".join(f"{n} {c}" for n, c in fused.items() if c) +
              "; decomposed ops left: " +
              (", ".join(f"{n} {c}" for n, c in left.items() if c) or "none"))
        for mesh in args.meshes.split(","):
            ranks = int(np.prod([int(d) for d in mesh.split("x")]))
            exe = os.path.join(args.workdir, f"{form}_{mesh}")
            r = harness.run_full([args.shardc] + source +
                                 ["--micro-batch", str(B), "--mesh", mesh, "-o", exe])
            if mesh == "1" and not init:
                said = re.search(r"shardc: trains (\d+) initializers", r.stderr)
                weights = read_safetensors(exe + ".weights.safetensors")
                problems = match_trained(weights, params)
                if not said or int(said.group(1)) != len(weights):
                    problems.append("the compile log does not list the trained tensors")
                tied = re.search(r"shardc: tied: (.*)", r.stderr)
                report_trained(form, params, problems, f"{len(weights)} trained initializers" +
                               (f", tied: {tied.group(1)}" if tied else ""))
                ok &= not problems
            log = exe + ".log"
            cmd = [exe, "--data", tokens, "--steps", str(steps), "--lr", str(lr),
                   "--weight-decay", str(wd), "--log", log] + init
            export = exe + ".hf"
            if mesh == "1" and init:  # the trained tensors, by their Hugging Face names
                cmd += ["--export-hf", export]
            harness.run(harness.MPIRUN + ["-np", str(ranks)] + cmd if ranks > 1 else cmd)
            if mesh == "1" and init:
                out = read_safetensors(os.path.join(export, "model.safetensors"))
                problems = [f"{n} {list(v.shape)} is trained, PyTorch has no such parameter"
                            for n, v in out.items()
                            if n not in params or params[n].shape != v.shape]
                problems += [f"{n} is not trained" for n in params if n not in out]
                report_trained(form, params, problems, f"--export-hf writes {len(out)} tensors")
                ok &= not problems
            got = [r["loss"] for r in harness.read_log(log)]
            want = ref["mesh1" if mesh == "1" else "mesh" + mesh]
            worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
            print(f"{form}: mesh {mesh:>3}: {len(got)} steps, loss {got[0]:.5f} -> "
                  f"{got[-1]:.5f} (PyTorch {want[0]:.5f} -> {want[-1]:.5f}), worst "
                  f"relative difference {worst:.2e}")
            ok &= len(got) == steps and worst < 1e-4
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
