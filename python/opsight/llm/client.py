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
import re
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .timeline import Request

_perf_counter_ns = time.perf_counter_ns
#: A JSON string's inside that needs no decoding: no quote, no backslash (the fast path).
_plain = re.compile(rb'[^"\\]+').fullmatch


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
    """Turns the body of an SSE stream into marks on a :class:`Request`: line by line
    (:meth:`line`), or reading the lines itself (:meth:`consume`, what the client runs).
    Separate from the socket so that its own cost can be measured on a canned stream
    (benchmarks/python/llm_client_cost.py).

    The fast path. A server's token chunks differ only in their text (within a request,
    the id, the creation time, the model are the same): once an event has been decoded as
    a token chunk whose text is one plain JSON string, the bytes before and after that
    string are kept as a template, and a later line that is the template around another
    non-empty string without quotes or backslashes is a token chunk of the very same JSON
    shape: it is counted without decoding (one regular-expression match). Anything else
    (the first chunk, a chunk with an escape or a new field, the usage chunk, an error,
    ``[DONE]``, a line cut short) is decoded and checked in full, and a new token chunk
    teaches the template again."""

    __slots__ = ("request", "chat", "done", "usage", "text_parts", "_event", "_loads",
                 "keep_text", "_key", "_template", "_active")

    def __init__(self, request: Request, chat: bool, keep_text: bool = False) -> None:
        self.request = request
        self.chat = chat
        self.done = False
        self.usage: dict[str, Any] | None = None
        self.text_parts: list[str] = []
        self.keep_text = keep_text
        self._event = ""
        self._loads = json.loads
        self._key = b'"content"' if chat else b'"text"'
        # (bytes before the text's string, bytes after it), learnt from a token chunk; the
        # template in use, (None, b"") when there is none or an event type is pending.
        self._template: tuple[bytes | None, bytes] = (None, b"")
        self._active: tuple[bytes | None, bytes] = (None, b"")

    def line(self, raw: bytes) -> None:
        """One line of the body (with or without its line break). Raises StreamError."""
        prefix, suffix = self._active
        if (prefix is not None and raw.startswith(prefix) and raw.endswith(suffix)
                and _plain(raw, len(prefix), len(raw) - len(suffix)) is not None):
            self.request.token(1)
            if self.keep_text:
                self.text_parts.append(raw[len(prefix):len(raw) - len(suffix)].decode(
                    "utf-8", "replace"))
            return
        self._decode(raw)

    def consume(self, readline: Any, until_first_token: bool = False) -> None:
        """Reads lines with ``readline(limit)`` until ``[DONE]`` or the end of the body (or,
        with ``until_first_token``, until a token has come). Raises StreamError."""
        metrics = self.request.metrics
        tokens = metrics.token_ns
        append = tokens.append
        append_count = metrics.token_counts.append
        clock = _perf_counter_ns
        plain = _plain
        decode = self._decode
        keep_text = self.keep_text
        prefix, suffix = self._active
        start = len(prefix) if prefix is not None else 0
        tail = len(suffix)
        fast = 0
        try:
            while True:
                raw = readline(1 << 16)
                if raw == b"\n" or raw == b"\r\n":  # an event ends at a blank line
                    if self._event:
                        self._event = ""
                        self._active = self._template
                        prefix, suffix = self._active
                        start = len(prefix) if prefix is not None else 0
                        tail = len(suffix)
                    continue
                if (prefix is not None and raw.startswith(prefix) and raw.endswith(suffix)
                        and plain(raw, start, len(raw) - tail) is not None):
                    append(clock())
                    append_count(1)
                    fast += 1
                    if keep_text:
                        self.text_parts.append(raw[start:len(raw) - tail].decode(
                            "utf-8", "replace"))
                    continue
                if not raw:
                    return
                decode(raw)
                prefix, suffix = self._active
                start = len(prefix) if prefix is not None else 0
                tail = len(suffix)
                if self.done or (until_first_token and tokens):
                    return
        finally:
            metrics.output_tokens += fast

    def _learn(self, raw: bytes, text: str) -> None:
        """Keeps the bytes around the text's JSON string in ``raw`` as the template, when the
        key is there once and its value is one plain string equal to ``text`` (else the
        template before stays: it still describes a shape decoded in full)."""
        key = self._key
        at = raw.find(key)
        if at >= 0 and raw.find(key, at + 1) < 0:
            at += len(key)
            while raw[at:at + 1] in (b" ", b"\t"):
                at += 1
            if raw[at:at + 1] == b":":
                at += 1
                while raw[at:at + 1] in (b" ", b"\t"):
                    at += 1
                close = raw.find(b'"', at + 1) if raw[at:at + 1] == b'"' else -1
                if close > at + 1:
                    value = raw[at + 1:close]
                    if b"\\" not in value and value.decode("utf-8", "replace") == text:
                        self._template = (raw[:at + 1], raw[close:])
        self._active = (None, b"") if self._event else self._template

    def _decode(self, raw: bytes) -> None:
        """One line, decoded and checked in full."""
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
                self._learn(raw, text)
            usage = event.get("usage")
            if usage:
                self.usage = usage
            return
        if raw[:6] == b"event:":
            self._event = raw[6:].strip().decode("utf-8", "replace")
            self._active = (None, b"")
        elif not raw.strip() and self._event:
            self._event = ""  # an event ends at a blank line
            self._active = self._template

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
        parser.consume(readline, until_first_token=True)
        if request.metrics.token_ns and not parser.done:
            if connection.sock is not None:
                connection.sock.settimeout(endpoint.idle_timeout)
            parser.consume(readline)
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
