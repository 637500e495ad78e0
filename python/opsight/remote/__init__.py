"""``opsight.remote``: ``compare_backends`` and ``opsight bench`` on other machines' hardware,
in parallel, through Ray (docs/remote.md).

A back-end is ``HARDWARE/BACKEND`` (octoml-profile's ``r6i.large/onnxrt-cpu``): the
hardware label is a Ray custom resource the team gives every node of that kind
(``ray start --resources '{"r6i.large": 1}'``), the back-end one of the model tools' names.
The model, or each graph dynamo captured, travels as an artifact (ONNX, TorchScript,
torch.export) through Ray's object store; each worker runs opsight's own harness and sends
back its numbers, its machine's facts and its trace; the caller merges the traces into one
run, one process per worker, moved onto its clock by the measured offsets, and prices the
time per request with a price table (``examples/remote/prices.yaml``)::

    from opsight.compare_backends import compare_backends
    result = compare_backends(predict, (x,), backends=["nodeA/ort-cpu", "nodeB/torchscript"],
                              cluster="ray://head:10001", prices="prices.yaml")
    result.print()

    import opsight.remote.bench
    opsight.remote.bench.run("model.onnx", ["nodeA/ort-cpu"], cluster="local").print()

Ray is imported only when a cluster is used: ``import opsight`` never imports it.

Modules: ``specs`` (``HARDWARE/BACKEND``, :class:`RemoteError`), ``prices`` (the price
table), ``cluster`` (joining a cluster, placing and running the measurements, clock offsets),
``worker`` (the Ray actor), ``artifacts`` (models and graphs as bytes), ``facts`` (a worker's
hardware), ``merge`` (one run from every worker), ``bench`` and ``compare`` (the two tools).
"""

from __future__ import annotations

from .prices import PriceTable, cost_per_million, load_prices
from .specs import BackendSpec, RemoteError, SpecError, parse_spec, parse_specs

__all__ = ["BackendSpec", "PriceTable", "RemoteError", "SpecError", "cost_per_million",
           "load_prices", "parse_spec", "parse_specs"]
