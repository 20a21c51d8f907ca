"""The catalog, one ingest and one agent run on a real, throwaway PostgreSQL server.

A PostgreSQL 15 server is started on loopback (``initdb`` + ``pg_ctl`` as the ``postgres``
system user, trust auth, a free port, its socket in a temporary folder) for this module and
stopped (``pg_ctl stop -m immediate``) at the end; every test gets a database of its own.
Skipped with the reason when the server binaries, the ``postgres`` user or psycopg are
missing, or when the tests run neither as root nor as ``postgres``.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
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

pytestmark = pytest.mark.integration

PG_BIN_DIRS = (Path("/usr/lib/postgresql/15/bin"),)
PG_USER = "postgres"
SERVER_START_TIMEOUT_S = 30
COMMAND_TIMEOUT_S = 60


@dataclass
class PostgresServer:
    port: int
    socket_dir: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A fresh, empty database; returns its SQLAlchemy URL."""
        import psycopg

        name = f"sleuth_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=PG_USER, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _pg_binary(name: str) -> str | None:
    for directory in PG_BIN_DIRS:
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres_prefix() -> list[str]:
    """How to run a command as the ``postgres`` user from here (skips if we cannot)."""
    if os.geteuid() == pwd.getpwnam(PG_USER).pw_uid:
        return []
    if os.geteuid() != 0:
        pytest.skip(
            f"cannot start PostgreSQL: running neither as root (to switch to {PG_USER!r}, "
            f"the server refuses to run as root) nor as {PG_USER!r}"
        )
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", PG_USER, "--"]
    su = shutil.which("su")
    if su is None:
        pytest.skip("neither runuser nor su is available to switch to the postgres user")
    # the arguments after "--" reach the shell as "$0" "$@", so none is re-split or re-parsed
    return [su, "-s", "/bin/sh", "-c", 'exec "$0" "$@"', PG_USER, "--"]


def _run(command: list[str], what: str, log: Path | None = None) -> None:
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not finish within {COMMAND_TIMEOUT_S} s: {command}")
    if result.returncode != 0:
        log_text = ""
        if log is not None and log.exists():
            log_text = "\nserver log:\n" + log.read_text(errors="replace")[-3000:]
        pytest.fail(
            f"{what} failed with code {result.returncode}:\n{result.stdout[-2000:]}\n"
            f"{result.stderr[-2000:]}{log_text}"
        )


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server on 127.0.0.1, trust auth, stopped at the end of the module."""
    initdb, pg_ctl = _pg_binary("initdb"), _pg_binary("pg_ctl")
    if initdb is None or pg_ctl is None or _pg_binary("postgres") is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found")
    try:
        pg_user = pwd.getpwnam(PG_USER)
    except KeyError:
        pytest.skip(f"no {PG_USER!r} system user to run the PostgreSQL server as")
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip('psycopg is not installed (pip install "sleuth[postgres]")')
    prefix = _as_postgres_prefix()

    # Not under pytest's tmp_path: /tmp/pytest-of-root is 0700, unreadable for postgres.
    root = Path(tempfile.mkdtemp(prefix="sleuth-pg-"))
    os.chown(root, pg_user.pw_uid, pg_user.pw_gid)
    data_dir, socket_dir, log = root / "data", root / "socket", root / "server.log"
    port = _free_port()
    try:
        _run(
            [
                *prefix,
                initdb,
                "-D",
                str(data_dir),
                "-U",
                PG_USER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
            "initdb",
        )
        _run([*prefix, "mkdir", "-p", str(socket_dir)], "mkdir of the socket folder")
        options = (
            f"-p {port} -k {socket_dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        _run(
            [
                *prefix,
                pg_ctl,
                "start",
                "-D",
                str(data_dir),
                "-l",
                str(log),
                "-o",
                options,
                "-w",
                "-t",
                str(SERVER_START_TIMEOUT_S),
            ],
            "pg_ctl start",
            log=log,
        )
        try:
            yield PostgresServer(port=port, socket_dir=socket_dir)
        finally:
            subprocess.run(
                [*prefix, pg_ctl, "stop", "-D", str(data_dir), "-m", "immediate", "-w", "-t", "30"],
                capture_output=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database on the module's server."""
    return postgres_server.create_database()


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


def test_ingest_and_agent_run_with_the_catalog_on_postgresql(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_DATABASE_URL", pg_url)
    assert Settings(data_dir=tmp_path, _env_file=None).catalog_url == pg_url

    embedder = HashingEmbedder()
    settings = Settings(
        data_dir=tmp_path, database_url=pg_url, embedding_model=embedder.name, _env_file=None
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

        info = catalog.get_collection("test")
        assert info is not None
        assert (info.embedding_model, info.dim, info.n_documents) == (embedder.name, 64, 1)
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
