"""The definitions of the token-level metrics (docs/llm.md), in one place.

A request's timeline is a handful of ``time.perf_counter_ns()`` stamps (CLOCK_MONOTONIC):

- ``arrival``: the request was offered (its scheduled arrival in an open-loop run, the
  moment a closed-loop client issued it, the call of ``generate``);
- ``start``: its processing began (the prefill call, the HTTP request written);
- one stamp per *token chunk*: the moment a chunk carrying at least one output token was
  available to the caller (a streamer's ``put``, an SSE event with non-empty text);
- ``end``: the response was complete (``generate`` returned, the stream's ``[DONE]``).

From them, for a request with ``n`` output tokens and chunk times ``t_1 .. t_k``:

- queue = start - arrival
- prefill = t_1 - start
- TTFT (time to first token) = t_1 - arrival  (queue + prefill)
- ITL (inter-token latency) = t_i - t_(i-1), one per chunk after the first
- e2e = t_k - arrival: up to the *last token*, so that TTFT + the ITLs add up to e2e; what
  follows the last token (the final usage chunk, ``[DONE]``, generate's return) is
  ``completion`` = end - arrival, reported beside it
- TPOT (time per output token) = (t_k - t_1) / (n - 1) = (e2e - TTFT) / (n - 1), for n >= 2
- tokens/s of a request = n / e2e

Percentiles are linear interpolation between ranks (numpy's default, ``method="linear"``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

#: The distributions a summary reports, in order, with the request attribute each reads.
METRICS = ("ttft", "tpot", "itl", "e2e", "queue", "prefill", "tokens_per_second")
PERCENTILES = (50, 90, 95, 99)


@dataclass
class RequestMetrics:
    """One request's measured timeline (``perf_counter_ns`` stamps) and what follows from it."""

    request_id: int
    model: str = ""
    input_tokens: int | None = None
    output_tokens: int = 0
    arrival_ns: int = 0
    start_ns: int | None = None
    #: One stamp per token chunk, and how many tokens each chunk carried.
    token_ns: list[int] = field(default_factory=list)
    token_counts: list[int] = field(default_factory=list)
    end_ns: int | None = None
    #: None when the request completed; else a short kind (``timeout``, ``malformed``,
    #: ``server_error``, ``connection``, ``incomplete``, ``http_error``, ``exception``).
    error: str | None = None
    error_message: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def queue_ns(self) -> int | None:
        return None if self.start_ns is None else self.start_ns - self.arrival_ns

    @property
    def first_token_ns(self) -> int | None:
        return self.token_ns[0] if self.token_ns else None

    @property
    def last_token_ns(self) -> int | None:
        return self.token_ns[-1] if self.token_ns else None

    @property
    def ttft_ns(self) -> int | None:
        return None if not self.token_ns else self.token_ns[0] - self.arrival_ns

    @property
    def prefill_ns(self) -> int | None:
        if not self.token_ns or self.start_ns is None:
            return None
        return self.token_ns[0] - self.start_ns

    @property
    def itl_ns(self) -> list[int]:
        stamps = self.token_ns
        return [stamps[index] - stamps[index - 1] for index in range(1, len(stamps))]

    @property
    def e2e_ns(self) -> int | None:
        return None if not self.token_ns else self.token_ns[-1] - self.arrival_ns

    @property
    def completion_ns(self) -> int | None:
        return None if self.end_ns is None else self.end_ns - self.arrival_ns

    @property
    def tpot_ns(self) -> float | None:
        if len(self.token_ns) < 1 or self.output_tokens < 2:
            return None
        return (self.token_ns[-1] - self.token_ns[0]) / (self.output_tokens - 1)

    @property
    def tokens_per_second(self) -> float | None:
        e2e = self.e2e_ns
        if not e2e or not self.output_tokens:
            return None
        return self.output_tokens / (e2e / 1e9)

    def value(self, metric: str) -> Any:
        """The request's value of ``metric`` (a name of :data:`METRICS`; ``itl``: a list)."""
        return getattr(self, metric if metric == "tokens_per_second" else f"{metric}_ns")

    def to_dict(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "model": self.model, "ok": self.ok,
                "error": self.error, "error_message": self.error_message,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "queue_ns": self.queue_ns, "prefill_ns": self.prefill_ns,
                "ttft_ns": self.ttft_ns, "tpot_ns": self.tpot_ns, "e2e_ns": self.e2e_ns,
                "completion_ns": self.completion_ns, "itl_ns": self.itl_ns,
                "tokens_per_second": self.tokens_per_second, "chunks": len(self.token_ns)}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ``values``, interpolated linearly between ranks as
    ``numpy.percentile(values, q)`` (method "linear") computes it; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    fraction = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def percentile_interval(values: Sequence[float], q: float,
                        confidence: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free confidence interval of the ``q``-th percentile: the order
    statistics at the ranks n*p -/+ z*sqrt(n*p*(1-p)) (the normal approximation of the
    binomial count below the percentile). None when there are too few values to bound it."""
    n = len(values)
    if n < 2:
        return None
    p = q / 100.0
    z = {0.9: 1.6449, 0.95: 1.96, 0.99: 2.5758}.get(confidence, 1.96)
    half = z * math.sqrt(n * p * (1 - p))
    low_rank = math.floor(n * p - half)
    high_rank = math.ceil(n * p + half)
    if low_rank < 0 or high_rank > n - 1:
        return None
    ordered = sorted(values)
    return ordered[low_rank], ordered[high_rank]


def distribution(values: Sequence[float], confidence: bool = True) -> dict[str, Any]:
    """count, mean, min, p50/p90/p95/p99, max (and the 95% intervals of p50 and p99)."""
    values = [value for value in values if value is not None]
    result: dict[str, Any] = {"count": len(values)}
    if not values:
        return {**result, "mean": None, "min": None,
                **{f"p{q}": None for q in PERCENTILES}, "max": None}
    result["mean"] = math.fsum(values) / len(values)
    result["min"] = min(values)
    for q in PERCENTILES:
        result[f"p{q}"] = percentile(values, q)
    result["max"] = max(values)
    if confidence:
        for q in (50, 99):
            interval = percentile_interval(values, q)
            result[f"p{q}_ci95"] = list(interval) if interval else None
    return result


# ---- SLOs and goodput ------------------------------------------------------------------

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s)?\s*$")
_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, None: 1e6}
_SLO_METRICS = ("ttft", "tpot", "itl", "e2e")


@dataclass(frozen=True)
class SloTerm:
    """``metric <= bound_ns`` per request; with a percentile, the run holds the SLO when
    that percentile of the metric over the completed requests is within the bound."""

    metric: str
    bound_ns: float
    percentile: float | None = None

    def text(self) -> str:
        name = self.metric if self.percentile is None else f"{self.metric}_p{self.percentile:g}"
        return f"{name}={_format_ns(self.bound_ns)}"


def parse_duration_ns(text: str) -> float:
    """``200ms``, ``50us``, ``1.5s``, ``300ns``; a bare number is milliseconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"{text!r}: expected a duration such as 200ms, 50us or 1.5s")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_slo(text: str | None) -> list[SloTerm]:
    """``ttft_p99=200ms,tpot_p99=50ms`` (or ``ttft=200ms``: a per-request bound only).
    Metrics: ttft, tpot, itl (each of the request's ITLs), e2e."""
    if not text:
        return []
    terms = []
    for part in str(text).split(","):
        if not part.strip():
            continue
        key, separator, value = part.partition("=")
        if not separator:
            raise ValueError(f"SLO {part!r}: expected METRIC[_pQQ]=DURATION, e.g. ttft_p99=200ms")
        key = key.strip().lower()
        metric, _, quantile = key.partition("_p")
        if metric not in _SLO_METRICS:
            raise ValueError(f"SLO {part!r}: the metric is one of {', '.join(_SLO_METRICS)}")
        q = None
        if quantile:
            try:
                q = float(quantile)
            except ValueError:
                raise ValueError(f"SLO {part!r}: {quantile!r} is not a percentile") from None
            if not 0 < q <= 100:
                raise ValueError(f"SLO {part!r}: the percentile is in (0, 100]")
        bound = parse_duration_ns(value)
        if not bound > 0:
            raise ValueError(f"SLO {part!r}: the bound must be positive")
        terms.append(SloTerm(metric, bound, q))
    return terms


