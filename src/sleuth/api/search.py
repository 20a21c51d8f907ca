"""The agent-search endpoints: run a question, stream its events, read a stored run.

``GET /agent/search/{task_id}/stream`` sends the run's typed events (the
:data:`~sleuth.agents.events.AgentEvent` union, the schema of the CLI trace and of the run
store) as Server-Sent Events: ``id:`` is the event's ``seq`` (1, 2, …), ``event:`` its type,
``data:`` the event as JSON. The stream ends after the terminal ``done`` or ``error`` event.
A client that reconnects with ``Last-Event-ID: <n>`` (or ``?last_event_id=n``) gets the
events after ``n``, none lost, none repeated — from memory while the run is recent, from the
catalog afterwards. A client that disconnects does not stop the run (see
:mod:`sleuth.api.runs`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse, ServerSentEvent

from sleuth.agents.events import AgentEvent, AgentEventAdapter
from sleuth.api.auth import CurrentUser, State
from sleuth.api.runs import TERMINAL, RunBuffer, RunHandle, RunQueueFull
from sleuth.api.schemas import (
    AgentSearchAccepted,
    AgentSearchRequest,
    AgentSearchResponse,
    Problem,
    RunSummary,
    run_state,
)
from sleuth.api.state import ApiState
from sleuth.api.threads import own_thread
from sleuth.store.catalog import UserInfo

PING_S = 15.0
"""Seconds between keep-alive comments on an idle stream."""

router = APIRouter(tags=["agent search"])

_AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "Missing or invalid API key"},
    403: {"model": Problem, "description": "The API key was revoked"},
    429: {
        "model": Problem,
        "description": "The user's request rate (or runs at once) is spent; see Retry-After",
    },
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "No such run (or collection) of the caller"},
}
_SSE_EXAMPLE = (
    'id: 1\nevent: think\ndata: {"seq":1,"task_id":"4f1c…","timestamp":1796040000.1,'
    '"type":"think","content":"Plan: search for the punishment of murder","iteration":0}\n\n'
    'id: 2\nevent: tool_call\ndata: {"seq":2,"type":"tool_call","call_id":"c1",'
    '"tool":"rag_search","arguments":{"query":"punishment for murder"},…}\n\n'
    "…\n\n"
    'id: 9\nevent: done\ndata: {"seq":9,"type":"done","status":"completed",…}\n\n'
)


def _urls(task_id: str) -> tuple[str, str]:
    return f"/agent/search/{task_id}/stream", f"/agent/search/{task_id}"


def _own_handle(state: ApiState, user: UserInfo, task_id: str) -> RunHandle | None:
    handle = state.runs.get(task_id)
    return handle if handle is not None and handle.user_id == user.id else None


def _own_record(state: ApiState, user: UserInfo, task_id: str) -> dict[str, Any]:
    run = state.sleuth.catalog.get_run(task_id)
    if run is None or run.get("user_id") != user.id:
        raise HTTPException(404, f"run '{task_id}' not found")
    return run


@router.post(
    "/agent/search",
    summary="Ask the agent a question",
    response_model=AgentSearchResponse,
    responses={
        202: {"model": AgentSearchAccepted, "description": "stream: true — the run goes on"},
        **_AUTH_ERRORS,
        400: {"model": Problem, "description": "The thread is of another collection"},
        404: {"model": Problem, "description": "No such collection (or thread) of the caller"},
        422: {"model": Problem, "description": "Invalid request (the field is named)"},
        429: {"model": Problem, "description": "Too many runs running or waiting"},
    },
)
async def agent_search(body: AgentSearchRequest, user: CurrentUser, state: State) -> Any:
    """Run the agent over one of the caller's collections.

    With ``stream: false`` (default) the answer comes when the run ends (200). With
    ``stream: true`` the answer is 202 with the ``task_id`` at once; follow the run on
    ``stream_url`` and read its result on ``result_url``. A run that fails still answers
    200 with ``status: "error"`` and the reason in ``error``.
    """
    await run_in_threadpool(state.collection_of, user, body.collection)
    if body.thread_id is not None:
        thread = await run_in_threadpool(own_thread, state, user, body.thread_id)
        if thread.collection != body.collection:
            raise HTTPException(
                400,
                f"thread '{thread.thread_id}' belongs to collection '{thread.collection}', "
                f"not '{body.collection}'",
            )
    state.limits.check_runs(len(state.runs.active(user.id)))
    try:
        handle = state.runs.submit(user.id, body)
    except RunQueueFull as exc:
        raise HTTPException(429, str(exc), {"Retry-After": "5"}) from exc
    if body.stream:
        stream_url, result_url = _urls(handle.task_id)
        accepted = AgentSearchAccepted(
            task_id=handle.task_id, stream_url=stream_url, result_url=result_url
        )
        return JSONResponse(
            accepted.model_dump(mode="json"), status_code=202, headers={"Location": result_url}
        )
    # shielded: a client that goes away does not cancel the run (finish and store)
    return await asyncio.shield(asyncio.wrap_future(handle.future))


@router.get(
    "/agent/search",
    summary="List the caller's runs",
    response_model=list[RunSummary],
    responses={**_AUTH_ERRORS},
)
def list_runs(
    user: CurrentUser,
    state: State,
    collection: Annotated[str | None, Query(description="Only runs of this collection")] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="At most this many runs")] = 50,
) -> list[RunSummary]:
    """The caller's runs, running ones first, then finished ones newest first."""
    active = [
        RunSummary(**h.view().model_dump(include=set(RunSummary.model_fields)))
        for h in state.runs.active(user.id)
        if collection is None or h.request.collection == collection
    ]
    stored = [
        RunSummary(
            task_id=r["task_id"],
            query=r["question"],
            collection=r["collection"],
            mode=r["mode"],
            status=run_state(r["status"]),
            created_at=r["created_at"],
            finished_at=r["finished_at"],
        )
        for r in state.sleuth.catalog.list_runs(collection=collection, user_id=user.id, limit=limit)
    ]
    seen = {s.task_id for s in active}
    return [*active, *(s for s in stored if s.task_id not in seen)][:limit]


