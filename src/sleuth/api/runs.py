"""Agent runs in the background, and the event buffer that the SSE stream reads.

Each ``POST /agent/search`` becomes a :class:`RunHandle`, executed on a thread pool (the agent
is synchronous) by :meth:`AgentService.execute_agentic_search`. A run shares no mutable state
with another: its events go to its own :class:`RunBuffer`, its tools get their own
``RunContext``, its answer is its own response object.

The buffer keeps every event of the run in ``seq`` order (1, 2, …), so a reader can start, or
resume after ``Last-Event-ID``, at any point without losing one. The terminal event (``done``
or ``error``) is held back until the run is stored in the catalog with its events: a client
that has seen ``done`` finds the finished run at ``GET /agent/search/{task_id}``.

Disconnect policy: *finish and store*. A run does not depend on its readers; a client that
goes away mid-stream leaves the run going, and its result (answer, steps, trace, events) is
stored and can be read or streamed again later.

Durability: a run is stored as ``running`` (with this process's worker name, see
:mod:`sleuth.api.workers`) when it is accepted, and its events are written as it goes (at
most every :data:`PERSIST_EVERY_S`). A run a killed or stopped server left in flight reads
``interrupted`` after the next start (:meth:`RunRegistry.recover`): its stored events are
kept and an ``error`` event ends them, so ``GET /agent/search/{id}`` and its stream end
cleanly instead of hanging or answering 404.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sleuth.agents.events import AgentEvent, AgentEventAdapter, ErrorEvent
from sleuth.agents.state import RunStatus
from sleuth.api.schemas import AgentSearchRequest, AgentSearchResponse
from sleuth.api.workers import is_gone, worker_name
from sleuth.errors import SleuthError
from sleuth.service import AgentService
from sleuth.store.catalog import Catalog

logger = logging.getLogger(__name__)

TERMINAL = frozenset({"done", "error"})
INTERRUPTED = "interrupted"
INTERRUPTED_MESSAGE = "interrupted: the server stopped while this run was in flight; ask again"
PERSIST_EVERY_S = 2.0
"""A running run's events are written to the catalog at most this often."""
RETAIN_FINISHED_S = 60.0
"""A finished run stays in memory this long (seconds); later it is read from the catalog."""
MAX_FINISHED_KEPT = 256
"""At most this many finished runs stay in memory (the newest): a finished run holds its
answer, steps, trace and events (~0.3 MB for a statute question), and at several runs a
second ten minutes of them grew the server by 300–400 MB (``bench/bench_soak.py``)."""


class RunQueueFull(SleuthError):
    """Too many runs are running or waiting; the API answers 429."""


