"""What opsight's streaming LLM client (``opsight bench --generate URL``) costs per streamed
token, against a no-op stream measured in the same run (docs/llm.md, *The client's own
cost*).

    .venv/bin/python benchmarks/python/llm_client_cost.py [--tokens 256] [--requests 80]
                                                          [--rounds 9] [--json out.json]

1. In memory. Canned Server-Sent Event streams (``--requests`` responses of ``--tokens``
   token chunks, a usage chunk and ``[DONE]``) in three servers' styles: the reference
   server's completions (``"text": " w"``, spaces after separators), vLLM's compact
   completions (``"text":" w"`` with ``logprobs``, ``stop_reason`` and ``"usage":null`` in
   every chunk) and a chat stream (a role-only first chunk, ``delta.content``). Each is
   read line by line from memory (``io.BytesIO.readline``, as the client reads
   ``http.client``'s response) by three variants:

   * ``no-op``: the lines are read and dropped (the baseline);
   * ``decode every event``: each line goes through the parser's full path (``json.loads``
     and the checks; what the client did before its fast path);
   * ``client``: ``StreamParser.consume``, what ``stream_request`` runs (the fast path:
     a token chunk of a shape already decoded is matched, not decoded).

   Rounds alternate the variants' order (benchmarks/python/interleaved.py); per variant the
   median over rounds of (variant - no-op in the same round) / tokens, and the median ratio
   variant / no-op; tokens/s is tokens / the variant's median time (one core, one thread).

2. Over loopback HTTP. A child process serves the reference-style stream as fast as it can
   (``http.server``, HTTP/1.0); the client streams ``--requests`` responses with
   ``stream_request`` one after another; its thread's CPU time per token
   (``time.thread_time_ns``) and the tokens/s it received are reported.

A benchmark, not a test: nothing here asserts on a time.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from interleaved import run_rounds_raw  # noqa: E402

from opsight import llm  # noqa: E402
from opsight.llm.client import Endpoint, StreamParser, stream_request  # noqa: E402


def reference_stream(tokens: int, request: int) -> bytes:
    lines = []
    for index in range(tokens):
        event = {"id": f"cmpl-{request}", "object": "text_completion", "created": 1700000000,
                 "model": "gpt2", "choices": [{"index": 0, "text": f" w{index % 977}",
                                               "finish_reason": None}]}
        lines.append(b"data: " + json.dumps(event).encode() + b"\n\n")
    usage = {"id": f"cmpl-{request}", "object": "text_completion", "created": 1700000000,
             "model": "gpt2", "choices": [],
             "usage": {"prompt_tokens": 32, "completion_tokens": tokens,
                       "total_tokens": tokens + 32}}
    lines.append(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(lines)


def vllm_stream(tokens: int, request: int) -> bytes:
    compact = {"separators": (",", ":")}
    lines = []
    for index in range(tokens):
        event = {"id": f"cmpl-{request:032x}", "object": "text_completion",
                 "created": 1700000000, "model": "meta-llama/Llama-3.1-8B-Instruct",
                 "choices": [{"index": 0, "text": f" w{index % 977}", "logprobs": None,
                              "finish_reason": None, "stop_reason": None}], "usage": None}
        lines.append(b"data: " + json.dumps(event, **compact).encode() + b"\n\n")
    usage = {"id": f"cmpl-{request:032x}", "object": "text_completion", "created": 1700000000,
             "model": "meta-llama/Llama-3.1-8B-Instruct", "choices": [],
             "usage": {"prompt_tokens": 32, "total_tokens": tokens + 32,
                       "completion_tokens": tokens}}
    lines.append(b"data: " + json.dumps(usage, **compact).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(lines)


def chat_stream(tokens: int, request: int) -> bytes:
    head = {"id": f"chatcmpl-{request}", "object": "chat.completion.chunk", "created": 1700000000,
            "model": "gpt2"}
    lines = [b"data: " + json.dumps({**head, "choices": [{
        "index": 0, "delta": {"role": "assistant", "content": ""},
        "finish_reason": None}]}).encode() + b"\n\n"]
    for index in range(tokens):
        event = {**head, "choices": [{"index": 0, "delta": {"content": f" w{index % 977}"},
                                      "finish_reason": None}]}
        lines.append(b"data: " + json.dumps(event).encode() + b"\n\n")
    lines.append(b"data: " + json.dumps({**head, "choices": [], "usage": {
        "prompt_tokens": 32, "completion_tokens": tokens}}).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(lines)


STYLES = {"reference server": (reference_stream, False), "vLLM compact": (vllm_stream, False),
          "chat": (chat_stream, True)}


def in_memory(tokens: int, requests: int, rounds: int) -> list[dict]:
    rows = []
    for style, (make, chat) in STYLES.items():
        bodies = [make(tokens, request) for request in range(requests)]
        total = tokens * requests

        def noop() -> tuple[int]:
            begin = time.perf_counter_ns()
            for body in bodies:
                readline = io.BytesIO(body).readline
                while True:
                    raw = readline(1 << 16)
                    if not raw:
                        break
                    if raw == b"\n":
                        continue
            return (time.perf_counter_ns() - begin,)

        def decode_every_event() -> tuple[int]:
            begin = time.perf_counter_ns()
            for body in bodies:
                parser = StreamParser(llm.Request("m"), chat)
                decode = parser._decode
                readline = io.BytesIO(body).readline
                while True:
                    raw = readline(1 << 16)
                    if not raw:
                        break
                    decode(raw)
                parser.finish()
            return (time.perf_counter_ns() - begin,)

        def client() -> tuple[int]:
            begin = time.perf_counter_ns()
            for body in bodies:
                parser = StreamParser(llm.Request("m"), chat)
                parser.consume(io.BytesIO(body).readline)
                parser.finish()
            return (time.perf_counter_ns() - begin,)

        check = StreamParser(llm.Request("m"), chat)
        check.consume(io.BytesIO(bodies[0]).readline)
        check.finish()
        assert check.request.metrics.output_tokens == tokens
        assert len(check.request.metrics.token_ns) == tokens
        figures = run_rounds_raw({"no-op": noop, "decode every event": decode_every_event,
                                  "client": client}, rounds)
        base = figures["no-op"]
        for name in ("no-op", "decode every event", "client"):
            times = [round_figures[0] for round_figures in figures[name]]
            over = [(value[0] - baseline[0]) / total for value, baseline in
                    zip(figures[name], base)]
            ratio = [value[0] / baseline[0] for value, baseline in zip(figures[name], base)]
            rows.append({"style": style, "variant": name, "tokens": total,
                         "ns_per_token_over_noop": statistics.median(over),
                         "ratio_to_noop": statistics.median(ratio),
                         "tokens_per_second": total / (statistics.median(times) / 1e9)})
    return rows


SERVER = textwrap.dedent("""
    import sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    sys.path.insert(0, sys.argv[2])
    from llm_client_cost import reference_stream
    body = reference_stream(int(sys.argv[1]), 0)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"
        def log_message(self, *args):
            pass
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for start in range(0, len(body), 4096):   # in pieces, as a server flushes
                self.wfile.write(body[start:start + 4096])

    server = HTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
