"""A function with a graph break, for `opsight compare-backends` (docs/torch.md).

`predict` runs a small MLP, decides on the Python side from a tensor value (`.item()`:
TorchDynamo cannot compile through it, so the function splits into two graphs with
uncompiled Python between them), then runs a second block. `make()` returns the function
and example inputs, as `opsight compare-backends FILE:make` expects.
"""

import torch

torch.manual_seed(0)
encoder = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64))
head = torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Linear(64, 16))


def predict(features: torch.Tensor) -> torch.Tensor:
    hidden = encoder(features)
    if hidden.mean().item() > 0:  # a data-dependent branch: a graph break
        hidden = hidden * 2
    return head(hidden).softmax(dim=-1)


def make():
    return predict, (torch.randn(32, 64),)
