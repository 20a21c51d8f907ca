"""LocalIndex with an HNSW dense index (``ann="hnsw"``, faiss): same answers as exact search
on small sets, high recall on larger ones, filters honoured, rebuilt after reopen/changes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sleuth.store.local_index import LocalIndex
from sleuth.types import Chunk

pytest.importorskip("faiss")

DIM = 32


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _chunks(n: int, start: int = 0, docs: int = 7) -> list[Chunk]:
    return [
        Chunk(
            chunk_id=f"c{i:05d}",
            source_id=f"s{i:05d}",
            doc_id=f"d{i % docs}",
            title_path=["T"],
            text=f"word{i % 13} common text",
            position=i,
        )
        for i in range(start, start + n)
    ]


def _ids(hits: list) -> list[str]:
    return [h.chunk.chunk_id for h in hits]


def test_tiny_set_equals_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    vecs = _unit(rng, 60)
    chunks = _chunks(60)
    with (
        LocalIndex(tmp_path / "exact", DIM) as exact,
        LocalIndex(tmp_path / "hnsw", DIM, ann="hnsw") as ann,
    ):
        exact.add(chunks, vecs)
        ann.add(chunks, vecs)
        for q in _unit(rng, 20):
            for k in (1, 5, 60, 100):
                want = exact.search_dense(q, k)
                got = ann.search_dense(q, k)
                assert _ids(got) == _ids(want)
                assert [h.score for h in got] == pytest.approx([h.score for h in want])
                assert [h.rank for h in got] == list(range(1, len(want) + 1))
            assert _ids(ann.search_hybrid("word3 text", q, 10)) == _ids(
                exact.search_hybrid("word3 text", q, 10)
            )


def test_recall_on_a_few_thousand_random_vectors(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    vecs = _unit(rng, 3000)
    chunks = _chunks(3000)
    with (
        LocalIndex(tmp_path / "exact", DIM) as exact,
        LocalIndex(tmp_path / "hnsw", DIM, ann="hnsw") as ann,
    ):
        exact.add(chunks, vecs)
        ann.add(chunks, vecs)
        recalls = []
        for q in _unit(rng, 50):
            want = set(_ids(exact.search_dense(q, 10)))
            recalls.append(len(want & set(_ids(ann.search_dense(q, 10)))) / 10)
        assert np.mean(recalls) >= 0.9
        ann.ef_search = 1  # beam = k: still valid hits, best first
        hits = ann.search_dense(vecs[0], 10)
        assert len(hits) == 10
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_doc_ids_filter_is_honoured_and_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vecs = _unit(rng, 500)
    chunks = _chunks(500)
    with (
        LocalIndex(tmp_path / "exact", DIM) as exact,
        LocalIndex(tmp_path / "hnsw", DIM, ann="hnsw") as ann,
    ):
        exact.add(chunks, vecs)
        ann.add(chunks, vecs)
        for q in _unit(rng, 10):
            got = ann.search_dense(q, 10, doc_ids=["d2", "d5"])
            assert {h.chunk.doc_id for h in got} <= {"d2", "d5"}
            assert _ids(got) == _ids(exact.search_dense(q, 10, doc_ids=["d2", "d5"]))
            assert ann.search_dense(q, 10, doc_ids=["nope"]) == []
            hybrid = ann.search_hybrid("word4", q, 10, doc_ids=["d1"])
            assert hybrid and {h.chunk.doc_id for h in hybrid} == {"d1"}


def test_reopen_append_replace_delete_stay_consistent(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    vecs = _unit(rng, 80)
    path = tmp_path / "ix"
    with LocalIndex(path, DIM) as ix:  # built without ANN
        ix.add(_chunks(40), vecs[:40])
    queries = _unit(rng, 10)

    def check(ann: LocalIndex, exact: LocalIndex) -> None:
        for q in queries:
            assert _ids(ann.search_dense(q, 10)) == _ids(exact.search_dense(q, 10))

    with LocalIndex(path, DIM, ann="hnsw") as ann:
        assert ann.count() == 40
        ann.ensure_ann()  # the graph is rebuilt from the persisted vectors
        with LocalIndex(tmp_path / "exact", DIM) as exact:
            exact.add(_chunks(40), vecs[:40])
            check(ann, exact)
            # appended rows extend the graph
            for ix in (ann, exact):
                ix.add(_chunks(40, start=40), vecs[40:])
            check(ann, exact)
            # a replaced vector and a deleted document rebuild it
            moved = _unit(rng, 1)
            for ix in (ann, exact):
                ix.add(_chunks(1, start=7), moved)
            assert _ids(ann.search_dense(moved[0], 1)) == ["c00007"]
            check(ann, exact)
            for ix in (ann, exact):
                assert ix.delete_document("d3") > 0
            check(ann, exact)
            assert all(h.chunk.doc_id != "d3" for h in ann.search_dense(queries[0], 80))
    # a second process's view: reopening sees everything, graph rebuilt lazily
    with LocalIndex(path, DIM, ann="hnsw") as again:
        assert again.count() == 80 - len([i for i in range(80) if i % 7 == 3])
        assert _ids(again.search_dense(moved[0], 1)) == ["c00007"]


def test_changes_made_by_another_instance_are_seen(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    vecs = _unit(rng, 30)
    path = tmp_path / "ix"
    with LocalIndex(path, DIM, ann="hnsw") as reader, LocalIndex(path, DIM) as writer:
        writer.add(_chunks(20), vecs[:20])
        assert len(reader.search_dense(vecs[0], 30)) == 20
        writer.add(_chunks(10, start=20), vecs[20:])
        assert _ids(reader.search_dense(vecs[25], 1)) == ["c00025"]
        assert len(reader.search_dense(vecs[0], 30)) == 30


def test_invalid_parameters(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ann"):
        LocalIndex(tmp_path / "a", DIM, ann="ivf")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ef_search"):
        LocalIndex(tmp_path / "b", DIM, ann="hnsw", ef_search=0)
    with LocalIndex(tmp_path / "c", DIM, ann="hnsw") as empty:
        assert empty.search_dense(_unit(np.random.default_rng(0), 1)[0], 5) == []
        empty.ensure_ann()


def test_settings_choose_hnsw_for_the_local_backend(tmp_path: Path) -> None:
    from sleuth.config import Settings
    from sleuth.store.factory import open_index

    settings = Settings(data_dir=tmp_path, local_ann="HNSW", hnsw_ef_search=128)
    index = open_index(settings, "docs", DIM)
    assert isinstance(index, LocalIndex) and (index.ann, index.ef_search) == ("hnsw", 128)
    index.close()
    exact = open_index(Settings(data_dir=tmp_path), "docs", DIM)
    assert isinstance(exact, LocalIndex) and exact.ann == "exact"
    exact.close()
