"""The back-ends' names: one vocabulary for every model tool (``opsight bench --backend``,
``opsight.bench.run(backend=)``, ``compare_backends(backends=)``, ``opsight
compare-backends --backends``).

| name | runs | also named |
|---|---|---|
| ``eager`` | the Python callable / ``nn.Module`` as is | |
| ``compile`` | ``torch.compile`` (inductor) | ``inductor``, ``torch.compile`` |
| ``torchscript`` | a TorchScript module | ``jit`` |
| ``ort-cpu``, ``ort-cuda``, ``ort-tensorrt`` | ONNX Runtime with that execution provider | ``onnxruntime`` (``-cpu``), ``onnxruntime-cuda``, ``onnxruntime-tensorrt`` |
"""

from __future__ import annotations

BACKENDS = ("eager", "compile", "torchscript", "ort-cpu", "ort-cuda", "ort-tensorrt")
#: Other spellings of the back-ends, accepted everywhere a back-end is named: PyTorch's and
#: ONNX Runtime's own names.
BACKEND_ALIASES = {"inductor": "compile", "torch.compile": "compile", "jit": "torchscript",
                   "onnxruntime": "ort-cpu", "onnxruntime-cpu": "ort-cpu",
                   "onnxruntime-cuda": "ort-cuda", "onnxruntime-tensorrt": "ort-tensorrt"}
#: The ONNX Runtime execution provider of each ``ort-*`` back-end.
ORT_PROVIDERS = {"ort-cpu": "CPUExecutionProvider", "ort-cuda": "CUDAExecutionProvider",
                 "ort-tensorrt": "TensorrtExecutionProvider"}


def canonical_backend(name: str) -> str:
    """The back-end's name in :data:`BACKENDS` for ``name`` or one of its aliases; any other
    name is returned as is (the caller says what it accepts)."""
    return BACKEND_ALIASES.get(name, name)