class RunBuffer:
    """The events of one run in ``seq`` order, for any number of readers.

    Written by the run's thread(s), read by threads or asyncio tasks. Events that arrive
    ahead of a missing one (parallel branches of the guided graph) are held until the gap
    is filled, so readers only ever see the contiguous prefix 1..n.
    """

    def __init__(self) -> None:
        self._events: list[AgentEvent] = []
        self._early: dict[int, AgentEvent] = {}
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def add(self, event: AgentEvent) -> None:
        """Append an event (its ``seq`` must be set) and wake the readers."""
        with self._lock:
            if event.seq > len(self._events):
                self._early[event.seq] = event
            while len(self._events) + 1 in self._early:
                self._events.append(self._early.pop(len(self._events) + 1))
            waiters = list(self._waiters)
        for loop, ready in waiters:
            with contextlib.suppress(RuntimeError):  # a closed loop: that reader is gone
                loop.call_soon_threadsafe(ready.set)

    def after(self, seq: int) -> list[AgentEvent]:
        """The events with a ``seq`` greater than ``seq``, in order."""
        with self._lock:
            return self._events[max(0, seq) :]

    def all(self) -> list[AgentEvent]:
        with self._lock:
            return list(self._events)

    @property
    def last_seq(self) -> int:
        with self._lock:
            return len(self._events)

    @property
    def terminated(self) -> bool:
        with self._lock:
            return bool(self._events) and self._events[-1].type in TERMINAL

    async def wait_after(self, seq: int, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until an event after ``seq`` is there."""
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        waiter = (loop, ready)
        with self._lock:
            if len(self._events) > seq:
                return
            self._waiters.append(waiter)
        try:
            await asyncio.wait_for(ready.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.remove(waiter)


def _now() -> datetime:
    return datetime.now(UTC)


def _as_datetime(value: Any) -> datetime | None:
    """A stored timestamp (datetime or ISO string) as an aware UTC datetime."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime) and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value if isinstance(value, datetime) else None


@dataclass
class RunHandle:
    """One run of the API: who asked what, its events, and its result once finished."""

    task_id: str
    user_id: str
    request: AgentSearchRequest
    created_at: datetime = field(default_factory=_now)
    buffer: RunBuffer = field(default_factory=RunBuffer)
    future: Future[AgentSearchResponse] = field(default_factory=Future)
    result: AgentSearchResponse | None = None
    finished_monotonic: float | None = None

    @property
    def finished(self) -> bool:
        return self.result is not None

    def view(self) -> AgentSearchResponse:
        """The result, or (while running) the request with status ``running``."""
        if self.result is not None:
            return self.result
        return AgentSearchResponse(
            task_id=self.task_id,
            query=self.request.query,
            collection=self.request.collection,
            mode=self.request.mode,
            status="running",
            created_at=self.created_at,
        )


class RunRegistry:
    """Runs the API's agent searches on a thread pool and keeps them readable.

    Args:
        agent: the agent service (shared: it is stateless per run).
        catalog: where finished runs are stored with their events.
        workers: runs executed at once; later ones wait in the pool's queue.
        max_active: runs running or waiting at most (:class:`RunQueueFull` beyond).
    """

    def __init__(
        self, agent: AgentService, catalog: Catalog, workers: int = 8, max_active: int = 256
    ) -> None:
        self.agent = agent
        self.catalog = catalog
        self.max_active = max_active
        self.worker = worker_name()
        self.stale_after_s = 2 * agent.settings.run_timeout_s + 60
        """A run in flight this long after its last write belongs to a gone process."""
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sleuth-run")
        self._runs: dict[str, RunHandle] = {}
        self._lock = threading.Lock()

    def submit(self, user_id: str, request: AgentSearchRequest) -> RunHandle:
        """Queue a run; returns its handle at once.

        Raises:
            RunQueueFull: ``max_active`` runs are running or waiting already.
        """
        handle = RunHandle(task_id=uuid.uuid4().hex, user_id=user_id, request=request)
        with self._lock:
            self._forget_old()
            active = sum(1 for h in self._runs.values() if not h.finished)
            if active >= self.max_active:
                raise RunQueueFull(
                    f"{active} runs are running or waiting (SLEUTH_API_MAX_QUEUED_RUNS="
                    f"{self.max_active}); retry later"
                )
            self._runs[handle.task_id] = handle
        self._record_start(handle)
        pool_future = self._pool.submit(self._execute, handle)
        pool_future.add_done_callback(lambda f: self._settle(handle, f))
        return handle

    def get(self, task_id: str) -> RunHandle | None:
        with self._lock:
            return self._runs.get(task_id)

    def active(self, user_id: str | None = None) -> list[RunHandle]:
        """Runs not finished yet (of one user), oldest first."""
        with self._lock:
            return [
                h
                for h in self._runs.values()
                if not h.finished and (user_id is None or h.user_id == user_id)
            ]

    def shutdown(self, grace_s: float | None = None) -> list[str]:
        """Drop the waiting runs (they end ``interrupted``, with an ``error`` event) and wait
        for the running ones — at most ``grace_s`` seconds when given: the runs still going
        then are stored ``interrupted`` (their events so far kept) and left to the process's
        exit. Returns the ids of those."""
        self._pool.shutdown(wait=grace_s is None, cancel_futures=True)
        if grace_s is None:
            return []
        deadline = time.monotonic() + grace_s
        for handle in self.active():
            with contextlib.suppress(Exception):
                handle.future.result(timeout=max(0.0, deadline - time.monotonic()))
        left = [h for h in self.active() if not h.finished]
        for handle in left:
            events = [AgentEventAdapter.dump_python(e, mode="json") for e in handle.buffer.all()]
            end = ErrorEvent(
                message=INTERRUPTED_MESSAGE,
                seq=len(events) + 1,
                task_id=handle.task_id,
            )
            with contextlib.suppress(Exception):
                self.catalog.save_run(
                    {
                        "task_id": handle.task_id,
                        "status": INTERRUPTED,
                        "error": INTERRUPTED_MESSAGE,
                        "finished_at": _now(),
                        "events": [*events, AgentEventAdapter.dump_python(end, mode="json")],
                    }
                )
        if left:
            logger.warning("%d runs outlived the shutdown grace: interrupted", len(left))
        return [h.task_id for h in left]

    def recover(self) -> list[str]:
        """Mark the runs a gone process left in flight ``interrupted``: their stored events
        kept, an ``error`` event appended. Returns their task ids."""
        done: list[str] = []
        for run in self.catalog.list_runs(status="running", limit=10_000):
            worker = run.get("worker")
            beat = run.get("heartbeat_at") or run.get("created_at")
            if worker is None or not is_gone(
                worker, _as_datetime(beat), self.stale_after_s, self.worker
            ):
                continue
            events = list(run.get("events") or [])
            last = max((int(e.get("seq", 0)) for e in events), default=0)
            end = ErrorEvent(message=INTERRUPTED_MESSAGE, seq=last + 1, task_id=run["task_id"])
            self.catalog.save_run(
                {
                    "task_id": run["task_id"],
                    "status": INTERRUPTED,
                    "error": INTERRUPTED_MESSAGE,
                    "finished_at": _now(),
                    "trace": {**(run.get("trace") or {}), "error": INTERRUPTED_MESSAGE},
                    "events": [*events, AgentEventAdapter.dump_python(end, mode="json")],
                }
            )
            done.append(run["task_id"])
        if done:
            logger.warning("%d runs were in flight when the server stopped: interrupted", len(done))
        return done

    # ------------------------------------------------------------------ internals

    def _forget_old(self) -> None:
        """Drop finished runs older than :data:`RETAIN_FINISHED_S`, and the oldest beyond
        :data:`MAX_FINISHED_KEPT` (the catalog serves them from then on)."""
        cutoff = time.monotonic() - RETAIN_FINISHED_S
        finished = sorted(
            (h.finished_monotonic, k)
            for k, h in self._runs.items()
            if h.finished_monotonic is not None
        )
        excess = max(0, len(finished) - MAX_FINISHED_KEPT)
        for i, (at, key) in enumerate(finished):
            if i < excess or at < cutoff:
                del self._runs[key]

    def _record_start(self, handle: RunHandle) -> None:
        """Store the accepted run as ``running`` (a failure is logged: the run goes on)."""
        req = handle.request
        try:
            self.catalog.save_run(
                {
                    "task_id": handle.task_id,
                    "collection": req.collection,
                    "user_id": handle.user_id,
                    "question": req.query,
                    "mode": req.mode,
                    "status": "running",
                    "created_at": handle.created_at,
                    "worker": self.worker,
                    "heartbeat_at": _now().isoformat(),
                    "events": [],
                }
            )
        except Exception as exc:
            logger.warning("run %s could not be recorded: %s", handle.task_id, exc)

    def _record_events(self, handle: RunHandle) -> None:
        """Write the run's events so far (its heartbeat too)."""
        events = [AgentEventAdapter.dump_python(e, mode="json") for e in handle.buffer.all()]
        try:
            self.catalog.save_run(
                {"task_id": handle.task_id, "events": events, "heartbeat_at": _now().isoformat()}
            )
        except Exception as exc:
            logger.warning("run %s events could not be recorded: %s", handle.task_id, exc)

    def _settle(self, handle: RunHandle, pool_future: Future[AgentSearchResponse]) -> None:
        """Resolve the handle's future from the pool's (a cancelled run fails cleanly)."""
        if pool_future.cancelled():
            result = self._fail(
                handle, "the server shut down before the run started", status=INTERRUPTED
            )
        elif pool_future.exception() is not None:  # _execute never raises; just in case
            result = self._fail(handle, f"{type(pool_future.exception()).__name__}")
        else:
            result = pool_future.result()
        if not handle.future.done():
            handle.future.set_result(result)

    def _execute(self, handle: RunHandle) -> AgentSearchResponse:
        req = handle.request
        held: list[AgentEvent] = []
        written = [time.monotonic()]

        def sink(event: AgentEvent) -> None:
            if event.type in TERMINAL:
                held.append(event)  # published once the run is stored
            else:
                handle.buffer.add(event)
                if time.monotonic() - written[0] >= PERSIST_EVERY_S:
                    written[0] = time.monotonic()
                    self._record_events(handle)

        try:
            response = self.agent.execute_agentic_search(
                req.query,
                req.collection,
                user_id=handle.user_id,
                mode=req.mode,
                max_iterations=req.max_iterations,
                timeout_s=req.timeout_s,
                sinks=[sink],
                task_id=handle.task_id,
                use_memory=req.use_memory,
                strict_grounding=req.strict_grounding,
                thread_id=req.thread_id,
            )
        except Exception as exc:  # before any event (e.g. collection deleted) or unexpected
            message = str(exc) if isinstance(exc, SleuthError) else f"{type(exc).__name__}: {exc}"
            logger.warning("run %s failed: %s", handle.task_id, message)
            return self._fail(handle, message, held)
        result = AgentSearchResponse.from_answer(
            response.answer,
            task_id=handle.task_id,
            query=req.query,
            collection=response.collection,
            mode=response.mode,
            status=response.status.value,
            reasoning_steps=response.reasoning_steps,
            tool_calls=response.tool_calls,
            artifacts=response.artifacts,
            trace=response.trace,
            error=response.trace.get("error"),
            created_at=handle.created_at,
            finished_at=_now(),
        )
        stored = "store_error" not in response.trace
        self._finish(handle, result, held, stored)
        return result

    def _fail(
        self,
        handle: RunHandle,
        message: str,
        held: list[AgentEvent] | None = None,
        status: str = RunStatus.ERROR.value,
    ) -> AgentSearchResponse:
        """End a run that the service could not run: an ``error`` event and a stored record."""
        if handle.finished:
            return handle.result  # type: ignore[return-value]
        held = held if held is not None else []
        if not held:
            held.append(
                ErrorEvent(message=message, seq=handle.buffer.last_seq + 1, task_id=handle.task_id)
            )
        result = AgentSearchResponse(
            task_id=handle.task_id,
            query=handle.request.query,
            collection=handle.request.collection,
            mode=handle.request.mode,
            status=status,
            error=message,
            trace={"error": message},
            created_at=handle.created_at,
            finished_at=_now(),
        )
        self._finish(handle, result, held, stored=False)
        return result

    def _finish(
        self,
        handle: RunHandle,
        result: AgentSearchResponse,
        held: list[AgentEvent],
        stored: bool,
    ) -> None:
        """Store the run with its events, then publish the result and the terminal event."""
        events = [*handle.buffer.all(), *held]
        record: dict[str, Any] = {
            "task_id": handle.task_id,
            "created_at": handle.created_at,
            "finished_at": result.finished_at,
            "events": [AgentEventAdapter.dump_python(e, mode="json") for e in events],
        }
        if not stored:
            record.update(
                collection=result.collection,
                user_id=handle.user_id,
                question=result.query,
                mode=result.mode,
                status=result.status,
                error=result.error,
                answer=None,
                steps=[],
                trace=result.trace,
            )
        try:
            self.catalog.save_run(record)
        except Exception as exc:  # the run is still readable from memory for a while
            logger.error("run %s could not be stored: %s", handle.task_id, exc)
            result.trace["store_error"] = f"{type(exc).__name__}: {exc}"
        handle.result = result
        handle.finished_monotonic = time.monotonic()
        for event in held:
            handle.buffer.add(event)
