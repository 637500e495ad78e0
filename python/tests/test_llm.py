"""opsight.llm (docs/llm.md): token-level spans of Hugging Face generate and of a plain decode
loop, the metrics' definitions, goodput, sweeps, and the streaming client against the
reference server of examples/llm over real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import OPSIGHT, PYTHON, clean_environment, require

import opsight
from opsight import llm
from opsight.llm import load as llm_load
from opsight.llm.client import Endpoint, StreamParser, stream_request

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "examples" / "llm" / "server.py"


def _busy(ns: int) -> int:
    """Spins for at least ``ns``; returns how long it really took (more when the machine
    is busy and the thread was descheduled: what a planted cost is compared with)."""
    start = time.perf_counter_ns()
    end = start + ns
    while (now := time.perf_counter_ns()) < end:
        pass
    return now - start


# ---- definitions -----------------------------------------------------------------------

def test_percentiles_and_intervals_equal_numpys():
    numpy = require("numpy")
    generator = numpy.random.default_rng(3)
    for size in (1, 2, 7, 100, 1001):
        values = generator.lognormal(0, 1, size).tolist()
        for q in (0, 1, 50, 90, 95, 99, 99.9, 100):
            assert llm.percentile(values, q) == pytest.approx(numpy.percentile(values, q),
                                                              rel=1e-12)
    assert llm.percentile([], 50) is None


def test_request_metrics_follow_the_definitions():
    metrics = llm.RequestMetrics(1, "m", 5, output_tokens=4, arrival_ns=100, start_ns=150,
                                 token_ns=[400, 500, 650, 700], token_counts=[1, 1, 1, 1],
                                 end_ns=900)
    assert metrics.queue_ns == 50
    assert metrics.prefill_ns == 250
    assert metrics.ttft_ns == 300
    assert metrics.itl_ns == [100, 150, 50]
    assert metrics.e2e_ns == 600 == metrics.ttft_ns + sum(metrics.itl_ns)
    assert metrics.tpot_ns == pytest.approx(100.0)  # (700 - 400) / 3
    assert metrics.completion_ns == 800
    assert metrics.tokens_per_second == pytest.approx(4 / 600e-9)
    one = llm.RequestMetrics(2, token_ns=[10], output_tokens=1, arrival_ns=0)
    assert one.tpot_ns is None and one.itl_ns == []


def test_slo_parsing():
    terms = llm.parse_slo("ttft_p99=200ms,tpot_p99=50ms, e2e=2s, itl_p90=300us")
    assert [(t.metric, t.bound_ns, t.percentile) for t in terms] == [
        ("ttft", 200e6, 99.0), ("tpot", 50e6, 99.0), ("e2e", 2e9, None), ("itl", 300e3, 90.0)]
    for bad in ("ttft", "speed_p99=1ms", "ttft_p0=1ms", "ttft_p99=fast", "ttft=-1ms"):
        with pytest.raises(ValueError):
            llm.parse_slo(bad)


def test_goodput_equals_an_independent_count():
    import random

    generator = random.Random(5)
    requests = []
    for index in range(400):
        arrival = index * 1_000_000
        ttft = generator.randint(1, 400) * 1_000_000
        step = generator.randint(1, 80) * 1_000_000
        stamps = [arrival + ttft + step * k for k in range(generator.randint(1, 6))]
        failed = generator.random() < 0.05
        requests.append(llm.RequestMetrics(index, output_tokens=len(stamps), arrival_ns=arrival,
                                           start_ns=arrival, token_ns=stamps,
                                           token_counts=[1] * len(stamps),
                                           end_ns=stamps[-1] + 1,
                                           error="connection" if failed else None))
    slo = llm.parse_slo("ttft_p99=200ms,tpot_p99=50ms")
    summary = llm.summarize(requests, slo=slo, duration_ns=4_000_000_000)
    good = 0
    for request in requests:
        if request.error:
            continue
        ttft = request.token_ns[0] - request.arrival_ns
        tpot = ((request.token_ns[-1] - request.token_ns[0]) / (len(request.token_ns) - 1)
                if len(request.token_ns) > 1 else 0)
        good += ttft <= 200e6 and tpot <= 50e6
    assert summary["good_requests"] == good
    assert summary["goodput_requests_per_second"] == pytest.approx(good / 4.0)
    assert summary["failed"] == sum(1 for r in requests if r.error)
    assert summary["errors"] == {"connection": summary["failed"]}
    numpy = require("numpy")
    ttfts = [r.ttft_ns for r in requests if not r.error]
    assert summary["slo_held"]["ttft_p99=200ms"]["observed_ns"] == pytest.approx(
        numpy.percentile(ttfts, 99))


# ---- in process: Hugging Face generate -------------------------------------------------

def _generate(model_name: str, batch: int = 1, new_tokens: int = 12, prompt: int = 10):
    torch = require("torch")
    require("transformers")
    require("pandas")
    torch.manual_seed(0)
    model = llm.random_model(model_name)
    ids = torch.randint(2, model.config.vocab_size, (batch, prompt))
    with opsight.profile() as prof, llm.instrument(model) as generations:
        output = model.generate(ids, attention_mask=torch.ones_like(ids),
                                max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                do_sample=False)
    return model, ids, output, generations.requests, prof.dataframe()


def test_generate_on_a_random_gpt2_gives_token_level_spans():
    numpy = require("numpy")
    model, ids, output, requests, frame = _generate("gpt2", new_tokens=16)
    (request,) = requests
    assert request.ok, request.error_message
    # Token counts equal what generate returned.
    assert request.output_tokens == output.shape[1] - ids.shape[1] == 16
    assert request.input_tokens == ids.shape[1]
    assert len(request.token_ns) == 16 and len(request.itl_ns) == 15
    assert request.ttft_ns + sum(request.itl_ns) == request.e2e_ns

    spans = frame[frame["category"] == "gen_ai"]
    (row,) = spans[spans["name"] == "gen_ai.request"].itertuples()
    ttft = spans[spans["name"] == "gen_ai.time_to_first_token"]["dur"].tolist()
    itl = spans[spans["name"] == "gen_ai.inter_token"]["dur"].tolist()
    assert len(ttft) == 1 and len(itl) == 15
    # In the trace, TTFT + the ITLs add up to e2e within the clock mapping's rounding (1 ns a span).
    assert abs(ttft[0] + sum(itl) - row.dur) <= 16
    # ... and the trace's times are the measured ones within the tracer's resolution.
    assert abs(row.dur - request.e2e_ns) <= 5_000 + request.e2e_ns * 1e-4
    for measured, traced in zip(request.itl_ns, itl):
        assert abs(measured - traced) <= 2_000
    # The GenAI attributes.
    request_row = frame[frame["name"] == "gen_ai.request"].iloc[0]
    assert request_row["gen_ai.request.model"] == "random-gpt2"
    assert request_row["gen_ai.usage.input_tokens"] == 10
    assert request_row["gen_ai.usage.output_tokens"] == 16
    assert request_row["gen_ai.server.time_to_first_token"] == pytest.approx(request.ttft_ns / 1e9)
    assert request_row["gen_ai.server.time_per_output_token"] == pytest.approx(request.tpot_ns / 1e9)
    # Percentiles of the summary equal numpy's on the spans' DataFrame.
    summary = llm.summarize(requests)
    for q in (50, 90, 99):
        assert summary["metrics"]["itl"][f"p{q}"] == pytest.approx(numpy.percentile(itl, q),
                                                                    abs=2_000)
    # One prefill step and 15 decode steps, each holding the model's module spans.
    steps = frame[frame["name"].isin(["gen_ai.prefill", "gen_ai.decode"])]
    assert (steps["name"] == "gen_ai.prefill").sum() == 1
    assert (steps["name"] == "gen_ai.decode").sum() == 15
    top = frame[frame["name"] == "GPT2LMHeadModel"]
    assert len(top) == 16
    parents = frame.set_index("span_id").loc[top["parent_span_id"], "name"]
    assert set(parents) == {"gen_ai.prefill", "gen_ai.decode"}
    # generate is left as it was.
    assert "generate" not in model.__dict__ and "__call__" not in model.__dict__


def test_generate_on_a_llama_style_batch_counts_each_row():
    model, ids, output, requests, frame = _generate("llama", batch=2, new_tokens=6, prompt=7)
    assert [r.output_tokens for r in requests] == [6, 6]
    assert [r.input_tokens for r in requests] == [7, 7]
    assert (frame["name"] == "gen_ai.request").sum() == 2
    assert (frame["name"] == "LlamaForCausalLM").sum() == 6
    lanes = set(frame[frame["name"] == "gen_ai.request"]["thread"])
    assert len(lanes) == 2  # overlapping requests go on lanes of their own


def test_generate_stops_counting_a_row_at_its_end_of_sequence():
    torch = require("torch")
    require("transformers")
    model = llm.random_model("gpt2")
    ids = torch.randint(2, 500, (1, 8))
    plain = model.generate(ids, max_new_tokens=10, do_sample=False)
    # Make the model's greedy 4th token the end of sequence: generate stops there.
    fourth = int(plain[0, 8 + 3])
    with llm.instrument(model) as generations:
        output = model.generate(ids, max_new_tokens=10, do_sample=False, eos_token_id=fourth)
    first = next(i for i, t in enumerate(output[0, 8:].tolist()) if t == fourth)
    assert generations.requests[0].output_tokens == first + 1


# ---- in process: a plain decode loop with planted costs --------------------------------

def test_a_decode_loop_with_planted_costs_gives_them_back_exactly():
    # Each measure is bracketed by the test's own clock reads around the call that stamps
    # it (the same clock): a busy machine can deschedule the thread anywhere, and the
    # measure must still lie between the two reads, and hold the planted cost it encloses.
    prefill_ns, decode_ns, tokens, queue_ns = 30_000_000, 6_000_000, 12, 10_000_000
    before_token, after_token, decoded = [], [], []
    with opsight.profile() as prof:
        arrival = time.perf_counter_ns()
        queued = _busy(queue_ns)  # waited in a queue
        with llm.request(model="planted", input_tokens=64, arrival_ns=arrival) as request:
            before_prefill = time.perf_counter_ns()
            with request.prefill():  # the queue ends, processing starts
                in_prefill = time.perf_counter_ns()
                prefilled = _busy(prefill_ns)
            for index in range(tokens):
                if index:
                    with request.decode():
                        decoded.append(_busy(decode_ns))
                before_token.append(time.perf_counter_ns())
                request.token()
                after_token.append(time.perf_counter_ns())
    metrics = request.metrics
    assert metrics.output_tokens == tokens
    assert max(queued, before_prefill - arrival) <= metrics.queue_ns <= in_prefill - arrival
    assert prefilled <= metrics.prefill_ns <= after_token[0] - before_prefill
    assert before_token[0] - arrival <= metrics.ttft_ns <= after_token[0] - arrival
    assert len(metrics.itl_ns) == len(decoded) == tokens - 1
    for index, (itl, planted) in enumerate(zip(metrics.itl_ns, decoded), start=1):
        assert before_token[index] - after_token[index - 1] <= itl
        assert itl <= after_token[index] - before_token[index - 1]
        assert itl >= planted  # the planted cost is inside the interval
    steps = tokens - 1
    assert (before_token[-1] - after_token[0]) / steps <= metrics.tpot_ns
    assert metrics.tpot_ns <= (after_token[-1] - before_token[0]) / steps
    frame = prof.dataframe()
    assert (frame["name"] == "gen_ai.decode").sum() == tokens - 1
    queue = frame[frame["name"] == "gen_ai.queue"]["dur"].iloc[0]
    assert queue == pytest.approx(metrics.queue_ns, rel=1e-3)  # through the clock mapping


def test_a_request_that_raises_is_recorded_as_failed():
    with opsight.profile() as prof:
        with pytest.raises(RuntimeError):
            with llm.request(model="m") as request:
                request.token()
                raise RuntimeError("out of memory")
    assert request.metrics.error == "exception"
    row = prof.dataframe().query("name == 'gen_ai.request'").iloc[0]
    assert row["error.type"] == "exception"


# ---- load: sweeps -----------------------------------------------------------------------

def test_the_pareto_frontier_keeps_the_points_nothing_beats():
    from opsight.llm.plots import pareto_frontier

    points = [(10.0, 100.0), (12.0, 90.0), (15.0, 180.0), (30.0, 170.0), (40.0, 260.0)]
    assert pareto_frontier(points) == [(10.0, 100.0), (15.0, 180.0), (40.0, 260.0)]
    assert pareto_frontier([]) == []


def test_device_moves_the_in_process_model_or_says_why_it_cannot():
    torch = require("torch")
    require("transformers")
    for device in ("cpu", "cuda"):
        completed = subprocess.run(
            [OPSIGHT, "bench", "--generate", "random:gpt2", "--requests", "2", "--output-len",
             "3", "--device", device, "--no-store", "--format", "json"],
            capture_output=True, text=True, timeout=120, env=clean_environment())
        if device == "cuda" and not torch.cuda.is_available():
            assert completed.returncode == 1, completed.stderr
            assert "--device cuda: torch sees no CUDA device here" in completed.stderr
            continue
        assert completed.returncode == 0, completed.stderr
        report = json.loads(completed.stdout)
        assert report["points"][0]["summary"]["completed"] == 2


def test_a_plot_file_matplotlib_cannot_write_is_refused_before_any_request(tmp_path):
    completed = subprocess.run(
        [OPSIGHT, "bench", "--generate", "http://127.0.0.1:9/v1", "--requests", "1",
         "--plot", str(tmp_path / "pareto.txt"), "--no-store"],
        capture_output=True, text=True, timeout=60, env=clean_environment())
    assert completed.returncode == 64, completed.stderr
    assert "--plot" in completed.stderr and ".svg, .png, .pdf" in completed.stderr
    assert not (tmp_path / "pareto.txt").exists()


def _capacity_backend(slots: int, step_ns: int, tokens: int):
    """A server that serves at most ``slots`` requests at once; each token takes step_ns."""
    semaphore = threading.Semaphore(slots)

    def send(spec, request):
        with semaphore:
            request.start()
            for _ in range(tokens):
                time.sleep(step_ns / 1e9)
                request.token()
        request.finish()

    return send


def test_the_sweep_stops_at_a_planted_saturation_point():
    from opsight.llm.command import run_sweep

    # Two slots: concurrency 4 adds nothing. The tolerance is wide (25%) so that a busy
    # machine's uneven sleeps cannot pass for growth; doubling from 1 to 2 is far above it.
    send = _capacity_backend(slots=2, step_ns=5_000_000, tokens=5)
    report = run_sweep(send, model="planted", operation="text_completion", key="concurrency",
                       values=[1, 2, 4, 8, 16], requests=16, input_length="8",
                       output_length="5", saturation=0.25, store=False)
    assert [point["concurrency"] for point in report["points"]] == [1, 2, 4]
    assert report["saturated_at"] == 2 and report["stopped_early"]
    rates = [point["summary"]["output_tokens_per_second"] for point in report["points"]]
    assert rates[1] > 1.6 * rates[0]


def _planted_backend(latency_of):
    """A back-end that plants each request's stamps: ``latency_of(index)`` -> (ttft_ns,
    e2e_ns) for the index-th request offered; three tokens, no waiting."""
    lock = threading.Lock()
    counter = iter(range(1 << 30))

    def send(spec, request):
        with lock:
            index = next(counter)
        ttft, e2e = latency_of(index)
        arrival = request.metrics.arrival_ns
        request.start(arrival)
        request.token(1, arrival + ttft)
        request.token(1, arrival + (ttft + e2e) // 2)
        request.token(1, arrival + e2e)

    return send


def test_steady_state_detection_leaves_a_planted_transient_out():
    import random

    jitter = random.Random(5)
    values = {}

    def latency(index):
        noise = 1 + 0.05 * jitter.random()
        base = 50_000_000 if index < 15 else 10_000_000  # 15 slow requests at the start
        values[index] = int(base * noise)
        return values[index] // 5, values[index]

    specs = llm_load.make_requests(60, "4", "3")
    result = llm_load.run_load(_planted_backend(latency), specs, concurrency=1,
                               steady_state=True)
    assert result.warmup_requests == 15 and result.offered == 60
    assert result.summary["warmup_requests"] == 15 and result.summary["completed"] == 45
    assert result.summary["metrics"]["e2e"]["max"] < 11_000_000
    # The rule alone: a flat series has no transient; a too short one cannot tell.
    assert llm_load.steady_state_start([10.0, 11.0, 9.0, 10.5] * 10) == 0
    assert llm_load.steady_state_start([100.0] * 5 + [1.0] * 10) == 0


def test_until_tight_stops_once_the_intervals_are_narrow_and_not_before():
    import random

    narrow = random.Random(1)
    specs = llm_load.make_requests(3000, "4", "3")
    result = llm_load.run_load(
        _planted_backend(lambda i: (int(2e6 * (1 + 0.02 * narrow.random())),
                                    int(10e6 * (1 + 0.02 * narrow.random())))),
        specs, concurrency=4, until_tight=0.05, min_requests=50)
    assert result.stop_reason and "within +/-5%" in result.stop_reason
    # p99 has a distribution-free interval from 563 requests on; it stops soon after.
    assert 563 <= result.offered < 800, result.offered
    assert llm_load.tight_enough(result.requests, 0.05)
    assert result.summary["stopped_early"] == result.stop_reason

    wide = random.Random(2)
    specs = llm_load.make_requests(800, "4", "3")
    result = llm_load.run_load(
        _planted_backend(lambda i: (int(2e6 * wide.lognormvariate(0, 1)),
                                    int(10e6 * (1 + wide.lognormvariate(0, 1))))),
        specs, concurrency=4, until_tight=0.05)
    assert result.offered == 800 and not result.stop_reason  # never tight: every request ran
    with pytest.raises(ValueError, match="relative width"):
        llm_load.run_load(_planted_backend(lambda i: (1, 2)), specs, concurrency=1,
                          until_tight=5)


def test_poisson_arrivals_count_queueing_from_the_scheduled_arrival():
    send = _capacity_backend(slots=1, step_ns=1_000_000, tokens=3)
    specs = llm_load.make_requests(20, "uniform:4:8", "3", seed=1)
    result = llm_load.run_load(send, specs, rate=2000.0, seed=1)
    assert result.summary["completed"] == 20
    # Offered far beyond capacity (about 330 requests/s): requests queue.
    assert result.summary["metrics"]["queue"]["max"] > 10_000_000
    assert all(4 <= spec.input_tokens <= 8 for spec in specs)


def test_length_distributions():
    import random

    generator = random.Random(0)
    assert llm_load.parse_length("7")(generator) == 7
    values = [llm_load.parse_length("uniform:3:5")(generator) for _ in range(100)]
    assert set(values) == {3, 4, 5}
    values = [llm_load.parse_length("normal:50:5")(generator) for _ in range(2000)]
    assert abs(sum(values) / len(values) - 50) < 1
    for bad in ("0", "uniform:5:3", "normal:x:1", "zipf:1"):
        with pytest.raises(ValueError):
            llm_load.parse_length(bad)


# ---- the streaming client ---------------------------------------------------------------

def _canned_stream(tokens: int, chat: bool = False) -> list[bytes]:
    lines = []
    for index in range(tokens):
        choice = ({"index": 0, "delta": {"content": f" t{index}"}, "finish_reason": None}
                  if chat else {"index": 0, "text": f" t{index}", "finish_reason": None})
        lines.append(b"data: " + json.dumps({"id": "x", "object": "text_completion",
                                             "choices": [choice]}).encode() + b"\n")
        lines.append(b"\n")
    lines.append(b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": '
                 + str(tokens).encode() + b'}}\n')
    lines.append(b"data: [DONE]\n")
    return lines


def test_the_parser_counts_tokens_not_chunks():
    request = llm.Request("m")
    parser = StreamParser(request, chat=True)
    parser.line(b'data: {"choices": [{"delta": {"role": "assistant", "content": ""}}]}\n')
    parser.line(b"\n")
    assert not request.metrics.token_ns  # the role chunk is no token
    for line in _canned_stream(4, chat=True):
        parser.line(line)
    parser.finish()
    assert request.metrics.output_tokens == 4 and len(request.metrics.token_ns) == 4
    assert request.metrics.input_tokens == 3


def _lines_of(payloads: list, chat: bool = False) -> list[bytes]:
    lines = []
    for payload in payloads:
        if isinstance(payload, bytes):
            lines.append(payload)
            continue
        lines.append(b"data: " + json.dumps(payload).encode() + b"\n")
        lines.append(b"\n")
    return lines


def _chunk(text, chat=False, **extra):
    choice = ({"index": 0, "delta": {"content": text}, "finish_reason": None} if chat
              else {"index": 0, "text": text, "finish_reason": None})
    return {"id": "cmpl-9", "object": "x", "created": 17, "model": "m", "choices": [choice],
            **extra}


@pytest.mark.parametrize("chat", [False, True])
def test_the_fast_path_counts_what_decoding_counts(chat):
    """Chunks of one shape are counted without decoding; any other shape is decoded: a
    text with a quote, a backslash or non-ASCII, a field that appears, an empty text, a
    null usage (vLLM) all give the tokens and texts that full decoding gives."""
    texts = [" a", " b", ' say "hi"', " c", "back\\slash", " d", "é", " e", "", " f", " g",
             "\n", " h"]
    payloads = [_chunk(text, chat) for text in texts]
    payloads.insert(5, _chunk(" x", chat, usage=None))
    payloads.insert(9, _chunk(" y", chat, system_fingerprint="fp"))
    payloads.append({"id": "cmpl-9", "choices": [], "usage": {"prompt_tokens": 2,
                                                              "completion_tokens": 14}})
    lines = _lines_of(payloads, chat) + [b"data: [DONE]\n"]
    expected = [payload["choices"][0]["delta" if chat else "text"] for payload in payloads
                if payload.get("choices")]
    expected = [(text["content"] if chat else text) for text in expected]
    expected = [text for text in expected if text]

    decoded = []

    def counting_loads(data):
        decoded.append(data)
        return json.loads(data)

    for way in ("consume", "line"):
        request = llm.Request("m")
        parser = StreamParser(request, chat=chat, keep_text=True)
        decoded.clear()
        parser._loads = counting_loads
        if way == "consume":
            import io
            parser.consume(io.BytesIO(b"".join(lines)).readline)
        else:
            for line in lines:
                parser.line(line)
        parser.finish()
        assert parser.text_parts == expected, way
        assert len(request.metrics.token_ns) == len(expected) == 14
        assert request.metrics.output_tokens == 14 and request.metrics.input_tokens == 2
        # Plain chunks of a shape seen before were matched, not decoded.
        assert len(decoded) < len(payloads), (way, len(decoded))
    # A regular stream: the first chunk and the usage chunk are all that is decoded.
    lines = _lines_of([_chunk(f" w{index}", chat) for index in range(50)]
                      + [{"choices": [], "usage": {"completion_tokens": 50}}])
    request = llm.Request("m")
    parser = StreamParser(request, chat=chat)
    decoded.clear()
    parser._loads = counting_loads
    import io
    parser.consume(io.BytesIO(b"".join(lines) + b"data: [DONE]\n").readline)
    parser.finish()
    assert len(decoded) == 2 and len(request.metrics.token_ns) == 50
    assert request.metrics.output_tokens == 50


@pytest.mark.parametrize("cut", [b'data: {"id": "cmpl-9", "object": "x", "created": 17, '
                                 b'"model": "m", "choices": [{"index": 0, "text": " w',
                                 b'data: {"id": "cmpl-9", "object": "x", "created": 17, '
                                 b'"model": "m", "choices": [{"index": 0, "text": " w", '
                                 b'"finish_reason": null}\n'])
def test_a_chunk_cut_short_after_the_template_is_learnt_is_malformed(cut):
    import io

    from opsight.llm.client import StreamError

    lines = _lines_of([_chunk(" a"), _chunk(" b")]) + [cut]
    parser = StreamParser(llm.Request("m"), chat=False)
    with pytest.raises(StreamError) as raised:
        parser.consume(io.BytesIO(b"".join(lines)).readline)
    assert raised.value.kind == "malformed"
    assert len(parser.request.metrics.token_ns) == 2


def test_the_clients_own_cost_per_streamed_token():
    """The parser's cost per token against a no-op stream (the same lines, read and
    dropped) in the same run, and the tokens/s one core sustains (at least 5,000, so that
    the client measures the server and not itself). The published figures come from
    benchmarks/python/llm_client_cost.py (docs/llm.md)."""
    import io

    body = b"".join(_canned_stream(20_000))

    def noop() -> int:
        readline = io.BytesIO(body).readline
        begin = time.perf_counter_ns()
        while readline(1 << 16):
            pass
        return time.perf_counter_ns() - begin

    def parse() -> int:
        parser = StreamParser(llm.Request("m"), chat=False)
        readline = io.BytesIO(body).readline
        begin = time.perf_counter_ns()
        parser.consume(readline)
        elapsed = time.perf_counter_ns() - begin
        assert parser.request.metrics.output_tokens == 20_000
        return elapsed

    base = min(noop() for _ in range(5))
    cost = min(parse() for _ in range(5))
    per_token_ns = (cost - base) / 20_000
    print(f"client cost: {per_token_ns:.0f} ns per token over a no-op stream "
          f"({cost / max(base, 1):.1f}x), {20_000 / (cost / 1e9):.0f} tokens/s on one core")
    assert 20_000 / (cost / 1e9) > 5_000


# ---- against the reference server over real HTTP -----------------------------------------

@pytest.fixture(scope="module")
def server():
    require("torch")
    require("transformers")
    process = subprocess.Popen([PYTHON, str(SERVER), "--port", "0", "--model", "gpt2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=clean_environment())
    line = process.stdout.readline()
    if "http://" not in line:
        process.kill()
        raise AssertionError(f"the server did not start: {line} {process.stderr.read()}")
    url = line.split()[-1]
    yield url
    process.terminate()
    process.wait(timeout=10)


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_streaming_from_the_reference_server(server, api):
    endpoint = Endpoint(server, api=api, model="random-gpt2")
    request = stream_request(endpoint, "a b c d e", 7, llm.Request("random-gpt2"))
    metrics = request.metrics
    assert metrics.ok, metrics.error_message
    assert metrics.output_tokens == 7 and len(metrics.token_ns) == 7
    assert metrics.input_tokens == 5
    assert 0 < metrics.ttft_ns <= metrics.e2e_ns <= metrics.completion_ns


@pytest.mark.parametrize("fault, kind", [("cut_json", "malformed"),
                                         ("error_event", "server_error"),
                                         ("reset", "connection"), ("stall", "timeout"),
                                         ("http_500", "http_error")])
def test_malformed_streams_fail_one_request_and_the_run_goes_on(server, fault, kind):
    endpoint = Endpoint(server, first_token_timeout=0.5, idle_timeout=0.5)
    specs = llm_load.make_requests(6, "4", "5", seed=2)
    specs[2].extra = {"opsight_fault": fault, "opsight_stall_s": 1.5}
    result = llm_load.run_load(llm_load.http_backend(endpoint), specs, concurrency=2)
    by_id = sorted(result.requests, key=lambda r: r.request_id)
    failed = [r for r in by_id if not r.ok]
    assert len(failed) == 1, [(r.error, r.error_message) for r in failed]
    assert failed[0].error == kind, failed[0].error_message
    assert failed[0].error_message
    assert result.summary["completed"] == 5 and result.summary["failed"] == 1
    assert result.summary["errors"] == {kind: 1}
    assert all(r.output_tokens == 5 for r in by_id if r.ok)


def test_bench_generate_against_the_server_and_in_process(server, tmp_path):
    require("matplotlib")
    report_path = tmp_path / "report.json"
    completed = subprocess.run(
        [OPSIGHT, "bench", "--generate", server, "--api", "chat", "--requests", "6",
         "--output-len", "4", "--sweep", "concurrency=1,2", "--slo",
         "ttft_p99=5s,tpot_p99=1s", "--format", "json", "-o", str(report_path),
         "--plot", str(tmp_path / "pareto.svg"), "--warmup", "1"],
        capture_output=True, text=True, timeout=120, env=clean_environment())
    assert completed.returncode == 0, completed.stderr
    report = json.loads(report_path.read_text())
    assert [point["concurrency"] for point in report["points"]] == [1, 2]
    for point in report["points"]:
        assert point["summary"]["completed"] == 6
        assert point["summary"]["good_requests"] == 6
        assert point["run"] is not None
    svg = (tmp_path / "pareto.svg").read_text()
    assert "<svg" in svg
    for text in ("throughput-latency (concurrency sweep)", "concurrency=1", "concurrency=2",
                 "TTFT p99", "time to first token", "inter-token latency"):
        assert text in svg, text
    runs = subprocess.run([OPSIGHT, "runs", "--format", "json"], capture_output=True,
                          text=True, timeout=60, env=clean_environment())
    assert report["sweep"] in runs.stdout

    completed = subprocess.run(
        [OPSIGHT, "bench", "--generate", "random:gpt2", "--requests", "3", "--output-len",
         "5", "--concurrency", "2", "--no-store"],
        capture_output=True, text=True, timeout=120, env=clean_environment())
    assert completed.returncode == 0, completed.stderr
    assert "TTFT (ms)" in completed.stdout and "3 completed" in completed.stdout


def test_a_clients_request_is_a_client_span_named_after_the_client_metrics():
    with opsight.profile() as prof:
        request = llm.Request("m", 3, kind="client", operation="chat")
        request.server = ("gpu-host", 8000)
        request.token()
        request.token()
        request.finish()
        with opsight.span("served", **{"span.kind": "server"}):
            with opsight.propagation.continue_trace({}):
                served = llm.Request("m", 3)  # created while serving: joins that trace
        served.token()
        served.finish()
    frame = prof.dataframe().query("name == 'gen_ai.request'")
    client = frame[frame["span.kind"] == "client"].iloc[0]
    assert client["gen_ai.client.operation.time_to_first_chunk"] == pytest.approx(
        request.metrics.ttft_ns / 1e9)
    assert client["gen_ai.client.operation.duration"] == pytest.approx(
        request.metrics.e2e_ns / 1e9)
    assert (client["server.address"], client["server.port"]) == ("gpu-host", 8000)
    server = frame[frame["span.kind"] != "client"].iloc[0]
    assert server["gen_ai.server.time_to_first_token"] == pytest.approx(
        served.metrics.ttft_ns / 1e9)
    spans = prof.dataframe()
    serving = spans[spans["name"] == "served"].iloc[0]
    assert server["trace_id"] == serving["trace_id"] != client["trace_id"]
    assert _exported_parents(prof.trace)[server["span_id"]] == serving["span_id"]
    with pytest.raises(ValueError, match="kind"):
        llm.Request("m", kind="server")


def _exported_parents(trace) -> dict[str, str]:
    """{span id: parent span id} as the OTLP exporter sends them (a parent in another
    process or on another track included), caught by a local receiver of OTLP/HTTP JSON."""
    import http.server

    bodies: list[bytes] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    receiver = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        trace.export([f"otlp-json=http://127.0.0.1:{receiver.server_port}"])
    finally:
        receiver.shutdown()
    parents = {}
    for body in bodies:
        for resource in json.loads(body)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    parents[span["spanId"]] = span.get("parentSpanId", "")
    return parents


def test_client_and_server_ttft_agree_within_the_network_time(tmp_path):
    """The reference server traced by opsight (OPSIGHT_OUTPUT), the client traced in this
    process; each client request is found in the server's trace through traceparent (the
    server's gen_ai.request is a child of the handler span that continued the client's
    span). On the one CLOCK_MONOTONIC of this machine the server's span lies inside the
    client's: the client's arrival <= the server's arrival <= the server's first token <=
    the client's first token, so the client's TTFT is the server's plus the two network
    legs (request in, first chunk out), which on loopback are small."""
    require("torch")
    require("transformers")
    import signal

    output = tmp_path / "server.opsight"
    process = subprocess.Popen([PYTHON, str(SERVER), "--port", "0", "--model", "gpt2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=clean_environment(OPSIGHT_OUTPUT=str(output)))
    try:
        line = process.stdout.readline()
        assert "http://" in line, process.stderr.read()
        endpoint = Endpoint(line.split()[-1])
        specs = llm_load.make_requests(12, "8", "6", seed=4)
        with opsight.profile() as prof:
            result = llm_load.run_load(llm_load.http_backend(endpoint), specs, concurrency=3)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    assert process.returncode == 0, process.stderr.read()
    assert all(request.ok for request in result.requests)
    client = prof.dataframe()
    server_trace = opsight.load(str(output))
    server = server_trace.dataframe()
    parents = _exported_parents(server_trace.trace)  # the parents across processes
    server["remote_parent"] = [parents.get(span_id, "") for span_id in server["span_id"]]
    calls = client[client["name"] == "POST /v1/completions"]
    assert len(calls) == 12
    differences = []
    for request in result.requests:
        call = calls[calls["gen_ai.request.id"] == request.request_id].iloc[0]
        handler = server[(server["trace_id"] == call["trace_id"])
                         & (server["remote_parent"] == call["span_id"])]
        assert len(handler) == 1, (request.request_id, len(handler))
        served = server[(server["name"] == "gen_ai.request")
                        & (server["remote_parent"] == handler.iloc[0]["span_id"])]
        assert len(served) == 1
        served = served.iloc[0]
        first = server[(server["name"] == "gen_ai.time_to_first_token")
                       & (server["parent_span_id"] == served["span_id"])].iloc[0]
        server_arrival, server_first = served["start"], first["end"]
        assert request.arrival_ns <= server_arrival <= server_first <= request.first_token_ns
        assert served["gen_ai.usage.output_tokens"] == request.output_tokens
        difference = request.ttft_ns - first["dur"]
        assert difference == (server_arrival - request.arrival_ns) + (
            request.first_token_ns - server_first)
        differences.append(difference)
    # Continuous batching: concurrent requests shared decode steps, each step's batch size a
    # sample of the gen_ai.batch_size counter track, one per decode span.
    counters = server_trace.trace.counter_columns()
    sizes = [value for track, value in zip(counters["track"], counters["value"])
             if track == "gen_ai.batch_size"]
    decodes = server[server["name"] == "gen_ai.decode"]
    assert len(sizes) == len(decodes) + 12  # and one per request's prefill (batch of 1)
    assert 1 <= min(sizes) and max(sizes) <= 3 and max(sizes) > 1
    assert sorted(sizes) == sorted([1] * 12 + list(decodes["gen_ai.batch_size"]))
    differences.sort()
    print(f"client TTFT - server TTFT: median {differences[6] / 1e6:.2f} ms, "
          f"max {differences[-1] / 1e6:.2f} ms")
    assert differences[6] < 20e6 and differences[-1] < 200e6


def test_bench_generate_usage_errors():
    completed = subprocess.run([OPSIGHT, "bench", "--generate", "random:gpt2", "--slo",
                                "speed=1"], capture_output=True, text=True, timeout=60,
                               env=clean_environment())
    assert completed.returncode == 64 and "SLO" in completed.stderr
    completed = subprocess.run([OPSIGHT, "bench", "--generate", "random:gpt2", "--until-tight",
                                "5"], capture_output=True, text=True, timeout=60,
                               env=clean_environment())
    assert completed.returncode == 64 and "--until-tight 5" in completed.stderr
