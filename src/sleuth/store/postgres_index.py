"""A PostgreSQL index: BM25 over postings tables, pgvector HNSW dense search, RRF hybrid.

One schema per sleuth collection (:func:`schema_name`), in the catalog's database::

    meta      one row: format, dim, analyzer version, number of chunks, total term count
    chunks    row_id bigserial, chunk_id text unique, doc_id text (btree), payload text (the
              whole Chunk as JSON), embedding vector(dim) (HNSW, inner product), n_terms,
              term_ids int[] (the chunk's distinct terms, so a delete finds its postings),
              impacts real[] (their BM25 tf factors: the key of their postings)
    terms     term_id serial, term text unique, df (chunks holding the term)
    postings  (term_id, impact, row_id) primary key INCLUDE (tf, dl): one row per term of a
              chunk; impact = tf / (tf + k1 · (1 − b + b · dl/avgdl)) at the time it was added

Lexical search is Okapi BM25 as in :class:`~sleuth.store.local_index.LocalIndex` (the Lucene
variant, Kamphuis et al., ECIR 2020: idf = ln(1 + (N − df + 0.5)/(df + 0.5)), term weight
idf · tf / (tf + k1 · (1 − b + b · dl/avgdl)), k1 = 1.5, b = 0.75, a repeated query term
counted again), computed in SQL from the postings of the query's terms (an index-only scan
of the primary key). For each query term only its ``postings_per_term`` postings of highest
impact are read (champion lists: Manning, Raghavan & Schütze, *Introduction to Information
Retrieval*, 2008, §7.1.3), so a search reads a bounded number of postings at any corpus
size; a term held by fewer chunks is read whole, so small collections are ranked exactly.
The best :data:`BM25_CANDIDATES` (at least ``4 k``) chunks by that partial score are then
scored exactly over every query term they hold (current N, df and avgdl), so a chunk found
through a rare term is not ranked down for missing a common term's champion list. Terms come
from the same analyzer as the local backend (:func:`sleuth.retrieval.text.analyze`: accents
folded, CJK character bigrams, emoji, English stemming), applied in Python on both sides, so
both backends find the same chunks for any script. Postgres' own ``tsvector`` was not used:
its parsers neither cut CJK into bigrams nor keep emoji, and ``ts_rank`` has no IDF.

Dense search is pgvector's HNSW index (Malkov & Yashunin, IEEE TPAMI 2018) on inner product
(vectors are L2-normalised, so inner product = cosine), ``hnsw.ef_search`` = ``max(ef_search,
k)`` (at most 1,000, pgvector's limit); with a ``doc_ids`` filter the search is exact (the
filter first, then the distances), so filters are always honoured. Hybrid search fuses the
two rankings with :func:`sleuth.store.index.rrf_fuse` (Cormack et al., SIGIR 2009), as the
local backend does.

Every change is one transaction that first takes a transaction-level advisory lock on the
index (writers of one index queue, readers never wait): a crash leaves the index as before
the change. Several processes may use one database.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np
from sqlalchemy.engine import URL, make_url

from sleuth.config import mask_url
from sleuth.errors import ConfigError, EmbeddingModelMismatch, require
from sleuth.retrieval.text import ANALYZER_VERSION, analyze
from sleuth.store.index import check_k, query_vector, rrf_fuse
from sleuth.store.local_index import BM25_B, BM25_K1
from sleuth.types import Chunk, Hit, Retriever

FORMAT_VERSION = 1
CONNECT_TIMEOUT_S = 10
MAX_EF_SEARCH = 1000
"""pgvector's largest ``hnsw.ef_search``."""
HNSW_M = 16
BM25_CANDIDATES = 100
"""Chunks a BM25 search scores exactly over all query terms (at least ``4 k``)."""
HNSW_EF_CONSTRUCTION = 64
_PURPOSE = "the PostgreSQL index"
_POSTINGS_KEY = "CONSTRAINT postings_pkey PRIMARY KEY (term_id, impact, row_id) INCLUDE (tf, dl)"
_HNSW_INDEX = (
    "CREATE INDEX chunks_embedding_idx ON {s}.chunks USING hnsw (embedding vector_ip_ops) "
    f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
)
_IDENT_MAX = 63  # Postgres truncates identifiers to 63 bytes


