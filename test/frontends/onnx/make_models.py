"""Writes the small ONNX models of import.test into the folder given."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

out = sys.argv[1]
rng = np.random.default_rng(0)
V, C = 11, 8
inits = [numpy_helper.from_array(rng.standard_normal((V, C)).astype(np.float32), "wte"),
         numpy_helper.from_array(rng.standard_normal((C, V)).astype(np.float32), "head"),
         numpy_helper.from_array(np.ones(C, np.float32) * 1.1, "ln_w"),
         numpy_helper.from_array(np.zeros(C, np.float32) + 0.1, "ln_b")]
nodes = [helper.make_node("Gather", ["wte", "ids"], ["x"]),
         helper.make_node("LayerNormalization", ["x", "ln_w", "ln_b"], ["h"], axis=-1),
         helper.make_node("Shape", ["h"], ["shape"]),
         helper.make_node("Reshape", ["h", "shape"], ["h2"]),
         helper.make_node("MatMul", ["h2", "head"], ["logits"])]
ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 4])
logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 4, V])
graph = helper.make_graph(nodes, "small", [ids], [logits], inits)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
     os.path.join(out, "small.onnx"))
conv = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv0")], "c",
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4]),
                          helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 1, 3, 3])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])])
save(helper.make_model(conv, opset_imports=[helper.make_opsetid("", 17)]),
     os.path.join(out, "unsupported.onnx"))
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)]),
     os.path.join(out, "opset9.onnx"))

# What torch.onnx.export writes for two parameters equal at export time: one
# initializer, and an Identity of it named after the other parameter.
dedup_nodes = [helper.make_node("Gather", ["wte", "ids"], ["x"]),
               helper.make_node("Identity", ["ln_w"], ["ln2_w"]),
               helper.make_node("LayerNormalization", ["x", "ln_w", "ln_b"], ["h"], axis=-1),
               helper.make_node("LayerNormalization", ["h", "ln2_w", "ln_b"], ["h2"], axis=-1),
               helper.make_node("MatMul", ["h2", "head"], ["logits"])]
save(helper.make_model(helper.make_graph(dedup_nodes, "dedup", [ids], [logits], inits),
                       opset_imports=[helper.make_opsetid("", 17)]),
     os.path.join(out, "dedup.onnx"))

# What exporters write to build position tables from shapes: positions as
# CumSum of ones, a rope-like Cos/Sin table, a causal mask through
# LessOrEqual/Not/And/Where, Max/Min of shape values, GatherND on a
# constant. Every input is known once the batch is fixed: all fold.
T = 4
ones = numpy_helper.from_array(np.ones(T, np.int64), "ones")
zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
one = numpy_helper.from_array(np.array(1, np.int64), "one")
axis0 = numpy_helper.from_array(np.array([0], np.int64), "axis0")
axis1 = numpy_helper.from_array(np.array([1], np.int64), "axis1")
freq = numpy_helper.from_array(rng.standard_normal((1, C)).astype(np.float32), "freq")
table = numpy_helper.from_array(np.arange(2 * 3, dtype=np.float32).reshape(2, 3), "table")
which = numpy_helper.from_array(np.array([[1, 2], [0, 0]], np.int64), "which")
# Float initializers are trainable parameters; the tables' inputs are
# Constant nodes, as exporters write them.
fold_nodes = [
    helper.make_node("Constant", [], ["freq"], value=freq),
    helper.make_node("Constant", [], ["table"], value=table),
    helper.make_node("Gather", ["wte", "ids"], ["x"]),
    helper.make_node("CumSum", ["ones", "zero"], ["cum"]),
    helper.make_node("Sub", ["cum", "one"], ["pos"]),
    helper.make_node("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT),
    helper.make_node("Unsqueeze", ["posf", "axis1"], ["col"]),
    helper.make_node("Mul", ["col", "freq"], ["angle"]),
    helper.make_node("Cos", ["angle"], ["cos"]),
    helper.make_node("Sin", ["angle"], ["sin"]),
    helper.make_node("Max", ["cos", "sin"], ["hi"]),
    helper.make_node("Min", ["cos", "sin"], ["lo"]),
    helper.make_node("Sub", ["hi", "lo"], ["spread"]),
    helper.make_node("Unsqueeze", ["pos", "axis0"], ["row"]),
    helper.make_node("Unsqueeze", ["pos", "axis1"], ["colp"]),
    helper.make_node("LessOrEqual", ["row", "colp"], ["causal"]),
    helper.make_node("Greater", ["row", "zero"], ["notfirst"]),
    helper.make_node("And", ["causal", "notfirst"], ["both"]),
    helper.make_node("Not", ["both"], ["masked"]),
    helper.make_node("GatherND", ["table", "which"], ["picked"]),
    helper.make_node("Add", ["x", "spread"], ["h"]),
    helper.make_node("MatMul", ["h", "head"], ["logits"]),
]
fold_graph = helper.make_graph(fold_nodes, "fold", [ids], [logits],
                               inits[:2] + [ones, zero, one, axis0, axis1, which])
save(helper.make_model(fold_graph, opset_imports=[helper.make_opsetid("", 17)]),
     os.path.join(out, "fold.onnx"))
# The same ops on a value computed at runtime: an error naming the input.
runtime_nodes = [helper.make_node("Gather", ["wte", "ids"], ["x"]),
                 helper.make_node("Cos", ["x"], ["cx"], name="cos_of_x"),
                 helper.make_node("MatMul", ["cx", "head"], ["logits"])]
save(helper.make_model(helper.make_graph(runtime_nodes, "rt", [ids], [logits], inits[:2]),
                       opset_imports=[helper.make_opsetid("", 17)]),
     os.path.join(out, "runtime_cos.onnx"))

# The dynamo exporter's scaled_dot_product_attention zeroes the softmax's
# NaNs with Where(IsNaN(p), 0, p); any other use of IsNaN on a runtime
# value is refused.
nan_nodes = [helper.make_node("Gather", ["wte", "ids"], ["x"]),
             helper.make_node("Softmax", ["x"], ["p"], axis=-1),
             helper.make_node("IsNaN", ["p"], ["isnan"]),
             helper.make_node("Constant", [], ["zerof"],
                              value=numpy_helper.from_array(np.array(0, np.float32))),
             helper.make_node("Where", ["isnan", "zerof", "p"], ["clean"]),
             helper.make_node("MatMul", ["clean", "head"], ["logits"])]
save(helper.make_model(helper.make_graph(nan_nodes, "nan", [ids], [logits], inits[:2]),
                       opset_imports=[helper.make_opsetid("", 17)]),
     os.path.join(out, "nan.onnx"))
nan_nodes[4] = helper.make_node("Not", ["isnan"], ["clean"], name="not_nan")
save(helper.make_model(helper.make_graph(nan_nodes, "nan", [ids], [logits], inits[:2]),
                       opset_imports=[helper.make_opsetid("", 17)]),
     os.path.join(out, "nan_bad.onnx"))

# input_ids.view(-1, T) (transformers' GPT-2) before the embedding: a
# runtime reshape of the token ids. The head is the embedding's transpose,
# stored under a generated name, as TorchScript's constant folding writes a
# tied head.
view_shape = numpy_helper.from_array(np.array([-1, 4], np.int64), "view_shape")
tied_head = numpy_helper.from_array(numpy_helper.to_array(inits[0]).T.copy(), "onnx::MatMul_9")
view_nodes = [helper.make_node("Reshape", ["ids", "view_shape"], ["ids2"]),
              helper.make_node("Gather", ["wte", "ids2"], ["x"]),
              helper.make_node("LayerNormalization", ["x", "ln_w", "ln_b"], ["h"], axis=-1),
              helper.make_node("MatMul", ["h", "onnx::MatMul_9"], ["logits"])]
save(helper.make_model(helper.make_graph(view_nodes, "view", [ids], [logits],
                                         [inits[0], tied_head, inits[2], inits[3], view_shape]),
                       opset_imports=[helper.make_opsetid("", 17)]),
     os.path.join(out, "view_tied.onnx"))

# A graph typed in f64, f16 and bf16, computed in f32: a DOUBLE input cast to
# FLOAT16 and squared (an f16 output), and cast on to BFLOAT16 (a bf16
# output). float-types.test runs it against numpy's own f16 arithmetic.
typed_nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
               helper.make_node("Mul", ["h", "h"], ["sq"]),
               helper.make_node("Cast", ["h"], ["b"], to=TensorProto.BFLOAT16)]
typed = helper.make_graph(
    typed_nodes, "typed", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 3])],
    [helper.make_tensor_value_info("sq", TensorProto.FLOAT16, [2, 3]),
     helper.make_tensor_value_info("b", TensorProto.BFLOAT16, [2, 3])])
save(helper.make_model(typed, opset_imports=[helper.make_opsetid("", 17)]),
     os.path.join(out, "typed.onnx"))

# A rope table as transformers' Llama exports it with TorchScript: the
# inverse frequencies [1, D, 1] times the positions [1, 1, T] (a MatMul of
# two compile-time tensors), transposed, then Cos; added to the input.
inv = (1.0 / (10000.0 ** (np.arange(C, dtype=np.float32) / C))).reshape(1, C, 1)
rope_nodes = [
    helper.make_node("Constant", [], ["inv"], value=numpy_helper.from_array(inv, "inv")),
    helper.make_node("Constant", [], ["start"], value=numpy_helper.from_array(np.array(0, np.int64))),
    helper.make_node("Constant", [], ["limit"], value=numpy_helper.from_array(np.array(T, np.int64))),
    helper.make_node("Constant", [], ["delta"], value=numpy_helper.from_array(np.array(1, np.int64))),
    helper.make_node("Constant", [], ["ax01"], value=numpy_helper.from_array(np.array([0, 1], np.int64))),
    helper.make_node("Range", ["start", "limit", "delta"], ["positions"]),
    helper.make_node("Cast", ["positions"], ["positionsf"], to=TensorProto.FLOAT),
    helper.make_node("Unsqueeze", ["positionsf", "ax01"], ["p3"]),
    helper.make_node("MatMul", ["inv", "p3"], ["freqs"], name="rope_matmul"),
    helper.make_node("Transpose", ["freqs"], ["freqs_t"], perm=[0, 2, 1]),
    helper.make_node("Cos", ["freqs_t"], ["cos"]),
    helper.make_node("Add", ["xr", "cos"], ["yr"]),
]
xr = helper.make_tensor_value_info("xr", TensorProto.FLOAT, [1, T, C])
yr = helper.make_tensor_value_info("yr", TensorProto.FLOAT, [1, T, C])
save(helper.make_model(helper.make_graph(rope_nodes, "rope", [xr], [yr]),
                       opset_imports=[helper.make_opsetid("", 17)]),
     os.path.join(out, "rope_matmul.onnx"))
