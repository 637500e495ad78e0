"""Offering requests to a generation back-end: length distributions, fixed concurrency or a
Poisson rate, sweeps that stop at saturation (``opsight bench --generate``, docs/llm.md).

A *back-end* is a callable ``send(spec, request)``: it serves ``spec`` (a
:class:`RequestSpec`) and marks and finishes ``request`` (an
:class:`~opsight.llm.timeline.Request` that has already arrived). :func:`http_backend`
streams from an OpenAI-compatible URL, :func:`transformers_backend` runs a model's
``generate`` in this process (one request at a time: what waits is queue time).
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .metrics import RequestMetrics, SloTerm, summarize
from .timeline import Request

_perf_counter_ns = time.perf_counter_ns


@dataclass
class RequestSpec:
    """One request to offer: its prompt text (or token ids), input and output lengths."""

    prompt: str
    input_tokens: int
    max_tokens: int
    extra: dict[str, Any] | None = None


def parse_length(text: str | int) -> Callable[[random.Random], int]:
    """A length distribution: ``32`` (fixed), ``uniform:16:64``, ``normal:32:8`` (mean,
    standard deviation; at least 1)."""
    if isinstance(text, int):
        value = text
        if value < 1:
            raise ValueError(f"length {text!r}: expected >= 1")
        return lambda _random: value
    parts = str(text).split(":")
    try:
        if len(parts) == 1:
            value = int(parts[0])
            if value < 1:
                raise ValueError
            return lambda _random: value
        if parts[0] == "uniform" and len(parts) == 3:
            low, high = int(parts[1]), int(parts[2])
            if not 1 <= low <= high:
                raise ValueError
            return lambda generator: generator.randint(low, high)
        if parts[0] == "normal" and len(parts) == 3:
            mean, deviation = float(parts[1]), float(parts[2])
            if mean < 1 or deviation < 0:
                raise ValueError
            return lambda generator: max(1, round(generator.gauss(mean, deviation)))
    except ValueError:
        pass
    raise ValueError(f"length {text!r}: expected N, uniform:LOW:HIGH or normal:MEAN:STDDEV")


def make_requests(count: int, input_length: str | int = 32, output_length: str | int = 32,
                  prompts: Sequence[str] | None = None, seed: int = 0) -> list[RequestSpec]:
    """``count`` requests: prompts of ``input_length`` words (one token each for the
    reference server's tokenizer), or taken in turn from ``prompts``."""
    generator = random.Random(seed)
    inputs = parse_length(input_length)
    outputs = parse_length(output_length)
    specs = []
    for index in range(count):
        if prompts:
            prompt = prompts[index % len(prompts)]
            length = len(prompt.split())
        else:
            length = inputs(generator)
            prompt = " ".join(f"w{generator.randrange(1 << 20)}" for _ in range(length))
        specs.append(RequestSpec(prompt, length, outputs(generator)))
    return specs


def read_prompts(path: str) -> list[str]:
    """Prompts from a file: one per line, or JSON lines with a ``prompt`` field."""
    import json

    prompts = []
    with open(path, encoding="utf-8") as file:
        for line in file:
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    prompts.append(str(json.loads(line)["prompt"]))
                    continue
                except (ValueError, KeyError):
                    pass
            prompts.append(line)
    if not prompts:
        raise ValueError(f"{path}: no prompt in the file")
    return prompts


@dataclass
class LoadResult:
    """The requests of one load point and what they give."""

    requests: list[RequestMetrics]
    duration_ns: int
    concurrency: int | None
    rate: float | None
    summary: dict[str, Any]
    saved_run: dict[str, Any] | None = None
    #: Requests (the first, in arrival order) left out as the transient before the steady
    #: state; ``stop_reason``: why the point ended before offering every request, or "".
    warmup_requests: int = 0
    offered: int = 0
    stop_reason: str = ""


# ---- steady state and intervals that are tight enough ---------------------------------------

#: The metrics whose p50 and p99 intervals must be tight for an early stop.
TIGHT_METRICS = ("ttft", "tpot")


def steady_state_start(values: Sequence[float], batch: int = 5) -> int:
    """How many leading values of ``values`` (a series in arrival order, e.g. each request's
    e2e) belong to the start-up transient: MSER-5 (White, 1997; the Marginal Standard Error
    Rule on means of batches of 5), the truncation ``d`` (a multiple of ``batch``) that
    minimises the squared standard error of the mean of what remains,
    sum((b_i - mean)^2) / (k - d)^2 over the batch means b_d..b_(k-1), with d at most half
    the series. Fewer than 4 batches: 0 (nothing can be told)."""
    count = len(values) // batch
    if count < 4:
        return 0
    means = [math.fsum(values[index * batch:(index + 1) * batch]) / batch
             for index in range(count)]
    best, best_d = math.inf, 0
    for d in range(count // 2 + 1):
        rest = means[d:]
        mean = math.fsum(rest) / len(rest)
        statistic = math.fsum((value - mean) ** 2 for value in rest) / len(rest) ** 2
        if statistic < best:
            best, best_d = statistic, d
    return best_d * batch


def tight_enough(requests: Sequence[RequestMetrics], relative: float,
                 metrics: Sequence[str] = TIGHT_METRICS) -> bool:
    """Whether, over the completed ``requests``, the 95% interval of p50 and of p99 of each
    of ``metrics`` lies within +/- ``relative`` of the percentile (a metric no request has,
    such as TPOT with one output token, is left out; p99 needs 563 requests before it
    has an interval at all)."""
    from .metrics import percentile, percentile_interval

    completed = [request for request in requests if request.ok and request.token_ns]
    checked = False
    for metric in metrics:
        values = [value for value in (request.value(metric) for request in completed)
                  if value is not None]
        if not values:
            continue
        for q in (50, 99):
            interval = percentile_interval(values, q)
            estimate = percentile(values, q)
            if interval is None or not estimate:
                return False
            if (interval[1] - interval[0]) / 2 > relative * abs(estimate):
                return False
            checked = True
    return checked


def run_load(send: Callable[[RequestSpec, Request], Any], specs: Sequence[RequestSpec], *,
             concurrency: int | None = None, rate: float | None = None, seed: int = 0,
             model: str = "", slo: Sequence[SloTerm] = (), operation: str = "text_completion",
             max_in_flight: int = 256, steady_state: bool = False,
             until_tight: float | None = None, min_requests: int = 50,
             check_every: int = 10) -> LoadResult:
    """Offers ``specs`` to ``send``: at a fixed ``concurrency`` (closed loop: that many
    requests in flight, each issued as one ends) or at ``rate`` requests/s (open loop:
    Poisson arrivals drawn from ``seed``; a request's latency counts from its scheduled
    arrival, so a client that falls behind shows as queue time). A request that fails is
    counted with its error; the rest go on.

    ``steady_state``: the start-up transient (:func:`steady_state_start` over the requests'
    e2e in arrival order) is left out of the summary. ``until_tight``: ``specs`` is the most
    to offer; every ``check_every`` completions, once at least ``min_requests`` are measured,
    the point stops offering when the p50 and p99 intervals are within that relative
    half-width (:func:`tight_enough`); the requests in flight finish and count."""
    if (concurrency is None) == (rate is None):
        raise ValueError("give either a concurrency or a rate")
    if until_tight is not None and not 0 < until_tight < 1:
        raise ValueError(f"until_tight {until_tight!r}: expected a relative width in (0, 1)")
    results: list[RequestMetrics | None] = [None] * len(specs)
    stop = threading.Event()
    stop_reason = [""]
    finished_lock = threading.Lock()
    finished_count = [0]

    def check() -> None:
        """After a completion: whether the point can stop (under finished_lock)."""
        finished_count[0] += 1
        if until_tight is None or stop.is_set() or finished_count[0] % check_every:
            return
        done = [result for result in results if result is not None]
        done.sort(key=lambda request: request.arrival_ns)
        skip = steady_state_start([_latency(request) for request in done]) if steady_state else 0
        measured = done[skip:]
        if len(measured) >= min_requests and tight_enough(measured, until_tight):
            stop_reason[0] = (f"p50 and p99 95% intervals of {', '.join(TIGHT_METRICS)} within "
                              f"+/-{until_tight:.0%} after {len(measured)} measured requests")
            stop.set()

    def serve(index: int, arrival: int) -> None:
        spec = specs[index]
        request = Request(model, spec.input_tokens, arrival_ns=arrival, operation=operation)
        try:
            send(spec, request)
        except Exception as error:  # noqa: BLE001 - a back-end's failure is one request's
            request.finish("exception", f"{type(error).__name__}: {error}")
        if not request.finished:
            request.finish()
        with finished_lock:
            results[index] = request.metrics
            check()

    begin = _perf_counter_ns()
    if concurrency is not None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        taken = iter(range(len(specs)))
        lock = threading.Lock()

        def worker() -> None:
            while not stop.is_set():
                with lock:
                    index = next(taken, None)
                if index is None:
                    return
                serve(index, _perf_counter_ns())

        workers = [threading.Thread(target=worker, name=f"llm client {n}", daemon=True)
                   for n in range(concurrency)]
    else:
        if not rate or rate <= 0:
            raise ValueError("rate must be > 0 requests/s")
        generator = random.Random(seed)
        arrivals = []
        moment = 0.0
        for _ in specs:
            moment += generator.expovariate(rate)
            arrivals.append(begin + int(moment * 1e9))
        slots = threading.BoundedSemaphore(max_in_flight)

        def dispatch() -> None:
            threads = []
            for index, arrival in enumerate(arrivals):
                wait = (arrival - _perf_counter_ns()) / 1e9
                if wait > 0 and stop.wait(wait):
                    break
                if stop.is_set():
                    break
                slots.acquire()

                def one(index: int = index, arrival: int = arrival) -> None:
                    try:
                        serve(index, arrival)
                    finally:
                        slots.release()

                thread = threading.Thread(target=one, name=f"llm request {index}", daemon=True)
                thread.start()
                threads.append(thread)
            for thread in threads:
                thread.join()

        workers = [threading.Thread(target=dispatch, name="llm dispatcher", daemon=True)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    offered = [result for result in results if result is not None]
    offered.sort(key=lambda request: request.arrival_ns)
    skip = steady_state_start([_latency(request) for request in offered]) if steady_state else 0
    requests = offered[skip:]
    first = min((request.arrival_ns for request in requests), default=begin)
    last = max((stamp for request in requests
                for stamp in (request.end_ns, request.last_token_ns) if stamp is not None),
               default=first)
    duration = last - first
    summary = summarize(requests, slo=slo, duration_ns=duration)
    summary["warmup_requests"] = skip
    summary["stopped_early"] = stop_reason[0] or None
    return LoadResult(requests, duration, concurrency, rate, summary, warmup_requests=skip,
                      offered=len(offered), stop_reason=stop_reason[0])


def _latency(request: RequestMetrics) -> float:
    """The series steady-state detection reads: e2e (a failed request: its whole time)."""
    value = request.e2e_ns if request.ok else None
    if value is None:
        value = (request.end_ns or request.arrival_ns) - request.arrival_ns
    return float(value)


def saturated(throughputs: Sequence[float], tolerance: float = 0.05) -> bool:
    """Whether the last point of a sweep added less than ``tolerance`` (relative) to the
    best throughput before it: the sweep stops there."""
    if len(throughputs) < 2:
        return False
    best = max(throughputs[:-1])
    return best > 0 and throughputs[-1] < best * (1 + tolerance)


def http_backend(endpoint: Any) -> Callable[[RequestSpec, Request], Any]:
    """A back-end streaming from an OpenAI-compatible server (:class:`client.Endpoint`);
    each request is a client span carrying ``traceparent`` to the server."""
    from .. import propagation, span
    from .client import stream_request

    name = f"POST {endpoint.path}"

    def send(spec: RequestSpec, request: Request) -> None:
        request.kind = "client"
        request.server = (endpoint.host, endpoint.port)
        with span(name, "http", **{"span.kind": "client", "gen_ai.request.id":
                                   request.metrics.request_id}):
            headers = dict(propagation.inject({}))
            stream_request(endpoint, spec.prompt, spec.max_tokens, request, spec.extra,
                           headers=headers)

    return send


def transformers_backend(model: Any, tokenizer: Any = None, name: str = "",
                         ignore_eos: bool = True) -> Callable[[RequestSpec, Request], Any]:
    """A back-end running ``model.generate`` in this process, one request at a time (a
    request waiting for the model is queued: its queue time counts in its TTFT)."""
    import torch

    from .huggingface import traced_generate
    from .models import WordTokenizer

    tokenizer = tokenizer or WordTokenizer(model.config.vocab_size)
    lock = threading.Lock()
    original = model.generate

    # Inputs go where the model's weights are (a model moved to a GPU generates there).
    device = next(model.parameters()).device

    def send(spec: RequestSpec, request: Request) -> None:
        ids = torch.tensor([tokenizer.encode(spec.prompt)], device=device)
        request.metrics.input_tokens = int(ids.shape[1])
        if name:
            request.metrics.model = name
        options: dict[str, Any] = {"max_new_tokens": spec.max_tokens, "do_sample": False,
                                   "attention_mask": torch.ones_like(ids)}
        if ignore_eos:
            options["min_new_tokens"] = spec.max_tokens
        with lock, torch.inference_mode():
            traced_generate(model, original, (ids,), options, name=request.metrics.model,
                            requests=[request])

    return send
