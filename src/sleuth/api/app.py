"""``create_app(settings)``: the FastAPI application of sleuth.

Errors are JSON ``{"detail": ...}`` with a status that says whose fault it is: 400 bad input
the library refused (``UserError``), 401/403 authentication, 404 not found (or not the
caller's), 409 conflicts, 413 too large, 415 unsupported type, 422 invalid fields (FastAPI's
list of field errors, plus ``message``: the errors on one line, each naming its field),
429 too busy. A 500 is a bug: its body names the exception type, the log has the traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import numpy as np
from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials
from starlette.concurrency import run_in_threadpool

from sleuth import __version__
from sleuth.api.auth import current_user
from sleuth.api.collections import collections_router
from sleuth.api.jobs import JobRegistry
from sleuth.api.quotas import UserLimits
from sleuth.api.runs import RunRegistry
from sleuth.api.schemas import Health
from sleuth.api.search import router as search_router
from sleuth.api.state import ApiState, get_state
from sleuth.api.threads import router as threads_router
from sleuth.api.web import mount_docs, mount_web
from sleuth.app import Sleuth
from sleuth.config import Settings
from sleuth.errors import ConfigError, NotFoundError, SleuthError, UserError
from sleuth.retrieval.embeddings import Embedder

logger = logging.getLogger(__name__)

JSON_BODY_LIMIT = 1024 * 1024
"""Largest JSON request body (bytes); uploads have their own limit."""

TOO_LARGE = (
    f"the request body is larger than {JSON_BODY_LIMIT} bytes (1 MiB), the limit for JSON "
    "requests; uploads go to POST /collections/{name}/documents"
)


class _JsonTooLarge:
    """ASGI wrapper: the plain-text ``413 Content Too Large`` that the framework's body
    limit sends (a declared ``Content-Length`` over the limit) answered in the API's JSON
    error shape (``{"detail": …}``) instead."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        replaced = False

        async def send_json(message: Any) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 413:
                headers = dict(message.get("headers") or [])
                if headers.get(b"content-type", b"").startswith(b"text/plain"):
                    replaced = True
                    return
            if replaced:
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    body = json.dumps({"detail": TOO_LARGE}).encode()
                    await send(
                        {
                            "type": "http.response.start",
                            "status": 413,
                            "headers": [
                                (b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                            ],
                        }
                    )
                    await send({"type": "http.response.body", "body": body})
                return
            await send(message)

        await self.app(scope, receive, send_json)


class _SleuthAPI(FastAPI):
    """FastAPI with every error, the framework's own 413 included, in the JSON shape."""

    def build_middleware_stack(self) -> Any:
        return _JsonTooLarge(super().build_middleware_stack())


DESCRIPTION = """\
sleuth answers questions over your documents with an agent that searches, reads, follows
references and cites the sections it used.

**Authentication**: every endpoint but `/health` needs `Authorization: Bearer <key>`; a key
is made once by `sleuth users create NAME`. A user reaches only their own collections and
runs: anything else answers 404.

**Streaming**: `POST /agent/search` with `"stream": true` answers 202 at once; the run's
events arrive on `GET /agent/search/{task_id}/stream` (Server-Sent Events, `id` = seq).
Reconnect with `Last-Event-ID` to resume. A client that disconnects does not stop the run:
it finishes and is stored.
"""


def _field(loc: Any) -> str:
    """``('body', 'query')`` → ``query``; ``('header', 'x')`` → ``header x``."""
    parts = [str(p) for p in loc]
    if len(parts) > 1 and parts[0] == "body":
        parts = parts[1:]
    elif len(parts) > 1 and parts[0] in ("query", "path", "header", "cookie"):
        return f"{parts[0]} parameter {'.'.join(parts[1:])}"
    return ".".join(parts)


def _error_message(error: dict[str, Any]) -> str:
    """One validation error as a line: ``query: Field required``; a body that is not JSON
    at all reads ``request body is not valid JSON: Expecting ',' delimiter (at character
    39)`` (FastAPI reports it at ``("body", <offset>)``)."""
    loc = tuple(error.get("loc", ()))
    if error.get("type") == "json_invalid":
        reason = str((error.get("ctx") or {}).get("error") or error.get("msg", ""))
        at = f" (at character {loc[1]})" if len(loc) > 1 and isinstance(loc[1], int) else ""
        return f"request body is not valid JSON: {reason}{at}"
    message = str(error.get("msg", ""))
    if error.get("type") == "value_error":  # a validator's own words, not pydantic's prefix
        message = message.removeprefix("Value error, ")
    return f"{_field(loc)}: {message}"


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        refused = _refused(request)
        if refused is not None:  # the key is checked before the body is judged
            return JSONResponse(
                {"detail": refused.detail},
                status_code=refused.status_code,
                headers=refused.headers,
            )
        errors = exc.errors()
        message = "; ".join(_error_message(e) for e in errors)
        sent = request.headers.get("content-type", "")
        if "json" not in sent and any(tuple(e.get("loc", ())) == ("body",) for e in errors):
            # curl -d without -H sends a form: say what the body must be, not "a dictionary"
            message = (
                "the request body must be JSON with 'Content-Type: application/json' "
                f"(got {sent or 'no Content-Type'})"
            )
        return JSONResponse(
            {"detail": _json_safe(jsonable_encoder(errors)), "message": message}, status_code=422
        )

    @app.exception_handler(SleuthError)
    async def _sleuth_error(_: Request, exc: SleuthError) -> JSONResponse:
        status = (
            409
            if isinstance(exc, ConfigError)
            else 404
            if isinstance(exc, NotFoundError)
            else 400
            if isinstance(exc, UserError)
            else 500
        )
        return JSONResponse({"detail": str(exc)}, status_code=status)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error on %s %s", request.method, request.url.path)
        return JSONResponse(
            {"detail": f"internal error ({type(exc).__name__}); see the server log"},
            status_code=500,
        )


def _refused(request: Request) -> HTTPException | None:
    """Why the request's API key is refused (401 / 403), or ``None`` when it is accepted or
    the route needs none. FastAPI parses a body before it runs the key dependency; this lets
    a request with a malformed body and no valid key get the 401/403 it is due."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    needs_key = dependant is not None and any(
        d.call is current_user for d in _all_dependencies(dependant)
    )
    if not needs_key:
        return None
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    credentials = (
        HTTPAuthorizationCredentials(scheme=scheme, credentials=token.strip())
        if scheme.lower() == "bearer" and token.strip()
        else None
    )
    try:
        current_user(get_state(request), credentials)
    except HTTPException as refused:
        return refused
    return None


def _all_dependencies(dependant: Any) -> list[Any]:
    found = []
    for sub in dependant.dependencies:
        found.append(sub)
        found.extend(_all_dependencies(sub))
    return found


ECHOED_CHARS = 200
"""Characters of a refused string a 422 echoes back (the rest is cut, with a mark)."""


def _json_safe(value: Any) -> Any:
    """``value`` with non-finite floats (``NaN``, ``Infinity``, ``1e400`` echoed back from a
    request body) written as strings: strict JSON has no such numbers; and a string longer
    than :data:`ECHOED_CHARS` cut to it (a refused 4,001-character question is not sent
    back whole)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str) and len(value) > ECHOED_CHARS:
        return f"{value[:ECHOED_CHARS]}… ({len(value):,} characters)"
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


