"""``sleuth search`` one row per section, ``sleuth read`` one section by id, ``sleuth
ingest`` that indexes nothing, and a model swapped for one of another dimension (hashing
embedder, no real model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sleuth.cli._common
from sleuth.app import Sleuth
from sleuth.cli import app
from sleuth.config import Settings
from sleuth.errors import EmbeddingModelMismatch
from sleuth.retrieval.embeddings import HashingEmbedder
from sleuth.retrieval.search import best_per_section
from sleuth.types import Chunk, Document, Hit, Section

runner = CliRunner()
MODEL = "local-model-dir"
"""The embedding model's name (a path, say): the same for both dimensions below."""

LONG = " ".join(
    f"The zeppelin hangar keeps spare propeller number {i} beside the gas cells." for i in range(12)
)
SECTIONS = {
    "HANGAR": ("Hangar", LONG),
    "FIELD": ("Field", "A zeppelin lands on the field when the wind drops below ten knots."),
    "CREW": ("Crew", "The crew of four eats bread and cheese before each flight."),
}


def _settings(**extra: object) -> Settings:
    return Settings(embedding_model=MODEL, chunk_words=20, chunk_overlap_words=0, **extra)


def _use(monkeypatch: pytest.MonkeyPatch, dim: int = 64) -> None:
    """Make the CLI open sleuth with a hashing embedder of ``dim`` named ``MODEL``."""
    monkeypatch.setattr(
        sleuth.cli._common,
        "open_sleuth",
        lambda: Sleuth(_settings(), embedder=HashingEmbedder(dim=dim, name=MODEL)),
    )


def _ingest_airship(dim: int = 64) -> None:
    doc = Document(
        doc_id="airship",
        path="airship.md",
        title="Airship",
        content_hash="h1",
        sections=[
            Section(title_path=["Airship", title], text=text, source_id=sid)
            for sid, (title, text) in SECTIONS.items()
        ],
    )
    s = Sleuth(_settings(), embedder=HashingEmbedder(dim=dim, name=MODEL))
    s.pipeline.ingest_documents([doc], "ships")
    assert len(s.kb.section("ships", "HANGAR")) > 3  # a section of several chunks
    s.close()


