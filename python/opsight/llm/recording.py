"""A finished request's timeline as spans of the running recording session.

A request's stamps are taken with ``time.perf_counter_ns()`` while it runs (a stamp and a
list append per token: nothing heavier in the token path). When it finishes,
:func:`write_request` writes it into the session at those times, on a track of request
"lanes" of its own (requests that overlap in time go on different lanes, since spans on one
track must nest), as::

    gen_ai.request                 arrival .. last token (e2e); the GenAI attributes
      gen_ai.time_to_first_token   arrival .. first token (TTFT)
        gen_ai.queue               arrival .. start (when there was any queueing)
      gen_ai.inter_token           one per chunk after the first (ITL), back to back

Adjacent spans share the very same stamp, so the TTFT and ITL spans of a request add up to
its ``gen_ai.request`` span exactly (to the nanosecond of rounding of the clock mapping).
A failed request's span runs to its end and carries ``error.type`` (an error status in the
OTLP export).

The prefill and decode *steps* are not written here: they are live spans
(``opsight.llm.step``) on the thread that runs the model, where the module and operator
spans nest in them.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import opsight._native as _native

from .metrics import RequestMetrics

_perf_counter_ns = time.perf_counter_ns
#: Lane tracks' keys: far above any address (asyncio tasks' tracks are keyed by address).
_LANE_BASE = 0x6C6C_6D00_0000_0000
#: The clock mapping's slope is re-read until its baseline is this long.
_STABLE_BASELINE_NS = 200_000_000


def _clock_pair() -> tuple[int, int]:
    """(recorder ticks, perf_counter_ns) read together: the narrowest of a few brackets."""
    best: tuple[int, int, int] | None = None
    for _ in range(5):
        before = _perf_counter_ns()
        ticks = _native.metric_ticks()
        after = _perf_counter_ns()
        if best is None or after - before < best[0]:
            best = (after - before, ticks, (before + after) // 2)
    assert best is not None
    return best[1], best[2]


class _Writer:
    """Maps perf_counter_ns onto the recorder's ticks and hands out lanes; one per process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.base: tuple[int, int] | None = None
        self.slope: float | None = None
        self.stable = False
        # Per writing thread: each lane's last written end (perf ns) and whether named.
        self.lanes: dict[int, list[int]] = {}
        self.thread_index: dict[int, int] = {}
        self.names: dict[str, int] = {}

    def name_id(self, name: str) -> int:
        found = self.names.get(name)
        if found is None:
            found = self.names[name] = _native.register_name(name, "gen_ai")
        return found

    def note_base(self) -> None:
        """Takes the mapping's first clock reading (before the first request runs, so that
        the slope has a baseline by the time it is written)."""
        if self.base is None and _native.recording():
            with self.lock:
                if self.base is None:
                    self.base = _clock_pair()

    def mapping(self) -> tuple[float, float]:
        """(intercept, slope): ticks = intercept + ns * slope."""
        ticks_now, ns_now = _clock_pair()
        if self.base is None:
            self.base = (ticks_now, ns_now)
        if not self.stable:
            ticks_0, ns_0 = self.base
            if ns_now - ns_0 > 1_000_000:
                self.slope = (ticks_now - ticks_0) / (ns_now - ns_0)
                self.stable = ns_now - ns_0 >= _STABLE_BASELINE_NS
            elif self.slope is None:
                # A first request within a millisecond of the first mapping: ticks are
                # nanoseconds unless the recorder uses the TSC; read the rate over 2 ms.
                time.sleep(0.002)
                ticks_1, ns_1 = _clock_pair()
                self.slope = (ticks_1 - ticks_now) / (ns_1 - ns_now)
                ticks_now, ns_now = ticks_1, ns_1
        slope = self.slope or 1.0
        # Anchored at the latest reading: a slope error grows with the distance from it.
        return ticks_now - ns_now * slope + 0.5, slope

    def lane(self, arrival_ns: int, end_ns: int) -> tuple[int, bool]:
        """A lane of this thread free from ``arrival_ns`` on; (track key, first use)."""
        thread = threading.get_ident()
        lanes = self.lanes.setdefault(thread, [])
        index = self.thread_index.setdefault(thread, len(self.thread_index))
        for lane, last_end in enumerate(lanes):
            if last_end <= arrival_ns:
                lanes[lane] = end_ns
                return _LANE_BASE + (index << 16) + lane, False
        lanes.append(end_ns)
        return _LANE_BASE + (index << 16) + len(lanes) - 1, True


_WRITER = _Writer()
note_clock = _WRITER.note_base


