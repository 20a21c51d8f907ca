"""``sleuth migrate``: move a local collection into PostgreSQL without re-embedding."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from sleuth.cli import _common as common
from sleuth.cli._common import CollectionOpt, JsonOpt, err
from sleuth.errors import SleuthError


def migrate(
    collection: CollectionOpt = None,
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="SQLAlchemy URL of the PostgreSQL database (postgresql+psycopg://user@host/db); "
            "it receives the catalog records and the index",
        ),
    ] = "",
    as_json: JsonOpt = False,
) -> None:
    """Copy a local collection (catalog records, chunks, stored vectors) into PostgreSQL.

    Nothing is re-embedded and the source is left as it was; run it again after an
    interruption and it skips what is already there. Then use the collection with
    SLEUTH_INDEX_BACKEND=postgres and SLEUTH_DATABASE_URL set to the same URL.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from sleuth.store.migrate import migrate_collection

    if not to:
        raise common.fail("give the target database: --to postgresql+psycopg://…", 2)
    name = common.collection_name(collection)
    settings = common.load_settings()
    try:
        if as_json or not err.is_terminal:
            report = migrate_collection(settings, name, to)
        else:
            with Progress(
                "[bold]documents",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
            ) as bar:
                task = bar.add_task("documents", total=None)
                report = migrate_collection(
                    settings, name, to, progress=lambda d, n: bar.update(task, completed=d, total=n)
                )
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    except KeyboardInterrupt:
        raise common.fail(
            "interrupted: the documents copied so far are in the target; run the same "
            "command again to finish (they are skipped)",
            130,
        ) from None
    if as_json:
        typer.echo(json.dumps(asdict(report), indent=2))
        return
    for warning in report.warnings:
        common.warning_line(warning)
    typer.echo(
        f"{name}: {report.documents_copied} documents ({report.chunks_copied} chunks) copied, "
        f"{report.documents_skipped} already there, {report.failed_records_copied} failed-"
        "document records; use it with SLEUTH_INDEX_BACKEND=postgres and "
        "SLEUTH_DATABASE_URL=<the --to URL>"
    )
