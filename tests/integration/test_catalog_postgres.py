"""The catalog, the index, one ingest and one agent run on a real, throwaway PostgreSQL.

A PostgreSQL 16 server with pgvector is started from the ``pgserver`` wheel for this module
(its data and socket in a temporary folder) and stopped at the end; every test gets a
database of its own. Skipped with the reason only when pgserver or psycopg is missing (the
``dev`` and ``postgres`` extras install them).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sleuth.agents.state import RunStatus
from sleuth.config import Settings
from sleuth.errors import ConfigError, EmbeddingModelMismatch
from sleuth.ingest.pipeline import IngestPipeline
from sleuth.retrieval.embeddings import HashingEmbedder
from sleuth.retrieval.search import KnowledgeBase
from sleuth.service import AgentService
from sleuth.store.catalog import Catalog, DocumentInfo
from sleuth.types import Chunk, Reference
from tests.helpers import (
    STATUTE_SECTIONS,
    check_jobs_claimed_once_by_processes,
    check_runs_round_trip,
    check_users_and_owners,
    make_chunks,
    make_document,
)
from tests.postgres import HAVE_POSTGRES, NO_POSTGRES, new_database, postgres_server
from tests.unit.test_catalog_threads import check_thread_retention, check_threads

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not HAVE_POSTGRES, reason=NO_POSTGRES)]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with postgres_server(tmp_path_factory.mktemp("pg")) as url:
        yield url


@pytest.fixture
def pg_url(server_url: str) -> str:
    """The URL of a new, empty database on the module's server."""
    return new_database(server_url)


@pytest.fixture
def catalog(pg_url: str) -> Iterator[Catalog]:
    cat = Catalog(pg_url)
    yield cat
    cat.close()


def _save(catalog: Catalog, doc_id: str, chunks: list[Chunk], h: str = "h1") -> None:
    info = DocumentInfo(doc_id=doc_id, path=f"/data/{doc_id}.txt", content_hash=h)
    catalog.save_document("c", info, chunks)


def test_catalog_on_postgresql(catalog: Catalog) -> None:
    assert catalog.engine.dialect.name == "postgresql"

    # collections: create, check, mismatches
    info = catalog.ensure_collection("c", "model-a", 384, "local")
    assert (info.name, info.embedding_model, info.dim, info.backend) == (
        "c",
        "model-a",
        384,
        "local",
    )
    assert info.created_at.tzinfo is not None
    assert catalog.ensure_collection("c", "model-a", 384, "local").created_at == info.created_at
    assert catalog.get_collection("missing") is None
    with pytest.raises(EmbeddingModelMismatch) as err:
        catalog.ensure_collection("c", "model-b", 768, "local")
    for part in ("'c'", "model-a", "model-b", "384", "768"):
        assert part in str(err.value)
    with pytest.raises(ConfigError, match="milvus"):
        catalog.ensure_collection("c", "model-a", 384, "milvus")

    # documents, chunks (JSON title_path and metadata), references
    refs = {"S1": [("section S3", "S3"), ("section 9 of another act", None)]}
    chunks = make_chunks("d1", [("S1", 2), ("S2", 1), ("S3", 2)], refs=refs)
    _save(catalog, "d1", list(reversed(chunks)))
    _save(catalog, "d2", make_chunks("d2", [("T1", 1)], refs={"T1": [("S3", "S3")]}), h="h2")

    doc = catalog.get_document("c", "d1")
    assert doc is not None
    assert (doc.status, doc.n_chunks, doc.content_hash) == ("indexed", 5, "h1")
    assert doc.updated_at is not None and doc.updated_at.tzinfo is not None
    assert [d.doc_id for d in catalog.list_documents("c")] == ["d1", "d2"]
    assert catalog.find_by_hash("c", "h2").doc_id == "d2"  # type: ignore[union-attr]
    (listed,) = catalog.list_collections()
    assert (listed.n_documents, listed.n_chunks) == (2, 6)

    parts = catalog.chunks_for_source("c", "S1")
    assert parts == chunks[:2]
    assert parts[1].metadata == {"page": 2, "nested": {"ok": True}}
    assert parts[0].title_path == ["d1", "Title S1"]
    assert parts[0].references == [
        Reference(source_id="S1", target_text="section S3", target_id="S3"),
        Reference(source_id="S1", target_text="section 9 of another act", target_id=None),
    ]
    assert [c.chunk_id for c in catalog.get_chunks("c", ["S3#1", "nope", "S1#0"])] == [
        "S3#1",
        "S1#0",
    ]
    assert catalog.doc_id_for_source("c", "T1") == "d2"

    assert catalog.neighbours("c", "S1") == (None, "S2")
    assert catalog.neighbours("c", "S2") == ("S1", "S3")
    assert catalog.neighbours("c", "S3") == ("S2", None)
    assert catalog.neighbours("c", "T1") == (None, None)
    assert catalog.neighbours("c", "nope") == (None, None)
    outline = catalog.outline("c", "d1")
    assert [(e.source_id, e.position) for e in outline] == [("S1", 0), ("S2", 2), ("S3", 3)]
    assert outline[2].title_path == ["d1", "Title S3"]
    assert catalog.outline("c", "nope") == []

    # both parts of S1 hold the references: stored per part, listed once
    assert catalog.references_from("c", "S1") == parts[0].references
    assert [r.source_id for r in catalog.references_to("c", "S3")] == ["S1", "T1"]
    assert catalog.references_to("c", "S1") == []
    assert catalog.unresolved_references("c") == [
        Reference(source_id="S1", target_text="section 9 of another act")
    ]
    resolved = Reference(source_id="S1", target_text="section 9 of another act", target_id="S2")
    assert catalog.update_references("c", [resolved]) == 2
    assert catalog.unresolved_references("c") == []
    assert [r.source_id for r in catalog.references_to("c", "S2")] == ["S1"]

    # replace, then delete a document: its chunks and references go with it
    _save(catalog, "d1", make_chunks("d1", [("S9", 1)]), h="h3")
    assert catalog.chunks_for_source("c", "S1") == []
    assert catalog.references_to("c", "S3") == [
        Reference(source_id="T1", target_text="S3", target_id="S3")
    ]
    assert catalog.delete_document("c", "d1") is True
    assert catalog.delete_document("c", "d1") is False
    assert catalog.get_document("c", "d1") is None
    assert catalog.chunks_for_source("c", "S9") == []
    assert catalog.get_collection("c").n_chunks == 1  # type: ignore[union-attr]

    catalog.record_failure("c", "d3", "/data/d3.pdf", "corrupt PDF")
    failed = catalog.get_collection("c")
    assert failed is not None
    assert (failed.n_documents, failed.n_failed) == (1, 1)
    assert catalog.delete_collection("c") is True
    assert catalog.list_collections() == []
    assert catalog.list_documents("c") == []


