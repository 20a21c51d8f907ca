"""``sleuth ask --server URL``: the question asked of a running ``sleuth serve``.

A CLI call that runs the agent itself loads the models first (the local GGUF alone is 1.1 GB,
several seconds on 2 cores, every call). A ``sleuth serve`` process keeps them loaded, so the
CLI can hand the run to it instead: ``POST /agent/search`` with ``stream: true``, the run's
events read from ``/agent/search/{task_id}/stream`` (Server-Sent Events, the same event
schema the local trace prints) and the result from ``/agent/search/{task_id}``. The API key
comes from ``SLEUTH_API_KEY``; the collection must be its user's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from sleuth.agents.events import AgentEvent, AgentEventAdapter
from sleuth.errors import SleuthError

CONNECT_TIMEOUT_S = 10.0
"""Seconds to reach the server."""
READ_TIMEOUT_S = 60.0
"""Seconds of silence after which the server is taken to have stopped answering: a run may
take minutes, but its event stream sends a keep-alive every 15 s
(:data:`sleuth.api.search.PING_S`) and every other request answers at once."""
TERMINAL = ("done", "error")


class RemoteError(SleuthError):
    """The server could not be reached, or it refused the request (its reason included)."""


@dataclass(frozen=True)
class RemoteResult:
    """What the CLI prints of a run the server made (the API's ``AgentSearchResponse``)."""

    status: str
    answer: str
    citations: list[str]
    insufficient: bool
    error: str | None
    raw: dict[str, Any]


def check_target(url: str, api_key: str | None) -> None:
    """Refuse a server URL without an ``http://`` or ``https://`` scheme and an API key with
    characters no key has (whitespace, non-ASCII), before anything is sent.

    Raises:
        ValueError: saying which of the two is wrong.
    """
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--server must be an http:// or https:// URL, not '{url}'")
    if api_key and not (api_key.isascii() and api_key.isprintable() and " " not in api_key):
        raise ValueError(
            "the API key (SLEUTH_API_KEY or --api-key) holds spaces, line breaks or non-ASCII "
            "characters: no key of `sleuth users create` does"
        )


def _client(url: str, api_key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S)
    return httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)


def _checked(response: httpx.Response, url: str) -> dict[str, Any]:
    """The JSON body of a 2xx response; else :class:`RemoteError` with the server's reason."""
    if response.is_success:
        body = response.json()
        return body if isinstance(body, dict) else {}
    try:
        problem = response.json()
        detail = problem.get("message") or problem.get("detail")
    except ValueError:
        detail = response.text.strip()[:200]
    refused = response.status_code in (401, 403)
    hint = " (set SLEUTH_API_KEY to a key of `sleuth users create`)" if refused else ""
    raise RemoteError(f"the server at {url} answered {response.status_code}: {detail}{hint}")


def create_thread(url: str, api_key: str | None, collection: str) -> str:
    """A new conversation thread over ``collection`` on the server; its id."""
    with _client(url, api_key) as client:
        body = _call(url, lambda: client.post("/threads", json={"collection": collection}))
    return str(body["thread_id"])


def thread_collection(url: str, api_key: str | None, thread_id: str) -> str:
    """The collection of one of the caller's threads on the server."""
    with _client(url, api_key) as client:
        body = _call(url, lambda: client.get(f"/threads/{thread_id}"))
    return str(body["collection"])


def _call(url: str, send: Callable[[], httpx.Response]) -> dict[str, Any]:
    try:
        return _checked(send(), url)
    except httpx.ConnectError as exc:
        raise RemoteError(
            f"cannot reach the sleuth server at {url} ({type(exc).__name__}): start it with "
            "`sleuth serve`, or leave out --server / SLEUTH_SERVER_URL to run here"
        ) from exc
    except httpx.TransportError as exc:  # a timeout, a dropped or garbled connection
        raise RemoteError(
            f"the sleuth server at {url} did not answer ({type(exc).__name__}: {exc})"
        ) from exc


def ask_remote(
    url: str,
    api_key: str | None,
    question: str,
    collection: str,
    *,
    mode: str = "react",
    max_iterations: int | None = None,
    memory: bool = True,
    thread_id: str | None = None,
    sink: Callable[[AgentEvent], None] | None = None,
) -> RemoteResult:
    """Run ``question`` on the server at ``url``; each event goes to ``sink`` as it comes.

    Raises:
        RemoteError: the server is unreachable, or it refused the request (unknown
            collection or thread, bad key, too many runs: its message is kept).
    """
    from httpx_sse import connect_sse

    request = {
        "query": question,
        "collection": collection,
        "mode": mode,
        "max_iterations": max_iterations,
        "use_memory": memory,
        "thread_id": thread_id,
        "stream": True,
    }
    with _client(url, api_key) as client:
        accepted = _call(url, lambda: client.post("/agent/search", json=request))
        task_id = accepted["task_id"]
        try:
            # the stream ends with the run (a finished run's is replayed): read to its end
            with connect_sse(client, "GET", f"/agent/search/{task_id}/stream") as source:
                for message in source.iter_sse():
                    if sink is not None and message.data:
                        sink(AgentEventAdapter.validate_json(message.data))
                    if message.event in TERMINAL:
                        break
            body = _checked(client.get(f"/agent/search/{task_id}"), url)
        except httpx.TimeoutException as exc:
            raise RemoteError(
                f"the sleuth server at {url} stopped answering during run {task_id} (nothing "
                f"for {READ_TIMEOUT_S:.0f} s); its result, if it finishes: "
                f"GET /agent/search/{task_id}"
            ) from exc
        except httpx.TransportError as exc:
            raise RemoteError(
                f"the sleuth server at {url} went away during run {task_id} "
                f"({type(exc).__name__}: {exc})"
            ) from exc
    return RemoteResult(
        status=str(body.get("status")),
        answer=str(body.get("answer") or ""),
        citations=list(dict.fromkeys(c["source_id"] for c in body.get("citations") or [])),
        insufficient=bool(body.get("is_insufficient_context")),
        error=body.get("error"),
        raw=body,
    )
