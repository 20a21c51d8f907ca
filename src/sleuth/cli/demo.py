"""``sleuth demo``: the Python Language Reference shipped with CPython, ingested and asked."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from sleuth.cli import _common as common
from sleuth.cli._common import AsciiOpt, err
from sleuth.errors import SleuthError

DEMO_COLLECTION = "python-reference"
DEMO_QUESTION = "How does Python resolve a free variable in a nested function?"


def demo(
    question: Annotated[str, typer.Option(help="Question to ask")] = DEMO_QUESTION,
    ascii_only: AsciiOpt = False,
) -> None:
    """Ingest the Python Language Reference shipped with CPython and answer a question."""
    from sleuth.cli.ask import run_ask
    from sleuth.ingest.progress import RichProgress
    from sleuth.ingest.pydoc_corpus import load_pydoc_topics

    started = time.perf_counter()
    s = common.open_sleuth()
    err.print(
        f"sleuth demo: the Python Language Reference (pydoc_data.topics) → collection "
        f"'{DEMO_COLLECTION}' in {s.settings.data_dir}"
    )
    try:
        with RichProgress(err) as progress:
            report = s.pipeline.ingest_documents(
                [load_pydoc_topics()], DEMO_COLLECTION, progress=progress
            )
    except SleuthError as exc:
        s.close()
        raise common.fail(str(exc)) from exc
    outcome = report.files[0]
    reused = outcome.status == "unchanged"
    err.print(
        f"index: {outcome.n_chunks} chunks, "
        + ("reused (unchanged)" if reused else f"built in {report.timings.total_s:.1f} s")
    )
    err.print(f"\n[bold]Q: {question}[/bold]\n")
    try:
        run_ask(s, question, DEMO_COLLECTION, ascii_only=ascii_only)
    finally:
        err.print(f"[dim]demo finished in {time.perf_counter() - started:.1f} s[/dim]")
