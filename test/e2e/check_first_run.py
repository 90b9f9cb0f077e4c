#!/usr/bin/env python3
"""The README's first command, as written there, learns and meets its plan.

Reads README.md's first command (the line `tools/setup.sh && build/bin/shardc
...`), runs its shardc and ./train parts in a scratch directory with the
repository's data/ (set-up is the test's own build), and checks what the
README promises of it:
- the printed training loss falls by at least 0.5 from step 0 to the last
  printed step, and the validation loss after the last step is below the
  corpus's own byte entropy (unigram, from data/first_run.txt): the model
  learned more than the byte frequencies;
- the memory line: the planned regions' resident bytes within 5% of the plan,
  and the runtime's own the rest of the measured peak;
- the --log has a line per step with mem_mib and planned_mib;
- data/make_first_run.py remakes the committed token files byte for byte.
"""
import argparse
import collections
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile


def first_command(readme):
    for line in open(readme):
        s = line.strip()
        if s.startswith("tools/setup.sh && build/bin/shardc"):
            return s
    sys.exit(f"FAIL: {readme} has no line 'tools/setup.sh && build/bin/shardc ...'")


def unigram_entropy(path):
    data = open(path, "rb").read()
    counts = collections.Counter(data)
    return -sum(c / len(data) * math.log(c / len(data)) for c in counts.values())


def check_tokens(root, work):
    # The generator on a copy of the text; its outputs against the committed.
    copy = os.path.join(work, "data")
    os.makedirs(copy)
    for f in ["first_run.txt", "make_first_run.py"]:
        shutil.copy(os.path.join(root, "data", f), copy)
    subprocess.run([sys.executable, os.path.join(copy, "make_first_run.py")],
                   check=True, capture_output=True)
    for f in ["first_run_train.bin", "first_run_val.bin"]:
        a = open(os.path.join(copy, f), "rb").read()
        b = open(os.path.join(root, "data", f), "rb").read()
        if a != b:
            sys.exit(f"FAIL: data/{f} is not what data/make_first_run.py makes")
    print("data: make_first_run.py remakes both token files")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True, help="the repository")
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    cmd = first_command(os.path.join(a.root, "README.md"))
    print(f"README: {cmd}")
    parts = [p.strip() for p in cmd.split("&&")]
    compile_args = shlex.split(parts[1])[1:]
    train_args = shlex.split(parts[2])[1:]
    exe = os.path.join(a.workdir, "train")
    compile_args = [x if x != "train" else exe for x in compile_args]
    subprocess.run([a.shardc, *compile_args], check=True, cwd=a.root,
                   capture_output=True)
    # Paths in the command are the repository's; its --log goes to workdir.
    if "--log" in train_args:
        i = train_args.index("--log")
        train_args[i + 1] = os.path.join(a.workdir, os.path.basename(train_args[i + 1]))
        log = train_args[i + 1]
    else:
        log = os.path.join(a.workdir, "log.jsonl")
        train_args += ["--log", log]
    out = subprocess.run([exe, *train_args], cwd=a.root, capture_output=True,
                         text=True)
    if out.returncode != 0:
        sys.exit(f"FAIL: ./train exited {out.returncode}:\n{out.stderr}")
    losses = [(int(s), float(l)) for s, l in
              re.findall(r"^step +(\d+)/\d+ \| loss ([0-9.]+)", out.stdout, re.M)]
    first, last = losses[0], losses[-1]
    fell = first[1] - last[1]
    print(f"loss: step {first[0]} {first[1]:.3f}, step {last[0]} {last[1]:.3f}: fell {fell:.3f}")
    if fell < 0.5:
        sys.exit("FAIL: the loss fell by less than 0.5")
    val = float(re.search(r"val_loss ([0-9.]+) \(after the last step\)", out.stdout).group(1))
    h = unigram_entropy(os.path.join(a.root, "data", "first_run.txt"))
    print(f"val_loss after the last step {val:.3f}, below the bytes' unigram entropy {h:.3f}")
    if not val < h:
        sys.exit("FAIL: the validation loss is not below the unigram entropy")
    m = re.search(r"memory: planned peak (\d+) bytes, measured peak (\d+) bytes "
                  r"\(resident set growth of rank 0\): the planned regions (\d+) bytes "
                  r"\([-+0-9.]+% of the plan\), the runtime's own (-?\d+) bytes", out.stdout)
    if not m:
        sys.exit("FAIL: no memory line with the planned regions:\n" + out.stdout[-600:])
    plan, peak, regions, own = (int(x) for x in m.groups())
    rel = (regions - plan) / plan
    print(f"memory: the planned regions {rel:+.1%} of the plan; measured peak "
          f"= regions + the runtime's own: {peak == regions + own}")
    if abs(rel) > 0.05 or peak != regions + own:
        sys.exit("FAIL: the planned regions are not within 5% of the plan")
    records = [json.loads(l) for l in open(log)]
    steps = [r for r in records if "loss" in r]
    if not steps or any(r["mem_mib"] is None or r["planned_mib"] <= 0 for r in steps):
        sys.exit("FAIL: --log lines lack mem_mib or planned_mib")
    print(f"log: {len(steps)} steps with mem_mib and planned_mib")
    check_tokens(a.root, a.workdir)
    print("PASS")


if __name__ == "__main__":
    main()
