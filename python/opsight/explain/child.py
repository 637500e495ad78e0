"""One model explained in a process of its own (``python -m opsight.explain.child``), started
by :mod:`.runner`: loads the TARGET's factory, explains the model (:func:`.analyze.explain_model`)
while an opsight session records the steps as spans (``explain MODEL`` > ``load``,
``eager``, ``dynamo.explain``, ``compile.BACKEND``; the outer span carries the result as
the attribute ``explain.result``, JSON), and writes the result as JSON to ``--result``.

A failure of the TARGET (bad spec, factory raised, wrong return) is a result with status
``failed`` and the message, exit status 0: the parent reads every outcome from the file.
The process's own stdout goes to stderr so that a model's prints cannot garble anything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .result import STATUS_FAILED, ModelExplain

#: The span attribute holding a model's result (JSON) in a stored explain run.
RESULT_ATTRIBUTE = "explain.result"
#: The category of the per-model spans.
SPAN_CATEGORY = "explain"


def load_target(spec: str) -> tuple[object, object]:
    """``module:factory`` / ``file.py:factory`` -> ``(model_or_fn, example_inputs)``; raises
    ValueError with a message naming the spec and what is wrong."""
    from ..models import ModelError, call_factory

    try:
        made, _ = call_factory(spec)
    except ModelError as error:
        raise ValueError(str(error)) from None
    if not (isinstance(made, (tuple, list)) and len(made) == 2 and callable(made[0])):
        raise ValueError(f"{spec}: the factory must return (model_or_fn, example_inputs), got "
                         f"{type(made).__name__}"
                         + (f" of {len(made)}" if isinstance(made, (tuple, list)) else ""))
    return made[0], made[1]


def explain_target(spec: str, *, name: str, family: str, backend: str, rtol: float,
                   atol: float) -> ModelExplain:
    import opsight

    began = time.perf_counter()
    outer = opsight.span(f"explain {name}", SPAN_CATEGORY, target=spec, family=family)
    with outer:
        try:
            with opsight.span("load", SPAN_CATEGORY):
                model, example_inputs = load_target(spec)
        except ValueError as error:
            result = ModelExplain(model=name, family=family, target=spec, status=STATUS_FAILED,
                                  error=str(error), backend=backend)
        else:
            from .analyze import explain_model
            result = explain_model(model, example_inputs, name=name, family=family,
                                   backend=backend, rtol=rtol, atol=atol,
                                   stage=lambda label: opsight.span(label, SPAN_CATEGORY))
            result.target = spec
        result.wall_seconds = time.perf_counter() - began
        outer.set(RESULT_ATTRIBUTE, json.dumps(result.to_dict(), separators=(",", ":")))
        outer.set("graph_breaks", -1 if result.graph_breaks is None else result.graph_breaks)
        outer.set("status", result.status)
    return result


def main(arguments: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m opsight.explain.child")
    parser.add_argument("--target", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--family", default="")
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--result", required=True)
    parser.add_argument("--trace", default="")
    options = parser.parse_args(arguments)
    sys.stdout.flush()
    os.dup2(2, 1)  # the model's prints (fd 1 too: torch's C++ prints) go to the log
    import opsight

    if options.trace:
        with opsight.profile(options.trace, label="opsight explain"):
            result = explain_target(options.target, name=options.name, family=options.family,
                                    backend=options.backend, rtol=options.rtol, atol=options.atol)
    else:
        result = explain_target(options.target, name=options.name, family=options.family,
                                backend=options.backend, rtol=options.rtol, atol=options.atol)
    temporary = options.result + ".part"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(result.to_dict(), file)
    os.replace(temporary, options.result)
    return 0


if __name__ == "__main__":
    status = main()
    # The result and the trace are written and closed: skip the interpreter's teardown,
    # which with torch and dynamo loaded takes seconds (measured 2.3 s of a 10 s model).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
