#!/usr/bin/env python3
"""Plots one or more trainer --log files side by side.

usage: tools/plot.py LOG.jsonl [LOG.jsonl ...] -o FILE.png [--title TEXT]

Each --log file is JSON lines, one per step (runtime/trainer/step_log.cpp:
step, loss, lr, grad_norm, ms, tok_per_s, tflops, mfu, mem_mib,
planned_mib, val_loss where evaluated; a last {step, val_loss} line after the
run). The figure has a panel per quantity: the loss (val_loss dashed, same
colour), tokens a second, the gradient norm and the learning rate; and memory
where a log has it (`mem_mib` measured, `planned_mib` dashed). One line per log, labelled by its file name. A line that is
not JSON, or a log with no step, is an error naming the file and line.
"""
import argparse
import json
import os
import sys


def read_log(path):
  """The log's records, each a dict; exits naming the file and line on a
  malformed one."""
  records = []
  try:
    with open(path, encoding="utf-8") as f:
      for n, line in enumerate(f, 1):
        line = line.strip()
        if not line:
          continue
        try:
          r = json.loads(line)
        except json.JSONDecodeError as e:
          sys.exit(f"plot.py: {path}:{n}: not a JSON line: {e.msg}")
        if not isinstance(r, dict) or "step" not in r:
          sys.exit(f"plot.py: {path}:{n}: not a --log line (it has no 'step')")
        records.append(r)
  except OSError as e:
    sys.exit(f"plot.py: {path}: {e.strerror}")
  if not records:
    sys.exit(f"plot.py: {path}: no steps")
  return records


def series(records, key):
  """(steps, values) of the records that have a finite number for key."""
  xs, ys = [], []
  for r in records:
    v = r.get(key)
    if isinstance(v, (int, float)) and v == v and abs(v) != float("inf"):
      xs.append(r["step"])
      ys.append(v)
  return xs, ys


PANELS = [  # (key, title, extra key drawn dashed in the same panel)
    ("loss", "loss (val_loss dashed)", "val_loss"),
    ("tok_per_s", "tokens / s", None),
    ("grad_norm", "gradient norm", None),
    ("lr", "learning rate", None),
    ("mem_mib", "memory, MiB (planned dashed)", "planned_mib"),
]


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("logs", nargs="+", help="--log files (JSON lines)")
  ap.add_argument("-o", "--output", required=True, help="the PNG to write")
  ap.add_argument("--title", default="")
  a = ap.parse_args()
  try:
    import matplotlib
  except ImportError:
    sys.exit("plot.py: needs matplotlib (Debian: apt-get install python3-matplotlib)")
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  logs = [(os.path.basename(p), read_log(p)) for p in a.logs]
  panels = [p for p in PANELS
            if any(series(recs, p[0])[0] or (p[2] and series(recs, p[2])[0])
                   for _, recs in logs)]
  fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6),
                           squeeze=False)
  for ax, (key, title, extra) in zip(axes[0], panels):
    for k, (name, recs) in enumerate(logs):
      color = f"C{k}"
      xs, ys = series(recs, key)
      if xs:
        ax.plot(xs, ys, color=color, label=name)
      if extra:
        xs, ys = series(recs, extra)
        if xs:
          ax.plot(xs, ys, color=color, linestyle="--", marker=".",
                  label=f"{name} ({extra})")
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
  axes[0][0].legend(fontsize=8)
  if a.title:
    fig.suptitle(a.title)
  fig.tight_layout()
  fig.savefig(a.output, dpi=110)
  print(f"plot.py: {a.output}: {len(logs)} logs, panels: "
        + ", ".join(k for k, _, _ in panels))


if __name__ == "__main__":
  main()
