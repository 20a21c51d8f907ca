"""Builders for the HTTP API tests: an installation with users, a real server on loopback.

``make_api`` gives a :class:`~sleuth.app.Sleuth` over a small statute collection (hashing
test embedder, unless one is given), two API users (``alice`` owns the collection, ``bob``
owns nothing) and the FastAPI app. ``serve`` runs an app with uvicorn on a free loopback
port in a thread. ``sse_events`` reads a Server-Sent Events response with httpx-sse.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from httpx_sse import EventSource

from sleuth.agents.heuristic import HeuristicReasoner
from sleuth.agents.reasoner import Decision, Reasoner
from sleuth.api import create_app
from sleuth.api.app import IngestEmbedder
from sleuth.api.keys import create_user
from sleuth.app import Sleuth
from sleuth.config import Settings
from sleuth.retrieval.embeddings import Embedder, HashingEmbedder
from tests.helpers import STATUTE_SECTIONS, make_document

SERVER_START_TIMEOUT_S = 20.0


class SlowReasoner(HeuristicReasoner):
    """The heuristic reasoner, ``delay`` seconds slower per THINK step (runs that last)."""

    def __init__(self, delay: float = 0.2) -> None:
        self.delay = delay

    def decide(self, state: Any, ctx: Any, tools: Any) -> Decision:
        time.sleep(self.delay)
        return super().decide(state, ctx, tools)


@dataclass
class ApiEnv:
    """An installation served by an app, with the API keys of ``alice`` and ``bob``."""

    sleuth: Sleuth
    app: FastAPI
    keys: dict[str, str]
    user_ids: dict[str, str]

    def auth(self, user: str = "alice") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[user]}"}


def make_api(
    tmp_path: Path,
    sections: dict[str, tuple[str, str]] | None = None,
    reasoner: Reasoner | None = None,
    embedder: Embedder | None = None,
    collection: str = "test",
    own_ingest_embedder: bool = False,
    **overrides: Any,
) -> ApiEnv:
    """An app over ``collection`` (owned by alice); ``overrides`` are settings fields.

    ``own_ingest_embedder``: ingestion embeds with an instance of the configured model of its
    own, as in ``sleuth serve`` (:class:`~sleuth.api.app.IngestEmbedder`)."""
    embedder = embedder or HashingEmbedder()
    settings = Settings(
        data_dir=tmp_path / "data",
        embedding_model=embedder.name,
        index_backend="local",
        planner="heuristic",
        reflection="heuristic",
        **overrides,
    )
    ingest = IngestEmbedder(settings) if own_ingest_embedder else None
    sleuth = Sleuth(settings, embedder=embedder, reasoner=reasoner, ingest_embedder=ingest)
    sleuth.pipeline.ingest_documents([make_document(sections or STATUTE_SECTIONS)], collection)
    keys: dict[str, str] = {}
    ids: dict[str, str] = {}
    for name in ("alice", "bob"):
        user, keys[name] = create_user(sleuth.catalog, name)
        ids[name] = user.id
    sleuth.catalog.set_collection_owner(collection, ids["alice"])
    return ApiEnv(sleuth=sleuth, app=create_app(sleuth=sleuth), keys=keys, user_ids=ids)


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """Run ``app`` with uvicorn on a free loopback port (in a thread); yields its base URL.

    The app's lifespan runs, so its background runs and jobs are stopped on exit.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the API server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def sse_events(response: httpx.Response, limit: int | None = None) -> list[dict[str, Any]]:
    """The events of an SSE response as ``{"id", "event", "data"}`` (data parsed as JSON);
    stops after ``limit`` events when given."""
    out: list[dict[str, Any]] = []
    for sse in EventSource(response).iter_sse():
        if not sse.data:  # a keep-alive comment (httpx-sse yields it as an empty event)
            continue
        out.append({"id": sse.id, "event": sse.event, "data": sse.json()})
        if limit is not None and len(out) >= limit:
            break
    return out
