"""Progress reporting for ingestion: the callback protocol and a rich progress-bar adapter."""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, runtime_checkable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


@runtime_checkable
class ProgressCallback(Protocol):
    """Receives ingestion progress.

    ``on_file`` is called once per input file (or document) when its outcome is known, with
    the outcome status (added, replaced, unchanged, duplicate, skipped, failed).
    ``on_chunks`` is called as chunks are embedded: ``n_embedded`` of ``n_total`` so far.
    An object may also define ``on_start(n_files: int)``; the pipeline calls it first if so.
    """

    def on_file(self, path: str, status: str) -> None: ...

    def on_chunks(self, n_embedded: int, n_total: int) -> None: ...


class RichProgress:
    """Two rich progress bars on stderr: files done and chunks embedded.

    Use as a context manager around :meth:`IngestPipeline.ingest`::

        with RichProgress() as progress:
            report = pipeline.ingest(paths, "docs", progress=progress)

    Args:
        console: where to draw; a stderr console by default.
    """

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description:<7}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[detail]}", style="dim"),
            console=self.console,
            transient=False,
        )
        self._files: TaskID = self._progress.add_task("files", total=None, detail="")
        self._chunks: TaskID = self._progress.add_task("chunks", total=None, detail="")

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def on_start(self, n_files: int) -> None:
        """Set the number of files to process."""
        self._progress.update(self._files, total=n_files)

    def on_file(self, path: str, status: str) -> None:
        """Advance the files bar, showing the last file and its status."""
        name = path.rsplit("/", 1)[-1]
        self._progress.update(self._files, advance=1, detail=f"{name}: {status}")

    def on_chunks(self, n_embedded: int, n_total: int) -> None:
        """Move the chunks bar to ``n_embedded`` of ``n_total``."""
        self._progress.update(self._chunks, completed=n_embedded, total=n_total)