def schema_name(name: str) -> str:
    """The Postgres schema holding the index of collection (or internal index) ``name``.

    ``sleuth_ix_<name>`` lower-cased, other characters than letters, digits and ``_``
    replaced by ``_``; when anything was replaced, lower-cased or cut, a hash of the
    original name is appended so that distinct names never share a schema. At most 63
    bytes (Postgres' identifier limit).
    """
    clean = re.sub(r"[^0-9a-z_]", "_", name.lower())
    out = f"sleuth_ix_{clean}"
    if clean != name or len(out) > _IDENT_MAX:
        digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:10]
        out = f"{out[: _IDENT_MAX - 11]}_{digest}"
    return out


def postgres_url(url: str, name: str = "SLEUTH_DATABASE_URL") -> URL:
    """``url`` parsed, checked to be a PostgreSQL URL; ``name`` is what the user set it as
    (a variable, an option), for the error message.

    Raises:
        ConfigError: not a database URL, or not PostgreSQL.
    """
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise ConfigError(f"{name} is not a database URL: {exc}") from exc
    if parsed.get_backend_name() != "postgresql":
        raise ConfigError(
            f"{name} must be a PostgreSQL URL (postgresql+psycopg://user@host/db), "
            f"not {parsed.get_backend_name()!r}"
        )
    return parsed


