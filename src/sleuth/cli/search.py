"""``sleuth search`` and ``sleuth read``: ranked sections (or chunks) of a collection, and
one section's text by its source_id (what an answer cites), without the agent.

Imports no agent code: the knowledge base alone answers (and the embedding model only for
the dense and hybrid modes).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from sleuth.cli import _common as common
from sleuth.cli._common import EXIT_USAGE, CollectionOpt, JsonOpt
from sleuth.errors import SleuthError

SEARCH_MODES = ("hybrid", "bm25", "dense")


def search(
    query: Annotated[str, typer.Argument(help="Search query")],
    collection: CollectionOpt = None,
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, max=100)] = 5,
    mode: Annotated[str, typer.Option(help="hybrid | bm25 | dense")] = "hybrid",
    chunks: Annotated[
        bool,
        typer.Option(
            "--chunks", help="Rank raw chunks (a section's parts apart), not one row per section"
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Search a collection (no agent): one row per section, its best chunk, with the
    section's source_id (--chunks: the raw ranked chunks)."""
    if mode not in SEARCH_MODES:
        raise common.fail(f"--mode must be hybrid, bm25 or dense, not '{mode}'", EXIT_USAGE)
    common.non_empty(query, "query")
    name = common.collection_name(collection)
    s = common.open_sleuth()
    try:
        find = s.kb.search if chunks else s.kb.search_sections
        hits = find(name, query, k=top_k, mode=mode)  # type: ignore[arg-type]
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    finally:
        s.close()
    if as_json:
        typer.echo(json.dumps([h.model_dump() for h in hits], indent=2, ensure_ascii=False))
        return
    table = Table("rank", "source_id", "score", "title / text")
    for h in hits:
        snippet = " ".join(h.chunk.text.split())[:160]
        table.add_row(
            str(h.rank), h.chunk.source_id, f"{h.score:.4f}", f"{h.chunk.heading}\n{snippet}"
        )
    common.stdout_console().print(table)


def read(
    source_id: Annotated[str, typer.Argument(help="A section's source_id, as an answer cites it")],
    collection: CollectionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print one section of a collection by its source_id (the text a citation points to)."""
    from sleuth.retrieval.search import join_parts

    common.non_empty(source_id, "source_id")
    name = common.collection_name(collection)
    s = common.open_sleuth()
    try:
        chunks = s.kb.section(name, source_id.strip())
        if not chunks:
            s.kb.index(name)  # no such collection: its own error, listing those that exist
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    finally:
        s.close()
    if not chunks:
        raise common.fail(
            f"no section '{source_id}' in collection '{name}' (source_ids are listed by "
            f"`sleuth search QUERY -c {name}`)"
        )
    if as_json:
        typer.echo(json.dumps([c.model_dump() for c in chunks], indent=2, ensure_ascii=False))
        return
    console = common.stdout_console()
    console.print(f"[bold]{chunks[0].source_id}[/bold] · {' > '.join(chunks[0].title_path)}")
    console.print(join_parts(chunks), markup=False, highlight=False)
