"""Conversation threads: create, list, read and delete the caller's threads.

A thread belongs to one user and one collection. Its turns are written by the runs asked
in it (``POST /agent/search`` with ``thread_id``); these endpoints manage the threads
themselves. Another user's thread answers 404, as a missing one does.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Response
from fastapi.concurrency import run_in_threadpool

from sleuth.api.auth import CurrentUser, State
from sleuth.api.schemas import (
    THREAD_ID,
    Problem,
    ThreadCreate,
    ThreadDetail,
    ThreadOut,
    TurnOut,
)
from sleuth.api.state import ApiState
from sleuth.errors import NotFoundError
from sleuth.store.catalog import ThreadInfo, UserInfo

router = APIRouter(tags=["threads"])

ThreadId = Annotated[str, Path(pattern=f"^{THREAD_ID}$", description="The thread's id")]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "Missing or invalid API key"},
    403: {"model": Problem, "description": "The API key was revoked"},
    404: {"model": Problem, "description": "No such thread (or collection) of the caller"},
    422: {"model": Problem, "description": "Not a thread id (1-64 letters, digits, '_', '-')"},
    429: {"model": Problem, "description": "The user's request rate is spent; see Retry-After"},
}


def own_thread(state: ApiState, user: UserInfo, thread_id: str) -> ThreadInfo:
    """The caller's thread ``thread_id`` (:meth:`~sleuth.service.AgentService.thread`).

    Raises:
        HTTPException: 404 when it does not exist or is another user's (not told apart).
    """
    try:
        return state.sleuth.agent.thread(thread_id, user.id)
    except NotFoundError as exc:
        raise HTTPException(404, str(exc)) from exc


def _out(info: ThreadInfo) -> ThreadOut:
    return ThreadOut(**info.model_dump(include=set(ThreadOut.model_fields)))


@router.post(
    "/threads",
    summary="Start a conversation thread",
    status_code=201,
    response_model=ThreadOut,
    responses={**_ERRORS, 422: {"model": Problem, "description": "Invalid request"}},
)
def create_thread(body: ThreadCreate, user: CurrentUser, state: State) -> ThreadOut:
    """A new, empty thread over one of the caller's collections; ask in it with
    ``POST /agent/search`` and its ``thread_id``."""
    state.collection_of(user, body.collection)
    info = state.sleuth.catalog.create_thread(body.collection, user.id, body.title.strip())
    return _out(info)


@router.get(
    "/threads",
    summary="List the caller's threads",
    response_model=list[ThreadOut],
    responses={**_ERRORS},
)
def list_threads(
    user: CurrentUser,
    state: State,
    collection: Annotated[str | None, Query(description="Only threads of this collection")] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="At most this many threads")] = 50,
) -> list[ThreadOut]:
    """The caller's threads, the most recently used first."""
    threads = state.sleuth.catalog.list_threads(user_id=user.id, collection=collection, limit=limit)
    return [_out(t) for t in threads]


@router.get(
    "/threads/{thread_id}",
    summary="Read a thread and its turns",
    response_model=ThreadDetail,
    responses={**_ERRORS},
)
async def get_thread(
    thread_id: ThreadId,
    user: CurrentUser,
    state: State,
    last: Annotated[
        int | None, Query(ge=1, le=1000, description="Only the last N turns (default: all)")
    ] = None,
) -> ThreadDetail:
    """The thread and its turns, oldest first."""
    info = await run_in_threadpool(own_thread, state, user, thread_id)
    turns = await run_in_threadpool(state.sleuth.catalog.thread_turns, thread_id, last)
    return ThreadDetail(
        **_out(info).model_dump(),
        turns=[TurnOut(**t.model_dump(include=set(TurnOut.model_fields))) for t in turns],
    )


@router.delete(
    "/threads/{thread_id}",
    summary="Delete a thread and its turns",
    status_code=204,
    response_class=Response,
    responses={**_ERRORS},
)
def delete_thread(thread_id: ThreadId, user: CurrentUser, state: State) -> Response:
    """The thread and all its turns are deleted (the runs stay in the run history)."""
    own_thread(state, user, thread_id)
    state.sleuth.catalog.delete_thread(thread_id)
    return Response(status_code=204)
