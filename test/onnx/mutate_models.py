"""A seeded structural mutation campaign on the ONNX importer.

fuzz_model.py corrupts bytes; this one writes well-formed protobuf that
is a wrong graph, as a careless exporter or a hostile user would: the
seeds are the ONNX backend node tests of the ops shardc supports
(libonnx-testdata) and a small transformer, and each case applies 1 to 3
random mutations to one seed:
  - an input renamed to "", to another value, to an undefined name;
    inputs dropped or repeated;
  - an attribute's value replaced (huge, negative, zero, an empty or long
    list, another type), an attribute dropped or added;
  - an op type swapped for another supported one;
  - a graph input's dims made huge, zero, negative or symbolic;
    its element type changed;
  - an initializer's dims, type or values replaced (huge shape values,
    negative sizes, empty tensors, NaN);
  - nodes dropped, duplicated or reordered; outputs renamed.
Every case runs `shardc --infer` under a memory limit (RLIMIT_AS) and a
timeout. A case passes if shardc exits 0, or exits 1 with one error line
that names the file and is not an internal error.
A signal is a crash, the timeout a hang, "out of memory" a breach of the
memory bound: any of these fails the run, and the case is saved under
--crashers (the mutated model) for the regression corpus.
"""
import argparse
import concurrent.futures
import copy
import glob
import os
import random
import resource
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HUGE = [0, -1, -7, 1, 2, 3, 7, 64, 2**31 - 1, 2**31, 2**32 + 1, 2**40, 2**53 + 1,
        2**62 + 1, 2**63 - 1, -2**63]
TYPES = [TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL,
         TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.UINT8,
         TensorProto.STRING, 0, 99]


def transformer_seed():
    rng = np.random.default_rng(0)
    V, C = 11, 8
    inits = [numpy_helper.from_array(rng.standard_normal((V, C)).astype(np.float32), "wte"),
             numpy_helper.from_array(rng.standard_normal((C, V)).astype(np.float32), "head"),
             numpy_helper.from_array(np.ones(C, np.float32), "ln_w"),
             numpy_helper.from_array(np.zeros(C, np.float32), "ln_b"),
             numpy_helper.from_array(np.array([2, 4, C], np.int64), "shape3")]
    nodes = [helper.make_node("Gather", ["wte", "ids"], ["x"]),
             helper.make_node("LayerNormalization", ["x", "ln_w", "ln_b"], ["h"], axis=-1),
             helper.make_node("Shape", ["h"], ["shape"]),
             helper.make_node("Reshape", ["h", "shape"], ["h2"]),
             helper.make_node("Transpose", ["h2"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Transpose", ["t"], ["t2"], perm=[0, 2, 1]),
             helper.make_node("Reshape", ["t2", "shape3"], ["h3"]),
             helper.make_node("MatMul", ["h3", "head"], ["s"]),
             helper.make_node("Softmax", ["s"], ["logits"], axis=-1)]
    graph = helper.make_graph(
        nodes, "seed", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 4, V])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def seeds(data_dir, supported):
    models = [("transformer", transformer_seed())]
    for d in sorted(glob.glob(os.path.join(data_dir, "test_*"))):
        try:
            m = onnx.load(os.path.join(d, "model.onnx"))
        except Exception:
            continue
        ops = {n.op_type for n in m.graph.node}
        if ops and ops <= supported:
            models.append((os.path.basename(d), m))
    return models


def values_of(g):
    names = [i.name for i in g.input] + [t.name for t in g.initializer]
    for n in g.node:
        names += list(n.output)
    return [v for v in names if v]


def mutate_attribute(rnd, node):
    if not node.attribute or rnd.random() < 0.2:
        name = rnd.choice(["axis", "perm", "to", "keepdims", "axes", "value", "k",
                           "upper", "alpha", "epsilon", "batch_dims", "exclusive"])
        node.attribute.append(helper.make_attribute(name, rnd.choice(HUGE)))
        return
    a = rnd.choice(node.attribute)
    kind = rnd.randrange(6)
    if kind == 0:
        node.attribute.remove(a)
    elif a.type == onnx.AttributeProto.INT or kind == 1:
        new = helper.make_attribute(a.name, rnd.choice(HUGE))
        node.attribute.remove(a)
        node.attribute.append(new)
    elif a.type == onnx.AttributeProto.INTS or kind == 2:
        k = rnd.choice([0, 1, 2, 3, 9])
        new = helper.make_attribute(a.name, [rnd.choice(HUGE) for _ in range(k)])
        node.attribute.remove(a)
        node.attribute.append(new)
    elif a.type == onnx.AttributeProto.FLOAT or kind == 3:
        new = helper.make_attribute(a.name, rnd.choice([0.0, -1.0, 1e38, float("nan"),
                                                        float("inf")]))
        node.attribute.remove(a)
        node.attribute.append(new)
    elif a.type == onnx.AttributeProto.TENSOR or kind == 4:
        new = helper.make_attribute(a.name, random_tensor(rnd, a.name or "t"))
        node.attribute.remove(a)
        node.attribute.append(new)
    else:
        new = helper.make_attribute(a.name, "x")
        node.attribute.remove(a)
        node.attribute.append(new)


def random_tensor(rnd, name):
    kind = rnd.randrange(7)
    if kind == 0:
        return numpy_helper.from_array(np.array([rnd.choice(HUGE) for _ in range(rnd.randint(0, 4))],
                                                np.int64), name)
    if kind == 1:
        return numpy_helper.from_array(np.zeros((0, 3), np.float32), name)
    if kind == 2:
        return numpy_helper.from_array(np.array(rnd.choice(HUGE), np.int64), name)
    if kind == 3:
        return numpy_helper.from_array(np.array([np.nan, np.inf, -1.5], np.float32), name)
    if kind == 4:
        return numpy_helper.from_array(np.array(rnd.random() * 4, np.float32), name)
    if kind == 5:
        t = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), name)
        del t.dims[:]
        t.dims.extend([rnd.choice(HUGE) for _ in range(rnd.randint(0, 3))])
        return t
    t = numpy_helper.from_array(np.arange(4, dtype=np.int64), name)
    t.data_type = rnd.choice(TYPES)
    return t


