"""An OpenAI-compatible chat server on loopback that misbehaves on purpose.

Each ``POST /v1/chat/completions`` is answered by the next :data:`Behaviour` of the
server's script (the last one repeats): a reply (plain text, tool calls, a reasoning field,
arguments encoded twice), an HTTP error (400/429/500 with the message a real server sends),
a request that hangs until the server stops, a connection dropped in the middle of the
body, or llama.cpp's context-window check (:func:`window`). ``GET /props`` reports the
context window like llama.cpp's server when one is set. Every request body is kept
(:attr:`FaultServer.requests`) so a test can assert what the client sent.

    with FaultServer([hang()]) as server:
        Settings(llm="openai:fault", llm_base_url=server.url)
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Behaviour = Callable[["FaultServer", dict[str, Any], BaseHTTPRequestHandler], None]


def _send_json(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode("utf-8")
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def completion(
    content: str | None = "",
    tool_calls: Sequence[dict[str, Any]] = (),
    reasoning_content: str | None = None,
    prompt_tokens: int = 10,
) -> dict[str, Any]:
    """A ``chat.completion`` object with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    return {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "fault",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 5,
            "total_tokens": prompt_tokens + 5,
        },
    }


def reply(content: str | None = "", **kwargs: Any) -> Behaviour:
    """Answer with :func:`completion` (``tool_calls``, ``reasoning_content`` as there); a
    request with ``"stream": true`` gets the same reply as Server-Sent Events
    (:func:`_send_stream`)."""

    def run(_server: FaultServer, body: dict[str, Any], handler: BaseHTTPRequestHandler) -> None:
        if body.get("stream"):
            _send_stream(handler, completion(content, **kwargs))
        else:
            _send_json(handler, 200, completion(content, **kwargs))

    return run


def _chunks(whole: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``chat.completion`` as the ``chat.completion.chunk`` objects a streaming server
    sends: the role, the content a word at a time, the reasoning and tool calls in one
    piece each, the finish reason, then the usage (``stream_options.include_usage``)."""
    message = whole["choices"][0]["message"]
    base = {"id": whole["id"], "object": "chat.completion.chunk", "created": whole["created"]}
    base["model"] = whole["model"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("reasoning_content") is not None:
        out.append(chunk({"reasoning_content": message["reasoning_content"]}))
    text = message.get("content") or ""
    words = text.split(" ")
    out += [chunk({"content": w if i == 0 else f" {w}"}) for i, w in enumerate(words) if text]
    for i, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": i, **call}]}))
    out.append(chunk({}, whole["choices"][0]["finish_reason"]))
    out.append({**base, "choices": [], "usage": whole["usage"]})
    return out


def _send_stream(
    handler: BaseHTTPRequestHandler, whole: dict[str, Any], cut_after: int | None = None
) -> None:
    """Send ``whole`` as Server-Sent Events ending with ``data: [DONE]``; with ``cut_after``,
    only that many events, then the connection is closed mid-stream."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    events = [f"data: {json.dumps(c)}\n\n" for c in _chunks(whole)] + ["data: [DONE]\n\n"]
    for event in events[:cut_after]:
        handler.wfile.write(event.encode("utf-8"))
        handler.wfile.flush()
    handler.close_connection = True
    if cut_after is not None:
        handler.connection.shutdown(2)


def drop_stream(content: str, after: int = 3) -> Behaviour:
    """A streamed reply (``"stream": true``) whose connection is closed after ``after``
    events, in the middle of the text; a request without streaming gets :func:`drop`."""

    def run(server: FaultServer, body: dict[str, Any], handler: BaseHTTPRequestHandler) -> None:
        if body.get("stream"):
            _send_stream(handler, completion(content), cut_after=after)
        else:
            drop()(server, body, handler)

    return run


def tool_call(name: str, arguments: Any, *, double_encoded: bool = False) -> dict[str, Any]:
    """One OpenAI ``tool_calls`` entry; ``double_encoded``: the JSON string of the arguments
    encoded once more, as some servers send it."""
    text = json.dumps(arguments)
    return {
        "id": f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(text) if double_encoded else text},
    }