def request_attributes(request: RequestMetrics, operation: str, provider: str,
                       kind: str = "", server: tuple[str, int] | None = None
                       ) -> list[tuple[str, Any]]:
    """The OpenTelemetry GenAI attributes of a request (times in seconds, named after the
    conventions' histograms: ``gen_ai.server.*`` where the model runs, ``gen_ai.client.*``
    for a client's request, ``kind="client"``), then opsight's own. The exporters make the
    histograms of them (docs/llm.md, *Metrics*)."""
    client = kind == "client"
    attributes: list[tuple[str, Any]] = [("gen_ai.operation.name", operation)]
    if client:
        attributes.append(("span.kind", "client"))
    if provider:
        attributes.append(("gen_ai.provider.name", provider))
    if request.model:
        attributes.append(("gen_ai.request.model", request.model))
    if server is not None:
        attributes.append(("server.address", str(server[0])))
        attributes.append(("server.port", int(server[1])))
    if request.input_tokens is not None:
        attributes.append(("gen_ai.usage.input_tokens", int(request.input_tokens)))
    attributes.append(("gen_ai.usage.output_tokens", int(request.output_tokens)))
    if request.ttft_ns is not None:
        attributes.append(("gen_ai.client.operation.time_to_first_chunk" if client else
                           "gen_ai.server.time_to_first_token", request.ttft_ns / 1e9))
    if request.tpot_ns is not None:
        attributes.append(("opsight.llm.time_per_output_token" if client else
                           "gen_ai.server.time_per_output_token", request.tpot_ns / 1e9))
    if request.e2e_ns is not None:
        attributes.append(("gen_ai.client.operation.duration" if client else
                           "gen_ai.server.request.duration", request.e2e_ns / 1e9))
    attributes.append(("gen_ai.request.id", int(request.request_id)))
    if request.queue_ns is not None:
        attributes.append(("opsight.llm.queue_s", request.queue_ns / 1e9))
    if request.tokens_per_second is not None:
        attributes.append(("opsight.llm.tokens_per_second", request.tokens_per_second))
    attributes.append(("opsight.llm.chunks", len(request.token_ns)))
    if request.error is not None:
        attributes.append(("error.type", request.error))
        if request.error_message:
            attributes.append(("opsight.llm.error", request.error_message[:1024]))
    return attributes


def write_request(request: RequestMetrics, operation: str = "text_completion",
                  provider: str = "", kind: str = "", served: Any = None,
                  server: tuple[str, int] | None = None) -> bool:
    """Writes ``request`` into the running session (see the module's documentation);
    ``served``: the request being served where it was created (``opsight.propagation``'s
    context), whose trace its span joins, as a child of the span serving it. Returns False
    when no session records (nothing is written)."""
    if not _native.recording() or not _native.tracing_enabled():
        return False
    stamps = request.token_ns
    last = stamps[-1] if stamps else None
    end = last if request.ok and last is not None else (request.end_ns or last or request.arrival_ns)
    if request.end_ns is not None and not request.ok:
        end = max(end, request.end_ns)
    with _WRITER.lock:
        intercept, slope = _WRITER.mapping()

        def ticks(ns: int) -> int:
            return int(intercept + ns * slope)

        key, first_use = _WRITER.lane(request.arrival_ns, end)
        begin_at, end_at, add_arg = _native.begin_at, _native.end_at, _native.add_arg
        name_id = _WRITER.name_id
        lane = (key - _LANE_BASE) & 0xFFFF
        _native.switch_track(key, f"gen_ai requests, lane {lane + 1}" if first_use else "")
        try:
            arrival = ticks(request.arrival_ns)
            if not begin_at(name_id("gen_ai.request"), arrival):
                return False
            if served is not None:
                _native.join_remote_trace(_native.format_traceparent(
                    served.trace_id, served.span_id, served.flags))
            for attribute, value in request_attributes(request, operation, provider, kind,
                                                       server):
                add_arg(attribute, value)
            if stamps:
                first = ticks(stamps[0])
                begin_at(name_id("gen_ai.time_to_first_token"), arrival)
                if request.start_ns is not None and request.start_ns > request.arrival_ns:
                    begin_at(name_id("gen_ai.queue"), arrival)
                    end_at(ticks(min(request.start_ns, stamps[0])))
                end_at(first)
                previous = first
                counts = request.token_counts
                itl_id = name_id("gen_ai.inter_token")
                for index in range(1, len(stamps)):
                    now = ticks(stamps[index])
                    begin_at(itl_id, previous)
                    if counts and counts[index] != 1:
                        add_arg("gen_ai.usage.output_tokens", counts[index])
                    end_at(now)
                    previous = now
            elif request.start_ns is not None and request.start_ns > request.arrival_ns:
                begin_at(name_id("gen_ai.queue"), arrival)
                end_at(ticks(min(request.start_ns, end)))
            end_at(ticks(end))
        finally:
            _native.switch_track(0)
    return True