def mutate(rnd, model, supported_list):
    m = copy.deepcopy(model)
    g = m.graph
    kind = rnd.randrange(10)
    nodes = list(g.node)
    if kind <= 2 and nodes:  # inputs
        n = rnd.choice(nodes)
        names = values_of(g)
        choice = rnd.randrange(5)
        if choice == 0 and n.input:
            n.input[rnd.randrange(len(n.input))] = ""
        elif choice == 1 and n.input:
            n.input[rnd.randrange(len(n.input))] = rnd.choice(names)
        elif choice == 2 and n.input:
            del n.input[rnd.randrange(len(n.input))]
        elif choice == 3:
            n.input.append(rnd.choice(names + [""]))
        else:
            n.input.append("undefined_" + str(rnd.randrange(9)))
    elif kind == 3 and nodes:
        mutate_attribute(rnd, rnd.choice(nodes))
    elif kind == 4 and nodes:
        rnd.choice(nodes).op_type = rnd.choice(supported_list)
    elif kind == 5 and g.input:
        i = rnd.choice(g.input)
        tt = i.type.tensor_type
        if rnd.random() < 0.3:
            tt.elem_type = rnd.choice(TYPES)
        elif tt.shape.dim:
            d = tt.shape.dim[rnd.randrange(len(tt.shape.dim))]
            if rnd.random() < 0.2:
                d.dim_param = "n"
            else:
                d.dim_value = rnd.choice(HUGE)
        else:
            tt.shape.dim.add().dim_value = rnd.choice(HUGE)
    elif kind == 6 and g.initializer:
        k = rnd.randrange(len(g.initializer))
        old = g.initializer[k]
        new = random_tensor(rnd, old.name)
        g.initializer.remove(old)
        g.initializer.insert(k, new)
    elif kind == 7 and nodes:
        choice = rnd.randrange(3)
        k = rnd.randrange(len(nodes))
        if choice == 0:
            del g.node[k]
        elif choice == 1:
            g.node.insert(k, copy.deepcopy(nodes[k]))
        else:
            n = g.node[k]
            g.node.remove(n)
            g.node.insert(rnd.randrange(len(g.node) + 1), n)
    elif kind == 8 and g.output:
        o = rnd.choice(g.output)
        o.name = rnd.choice(values_of(g) + ["", "nowhere"])
    else:
        # A Constant node of a random tensor feeding a random input.
        c = helper.make_node("Constant", [], ["const_fuzz"],
                             value=random_tensor(rnd, "const_fuzz"))
        g.node.insert(0, c)
        users = [n for n in g.node if n.input]
        if users:
            n = rnd.choice(users)
            n.input[rnd.randrange(len(n.input))] = "const_fuzz"
    return m


