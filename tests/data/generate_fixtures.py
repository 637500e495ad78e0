#!/usr/bin/env python3
"""Generates the small foreign-trace fixtures used by src/io/chrome_json/chrome_json_test.cc.

Both files come from the real tools (no hand-written JSON), run on the CPU with tiny
models built in code with fixed random weights; nothing is downloaded:

  pytorch_profiler_small.json    torch.profiler.profile over a tiny nn.Sequential,
                                 a few iterations, export_chrome_trace()
  onnxruntime_profile_small.json a tiny ONNX graph built with onnx.helper, run by
                                 onnxruntime with SessionOptions.enable_profiling

Usage: python tests/data/generate_fixtures.py [OUTPUT_DIR]   (default: this folder)
The integration tests (tests/integration/test_foreign_traces.py) import the two
functions below to make fresh traces at test time.
"""

import os
import shutil
import sys
import tempfile


def make_pytorch_profiler_trace(path, iterations=3, model="mlp", with_stack=False):
    """Profiles a tiny model for `iterations` forward passes and writes a Chrome trace.

    model: "mlp" (Linear-ReLU-Linear) or "transformer" (one nn.TransformerEncoderLayer).
    with_stack: also record Python functions, and nn.Module calls as "nn.Module: X_n".
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    torch.set_num_threads(1)
    if model == "mlp":
        network = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        inputs = torch.randn(8, 16)
    elif model == "transformer":
        network = torch.nn.TransformerEncoderLayer(
            d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
        network.eval()
        inputs = torch.randn(2, 5, 16)
    else:
        raise ValueError(f"unknown model {model!r}")
    with torch.no_grad():
        network(inputs)  # warm-up outside the profile
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                     with_stack=with_stack) as prof:
            for _ in range(iterations):
                with record_function("inference_step"):
                    network(inputs)
    prof.export_chrome_trace(str(path))


def make_onnxruntime_trace(path, iterations=3, optimize=True):
    """Runs a tiny MatMul-Add-Relu graph `iterations` times with profiling on.

    optimize=False turns ONNX Runtime's graph optimisations off, so that each of the three
    nodes runs (and is profiled) on its own instead of as one fused node.
    """
    import numpy as np
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    weight = rng.standard_normal((16, 8)).astype(np.float32)
    bias = rng.standard_normal((8,)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["input", "weight"], ["matmul_out"], name="matmul"),
            helper.make_node("Add", ["matmul_out", "bias"], ["add_out"], name="add"),
            helper.make_node("Relu", ["add_out"], ["output"], name="relu"),
        ],
        "tiny_graph",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [4, 8])],
        [
            helper.make_tensor("weight", TensorProto.FLOAT, weight.shape, weight.flatten()),
            helper.make_tensor("bias", TensorProto.FLOAT, bias.shape, bias.flatten()),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)

    work_dir = tempfile.mkdtemp(prefix="opsight_ort_")
    try:
        options = onnxruntime.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(work_dir, "ort_profile")
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        if not optimize:
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        feed = {"input": rng.standard_normal((4, 16)).astype(np.float32)}
        for _ in range(iterations):
            session.run(None, feed)
        profile_path = session.end_profiling()
        shutil.move(profile_path, str(path))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def main():
    output_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(output_dir, exist_ok=True)
    make_pytorch_profiler_trace(os.path.join(output_dir, "pytorch_profiler_small.json"))
    make_onnxruntime_trace(os.path.join(output_dir, "onnxruntime_profile_small.json"))
    for name in ("pytorch_profiler_small.json", "onnxruntime_profile_small.json"):
        print(name, os.path.getsize(os.path.join(output_dir, name)), "bytes")


if __name__ == "__main__":
    main()
