"""Makes the torchao float8 references of check_train.py --float8 --reference.

CI's torch (Debian's 1.13) has no torchao, so the float8 curves are made
here, once, under a torch that has it (PyPI torch 2.15 and torchao 0.18 made
the committed ones), and committed next to this script:

    /work/venv-torch/bin/python test/e2e/Inputs/float8/make_refs.py [CASE ...]

Each case is a check_train.py run (its config and arguments, CASES below):
the same tokens and random initial weights (check_train.make_inputs) and the
same PyTorch training loop (check_train.torch_run over torch_models), with
every linear of the transformer blocks (q/k/v/o, gate/up/down) computed by
torchao's float8 linear: torch_models.LINEAR calls Float8Linear.forward
(matmul_with_hp_or_float8_args, the bias added after) of a Float8Linear made
by Float8Linear.from_float with Float8LinearConfig.from_recipe_name(recipe)
and emulate=True, on the reference's own weight tensors
(torch.func.functional_call), as convert_to_float8_training's modules
compute. The embedding and the LM head stay high precision. On a mesh the
reference is one backward per rank's rows, so each rank's activations and
output gradients have scales of their own, the weights the whole weight's,
as torchao under FSDP2 without float8 all-gather computes.

For each case it writes <case>.json (the config, the run's arguments, a
SHA-256 of the tokens and initial weights, each recipe's 20 losses, the
high-precision run's losses and the distances below, for the record) and
<case>.<recipe>.grads.safetensors (the first step's gradients, f32). It
prints, per case, how far apart the curves are, measured as check_train.py
measures shardc's (the worst per-step relative loss difference; the worst
per-tensor relative gradient difference): each recipe from the other and
from the high-precision run. And the noise floor: each recipe retrained K
times (--noise, default 4) with about an f32 ulp of noise in every other
op's f32 result (noisy_in_f32: norms, rotary, SiLU, attention, embedding),
as another implementation's summation order would move them, and how far
each lands from the recipe's curve. Without float8 such noise moves the f32
curve by ~1e-6, as shardc's f32 curve differs from PyTorch's; with float8
an element whose value the noise moves across an e4m3 rounding boundary
changes by an e4m3 step (1/16 to 1/8 of it) and that cascades, so the
noise floor is what a correct implementation can be expected to differ by.
The high-precision run's own noise floor, recorded too, calibrates the
noise: under f32 it is ~1e-6, shardc's distance from PyTorch; under bf16
it is ~1e-3 where shardc's is ~1e-6 (it flips bf16 roundings of ops that
shardc computes in PyTorch's order), an upper estimate there. The
distances and noise floors are recorded in the json.
"""
import argparse
import dataclasses
import json
import os
import sys
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, E2E)
import check_train as ct  # noqa: E402
import torch_models as tm  # noqa: E402

warnings.filterwarnings("ignore")

# case -> (config under test/e2e/Inputs, check_train.py's run arguments).
CASES = {
    "llama": ("llama-tiny.json", ["--lr", "3e-3"]),
    "qwen2": ("qwen2-tiny.json", ["--lr", "3e-3"]),
    # GPT-2: Conv1D weights stored [in, out] (the transposed casts), biases.
    "gpt2": ("gpt2-tiny.json", ["--lr", "3e-3"]),
    "llama-mesh2": ("llama-tiny.json", ["--lr", "3e-3", "--mesh", "2", "--batch", "4"]),
    "llama-bf16": ("llama-tiny.json", ["--lr", "3e-3", "--init-std", "0.3",
                                       "--mixed", "bf16"]),
    # For --tp 2 (one data-parallel rank) and --mesh 2 --tp 2: a Llama whose
    # tp-local features are multiples of 16 (q 32, k and v 16, MLP 64).
    # llama-tp16 was made with --noise 16 (its noise has two branches).
    "llama-tp16": ("llama-tp16.json", ["--lr", "3e-3"]),
    "llama-tp16-mesh2": ("llama-tp16.json", ["--lr", "3e-3", "--mesh", "2", "--batch", "4"]),
}


def float8_linear(recipe):
    """A torch_models.LINEAR: torchao's Float8Linear.forward with the
    recipe's config (emulated), on the given weight and bias."""
    from torchao.float8.config import Float8LinearConfig
    from torchao.float8.float8_linear import Float8Linear
    config = dataclasses.replace(Float8LinearConfig.from_recipe_name(recipe), emulate=True)
    modules = {}

    def linear(t, weight, bias, name, dtype):
        key = (tuple(weight.shape), bias is not None)
        if key not in modules:
            plain = torch.nn.Linear(weight.shape[1], weight.shape[0],
                                    bias=bias is not None, device="meta")
            modules[key] = Float8Linear.from_float(plain, config)
        params = {"weight": weight} if bias is None else {"weight": weight, "bias": bias}
        return torch.func.functional_call(modules[key], params, (t,))
    return linear


def noisy_in_f32(gen):
    """torch_models.in_f32 with each op's f32 result moved by about an f32
    ulp (relative 2^-24 normal noise from gen) before any rounding to the
    compute dtype: the norms, rotary, SiLU, attention and embedding, forward
    and backward, as another implementation's f32 summation order moves
    them."""
    def in_f32(f, dtype):
        def g(*args):
            out = f(*[a.float() if torch.is_tensor(a) and a.is_floating_point() else a
                      for a in args])
            out = out * (1 + 2.0 ** -24 * torch.randn(out.shape, generator=gen))
            return out.to(dtype) if tm.mixed(dtype) else out
        return g
    return in_f32