def limit_memory(bytes_):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (bytes_, bytes_))
    return apply


def compile_model(args, path):
    """Compiles `path` as the campaign does (--infer, under the memory limit
    and the timeout) and classifies the outcome: ok (compiled), rejected
    (one error line naming the file, not an internal error), crash, hang,
    memory (out of memory) or unclear. Returns (class, stderr)."""
    try:
        r = subprocess.run([args.shardc, path, "--infer", "--emit", "rt", "-o", os.devnull],
                           capture_output=True, text=True, errors="replace",
                           timeout=args.timeout, preexec_fn=limit_memory(args.memory_mb << 20))
    except subprocess.TimeoutExpired:
        return "hang", ""
    err = r.stderr.strip()
    if r.returncode < 0 or r.returncode > 1:
        return "crash", f"status {r.returncode}\n{err[-1500:]}"
    if "out of memory" in err:
        return "memory", err[-300:]
    if r.returncode == 1 and (err.count("error:") != 1 or path not in err or
                              "internal error" in err):
        return "unclear", err[-600:]
    return ("ok" if r.returncode == 0 else "rejected"), err


def run_case(args, k, seed_models, supported_list):
    rnd = random.Random(args.seed * 1_000_003 + k)
    name, model = seed_models[rnd.randrange(len(seed_models))]
    for _ in range(rnd.randint(1, 3)):
        model = mutate(rnd, model, supported_list)
    path = os.path.join(args.workdir, f"case{k}.onnx")
    try:
        onnx.save(model, path)
    except Exception:
        return k, name, "unwritable", ""
    status, err = compile_model(args, path)
    if status in ("ok", "rejected"):
        os.remove(path)
        return k, name, status, ""
    return k, name, status, path + ": " + err


def replay(args):
    """Runs every model in args.replay (the committed corpus of cases that
    once crashed, hung, ran out of memory or gave an unclear error): each
    must now be refused with one error line naming the file, within the
    limits, and never as an internal error."""
    bad = 0
    for path in sorted(glob.glob(os.path.join(args.replay, "*.onnx"))):
        status, err = compile_model(args, path)
        ok = status == "rejected"
        last = err.splitlines()[-1] if err else ""
        print(f"ok {os.path.basename(path)}: status 1: {last}" if ok else
              f"BAD ({status}) {os.path.basename(path)}: {last}")
        bad += not ok
    print(f"replayed corpus: {bad} not refused cleanly")
    sys.exit(1 if bad else 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data/node")
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--memory-mb", type=int, default=4096)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--crashers", help="copy failing cases into this folder")
    ap.add_argument("--replay", help="instead, run the corpus of old failures in this folder")
    args = ap.parse_args()
    if args.replay:
        replay(args)
    os.makedirs(args.workdir, exist_ok=True)
    supported = set(subprocess.run([args.shardc, "--supported-ops"], capture_output=True,
                                   text=True, check=True).stdout.split())
    seed_models = seeds(args.data, supported)
    supported_list = sorted(supported)
    counts = {}
    bad = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for k, name, status, info in pool.map(
                lambda k: run_case(args, k, seed_models, supported_list), range(args.cases)):
            counts[status] = counts.get(status, 0) + 1
            if status in ("crash", "hang", "memory", "unclear"):
                bad.append((k, name, status, info))
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    for k, name, status, info in bad:
        print(f"{status.upper()} case {k} (seed {name}): {info}")
        if args.crashers:
            os.makedirs(args.crashers, exist_ok=True)
            src = os.path.join(args.workdir, f"case{k}.onnx")
            if os.path.exists(src):
                os.replace(src, os.path.join(args.crashers, f"{status}-{args.seed}-{k}.onnx"))
    print(f"{args.cases} mutated models from {len(seed_models)} seeds: "
          f"{counts.get('ok', 0)} compiled, {counts.get('rejected', 0)} rejected with one error line, "
          f"{counts.get('crash', 0)} crashes, {counts.get('hang', 0)} hangs, "
          f"{counts.get('memory', 0)} over the {args.memory_mb} MiB bound, "
          f"{counts.get('unclear', 0)} unclear errors; largest shardc RSS {peak} MiB")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
