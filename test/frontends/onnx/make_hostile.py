"""Writes the hostile ONNX models of hostile.test into the folder given:
models whose `head` initializer is external data at a location the test
then makes a symlink, a FIFO or a regular file; names holding control
characters; a ConstantOfShape too large to allocate."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

out = sys.argv[1]
os.makedirs(os.path.join(out, "m"), exist_ok=True)
os.makedirs(os.path.join(out, "outside"), exist_ok=True)
rng = np.random.default_rng(0)
V, C = 11, 8
wte = rng.standard_normal((V, C)).astype(np.float32)
head = rng.standard_normal((C, V)).astype(np.float32)
ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 4])
logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 4, V])
opset = [helper.make_opsetid("", 17)]


def model(path, head_tensor, head_name="head", node_name="", op="MatMul"):
    nodes = [helper.make_node("Gather", ["wte", "ids"], ["x"]),
             helper.make_node(op, ["x", head_name], ["logits"], name=node_name)]
    graph = helper.make_graph(nodes, "g", [ids], [logits],
                              [numpy_helper.from_array(wte, "wte"), head_tensor])
    save(helper.make_model(graph, opset_imports=opset), path)


def external(location, name="head"):
    t = numpy_helper.from_array(head, name)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"),
                       ("length", str(head.nbytes))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


# The head's bytes inside the model's folder and, the same bytes, outside it.
head.tofile(os.path.join(out, "m", "ok.bin"))
head.tofile(os.path.join(out, "outside", "secret.bin"))
for stem in ("ok", "link", "zero", "fifo"):
    model(os.path.join(out, "m", stem + ".onnx"), external(stem + ".bin"))
model(os.path.join(out, "m", "dotdot.onnx"), external("../outside/secret.bin"))

# Names with an escape sequence and a newline: an unsupported node, and a
# trained initializer the compile log lists.
evil = "\x1b[31mevil\nname"
model(os.path.join(out, "evil_node.onnx"), numpy_helper.from_array(head, "head"),
      node_name=evil, op="Conv")
model(os.path.join(out, "evil_init.onnx"), numpy_helper.from_array(head, evil),
      head_name=evil)

# Shape subgraphs that ask for 2^62 elements at compile time (more than a
# std::vector holds) and for 2^46 (more than the address space).
def huge(path, dims):
    big = helper.make_node("ConstantOfShape", ["shape"], ["big"],
                           value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]))
    graph = helper.make_graph(
        [helper.make_node("Gather", ["wte", "ids"], ["x"]), big,
         helper.make_node("Add", ["x", "big"], ["y"]),
         helper.make_node("MatMul", ["y", "head"], ["logits"])],
        "g", [ids], [logits],
        [numpy_helper.from_array(wte, "wte"), numpy_helper.from_array(head, "head"),
         numpy_helper.from_array(np.array(dims, np.int64), "shape")])
    save(helper.make_model(graph, opset_imports=opset), path)


huge(os.path.join(out, "huge.onnx"), [1 << 31, 1 << 31])
huge(os.path.join(out, "oom.onnx"), [1 << 46])

# A name assigned twice (onnx.checker refuses it): the second Gather
# redefines x.
ssa = helper.make_graph(
    [helper.make_node("Gather", ["wte", "ids"], ["x"]),
     helper.make_node("Gather", ["wte", "ids"], ["x"], name="again"),
     helper.make_node("MatMul", ["x", "head"], ["logits"])],
    "g", [ids], [logits],
    [numpy_helper.from_array(wte, "wte"), numpy_helper.from_array(head, "head")])
save(helper.make_model(ssa, opset_imports=opset), os.path.join(out, "ssa.onnx"))

# A Gemm whose C is [3, V] for a [1, V] product: C broadcasts past the
# output's shape.
x1 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C])
y1 = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, V])
gemm = helper.make_graph(
    [helper.make_node("Gemm", ["x", "head", "bias"], ["y"], name="proj")],
    "g", [x1], [y1],
    [numpy_helper.from_array(head, "head"),
     numpy_helper.from_array(np.ones((3, V), np.float32), "bias")])
save(helper.make_model(gemm, opset_imports=opset), os.path.join(out, "gemm_bias.onnx"))
