"""``opsight.explain``: where and why ``torch.compile`` breaks a model's graph (docs/explain.md).

``explain_model(model, example_inputs)`` explains one model in this process and returns a
:class:`ModelExplain` (graphs, breaks grouped by reason and source line, compile time and
peak memory, whether the compiled outputs match eager). ``opsight explain`` runs TARGETs or a
zoo file, each model in a process of its own, as a CI gate with metrics and logs.

Modules: ``analyze`` (one model), ``result`` (the data), ``child`` (one model's process),
``runner`` (processes, time limits, jobs), ``zoo`` (the zoo file), ``render`` (text, JSON,
CSV), ``gate`` (the baseline), ``publish`` (Pushgateway and Loki); the command is
``opsight._cli.explain``.
"""

from __future__ import annotations

from .result import BreakSite, ModelExplain


def explain_model(model, example_inputs, **options):
    """See :func:`opsight.explain.analyze.explain_model`."""
    from .analyze import explain_model as explain

    return explain(model, example_inputs, **options)


__all__ = ["BreakSite", "ModelExplain", "explain_model"]
