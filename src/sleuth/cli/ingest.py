"""``sleuth ingest``: files and folders into a collection."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from sleuth.cli import _common as common
from sleuth.cli._common import EXIT_ERROR, CollectionOpt, JsonOpt, err
from sleuth.errors import SleuthError

if TYPE_CHECKING:
    from sleuth.app import Sleuth
    from sleuth.ingest.pipeline import IngestReport

INDEXED = ("added", "replaced", "unchanged", "duplicate")
"""File outcomes whose content is in the collection after the batch."""


def nothing_indexed(report: IngestReport) -> str | None:
    """Why nothing of the batch is in the collection, or ``None`` when something is.

    A batch indexed nothing when every file was skipped (empty) or failed, or when no file
    of a supported type was found; ``unchanged`` and ``duplicate`` files count as indexed
    (their content already is).
    """
    if any(f.status in INDEXED for f in report.files):
        return None
    if not report.files:
        return "nothing was indexed: no file of a supported type was found"
    t = report.totals
    parts = []
    if t["skipped"]:
        parts.append(f"{t['skipped']} skipped (empty)")
    if t["failed"]:
        parts.append(f"{t['failed']} failed")
    noun = "file" if len(report.files) == 1 else "files"
    return f"nothing was indexed: of {len(report.files)} {noun}, {', '.join(parts)}"


def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories to ingest")],
    collection: CollectionOpt = None,
    record_path: Annotated[
        str | None, typer.Option(help="JSON: dotted path to the record list")
    ] = None,
    text_field: Annotated[str | None, typer.Option(help="JSON: record field with text")] = None,
    title_field: Annotated[str | None, typer.Option(help="JSON: record field w/ title")] = None,
    id_field: Annotated[str | None, typer.Option(help="JSON: record field used as id")] = None,
    source_id_template: Annotated[
        str | None, typer.Option(help="JSON: e.g. '{doc.name|abbr}_S{section_number}'")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Ingest files (txt, md, html, pdf, docx, json, jsonl) into a collection."""
    from sleuth.ingest.progress import RichProgress
    from sleuth.ingest.records import RecordOptions

    fields = {
        "record_path": record_path,
        "text_field": text_field,
        "title_field": title_field,
        "id_field": id_field,
        "source_id_template": source_id_template,
    }
    options = (
        RecordOptions(**{k: v for k, v in fields.items() if v is not None})
        if any(v is not None for v in fields.values())
        else None
    )
    name = common.collection_name(collection)
    s = common.open_sleuth()
    existed = s.catalog.get_collection(name) is not None
    try:
        if as_json or not err.is_terminal:  # no bar frames in a log or a pipe
            report = s.pipeline.ingest(paths, name, options)
        else:
            with RichProgress(err) as progress:
                report = s.pipeline.ingest(paths, name, options, progress=progress)
        problem = nothing_indexed(report)
        if problem is not None and not existed and s.catalog.get_collection(name) is not None:
            # a batch that indexed nothing leaves no empty collection of its own behind
            s.drop_collection(name)
    except SleuthError as exc:
        if not existed:
            _forget_new_empty_collection(s, name)
        s.close()
        raise common.fail(str(exc)) from exc
    s.close()
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        for warning in report.warnings:
            common.warning_line(warning)
        for f in report.files:
            if f.status in ("failed", "duplicate"):
                # the message opens with the file's name: the full path stands for it
                reason = f.message.removeprefix(f"{Path(f.path).name}: ")
                err.print(
                    Text.assemble((f"{f.status}:", "red"), f" {f.path}: {reason}"),
                    soft_wrap=True,
                    highlight=False,
                )
        t = report.totals
        typer.echo(
            f"{name}: {t['added']} added, {t['replaced']} replaced, {t['unchanged']} unchanged, "
            f"{t['duplicate']} duplicate, {t['skipped']} skipped, {t['failed']} failed; "
            f"{report.n_embedded} chunks embedded in {report.timings.total_s:.1f} s"
        )
    if problem is not None:
        raise common.fail(problem, EXIT_ERROR)


def _forget_new_empty_collection(s: Sleuth, name: str) -> None:
    """A collection this command created but filled with nothing before it failed (e.g. its
    index backend could not be opened) is not left behind in the catalog, where it would
    pin the collection to that backend."""
    info = s.catalog.get_collection(name)
    if info is None or info.n_documents or info.n_failed:
        return
    try:
        s.drop_collection(name)
    except SleuthError:  # the index cannot be reached: the catalog record goes alone
        s.catalog.delete_collection(name)
