"""Ingestion jobs: uploaded files ingested in the background, with progress.

An upload is written to a staging folder of its job (``<data_dir>/uploads/.staging/<job>``)
and the job is queued on a worker thread of its own, so the event loop never waits for a
parse or an embedding (the embedder is CPU-bound; torch releases the GIL while it computes).
Jobs run one at a time, in order (the ingest pipeline serialises its calls anyway). When its
turn comes, a job moves its files to ``<data_dir>/uploads/<collection>/`` — a file keeps its
name there, so uploading ``notes.md`` again replaces the document ingested from it, as
re-ingesting a path does on the CLI — and ingests them.

Jobs are durable: each is a row of the catalog (``ingest_jobs``: SQLite by default,
PostgreSQL by ``SLEUTH_DATABASE_URL``) written before the ``202`` is answered, updated as it
runs (state, per-file outcome, progress), and its uploaded files are kept until they are
ingested. On start, and at every heartbeat while a server runs (:meth:`JobRegistry.resume`),
a job left ``queued`` or ``running`` by a process that is gone (one of this host whose pid
no longer runs, or one whose heartbeat is older than :data:`STALE_AFTER_S`) is taken over —
by exactly one process, through :meth:`~sleuth.store.catalog.Catalog.claim_job` — and
ingested again (ingestion is
idempotent by content hash; a half-ingested file replaces its partial chunks), or marked
``failed`` when its files are gone. Status URLs keep working across restarts.

At shutdown (:meth:`JobRegistry.shutdown`) the running job stops at a safe point: the files
it has read are embedded and written whole, the rest are not read, and the job goes back to
``queued`` with the outcomes so far, to be resumed by the next start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sleuth.api.schemas import JobFile, JobOut, JobProgress, JobState
from sleuth.api.workers import is_gone, worker_name
from sleuth.app import Sleuth
from sleuth.errors import SleuthError
from sleuth.store.catalog import Catalog

logger = logging.getLogger(__name__)

MAX_JOBS_KEPT = 1000
"""Finished jobs beyond this many (oldest first) are forgotten by the process (the catalog
keeps them)."""
STALE_AFTER_S = 120.0
"""A running job whose worker has not written for this long is taken over at start."""
HEARTBEAT_S = 30.0
"""How often this process marks its queued and running jobs as alive."""
PERSIST_EVERY_S = 2.0
"""Embedding progress is written to the catalog at most this often (state changes and file
outcomes at once)."""
WRITTEN = frozenset({"added", "replaced"})
"""File outcomes that wrote a document: kept when a resumed job finds the file unchanged."""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class IngestJob:
    """One upload being ingested."""

    job_id: str
    user_id: str
    collection: str
    staged: dict[str, Path]
    state: JobState = "queued"
    progress: JobProgress = field(default_factory=JobProgress)
    files: dict[str, JobFile] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    created_at: datetime = field(default_factory=_now)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if not self.files:
            self.files = {n: JobFile(name=n, status="pending") for n in self.staged}
            self.progress.files_total = len(self.staged)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> IngestJob:
        """The job as the catalog stored it."""
        job = cls(
            job_id=row["job_id"],
            user_id=row["user_id"],
            collection=row["collection"],
            staged={name: Path(path) for name, path in (row["staged"] or {}).items()},
            state=row["state"],
            progress=JobProgress.model_validate(row["progress"] or {}),
            files={f["name"]: JobFile.model_validate(f) for f in row["files"] or []},
            warnings=list(row["warnings"] or []),
            error=row["error"],
            created_at=row["created_at"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
        )
        return job

    def record(self) -> dict[str, Any]:
        """The job as a catalog row (see :meth:`~sleuth.store.catalog.Catalog.save_job`)."""
        with self.lock:
            return {
                "job_id": self.job_id,
                "collection": self.collection,
                "user_id": self.user_id,
                "state": self.state,
                "staged": {name: str(path) for name, path in self.staged.items()},
                "progress": self.progress.model_dump(),
                "files": [f.model_dump() for f in self.files.values()],
                "warnings": list(self.warnings),
                "error": self.error,
                "created_at": self.created_at,
                "started_at": self.started_at,
                "finished_at": self.finished_at,
            }

    @property
    def status_url(self) -> str:
        return f"/collections/{self.collection}/jobs/{self.job_id}"

    @property
    def finished(self) -> bool:
        return self.state in ("succeeded", "failed")

    def out(self) -> JobOut:
        """A snapshot for the API."""
        with self.lock:
            return JobOut(
                job_id=self.job_id,
                collection=self.collection,
                state=self.state,
                progress=self.progress.model_copy(),
                files=[f.model_copy() for f in self.files.values()],
                warnings=list(self.warnings),
                error=self.error,
                created_at=self.created_at,
                started_at=self.started_at,
                finished_at=self.finished_at,
                status_url=self.status_url,
            )


class _Progress:
    """The pipeline's progress callback, recorded in the job and written to the catalog
    (``persist``: file outcomes at once, embedding progress every :data:`PERSIST_EVERY_S`)."""

    def __init__(self, job: IngestJob, persist: Callable[[IngestJob], None]) -> None:
        self.job = job
        self.persist = persist
        self.written = time.monotonic()

    def on_start(self, n_files: int) -> None:
        with self.job.lock:
            self.job.progress.files_total = n_files

    def on_file(self, path: str, status: str) -> None:
        name = Path(path).name
        with self.job.lock:
            self.job.progress.files_done += 1
            known = self.job.files.get(name)
            if known is not None and not (status == "unchanged" and known.status in WRITTEN):
                known.status = status  # a file indexed before a restart keeps that outcome
        self._write()

    def on_chunks(self, n_embedded: int, n_total: int) -> None:
        with self.job.lock:
            self.job.progress.chunks_embedded = n_embedded
            self.job.progress.chunks_total = n_total
        if time.monotonic() - self.written >= PERSIST_EVERY_S:
            self._write()

    def _write(self) -> None:
        self.written = time.monotonic()
        self.persist(self.job)


class JobRegistry:
    """Queues and runs ingestion jobs on one worker thread; keeps them in the catalog.

    ``lock`` guards the link between jobs and collections: take it to check that no job is
    pending on a collection and to delete it (or its documents) in one step.

    Args:
        sleuth: the installation (its pipeline ingests, its catalog keeps the jobs and
            checks ownership).
    """

    def __init__(self, sleuth: Sleuth) -> None:
        self.sleuth = sleuth
        self.catalog: Catalog = sleuth.catalog
        self.uploads = sleuth.settings.data_dir / "uploads"
        self.lock = threading.RLock()
        self.worker = worker_name()
        """This process's name in the catalog's ``worker`` column (host:pid:nonce)."""
        self._jobs: OrderedDict[str, IngestJob] = OrderedDict()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sleuth-ingest")
        self._closing = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="sleuth-jobs-beat", daemon=True)
        self._beat.start()

    def staging_dir(self) -> tuple[str, Path]:
        """A fresh job id and its (new, empty) staging folder."""
        job_id = uuid.uuid4().hex[:16]
        path = self.uploads / ".staging" / job_id
        path.mkdir(parents=True, exist_ok=False)
        return job_id, path

    def submit(
        self, job_id: str, user_id: str, collection: str, staged: dict[str, Path]
    ) -> IngestJob:
        """Queue the ingestion of the staged files (name → staged path); the job is in the
        catalog when this returns."""
        job = IngestJob(job_id=job_id, user_id=user_id, collection=collection, staged=staged)
        self.catalog.save_job({**job.record(), "worker": self.worker, "heartbeat_at": _now()})
        self._queue(job)
        return job

    def staged_bytes(self, user_id: str) -> int:
        """Bytes of ``user_id``'s uploads still waiting in staging folders: the files of
        their queued and running jobs (of every process on this catalog) not yet moved into
        a collection's folder."""
        total = 0
        for row in self.catalog.list_jobs(states=("queued", "running"), limit=10_000):
            if row["user_id"] != user_id:
                continue
            for path in (row["staged"] or {}).values():
                with contextlib.suppress(OSError):  # moved on (counted in its collection)
                    total += Path(path).stat().st_size
        return total

    def get(self, collection: str, job_id: str) -> IngestJob | None:
        """The job (live, or as the catalog keeps it), if it is of ``collection``."""
        with self.lock:
            job = self._jobs.get(job_id)
        if job is None:
            row = self.catalog.get_job(job_id)
            job = IngestJob.from_row(row) if row is not None else None
        return job if job is not None and job.collection == collection else None

    def of_collection(self, collection: str) -> list[IngestJob]:
        """The jobs of a collection, newest first (this process's live ones as they are
        now, the others as the catalog keeps them)."""
        with self.lock:
            live = {k: j for k, j in self._jobs.items() if j.collection == collection}
        stored = self.catalog.list_jobs(collection)
        jobs = [live.pop(r["job_id"], None) or IngestJob.from_row(r) for r in stored]
        jobs.extend(reversed(live.values()))
        return sorted(jobs, key=lambda j: j.created_at, reverse=True)

    def pending(self, collection: str) -> IngestJob | None:
        """A queued or running job of the collection, if any (call with ``lock`` held)."""
        with self.lock:
            live = next(
                (j for j in self._jobs.values() if j.collection == collection and not j.finished),
                None,
            )
        if live is not None:
            return live
        rows = self.catalog.list_jobs(collection, states=("queued", "running"), limit=1)
        return IngestJob.from_row(rows[0]) if rows else None

    def forget_collection(self, collection: str) -> None:
        """Forget the jobs and remove the uploaded files of a deleted collection."""
        with self.lock:
            for key in [k for k, j in self._jobs.items() if j.collection == collection]:
                del self._jobs[key]
        self.catalog.delete_jobs(collection)
        shutil.rmtree(self.uploads / collection, ignore_errors=True)

    def resume(self) -> list[str]:
        """Take over the jobs left ``queued`` or ``running`` by a process that is gone (see
        the module doc): queue each again, or mark it ``failed`` when its files are gone.
        Returns the ids of the jobs taken over (queued or failed)."""
        taken: list[str] = []
        for row in self.catalog.list_jobs(states=("queued", "running"), limit=10_000):
            if not is_gone(row["worker"], row["heartbeat_at"], STALE_AFTER_S, self.worker):
                continue
            if not self.catalog.claim_job(row["job_id"], self.worker, row["worker"]):
                continue  # another process took it over first
            job = IngestJob.from_row(row)
            taken.append(job.job_id)
            found = {name: self._upload_of(job, name) for name in job.staged}
            missing = sorted(name for name, path in found.items() if path is None)
            if missing:
                with job.lock:
                    job.state = "failed"
                    job.error = (
                        f"the server stopped during this job and the uploaded file(s) "
                        f"{', '.join(missing)} were not found at restart; upload them again"
                    )
                    job.finished_at = _now()
                self._persist(job)
                logger.warning("ingestion job %s failed at resume: %s", job.job_id, job.error)
                continue
            with job.lock:
                job.staged = {name: path for name, path in found.items() if path is not None}
                job.state = "queued"
                job.warnings = [*job.warnings, "resumed after a server restart"]
            logger.info("resuming ingestion job %s of '%s'", job.job_id, job.collection)
            self._persist(job)
            self._queue(job)
        return taken

    def stop(self) -> None:
        """Begin the shutdown without waiting: the running job is told to stop at its next
        safe point, queued ones are not started (they stay ``queued`` in the catalog)."""
        self._closing.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def shutdown(self, grace_s: float | None = None) -> bool:
        """Wait for the running job — at most ``grace_s`` seconds when given; queued ones
        stay ``queued`` in the catalog, their files kept, and are resumed by the next start,
        as is a running job that outlives the grace (ingestion is idempotent). Returns
        whether no job is still running."""
        self.stop()
        if grace_s is None:
            self._pool.shutdown(wait=True)
        self._beat.join(timeout=5)
        if grace_s is None:
            return True
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with self.lock:
                running = any(j.state == "running" for j in self._jobs.values())
            if not running:
                return True
            time.sleep(0.05)
        logger.warning("the running ingestion job will resume at the next start")
        return False

    # ------------------------------------------------------------------ internals

    def _heartbeat(self) -> None:
        """Every :data:`HEARTBEAT_S`, one :meth:`beat`."""
        while not self._closing.wait(HEARTBEAT_S):
            self.beat()

    def beat(self) -> None:
        """Mark this process's unfinished jobs as alive, so that no other process takes over
        a job that waits in this one's queue; then take over the jobs of a process that is
        gone (:meth:`resume`): with several API processes on one catalog, a job of one that
        died is finished by a live one, without waiting for a restart."""
        with self.lock:
            ids = [k for k, j in self._jobs.items() if not j.finished]
        try:
            if ids:
                self.catalog.touch_jobs(ids, self.worker)
            if not self._closing.is_set():
                self.resume()
        except Exception as exc:  # the catalog may be briefly unreachable: next beat
            logger.warning("ingestion jobs' heartbeat failed: %s", exc)

    def _queue(self, job: IngestJob) -> None:
        with self.lock:
            self._jobs[job.job_id] = job
            self._forget_old()
        self._pool.submit(self._run, job)

    def _persist(self, job: IngestJob) -> None:
        """Write the job to the catalog (a failure is logged: the job goes on)."""
        try:
            self.catalog.save_job({**job.record(), "worker": self.worker, "heartbeat_at": _now()})
        except Exception as exc:
            logger.warning("could not record ingestion job %s: %s", job.job_id, exc)

    def _upload_of(self, job: IngestJob, name: str) -> Path | None:
        """Where an upload of ``job`` is now: its staging path, else the collection's
        upload folder (moved there when the job started), else None."""
        for path in (job.staged.get(name), self.uploads / job.collection / name):
            if path is not None and path.is_file():
                return path
        return None

    def _forget_old(self) -> None:
        finished = [k for k, j in self._jobs.items() if j.finished]
        for key in finished[: max(0, len(self._jobs) - MAX_JOBS_KEPT)]:
            del self._jobs[key]

    @staticmethod
    def _public(message: str, folder: Path) -> str:
        """A message without the server's file-system paths: the collection's upload folder
        (where the files are stored on the server) is left out, the file names kept."""
        return message.replace(f"{folder}{os.sep}", "").replace(str(folder), "")

    def _run(self, job: IngestJob) -> None:
        if self._closing.is_set():
            return  # stays queued in the catalog for the next start
        if not self.catalog.claim_job(job.job_id, self.worker, self.worker):
            # another process took the job over (this one looked gone): it runs it
            logger.warning("ingestion job %s was taken over by another process", job.job_id)
            with self.lock:
                self._jobs.pop(job.job_id, None)
            return
        with job.lock:
            job.state = "running"
            job.started_at = job.started_at or _now()
        self._persist(job)
        staging = next(iter(job.staged.values())).parent if job.staged else None
        target = self.uploads / job.collection
        try:
            with self.lock:  # the collection may have been deleted while the job waited
                if self.sleuth.catalog.collection_owner(job.collection) != job.user_id:
                    raise SleuthError(f"collection '{job.collection}' no longer exists")
            target.mkdir(parents=True, exist_ok=True)
            paths = []
            for name, staged in job.staged.items():
                final = target / name
                if staged != final:
                    os.replace(staged, final)
                paths.append(final)
            with job.lock:  # a restart finds the files where they are now
                job.staged = dict(zip(job.staged, paths, strict=True))
            self._persist(job)
            report = self.sleuth.pipeline.ingest(
                paths,
                job.collection,
                progress=_Progress(job, self._persist),
                stop=self._closing.is_set,  # at shutdown: after the file being read
            )
            with job.lock:
                for outcome in report.files:
                    name = Path(outcome.path).name
                    before = job.files.get(name)
                    if outcome.status == "unchanged" and before and before.status in WRITTEN:
                        continue  # indexed by this job before a restart: that is its outcome
                    job.files[name] = JobFile(
                        name=name,
                        doc_id=outcome.doc_id,
                        status=outcome.status,
                        n_chunks=outcome.n_chunks,
                        message=self._public(outcome.message, target),
                    )
                job.warnings = [*job.warnings, *(self._public(w, target) for w in report.warnings)]
                if report.stopped:  # shutdown: the rest waits in the catalog for the next start
                    done = len(report.files)
                    job.warnings.append(
                        f"the server stopped after {done} of {len(paths)} file(s); "
                        "the rest resume at the next start"
                    )
                    job.state = "queued"
                else:
                    job.state = "succeeded"
        except Exception as exc:
            message = str(exc) if isinstance(exc, SleuthError) else f"{type(exc).__name__}: {exc}"
            logger.warning("ingestion job %s failed: %s", job.job_id, message)
            with job.lock:
                job.state = "failed"
                job.error = message
        finally:
            with job.lock:
                if job.state != "queued":
                    job.finished_at = _now()
            self._persist(job)
            if staging is not None and staging != target:
                with contextlib.suppress(OSError):
                    shutil.rmtree(staging)
