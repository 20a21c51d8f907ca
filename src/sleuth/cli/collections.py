"""``sleuth collections`` and ``sleuth delete``: list collections, delete documents or one.

Neither loads the embedding model: they only read the catalog (and open an index to delete
from it).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from sleuth.cli import _common as common
from sleuth.cli._common import EXIT_USAGE, CollectionOpt, JsonOpt
from sleuth.errors import SleuthError


def collections(as_json: JsonOpt = False) -> None:
    """List collections with their embedding model and counts."""
    s = common.open_sleuth()
    try:
        infos = s.catalog.list_collections()
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    finally:
        s.close()
    if as_json:
        typer.echo(json.dumps([i.model_dump(mode="json") for i in infos], indent=2))
        return
    table = Table("collection", "documents", "chunks", "embedding model", "backend")
    for i in infos:
        table.add_row(
            i.name,
            str(i.n_documents),
            str(i.n_chunks),
            f"{i.embedding_model} ({i.dim}-d)",
            i.backend,
        )
    common.stdout_console().print(table)


def delete(
    documents: Annotated[
        list[str] | None, typer.Argument(help="doc_ids or paths of documents to delete")
    ] = None,
    collection: CollectionOpt = None,
    whole_collection: Annotated[
        bool, typer.Option("--whole-collection", help="Delete the collection itself")
    ] = False,
) -> None:
    """Delete documents (from every index and the catalog), or a whole collection."""
    if whole_collection and documents:
        raise common.fail("give documents or --whole-collection, not both", EXIT_USAGE)
    if not whole_collection and not documents:
        raise common.fail("name at least one document (doc_id or path)", EXIT_USAGE)
    given = common.load_settings().default_collection if collection is None else collection
    # an older version accepted names that break today's rule: those can still be deleted
    name = (
        given
        if whole_collection and legacy_collection(given)
        else common.collection_name(collection)
    )
    s = common.open_sleuth()
    try:
        if whole_collection:
            s.drop_collection(name)
            typer.echo(f"deleted collection {name}")
            return
        for doc in documents or ():
            s.pipeline.delete(name, doc)
            typer.echo(f"deleted {doc} from {name}")
    except SleuthError as exc:
        raise common.fail(str(exc)) from exc
    finally:
        s.close()


def legacy_collection(name: str) -> bool:
    """Whether ``name`` breaks the naming rule but exists in the catalog (older versions)."""
    from sleuth.errors import UserError
    from sleuth.store.catalog import validate_collection_name

    try:
        validate_collection_name(name)
        return False
    except UserError:
        pass
    s = common.open_sleuth()
    try:
        return s.catalog.get_collection(name) is not None
    finally:
        s.close()