def test_runs_round_trip_on_postgresql(catalog: Catalog) -> None:
    run = check_runs_round_trip(catalog)
    t3 = catalog.get_run("t3")
    assert t3 is not None and t3["created_at"].tzinfo is not None
    assert abs((datetime.now(UTC) - t3["created_at"]).total_seconds()) < 300
    assert [r["task_id"] for r in catalog.list_runs()] == ["t3", "t2", "t1"]  # newest first

    # a second Catalog on the same URL sees the same data (tables already there)
    other = Catalog(catalog.url)
    try:
        assert other.get_run("t1") == run
    finally:
        other.close()


def test_users_and_collection_owners_on_postgresql(catalog: Catalog) -> None:
    check_users_and_owners(catalog)


def test_conversation_threads_on_postgresql(catalog: Catalog) -> None:
    check_threads(catalog)


def test_thread_retention_on_postgresql(catalog: Catalog) -> None:
    """Retention (window functions, batches), deleting a collection's threads, and a second
    Catalog on the same database seeing the threads."""
    check_thread_retention(catalog)

    catalog.ensure_collection("c", "model-a", 384, "local")
    gone = catalog.create_thread("c", "u_a").thread_id
    kept = catalog.create_thread("other", None).thread_id
    for thread_id in (gone, kept):
        catalog.add_turn(thread_id, question="q", answer="a", citations=["S1"], status="completed")
    assert catalog.delete_collection("c") is True
    assert catalog.get_thread(gone) is None
    assert catalog.thread_turns(gone) == []
    other = Catalog(catalog.url)
    try:
        assert [t.thread_id for t in other.list_threads()] == [kept]
        assert other.thread_turns(kept) == catalog.thread_turns(kept)
        assert other.get_thread(kept).turn_count == 1  # type: ignore[union-attr]
    finally:
        other.close()


