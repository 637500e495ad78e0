"""Comparing a model's outputs: eager's against a compiled back-end's (``opsight
compare-backends``' output check, ``opsight explain``'s ``outputs_match``). Needs torch."""

from __future__ import annotations

from typing import Any


def leaves(value: Any) -> list:
    """The leaves of a nest of tuples, lists and dicts (torch's pytree): tensors and plain
    values, in order."""
    import torch.utils._pytree as pytree

    return pytree.tree_leaves(value)


def compare_outputs(reference: Any, candidate: Any, rtol: float,
                    atol: float) -> tuple[bool, float | None]:
    """(agree, largest absolute difference) of two outputs, compared leaf by leaf."""
    import torch

    expected, got = leaves(reference), leaves(candidate)
    if len(expected) != len(got):
        return False, None
    largest = 0.0
    agree = True
    for left, right in zip(expected, got):
        if isinstance(left, torch.Tensor) or isinstance(right, torch.Tensor):
            left, right = torch.as_tensor(left), torch.as_tensor(right)
            if left.shape != right.shape:
                return False, None
            if left.numel() == 0:
                continue
            left, right = left.detach().cpu(), right.detach().cpu()
            if left.is_floating_point() or right.is_floating_point() or left.is_complex():
                left, right = left.to(torch.float64), right.to(torch.float64)
                if not torch.allclose(left, right, rtol=rtol, atol=atol, equal_nan=True):
                    agree = False
                finite = torch.isfinite(left) & torch.isfinite(right)
                if bool(finite.any()):
                    largest = max(largest, float((left - right).abs()[finite].max()))
            elif not torch.equal(left, right.to(left.dtype)):
                agree = False
                largest = max(largest, float((left.to(torch.float64)
                                              - right.to(torch.float64)).abs().max()))
        elif left != right:
            agree = False
    return agree, largest