def curve(args, c, W0, tokens, dtype, linear, noise=None):
    """The losses of args.steps steps and the first step's gradients, with
    torch_models.LINEAR = linear; noise: a torch.Generator for noisy_in_f32."""
    plain = tm.in_f32
    tm.LINEAR = linear
    if noise is not None:
        tm.in_f32 = noisy_in_f32(noise)
    try:
        losses, _, _ = ct.torch_run(args, c, W0, tokens, args.steps, dtype)
        _, grads, _ = ct.torch_run(args, c, W0, tokens, 1, dtype)
    finally:
        tm.LINEAR, tm.in_f32 = None, plain
    return losses, grads


def distances(a, b):
    """a's distance from b as check_train.py measures shardc's from the
    reference: (loss, gradients)."""
    return ct.loss_distance(a[0], b[0]), ct.grad_distance(a[1], b[1])


def make(case, noise):
    config, run_args = CASES[case]
    config_path = os.path.join(E2E, "Inputs", config)
    args = ct.parser().parse_args(["--config", config_path, "--shardc", "-",
                                   "--workdir", "-", *run_args])
    assert args.tp == 1, "torch_models' tp reference has no LINEAR hook"
    tm.ATTENTION_ROUNDING = args.attention
    c = tm.load_config(config_path)
    dtype = torch.bfloat16 if args.mixed == "bf16" else None
    hp_name = args.mixed or "f32"
    tokens, W0 = ct.make_inputs(args, c)

    hp = curve(args, c, W0, tokens, dtype, None)
    hp_noise = [distances(curve(args, c, W0, tokens, dtype, None,
                                torch.Generator().manual_seed(100 + k)), hp)
                for k in range(noise)]
    curves = {r: curve(args, c, W0, tokens, dtype, float8_linear(r))
              for r in ct.FLOAT8_RECIPES}
    record = {}
    print(f"{case}: {config} {' '.join(run_args)}")
    print(f"  {hp_name:10s} loss {hp[0][0]:.4f} -> {hp[0][-1]:.4f}; from it:")
    for k, (dl, dg) in enumerate(hp_noise):
        print(f"    {f'noise {k}':18s} loss {dl:.2e} gradients {dg:.2e}")
    for r, (losses, grads) in curves.items():
        other = next(o for o in ct.FLOAT8_RECIPES if o != r)
        d = {f"{hp_name} reference": distances(hp, curves[r]),
             other: distances(curves[other], curves[r])}
        for k in range(noise):
            d[f"noise {k}"] = distances(curve(args, c, W0, tokens, dtype, float8_linear(r),
                                              torch.Generator().manual_seed(100 + k)),
                                        curves[r])
        print(f"  {r:10s} loss {losses[0]:.4f} -> {losses[-1]:.4f}; from it:")
        for k, (dl, dg) in d.items():
            print(f"    {k:18s} loss {dl:.2e} gradients {dg:.2e}")
        if not sum(losses[-3:]) < sum(losses[:3]):
            sys.exit(f"{case} {r}: the loss does not decrease")
        grads_file = f"{case}.{r}.grads.safetensors"
        tm.write_safetensors(os.path.join(HERE, grads_file), grads)
        record[r] = {"losses": losses, "grads": grads_file,
                     "distances": {k: {"loss": dl, "gradients": dg}
                                   for k, (dl, dg) in d.items() if not k.startswith("noise")}}
        if noise:
            record[r]["noise_floor"] = {
                "runs": noise,
                "loss": [d[f"noise {k}"][0] for k in range(noise)],
                "gradients": [d[f"noise {k}"][1] for k in range(noise)]}

    high_precision = {"dtype": hp_name, "losses": hp[0]}
    if noise:
        high_precision["noise_floor"] = {"runs": noise, "loss": [d[0] for d in hp_noise],
                                         "gradients": [d[1] for d in hp_noise]}
    import numpy
    import torchao
    out = {
        "about": "torchao float8 training references for test/e2e/check_train.py "
                 "--float8 RECIPE --reference; made by make_refs.py (see there)",
        "made_with": {"torch": torch.__version__, "torchao": torchao.__version__,
                      "numpy": numpy.__version__},
        "config_file": os.path.join("..", config),
        "config": c,
        "check_train_args": run_args,
        "args": {k: getattr(args, k) for k in ct.RUN_ARGS},
        "inputs_sha256": ct.inputs_digest(tokens, W0),
        "high_precision": high_precision,
        "recipes": record,
    }
    with open(os.path.join(HERE, f"{case}.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*", metavar="CASE",
                    help=f"of {', '.join(CASES)} (default: all)")
    ap.add_argument("--noise", type=int, default=4, metavar="K",
                    help="the noise floor from K runs with noisy_in_f32 "
                         "(default 4; 0: none)")
    a = ap.parse_args()
    for case in a.cases:
        if case not in CASES:
            ap.error(f"no case {case}; the cases: {', '.join(CASES)}")
    torch.set_default_dtype(torch.float32)
    for case in a.cases or CASES:
        make(case, a.noise)


if __name__ == "__main__":
    main()
