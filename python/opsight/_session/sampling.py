"""Sampling by unit: which share of a program's requests (or root spans) a session records.

``opsight.profile(sample=0.01)``, ``sample="1/100"`` or ``"1 in 100"`` or ``"1%"``; with
``sample_root="handle_request"`` a unit is each span of that name begun outside a unit (with
everything under it), ``sample_root="requests"`` each HTTP request an integration serves
(``category:http``), ``"category:NAME"`` each span of that category; without a root, each
root span (the first span a thread or asyncio task begins with none open). The core decides
(``src/record/sampling.hpp``): exactly the first unit, then one in every 1/rate, spread
evenly; a caller's W3C ``traceparent`` decides for the request it sends (its sampled flag),
a parent's decision for the work it hands to a thread pool or a child process. A unit left
out records nothing, and torch builds no RecordFunction in it: a sampled-out forward of the
demo model costs within about 1% of an untraced one (docs/performance.md).

``sample_scope="operators"`` samples only the torch operators: every span of every unit is
recorded, and only the units sampled in record their operators (the always-on preset's
choice: a unit's operators cost about 3% of a forward, its Python and module spans far
less; docs/production.md).

``OPSIGHT_SAMPLE``, ``OPSIGHT_SAMPLE_ROOT`` and ``OPSIGHT_SAMPLE_SCOPE`` set the same for
``OPSIGHT_OUTPUT`` sessions (``opsight run --sample --sample-root --sample-scope`` sets them
for the program it runs).

Without ``OPSIGHT_SAMPLE``, OpenTelemetry's ``OTEL_TRACES_SAMPLER`` (and
``OTEL_TRACES_SAMPLER_ARG``) is mapped onto this: ``always_on`` and
``parentbased_always_on`` record every unit; ``traceidratio`` and
``parentbased_traceidratio`` record the share ``OTEL_TRACES_SAMPLER_ARG`` (default 1.0) of
units. A unit is still opsight's (a root span or a request), its decision still exact (one
in every 1/rate, not a hash of its trace id) and a caller's sampled flag still decides for
the request it sends, as the parent-based samplers do. ``always_off`` and
``parentbased_always_off`` record no unit of their own (a span outside every unit opens
one, so nothing at all but the requests a caller's ``traceparent`` says are sampled: every
sampler is parent-based in opsight); the run info still counts the units seen. Other
samplers (``jaeger_remote``, ``xray``...) are reported and
ignored: ``OTEL_SDK_DISABLED=true`` stops the export, not recording.
"""

from __future__ import annotations

import math
import os
from typing import Any

SAMPLE_VARIABLE = "OPSIGHT_SAMPLE"
SAMPLE_ROOT_VARIABLE = "OPSIGHT_SAMPLE_ROOT"
SAMPLE_SCOPE_VARIABLE = "OPSIGHT_SAMPLE_SCOPE"
#: What a unit sampled out leaves out: everything, or only its torch operators.
SAMPLE_SCOPES = ("all", "operators")
#: Shorthands of sample_root.
_ROOT_SHORTHANDS = {"requests": "category:http", "request": "category:http"}


def parse_sample_rate(value: Any, where: str = "sample") -> float:
    """The share of units to record, in (0, 1]: a number (0.01), or a string "0.01",
    "1/100", "1 in 100", "1%". Raises ValueError naming ``where`` and what is wrong."""
    if isinstance(value, bool):
        raise ValueError(f"{where}: expected a rate such as 0.01, '1/100' or '1%', got {value!r}")
    if isinstance(value, (int, float)):
        rate = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        try:
            if text.endswith("%"):
                rate = float(text[:-1]) / 100
            elif "/" in text or " in " in text:
                numerator, denominator = (part.strip() for part in
                                          text.replace(" in ", "/").split("/", 1))
                rate = float(numerator) / float(denominator)
            else:
                rate = float(text)
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"{where}: {value!r} is not a rate (use 0.01, '1/100', '1 in 100' "
                             "or '1%')") from None
    else:
        raise ValueError(f"{where}: expected a rate such as 0.01, '1/100' or '1%', got "
                         f"{type(value).__name__}")
    if not math.isfinite(rate) or not 0 < rate <= 1:
        raise ValueError(f"{where}: {value!r} is not a share of units between 0 (excluded) and 1")
    return rate