def libpq_url(url: str) -> str:
    """A libpq connection URI for a SQLAlchemy URL (``postgresql+psycopg://…`` →
    ``postgresql://…``).

    Raises:
        ConfigError: not a PostgreSQL URL.
    """
    parsed = postgres_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form of a float vector: ``[0.1,-0.2,…]`` (float32 round-trips)."""
    return "[" + ",".join(f"{x:.9g}" for x in np.asarray(vector, dtype=np.float32).tolist()) + "]"


def parse_vector(text: str) -> np.ndarray:
    """A pgvector text value (``[0.1,-0.2]``) as a float32 array."""
    return np.array(text.strip("[]").split(","), dtype=np.float32)


class PostgresIndex:
    """Index of one collection in PostgreSQL with pgvector.

    Implements :class:`sleuth.store.index.Index`. Thread-safe (a small connection pool);
    safe to use from several processes.

    Args:
        url: SQLAlchemy or libpq URL of the database (``postgresql+psycopg://user@host/db``).
        collection: sleuth collection name, or an internal index name (``_memory``).
        dim: dimension of the dense vectors.
        ef_search: HNSW search beam width (raised to ``k`` per search, at most 1,000).
        pool_size: most connections this instance holds open.
        postings_per_term: BM25 reads at most this many postings of each query term, those
            of highest impact (champion lists): exact for every term held by fewer chunks,
            and a search costs at most ``terms × postings_per_term`` postings at any size.

    Raises:
        MissingExtraError: psycopg / psycopg-pool are not installed (``sleuth[postgres]``).
        ConfigError: the database cannot be reached, has no ``vector`` extension and the
            user may not create it, or the schema exists but was not made by sleuth.
        EmbeddingModelMismatch: the index holds vectors of another dimension.
    """

    def __init__(
        self,
        url: str,
        collection: str,
        dim: int,
        ef_search: int = 256,
        pool_size: int = 8,
        postings_per_term: int = 5000,
    ) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if ef_search < 1:
            raise ValueError(f"ef_search must be >= 1, got {ef_search}")
        psycopg: Any = require("psycopg", "postgres", _PURPOSE)
        pool_mod: Any = require("psycopg_pool", "postgres", _PURPOSE)
        self.collection = collection
        self.schema = schema_name(collection)
        self.dim = int(dim)
        self.ef_search = int(ef_search)
        self.postings_per_term = int(postings_per_term)
        self._lock_key = int.from_bytes(hashlib.sha1(self.schema.encode()).digest()[:8], "big") - (
            1 << 63
        )
        self._closed = False
        self._state_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        conninfo = libpq_url(url)
        try:  # one plain connection first: its error names the cause at once
            psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S).close()
        except Exception as exc:
            raise ConfigError(
                f"cannot open {_PURPOSE} at {mask_url(url)}: {_one_line(exc)}"
            ) from exc
        try:
            self._pool: Any = pool_mod.ConnectionPool(
                conninfo,
                min_size=1,
                max_size=pool_size,
                open=True,
                timeout=30,
                # autocommit: reads take no transaction; writes open one
                kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
            )
            self._pool.wait(timeout=30)
        except Exception as exc:
            raise ConfigError(
                f"cannot open {_PURPOSE} at {mask_url(url)}: {_one_line(exc)}"
            ) from exc
        try:
            self._open_schema()
        except BaseException:
            self._pool.close()
            raise

    # ------------------------------------------------------------------ setup

    def _q(self, sql: str) -> Any:
        """``sql`` with ``{s}`` replaced by this index's (quoted) schema."""
        from psycopg import sql as pgsql

        return pgsql.SQL(sql).format(s=pgsql.Identifier(self.schema))

    def _open_schema(self) -> None:
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except Exception as exc:
                raise ConfigError(
                    f"{_PURPOSE} needs the pgvector extension ('CREATE EXTENSION vector' "
                    f"failed: {_one_line(exc)}); install pgvector on the server or ask its "
                    "owner to create the extension"
                ) from exc
            row = conn.execute(
                "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                (self.schema,),
            ).fetchone()
            if row is None:
                self._create_schema(conn)
                return
            try:
                meta = conn.execute(
                    self._q("SELECT format, dim, analyzer FROM {s}.meta")
                ).fetchone()
            except Exception as exc:
                raise ConfigError(
                    f"schema {self.schema!r} exists but was not made by sleuth ({exc})"
                ) from exc
            if meta is None or meta[0] != FORMAT_VERSION:
                raise ConfigError(
                    f"schema {self.schema!r} holds an index of an unknown format "
                    f"({None if meta is None else meta[0]}); this sleuth reads {FORMAT_VERSION}"
                )
            if meta[1] != self.dim:
                raise EmbeddingModelMismatch(
                    f"the PostgreSQL index {self.schema!r} holds {meta[1]}-d vectors but the "
                    f"embedding model gives {self.dim}-d; use the model the collection was "
                    "built with, or rebuild it"
                )
            if meta[2] != ANALYZER_VERSION:
                self._recount_terms(conn)
            self._repair_indexes(conn)

    def _repair_indexes(self, conn: Any) -> None:
        """Build the HNSW index and the postings key when missing (a bulk load of
        :meth:`deferred_indexes` killed before it rebuilt them): search stays correct
        without them, but scans everything."""
        have = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (self.schema,)
            )
        }
        if "postings_pkey" not in have:
            conn.execute(self._q("ALTER TABLE {s}.postings ADD " + _POSTINGS_KEY))
        if "chunks_embedding_idx" not in have:
            conn.execute(self._q(_HNSW_INDEX))

    def _create_schema(self, conn: Any) -> None:
        for statement in (
            "CREATE SCHEMA {s}",
            "CREATE TABLE {s}.meta (one boolean PRIMARY KEY DEFAULT true CHECK (one), "
            "format int NOT NULL, dim int NOT NULL, analyzer int NOT NULL, "
            "n bigint NOT NULL DEFAULT 0, total_len bigint NOT NULL DEFAULT 0)",
            f"CREATE TABLE {{s}}.chunks (row_id bigserial PRIMARY KEY, "
            f"chunk_id text NOT NULL UNIQUE, doc_id text NOT NULL, payload text NOT NULL, "
            f"embedding vector({self.dim}) NOT NULL, n_terms int NOT NULL, "
            f"term_ids int[] NOT NULL, impacts real[] NOT NULL)",
            "CREATE INDEX ON {s}.chunks (doc_id)",
            _HNSW_INDEX,
            "CREATE TABLE {s}.terms (term_id serial PRIMARY KEY, term text NOT NULL UNIQUE, "
            "df int NOT NULL)",
            "CREATE TABLE {s}.postings (term_id int NOT NULL, impact real NOT NULL, "
            "row_id bigint NOT NULL, tf real NOT NULL, dl real NOT NULL, " + _POSTINGS_KEY + ")",
        ):
            conn.execute(self._q(statement))
        conn.execute(
            self._q("INSERT INTO {s}.meta (format, dim, analyzer) VALUES (%s, %s, %s)"),
            (FORMAT_VERSION, self.dim, ANALYZER_VERSION),
        )

    def _recount_terms(self, conn: Any) -> None:
        """Rebuild the postings from the stored chunk texts (an index made by another
        analyzer version); nothing is re-embedded."""
        conn.execute(self._q("TRUNCATE {s}.postings, {s}.terms"))
        conn.execute(
            self._q("UPDATE {s}.meta SET total_len = 0, analyzer = %s"), (ANALYZER_VERSION,)
        )
        rows = conn.execute(self._q("SELECT row_id, payload FROM {s}.chunks")).fetchall()
        counts = [Counter(analyze(Chunk.model_validate_json(p).index_text())) for _, p in rows]
        row_ids = [r for r, _ in rows]
        written = self._write_terms(conn, row_ids, counts)
        with conn.cursor() as cur:
            cur.executemany(
                self._q(
                    "UPDATE {s}.chunks SET term_ids = %s, impacts = %s, n_terms = %s "
                    "WHERE row_id = %s"
                ),
                [
                    (ids, impacts, sum(tf.values()), row)
                    for row, (ids, impacts), tf in zip(row_ids, written, counts, strict=True)
                ],
            )

    # ------------------------------------------------------------------ Index protocol

    def add(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Insert chunks with their vectors; a chunk whose ``chunk_id`` exists replaces it.

        One transaction (all or nothing). Nothing is re-embedded.

        Args:
            chunks: the chunks; a repeated ``chunk_id`` in one call keeps the last one.
            vectors: float array of shape ``(len(chunks), dim)``, rows L2-normalised.

        Raises:
            ValueError: the shape of ``vectors`` does not match.
        """
        vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape != (len(chunks), self.dim):
            raise ValueError(
                f"vectors must have shape ({len(chunks)}, {self.dim}), got {vecs.shape}"
            )
        last = {c.chunk_id: i for i, c in enumerate(chunks)}
        keep = sorted(last.values())
        if not keep:
            self._check_open()
            return
        batch = [chunks[i] for i in keep]
        counts = [Counter(analyze(c.index_text())) for c in batch]
        with self._write() as conn:
            self._delete_rows(conn, "chunk_id = ANY(%s)", [c.chunk_id for c in batch])
            row_ids = [
                r[0]
                for r in conn.execute(
                    self._q(
                        "SELECT nextval(pg_get_serial_sequence(%s, 'row_id')) "
                        "FROM generate_series(1, %s)"
                    ),
                    (f'"{self.schema}".chunks', len(batch)),
                ).fetchall()
            ]
            written = self._write_terms(conn, row_ids, counts)
            with conn.cursor().copy(
                self._q(
                    "COPY {s}.chunks (row_id, chunk_id, doc_id, payload, embedding, n_terms, "
                    "term_ids, impacts) FROM STDIN"
                )
            ) as copy:
                for row_id, chunk, vec, tf, (ids, impacts) in zip(
                    row_ids, batch, vecs[keep], counts, written, strict=True
                ):
                    copy.write_row(
                        (
                            row_id,
                            chunk.chunk_id,
                            chunk.doc_id,
                            chunk.model_dump_json(),
                            vector_literal(vec),
                            sum(tf.values()),
                            ids,
                            impacts,
                        )
                    )
            conn.execute(
                self._q("UPDATE {s}.meta SET n = n + %s"),
                (len(batch),),
            )

    def delete_document(self, doc_id: str) -> int:
        """Remove every chunk of ``doc_id``; return how many were removed (0 if unknown)."""
        with self._write() as conn:
            return self._delete_rows(conn, "doc_id = %s", doc_id)

    def count(self) -> int:
        """Number of chunks held."""
        with self._read() as conn:
            return int(conn.execute(self._q("SELECT n FROM {s}.meta")).fetchone()[0])

    def search_bm25(self, query: str, k: int, doc_ids: Sequence[str] | None = None) -> list[Hit]:
        """Top-k chunks by BM25 over ``Chunk.index_text()`` (see the module docstring).

        Args:
            query: free text, analysed by :func:`sleuth.retrieval.text.analyze`.
            k: number of hits wanted (>= 1).
            doc_ids: if given, only chunks of these documents are ranked (filter first).

        Returns:
            Up to ``k`` hits with a positive score, best first, equal scores by
            ``chunk_id``; ``[]`` when the query has no indexed term.

        Raises:
            ValueError: ``k`` < 1.
        """
        check_k(k)
        with self._read() as conn:
            return _hits(self._bm25(conn, query, k, doc_ids), "bm25")

    def search_dense(
        self, vector: np.ndarray, k: int, doc_ids: Sequence[str] | None = None
    ) -> list[Hit]:
        """Top-k chunks by cosine similarity (inner product of normalised vectors).

        HNSW without a filter, exact with ``doc_ids``.

        Args:
            vector: float array of shape ``(dim,)`` (or ``(1, dim)``), L2-normalised.
            k: number of hits wanted (>= 1).
            doc_ids: if given, only chunks of these documents are ranked.

        Raises:
            ValueError: ``k`` < 1 or the vector has the wrong shape.
        """
        check_k(k)
        q = query_vector(vector, self.dim)
        with self._read() as conn:
            return _hits(self._dense(conn, q, k, doc_ids), "dense")

    def search_hybrid(
        self,
        query: str,
        vector: np.ndarray,
        k: int,
        doc_ids: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Top-k chunks by RRF fusion of the BM25 and dense rankings (each contributes its
        top ``max(50, 4k)``), as :meth:`LocalIndex.search_hybrid`; the two legs run
        concurrently on two connections.

        Raises:
            ValueError: ``k`` < 1 or the vector has the wrong shape.
        """
        check_k(k)
        q = query_vector(vector, self.dim)
        n_cand = max(50, 4 * k)

        def dense_leg() -> list[Hit]:
            with self._read() as conn:
                return _hits(self._dense(conn, q, n_cand, doc_ids), "dense")

        # the two legs run at once, each on its own connection (so in two server processes)
        dense = self._legs().submit(dense_leg)
        with self._read() as conn:
            bm25 = _hits(self._bm25(conn, query, n_cand, doc_ids), "bm25")
        return rrf_fuse([bm25, dense.result()], k)

    def _legs(self) -> ThreadPoolExecutor:
        with self._state_lock:
            self._check_open()
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pg-leg")
            return self._executor

    def close(self) -> None:
        """Close the connection pool; later calls raise ``RuntimeError``."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        self._pool.close()

    # ------------------------------------------------------------------ extras

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids, in the order asked; unknown ids are skipped."""
        if not chunk_ids:
            self._check_open()
            return []
        with self._read() as conn:
            rows = conn.execute(
                self._q("SELECT chunk_id, payload FROM {s}.chunks WHERE chunk_id = ANY(%s)"),
                (list(chunk_ids),),
            ).fetchall()
        by_id = {cid: Chunk.model_validate_json(p) for cid, p in rows}
        return [by_id[cid] for cid in chunk_ids if cid in by_id]

    def chunk_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of these chunks (shape ``(dim,)``); unknown ids left out."""
        if not chunk_ids:
            self._check_open()
            return {}
        with self._read() as conn:
            rows = conn.execute(
                self._q(
                    "SELECT chunk_id, embedding::text FROM {s}.chunks WHERE chunk_id = ANY(%s)"
                ),
                (list(chunk_ids),),
            ).fetchall()
        return {cid: parse_vector(v) for cid, v in rows}

    def chunk_ids(self) -> set[str]:
        """Every ``chunk_id`` held (for resumable copies: what is already here)."""
        with self._read() as conn:
            return {r[0] for r in conn.execute(self._q("SELECT chunk_id FROM {s}.chunks"))}

    @contextmanager
    def deferred_indexes(self, work_mem: str = "2GB") -> Iterator[None]:
        """Bulk loading: the HNSW graph and the postings' primary key are dropped on entry
        and built once on exit (pgvector's advice for large loads: a graph built over all
        rows at once is faster than one grown row by row).

        Meant for a load into a new or quiet index (``sleuth migrate``, benchmarks): while
        inside, dense search scans exactly, BM25 scans the postings, and replacing an
        existing chunk is slow. The indexes are rebuilt on exit even after an error.

        Args:
            work_mem: ``maintenance_work_mem`` for the builds (the HNSW build is fast only
                while its graph fits: about ``(4 · dim + 200)`` bytes per chunk).
        """
        with self._write() as conn:
            conn.execute(self._q("DROP INDEX IF EXISTS {s}.chunks_embedding_idx"))
            conn.execute(self._q("ALTER TABLE {s}.postings DROP CONSTRAINT postings_pkey"))
        try:
            yield
        finally:
            with self._write() as conn:
                conn.execute(f"SET LOCAL maintenance_work_mem = '{work_mem}'")
                conn.execute("SET LOCAL max_parallel_maintenance_workers = 1")
                conn.execute(self._q("ALTER TABLE {s}.postings ADD " + _POSTINGS_KEY))
                conn.execute(self._q(_HNSW_INDEX))
            with self._read() as conn:
                conn.execute(self._q("VACUUM ANALYZE {s}.postings"))
                conn.execute(self._q("VACUUM ANALYZE {s}.chunks"))

    def drop(self) -> None:
        """Drop the whole index (its schema, irreversibly), then close it."""
        with self._write() as conn:
            conn.execute(self._q("DROP SCHEMA {s} CASCADE"))
        self.close()

    def __enter__(self) -> PostgresIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresIndex({self.schema!r}, dim={self.dim})"

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")

    @contextmanager
    def _read(self) -> Iterator[Any]:
        self._check_open()
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Any]:
        self._check_open()
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            yield conn

    def _write_terms(
        self, conn: Any, row_ids: Sequence[int], counts: Sequence[Counter[str]]
    ) -> list[tuple[list[int], list[float]]]:
        """Add the postings of new rows (their terms' ``df`` and the total length too);
        return each row's term ids and impacts (the BM25 term-frequency factor at the
        average length after this add: the order of a term's postings, see :meth:`_bm25`)."""
        df: Counter[str] = Counter()
        for tf in counts:
            df.update(tf.keys())
        ids: dict[str, int] = {}
        if df:
            terms = sorted(df)
            for term_id, term in conn.execute(
                self._q(
                    "INSERT INTO {s}.terms AS t (term, df) SELECT * FROM unnest(%s::text[], "
                    "%s::int[]) ON CONFLICT (term) DO UPDATE SET df = t.df + excluded.df "
                    "RETURNING term_id, term"
                ),
                (terms, [df[t] for t in terms]),
            ).fetchall():
                ids[term] = term_id
        lengths = [sum(tf.values()) for tf in counts]
        n, total = conn.execute(self._q("SELECT n, total_len FROM {s}.meta")).fetchone()
        avgdl = max((total + sum(lengths)) / max(n + len(counts), 1), 1e-9)
        out: list[tuple[list[int], list[float]]] = []
        with conn.cursor().copy(
            self._q("COPY {s}.postings (term_id, impact, row_id, tf, dl) FROM STDIN")
        ) as copy:
            for row_id, tf, dl in zip(row_ids, counts, lengths, strict=True):
                norm = BM25_K1 * (1 - BM25_B + BM25_B * dl / avgdl)
                term_ids, impacts = [], []
                for term, count in tf.items():
                    impact = float(np.float32(count / (count + norm)))  # as Postgres' real
                    term_ids.append(ids[term])
                    impacts.append(impact)
                    copy.write_row((ids[term], impact, row_id, count, dl))
                out.append((term_ids, impacts))
        conn.execute(self._q("UPDATE {s}.meta SET total_len = total_len + %s"), (sum(lengths),))
        return out

    def _delete_rows(self, conn: Any, where: str, value: Any) -> int:
        """Delete the chunks matching ``where`` with their postings; return how many."""
        gone = conn.execute(
            self._q(
                f"DELETE FROM {{s}}.chunks WHERE {where} "
                "RETURNING row_id, n_terms, term_ids, impacts"
            ),
            (value,),
        ).fetchall()
        if not gone:
            return 0
        keys: tuple[list[int], list[float], list[int]] = ([], [], [])
        for row_id, _, term_ids, impacts in gone:
            keys[0].extend(term_ids)
            keys[1].extend(impacts)
            keys[2].extend([row_id] * len(term_ids))
        conn.execute(
            self._q(
                "DELETE FROM {s}.postings p USING unnest(%s::int[], %s::real[], %s::bigint[]) "
                "AS g(term_id, impact, row_id) WHERE p.term_id = g.term_id "
                "AND p.impact = g.impact AND p.row_id = g.row_id"
            ),
            keys,
        )
        df = Counter(keys[0])
        conn.execute(
            self._q(
                "UPDATE {s}.terms t SET df = t.df - x.c FROM unnest(%s::int[], %s::int[]) "
                "AS x(term_id, c) WHERE t.term_id = x.term_id"
            ),
            (list(df), list(df.values())),
        )
        conn.execute(
            self._q("UPDATE {s}.meta SET n = n - %s, total_len = total_len - %s"),
            (len(gone), sum(r[1] for r in gone)),
        )
        return len(gone)

    def _bm25(
        self, conn: Any, query: str, k: int, doc_ids: Sequence[str] | None
    ) -> list[tuple[str, str, float]]:
        qtf = Counter(analyze(query))
        if not qtf or (doc_ids is not None and not doc_ids):
            return []
        n, total = conn.execute(self._q("SELECT n, total_len FROM {s}.meta")).fetchone()
        found = conn.execute(
            self._q("SELECT term_id, term, df FROM {s}.terms WHERE term = ANY(%s) AND df > 0"),
            (sorted(qtf),),
        ).fetchall()
        if not found or not n:
            return []
        # The query's term weights are computed here, so the planner sees a short list of
        # term ids. Phase 1 reads each term's champion postings (highest impact first: a
        # backward index-only scan of the primary key, at most postings_per_term rows) and
        # keeps the best `candidates` chunks by that partial score; phase 2 scores those
        # exactly over every query term they hold (primary-key lookups of their postings).
        avgdl = max(total / n, 1e-9)
        where = ""
        params: dict[str, Any] = {
            "terms": [t for t, _, _ in found],
            "weights": [qtf[t] * math.log(1 + (n - df + 0.5) / (df + 0.5)) for _, t, df in found],
            "k1": BM25_K1,
            "c1": 1 - BM25_B,
            "c2": BM25_B / avgdl,
            "cap": self.postings_per_term,
            "candidates": max(BM25_CANDIDATES, 4 * k),
            "k": k,
        }
        if doc_ids is not None:
            where = "AND q.row_id IN (SELECT row_id FROM {s}.chunks WHERE doc_id = ANY(%(docs)s))"
            params["docs"] = sorted(set(doc_ids))
        weight = "w.w * p.tf / (p.tf + %(k1)s * (%(c1)s + %(c2)s * p.dl))"
        sql = (
            "WITH w AS (SELECT * FROM unnest(%(terms)s::int[], %(weights)s::float8[]) "
            "AS w(term_id, w)), "
            f"partial AS (SELECT p.row_id, sum({weight}) AS score FROM w "
            "CROSS JOIN LATERAL (SELECT q.row_id, q.tf, q.dl FROM {s}.postings q "
            f"WHERE q.term_id = w.term_id {where} ORDER BY q.impact DESC LIMIT %(cap)s) p "
            "GROUP BY p.row_id ORDER BY score DESC, p.row_id LIMIT %(candidates)s), "
            "keys AS (SELECT c.row_id, u.term_id, u.impact FROM partial "
            "JOIN {s}.chunks c ON c.row_id = partial.row_id "
            "CROSS JOIN LATERAL unnest(c.term_ids, c.impacts) AS u(term_id, impact) "
            "WHERE u.term_id = ANY(%(terms)s)), "
            # LIMIT 1 keeps the lateral a subquery: one primary-key lookup per key
            f"exact AS (SELECT keys.row_id, sum({weight}) AS score FROM keys "
            "CROSS JOIN LATERAL (SELECT q.tf, q.dl FROM {s}.postings q "
            "WHERE q.term_id = keys.term_id AND q.impact = keys.impact "
            "AND q.row_id = keys.row_id LIMIT 1) p JOIN w ON w.term_id = keys.term_id "
            "GROUP BY keys.row_id ORDER BY score DESC, keys.row_id LIMIT %(k)s) "
            "SELECT c.chunk_id, c.payload, e.score FROM exact e JOIN {s}.chunks c "
            "ON c.row_id = e.row_id"
        )
        rows = conn.execute(self._q(sql), params).fetchall()
        return [(cid, payload, float(score)) for cid, payload, score in rows if score > 0]

    def _dense(
        self, conn: Any, q: np.ndarray, k: int, doc_ids: Sequence[str] | None
    ) -> list[tuple[str, str, float]]:
        literal = vector_literal(q)
        if doc_ids is not None:
            if not doc_ids:
                return []
            # "+ 0": an expression the HNSW index cannot serve, so the filter comes first
            return [
                (cid, payload, float(score))
                for cid, payload, score in conn.execute(
                    self._q(
                        "SELECT chunk_id, payload, -(embedding <#> %s::vector) FROM {s}.chunks "
                        "WHERE doc_id = ANY(%s) ORDER BY (embedding <#> %s::vector) + 0 LIMIT %s"
                    ),
                    (literal, sorted(set(doc_ids)), literal, k),
                ).fetchall()
            ]
        with conn.transaction():
            conn.execute(f"SET LOCAL hnsw.ef_search = {min(max(self.ef_search, k), MAX_EF_SEARCH)}")
            rows = conn.execute(
                self._q(
                    "SELECT chunk_id, payload, -(embedding <#> %s::vector) FROM {s}.chunks "
                    "ORDER BY embedding <#> %s::vector LIMIT %s"
                ),
                (literal, literal, k),
            ).fetchall()
        return [(cid, payload, float(score)) for cid, payload, score in rows]


def _hits(rows: Sequence[tuple[str, str, float]], retriever: Retriever) -> list[Hit]:
    ordered = sorted(rows, key=lambda r: (-r[2], r[0]))
    return [
        Hit(chunk=Chunk.model_validate_json(payload), score=score, rank=i, retriever=retriever)
        for i, (_, payload, score) in enumerate(ordered, start=1)
    ]


def _one_line(exc: BaseException) -> str:
    """A server error (with its DETAIL / HINT lines) on one line."""
    return " ".join(str(exc).split())
