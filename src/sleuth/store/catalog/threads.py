"""Conversation threads: the questions a user asked in turn about one collection, with the
answers they got, so that a follow-up question can be read in the light of the earlier ones.

A thread lives until it is deleted, its collection is deleted, or retention
(:meth:`ThreadsMixin.apply_thread_retention`) removes it; its turns go with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from pydantic import BaseModel, Field
from sqlalchemy import ColumnElement, delete, func, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from sleuth.errors import NotFoundError
from sleuth.store.catalog.collections import validate_collection_name
from sleuth.store.catalog.rows import _aware, _now, _release_free_pages, _ThreadRow, _TurnRow

_TITLE_CHARS = 80
"""A title taken from the first question is at most this long."""
_TITLE_MAX = 200
"""The longest title a thread keeps (the length of its column)."""


class ThreadInfo(BaseModel):
    """A conversation thread, without its turns."""

    thread_id: str = Field(description="Random id (32 hex digits)")
    collection: str
    user_id: str | None = Field(default=None, description="Its user; None without API keys")
    title: str = Field(default="", description="Given, or the start of the first question")
    created_at: datetime
    updated_at: datetime = Field(description="When the thread was created or last answered")
    turn_count: int = Field(default=0, description="Turns kept")


class TurnInfo(BaseModel):
    """One turn of a thread: a question and the answer it got."""

    position: int = Field(description="0 for the first turn of the thread, then increasing")
    question: str = Field(description="As the user asked it")
    rewritten_question: str | None = Field(
        default=None, description="The question made self-contained, when it was rewritten"
    )
    answer: str
    citations: list[str] = Field(default_factory=list, description="source_ids the answer cites")
    task_id: str | None = Field(default=None, description="The run that answered")
    status: str = Field(description="The run's status, e.g. 'completed' or 'failed'")
    created_at: datetime


def _thread_from_row(row: _ThreadRow) -> ThreadInfo:
    return ThreadInfo(
        thread_id=row.thread_id,
        collection=row.collection,
        user_id=row.user_id,
        title=row.title,
        created_at=_aware(row.created_at) or _now(),
        updated_at=_aware(row.updated_at) or _now(),
        turn_count=row.turn_count,
    )


def _turn_from_row(row: _TurnRow) -> TurnInfo:
    return TurnInfo(
        position=row.position,
        question=row.question,
        rewritten_question=row.rewritten_question,
        answer=row.answer,
        citations=list(row.citations or []),
        task_id=row.task_id,
        status=row.status,
        created_at=_aware(row.created_at) or _now(),
    )


def _title_from(question: str) -> str:
    """The start of ``question`` on one line: whole words, at most :data:`_TITLE_CHARS`
    characters (a first word longer than that is cut)."""
    text = " ".join(question.split())
    if len(text) <= _TITLE_CHARS:
        return text
    cut = text[: _TITLE_CHARS + 1].rsplit(" ", 1)[0]
    return cut if len(cut) <= _TITLE_CHARS else text[:_TITLE_CHARS]


class ThreadsMixin:
    """The :class:`~sleuth.store.catalog.Catalog` methods on conversation threads."""

    engine: Engine
    _session: Callable[[], Session]

    def create_thread(self, collection: str, user_id: str | None, title: str = "") -> ThreadInfo:
        """Start an empty thread about ``collection`` for the user id ``user_id`` (``None``:
        no authentication).

        ``title`` is put on one line and cut to 200 characters; left empty, the first
        question gives it (see :meth:`add_turn`).

        Raises:
            UserError: an invalid collection name (see
                :func:`~sleuth.store.catalog.validate_collection_name`).
        """
        validate_collection_name(collection)
        now = _now()
        row = _ThreadRow(
            thread_id=uuid.uuid4().hex,
            collection=collection,
            user_id=user_id,
            title=" ".join(title.split())[:_TITLE_MAX],
            created_at=now,
            updated_at=now,
            turn_count=0,
        )
        with self._session() as session, session.begin():
            session.add(row)
        return _thread_from_row(row)

    def get_thread(self, thread_id: str) -> ThreadInfo | None:
        """The thread, or ``None`` if there is none with this id."""
        with self._session() as session:
            row = session.get(_ThreadRow, thread_id)
            return None if row is None else _thread_from_row(row)

    def list_threads(
        self, user_id: str | None = None, collection: str | None = None, limit: int = 100
    ) -> list[ThreadInfo]:
        """Threads, the most recently updated first, optionally of one user id and/or one
        collection (``user_id=None`` lists every user's: the API layer filters)."""
        stmt = select(_ThreadRow)
        if user_id is not None:
            stmt = stmt.where(_ThreadRow.user_id == user_id)
        if collection is not None:
            stmt = stmt.where(_ThreadRow.collection == collection)
        stmt = stmt.order_by(
            _ThreadRow.updated_at.desc(), _ThreadRow.created_at.desc(), _ThreadRow.thread_id
        ).limit(max(0, limit))
        with self._session() as session:
            return [_thread_from_row(r) for r in session.scalars(stmt)]

    def delete_thread(self, thread_id: str) -> bool:
        """Delete a thread and its turns.

        Returns:
            Whether the thread existed.
        """
        with self._session() as session, session.begin():
            session.execute(delete(_TurnRow).where(_TurnRow.thread_id == thread_id))
            result = session.execute(delete(_ThreadRow).where(_ThreadRow.thread_id == thread_id))
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def add_turn(
        self,
        thread_id: str,
        *,
        question: str,
        answer: str,
        citations: Sequence[str],
        status: str,
        rewritten_question: str | None = None,
        task_id: str | None = None,
        max_turns: int | None = None,
    ) -> TurnInfo:
        """Append a turn to a thread, in one transaction.

        The turn takes the next position; the thread's ``updated_at`` becomes now and its
        ``turn_count`` grows; an empty title becomes the start of ``question`` (whole words,
        at most 80 characters). With ``max_turns``, only the newest ``max_turns`` turns are
        kept (``turn_count`` counts those).

        Returns:
            The new turn.

        Raises:
            NotFoundError: no thread with this id.
            ValueError: ``max_turns`` is less than 1.
        """
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"add_turn: max_turns must be at least 1, not {max_turns}")
        now = _now()
        with self._session() as session, session.begin():
            # the UPDATE comes first: it takes the thread's row lock (PostgreSQL) or the write
            # lock (SQLite), so turns added to one thread at once get distinct positions
            bumped = session.execute(
                update(_ThreadRow).where(_ThreadRow.thread_id == thread_id).values(updated_at=now)
            )
            if not bumped.rowcount:  # type: ignore[attr-defined]
                raise NotFoundError(f"thread '{thread_id}' does not exist")
            thread = session.get_one(_ThreadRow, thread_id)
            last = session.scalar(
                select(func.max(_TurnRow.position)).where(_TurnRow.thread_id == thread_id)
            )
            turn = _TurnRow(
                thread_id=thread_id,
                position=0 if last is None else last + 1,
                question=question,
                rewritten_question=rewritten_question,
                answer=answer,
                citations=list(citations),
                task_id=task_id,
                status=status,
                created_at=now,
            )
            session.add(turn)
            session.flush()
            if max_turns is not None:
                session.execute(
                    delete(_TurnRow).where(
                        _TurnRow.thread_id == thread_id,
                        _TurnRow.position <= turn.position - max_turns,
                    )
                )
            thread.turn_count = session.scalar(
                select(func.count()).select_from(_TurnRow).where(_TurnRow.thread_id == thread_id)
            )
            if not thread.title:
                thread.title = _title_from(question)
            return _turn_from_row(turn)

    def thread_turns(self, thread_id: str, last: int | None = None) -> list[TurnInfo]:
        """The thread's turns, oldest first; with ``last``, only the last ``last`` of them.
        ``[]`` for an unknown thread."""
        stmt = select(_TurnRow).where(_TurnRow.thread_id == thread_id)
        if last is None:
            stmt = stmt.order_by(_TurnRow.position)
        else:
            stmt = stmt.order_by(_TurnRow.position.desc()).limit(max(0, last))
        with self._session() as session:
            turns = [_turn_from_row(r) for r in session.scalars(stmt)]
        return turns if last is None else turns[::-1]

    def apply_thread_retention(
        self,
        max_age: timedelta | None,
        max_threads_per_user: int | None,
        batch: int = 200,
        now: datetime | None = None,
    ) -> int:
        """Delete the threads (and their turns) that retention no longer keeps.

        A thread goes when it was last updated more than ``max_age`` before ``now`` (default:
        the current time), and when its user has ``max_threads_per_user`` more recently
        updated threads (threads without a user count as one user's). ``None`` turns either
        rule off. Threads are deleted ``batch`` at a time, each batch in a short transaction
        of its own, so concurrent requests never wait long; a thread that gets a turn while
        this runs is kept. Afterwards a SQLite catalog file gives the space back to the OS
        (files created before threads existed keep it for later writes).

        Returns:
            How many threads were deleted.

        Raises:
            ValueError: ``max_threads_per_user`` is negative or ``batch`` less than 1.
        """
        if max_threads_per_user is not None and max_threads_per_user < 0:
            raise ValueError(
                f"apply_thread_retention: max_threads_per_user must be 0 or more, "
                f"not {max_threads_per_user}"
            )
        if batch < 1:
            raise ValueError(f"apply_thread_retention: batch must be at least 1, not {batch}")
        deleted = 0
        if max_age is not None:
            cutoff = (now or _now()) - max_age
            deleted += self._delete_threads_where(_ThreadRow.updated_at < cutoff, batch)
        if max_threads_per_user is not None:
            rank = (
                func.row_number()
                .over(
                    partition_by=_ThreadRow.user_id,
                    order_by=(_ThreadRow.updated_at.desc(), _ThreadRow.thread_id.desc()),
                )
                .label("rank")
            )
            ranked = select(_ThreadRow.thread_id, rank).subquery()
            surplus = select(ranked.c.thread_id).where(ranked.c.rank > max_threads_per_user)
            deleted += self._delete_threads_where(_ThreadRow.thread_id.in_(surplus), batch)
        _release_free_pages(self.engine)
        return deleted

    def _delete_threads_where(self, condition: ColumnElement[bool], batch: int) -> int:
        """Delete the threads meeting ``condition``, oldest first, ``batch`` per transaction.

        A thread updated after its batch was chosen is kept. Stops early (leaving the rest
        to the next pass) if every thread of a batch was updated meanwhile.

        Returns:
            How many threads were deleted.
        """
        pick = (
            select(_ThreadRow.thread_id, _ThreadRow.updated_at)
            .where(condition)
            .order_by(_ThreadRow.updated_at, _ThreadRow.thread_id)
            .limit(batch)
        )
        total = 0
        while True:
            with self._session() as session:
                chosen = session.execute(pick).all()
            if not chosen:
                return total
            ids = [thread_id for thread_id, _ in chosen]
            seen = max(updated_at for _, updated_at in chosen)
            with self._session() as session, session.begin():
                # the threads first (their turns cascade): a thread updated since it was
                # chosen keeps its turns; then the turns of deleted threads, in case the
                # database does not enforce foreign keys
                result = session.execute(
                    delete(_ThreadRow)
                    .where(_ThreadRow.thread_id.in_(ids), _ThreadRow.updated_at <= seen)
                    .execution_options(synchronize_session=False)
                )
                kept = select(_ThreadRow.thread_id).where(_ThreadRow.thread_id.in_(ids))
                session.execute(
                    delete(_TurnRow)
                    .where(_TurnRow.thread_id.in_(ids), _TurnRow.thread_id.not_in(kept))
                    .execution_options(synchronize_session=False)
                )
            n = int(result.rowcount or 0)  # type: ignore[attr-defined]
            if not n:
                return total
            total += n