def meets(request: RequestMetrics, slo: Iterable[SloTerm]) -> bool:
    """Whether a request is *good*: it completed and each SLO bound holds for it (for
    ``itl``: every one of its ITLs; a bound on a metric the request has none of, such as
    TPOT with one output token, holds)."""
    if not request.ok or not request.token_ns:
        return False
    for term in slo:
        if term.metric == "itl":
            if any(value > term.bound_ns for value in request.itl_ns):
                return False
            continue
        value = request.value(term.metric)
        if value is not None and value > term.bound_ns:
            return False
    return True


def _format_ns(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1e9:
        return f"{value / 1e9:.3g}s"
    if value >= 1e6:
        return f"{value / 1e6:.3g}ms"
    if value >= 1e3:
        return f"{value / 1e3:.3g}us"
    return f"{value:.0f}ns"


def summarize(requests: Sequence[RequestMetrics], *, slo: Sequence[SloTerm] = (),
              duration_ns: int | None = None) -> dict[str, Any]:
    """The run's numbers: per metric a :func:`distribution` over the completed requests
    (ITL over every ITL of every completed request), throughput over ``duration_ns`` (by
    default the first arrival to the last token or end), errors by kind, and goodput: the
    requests per second that completed within every SLO bound."""
    completed = [request for request in requests if request.ok and request.token_ns]
    failed = [request for request in requests if not request.ok]
    if duration_ns is None:
        begins = [request.arrival_ns for request in requests]
        ends = [stamp for request in requests
                for stamp in (request.end_ns, request.last_token_ns) if stamp is not None]
        duration_ns = (max(ends) - min(begins)) if begins and ends else 0
    seconds = duration_ns / 1e9 if duration_ns else 0.0
    output_tokens = sum(request.output_tokens for request in completed)
    input_tokens = sum(request.input_tokens or 0 for request in completed)
    distributions = {}
    for metric in METRICS:
        if metric == "itl":
            values: list[float] = [value for request in completed for value in request.itl_ns]
        else:
            values = [request.value(metric) for request in completed]
        distributions[metric] = distribution(values)
    errors: dict[str, int] = {}
    for request in failed:
        errors[request.error or "error"] = errors.get(request.error or "error", 0) + 1
    good = [request for request in completed if meets(request, slo)]
    held: dict[str, Any] = {}
    for term in slo:
        if term.percentile is None:
            continue
        if term.metric == "itl":
            values = [value for request in completed for value in request.itl_ns]
        else:
            values = [request.value(term.metric) for request in completed]
        observed = percentile([value for value in values if value is not None], term.percentile)
        held[term.text()] = {"observed_ns": observed,
                             "held": observed is not None and observed <= term.bound_ns}
    return {
        "requests": len(requests), "completed": len(completed), "failed": len(failed),
        "errors": errors, "duration_s": seconds,
        "input_tokens": input_tokens, "output_tokens": output_tokens,
        "requests_per_second": len(completed) / seconds if seconds else None,
        "output_tokens_per_second": output_tokens / seconds if seconds else None,
        "total_tokens_per_second": (output_tokens + input_tokens) / seconds if seconds else None,
        "slo": [term.text() for term in slo],
        "good_requests": len(good) if slo else None,
        "goodput_requests_per_second": (len(good) / seconds if seconds else None) if slo else None,
        "slo_attainment": (len(good) / len(requests) if requests else None) if slo else None,
        "slo_held": held or None,
        "metrics": distributions,
    }


def render_summary(summary: dict[str, Any], title: str = "") -> str:
    """The summary as a text table (times in ms)."""
    lines = []
    if title:
        lines.append(title)
    lines.append(f"requests: {summary['requests']} ({summary['completed']} completed, "
                 f"{summary['failed']} failed"
                 + (", " + ", ".join(f"{kind}: {count}" for kind, count in
                                     sorted(summary['errors'].items())) if summary['errors'] else "")
                 + f") in {summary['duration_s']:.3f} s")

    def number(value: Any, digits: str = ".1f") -> str:
        return "-" if value is None else format(value, digits)

    lines.append(f"throughput: {number(summary['requests_per_second'], '.2f')} requests/s, "
                 f"{number(summary['output_tokens_per_second'])} output tokens/s "
                 f"({summary['output_tokens']} output, {summary['input_tokens']} input tokens)")
    if summary["slo"]:
        lines.append(f"goodput: {number(summary['goodput_requests_per_second'], '.2f')} requests/s "
                     f"within {', '.join(summary['slo'])} ({summary['good_requests']} of "
                     f"{summary['requests']} requests, attainment "
                     f"{number((summary['slo_attainment'] or 0) * 100)}%)")
        for name, outcome in (summary.get("slo_held") or {}).items():
            lines.append(f"  {name}: observed {_format_ns(outcome['observed_ns'])}, "
                         f"{'held' if outcome['held'] else 'NOT held'}")
    header = f"{'metric':<18}{'count':>7}{'mean':>10}{'p50':>10}{'p90':>10}{'p95':>10}{'p99':>10}{'max':>10}"
    lines.append(header)
    for metric in METRICS:
        values = summary["metrics"][metric]
        if metric == "tokens_per_second":
            label, scale, digits = "tokens/s (req)", 1.0, ".1f"
        else:
            label, scale, digits = f"{metric.upper() if metric in ('ttft', 'tpot', 'itl') else metric} (ms)", 1e6, ".3f"
        cells = [number(None if values[key] is None else values[key] / scale, digits)
                 for key in ("mean", "p50", "p90", "p95", "p99", "max")]
        lines.append(f"{label:<18}{values['count']:>7}" + "".join(f"{cell:>10}" for cell in cells))
    return "\n".join(lines) + "\n"