def parse_sample_root(value: Any, where: str = "sample_root") -> str:
    """The root a unit starts at ("" for root spans): a span name, "category:NAME", or
    "requests" (HTTP requests)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a span name or 'category:NAME', got "
                         f"{type(value).__name__}")
    root = value.strip()
    if root.startswith("category:") and not root[len("category:"):]:
        raise ValueError(f"{where}: 'category:' needs a category name after it")
    return _ROOT_SHORTHANDS.get(root, root)


def parse_sample_scope(value: Any, where: str = "sample_scope") -> bool:
    """Whether only operators are sampled: "operators" (True) or "all" (False)."""
    if value not in SAMPLE_SCOPES:
        raise ValueError(f"{where}: expected 'all' or 'operators', got {value!r}")
    return value == "operators"


def scope_from_environment() -> bool:
    """OPSIGHT_SAMPLE_SCOPE: whether only operators are sampled (a bad value is a warning)."""
    import sys

    text = os.environ.get(SAMPLE_SCOPE_VARIABLE, "").strip() or "all"
    try:
        return parse_sample_scope(text, SAMPLE_SCOPE_VARIABLE)
    except ValueError as error:
        print(f"opsight: ignoring {error}: sampling leaves out whole units", file=sys.stderr)
        return False


#: OTEL_TRACES_SAMPLER values that map onto sampling by unit: whether they take a ratio.
_OTEL_SAMPLERS = {"always_on": False, "parentbased_always_on": False, "traceidratio": True,
                  "parentbased_traceidratio": True, "always_off": False,
                  "parentbased_always_off": False}


def otel_sampler_rate() -> float:
    """The share of units OTEL_TRACES_SAMPLER (and _ARG) asks for; 1.0 when unset, and,
    with a warning, for a sampler or argument opsight cannot honour."""
    import sys

    sampler = os.environ.get("OTEL_TRACES_SAMPLER", "").strip().lower()
    if not sampler:
        return 1.0
    if sampler not in _OTEL_SAMPLERS:
        print(f"opsight: ignoring OTEL_TRACES_SAMPLER={sampler!r}: opsight maps always_on, "
              "always_off, traceidratio and their parentbased_ forms onto its sampling by "
              "unit; every unit is recorded", file=sys.stderr)
        return 1.0
    if not _OTEL_SAMPLERS[sampler]:
        return 0.0 if sampler.endswith("always_off") else 1.0
    argument = os.environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip() or "1.0"
    try:
        return parse_sample_rate(argument, "OTEL_TRACES_SAMPLER_ARG")
    except ValueError as error:
        print(f"opsight: ignoring {error}: every unit is recorded", file=sys.stderr)
        return 1.0


def from_environment() -> tuple[float, str]:
    """(rate, root) from OPSIGHT_SAMPLE and OPSIGHT_SAMPLE_ROOT, else from OpenTelemetry's
    OTEL_TRACES_SAMPLER; a bad value is a warning and records everything."""
    import sys

    text = os.environ.get(SAMPLE_VARIABLE, "").strip()
    if not text:
        rate = otel_sampler_rate()
        if rate == 1.0:
            return 1.0, ""
        try:
            return rate, parse_sample_root(os.environ.get(SAMPLE_ROOT_VARIABLE),
                                           SAMPLE_ROOT_VARIABLE)
        except ValueError as error:
            print(f"opsight: ignoring {error}: units are root spans", file=sys.stderr)
            return rate, ""
    try:
        return (parse_sample_rate(text, SAMPLE_VARIABLE),
                parse_sample_root(os.environ.get(SAMPLE_ROOT_VARIABLE), SAMPLE_ROOT_VARIABLE))
    except ValueError as error:
        print(f"opsight: ignoring {error}: every unit is recorded", file=sys.stderr)
        return 1.0, ""