@pytest.mark.parametrize("backend", ["local", "postgres"])
def test_ingest_and_agent_run_with_the_catalog_on_postgresql(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """The catalog on PostgreSQL, the index local or in the same database."""
    monkeypatch.setenv("SLEUTH_DATABASE_URL", pg_url)
    assert Settings(data_dir=tmp_path, _env_file=None).catalog_url == pg_url

    embedder = HashingEmbedder()
    settings = Settings(
        data_dir=tmp_path,
        database_url=pg_url,
        index_backend=backend,
        embedding_model=embedder.name,
        _env_file=None,
    )
    catalog = Catalog(settings.catalog_url)
    kb = KnowledgeBase(settings, catalog, embedder=embedder)
    pipeline = IngestPipeline(
        settings, catalog, index_opener=lambda _s, c, _d: kb.index(c), embedder=embedder
    )
    try:
        report = pipeline.ingest_documents([make_document(STATUTE_SECTIONS)], "test")
        assert report.totals["added"] == 1
        assert not (tmp_path / "catalog.sqlite3").exists()  # the catalog is not on SQLite
        # the postgres backend writes nothing under data_dir/indexes
        assert (tmp_path / "indexes" / "test").exists() == (backend == "local")

        info = catalog.get_collection("test")
        assert info is not None
        assert (info.embedding_model, info.dim, info.n_documents, info.backend) == (
            embedder.name,
            64,
            1,
            backend,
        )
        assert kb.index("test").count() == info.n_chunks
        assert info.n_chunks >= len(STATUTE_SECTIONS)
        assert [r.target_id for r in catalog.references_from("test", "BNS_S103")] == ["BNS_S101"]

        service = AgentService(settings, kb)
        response = service.execute_agentic_search("What is the punishment for murder?", "test")
        assert response.status == RunStatus.COMPLETED
        assert "store_error" not in response.trace
        assert response.answer.citations[0].source_id == "BNS_S103"
    finally:
        pipeline.close()
        kb.close()
        catalog.close()

    fresh = Catalog(pg_url)
    try:
        stored = fresh.get_run(response.task_id)
        assert stored is not None
        assert stored["status"] == "completed"
        assert stored["question"] == "What is the punishment for murder?"
        assert stored["answer"]["citations"][0]["source_id"] == "BNS_S103"
        assert stored["steps"] and stored["trace"]["retrieved_source_ids"]
        assert stored["created_at"].tzinfo is not None
        assert [r["task_id"] for r in fresh.list_runs(collection="test")] == [response.task_id]
    finally:
        fresh.close()


def test_processes_racing_for_jobs_on_postgresql_claim_each_once(pg_url: str) -> None:
    # several API processes on one PostgreSQL catalog: one worker takes over each job
    check_jobs_claimed_once_by_processes(pg_url, n_procs=3)


def _local_collection(data_dir: Path) -> tuple[Settings, list[str]]:
    """A local collection 'law' of two documents (SQLite catalog, local index); returns its
    settings and the chunk ids BM25 ranks for a question."""
    embedder = HashingEmbedder()
    settings = Settings(
        data_dir=data_dir, index_backend="local", embedding_model=embedder.name, _env_file=None
    )
    catalog = Catalog(settings.catalog_url)
    kb = KnowledgeBase(settings, catalog, embedder=embedder)
    pipeline = IngestPipeline(
        settings, catalog, index_opener=lambda _s, c, _d: kb.index(c), embedder=embedder
    )
    try:
        text = (
            "Any police officer may without an order from a Magistrate and without a warrant "
            "arrest any person who commits a cognizable offence. See section 303."
        )
        other = {"BNSS_S35": ("When police may arrest without warrant.", text)}
        report = pipeline.ingest_documents(
            [make_document(STATUTE_SECTIONS), make_document(other, doc_id="BNSS", title="Code")],
            "law",
        )
        assert report.totals["added"] == 2
        ranked = [h.chunk.chunk_id for h in kb.search("law", "murder punished", 10, mode="bm25")]
    finally:
        pipeline.close()
        kb.close()
        catalog.close()
    return settings, ranked


def test_migrate_a_local_collection_into_postgresql_resumes_and_searches_the_same(
    pg_url: str, tmp_path: Path
) -> None:
    """`sleuth migrate` copies catalog records, chunks (with references) and stored vectors;
    a migration stopped after one document resumes; the migrated collection answers on the
    postgres backend as it did locally; the source is untouched."""
    from sleuth.store.migrate import migrate_collection

    settings, local_ranked = _local_collection(tmp_path / "data")

    def stop_after_first(done: int, total: int) -> None:
        if done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        migrate_collection(settings, "law", pg_url, progress=stop_after_first)

    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env.update(
        SLEUTH_DATA_DIR=str(settings.data_dir), SLEUTH_EMBEDDING_MODEL=settings.embedding_model
    )
    done = subprocess.run(
        [str(Path(sys.executable).with_name("sleuth")), "migrate", "-c", "law", "--to", pg_url],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "law: 1 documents" in done.stdout and "1 already there" in done.stdout, done.stdout

    embedder = HashingEmbedder()
    pg_settings = Settings(
        data_dir=tmp_path / "elsewhere",
        database_url=pg_url,
        index_backend="postgres",
        embedding_model=embedder.name,
        _env_file=None,
    )
    catalog = Catalog(pg_url)
    kb = KnowledgeBase(pg_settings, catalog, embedder=embedder)
    try:
        info = catalog.get_collection("law")
        assert info is not None and (info.backend, info.n_documents) == ("postgres", 2)
        assert kb.index("law").count() == info.n_chunks
        got = [h.chunk.chunk_id for h in kb.search("law", "murder punished", 10, mode="bm25")]
        assert got == local_ranked
        assert [r.target_id for r in catalog.references_from("law", "BNS_S103")] == ["BNS_S101"]
        source = Catalog(settings.catalog_url)
        try:
            for sid in (*STATUTE_SECTIONS, "BNSS_S35"):  # chunks and references as they were
                assert catalog.chunks_for_source("law", sid) == source.chunks_for_source("law", sid)
                assert catalog.references_from("law", sid) == source.references_from("law", sid)
        finally:
            source.close()
        response = AgentService(pg_settings, kb).execute_agentic_search(
            "What is the punishment for murder?", "law"
        )
        assert response.status == RunStatus.COMPLETED
        assert response.answer.citations[0].source_id == "BNS_S103"
    finally:
        kb.close()
        catalog.close()
    source = Catalog(settings.catalog_url)  # the source is as it was
    try:
        assert source.get_collection("law").backend == "local"  # type: ignore[union-attr]
    finally:
        source.close()


def test_migrate_refuses_what_it_cannot_do(pg_url: str, tmp_path: Path) -> None:
    """Each refusal is one clear line naming --to or the collection; no password shown."""
    from sleuth.errors import UserError
    from sleuth.store.migrate import migrate_collection

    settings, _ = _local_collection(tmp_path / "data")
    with pytest.raises(UserError, match="'nope' does not exist in the source catalog"):
        migrate_collection(settings, "nope", pg_url)
    with pytest.raises(ConfigError, match=r"--to must be a PostgreSQL URL .* not 'sqlite'"):
        migrate_collection(settings, "law", f"sqlite:///{tmp_path / 'x.sqlite3'}")
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match="cannot open --to") as err:
        migrate_collection(settings, "law", f"postgresql+psycopg://u:s3cret@127.0.0.1:{port}/db")
    assert "s3cret" not in str(err.value) and "\n" not in str(err.value)
    secret = settings.model_copy(
        update={"database_url": f"postgresql+psycopg://u:s3cret@127.0.0.1:{port}/db"}
    )
    with pytest.raises(ConfigError) as err:
        migrate_collection(secret, "law", pg_url)
    assert "s3cret" not in str(err.value)


def test_migrate_within_one_database_switches_the_backend(pg_url: str, tmp_path: Path) -> None:
    """The catalog already on PostgreSQL, the index local: only the index moves, and the
    collection's backend becomes postgres; the URL may be spelled another way (a socket
    path plain or percent-encoded, another driver name)."""
    from sqlalchemy.engine import make_url

    from sleuth.store.migrate import migrate_collection

    embedder = HashingEmbedder()
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=pg_url,
        index_backend="local",
        embedding_model=embedder.name,
        _env_file=None,
    )
    catalog = Catalog(pg_url)
    kb = KnowledgeBase(settings, catalog, embedder=embedder)
    pipeline = IngestPipeline(
        settings, catalog, index_opener=lambda _s, c, _d: kb.index(c), embedder=embedder
    )
    try:
        pipeline.ingest_documents([make_document(STATUTE_SECTIONS)], "same")
        want = [h.chunk.chunk_id for h in kb.search("same", "murder punished", 5, mode="bm25")]
    finally:
        pipeline.close()
        kb.close()
        catalog.close()
    respelled = make_url(pg_url).set(drivername="postgresql").render_as_string(False)
    assert respelled != pg_url
    report = migrate_collection(settings, "same", respelled)
    assert (report.documents_copied, report.chunks_copied) == (
        1,
        len(want) and report.chunks_copied,
    )
    pg = settings.model_copy(update={"index_backend": "postgres"})
    catalog = Catalog(pg_url)
    kb = KnowledgeBase(pg, catalog, embedder=embedder)
    try:
        assert catalog.get_collection("same").backend == "postgres"  # type: ignore[union-attr]
        got = [h.chunk.chunk_id for h in kb.search("same", "murder punished", 5, mode="bm25")]
        assert got == want
    finally:
        kb.close()
        catalog.close()


def test_a_local_collection_asked_for_on_postgres_points_to_migrate(
    pg_url: str, tmp_path: Path
) -> None:
    from sleuth.errors import UserError

    settings, _ = _local_collection(tmp_path / "data")
    pg = settings.model_copy(update={"index_backend": "postgres", "database_url": pg_url})
    catalog = Catalog(pg_url)
    kb = KnowledgeBase(pg, catalog, embedder=HashingEmbedder())
    try:
        with pytest.raises(UserError, match="sleuth migrate -c law --to"):
            kb.search("law", "murder", 3)
        with pytest.raises(UserError, match="create it with: sleuth ingest"):
            kb.search("other", "murder", 3)
    finally:
        kb.close()
        catalog.close()