class IngestEmbedder:
    """The configured embedding model in an instance of its own, loaded on first use.

    The ingestion worker embeds with it, searches with the shared instance: that instance
    serialises its callers, and a query waiting behind an ingestion's batches would wait
    for the whole ingestion (measured: a 800-chunk PDF held a query for 30 s). Costs one
    more copy of the model in memory (~90 MB for all-MiniLM-L6-v2) once something is
    uploaded.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._model: Embedder | None = None
        self._lock = threading.Lock()
        self.name = settings.embedding_model.removeprefix("sentence-transformers/")

    def _load(self) -> Embedder:
        with self._lock:
            if self._model is None:
                from sleuth.retrieval.embeddings import SentenceTransformerEmbedder

                s = self._settings
                self._model = SentenceTransformerEmbedder(s.embedding_model, s.embedding_batch_size)
            return self._model

    @property
    def dim(self) -> int:
        return self._load().dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._load().embed(texts)


async def _thread_retention(sleuth: Sleuth) -> None:
    """Apply the thread retention settings (``SLEUTH_THREAD_RETENTION_DAYS``,
    ``SLEUTH_THREAD_MAX_PER_USER``) now and every ``SLEUTH_THREAD_CLEANUP_INTERVAL_S``, in a
    worker thread: the catalog deletes in short batches, so requests are not held up. A
    failed pass is logged and tried again at the next interval."""
    s = sleuth.settings
    max_age = None if s.thread_retention_days is None else timedelta(days=s.thread_retention_days)
    while True:
        if max_age is not None or s.thread_max_per_user is not None:
            try:
                deleted = await run_in_threadpool(
                    sleuth.catalog.apply_thread_retention, max_age, s.thread_max_per_user
                )
                if deleted:
                    logger.info("thread retention: %d thread(s) deleted", deleted)
            except Exception:
                logger.exception("thread retention failed")
        await asyncio.sleep(s.thread_cleanup_interval_s)


def create_app(settings: Settings | None = None, *, sleuth: Sleuth | None = None) -> FastAPI:
    """The HTTP API over one sleuth installation.

    Args:
        settings: the configuration (``Settings()`` when omitted; ignored with ``sleuth``).
        sleuth: an installation to serve (tests pass one with a test embedder); it is left
            open on shutdown. Without it the app opens one from ``settings`` and closes it.

    Returns:
        The application. Background runs and ingestion jobs stop with its lifespan (the
        ones running are waited for; queued jobs stay in the catalog and resume at the next
        start, as do jobs a killed server left behind).
    """
    owns = sleuth is None
    if sleuth is None:
        settings = settings or Settings()
        sleuth = Sleuth(settings, ingest_embedder=IngestEmbedder(settings))
    s = sleuth.settings
    grace_s = s.api_shutdown_grace_s
    state = ApiState(
        sleuth=sleuth,
        runs=RunRegistry(sleuth.agent, sleuth.catalog, s.api_run_workers, s.api_max_queued_runs),
        jobs=JobRegistry(sleuth),
        limits=UserLimits(s),
        owns_sleuth=owns,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # work a stopped (or killed) server left unfinished: jobs are taken over, runs end
        await run_in_threadpool(state.jobs.resume)
        await run_in_threadpool(state.runs.recover)
        retention = asyncio.create_task(_thread_retention(sleuth))
        yield
        retention.cancel()
        # SIGTERM/SIGINT (uvicorn): new requests are refused; running work gets the grace
        state.settled = state.close(grace_s)

    app = _SleuthAPI(
        title="sleuth",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        max_body_size=JSON_BODY_LIMIT,
        docs_url=None,  # served from installed files by mount_docs, not from a CDN
        redoc_url=None,
        openapi_tags=[
            {"name": "agent search", "description": "Ask, stream, read runs"},
            {"name": "threads", "description": "Conversation threads and their turns"},
            {"name": "collections", "description": "Collections, documents, ingestion jobs"},
            {"name": "health", "description": "Liveness"},
        ],
    )
    app.state.sleuth = state
    _install_error_handlers(app)

    @app.get("/health", tags=["health"], summary="Liveness", response_model=Health)
    async def health() -> Health:
        """Answers at once, without authentication, whatever the server is busy with."""
        return Health(version=__version__)

    app.include_router(search_router)
    app.include_router(threads_router)
    app.include_router(collections_router(s))
    mount_docs(app)
    mount_web(app)
    return app
