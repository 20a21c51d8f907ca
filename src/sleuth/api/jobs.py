"""Ingestion jobs: uploaded files ingested in the background, with progress.

An upload is written to a staging folder of its job (``<data_dir>/uploads/.staging/<job>``)
and the job is queued on a worker thread of its own, so the event loop never waits for a
parse or an embedding (the embedder is CPU-bound; torch releases the GIL while it computes).
Jobs run one at a time, in order (the ingest pipeline serialises its calls anyway). When its
turn comes, a job moves its files to ``<data_dir>/uploads/<collection>/`` — a file keeps its
name there, so uploading ``notes.md`` again replaces the document ingested from it, as
re-ingesting a path does on the CLI — and ingests them.

Jobs live in memory: after a restart ``GET .../jobs/{id}`` answers 404 (the documents
ingested stay, see ``GET .../documents``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sleuth.api.schemas import JobFile, JobOut, JobProgress, JobState
from sleuth.app import Sleuth
from sleuth.errors import SleuthError

logger = logging.getLogger(__name__)

MAX_JOBS_KEPT = 1000
"""Finished jobs beyond this many (oldest first) are forgotten."""


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
        self.files = {n: JobFile(name=n, status="pending") for n in self.staged}
        self.progress.files_total = len(self.staged)

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
    """The pipeline's progress callback, recorded in the job."""

    def __init__(self, job: IngestJob) -> None:
        self.job = job

    def on_start(self, n_files: int) -> None:
        with self.job.lock:
            self.job.progress.files_total = n_files

    def on_file(self, path: str, status: str) -> None:
        name = Path(path).name
        with self.job.lock:
            self.job.progress.files_done += 1
            if name in self.job.files:
                self.job.files[name].status = status

    def on_chunks(self, n_embedded: int, n_total: int) -> None:
        with self.job.lock:
            self.job.progress.chunks_embedded = n_embedded
            self.job.progress.chunks_total = n_total


class JobRegistry:
    """Queues and runs ingestion jobs on one worker thread.

    ``lock`` guards the link between jobs and collections: take it to check that no job is
    pending on a collection and to delete it (or its documents) in one step.

    Args:
        sleuth: the installation (its pipeline ingests, its catalog checks ownership).
    """

    def __init__(self, sleuth: Sleuth) -> None:
        self.sleuth = sleuth
        self.uploads = sleuth.settings.data_dir / "uploads"
        self.lock = threading.RLock()
        self._jobs: OrderedDict[str, IngestJob] = OrderedDict()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sleuth-ingest")

    def staging_dir(self) -> tuple[str, Path]:
        """A fresh job id and its (new, empty) staging folder."""
        job_id = uuid.uuid4().hex[:16]
        path = self.uploads / ".staging" / job_id
        path.mkdir(parents=True, exist_ok=False)
        return job_id, path

    def submit(
        self, job_id: str, user_id: str, collection: str, staged: dict[str, Path]
    ) -> IngestJob:
        """Queue the ingestion of the staged files (name → staged path)."""
        job = IngestJob(job_id=job_id, user_id=user_id, collection=collection, staged=staged)
        with self.lock:
            self._jobs[job_id] = job
            self._forget_old()
        self._pool.submit(self._run, job)
        return job

    def get(self, collection: str, job_id: str) -> IngestJob | None:
        with self.lock:
            job = self._jobs.get(job_id)
        return job if job is not None and job.collection == collection else None

    def of_collection(self, collection: str) -> list[IngestJob]:
        """The jobs of a collection, newest first."""
        with self.lock:
            return [j for j in reversed(self._jobs.values()) if j.collection == collection]

    def pending(self, collection: str) -> IngestJob | None:
        """A queued or running job of the collection, if any (call with ``lock`` held)."""
        with self.lock:
            return next(
                (j for j in self._jobs.values() if j.collection == collection and not j.finished),
                None,
            )

    def forget_collection(self, collection: str) -> None:
        """Forget the jobs and remove the uploaded files of a deleted collection."""
        with self.lock:
            for key in [k for k, j in self._jobs.items() if j.collection == collection]:
                del self._jobs[key]
        shutil.rmtree(self.uploads / collection, ignore_errors=True)

    def shutdown(self) -> None:
        """Wait for the running job; queued ones are dropped (their staged files removed)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.uploads / ".staging", ignore_errors=True)

    # ------------------------------------------------------------------ internals

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
        with job.lock:
            job.state = "running"
            job.started_at = _now()
        staging = next(iter(job.staged.values())).parent if job.staged else None
        try:
            with self.lock:  # the collection may have been deleted while the job waited
                if self.sleuth.catalog.collection_owner(job.collection) != job.user_id:
                    raise SleuthError(f"collection '{job.collection}' no longer exists")
            target = self.uploads / job.collection
            target.mkdir(parents=True, exist_ok=True)
            paths = []
            for name, staged in job.staged.items():
                final = target / name
                os.replace(staged, final)
                paths.append(final)
            report = self.sleuth.pipeline.ingest(paths, job.collection, progress=_Progress(job))
            with job.lock:
                for outcome in report.files:
                    name = Path(outcome.path).name
                    job.files[name] = JobFile(
                        name=name,
                        doc_id=outcome.doc_id,
                        status=outcome.status,
                        n_chunks=outcome.n_chunks,
                        message=self._public(outcome.message, target),
                    )
                job.warnings = [self._public(w, target) for w in report.warnings]
                job.state = "succeeded"
        except Exception as exc:
            message = str(exc) if isinstance(exc, SleuthError) else f"{type(exc).__name__}: {exc}"
            logger.warning("ingestion job %s failed: %s", job.job_id, message)
            with job.lock:
                job.state = "failed"
                job.error = message
        finally:
            with job.lock:
                job.finished_at = _now()
            if staging is not None:
                with contextlib.suppress(OSError):
                    shutil.rmtree(staging)
