"""End-to-end: a rank killed or stopped mid-step takes the job down.

Starts a --mesh run under mpirun, waits until it is stepping, sends one
rank (not rank 0) --signal (KILL: it dies; STOP: it hangs, and the others
wait in a collective until --collective-timeout), and requires that within
--limit seconds no rank of the job is left running and mpirun exits
non-zero; with STOP, that a rank printed which collective timed out.
--compile-flags builds for another target (--target cuda --cuda-emulation:
NCCL's non-blocking communicators, the watchdog's probe and
ncclCommAbort on the emulated device).
"""
import argparse
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import MPIRUN, run  # noqa: E402


def ranks_of(exe):
    out = subprocess.run(["pgrep", "-f", "-x", f"{exe} --steps 100000 --collective-timeout .*"],
                         capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mesh", default="2x2")
    ap.add_argument("--limit", type=float, default=30.0)
    ap.add_argument("--signal", choices=["KILL", "STOP"], default="KILL")
    ap.add_argument("--timeout", default="5", help="--collective-timeout of the run")
    ap.add_argument("--compile-flags", default="", help="more shardc flags")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    exe = os.path.abspath(os.path.join(args.workdir, "train"))
    run([args.shardc, "tiny", "--mesh", args.mesh, "--micro-batch", "1", "--seq-len", "32",
         "-o", exe] + shlex.split(args.compile_flags))
    n = 1
    for d in args.mesh.split("x"):
        n *= int(d)
    p = subprocess.Popen(MPIRUN + ["-np", str(n), exe, "--steps", "100000",
                                   "--collective-timeout", args.timeout],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Stepping: the first step line.
    for line in p.stdout:
        if line.startswith("step"):
            break
    pids = ranks_of(exe)
    if len(pids) != n:
        sys.exit(f"found {len(pids)} rank processes, expected {n}")
    victim = sorted(pids)[-1]
    os.kill(victim, signal.SIGKILL if args.signal == "KILL" else signal.SIGSTOP)
    # Drain the output (the cause is printed there) while waiting.
    lines = []
    threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True).start()
    t0 = time.time()
    while time.time() - t0 < args.limit and (p.poll() is None or ranks_of(exe)):
        time.sleep(0.1)
    left = ranks_of(exe)
    took = time.time() - t0
    if left or p.poll() is None:
        for q in left:
            os.kill(q, 9)
        p.kill()
        sys.exit(f"{len(left)} ranks still running {args.limit:.0f} s after the kill")
    what = "killed" if args.signal == "KILL" else "stopped"
    print(f"{what} 1 of {n} ranks mid-run: every rank gone after {took:.1f} s "
          f"(limit {args.limit:.0f} s), mpirun exit {p.returncode}")
    if args.signal == "STOP":
        time.sleep(0.5)
        cause = [l.strip() for l in lines if "did not complete within" in l]
        if not cause:
            sys.exit("no rank said which collective timed out:\n" + "".join(lines[-20:]))
        print(cause[0])
    if p.returncode == 0:
        sys.exit("mpirun exited 0 after a rank was killed")
    print("PASS")


if __name__ == "__main__":
    main()
