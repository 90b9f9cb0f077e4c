"""Writes the hand-made models of the crasher corpus (Inputs/crashers/probe-*)
and fold.onnx (mutate.test's budget case) into the folder given: one each
for the importer classes of issue 15 that once crashed or ran away.
  probe-range_mixed: Range with an int64 start and a float delta (SIGSEGV);
  probe-transpose_empty_perm: perm=[] on a [2, 3] constant (silently a scalar);
  probe-input_huge, probe-input_huge2: graph inputs of [2^62+1, 64] and
    [2^31, 2^31] (sizes wrapped; compiled);
  probe-cos_huge, probe-expand_huge, probe-range_huge: ConstantOfShape,
    Expand and Range of 2^32 to 10^12 elements (out of memory);
  probe-gather_huge, probe-gathernd_huge: Gather and GatherND of 2^16
    indices into a [4, 4096] constant (2^28 elements);
  fold: a ConstantOfShape of 2^21 elements (16 MiB), within the default
    budget and beyond --fold-budget 1.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, name, inputs, outputs, list(inits))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]),
              os.path.join(out, name + ".onnx"))


fx = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
fy = h.make_tensor_value_info("y", T.FLOAT, None)
i64 = lambda v, n: nh.from_array(np.array(v, np.int64), n)
save("probe-range_mixed",
     [h.make_node("Range", ["s", "l", "d"], ["r"]), h.make_node("Cast", ["r"], ["c"], to=1),
      h.make_node("Add", ["x", "c"], ["y"])], [fx], [fy],
     [i64(0, "s"), i64(3, "l"), nh.from_array(np.array(1.0, np.float32), "d")])
save("probe-transpose_empty_perm",
     [h.make_node("Transpose", ["c"], ["t"], perm=[]), h.make_node("Add", ["x", "t"], ["y"])],
     [fx], [fy], [nh.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "c")])
save("probe-input_huge", [h.make_node("Neg", ["x"], ["y"])],
     [h.make_tensor_value_info("x", T.FLOAT, [2**62 + 1, 64])], [fy])
save("probe-input_huge2", [h.make_node("Neg", ["x"], ["y"])],
     [h.make_tensor_value_info("x", T.FLOAT, [2**31, 2**31])], [fy])


def filled(name, node, inits):
    save(name, [node, h.make_node("ReduceSum", ["z"], ["s"], keepdims=0),
                h.make_node("Add", ["x", "s"], ["y"])], [fx], [fy], inits)


one = nh.from_array(np.array([1.0], np.float32))
filled("probe-cos_huge", h.make_node("ConstantOfShape", ["sh"], ["z"], value=one),
       [i64([1 << 20, 1 << 20], "sh")])
filled("probe-expand_huge", h.make_node("Expand", ["one", "sh"], ["z"]),
       [nh.from_array(np.array([1.0], np.float32), "one"), i64([1 << 16, 1 << 16], "sh")])
save("probe-range_huge",
     [h.make_node("Range", ["s", "l", "d"], ["z"]), h.make_node("Cast", ["z"], ["c"], to=1),
      h.make_node("ReduceSum", ["c"], ["q"], keepdims=0), h.make_node("Add", ["x", "q"], ["y"])],
     [fx], [fy], [i64(0, "s"), i64(10**12, "l"), i64(1, "d")])
# Gather and GatherND of 2^16 indices into a [4, 4096] constant, both made
# by ConstantOfShape: 2^28 elements (2 GiB), reserved from the budget
# before they are computed.
for op, indices in (("Gather", [1 << 16]), ("GatherND", [1 << 16, 1])):
    save(f"probe-{op.lower()}_huge",
         [h.make_node("ConstantOfShape", ["dsh"], ["d"], value=one),
          h.make_node("ConstantOfShape", ["ish"], ["i"],
                      value=nh.from_array(np.array([0], np.int64))),
          h.make_node(op, ["d", "i"], ["z"]), h.make_node("ReduceSum", ["z"], ["s"], keepdims=0),
          h.make_node("Add", ["x", "s"], ["y"])], [fx], [fy],
         [i64([4, 4096], "dsh"), i64(indices, "ish")])
filled("fold", h.make_node("ConstantOfShape", ["sh"], ["z"], value=one), [i64([2048, 1024], "sh")])
