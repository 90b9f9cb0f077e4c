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
