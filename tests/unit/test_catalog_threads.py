"""Conversation threads in the SQLite catalog: threads and turns, retention, the file giving
space back (the same scenarios run on PostgreSQL in tests/integration/test_catalog_postgres.py).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import event, func, select, update
from sqlalchemy.orm import Session

from sleuth.errors import UserError
from sleuth.store.catalog import Catalog, DocumentInfo, ThreadInfo, TurnInfo
from sleuth.store.catalog.rows import _ThreadRow, _TurnRow
from tests.helpers import make_chunks

MURDER = (
    "What is the punishment for murder under the new code, and does it differ from the old "
    "one in any way?"
)


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[Catalog]:
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.sqlite3'}")
    yield cat
    cat.close()


def set_updated(catalog: Catalog, thread_id: str, when: datetime) -> None:
    """Backdate a thread (as if its last turn was added at ``when``)."""
    with catalog._session() as session, session.begin():
        session.execute(
            update(_ThreadRow).where(_ThreadRow.thread_id == thread_id).values(updated_at=when)
        )


def turn_rows(catalog: Catalog, thread_id: str | None = None) -> int:
    """How many turn rows are stored (of one thread, or in all)."""
    stmt = select(func.count()).select_from(_TurnRow)
    if thread_id is not None:
        stmt = stmt.where(_TurnRow.thread_id == thread_id)
    with catalog._session() as session:
        return int(session.scalar(stmt) or 0)


def answer(
    catalog: Catalog,
    thread_id: str,
    question: str = "q",
    text: str = "a",
    max_turns: int | None = None,
) -> TurnInfo:
    """Add a completed turn citing BNS_S103."""
    return catalog.add_turn(
        thread_id,
        question=question,
        answer=text,
        citations=["BNS_S103"],
        status="completed",
        max_turns=max_turns,
    )


def check_threads(catalog: Catalog) -> None:
    """Threads and turns: scenario shared by the SQLite and PostgreSQL catalog tests."""
    a = catalog.create_thread("laws", "u_a")
    assert (a.collection, a.user_id, a.title, a.turn_count) == ("laws", "u_a", "", 0)
    assert len(a.thread_id) == 32 and int(a.thread_id, 16) >= 0
    assert a.created_at.tzinfo is not None and a.updated_at == a.created_at
    b = catalog.create_thread("laws", None, title="  My   own\ntitle ")
    assert (b.user_id, b.title) == (None, "My own title")
    c = catalog.create_thread("other", "u_a")
    assert catalog.create_thread("laws", "u_b", title="t" * 300).title == "t" * 200
    assert catalog.get_thread(a.thread_id) == a
    assert catalog.get_thread("nope") is None
    with pytest.raises(UserError, match="invalid collection name"):
        catalog.create_thread("../etc", "u_a")

    # turns: positions 0, 1, …; the title comes from the first question (whole words)
    t0 = catalog.add_turn(
        a.thread_id,
        question=MURDER,
        answer="Death or imprisonment for life [BNS_S103].",
        citations=["BNS_S103"],
        status="completed",
        task_id="t1",
    )
    assert (t0.position, t0.question, t0.citations, t0.task_id) == (0, MURDER, ["BNS_S103"], "t1")
    assert t0.rewritten_question is None and t0.created_at.tzinfo is not None
    t1 = catalog.add_turn(
        a.thread_id,
        question="And for an attempt?",
        rewritten_question="What is the punishment for attempt to murder?",
        answer="Up to ten years [BNS_S109].",
        citations=["BNS_S109", "BNS_S103"],
        status="failed",
    )
    assert (t1.position, t1.status, t1.task_id) == (1, "failed", None)
    info = catalog.get_thread(a.thread_id)
    assert info is not None
    title = "What is the punishment for murder under the new code, and does it differ from"
    assert (info.turn_count, info.title) == (2, title)
    assert info.updated_at == t1.created_at > a.updated_at
    assert info.created_at == a.created_at
    answer(catalog, b.thread_id, "Is theft bailable?")
    assert catalog.get_thread(b.thread_id).title == "My own title"  # type: ignore[union-attr]

    # listing: most recently updated first; by user, by collection, both, limited
    def ids(threads: list[ThreadInfo]) -> list[str]:
        return [t.thread_id for t in threads if t.title != "t" * 200]

    assert ids(catalog.list_threads()) == [b.thread_id, a.thread_id, c.thread_id]
    assert ids(catalog.list_threads(user_id="u_a")) == [a.thread_id, c.thread_id]
    assert ids(catalog.list_threads(collection="laws")) == [b.thread_id, a.thread_id]
    assert ids(catalog.list_threads(user_id="u_a", collection="other")) == [c.thread_id]
    assert ids(catalog.list_threads(limit=1)) == [b.thread_id]
    assert catalog.list_threads(user_id="nobody") == []

    assert catalog.thread_turns(a.thread_id) == [t0, t1]
    assert catalog.thread_turns(a.thread_id, last=1) == [t1]
    assert catalog.thread_turns(a.thread_id, last=5) == [t0, t1]
    assert catalog.thread_turns(a.thread_id, last=0) == []
    assert catalog.thread_turns("nope") == []

    # max_turns: the oldest turns go, positions go on increasing
    for i in range(2, 6):
        answer(catalog, a.thread_id, f"q{i}", max_turns=3)
    assert [t.position for t in catalog.thread_turns(a.thread_id)] == [3, 4, 5]
    assert [t.question for t in catalog.thread_turns(a.thread_id)] == ["q3", "q4", "q5"]
    info = catalog.get_thread(a.thread_id)
    assert info is not None and (info.turn_count, info.title) == (3, title)
    assert answer(catalog, a.thread_id, "q6", max_turns=1).position == 6
    assert [t.question for t in catalog.thread_turns(a.thread_id)] == ["q6"]
    assert catalog.get_thread(a.thread_id).turn_count == 1  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="max_turns"):
        answer(catalog, a.thread_id, max_turns=0)

    with pytest.raises(UserError, match="thread 'nope' does not exist"):
        answer(catalog, "nope")
    assert catalog.get_thread("nope") is None

    # deleting a thread deletes its turns
    assert catalog.delete_thread(a.thread_id) is True
    assert catalog.delete_thread(a.thread_id) is False
    assert catalog.get_thread(a.thread_id) is None
    assert catalog.thread_turns(a.thread_id) == []
    assert turn_rows(catalog, a.thread_id) == 0
    assert turn_rows(catalog, b.thread_id) == 1


def check_thread_retention(catalog: Catalog) -> None:
    """Retention by age and by count per user: scenario shared by SQLite and PostgreSQL."""
    now = datetime.now(UTC)

    def thread(user: str | None, days_ago: float) -> str:
        t = catalog.create_thread("laws", user)
        answer(catalog, t.thread_id)
        answer(catalog, t.thread_id)
        set_updated(catalog, t.thread_id, now - timedelta(days=days_ago))
        return t.thread_id

    old = thread("u_a", 40)
    a = [thread("u_a", d) for d in (1, 2, 3, 4)]
    b = [thread("u_b", d) for d in (5, 6)]
    anon = [thread(None, d) for d in (1.5, 2.5, 3.5)]
    assert catalog.apply_thread_retention(None, None) == 0
    assert catalog.apply_thread_retention(timedelta(days=30), None, now=now) == 1
    assert catalog.get_thread(old) is None
    assert turn_rows(catalog, old) == 0

    # the two most recently updated threads of each user (no user counts as one) stay
    assert catalog.apply_thread_retention(None, 2, batch=1) == 3
    kept = {t.thread_id for t in catalog.list_threads()}
    assert kept == {a[0], a[1], *b, anon[0], anon[1]}

    # both rules in one pass, in batches
    assert catalog.apply_thread_retention(timedelta(days=5, hours=12), 1, batch=2, now=now) == 3
    assert [t.thread_id for t in catalog.list_threads()] == [a[0], anon[0], b[0]]
    assert turn_rows(catalog) == 6
    assert catalog.thread_turns(a[0])[-1].position == 1

    assert catalog.apply_thread_retention(None, 0) == 3
    assert catalog.list_threads() == []
    assert turn_rows(catalog) == 0
    with pytest.raises(ValueError, match="max_threads_per_user"):
        catalog.apply_thread_retention(None, -1)
    with pytest.raises(ValueError, match="batch"):
        catalog.apply_thread_retention(None, 1, batch=0)


@pytest.mark.parametrize("where", ["file", "memory"])
def test_threads_and_turns_on_sqlite(tmp_path: Path, where: str) -> None:
    url = f"sqlite:///{tmp_path / 'catalog.sqlite3'}" if where == "file" else "sqlite://"
    catalog = Catalog(url)
    try:
        check_threads(catalog)
    finally:
        catalog.close()


def test_thread_retention_on_sqlite(catalog: Catalog) -> None:
    check_thread_retention(catalog)


def test_each_retention_batch_is_its_own_transaction(catalog: Catalog) -> None:
    for user in ("u_a", "u_b", None, "u_c", "u_d"):
        catalog.create_thread("laws", user)
    commits: list[int] = []
    event.listen(catalog.engine, "commit", lambda _conn: commits.append(1))
    assert catalog.apply_thread_retention(None, 0, batch=2) == 5
    assert len(commits) == 3  # 2 + 2 + 1 threads


def test_a_thread_answered_while_retention_runs_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread chosen for deletion that gets a turn before its batch is deleted stays,
    with all its turns."""
    url = f"sqlite:///{tmp_path / 'catalog.sqlite3'}"
    catalog, other = Catalog(url), Catalog(url)
    try:
        thread_id = catalog.create_thread("laws", "u_a").thread_id
        answer(catalog, thread_id)
        set_updated(catalog, thread_id, datetime.now(UTC) - timedelta(days=30))
        opened = catalog._session
        sessions: list[int] = []

        def session_answered_meanwhile() -> Session:
            sessions.append(1)
            if len(sessions) == 2:  # the batch was chosen; its transaction starts now
                answer(other, thread_id, "a follow-up")
            return opened()

        monkeypatch.setattr(catalog, "_session", session_answered_meanwhile)
        assert catalog.apply_thread_retention(timedelta(days=7), None) == 0
        assert len(sessions) == 2
        assert [t.position for t in other.thread_turns(thread_id)] == [0, 1]
        assert other.get_thread(thread_id).turn_count == 2  # type: ignore[union-attr]
    finally:
        catalog.close()
        other.close()


