"""Offering requests to a generation back-end: length distributions, fixed concurrency or a
Poisson rate, sweeps that stop at saturation (``opsight bench --generate``, docs/llm.md).

A *back-end* is a callable ``send(spec, request)``: it serves ``spec`` (a
:class:`RequestSpec`) and marks and finishes ``request`` (an
:class:`~opsight.llm.timeline.Request` that has already arrived). :func:`http_backend`
streams from an OpenAI-compatible URL, :func:`transformers_backend` runs a model's
``generate`` in this process (one request at a time: what waits is queue time).
"""

from __future__ import annotations

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


def run_load(send: Callable[[RequestSpec, Request], Any], specs: Sequence[RequestSpec], *,
             concurrency: int | None = None, rate: float | None = None, seed: int = 0,
             model: str = "", slo: Sequence[SloTerm] = (), operation: str = "text_completion",
             max_in_flight: int = 256) -> LoadResult:
    """Offers ``specs`` to ``send``: at a fixed ``concurrency`` (closed loop: that many
    requests in flight, each issued as one ends) or at ``rate`` requests/s (open loop:
    Poisson arrivals drawn from ``seed``; a request's latency counts from its scheduled
    arrival, so a client that falls behind shows as queue time). A request that fails is
    counted with its error; the rest go on."""
    if (concurrency is None) == (rate is None):
        raise ValueError("give either a concurrency or a rate")
    results: list[RequestMetrics | None] = [None] * len(specs)

    def serve(index: int, arrival: int) -> None:
        spec = specs[index]
        request = Request(model, spec.input_tokens, arrival_ns=arrival, operation=operation)
        try:
            send(spec, request)
        except Exception as error:  # noqa: BLE001 - a back-end's failure is one request's
            request.finish("exception", f"{type(error).__name__}: {error}")
        if not request.finished:
            request.finish()
        results[index] = request.metrics

    begin = _perf_counter_ns()
    if concurrency is not None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        taken = iter(range(len(specs)))
        lock = threading.Lock()

        def worker() -> None:
            while True:
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
                if wait > 0:
                    time.sleep(wait)
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
    requests = [result for result in results if result is not None]
    first = min((request.arrival_ns for request in requests), default=begin)
    last = max((stamp for request in requests
                for stamp in (request.end_ns, request.last_token_ns) if stamp is not None),
               default=first)
    duration = last - first
    return LoadResult(requests, duration, concurrency, rate,
                      summarize(requests, slo=slo, duration_ns=duration))


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

    def send(spec: RequestSpec, request: Request) -> None:
        ids = torch.tensor([tokenizer.encode(spec.prompt)])
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
