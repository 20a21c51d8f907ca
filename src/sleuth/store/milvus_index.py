"""A Milvus index: BM25 full-text search, dense search and server-side RRF hybrid.

One collection per sleuth collection, schema::

    chunk_id   VARCHAR(1024) primary key
    doc_id     VARCHAR(1024)
    source_id  VARCHAR(1024)
    text       VARCHAR(65535), analyzer on: ``Chunk.index_text()`` cut to 65535 UTF-8 bytes
    sparse     SPARSE_FLOAT_VECTOR, output of the built-in BM25 function over ``text``
    dense      FLOAT_VECTOR(dim), metric IP (vectors are L2-normalised: IP = cosine)
    payload    JSON, the whole Chunk, to rebuild hits

BM25 is computed by Milvus (Robertson & Zaragoza 2009, with k1 = 1.5, b = 0.75 as in
LocalIndex; Milvus keeps the (k1 + 1) factor that Lucene drops, so its scores are 2.5 times
LocalIndex's for the same terms, with the same ranking). Hybrid search is ``hybrid_search``
with ``RRFRanker(60)`` (Cormack et al., SIGIR 2009), the same fusion as
:func:`sleuth.store.index.rrf_fuse`.

``uri`` is a server URI (``http://host:19530``) or a Milvus Lite path ending in ``.db``
(milvus-lite 3 keeps a directory there). Milvus Lite runs inside this process and only one
process may use a path at a time; the last open index on a path stops its server when
closed. Lite's analyzer ignores the stemmer filter (no stemming); a server stems English.

Lexical analysis differs from LocalIndex's (:func:`sleuth.retrieval.text.analyze`): Milvus
analyses ``text`` server-side with :data:`ANALYZER_PARAMS` (the ``standard`` tokenizer,
lowercase, English stopwords, English stemmer), which neither folds accents ("Aschenbrodel"
does not find "Aschenbrödel") nor cuts CJK text into bigrams (the ``standard`` tokenizer
splits Han and kana into single characters or long runs) nor indexes emoji. Milvus has no
CJK-bigram filter, so its analysis cannot be made identical by configuration; the cheap way
to make both backends agree would be to send the text pre-analysed (``" ".join(tokenize(
text))``) to a ``whitespace`` analyzer, which changes the schema and needs existing
collections re-ingested: not done yet. :func:`_has_terms` uses LocalIndex's analyzer, so a
query of only CJK or emoji is sent to Milvus (which may find nothing for it).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from bm25s.stopwords import STOPWORDS_EN

from sleuth.errors import ConfigError, EmbeddingModelMismatch, require
from sleuth.store.index import RRF_K, check_k, query_vector, rrf_fuse
from sleuth.store.local_index import BM25_B, BM25_K1, tokenize
from sleuth.types import Chunk, Hit, Retriever

TEXT_MAX_BYTES = 65535
ID_MAX_BYTES = 1024
MAX_TOPK = 16384
_BATCH = 256
_FIELDS = ("chunk_id", "doc_id", "source_id", "text", "sparse", "dense", "payload")
_PURPOSE = "the Milvus index"

# English stopwords as in LocalIndex (bm25s' list), then the Snowball English stemmer
# (BM25 over the analysed text, with LocalIndex's k1 and b).
ANALYZER_PARAMS: dict[str, Any] = {
    "tokenizer": "standard",
    "filter": [
        "lowercase",
        {"type": "stop", "stop_words": sorted(STOPWORDS_EN)},
        {"type": "stemmer", "language": "english"},
    ],
}

_lite_lock = threading.Lock()
_lite_refs: dict[str, int] = {}


def collection_name(name: str) -> str:
    """A valid Milvus collection name for a sleuth collection name.

    Milvus names are letters, digits and underscores, start with a letter or underscore,
    at most 255 characters. The result is ``sleuth_<name>`` with other characters
    replaced by ``_``; when anything was replaced or cut, a hash of the original name is
    appended so that distinct names never collide.
    """
    clean = re.sub(r"[^0-9A-Za-z_]", "_", name)
    out = f"sleuth_{clean}"
    if clean != name or len(out) > 255:
        digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:10]
        out = f"{out[:240]}_{digest}"
    return out


def truncate_utf8(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore")


def _quote(value: str) -> str:
    """A Milvus filter string literal (C-style escapes)."""
    escaped = (
        value.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


def _in_filter(field: str, values: Sequence[str]) -> str:
    return f"{field} in [{', '.join(_quote(v) for v in sorted(set(values)))}]"


def _is_lite(uri: str) -> bool:
    return "://" not in uri and not uri.startswith("unix:")


class MilvusIndex:
    """Index of one collection in Milvus (server or Milvus Lite).

    Implements :class:`sleuth.store.index.Index`. Mutations are serialised by a lock;
    reads use consistency level Strong, so they see every completed write.

    Args:
        uri: ``http(s)://host:port`` of a server, or a Milvus Lite path ending in ``.db``
            (its parent directory is created).
        collection: sleuth collection name (sanitised by :func:`collection_name`).
        dim: dimension of the dense vectors.
        token: auth token of the server (``user:password`` or an API key), if any.

    Raises:
        MissingExtraError: pymilvus (or milvus-lite for a local path) is not installed.
        ConfigError: cannot connect, a Lite path without ``.db``, or the collection exists
            with another schema.
        EmbeddingModelMismatch: the collection holds vectors of another dimension.
    """

    def __init__(self, uri: str, collection: str, dim: int, token: str | None = None) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self._pm: Any = require("pymilvus", "milvus", _PURPOSE)
        self.uri = uri
        self.dim = int(dim)
        self.collection = collection
        self.name = collection_name(collection)
        self._lock = threading.RLock()
        self._closed = False
        self._lite_key: str | None = None
        if _is_lite(uri):
            if not uri.endswith(".db"):
                raise ConfigError(f"Milvus Lite path must end in '.db', got {uri!r}")
            require("milvus_lite", "milvus", "Milvus Lite")
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
            self._lite_key = os.path.abspath(uri)
        try:
            self._client: Any = self._pm.MilvusClient(uri=uri, token=token or "")
        except Exception as exc:
            hint = (
                " (Milvus Lite serves one process per data path: is another sleuth process "
                "using it?)"
                if self._lite_key
                else ""
            )
            raise ConfigError(f"cannot open Milvus at {uri!r}: {exc}{hint}") from exc
        if self._lite_key:
            with _lite_lock:
                _lite_refs[self._lite_key] = _lite_refs.get(self._lite_key, 0) + 1
        try:
            self._open_collection()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ setup

    def _open_collection(self) -> None:
        client = self._client
        if client.has_collection(self.name):
            desc = client.describe_collection(self.name)
            fields = {f["name"]: f for f in desc["fields"]}
            if not set(_FIELDS) <= fields.keys():
                raise ConfigError(
                    f"Milvus collection {self.name!r} exists but was not made by sleuth "
                    f"(fields {sorted(fields)})"
                )
            have = int(fields["dense"].get("params", {}).get("dim", 0))
            if have != self.dim:
                raise EmbeddingModelMismatch(
                    f"Milvus collection {self.name!r} holds {have}-d vectors but the "
                    f"embedding model gives {self.dim}-d; use the model the collection was "
                    "built with, or rebuild it"
                )
            client.load_collection(self.name)
            return
        pm = self._pm
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("chunk_id", pm.DataType.VARCHAR, max_length=ID_MAX_BYTES, is_primary=True)
        schema.add_field("doc_id", pm.DataType.VARCHAR, max_length=ID_MAX_BYTES)
        schema.add_field("source_id", pm.DataType.VARCHAR, max_length=ID_MAX_BYTES)
        schema.add_field(
            "text",
            pm.DataType.VARCHAR,
            max_length=TEXT_MAX_BYTES,
            enable_analyzer=True,
            analyzer_params=ANALYZER_PARAMS,
        )
        schema.add_field("sparse", pm.DataType.SPARSE_FLOAT_VECTOR)
        schema.add_field("dense", pm.DataType.FLOAT_VECTOR, dim=self.dim)
        schema.add_field("payload", pm.DataType.JSON)
        schema.add_function(
            pm.Function(
                name="text_bm25",
                function_type=pm.FunctionType.BM25,
                input_field_names=["text"],
                output_field_names=["sparse"],
            )
        )
        index_params = client.prepare_index_params()
        index_params.add_index(
            "sparse",
            index_type="SPARSE_INVERTED_INDEX",
            metric_type="BM25",
            params={"bm25_k1": BM25_K1, "bm25_b": BM25_B},
        )
        index_params.add_index(
            "dense", index_type="FLAT" if self._lite_key else "AUTOINDEX", metric_type="IP"
        )
        client.create_collection(self.name, schema=schema, consistency_level="Strong")
        # sync=False: pymilvus would otherwise poll every 0.5 s per index; an empty
        # collection's index exists as soon as the request returns, and load waits for it.
        client.create_index(self.name, index_params, sync=False)
        client.load_collection(self.name)

    # ------------------------------------------------------------------ Index protocol

    def add(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Upsert chunks with their vectors (same ``chunk_id`` = replace).

        Args:
            chunks: the chunks; a repeated ``chunk_id`` in one call keeps the last one.
            vectors: float array of shape ``(len(chunks), dim)``, rows L2-normalised.

        Raises:
            ValueError: wrong ``vectors`` shape, or an id longer than 1024 UTF-8 bytes.
        """
        vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape != (len(chunks), self.dim):
            raise ValueError(
                f"vectors must have shape ({len(chunks)}, {self.dim}), got {vecs.shape}"
            )
        rows: dict[str, dict[str, Any]] = {}
        for chunk, vec in zip(chunks, vecs, strict=True):
            for field in ("chunk_id", "doc_id", "source_id"):
                if len(getattr(chunk, field).encode("utf-8")) > ID_MAX_BYTES:
                    raise ValueError(f"{field} longer than {ID_MAX_BYTES} bytes: {chunk.chunk_id}")
            rows[chunk.chunk_id] = {
                "chunk_id": chunk.chunk_id,
                "doc_id": chunk.doc_id,
                "source_id": chunk.source_id,
                "text": truncate_utf8(chunk.index_text(), TEXT_MAX_BYTES),
                "dense": vec.tolist(),
                "payload": chunk.model_dump(mode="json"),
            }
        data = list(rows.values())
        with self._lock:
            self._check_open()
            for start in range(0, len(data), _BATCH):
                self._client.upsert(self.name, data[start : start + _BATCH])

    def delete_document(self, doc_id: str) -> int:
        """Remove every chunk of ``doc_id``; return how many were removed."""
        expr = f"doc_id == {_quote(doc_id)}"
        with self._lock:
            self._check_open()
            n = self._count(expr)
            if n:
                self._client.delete(self.name, filter=expr)
            return n

    def count(self) -> int:
        """Number of chunks held (``count(*)`` at consistency level Strong)."""
        self._check_open()
        return self._count("")

    def search_bm25(self, query: str, k: int, doc_ids: Sequence[str] | None = None) -> list[Hit]:
        """Top-k chunks by Milvus BM25 over the analysed ``text`` field.

        Returns:
            Up to ``k`` hits, best first (ties by ``chunk_id``); ``[]`` when the query has
            no term left after stopword removal.

        Raises:
            ValueError: ``k`` < 1.
        """
        check_k(k)
        self._check_open()
        if (doc_ids is not None and not doc_ids) or not _has_terms(query):
            return []
        res = self._client.search(
            self.name,
            data=[query],
            anns_field="sparse",
            limit=min(k, MAX_TOPK),
            filter=self._filter(doc_ids),
            output_fields=["payload"],
            search_params={"metric_type": "BM25"},
            consistency_level="Strong",
        )
        # Milvus Lite reports BM25 scores negated (as distances); a server, positive.
        return _to_hits(res[0], "bm25", score=abs)[:k]

    def search_dense(
        self, vector: np.ndarray, k: int, doc_ids: Sequence[str] | None = None
    ) -> list[Hit]:
        """Top-k chunks by inner product (= cosine) with ``vector`` of shape ``(dim,)``.

        Raises:
            ValueError: ``k`` < 1 or the vector has the wrong shape.
        """
        check_k(k)
        q = query_vector(vector, self.dim)
        self._check_open()
        if doc_ids is not None and not doc_ids:
            return []
        res = self._client.search(
            self.name,
            data=[q.tolist()],
            anns_field="dense",
            limit=min(k, MAX_TOPK),
            filter=self._filter(doc_ids),
            output_fields=["payload"],
            search_params={"metric_type": "IP"},
            consistency_level="Strong",
        )
        return _to_hits(res[0], "dense")[:k]

    def search_hybrid(
        self,
        query: str,
        vector: np.ndarray,
        k: int,
        doc_ids: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Top-k by ``hybrid_search`` of BM25 and dense with ``RRFRanker(60)``.

        Each leg contributes its top ``max(50, 4k)`` candidates. When the query has no
        term (only stopwords), the result is the dense ranking fused alone.

        Raises:
            ValueError: ``k`` < 1 or the vector has the wrong shape.
        """
        check_k(k)
        q = query_vector(vector, self.dim)
        self._check_open()
        if doc_ids is not None and not doc_ids:
            return []
        n_cand = min(max(50, 4 * k), MAX_TOPK)
        if not _has_terms(query):
            return rrf_fuse([self.search_dense(q, n_cand, doc_ids)], k)
        pm = self._pm
        expr = self._filter(doc_ids)
        reqs = [
            pm.AnnSearchRequest(
                data=[query],
                anns_field="sparse",
                param={"metric_type": "BM25"},
                limit=n_cand,
                expr=expr or None,
            ),
            pm.AnnSearchRequest(
                data=[q.tolist()],
                anns_field="dense",
                param={"metric_type": "IP"},
                limit=n_cand,
                expr=expr or None,
            ),
        ]
        res = self._client.hybrid_search(
            self.name,
            reqs=reqs,
            ranker=pm.RRFRanker(RRF_K),
            limit=min(k, MAX_TOPK),
            output_fields=["payload"],
            consistency_level="Strong",
        )
        return _to_hits(res[0], "hybrid")[:k]

    def close(self) -> None:
        """Close the connection; the last index on a Milvus Lite path stops its server."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._client.close()
            finally:
                if self._lite_key:
                    self._release_lite(self._lite_key)

    # ------------------------------------------------------------------ extras

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids, in the order asked; unknown ids are skipped."""
        self._check_open()
        if not chunk_ids:
            return []
        rows = self._client.query(
            self.name,
            filter=_in_filter("chunk_id", chunk_ids),
            output_fields=["payload"],
            consistency_level="Strong",
        )
        by_id = {r["chunk_id"]: Chunk.model_validate(r["payload"]) for r in rows}
        return [by_id[cid] for cid in chunk_ids if cid in by_id]

    def drop(self) -> None:
        """Drop the whole collection from Milvus (irreversible), then close the index."""
        with self._lock:
            self._check_open()
            self._client.drop_collection(self.name)
        self.close()

    def __enter__(self) -> MilvusIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MilvusIndex({self.uri!r}, {self.name!r}, dim={self.dim})"

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")

    def _count(self, expr: str) -> int:
        rows = self._client.query(
            self.name, filter=expr, output_fields=["count(*)"], consistency_level="Strong"
        )
        return int(rows[0]["count(*)"]) if rows else 0

    @staticmethod
    def _filter(doc_ids: Sequence[str] | None) -> str:
        return "" if doc_ids is None else _in_filter("doc_id", doc_ids)

    @staticmethod
    def _release_lite(key: str) -> None:
        with _lite_lock:
            left = _lite_refs.get(key, 1) - 1
            if left > 0:
                _lite_refs[key] = left
                return
            _lite_refs.pop(key, None)
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(key)


def _has_terms(query: str) -> bool:
    """Whether the query keeps a term after stopword removal (same analyzer as LocalIndex)."""
    return bool(tokenize(query))


def _to_hits(results: Sequence[Any], retriever: Retriever, score: Any = float) -> list[Hit]:
    pairs = [
        (Chunk.model_validate(r["entity"]["payload"]), float(score(r["distance"]))) for r in results
    ]
    pairs.sort(key=lambda p: (-p[1], p[0].chunk_id))
    return [
        Hit(chunk=c, score=s, rank=i, retriever=retriever)
        for i, (c, s) in enumerate(pairs, start=1)
    ]
