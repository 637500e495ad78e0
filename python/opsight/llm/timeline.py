"""Marking a request's prefill, decode steps and tokens in a plain decode loop.

::

    from opsight import llm

    with llm.request(model="tiny-llama", input_tokens=len(prompt)) as request:
        with request.prefill():                 # a span: the prefill forward's modules nest in it
            logits, cache = model(prompt)
        token = pick(logits)
        request.token()                         # the first token is out: TTFT
        while not done(token):
            with request.decode():              # one span per decode step
                logits, cache = model(token, cache)
            token = pick(logits)
            request.token()                     # one ITL per token
    request.metrics.ttft_ns, request.metrics.tpot_ns

A server that batches several requests per step marks the steps once per batch with
:func:`step` and each request's tokens with its own :class:`Request`.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Iterator

from .. import Span
from .. import counter as _counter
from ..propagation import _current as _served_request
from .metrics import RequestMetrics
from .recording import note_clock, write_request

_perf_counter_ns = time.perf_counter_ns
_ids = itertools.count(1)
_ids_lock = threading.Lock()


def next_request_id() -> int:
    with _ids_lock:
        return next(_ids)


class step:  # noqa: N801 - used as a context manager, as opsight.span
    """``with llm.step("decode", batch_size=8):`` a span ``gen_ai.decode`` (or
    ``gen_ai.prefill``) around one model step, on the calling thread, so that the module
    and operator spans of the forward pass nest in it; ``batch_size`` is an attribute and a
    sample of the ``gen_ai.batch_size`` counter track."""

    __slots__ = ("_span", "_batch_size")

    def __init__(self, kind: str = "decode", *, batch_size: int | None = None,
                 model: str = "", **attributes: Any) -> None:
        if kind not in ("prefill", "decode"):
            raise ValueError(f"step kind {kind!r}: expected 'prefill' or 'decode'")
        if model:
            attributes["gen_ai.request.model"] = model
        if batch_size is not None:
            attributes["gen_ai.batch_size"] = int(batch_size)
        self._batch_size = batch_size
        self._span = Span(f"gen_ai.{kind}", "gen_ai", **attributes)

    def __enter__(self) -> "step":
        if self._batch_size is not None:
            _counter("gen_ai.batch_size", float(self._batch_size))
        self._span.__enter__()
        return self

    def set(self, key: str, value: Any) -> None:
        self._span.set(key, value)

    def __exit__(self, *exception: Any) -> None:
        self._span.__exit__(*exception)


class Request:
    """One request's timeline: its arrival, the start of its processing, each token chunk
    and its end (docs/llm.md has the definitions). Written into the running session as a
    ``gen_ai.request`` span with the GenAI attributes when it finishes (module
    :mod:`opsight.llm.recording`), and available as :attr:`metrics` (a
    :class:`~opsight.llm.metrics.RequestMetrics`).

    ``arrival_ns``: when the request arrived (``time.perf_counter_ns()``), if before now.
    ``kind``: ``"client"`` when the caller measures it (a client of a server: its span is
    of kind client, its times the ``gen_ai.client.*`` metrics' in the exporters), else
    ``""`` (measured where the model runs: the ``gen_ai.server.*`` ones). Created while a
    served request is being handled (``opsight.propagation.continue_trace``), its span joins
    that request's trace as a child of the span serving it, whichever thread finishes it.
    ``server``: (address, port) of the server a client's request went to (the
    ``server.address`` and ``server.port`` attributes), or None.
    Thread-safety: one thread marks a request (any thread may finish it after).
    """

    __slots__ = ("metrics", "operation", "provider", "kind", "served", "server", "_tokens",
                 "_counts", "_finished")

    def __init__(self, model: str = "", input_tokens: int | None = None, *,
                 arrival_ns: int | None = None, request_id: int | None = None,
                 operation: str = "text_completion", provider: str = "",
                 kind: str = "") -> None:
        if kind not in ("", "client"):
            raise ValueError(f"request kind {kind!r}: expected 'client' or ''")
        self.metrics = RequestMetrics(
            request_id=next_request_id() if request_id is None else request_id,
            model=model, input_tokens=input_tokens,
            arrival_ns=_perf_counter_ns() if arrival_ns is None else int(arrival_ns))
        self.operation = operation
        self.provider = provider
        self.kind = kind
        self.served = _served_request.get()
        self.server: tuple[str, int] | None = None
        self._tokens = self.metrics.token_ns
        self._counts = self.metrics.token_counts
        self._finished = False
        note_clock()

    # ---- marks ---------------------------------------------------------------------------
    def start(self, ns: int | None = None) -> None:
        """Processing begins (the queue ends); implied by :meth:`prefill` and the first token."""
        if self.metrics.start_ns is None:
            self.metrics.start_ns = _perf_counter_ns() if ns is None else ns

    def prefill(self, **attributes: Any) -> step:
        """A ``gen_ai.prefill`` step span for this request alone (and the start)."""
        self.start()
        return step("prefill", batch_size=1, model=self.metrics.model,
                    **{"gen_ai.request.id": self.metrics.request_id}, **attributes)

    def decode(self, **attributes: Any) -> step:
        """A ``gen_ai.decode`` step span for this request alone."""
        return step("decode", batch_size=1, model=self.metrics.model,
                    **{"gen_ai.request.id": self.metrics.request_id}, **attributes)

    def token(self, count: int = 1, ns: int | None = None) -> None:
        """A chunk of ``count`` output tokens is available now (or at ``ns``)."""
        stamp = _perf_counter_ns() if ns is None else ns
        if not self._tokens and self.metrics.start_ns is None:
            self.metrics.start_ns = self.metrics.arrival_ns
        self._tokens.append(stamp)
        self._counts.append(count)
        self.metrics.output_tokens += count

    def set_output_tokens(self, count: int) -> None:
        """The authoritative output token count (a server's usage), when chunks are not
        one token each."""
        self.metrics.output_tokens = int(count)

    def finish(self, error: str | None = None, message: str = "",
               ns: int | None = None) -> RequestMetrics:
        """The request is over (``error``: a short kind when it failed). Writes it into
        the running session once; returns its metrics."""
        if self._finished:
            return self.metrics
        self._finished = True
        metrics = self.metrics
        metrics.end_ns = _perf_counter_ns() if ns is None else ns
        if error is not None:
            metrics.error = error
            metrics.error_message = message
        write_request(metrics, self.operation, self.provider, self.kind, self.served,
                      self.server)
        return metrics

    @property
    def finished(self) -> bool:
        return self._finished

    def __enter__(self) -> "Request":
        return self

    def __exit__(self, exception_type: Any, exception: Any, traceback: Any) -> None:
        if exception_type is None:
            self.finish()
        else:
            self.finish("exception", f"{exception_type.__name__}: {exception}")


def request(model: str = "", input_tokens: int | None = None, **options: Any) -> Request:
    """``with opsight.llm.request(model=..., input_tokens=...) as r:``; see :class:`Request`."""
    return Request(model, input_tokens, **options)


def iterate_tokens(tokens: Iterator[Any], request: Request) -> Iterator[Any]:
    """Yields from ``tokens`` (a model's token stream), marking each item as one token of
    ``request``, and finishes it when the stream ends."""
    try:
        for item in tokens:
            request.token()
            yield item
    except BaseException as error:
        request.finish("exception", f"{type(error).__name__}: {error}")
        raise
    request.finish()
