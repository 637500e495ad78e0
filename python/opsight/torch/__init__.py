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
the graph breaks and the cost per million requests (octoml-profile's table), on this
machine or, with ``cluster=``, on other machines' hardware through Ray (docs/remote.md).
See docs/torch.md. ``compare_backends`` and its result types live in
:mod:`opsight.compare_backends`, beside ``opsight.bench``; they are imported from there on
first use (module ``__getattr__``), so that a program traced with opsight does not load them.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["BUILTIN_BACKENDS", "BackendStats", "CompareBackendsResult", "Segment", "TorchTracing",
           "compare_backends", "disable", "enable", "status", "tracing"]

# Every name is imported on first use: ``import opsight`` registers this package's session
# integration (``_integration``) without importing torch, and an auto-traced torch program
# never loads compare-backends, which it does not use.
_HOMES = {name: "._tracing" for name in ("TorchTracing", "disable", "enable", "status", "tracing")}
_HOMES.update({name: "..compare_backends" for name in
               ("BUILTIN_BACKENDS", "BackendStats", "CompareBackendsResult", "Segment")})
# compare_backends(..., cluster=...) runs the graphs on a Ray cluster (docs/remote.md).
_ALIASES = {"compare_backends": ("..remote.compare", "compare_backends")}


def __getattr__(name: str) -> Any:
    if name in _ALIASES:
        home, attribute = _ALIASES[name]
        value = getattr(importlib.import_module(home, __name__), attribute)
        globals()[name] = value
        return value
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'opsight.torch' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
