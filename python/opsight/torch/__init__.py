"""opsight for PyTorch: operators and module calls on opsight's timeline, and one
function compared across back-ends.

Inside any opsight session (``opsight.profile()``, ``OPSIGHT_OUTPUT``, ``opsight run``)
torch operators (``aten::*``, category ``operator``) and ``nn.Module`` calls (category
``module``, named by path, e.g. ``encoder.layer.3.attention``) are recorded as spans,
nested under the Python spans that called them, on the same clock::

    import opsight, torch
    with opsight.profile() as prof:
        model(inputs)
    prof.print_tree()        # Python spans > modules > aten operators
    prof.print_operators()   # the operator table

``enable(shapes=True)`` adds each operator's input shapes; ``disable()`` stops it;
``with opsight.torch.tracing(shapes=True):`` does either for a block only;
``OPSIGHT_TORCH`` (on, shapes, operators, modules, off) sets what sessions record by
default.

``compare_backends(fn, example_inputs, backends=["eager", "inductor", ...])`` runs the
graphs torch.compile extracts from ``fn`` on every back-end and reports, per segment
(compiled graphs and the uncompiled Python between them), the time on each, the totals,
the graph breaks and the cost per million requests (octoml-profile's table, run locally).
See docs/torch.md. ``compare_backends`` and its result types are imported on first use
(module ``__getattr__``), so that a program traced with opsight does not load them.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from ._tracing import TorchTracing, disable, enable, status, tracing

#: Names this package takes from its compare_backends subpackage, on first use.
_COMPARE_BACKENDS_NAMES = ("BUILTIN_BACKENDS", "BackendStats", "CompareBackendsResult",
                           "Segment", "compare_backends")


def __getattr__(name: str) -> Any:
    if name in _COMPARE_BACKENDS_NAMES:
        package = importlib.import_module(f"{__name__}.compare_backends")
        return getattr(package, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _TorchPackage(types.ModuleType):
    """``opsight.torch`` itself. Importing the subpackage ``opsight.torch.compare_backends``
    makes Python set the package's attribute of that name to the subpackage; this keeps it
    the function, as it was when the package imported it eagerly."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "compare_backends" and isinstance(value, types.ModuleType):
            value = getattr(value, "compare_backends", value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _TorchPackage

__all__ = ["BUILTIN_BACKENDS", "BackendStats", "CompareBackendsResult", "Segment", "TorchTracing",
           "compare_backends", "disable", "enable", "status", "tracing"]