def test_turns_added_at_once_get_distinct_positions(catalog: Catalog) -> None:
    thread_id = catalog.create_thread("laws", "u_a").thread_id
    errors: list[BaseException] = []

    def ask(worker: int) -> None:
        try:
            for i in range(10):
                answer(catalog, thread_id, f"w{worker} q{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=ask, args=(w,)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    assert [t.position for t in catalog.thread_turns(thread_id)] == list(range(40))
    assert catalog.get_thread(thread_id).turn_count == 40  # type: ignore[union-attr]


def test_deleting_a_collection_deletes_its_threads(catalog: Catalog) -> None:
    catalog.ensure_collection("laws", "m", 8, "local")
    chunks = make_chunks("d1", [("S1", 1)])
    catalog.save_document("laws", DocumentInfo(doc_id="d1", path="/d1"), chunks)
    gone = catalog.create_thread("laws", "u_a").thread_id
    answer(catalog, gone)
    kept = catalog.create_thread("other", "u_a").thread_id
    answer(catalog, kept)
    assert catalog.delete_collection("laws") is True
    assert catalog.get_thread(gone) is None
    assert turn_rows(catalog, gone) == 0
    assert [t.thread_id for t in catalog.list_threads()] == [kept]
    assert turn_rows(catalog, kept) == 1


def test_threads_survive_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'catalog.sqlite3'}"
    catalog = Catalog(url)
    thread_id = catalog.create_thread("laws", "u_a").thread_id
    turns = [answer(catalog, thread_id, MURDER), answer(catalog, thread_id, "And attempt?")]
    info = catalog.get_thread(thread_id)
    catalog.close()

    reopened = Catalog(url)
    try:
        assert reopened.get_thread(thread_id) == info
        assert reopened.thread_turns(thread_id) == turns
        assert answer(reopened, thread_id, "q3").position == 2
    finally:
        reopened.close()


