"""Open the configured index backend for a collection."""

from __future__ import annotations

import re

from sleuth.config import Settings
from sleuth.errors import ConfigError
from sleuth.store.catalog import validate_collection_name
from sleuth.store.index import Index

INTERNAL_NAME_PATTERN = re.compile(r"_[A-Za-z0-9_]{1,63}")
"""Names of internal indexes: never a valid collection name (those start with a letter or
digit), and a valid Milvus collection name as is."""


def open_index(settings: Settings, collection: str, dim: int) -> Index:
    """Open (creating if needed) the index of ``collection`` with the configured backend.

    ``local``: :class:`~sleuth.store.local_index.LocalIndex` in
    ``<data_dir>/indexes/<collection>`` (dense search exact, or HNSW with
    ``settings.local_ann="hnsw"``). ``milvus``:
    :class:`~sleuth.store.milvus_index.MilvusIndex` at ``settings.milvus_uri``, or a Milvus
    Lite file ``<data_dir>/milvus.db`` when no URI is set. ``postgres``:
    :class:`~sleuth.store.postgres_index.PostgresIndex` in the catalog's database
    (``settings.database_url``, which must then be a PostgreSQL URL).

    Args:
        settings: the settings in force.
        collection: the sleuth collection name.
        dim: dimension of the embedding model's vectors.

    Raises:
        MissingExtraError: the milvus (postgres) backend without ``sleuth[milvus]``
            (``sleuth[postgres]``) installed.
        EmbeddingModelMismatch: the index exists with vectors of another dimension.
        ConfigError: the index cannot be opened with these settings (postgres: no
            PostgreSQL ``database_url``).
        UserError: an invalid collection name (see
            :func:`~sleuth.store.catalog.validate_collection_name`).
    """
    validate_collection_name(collection)
    return _open_backend(settings, collection, dim)


def open_internal_index(settings: Settings, name: str, dim: int) -> Index:
    """Open (creating if needed) an internal index, e.g. the agent's memory.

    Internal names start with ``_``, which :func:`validate_collection_name` refuses: no user
    collection can take the name, and ``open_index`` / the knowledge base never open it. The
    index lives where a collection's would (``<data_dir>/indexes/<name>``, or the Milvus
    collection ``sleuth_<name>``) but has no catalog record, so it is not listed as a
    collection and deleting a collection leaves it alone.

    Raises:
        ValueError: ``name`` is not an internal name (``_`` then letters, digits, ``_``).
        MissingExtraError, EmbeddingModelMismatch, ConfigError: as :func:`open_index`.
    """
    if not INTERNAL_NAME_PATTERN.fullmatch(name):
        raise ValueError(f"not an internal index name: {name!r}")
    return _open_backend(settings, name, dim)


def _open_backend(settings: Settings, name: str, dim: int) -> Index:
    if settings.index_backend == "milvus":
        from sleuth.store.milvus_index import MilvusIndex

        uri = settings.milvus_uri or str(settings.data_dir / "milvus.db")
        return MilvusIndex(uri, name, dim, settings.milvus_token)
    if settings.index_backend == "postgres":
        from sleuth.store.postgres_index import PostgresIndex

        if not settings.database_url:
            raise ConfigError(
                "SLEUTH_INDEX_BACKEND=postgres keeps the index in the catalog's database: "
                "set SLEUTH_DATABASE_URL to a PostgreSQL URL (postgresql+psycopg://user@host/db)"
            )
        return PostgresIndex(settings.database_url, name, dim, ef_search=settings.hnsw_ef_search)
    from sleuth.store.local_index import LocalIndex

    return LocalIndex(
        settings.data_dir / "indexes" / name,
        dim,
        ann=settings.local_ann,
        ef_search=settings.hnsw_ef_search,
    )
