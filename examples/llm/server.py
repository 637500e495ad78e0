"""A small OpenAI-compatible streaming server around a random-weight transformers model, for
opsight's tests and demo (docs/llm.md): ``/v1/completions`` and ``/v1/chat/completions``
with ``"stream": true`` (Server-Sent Events: ``data: {...}`` chunks, a final usage chunk,
``data: [DONE]``), and the same without streaming; ``/v1/models`` and ``/health``.

    python examples/llm/server.py --model gpt2 --port 8000        # prints its URL
    opsight bench --generate http://127.0.0.1:8000 --concurrency 4 --requests 64

Standard library only (besides torch, transformers and opsight). One engine thread runs the
model with continuous batching: between two decode steps, waiting requests join (each is
prefilled on its own) and finished ones leave; a decode step advances every active request
by one token. The step runs each sequence's forward pass in turn with its own KV cache (no
padded batch kernel: the scheduling is iteration-level, the arithmetic is not fused), so a
step's cost grows with the batch, as a real server's does once it is compute-bound.

It is traced by opsight itself: run it under ``OPSIGHT_OUTPUT=server.opsight`` (or ``opsight
run``) and each request is a ``gen_ai.request`` span (queue, time to first token, one span
per token), each step a ``gen_ai.prefill``/``gen_ai.decode`` span holding the model's
modules, the batch size a counter track, and the HTTP handler's span continues the
client's ``traceparent``.

Test hooks (never used by a real client): a request body's ``"opsight_fault"`` makes the
server misbehave for that request: ``cut_json`` (an event cut mid-object, then the
connection closes), ``error_event`` (an ``event: error`` after two tokens), ``reset`` (the
connection reset after two tokens), ``stall`` (headers, then nothing), ``http_500``.
"""

from __future__ import annotations

import argparse
import json
import queue
import signal
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch

import opsight
from opsight import llm
from opsight.llm.models import to_device

_DONE = object()


class _Job:
    __slots__ = ("prompt", "max_tokens", "ignore_eos", "out", "timeline", "cache", "last",
                 "generated", "cancelled")

    def __init__(self, prompt: list[int], max_tokens: int, ignore_eos: bool,
                 timeline: llm.Request) -> None:
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.ignore_eos = ignore_eos
        self.out: queue.Queue = queue.Queue()
        self.timeline = timeline
        self.cache: Any = None
        self.last = 0
        self.generated = 0
        self.cancelled = False


class Engine:
    """Continuous batching over a causal LM: see the module's documentation."""

    def __init__(self, model: Any, name: str, max_batch: int = 16,
                 step_delay_s: float = 0.0) -> None:
        self.model = model
        self.name = name
        self.max_batch = max_batch
        self.step_delay_s = step_delay_s
        self.eos = model.config.eos_token_id
        self.device = next(model.parameters()).device
        self.limit = getattr(model.config, "n_positions", None) or \
            getattr(model.config, "max_position_embeddings", 1024)
        self.pending: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="engine", daemon=True)
        self.thread.start()

    def submit(self, job: _Job) -> None:
        self.pending.put(job)

    def _forward(self, ids: list[int], cache: Any) -> tuple[int, Any]:
        with torch.inference_mode():
            output = self.model(input_ids=torch.tensor([ids], device=self.device),
                                past_key_values=cache, use_cache=True)
        return int(output.logits[0, -1].argmax()), output.past_key_values

    def _emit(self, job: _Job, token: int) -> bool:
        """Hands a token to the request's handler; True when the request is done."""
        job.generated += 1
        job.last = token
        job.timeline.token()
        job.out.put(token)
        length = len(job.prompt) + job.generated
        return (job.cancelled or job.generated >= job.max_tokens or length >= self.limit - 1
                or (not job.ignore_eos and token == self.eos))

    def _finish(self, job: _Job) -> None:
        job.timeline.finish()
        job.out.put(_DONE)
        job.cache = None

    def _loop(self) -> None:
        active: list[_Job] = []
        while True:
            # Requests join between steps; wait only when there is nothing to decode.
            while len(active) < self.max_batch:
                try:
                    job = self.pending.get(block=not active)
                except queue.Empty:
                    break
                job.timeline.start()
                try:
                    with job.timeline.prefill():
                        token, job.cache = self._forward(job.prompt, None)
                except Exception as error:  # noqa: BLE001 - the request fails, the server goes on
                    job.timeline.finish("exception", str(error))
                    job.out.put(error)
                    continue
                if self._emit(job, token):
                    self._finish(job)
                else:
                    active.append(job)
            if not active:
                continue
            with llm.step("decode", batch_size=len(active), model=self.name):
                if self.step_delay_s:
                    time.sleep(self.step_delay_s)
                still = []
                for job in active:
                    try:
                        token, job.cache = self._forward([job.last], job.cache)
                    except Exception as error:  # noqa: BLE001 - this request fails, not the server
                        job.timeline.finish("exception", str(error))
                        job.out.put(error)
                        continue
                    if self._emit(job, token):
                        self._finish(job)
                    else:
                        still.append(job)
            active = still


