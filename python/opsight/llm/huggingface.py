"""Token-level spans of Hugging Face ``generate``, without changing the call.

::

    from opsight import llm

    with opsight.profile() as prof, llm.instrument(model) as generations:
        output = model.generate(input_ids, max_new_tokens=32)     # unchanged
    generations.requests[0].ttft_ns

Each row of the batch is a request (:class:`~opsight.llm.timeline.Request`). How the
steps and tokens are seen, through the public ``generate`` API and the model object only:

- tokens: a streamer (``BaseStreamer``) is passed to ``generate`` (chained to the caller's
  own, which still receives everything); its first ``put`` is the prompt, each later one
  the batch's next token, stamped when ``generate`` hands it over: TTFT and the ITLs.
  A row's tokens end at its first end-of-sequence token (included); the padding that
  follows it is not counted. Beam search takes no streamer: there only e2e and the counts
  are known.
- steps: for the call, the model's ``__call__`` (the decode loop reads ``self.__call__``)
  and its ``_prefill`` method (transformers 5.x; its ``self(...)`` is the prefill forward)
  are shadowed on the instance by wrappers that open a ``gen_ai.prefill`` /
  ``gen_ai.decode`` span around the call, so the module spans (``GPT2LMHeadModel`` ...)
  and operators nest in them. Both are put back when ``generate`` returns. Where
  ``_prefill`` does not exist the first model call is taken for the prefill.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Iterator, Sequence

from .metrics import RequestMetrics
from .timeline import Request, step

_perf_counter_ns = time.perf_counter_ns


def model_name(model: Any) -> str:
    """The model's name for ``gen_ai.request.model``: its ``name_or_path``, else its
    config's ``model_type``, else its class's name."""
    name = getattr(model, "name_or_path", "") or ""
    if not name:
        config = getattr(model, "config", None)
        name = getattr(config, "model_type", "") or ""
    return name or type(model).__name__


class _Streamer:
    """A ``BaseStreamer`` (duck-typed: put/end) stamping each row's tokens."""

    def __init__(self, requests: Sequence[Request], eos: set[int], chained: Any) -> None:
        self.requests = list(requests)
        self.eos = eos
        self.chained = chained
        self.prompt_seen = False
        self.done = [False] * len(self.requests)

    def put(self, value: Any) -> None:
        stamp = _perf_counter_ns()
        if not self.prompt_seen:
            self.prompt_seen = True
        else:
            tokens = value.reshape(-1).tolist() if hasattr(value, "reshape") else list(value)
            eos = self.eos
            done = self.done
            for row, token in enumerate(tokens[:len(self.requests)]):
                if done[row]:
                    continue
                self.requests[row].token(1, stamp)
                if token in eos:
                    done[row] = True
        if self.chained is not None:
            self.chained.put(value)

    def end(self) -> None:
        if self.chained is not None:
            self.chained.end()


def _eos_ids(model: Any, kwargs: dict[str, Any]) -> set[int]:
    value = kwargs.get("eos_token_id")
    if value is None:
        config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
        value = getattr(config, "eos_token_id", None)
    if value is None:
        return set()
    if isinstance(value, int):
        return {value}
    try:
        return {int(item) for item in (value.tolist() if hasattr(value, "tolist") else value)}
    except TypeError:
        return set()


def _input_counts(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, list[int]]:
    """(batch size, input tokens per row) of a decoder-only ``generate`` call."""
    input_ids = kwargs.get("input_ids", args[0] if args else None)
    if input_ids is None:
        input_ids = kwargs.get("inputs")
    if input_ids is None or not hasattr(input_ids, "shape") or len(input_ids.shape) != 2:
        return 1, [0]
    batch, length = int(input_ids.shape[0]), int(input_ids.shape[1])
    mask = kwargs.get("attention_mask")
    if mask is not None and hasattr(mask, "sum"):
        return batch, [int(count) for count in mask.sum(dim=-1).tolist()]
    return batch, [length] * batch


def _beam_search(model: Any, kwargs: dict[str, Any]) -> bool:
    beams = kwargs.get("num_beams")
    if beams is None:
        config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
        beams = getattr(config, "num_beams", 1)
    return bool(beams and beams > 1)


def _output_counts(output: Any, input_length: int, batch: int, eos: set[int]) -> list[int] | None:
    sequences = getattr(output, "sequences", output)
    if not hasattr(sequences, "shape") or len(sequences.shape) != 2 or sequences.shape[0] != batch:
        return None
    counts = []
    for row in sequences[:, input_length:].tolist():
        count = len(row)
        for position, token in enumerate(row):
            if token in eos:
                count = position + 1
                break
        counts.append(count)
    return counts


