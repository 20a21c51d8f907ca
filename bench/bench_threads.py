"""Thread history at volume: 1,000 turns written to 100 threads, then the retention pass,
with requests served meanwhile.

On a fresh catalog (SQLite by default; ``--postgres`` starts a PostgreSQL from the
``pgserver`` wheel) the bench writes ``--turns`` turns spread over ``--threads`` threads
(answers of ``--answer-chars`` characters, about what a cited statute answer takes), marks
all but ``--keep`` threads as last used ``--age-days`` ago, then runs
:meth:`~sleuth.store.catalog.Catalog.apply_thread_retention` (retention 30 days) while a
second thread does what the API's requests do — read a kept thread with its turns, list
the user's threads, add a turn — as fast as it can. Reported: the catalog's size after the
writes and after the retention (SQLite: the file with its WAL; PostgreSQL: the two thread
tables), the pass's time and deletions, and the requests' latency during the pass (max,
p99, and how many took over 100 ms).

    python bench/bench_threads.py
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import commit, load_average, percentile, print_header, table

BLOCKED_MS = 100.0


def _size(catalog: object, path: Path | None) -> int:
    """Bytes the thread history takes: the SQLite file and its WAL, or PostgreSQL's two
    thread tables with their indexes."""
    if path is not None:
        wal = path.with_name(path.name + "-wal")
        return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    from sqlalchemy import text

    with catalog._session() as session:  # type: ignore[attr-defined]
        return int(
            session.execute(
                text(
                    "SELECT pg_total_relation_size('threads') + "
                    "pg_total_relation_size('thread_turns')"
                )
            ).scalar_one()
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--keep", type=int, default=10, help="threads used recently")
    parser.add_argument("--age-days", type=float, default=60.0)
    parser.add_argument("--answer-chars", type=int, default=1500)
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL from pgserver")
    args = parser.parse_args()

    from sleuth.store.catalog import Catalog

    print_header("bench_threads", [("commit", commit()), ("load", load_average())])
    with tempfile.TemporaryDirectory(prefix="sleuth-threads-") as tmp:
        stack = contextlib.ExitStack()
        if args.postgres:
            from tests.postgres import postgres_server

            url, path = stack.enter_context(postgres_server(Path(tmp) / "pg")), None
        else:
            path = Path(tmp) / "catalog.sqlite3"
            url = f"sqlite:///{path}"
        catalog = Catalog(url)
        catalog.ensure_collection("bench", "test-model", 384, "local")
        empty = _size(catalog, path)
        threads = [
            catalog.create_thread("bench", f"user-{i % 10}").thread_id for i in range(args.threads)
        ]
        answer = ("The punishment is imprisonment of either description [BNS_S303]. " * 40)[
            : args.answer_chars
        ]
        t0 = time.perf_counter()
        for n in range(args.turns):
            catalog.add_turn(
                threads[n % len(threads)],
                question=f"Question {n} about theft and its punishment?",
                answer=answer,
                citations=["BNS_S303", "BNS_S304"],
                status="completed",
            )
        write_s = time.perf_counter() - t0
        written = _size(catalog, path)
        kept = threads[: args.keep]
        old = datetime.now(UTC) - timedelta(days=args.age_days)
        from sqlalchemy import update

        from sleuth.store.catalog.rows import _ThreadRow

        with catalog._session() as session, session.begin():
            session.execute(
                update(_ThreadRow).where(_ThreadRow.thread_id.not_in(kept)).values(updated_at=old)
            )

        latencies: list[float] = []
        stop = threading.Event()

        def serve(i: int) -> None:
            """One round of what the API's requests do, each call timed."""
            thread_id = kept[i % len(kept)]
            started = time.perf_counter()
            catalog.get_thread(thread_id)
            catalog.thread_turns(thread_id)
            latencies.append((time.perf_counter() - started) * 1e3)
            started = time.perf_counter()
            catalog.list_threads(user_id=f"user-{i % 10}")
            latencies.append((time.perf_counter() - started) * 1e3)
            started = time.perf_counter()
            catalog.add_turn(
                thread_id,
                question="A follow-up?",
                answer=answer,
                citations=["BNS_S303"],
                status="completed",
                max_turns=200,
            )
            latencies.append((time.perf_counter() - started) * 1e3)

        def requests() -> None:
            i = 0
            while not stop.is_set():
                serve(i)
                i += 1

        worker = threading.Thread(target=requests)
        worker.start()
        time.sleep(0.5)  # requests already going when the pass starts
        before = len(latencies)
        t0 = time.perf_counter()
        deleted = catalog.apply_thread_retention(timedelta(days=30), None)
        retention_s = time.perf_counter() - t0
        during = latencies[before:]
        stop.set()
        worker.join()
        after = _size(catalog, path)
        left = len(catalog.list_threads(limit=1000))
        catalog.close()
        stack.close()

    mb = 1024 * 1024
    print(
        table(
            ["backend", "turns", "threads", "write s", "MB empty", "MB written", "MB after"],
            [
                [
                    "postgres" if args.postgres else "sqlite",
                    args.turns,
                    args.threads,
                    round(write_s, 2),
                    round(empty / mb, 2),
                    round(written / mb, 2),
                    round(after / mb, 2),
                ]
            ],
        )
    )
    print(
        table(
            [
                "deleted",
                "left",
                "retention s",
                "requests during",
                "p50 ms",
                "p99 ms",
                "max ms",
                f"> {BLOCKED_MS:.0f} ms",
            ],
            [
                [
                    deleted,
                    left,
                    round(retention_s, 3),
                    len(during),
                    round(statistics.median(during), 2) if during else None,
                    round(percentile(during, 99), 2) if during else None,
                    round(max(during), 2) if during else None,
                    sum(1 for v in during if v > BLOCKED_MS),
                ]
            ],
        )
    )


if __name__ == "__main__":
    main()
