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
See docs/torch.md.
"""

from __future__ import annotations

from ._tracing import TorchTracing, disable, enable, status, tracing
from .compare_backends import (BUILTIN_BACKENDS, BackendStats, CompareBackendsResult, Segment,
                               compare_backends)

__all__ = ["BUILTIN_BACKENDS", "BackendStats", "CompareBackendsResult", "Segment", "TorchTracing",
           "compare_backends", "disable", "enable", "status", "tracing"]