""")


def over_loopback(tokens: int, requests: int) -> dict:
    child = subprocess.Popen([sys.executable, "-c", SERVER, str(tokens),
                              str(Path(__file__).resolve().parent)],
                             stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        endpoint = Endpoint(f"http://127.0.0.1:{port}")
        stream_request(endpoint, "warm up", tokens, llm.Request("m"))
        cpu_begin, wall_begin = time.thread_time_ns(), time.perf_counter_ns()
        received = 0
        for _ in range(requests):
            request = stream_request(endpoint, "a b c", tokens, llm.Request("m"))
            assert request.metrics.ok, request.metrics.error_message
            received += request.metrics.output_tokens
        cpu = time.thread_time_ns() - cpu_begin
        wall = time.perf_counter_ns() - wall_begin
    finally:
        child.kill()
        child.wait()
    return {"tokens": received, "client_cpu_ns_per_token": cpu / received,
            "tokens_per_second": received / (wall / 1e9),
            "client_cpu_ns_per_request": cpu / requests}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=256, help="token chunks per response")
    parser.add_argument("--requests", type=int, default=80, help="responses per round")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json", help="write the figures here")
    options = parser.parse_args()
    rows = in_memory(options.tokens, options.requests, options.rounds)
    loopback = over_loopback(options.tokens, options.requests)
    print(f"CPython {platform.python_version()}, {os.cpu_count()} CPUs; "
          f"{options.requests} responses x {options.tokens} tokens, {options.rounds} rounds")
    print(f"{'stream':<18}{'variant':<22}{'ns/token over no-op':>21}{'x no-op':>9}"
          f"{'tokens/s':>13}")
    for row in rows:
        print(f"{row['style']:<18}{row['variant']:<22}{row['ns_per_token_over_noop']:>21.0f}"
              f"{row['ratio_to_noop']:>9.2f}{row['tokens_per_second']:>13,.0f}")
    print(f"over loopback HTTP: {loopback['tokens_per_second']:,.0f} tokens/s received, "
          f"client CPU {loopback['client_cpu_ns_per_token']:.0f} ns per token "
          f"({loopback['client_cpu_ns_per_request'] / 1e3:.0f} us per request, connection "
          f"and HTTP included)")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as file:
            json.dump({"in_memory": rows, "loopback": loopback, "options": vars(options)},
                      file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