@router.get(
    "/agent/search/{task_id}",
    summary="Read a run",
    response_model=AgentSearchResponse,
    responses={**_AUTH_ERRORS, **_NOT_FOUND},
)
async def get_run(task_id: str, user: CurrentUser, state: State) -> AgentSearchResponse:
    """The run: ``status: "running"`` while it goes on, then its stored result (answer,
    citations with their text, steps, tool calls, trace)."""
    handle = _own_handle(state, user, task_id)
    if handle is not None:  # its result is set before its terminal event is published
        return handle.view()
    run = await run_in_threadpool(_own_record, state, user, task_id)
    return AgentSearchResponse.from_record(run)


def _last_event_id(header: str | None, query: int | None) -> int:
    if header is None or not header.strip():
        return query or 0
    try:
        value = int(header.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise HTTPException(
            422,
            f"Last-Event-ID must be a non-negative integer (the id of the last event "
            f"received), not {header[:40]!r}",
        )
    return value


def _sse(event: AgentEvent) -> ServerSentEvent:
    return ServerSentEvent(data=event.model_dump_json(), event=event.type, id=str(event.seq))


async def _live(buffer: RunBuffer, after: int) -> AsyncIterator[ServerSentEvent]:
    last = after
    while True:
        batch = buffer.after(last)
        for event in batch:
            yield _sse(event)
            last = event.seq
            if event.type in TERMINAL:
                return
        if not batch:
            if buffer.terminated and last >= buffer.last_seq:  # resumed after the end
                return
            await buffer.wait_after(last, PING_S)


async def _replay(events: Sequence[AgentEvent], after: int) -> AsyncIterator[ServerSentEvent]:
    for event in events:
        if event.seq > after:
            yield _sse(event)


@router.get(
    "/agent/search/{task_id}/stream",
    summary="Stream a run's events (Server-Sent Events)",
    response_class=EventSourceResponse,
    responses={
        200: {
            "description": "The run's events, ``id`` = seq; the stream ends after the "
            "terminal ``done`` or ``error`` event",
            "content": {"text/event-stream": {"example": _SSE_EXAMPLE}},
        },
        **_AUTH_ERRORS,
        **_NOT_FOUND,
        422: {"model": Problem, "description": "A Last-Event-ID that is not an integer ≥ 0"},
    },
)
async def stream_run(
    task_id: str,
    user: CurrentUser,
    state: State,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            description="Resume after this event id (sent by SSE clients on reconnect)",
        ),
    ] = None,
    last_event_id_query: Annotated[
        int | None,
        Query(
            alias="last_event_id",
            ge=0,
            description="Same as the header, for clients that cannot set headers",
        ),
    ] = None,
) -> EventSourceResponse:
    """The run's events as they happen: think → tool_call → tool_result → … → answer, then
    exactly one ``done`` or ``error``. Reconnect with ``Last-Event-ID`` to resume."""
    after = _last_event_id(last_event_id, last_event_id_query)
    handle = _own_handle(state, user, task_id)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    if handle is not None:
        return EventSourceResponse(_live(handle.buffer, after), ping=PING_S, headers=headers)
    run = await run_in_threadpool(_own_record, state, user, task_id)
    stored = run.get("events")
    if not isinstance(stored, list):
        raise HTTPException(404, f"run '{task_id}' has no stored events")
    events = [AgentEventAdapter.validate_python(e) for e in stored]
    return EventSourceResponse(_replay(events, after), ping=PING_S, headers=headers)
