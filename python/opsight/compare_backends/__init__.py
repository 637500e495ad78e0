"""``opsight.compare_backends`` (also ``opsight.torch.compare_backends``): one function timed on
several back-ends, graph by graph.

octoml-profile's job, run locally. ``torch.compile`` (TorchDynamo) splits a call of ``fn``
into *segments*: the FX graphs it captures, and the plain Python between them (before the
first graph, at each graph break, after the last graph). Every captured graph is compiled
for every chosen back-end; each call of ``fn`` then runs each graph on every back-end in
turn, times each run, checks that the outputs agree with the captured graph run as is
(``eager``), and hands the eager result back to ``fn``, so the program computes what it
always did. The Python between graphs is timed once per call, by timestamps taken when a
graph is entered and left. A back-end's estimated time per call of ``fn`` is the sum of the
uncompiled segments and of its own graph times::

    from opsight.compare_backends import compare_backends   # or opsight.torch.compare_backends

    result = compare_backends(predict, (x,), backends=["eager", "inductor", "onnxruntime"],
                              repeats=20, warmups=2, prices_per_hour={"inductor": 0.126})
    result.print()            # octoml-profile's table, with totals and cost per 1M requests
    result.to_dict()          # JSON-serialisable
    result.dataframe()        # pandas, one row per segment and back-end

Why one call of ``fn`` runs every back-end (rather than one call per back-end): the
uncompiled segments are the same Python whatever back-end runs the graphs, so they are
measured once and shared, every back-end sees exactly the same inputs (which is what makes
the output check possible), and dynamo captures the graphs once. To keep the comparison
fair, the order in which the back-ends run is rotated from call to call (the first one to
run after Python code meets colder caches), the time spent running the *other* back-ends
and checking outputs lies between a graph's entry and exit timestamps and so is never
counted as uncompiled time, and when a graph writes into one of its inputs (an in-place
operation on a placeholder) each back-end but the one whose result is returned runs on
copies of those inputs (copied outside the timed region). Dynamo's guard checks run
between graphs and are counted as uncompiled time: a program compiled with any back-end
pays them too.

Warm-ups and compilation: the first ``warmups`` calls are discarded. A measured call in which
anything was compiled (dynamo captured a graph, after a guard failure for example, and the
back-ends compiled it) is discarded too and counted (``discarded_runs``). Calls whose graph
sequence differs from the most common one (a data-dependent path) are counted and left out,
so that every segment row means the same code in every run.

A back-end that fails to compile a graph, or raises while running it, is counted in that
graph's ``failures`` with the reason (``errors``); the other back-ends still run, and a
back-end with a graph that never ran has no total. Outputs that differ from eager's by more
than ``rtol``/``atol`` are counted as ``mismatches`` with the largest absolute difference.

Back-ends: ``"eager"`` (the captured ``GraphModule`` run as is), ``"inductor"`` (also
``"compile"``: ``torch._inductor.compile_fx``), ``"torchscript"`` (``torch.jit.trace`` of the
graph module), ``"onnxruntime"`` (also ``"ort-cpu"``: the graph exported with ``torch.onnx.export(dynamo=False)`` and run by an
ONNX Runtime session on the CPU execution provider), any other name ``torch.compile``
knows (``torch._dynamo.list_backends()``, e.g. ``"aot_eager"``), or ``(name, compiler)``
pairs / a ``{name: compiler}`` mapping where ``compiler(graph_module, example_inputs)``
returns a callable, as a ``torch.compile`` back-end does.

Graph breaks and their reasons come from dynamo's own counters
(``torch._dynamo.utils.counters["graph_break"]``) while ``fn`` is captured.
``torch._dynamo.reset()`` is called before and after, so ``fn`` is captured afresh and a later
``torch.compile`` of the same code does not reuse the profiling back-end.

The package's modules: ``backends`` (the built-in back-ends and how back-end names resolve),
``result`` (``CompareBackendsResult`` and its segments), ``measure`` (``compare_backends()``
itself: the recording torch.compile back-end and the statistics) and ``command``
(``opsight compare-backends``).
"""

from __future__ import annotations

from .backends import BUILTIN_BACKENDS, DEFAULT_BACKENDS, Compiler  # noqa: F401
from .measure import compare_backends
from .result import BackendStats, CompareBackendsResult, Segment

__all__ = ["BackendStats", "CompareBackendsResult", "Segment", "compare_backends",
           "BUILTIN_BACKENDS"]
