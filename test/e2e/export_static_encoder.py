"""Writes check_onnx_train.py's nn.TransformerEncoder model exported with a
static batch (no dynamic_axes): torch.onnx.export bakes the batch into
MultiheadAttention's Reshape targets, [T, B*H, D]."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import check_onnx_train as c  # noqa: E402

torch.manual_seed(0)
model = c.EncoderLM().eval()
torch.onnx.export(model, (torch.zeros(int(sys.argv[2]), c.T, dtype=torch.long),), sys.argv[1],
                  opset_version=17, input_names=["input_ids"], output_names=["logits"])