def traced_generate(model: Any, generate: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                    *, name: str = "", requests: Sequence[Request] | None = None,
                    arrival_ns: int | None = None) -> tuple[Any, list[RequestMetrics]]:
    """Calls ``generate(*args, **kwargs)`` (the model's original bound ``generate``) with
    token-level spans (see the module's documentation); returns (its output, the rows'
    metrics). ``requests``: Request timelines to use (one per row), e.g. with an earlier
    arrival; by default new ones arriving now."""
    name = name or model_name(model)
    batch, inputs = _input_counts(args, kwargs)
    if requests is None:
        arrival = _perf_counter_ns() if arrival_ns is None else arrival_ns
        requests = [Request(name, inputs[row], arrival_ns=arrival, provider="transformers")
                    for row in range(batch)]
    else:
        requests = list(requests)
        if len(requests) != batch:
            raise ValueError(f"{len(requests)} requests for a batch of {batch}")
        for row, request in enumerate(requests):
            if request.metrics.input_tokens is None:
                request.metrics.input_tokens = inputs[row]
    start = _perf_counter_ns()
    for request in requests:
        request.start(start)
    eos = _eos_ids(model, kwargs)
    beam = _beam_search(model, kwargs)
    call_kwargs = dict(kwargs)
    streamer = None
    if not beam:
        streamer = _Streamer(requests, eos, kwargs.get("streamer"))
        call_kwargs["streamer"] = streamer

    state = {"steps": 0}
    attributes = {"gen_ai.request.model": name}
    original_prefill = getattr(type(model), "_prefill", None)
    instance = model.__dict__

    def call(*call_args: Any, **call_kw: Any) -> Any:
        kind = "prefill" if state["steps"] == 0 and original_prefill is None else "decode"
        state["steps"] += 1
        with step(kind, batch_size=batch, **attributes, **{"gen_ai.step": state["steps"]}):
            return type(model).__call__(model, *call_args, **call_kw)

    def prefill(*call_args: Any, **call_kw: Any) -> Any:
        state["steps"] += 1
        with step("prefill", batch_size=batch, **attributes,
                  **{"gen_ai.usage.input_tokens": sum(inputs)}):
            return original_prefill(model, *call_args, **call_kw)

    shadowed = [key for key in ("__call__", "_prefill") if key in instance]
    saved = {key: instance[key] for key in shadowed}
    instance["__call__"] = call
    if original_prefill is not None:
        instance["_prefill"] = prefill
    error: BaseException | None = None
    try:
        output = generate(*args, **call_kwargs)
    except BaseException as raised:
        error = raised
        raise
    finally:
        instance.pop("__call__", None)
        instance.pop("_prefill", None)
        instance.update(saved)
        end = _perf_counter_ns()
        if error is not None:
            for request in requests:
                request.finish("exception", f"{type(error).__name__}: {error}", ns=end)
    input_length = None
    input_ids = kwargs.get("input_ids", args[0] if args else kwargs.get("inputs"))
    if hasattr(input_ids, "shape") and len(input_ids.shape) == 2:
        input_length = int(input_ids.shape[1])
    counts = _output_counts(output, input_length, batch, eos) if input_length is not None else None
    results = []
    for row, request in enumerate(requests):
        if counts is not None:
            if beam or not request.metrics.token_ns:
                request.metrics.output_tokens = counts[row]
            elif counts[row] != request.metrics.output_tokens:
                request.metrics.error_message = (f"the streamer saw {request.metrics.output_tokens}"
                                                 f" tokens, the output has {counts[row]}")
                request.set_output_tokens(counts[row])
        results.append(request.finish(ns=end))
    return output, results


class Instrumented:
    """What :func:`instrument` yields: the metrics of every request generated meanwhile."""

    def __init__(self) -> None:
        self.requests: list[RequestMetrics] = []
        self._lock = threading.Lock()

    def add(self, metrics: list[RequestMetrics]) -> None:
        with self._lock:
            self.requests.extend(metrics)


@contextlib.contextmanager
def instrument(model: Any, name: str = "") -> Iterator[Instrumented]:
    """While the block runs, ``model.generate(...)`` records token-level spans (see the
    module's documentation); the block's ``generate`` calls are unchanged otherwise. The
    yielded object's ``requests`` lists each row's :class:`RequestMetrics`."""
    collected = Instrumented()
    original = model.generate
    had_own = "generate" in model.__dict__

    def generate(*args: Any, **kwargs: Any) -> Any:
        output, metrics = traced_generate(model, original, args, kwargs, name=name)
        collected.add(metrics)
        return output

    model.__dict__["generate"] = generate
    try:
        yield collected
    finally:
        if had_own:
            model.__dict__["generate"] = original
        else:
            model.__dict__.pop("generate", None)