@pytest.mark.parametrize("mode", ["bm25", "hybrid", "dense"])
def test_search_shows_one_row_per_section_unless_chunks(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    _ingest_airship()
    _use(monkeypatch)
    args = ["search", "zeppelin hangar propeller", "-c", "ships", "--mode", mode, "--json"]
    result = runner.invoke(app, [*args, "-k", "2"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert [h["chunk"]["source_id"] for h in hits] == ["HANGAR", "FIELD"]  # each section once
    assert [h["rank"] for h in hits] == [1, 2]

    raw = runner.invoke(app, [*args, "-k", "2", "--chunks"])
    assert raw.exit_code == 0, raw.output
    raw_ids = [h["chunk"]["source_id"] for h in json.loads(raw.stdout)]
    assert raw_ids == ["HANGAR", "HANGAR"]  # the raw chunks: two parts of one section

    table = runner.invoke(app, args[:-1])
    assert table.exit_code == 0, table.output
    assert table.stdout.count("HANGAR") == 1 and "FIELD" in table.stdout


def test_read_prints_the_section_a_citation_points_to(monkeypatch: pytest.MonkeyPatch) -> None:
    _ingest_airship()
    _use(monkeypatch)
    shown = runner.invoke(app, ["read", "HANGAR", "-c", "ships"])
    assert shown.exit_code == 0, shown.output
    # the whole section, its chunks joined, under its id and title
    assert "HANGAR · Airship > Hangar" in shown.stdout
    assert "propeller number 0 " in shown.stdout and "propeller number 11 " in shown.stdout
    as_json = runner.invoke(app, ["read", "FIELD", "-c", "ships", "--json"])
    assert [c["source_id"] for c in json.loads(as_json.stdout)] == ["FIELD"]
    missing = runner.invoke(app, ["read", "HANGAR_2", "-c", "ships"])
    assert missing.exit_code != 0
    assert "no section 'HANGAR_2' in collection 'ships'" in missing.output
    # a collection that does not exist is named as such, not as a missing section
    nowhere = runner.invoke(app, ["read", "HANGAR", "-c", "boats"])
    assert nowhere.exit_code != 0
    assert "collection 'boats' does not exist (collections: ships)" in nowhere.output
    assert "Traceback" not in nowhere.output


def test_best_per_section_keeps_the_first_chunk_of_each_and_renumbers() -> None:
    def hit(source_id: str, part: int, score: float, rank: int) -> Hit:
        chunk = Chunk(
            chunk_id=f"{source_id}#{part}", source_id=source_id, doc_id="d",
            title_path=["d"], text="t", position=rank, part=part,
        )  # fmt: skip
        return Hit(chunk=chunk, score=score, rank=rank, retriever="bm25")

    hits = [hit("A", 2, 0.9, 1), hit("A", 0, 0.8, 2), hit("B", 0, 0.7, 3), hit("C", 1, 0.6, 4)]
    best = best_per_section(hits, 2)
    assert [(h.chunk.chunk_id, h.score, h.rank) for h in best] == [("A#2", 0.9, 1), ("B#0", 0.7, 2)]
    assert [h.chunk.source_id for h in best_per_section(hits, 10)] == ["A", "B", "C"]


def test_ingest_that_indexes_nothing_fails_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _use(monkeypatch)
    (tmp_path / "empty.txt").write_text("  \n\n")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.7 not really a pdf \x00\x01")
    result = runner.invoke(app, ["ingest", str(tmp_path), "-c", "notes"])
    assert result.exit_code == 1, result.output
    assert "error: nothing was indexed: of 2 files, 1 skipped (empty), 1 failed" in result.stderr
    # each outcome once, the file named once (not "broken.pdf: broken.pdf: ...")
    assert result.stderr.count("the file is empty") == 1
    flat = "".join(result.stderr.split())  # rich wraps long lines
    assert "".join(f"failed: {tmp_path / 'broken.pdf'}: not a readable PDF".split()) in flat
    as_json = runner.invoke(app, ["ingest", str(tmp_path / "empty.txt"), "-c", "notes", "--json"])
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["totals"]["skipped"] == 1  # the report is still printed
    assert "nothing was indexed: of 1 file, 1 skipped (empty)" in as_json.stderr

    only_other = tmp_path / "other"
    only_other.mkdir()
    (only_other / "image.xyz").write_bytes(b"\x89")
    result = runner.invoke(app, ["ingest", str(only_other), "-c", "notes"])
    assert result.exit_code == 1
    assert "nothing was indexed: no file of a supported type was found" in result.stderr
    # the failed batches created no collection of their own
    listed = runner.invoke(app, ["collections", "--json"])
    assert "notes" not in [c["name"] for c in json.loads(listed.stdout)]

    (tmp_path / "notes.md").write_text("# Notes\n\nThe lamp is cleaned on Tuesdays.\n")
    result = runner.invoke(app, ["ingest", str(tmp_path), "-c", "notes"])
    assert result.exit_code == 0, result.output  # one file indexed: the batch succeeded
    assert "nothing was indexed" not in result.stderr
    again = runner.invoke(app, ["ingest", str(tmp_path / "notes.md"), "-c", "notes"])
    assert again.exit_code == 0, again.output  # unchanged content is indexed content
    # a failed batch into a collection that existed before keeps it and its documents
    failed = runner.invoke(app, ["ingest", str(tmp_path / "empty.txt"), "-c", "notes"])
    assert failed.exit_code == 1
    listed = json.loads(runner.invoke(app, ["collections", "--json"]).stdout)
    assert [c["n_documents"] for c in listed if c["name"] == "notes"] == [1]


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
def test_a_model_of_another_dimension_at_the_same_path_is_named_clearly(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    _ingest_airship(dim=64)
    _use(monkeypatch, dim=32)  # same name, new dimension
    result = runner.invoke(app, ["search", "zeppelin", "-c", "ships", "--mode", mode])
    assert result.exit_code == 1, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in result.output
    assert line.startswith("error: collection 'ships' holds 64-d vectors")
    assert f"'{MODEL}' now gives 32-d vectors" in line
    assert "query vector must have shape" not in line
    bm25 = runner.invoke(app, ["search", "zeppelin", "-c", "ships", "--mode", "bm25"])
    assert bm25.exit_code == 0, bm25.output  # BM25 needs no vectors


def test_knowledge_base_checks_the_query_vector_dimension() -> None:
    _ingest_airship(dim=64)
    s = Sleuth(_settings(), embedder=HashingEmbedder(dim=48, name=MODEL))
    try:
        with pytest.raises(EmbeddingModelMismatch, match=r"holds 64-d .* gives 48-d"):
            s.kb.search("ships", "zeppelin", mode="hybrid")
        with pytest.raises(EmbeddingModelMismatch, match="48-d"):
            s.kb.search_sections("ships", "zeppelin", mode="dense")
        assert s.kb.search("ships", "zeppelin", mode="bm25")
    finally:
        s.close()


def test_ingest_whose_index_cannot_open_leaves_no_collection_behind(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An index backend that cannot be opened (a server down, say) fails the ingest with one
    line, and the collection it had just recorded is forgotten: it would otherwise pin the
    name to that backend, and could be neither used nor deleted from another."""
    from sleuth.errors import ConfigError

    _use(monkeypatch)

    def down(*_args: object) -> None:
        raise ConfigError("cannot open the index server at 127.0.0.1:1: connection refused")

    (tmp_path / "notes.md").write_text("# Notes\n\nThe zeppelin lands at dawn.\n")
    with monkeypatch.context() as m:
        m.setattr("sleuth.store.factory._open_backend", down)
        result = runner.invoke(app, ["ingest", str(tmp_path / "notes.md"), "-c", "notes"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: cannot open the index server at 127.0.0.1:1: connection refused"
    )
    assert json.loads(runner.invoke(app, ["collections", "--json"]).stdout) == []
    again = runner.invoke(app, ["ingest", str(tmp_path / "notes.md"), "-c", "notes"])
    assert again.exit_code == 0, again.output  # the name is free, on the working backend
