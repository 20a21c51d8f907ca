"""Agent runs and the ingestion jobs of the HTTP API, stored as plain dicts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from sleuth.store.catalog.rows import (
    _JOB_COLUMNS,
    _JOB_TIMES,
    _RUN_COLUMNS,
    _job_to_dict,
    _JobRow,
    _now,
    _run_to_dict,
    _RunRow,
    _to_datetime,
)

_RUN_REQUIRED = ("collection", "question", "mode", "status")
_JOB_REQUIRED = ("collection", "user_id", "state", "staged")


class RunsMixin:
    """The :class:`~sleuth.store.catalog.Catalog` methods on agent runs and ingestion jobs."""

    _session: Callable[[], Session]

    def save_run(self, run: Mapping[str, Any]) -> None:
        """Insert or update an agent run.

        ``run`` must hold ``task_id``; on insert also ``collection``, ``question``, ``mode``
        and ``status``. On update only the keys present are changed. Known keys: task_id,
        collection, user_id, question, mode, status, answer, steps, trace (JSON-serialisable),
        error, created_at, finished_at (datetime, ISO string or Unix seconds); any other key is
        kept in an extra JSON field and returned by :meth:`get_run`.

        Raises:
            ValueError: ``task_id`` missing, or a required key missing on insert.
        """
        task_id = run.get("task_id")
        if not task_id:
            raise ValueError("save_run: the run has no 'task_id'")
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in run.items():
            if key in _RUN_COLUMNS:
                values[key] = value
            else:
                extra[key] = value
        for key in ("created_at", "finished_at"):
            if key in values:
                values[key] = _to_datetime(values[key])
        if values.get("created_at") is None:
            values.pop("created_at", None)
        with self._session() as session, session.begin():
            row = session.get(_RunRow, task_id)
            if row is None:
                missing = [k for k in _RUN_REQUIRED if values.get(k) is None]
                if missing:
                    raise ValueError(f"save_run: new run '{task_id}' lacks {', '.join(missing)}")
                session.add(_RunRow(**values, extra=extra or None))
            else:
                for key, value in values.items():
                    setattr(row, key, value)
                if extra:
                    row.extra = {**(row.extra or {}), **extra}

    def get_run(self, task_id: str) -> dict[str, Any] | None:
        """The run as a dict (keys as in :meth:`save_run`, timestamps as UTC datetimes)."""
        with self._session() as session:
            row = session.get(_RunRow, task_id)
            return None if row is None else _run_to_dict(row)

    def list_runs(
        self,
        collection: str | None = None,
        user_id: str | None = None,
        limit: int = 50,
        status: str | None = None,
    ) -> list[dict[str, Any]]:
        """Runs, newest first, optionally of one collection, one user and/or one status."""
        stmt = select(_RunRow)
        if status is not None:
            stmt = stmt.where(_RunRow.status == status)
        if collection is not None:
            stmt = stmt.where(_RunRow.collection == collection)
        if user_id is not None:
            stmt = stmt.where(_RunRow.user_id == user_id)
        stmt = stmt.order_by(_RunRow.created_at.desc(), _RunRow.task_id).limit(max(0, limit))
        with self._session() as session:
            return [_run_to_dict(r) for r in session.scalars(stmt)]

    # ---------------------------------------------------------------- ingestion jobs

    def save_job(self, job: Mapping[str, Any]) -> None:
        """Insert or update an ingestion job (keys: the columns of :func:`get_job`; on
        insert ``job_id``, ``collection``, ``user_id``, ``state`` and ``staged`` at least).

        Raises:
            ValueError: ``job_id`` missing, an unknown key, or (on insert) a required one
                missing.
        """
        job_id = job.get("job_id")
        if not job_id:
            raise ValueError("save_job: the job has no 'job_id'")
        unknown = sorted(set(job) - set(_JOB_COLUMNS))
        if unknown:
            raise ValueError(f"save_job: unknown keys {', '.join(unknown)}")
        values = {k: (_to_datetime(v) if k in _JOB_TIMES else v) for k, v in job.items()}
        with self._session() as session, session.begin():
            row = session.get(_JobRow, job_id)
            if row is None:
                missing = [k for k in _JOB_REQUIRED if values.get(k) is None]
                if missing:
                    raise ValueError(f"save_job: a new job needs {', '.join(missing)}")
                session.add(_JobRow(**values))
            else:
                for key, value in values.items():
                    setattr(row, key, value)

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        """The job as a dict: job_id, collection, user_id, state, staged (file name → path of
        the upload), progress, files, warnings (JSON), error, worker, heartbeat_at,
        created_at, started_at, finished_at (UTC datetimes)."""
        with self._session() as session:
            row = session.get(_JobRow, job_id)
            return None if row is None else _job_to_dict(row)

    def list_jobs(
        self, collection: str | None = None, states: Sequence[str] | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Jobs, newest first, optionally of one collection and in some states."""
        stmt = select(_JobRow)
        if collection is not None:
            stmt = stmt.where(_JobRow.collection == collection)
        if states is not None:
            stmt = stmt.where(_JobRow.state.in_(list(states)))
        stmt = stmt.order_by(_JobRow.created_at.desc(), _JobRow.job_id).limit(max(0, limit))
        with self._session() as session:
            return [_job_to_dict(r) for r in session.scalars(stmt)]

    def claim_job(self, job_id: str, worker: str, previous: str | None) -> bool:
        """Make ``worker`` the job's worker if its worker is still ``previous`` (one atomic
        conditional UPDATE: of several processes taking over the same job, exactly one
        succeeds, on SQLite and PostgreSQL alike). Returns whether this one did."""
        owner = _JobRow.worker.is_(None) if previous is None else _JobRow.worker == previous
        stmt = (
            update(_JobRow)
            .where(_JobRow.job_id == job_id, owner)
            .values(worker=worker, heartbeat_at=_now())
        )
        with self._session() as session, session.begin():
            return session.execute(stmt).rowcount == 1

    def touch_jobs(self, job_ids: Sequence[str], worker: str) -> None:
        """Renew the heartbeat of the jobs ``worker`` still holds."""
        stmt = (
            update(_JobRow)
            .where(_JobRow.job_id.in_(list(job_ids)), _JobRow.worker == worker)
            .values(heartbeat_at=_now())
        )
        with self._session() as session, session.begin():
            session.execute(stmt)

    def delete_jobs(self, collection: str) -> int:
        """Forget the jobs of a collection; returns how many."""
        with self._session() as session, session.begin():
            return session.execute(delete(_JobRow).where(_JobRow.collection == collection)).rowcount
