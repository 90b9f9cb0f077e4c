"""Shared pieces of the end-to-end checks: running commands, reading logs."""
import json
import subprocess
import sys

# mpirun as the checks launch it (root in CI, more ranks than cores).
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(cmd, timeout=600):
    """Runs cmd; on failure exits with its output. Returns its stdout."""
    return run_full(cmd, timeout).stdout


def run_full(cmd, timeout=600):
    """Runs cmd; on failure exits with its output. Returns the finished
    process (stdout and stderr)."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r


def read_log(path):
    """The JSON lines an executable wrote with --log."""
    with open(path) as f:
        return [json.loads(line) for line in f]