def error(status: int, message: str, retry_after: float | None = None) -> Behaviour:
    """Answer with an OpenAI-style error object and ``status``."""

    def run(_server: FaultServer, _body: dict[str, Any], handler: BaseHTTPRequestHandler) -> None:
        body = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        if retry_after is not None:
            handler.send_header("Retry-After", str(retry_after))
        handler.end_headers()
        handler.wfile.write(body)

    return run


def hang() -> Behaviour:
    """Never answer: the request waits until the server is stopped."""

    def run(server: FaultServer, _body: dict[str, Any], _handler: BaseHTTPRequestHandler) -> None:
        server.stopping.wait()

    return run


def drop() -> Behaviour:
    """Promise a body, send half of it, and close the connection."""

    def run(_server: FaultServer, _body: dict[str, Any], handler: BaseHTTPRequestHandler) -> None:
        body = json.dumps(completion("a reply that never arrives whole")).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body[: len(body) // 2])
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(2)

    return run


def prompt_tokens(body: dict[str, Any]) -> int:
    """A tokenizer's count of a request's prompt, as a BPE vocabulary gives for English
    (one token per 4 UTF-8 bytes of the messages' text and the tools' schemas), plus the
    chat template's markers (8 per message)."""
    size = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        size += len(str(content or "").encode("utf-8"))
        for call in message.get("tool_calls") or []:
            size += len(json.dumps(call).encode("utf-8"))
    if body.get("tools"):
        size += len(json.dumps(body["tools"]).encode("utf-8"))
    return math.ceil(size / 4) + 8 * len(body.get("messages") or [])


def window(inner: Behaviour) -> Behaviour:
    """llama.cpp's check: a prompt longer than the server's context window is refused with
    its 400 message; any other request goes to ``inner``."""

    def run(server: FaultServer, body: dict[str, Any], handler: BaseHTTPRequestHandler) -> None:
        tokens = prompt_tokens(body)
        assert server.context is not None
        if tokens > server.context:
            error(
                400,
                f"the request exceeds the available context size ({tokens} > "
                f"{server.context}), try increasing it",
            )(server, body, handler)
            return
        inner(server, body, handler)

    return run


class FaultServer:
    """The server; a context manager that starts it on a free loopback port.

    Args:
        script: behaviours for the successive chat requests (the last one repeats).
        context: the context window ``GET /props`` reports (``None``: 404, as a server
            that does not say, unless ``chat_template`` is given).
        chat_template: the Jinja chat template ``GET /props`` reports, as llama.cpp's
            server does.

    Attributes:
        url: the ``/v1`` base URL.
        requests: the JSON body of every chat request, in order.
        stopping: set when the server stops (hung requests then return).
    """

    def __init__(
        self,
        script: Sequence[Behaviour],
        context: int | None = None,
        chat_template: str | None = None,
    ) -> None:
        self.script = list(script)
        self.context = context
        self.chat_template = chat_template
        self.requests: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:  # quiet
                return

            def do_GET(self) -> None:
                props = server.context is not None or server.chat_template is not None
                if self.path.rstrip("/") == "/props" and props:
                    body: dict[str, Any] = {"default_generation_settings": {}}
                    if server.context is not None:
                        body["default_generation_settings"]["n_ctx"] = server.context
                    if server.chat_template is not None:
                        body["chat_template"] = server.chat_template
                    _send_json(self, 200, body)
                elif self.path.rstrip("/") == "/v1/models":
                    _send_json(self, 200, {"object": "list", "data": [{"id": "fault"}]})
                else:
                    _send_json(self, 404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    index = len(server.requests)
                    server.requests.append(body)
                    behaviour = server.script[min(index, len(server.script) - 1)]
                # the client may give up first: what these tests provoke
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    behaviour(server, body, self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()


@contextmanager
def fault_server(script: Sequence[Behaviour], context: int | None = None) -> Iterator[FaultServer]:
    """:class:`FaultServer` as a context manager function."""
    with FaultServer(script, context) as server:
        yield server
