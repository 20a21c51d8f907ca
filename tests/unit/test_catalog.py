"""The SQL catalog on SQLite: collections, documents, chunks, structure, references, runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.errors import ConfigError, EmbeddingModelMismatch, UserError
from sleuth.store.catalog import Catalog, DocumentInfo, validate_collection_name
from sleuth.types import Chunk, Reference
from tests.helpers import check_runs_round_trip, make_chunks


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[Catalog]:
    cat = Catalog(f"sqlite:///{tmp_path / 'sub' / 'catalog.sqlite3'}")
    yield cat
    cat.close()


def _save(catalog: Catalog, doc_id: str, chunks: list[Chunk], h: str = "h1") -> None:
    info = DocumentInfo(doc_id=doc_id, path=f"/data/{doc_id}.txt", content_hash=h)
    catalog.save_document("c", info, chunks)


def test_sqlite_file_in_wal_mode_with_foreign_keys(tmp_path: Path, catalog: Catalog) -> None:
    assert (tmp_path / "sub" / "catalog.sqlite3").exists()
    with catalog.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_ensure_collection_creates_then_checks(catalog: Catalog) -> None:
    info = catalog.ensure_collection("c", "model-a", 384, "local")
    assert (info.name, info.embedding_model, info.dim, info.backend) == (
        "c",
        "model-a",
        384,
        "local",
    )
    assert info.created_at.tzinfo is not None
    again = catalog.ensure_collection("c", "model-a", 384, "local")
    assert again.created_at == info.created_at
    assert catalog.get_collection("missing") is None
    assert catalog.check_collection("missing", "model-b") is None


def test_model_mismatch_names_both_models_and_the_collection(catalog: Catalog) -> None:
    catalog.ensure_collection("laws", "model-a", 384, "local")
    with pytest.raises(EmbeddingModelMismatch) as err:
        catalog.ensure_collection("laws", "model-b", 768, "local")
    message = str(err.value)
    for part in ("laws", "model-a", "model-b", "384", "768"):
        assert part in message
    with pytest.raises(EmbeddingModelMismatch, match=r"model-a.*model-b"):
        catalog.check_collection("laws", "model-b")
    with pytest.raises(EmbeddingModelMismatch, match="dim 512"):
        catalog.ensure_collection("laws", "model-a", 512, "local")
    with pytest.raises(ConfigError, match="milvus"):
        catalog.ensure_collection("laws", "model-a", 384, "milvus")


def test_save_replace_and_delete_document(catalog: Catalog) -> None:
    catalog.ensure_collection("c", "m", 8, "local")
    _save(catalog, "d1", make_chunks("d1", [("A", 2), ("B", 1)]), h="h1")
    _save(catalog, "d2", make_chunks("d2", [("X", 1)]), h="h2")

    doc = catalog.get_document("c", "d1")
    assert doc is not None
    assert (doc.status, doc.n_chunks, doc.content_hash) == ("indexed", 3, "h1")
    assert catalog.find_by_hash("c", "h2").doc_id == "d2"  # type: ignore[union-attr]
    assert catalog.find_by_hash("c", "nope") is None
    assert [d.doc_id for d in catalog.list_documents("c")] == ["d1", "d2"]
    assert [d.doc_id for d in catalog.find_by_path("c", "/data/d1.txt")] == ["d1"]
    (info,) = catalog.list_collections()
    assert (info.n_documents, info.n_chunks) == (2, 4)

    # replace: the old chunks go, the new ones arrive
    _save(catalog, "d1", make_chunks("d1", [("C", 1)]), h="h3")
    assert catalog.chunks_for_source("c", "A") == []
    assert [c.chunk_id for c in catalog.chunks_for_source("c", "C")] == ["C#0"]
    assert catalog.get_document("c", "d1").content_hash == "h3"  # type: ignore[union-attr]
    assert catalog.find_by_hash("c", "h1") is None
    assert catalog.get_collection("c").n_chunks == 2  # type: ignore[union-attr]

    assert catalog.delete_document("c", "d1") is True
    assert catalog.delete_document("c", "d1") is False
    assert catalog.get_document("c", "d1") is None
    assert catalog.chunks_for_source("c", "C") == []
    assert catalog.get_collection("c").n_chunks == 1  # type: ignore[union-attr]


def test_chunks_round_trip_with_metadata_and_references(catalog: Catalog) -> None:
    catalog.ensure_collection("c", "m", 8, "local")
    chunks = make_chunks("d1", [("A", 3), ("B", 1)], refs={"A": [("section B", "B")]})
    _save(catalog, "d1", list(reversed(chunks)))
    parts = catalog.chunks_for_source("c", "A")
    assert [c.part for c in parts] == [0, 1, 2]
    assert parts == chunks[:3]
    got = catalog.get_chunks("c", ["B#0", "missing", "A#1"])
    assert [c.chunk_id for c in got] == ["B#0", "A#1"]
    assert got[1].metadata == {"page": 2, "nested": {"ok": True}}
    assert got[1].references == [Reference(source_id="A", target_text="section B", target_id="B")]
    assert catalog.doc_id_for_source("c", "B") == "d1"
    assert catalog.doc_id_for_source("c", "Z") is None


def test_neighbours_and_outline_follow_document_order(catalog: Catalog) -> None:
    catalog.ensure_collection("c", "m", 8, "local")
    _save(catalog, "d1", make_chunks("d1", [("S1", 1), ("S2", 3), ("S3", 2)]))
    _save(catalog, "d2", make_chunks("d2", [("T1", 1)]), h="h2")
    assert catalog.neighbours("c", "S1") == (None, "S2")
    assert catalog.neighbours("c", "S2") == ("S1", "S3")
    assert catalog.neighbours("c", "S3") == ("S2", None)
    assert catalog.neighbours("c", "T1") == (None, None)
    assert catalog.neighbours("c", "nope") == (None, None)

    outline = catalog.outline("c", "d1")
    assert [(e.source_id, e.position) for e in outline] == [("S1", 0), ("S2", 1), ("S3", 4)]
    assert outline[1].title_path == ["d1", "Title S2"]
    assert catalog.outline("c", "nope") == []
    keys = catalog.all_section_keys("c")
    assert [k[0] for k in keys] == ["S1", "S2", "S3", "T1"]
    assert keys[3] == ("T1", ["d2", "Title T1"])


def test_references_from_and_to(catalog: Catalog) -> None:
    catalog.ensure_collection("c", "m", 8, "local")
    refs = {
        "A": [("section B", "B"), ("section 9 of another act", None)],
        "C": [("section B", "B")],
    }
    # A has two parts that both mention section B: stored once per part, listed once
    chunks = make_chunks("d1", [("A", 2), ("B", 1), ("C", 1)], refs=refs)
    _save(catalog, "d1", chunks)
    assert catalog.references_from("c", "A") == [
        Reference(source_id="A", target_text="section B", target_id="B"),
        Reference(source_id="A", target_text="section 9 of another act", target_id=None),
    ]
    assert [r.source_id for r in catalog.references_to("c", "B")] == ["A", "C"]
    assert catalog.references_to("c", "A") == []
    assert catalog.unresolved_references("c") == [
        Reference(source_id="A", target_text="section 9 of another act")
    ]
    resolved = Reference(source_id="A", target_text="section 9 of another act", target_id="C")
    assert catalog.update_references("c", [resolved]) == 2  # both parts of A
    assert catalog.unresolved_references("c") == []
    assert [r.source_id for r in catalog.references_to("c", "C")] == ["A"]


def test_record_failure_and_chunk_owners(catalog: Catalog) -> None:
    catalog.ensure_collection("c", "m", 8, "local")
    _save(catalog, "d1", make_chunks("d1", [("A", 1)]))
    assert catalog.chunk_owners("c", ["A#0", "Z#0"]) == {"A#0": "d1"}
    catalog.record_failure("c", "d1", "/data/d1.txt", "corrupt PDF")
    doc = catalog.get_document("c", "d1")
    assert doc is not None
    assert (doc.status, doc.error, doc.n_chunks) == ("failed", "corrupt PDF", 0)
    assert catalog.chunks_for_source("c", "A") == []
    info = catalog.get_collection("c")
    assert info is not None
    assert (info.n_documents, info.n_failed) == (0, 1)


def test_delete_collection(catalog: Catalog) -> None:
    catalog.ensure_collection("c", "m", 8, "local")
    catalog.ensure_collection("other", "m", 8, "local")
    _save(catalog, "d1", make_chunks("d1", [("A", 1)]))
    assert catalog.delete_collection("c") is True
    assert catalog.delete_collection("c") is False
    assert [c.name for c in catalog.list_collections()] == ["other"]
    assert catalog.list_documents("c") == []
    assert catalog.get_chunks("c", ["A#0"]) == []


def test_runs_round_trip(catalog: Catalog) -> None:
    check_runs_round_trip(catalog)


def test_concurrent_use_from_threads(catalog: Catalog) -> None:
    catalog.ensure_collection("c", "m", 8, "local")
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            catalog.ensure_collection("c", "m", 8, "local")
            _save(catalog, f"d{i}", make_chunks(f"d{i}", [(f"S{i}", 2)]), h=f"h{i}")
            assert catalog.chunks_for_source("c", f"S{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert catalog.get_collection("c").n_chunks == 16  # type: ignore[union-attr]


def test_in_memory_sqlite_works() -> None:
    cat = Catalog("sqlite://")
    cat.ensure_collection("c", "m", 8, "local")
    assert [c.name for c in cat.list_collections()] == ["c"]
    cat.close()


@pytest.mark.parametrize(
    "bad", ["", ".", "..", "a/b", "../../etc", "a\\b", "x" * 65, "-x", "my laws"]
)
def test_invalid_collection_names_leave_no_ghost(catalog: Catalog, bad: str) -> None:
    with pytest.raises(UserError, match="invalid collection name") as info:
        catalog.ensure_collection(bad, "m", 8, "local")
    assert "1 to 64 characters" in str(info.value)
    with pytest.raises(UserError):
        catalog.check_collection(bad, "m")
    assert catalog.list_collections() == []


def test_valid_collection_names() -> None:
    for good in ["statutes", "python-reference", "a", "v1.2_x", "A" * 64]:
        assert validate_collection_name(good) == good


def test_unreachable_database_is_a_config_error_with_masked_password() -> None:
    with pytest.raises(ConfigError) as info:
        Catalog("postgresql+psycopg://u:s3cretpw@127.0.0.1:5999/x?connect_timeout=3")
    message = str(info.value)
    assert "SLEUTH_DATABASE_URL=postgresql+psycopg://u:***@127.0.0.1:5999/x" in message
    assert "s3cretpw" not in message
    assert "\n" not in message


def test_missing_database_driver_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"SLEUTH_DATABASE_URL=mysql://x: ModuleNotFoundError"):
        Catalog("mysql://x")
