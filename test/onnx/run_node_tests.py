"""Runs the ONNX backend node tests (Debian's libonnx-testdata, data/node)
of every op shardc imports through the CPU target and prints a report.

A test is selected when every node of its model is an op shardc supports.
Each is compiled with `shardc --infer`; graph inputs that determine shapes
(the importer asks for them) are bound at compile time with --bind. Inputs
are written as raw f32 / int32 / bool bytes (f64, f16 and bf16 where the
model declares them so), outputs compared with the
expected ones as the ONNX backend tests do (rtol 1e-3, atol 1e-7; integers
and booleans exactly). Exits non-zero if a test crashes the compiler or the
executable, or if fewer than --min-pass tests pass.
"""
import argparse
import concurrent.futures
import glob
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper

RAW = {np.dtype("float32"): np.float32, np.dtype("int64"): np.int32,
       np.dtype("int32"): np.int32, np.dtype("bool"): np.uint8,
       np.dtype("float64"): np.float64, np.dtype("float16"): np.float16}
BF16 = onnx.TensorProto.BFLOAT16


def declared(value_info):
    return value_info.type.tensor_type.elem_type


def bf16_bits(t):
    """The raw bf16 bits of tensor proto `t` (the backend tests store bf16
    data as UINT16 or in int32_data, depending on the onnx version)."""
    a = onnx.numpy_helper.to_array(t)
    return np.ascontiguousarray(a).view(np.uint16) if a.dtype.itemsize == 2 \
        else a.astype(np.uint16)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def run_test(shardc, test_dir, workdir, supported):
    name = os.path.basename(test_dir)
    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    data = sorted(glob.glob(os.path.join(test_dir, "test_data_set_0")))
    if not data:
        return name, "skip", "no test data"
    inits = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in inits]
    in_files = sorted(glob.glob(os.path.join(data[0], "input_*.pb")),
                      key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
    out_files = sorted(glob.glob(os.path.join(data[0], "output_*.pb")),
                       key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
    work = os.path.join(workdir, name)
    os.makedirs(work, exist_ok=True)
    exe = os.path.join(work, "prog")
    cmd = [shardc, os.path.join(test_dir, "model.onnx"), "--infer", "-o", exe]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    bound = set()
    if r.returncode != 0 and "known at compile time" in r.stderr:
        # Bind every non-float input (shapes, axes, indices) and retry; then
        # everything, for ops whose float inputs decide shapes (Range).
        for attempt in ("ints", "all"):
            bound = set()
            extra = []
            for nm, f in zip(inputs, in_files):
                t = onnx.load_tensor(f)
                if attempt == "all" or t.data_type != onnx.TensorProto.FLOAT:
                    extra += ["--bind", f"{nm}={f}"]
                    bound.add(nm)
            r = subprocess.run(cmd + extra, capture_output=True, text=True, timeout=300)
            if r.returncode == 0 or "known at compile time" not in r.stderr:
                break
    if r.returncode < 0:
        return name, "crash", f"shardc died with signal {-r.returncode}"
    if r.returncode != 0:
        return name, "fail", r.stderr.strip().splitlines()[-1][:200]
    run = [exe]
    types = {i.name: declared(i) for i in model.graph.input}
    for nm, f in zip(inputs, in_files):
        if nm in bound:
            continue
        t = onnx.load_tensor(f)
        if types.get(nm) == BF16:  # bf16 is written as its bits
            path = os.path.join(work, f"in_{len(run)}.bin")
            bf16_bits(t).tofile(path)
            run += ["--input", f"{nm}={path}"]
            continue
        a = onnx.numpy_helper.to_array(t)
        if a.dtype not in RAW:
            return name, "fail", f"input {nm} is {a.dtype}"
        path = os.path.join(work, f"in_{len(run)}.bin")
        np.ascontiguousarray(a.astype(RAW[a.dtype])).tofile(path)
        run += ["--input", f"{nm}={path}"]
    outs = []
    for k, (o, f) in enumerate(zip(model.graph.output, out_files)):
        path = os.path.join(work, f"out_{k}.bin")
        run += ["--output", f"{o.name}={path}"]
        t = onnx.load_tensor(f)
        if declared(o) == BF16:  # compared as the f32 values of the bits
            outs.append((path, bf16_to_f32(bf16_bits(t)), "bf16"))
        else:
            outs.append((path, onnx.numpy_helper.to_array(t), None))
    r = subprocess.run(run, capture_output=True, text=True, timeout=300)
    if r.returncode < 0:
        return name, "crash", f"executable died with signal {-r.returncode}"
    if r.returncode != 0:
        return name, "fail", (r.stderr.strip().splitlines() or ["?"])[-1][:200]
    for path, want, raw in outs:
        if raw == "bf16":
            got = bf16_to_f32(np.fromfile(path, dtype=np.uint16))
        elif want.dtype not in RAW:
            return name, "fail", f"output is {want.dtype}"
        else:
            got = np.fromfile(path, dtype=RAW[want.dtype])
        if got.size != want.size:
            return name, "fail", f"output has {got.size} elements, expected {want.size}"
        got = got.reshape(want.shape)
        if want.dtype.kind == "f":
            ok = np.allclose(got, want, rtol=1e-3, atol=1e-7, equal_nan=True)
        else:
            ok = np.array_equal(got.astype(np.int64), want.astype(np.int64))
        if not ok:
            return name, "fail", "outputs differ from the expected ones"
    return name, "pass", "bound: " + ",".join(sorted(bound)) if bound else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data/node")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--min-pass", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    supported = set(subprocess.run([args.shardc, "--supported-ops"], capture_output=True,
                                   text=True, check=True).stdout.split())
    selected = []
    for d in sorted(glob.glob(os.path.join(args.data, "test_*"))):
        try:
            m = onnx.load(os.path.join(d, "model.onnx"))
        except Exception:
            continue
        ops = {n.op_type for n in m.graph.node}
        if ops and ops <= supported and all(n.domain in ("", "ai.onnx") for n in m.graph.node):
            selected.append(d)
    os.makedirs(args.workdir, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda d: run_test(args.shardc, d, args.workdir, supported),
                                selected))
    counts = {}
    for name, status, why in results:
        counts[status] = counts.get(status, 0) + 1
        if status != "pass":
            print(f"{status:5} {name}: {why}")
    n_pass = counts.get("pass", 0)
    print(f"ONNX node tests of supported ops: {n_pass} of {len(results)} pass "
          f"({counts.get('fail', 0)} fail, {counts.get('crash', 0)} crash, "
          f"{counts.get('skip', 0)} skipped)")
    bad = counts.get("crash", 0) > 0 or n_pass < args.min_pass
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
