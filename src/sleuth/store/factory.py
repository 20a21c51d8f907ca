"""Open the configured index backend for a collection."""

from __future__ import annotations

from sleuth.config import Settings
from sleuth.store.catalog import validate_collection_name
from sleuth.store.index import Index


def open_index(settings: Settings, collection: str, dim: int) -> Index:
    """Open (creating if needed) the index of ``collection`` with the configured backend.

    ``local``: :class:`~sleuth.store.local_index.LocalIndex` in
    ``<data_dir>/indexes/<collection>``. ``milvus``:
    :class:`~sleuth.store.milvus_index.MilvusIndex` at ``settings.milvus_uri``, or a Milvus
    Lite file ``<data_dir>/milvus.db`` when no URI is set.

    Args:
        settings: the settings in force.
        collection: the sleuth collection name.
        dim: dimension of the embedding model's vectors.

    Raises:
        MissingExtraError: the milvus backend without ``sleuth[milvus]`` installed.
        EmbeddingModelMismatch: the index exists with vectors of another dimension.
        ConfigError: the index cannot be opened with these settings.
        UserError: an invalid collection name (see
            :func:`~sleuth.store.catalog.validate_collection_name`).
    """
    validate_collection_name(collection)
    if settings.index_backend == "milvus":
        from sleuth.store.milvus_index import MilvusIndex

        uri = settings.milvus_uri or str(settings.data_dir / "milvus.db")
        return MilvusIndex(uri, collection, dim, settings.milvus_token)
    from sleuth.store.local_index import LocalIndex

    return LocalIndex(settings.data_dir / "indexes" / collection, dim)
