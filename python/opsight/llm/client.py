"""A streaming client of the OpenAI-compatible API (``/v1/completions`` and
``/v1/chat/completions`` with ``"stream": true``), as vLLM, SGLang, TGI, llama.cpp's server
and Ollama serve it, measuring each request's timeline from the streamed chunks.

What counts (docs/llm.md):

- an SSE event is a ``data: ...`` line (other fields are ignored, but ``event: error``);
  ``data: [DONE]`` ends the stream;
- a *token chunk* is an event whose choice carries non-empty text (``choices[0].text``;
  chat: ``choices[0].delta.content``); the first chunk of a chat stream, which carries only
  the role, and any empty chunk are not tokens: TTFT is to the first *token*, not the
  first chunk;
- output tokens: the server's ``usage.completion_tokens`` when it sends usage (we ask with
  ``stream_options.include_usage``), else one per token chunk;
- errors (the request fails, the run goes on): ``http_error`` (a status other than 200),
  ``malformed`` (an event that is not JSON, e.g. cut mid-object), ``server_error`` (an
  ``error`` event or an ``error`` object in the stream), ``connection`` (the connection
  reset or refused), ``incomplete`` (the stream ended without ``[DONE]``), ``timeout`` (no
  first token within ``first_token_timeout``, or no event within ``idle_timeout``).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .timeline import Request

_perf_counter_ns = time.perf_counter_ns


class StreamError(Exception):
    """A request's failure: ``kind`` (see the module's documentation) and a message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@dataclass
class Endpoint:
    """Where to send: ``url`` (``http://host:port``, optionally with a path prefix such as
    ``/v1``), which API (``completions`` or ``chat``) and the model name in the body."""

    url: str
    api: str = "completions"
    model: str = ""
    first_token_timeout: float = 30.0
    idle_timeout: float = 30.0
    headers: dict[str, str] | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{self.url!r}: expected an http:// or https:// URL")
        if self.api not in ("completions", "chat"):
            raise ValueError(f"api {self.api!r}: expected 'completions' or 'chat'")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        base = parts.path.rstrip("/")
        if base.endswith("/v1"):
            base = base[:-3]
        self.path = base + ("/v1/chat/completions" if self.api == "chat" else "/v1/completions")

    def body(self, prompt: str, max_tokens: int, extra: dict[str, Any] | None = None) -> bytes:
        payload: dict[str, Any] = {"model": self.model, "max_tokens": int(max_tokens),
                                   "stream": True, "stream_options": {"include_usage": True},
                                   "temperature": 0.0, "ignore_eos": True}
        if self.api == "chat":
            payload["messages"] = [{"role": "user", "content": prompt}]
        else:
            payload["prompt"] = prompt
        if extra:
            payload.update(extra)
        return json.dumps(payload).encode()

    def connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


def _text_of(event: dict[str, Any], chat: bool) -> str:
    choices = event.get("choices")
    if not choices:
        return ""
    choice = choices[0]
    if not isinstance(choice, dict):
        return ""
    if chat:
        delta = choice.get("delta") or {}
        content = delta.get("content") if isinstance(delta, dict) else None
        return content or ""
    return choice.get("text") or ""


class StreamParser:
    """Turns the body of an SSE stream, line by line, into marks on a :class:`Request`.
    Separate from the socket so that its own cost can be measured on a canned stream."""

    __slots__ = ("request", "chat", "done", "usage", "text_parts", "_event", "_loads",
                 "keep_text")

    def __init__(self, request: Request, chat: bool, keep_text: bool = False) -> None:
        self.request = request
        self.chat = chat
        self.done = False
        self.usage: dict[str, Any] | None = None
        self.text_parts: list[str] = []
        self.keep_text = keep_text
        self._event = ""
        self._loads = json.loads

    def line(self, raw: bytes) -> None:
        """One line of the body (with or without its line break). Raises StreamError."""
        if raw[:6] == b"data: " or raw[:5] == b"data:":
            stamp = _perf_counter_ns()
            data = raw[5:].strip()
            if data == b"[DONE]":
                self.done = True
                return
            try:
                event = self._loads(data)
            except ValueError:
                raise StreamError("malformed", f"an event is not JSON: {data[:200]!r}") from None
            if not isinstance(event, dict):
                raise StreamError("malformed", f"an event is not a JSON object: {data[:200]!r}")
            if self._event == "error" or "error" in event:
                error = event.get("error", event)
                message = error.get("message", error) if isinstance(error, dict) else error
                raise StreamError("server_error", str(message)[:500])
            text = _text_of(event, self.chat)
            if text:
                self.request.token(1, stamp)
                if self.keep_text:
                    self.text_parts.append(text)
            usage = event.get("usage")
            if usage:
                self.usage = usage
            return
        if raw[:6] == b"event:":
            self._event = raw[6:].strip().decode("utf-8", "replace")
        elif not raw.strip():
            self._event = ""  # an event ends at a blank line

    def finish(self) -> None:
        """The body ended. Raises StreamError when it ended early."""
        if not self.done:
            raise StreamError("incomplete", f"the stream ended without [DONE] after "
                                            f"{len(self.request.metrics.token_ns)} token chunks")
        if self.usage:
            completion = self.usage.get("completion_tokens")
            prompt = self.usage.get("prompt_tokens")
            if isinstance(completion, int):
                self.request.set_output_tokens(completion)
            if isinstance(prompt, int):
                self.request.metrics.input_tokens = prompt


def stream_request(endpoint: Endpoint, prompt: str, max_tokens: int, request: Request,
                   extra: dict[str, Any] | None = None,
                   headers: dict[str, str] | None = None) -> Request:
    """Sends one streaming request and marks ``request`` (already arrived) as the chunks
    come; finishes it, with an error kind when it failed. Never raises for the server's
    misbehaviour."""
    body = endpoint.body(prompt, max_tokens, extra)
    all_headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if endpoint.headers:
        all_headers.update(endpoint.headers)
    if headers:
        all_headers.update(headers)
    parser = StreamParser(request, endpoint.api == "chat")
    connection = None
    try:
        connection = endpoint.connect(endpoint.first_token_timeout)
        request.start()
        connection.request("POST", endpoint.path, body=body, headers=all_headers)
        response = connection.getresponse()
        if response.status != 200:
            text = response.read(2000).decode("utf-8", "replace")
            raise StreamError("http_error", f"HTTP {response.status} {response.reason}: {text}")
        readline = response.readline
        line = parser.line
        tokens = request.metrics.token_ns
        switched = False
        while True:
            raw = readline(1 << 16)
            if not raw:
                break
            line(raw)
            if not switched and tokens:
                switched = True
                if connection.sock is not None:
                    connection.sock.settimeout(endpoint.idle_timeout)
            if parser.done:
                break
        parser.finish()
    except StreamError as error:
        return _fail(request, error.kind, error.message)
    except (socket.timeout, TimeoutError) as error:
        what = ("no first token" if not request.metrics.token_ns else "no event")
        limit = (endpoint.first_token_timeout if not request.metrics.token_ns
                 else endpoint.idle_timeout)
        return _fail(request, "timeout", f"{what} within {limit:g} s ({error})")
    except http.client.IncompleteRead as error:
        return _fail(request, "connection", f"the connection closed mid-chunk "
                                            f"({len(error.partial)} bytes read)")
    except (ConnectionError, http.client.HTTPException, OSError) as error:
        return _fail(request, "connection", f"{type(error).__name__}: {error}")
    finally:
        if connection is not None:
            connection.close()
    request.finish()
    return request


def _fail(request: Request, kind: str, message: str) -> Request:
    request.finish(kind, message)
    return request
