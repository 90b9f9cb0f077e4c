#!/usr/bin/env python3
"""Checkpoint cost against training steps: gpt2-124m on 1 and 2 ranks.

For each rank count, compiles gpt2-124m (--micro-batch, --seq-len per rank),
trains --steps steps with a checkpoint after every step (parameters and
AdamW state, f32), then resumes from the last but one. Prints the save and
load time, MB/s per writing (reading) rank, the median step time of the
same run, and the save's cost in steps: the goal is below 2.

The figures come from the trainer's own lines ("checkpoint: saved ... in X
s", "resumed ... in X s", "| N ms |"); the checkpoint's size is read from
the disk, and the file system is the one under --workdir (fsync included).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def du(path):
    return sum(os.path.getsize(os.path.join(d, f))
               for d, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", default=os.path.join(os.path.dirname(__file__),
                                                     "../../build/bin/shardc"))
    ap.add_argument("--model", default="gpt2-124m")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--micro-batch", default="1")
    ap.add_argument("--seq-len", default="256")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="shardc-ckpt-bench-")
    os.makedirs(work, exist_ok=True)
    rows = []
    for n in [int(x) for x in args.ranks.split(",")]:
        exe = os.path.join(work, f"train-{n}")
        mesh = ["--mesh", str(n)] if n > 1 else []
        run([args.shardc, args.model, *mesh, "--micro-batch", args.micro_batch,
             "--seq-len", args.seq_len, "-o", exe])
        ck = os.path.join(work, f"ck-{n}")
        shutil.rmtree(ck, ignore_errors=True)
        launch = (MPIRUN + ["-np", str(n)]) if n > 1 else []
        out = run(launch + [exe, "--steps", str(args.steps), "--checkpoint-dir", ck,
                            "--checkpoint-every", "1", "--keep", "2"])
        steps = [float(m) for m in re.findall(r"\|\s+([0-9.]+) ms \|", out)]
        saves = [float(m) for m in re.findall(r"saved step \d+ to .*? in ([0-9.]+) s", out)]
        size = du(os.path.join(ck, f"step-{args.steps:08d}"))
        # Resume from the last but one: loads, runs one step.
        prev = os.path.join(ck, f"step-{args.steps - 1:08d}")
        out2 = run(launch + [exe, "--steps", str(args.steps), "--resume=" + prev])
        load = float(re.search(r"resumed from .* in ([0-9.]+) s", out2).group(1))
        step = statistics.median(steps[1:] or steps)
        save = statistics.median(saves)
        rows.append((n, size / 1e6, save, size / 1e6 / save / n, load,
                     size / 1e6 / load / n, step * 1e-3, save / (step * 1e-3)))
    print(f"{args.model}, micro-batch {args.micro_batch} x {args.seq_len} tokens per rank, "
          f"AdamW, f32; checkpoint = parameters + optimizer state")
    print(f"{'ranks':>5} {'MB':>8} {'save s':>8} {'MB/s/rank':>10} {'load s':>8} "
          f"{'MB/s/rank':>10} {'step s':>8} {'save/step':>10}")
    for r in rows:
        print(f"{r[0]:>5} {r[1]:>8.1f} {r[2]:>8.3f} {r[3]:>10.1f} {r[4]:>8.3f} "
              f"{r[5]:>10.1f} {r[6]:>8.3f} {r[7]:>10.2f}")
    if not args.workdir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