def test_the_sqlite_file_shrinks_back_after_retention(tmp_path: Path) -> None:
    """A new catalog file is incremental-vacuum: the pages of the threads retention deletes
    go back to the OS (the file and its WAL shrink)."""
    path = tmp_path / "catalog.sqlite3"
    catalog = Catalog(f"sqlite:///{path}")
    try:
        with catalog.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA auto_vacuum").scalar() == 2  # incremental
        long_answer = "The punishment is set out in section 103. " * 500  # ~21 kB
        stale = []
        for user in range(10):
            thread_id = catalog.create_thread("laws", f"u_{user}").thread_id
            for _ in range(20):
                answer(catalog, thread_id, text=long_answer)
            stale.append(thread_id)
        fresh = catalog.create_thread("laws", "u_fresh").thread_id
        answer(catalog, fresh, text=long_answer)
        for thread_id in stale:
            set_updated(catalog, thread_id, datetime.now(UTC) - timedelta(days=90))
        with catalog.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").all()
        full = path.stat().st_size
        assert full > 4_000_000

        assert catalog.apply_thread_retention(timedelta(days=30), None) == 10
        assert path.stat().st_size < full / 10
        wal = path.with_name(path.name + "-wal")
        assert not wal.exists() or wal.stat().st_size < full / 10
        assert catalog.thread_turns(fresh)[0].answer == long_answer
    finally:
        catalog.close()


def test_an_older_catalog_gains_the_thread_tables_and_keeps_its_vacuum_mode(
    tmp_path: Path,
) -> None:
    """A catalog file made before threads existed (auto_vacuum off) opens unchanged, gets the
    thread tables, and retention works on it (its free pages stay for later writes)."""
    path = tmp_path / "old.sqlite3"
    Catalog(f"sqlite:///{path}").close()
    with closing(sqlite3.connect(path)) as db:
        db.execute("DROP TABLE thread_turns")
        db.execute("DROP TABLE threads")
        db.execute("PRAGMA auto_vacuum=NONE")
        db.execute("VACUUM")
        assert db.execute("PRAGMA auto_vacuum").fetchone() == (0,)
    catalog = Catalog(f"sqlite:///{path}")
    try:
        with catalog.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA auto_vacuum").scalar() == 0
        thread_id = catalog.create_thread("laws", None).thread_id
        answer(catalog, thread_id, text="x" * 50_000)
        assert catalog.apply_thread_retention(None, 0) == 1
        assert catalog.get_thread(thread_id) is None
        assert turn_rows(catalog) == 0
    finally:
        catalog.close()