class Handler(BaseHTTPRequestHandler):
    server_version = "opsight-llm-example/1"
    protocol_version = "HTTP/1.0"  # the body of a stream ends when the connection closes
    engine: Engine
    tokenizer: llm.WordTokenizer

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _json(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/health":
            self._json(200, {"status": "ok"})
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": self.engine.name,
                                                         "object": "model"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802
        arrival = time.perf_counter_ns()
        chat = self.path == "/v1/chat/completions"
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        with opsight.span(f"POST {self.path}", **{"span.kind": "server"}), \
                opsight.propagation.continue_trace(dict(self.headers.items())):
            self._serve(chat, arrival)

    def _serve(self, chat: bool, arrival: int) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if chat:
                text = " ".join(str(message.get("content", ""))
                                for message in body.get("messages", []))
            else:
                text = body.get("prompt", "")
                text = " ".join(text) if isinstance(text, list) else str(text)
            max_tokens = int(body.get("max_tokens") or 16)
        except (ValueError, TypeError, AttributeError) as error:
            self._json(400, {"error": {"message": f"bad request: {error}"}})
            return
        fault = body.get("opsight_fault")
        if fault == "http_500":
            self._json(500, {"error": {"message": "planted failure"}})
            return
        prompt = self.tokenizer.encode(text)
        timeline = llm.Request(self.engine.name, len(prompt), arrival_ns=arrival,
                               operation="chat" if chat else "text_completion",
                               provider="opsight-example")
        job = _Job(prompt, max_tokens, bool(body.get("ignore_eos", False)), timeline)
        self.engine.submit(job)
        stream = bool(body.get("stream"))
        created = int(time.time())
        ident = f"cmpl-{timeline.metrics.request_id}"
        kind = "chat.completion.chunk" if chat else "text_completion"
        if not stream:
            tokens = self._collect(job)
            if tokens is None:
                return
            text = "".join(self.tokenizer.decode(token) for token in tokens)
            choice = ({"index": 0, "message": {"role": "assistant", "content": text},
                       "finish_reason": "length"} if chat else
                      {"index": 0, "text": text, "finish_reason": "length"})
            self._json(200, {"id": ident, "object": "chat.completion" if chat else kind,
                             "created": created, "model": self.engine.name, "choices": [choice],
                             "usage": self._usage(prompt, len(tokens))})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        write = self.wfile.write

        def event(payload: dict[str, Any]) -> None:
            write(b"data: " + json.dumps(payload).encode() + b"\n\n")

        def chunk(content: str | None, role: bool = False) -> dict[str, Any]:
            if chat:
                delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else \
                    {"content": content}
                choice = {"index": 0, "delta": delta, "finish_reason": None}
            else:
                choice = {"index": 0, "text": content, "finish_reason": None}
            return {"id": ident, "object": kind, "created": created, "model": self.engine.name,
                    "choices": [choice]}

        if fault == "stall":
            time.sleep(float(body.get("opsight_stall_s", 5)))
            job.cancelled = True
            return
        try:
            if chat:
                event(chunk(None, role=True))  # the role-only first chunk: not a token
            count = 0
            while True:
                item = job.out.get()
                if item is _DONE:
                    break
                if isinstance(item, Exception):
                    write(b"event: error\ndata: " + json.dumps(
                        {"error": {"message": str(item)}}).encode() + b"\n\n")
                    return
                count += 1
                if fault in ("cut_json", "error_event", "reset") and count == 3:
                    job.cancelled = True
                    self._fault(fault)
                    return
                event(chunk(self.tokenizer.decode(item)))
            event({"id": ident, "object": kind, "created": created, "model": self.engine.name,
                   "choices": [], "usage": self._usage(prompt, count)})
            write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            job.cancelled = True

    def _fault(self, fault: str) -> None:
        if fault == "cut_json":
            self.wfile.write(b'data: {"id": "x", "choices": [{"te')
            self.wfile.flush()
        elif fault == "error_event":
            self.wfile.write(b'event: error\ndata: {"error": {"message": "planted error '
                             b'event", "type": "server_error"}}\n\n')
        elif fault == "reset":
            # SO_LINGER 0: close() sends a RST, not a FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()

    def _collect(self, job: _Job) -> list[int] | None:
        tokens = []
        while True:
            item = job.out.get()
            if item is _DONE:
                return tokens
            if isinstance(item, Exception):
                self._json(500, {"error": {"message": str(item)}})
                return None
            tokens.append(item)

    @staticmethod
    def _usage(prompt: list[int], completion: int) -> dict[str, int]:
        return {"prompt_tokens": len(prompt), "completion_tokens": completion,
                "total_tokens": len(prompt) + completion}


def make_server(model_name: str = "gpt2", host: str = "127.0.0.1", port: int = 0,
                max_batch: int = 16, step_delay_s: float = 0.0,
                threads: int = 1, device: str = "cpu") -> ThreadingHTTPServer:
    """The server, bound (not yet serving): ``server.serve_forever()``."""
    torch.set_num_threads(threads)
    model = to_device(llm.random_model(model_name), device)
    name = model.name_or_path
    engine = Engine(model, name, max_batch=max_batch, step_delay_s=step_delay_s)
    handler = type("BoundHandler", (Handler,), {
        "engine": engine, "tokenizer": llm.WordTokenizer(model.config.vocab_size)})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def main(arguments: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(llm.RANDOM_MODELS), default="gpt2")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0: any free port")
    parser.add_argument("--max-batch", type=int, default=16,
                        help="most requests in the decode batch (default: %(default)s)")
    parser.add_argument("--step-delay-ms", type=float, default=0.0,
                        help="extra time per decode step (a slower model; default: 0)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    parser.add_argument("--device", default="cpu", help="where the model runs: cpu, cuda, "
                                                      "cuda:1 (default: %(default)s)")
    options = parser.parse_args(arguments)
    try:
        server = make_server(options.model, options.host, options.port, options.max_batch,
                             options.step_delay_ms / 1e3, options.threads, options.device)
    except ValueError as error:
        parser.error(str(error))
    host, port = server.server_address[:2]

    def stop(number: int, frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM ends the server as Ctrl-C does: its trace is whole

    signal.signal(signal.SIGTERM, stop)
    print(f"serving {server.RequestHandlerClass.engine.name} on http://{host}:{port}",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
