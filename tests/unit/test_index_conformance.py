"""One conformance suite for every ``Index`` backend (LocalIndex, MilvusIndex on Milvus Lite).

Vectors come from a tiny deterministic embedder (hashed bag of words, 64-d), not a model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from sleuth.config import Settings
from sleuth.errors import ConfigError, EmbeddingModelMismatch, UserError
from sleuth.store.factory import open_index
from sleuth.store.index import RRF_K, Index, rrf_fuse
from sleuth.store.local_index import LocalIndex, tokenize
from sleuth.types import Chunk, Hit, Reference
from tests.postgres import HAVE_POSTGRES, NO_POSTGRES, new_database, postgres_server

DIM = 64
HAVE_MILVUS = all(importlib.util.find_spec(m) for m in ("pymilvus", "milvus_lite"))
NO_MILVUS = "pymilvus / milvus-lite not installed (pip install 'sleuth[milvus]')"


def embed(texts: list[str]) -> np.ndarray:
    """Hashed bag of words into DIM dims with ±1 signs, L2-normalised; float32 (n, DIM)."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.md5(word.encode()).digest()[:4], "little")
            out[i, h % DIM] += 1.0 if (h >> 16) & 1 else -1.0
        norm = float(np.linalg.norm(out[i]))
        if norm == 0.0:
            out[i, 0], norm = 1.0, 1.0
        out[i] /= norm
    return out


def embed_one(text: str) -> np.ndarray:
    return embed([text])[0]


def make_chunk(doc: str, part: int, text: str, **extra: object) -> Chunk:
    return Chunk(
        chunk_id=f"{doc}_S{part}#0",
        source_id=f"{doc}_S{part}",
        doc_id=doc,
        title_path=[doc.upper(), f"Section {part}"],
        text=text,
        position=part,
        **extra,  # type: ignore[arg-type]
    )


CORPUS = [
    make_chunk("bns", 1, "Punishment for murder. Whoever commits murder shall be punished."),
    make_chunk("bns", 2, "Theft. Whoever intends to take dishonestly any movable property."),
    make_chunk("bns", 3, "Robbery. In all robbery there is either theft or extortion."),
    make_chunk(
        "ipc",
        1,
        "The aardvark provision on burrowing animals in public land.",
        references=[Reference(source_id="ipc_S1", target_text="section 2", target_id="ipc_S2")],
        metadata={"page": 7, "tags": ["rare", "zoo"]},
    ),
    make_chunk("ipc", 2, "Cheating and dishonestly inducing delivery of property."),
    make_chunk("crpc", 1, "Criminal trespass upon property in the possession of another."),
    make_chunk("crpc", 2, "Arrest without warrant by police officers for cognizable offences."),
]
AARDVARK = "ipc_S1#0"


def by_doc(doc: str) -> list[Chunk]:
    return [c for c in CORPUS if c.doc_id == doc]


def vectors(chunks: list[Chunk]) -> np.ndarray:
    return embed([c.index_text() for c in chunks])


def ids(hits: list[Hit]) -> list[str]:
    return [h.chunk.chunk_id for h in hits]


def assert_well_formed(hits: list[Hit], retriever: str) -> None:
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(h.retriever == retriever for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len(set(ids(hits))) == len(hits)


# --------------------------------------------------------------------------- backends


@dataclass
class Backend:
    """How to open (and reopen) one backend on the same storage."""

    name: str
    open: Callable[[], Index]


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real PostgreSQL server with pgvector for the whole session (from pgserver)."""
    with postgres_server(tmp_path_factory.mktemp("pg")) as url:
        yield url


@pytest.fixture(
    params=[
        "local",
        pytest.param("milvus", marks=pytest.mark.skipif(not HAVE_MILVUS, reason=NO_MILVUS)),
        pytest.param("postgres", marks=pytest.mark.skipif(not HAVE_POSTGRES, reason=NO_POSTGRES)),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "local":
        return Backend("local", lambda: LocalIndex(tmp_path / "local-index", DIM))
    if request.param == "postgres":
        from sleuth.store.postgres_index import PostgresIndex

        url = new_database(request.getfixturevalue("pg_url"))
        return Backend("postgres", lambda: PostgresIndex(url, "conformance-test", DIM))
    from sleuth.store.milvus_index import MilvusIndex

    uri = str(tmp_path / "milvus" / "test.db")
    return Backend("milvus", lambda: MilvusIndex(uri, "conformance-test", DIM))


@pytest.fixture
def empty(backend: Backend) -> Iterator[Index]:
    index = backend.open()
    yield index
    index.close()


@pytest.fixture
def index(empty: Index) -> Index:
    empty.add(CORPUS, vectors(CORPUS))
    return empty


# --------------------------------------------------------------------------- conformance


def test_satisfies_protocol(empty: Index) -> None:
    assert isinstance(empty, Index)
    assert empty.dim == DIM


def test_add_and_count(empty: Index) -> None:
    assert empty.count() == 0
    empty.add(CORPUS[:3], vectors(CORPUS[:3]))
    assert empty.count() == 3
    empty.add(CORPUS[3:], vectors(CORPUS[3:]))
    assert empty.count() == len(CORPUS)
    empty.add([], np.zeros((0, DIM), dtype=np.float32))
    assert empty.count() == len(CORPUS)


def test_add_rejects_wrong_vector_shape(empty: Index) -> None:
    with pytest.raises(ValueError):
        empty.add(CORPUS[:2], vectors(CORPUS[:1]))
    with pytest.raises(ValueError):
        empty.add(CORPUS[:1], np.zeros((1, DIM + 1), dtype=np.float32))
    assert empty.count() == 0


def test_bm25_ranks_rare_word_first(index: Index) -> None:
    hits = index.search_bm25("aardvark", 5)
    assert ids(hits) == [AARDVARK]
    assert hits[0].score > 0
    assert hits[0].chunk == CORPUS[3]  # the whole chunk round-trips, references and metadata
    hits = index.search_bm25("dishonestly property", 10)
    assert_well_formed(hits, "bm25")
    assert set(ids(hits)) == {"bns_S2#0", "ipc_S2#0", "crpc_S1#0"}


def test_bm25_searches_the_title_path(index: Index) -> None:
    hits = index.search_bm25("CRPC", 10)  # only in title_path, i.e. in index_text()
    assert set(ids(hits)) == {c.chunk_id for c in by_doc("crpc")}


def test_bm25_respects_k(index: Index) -> None:
    hits = index.search_bm25("whoever theft robbery dishonestly property", 2)
    assert len(hits) == 2
    assert_well_formed(hits, "bm25")


def test_dense_ranks_nearest_vector_first(index: Index) -> None:
    target = CORPUS[4]
    hits = index.search_dense(embed_one(target.index_text()), 3)
    assert len(hits) == 3
    assert_well_formed(hits, "dense")
    assert hits[0].chunk.chunk_id == target.chunk_id
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].chunk == target


def test_dense_rejects_wrong_vector_shape(index: Index) -> None:
    with pytest.raises(ValueError):
        index.search_dense(np.zeros(DIM + 1, dtype=np.float32), 3)


def test_k_must_be_positive(index: Index) -> None:
    with pytest.raises(ValueError):
        index.search_bm25("murder", 0)
    with pytest.raises(ValueError):
        index.search_dense(embed_one("murder"), 0)


def test_hybrid_fuses_both_rankings_by_rrf(index: Index) -> None:
    query = "aardvark"
    vector = embed_one(CORPUS[5].index_text())  # nearest: crpc_S1, not found by BM25
    k = 5
    hits = index.search_hybrid(query, vector, k)
    assert_well_formed(hits, "hybrid")
    assert len(hits) == k
    assert AARDVARK in ids(hits)  # BM25's only hit
    assert "crpc_S1#0" in ids(hits)  # dense's best hit
    # Scores are exactly RRF over the two candidate lists of max(50, 4k).
    n_cand = max(50, 4 * k)
    bm25 = index.search_bm25(query, n_cand)
    dense = index.search_dense(vector, n_cand)
    expected = rrf_fuse([bm25, dense], k)
    assert ids(hits) == ids(expected)
    assert [h.score for h in hits] == pytest.approx([h.score for h in expected], rel=1e-5)
    rank_b = {cid: r for r, cid in enumerate(ids(bm25), start=1)}
    rank_d = {cid: r for r, cid in enumerate(ids(dense), start=1)}
    for h in hits:
        cid = h.chunk.chunk_id
        want = sum(1 / (RRF_K + r[cid]) for r in (rank_b, rank_d) if cid in r)
        assert h.score == pytest.approx(want, rel=1e-5)


def test_add_existing_chunk_id_replaces_it(index: Index) -> None:
    old = CORPUS[3]
    new = old.model_copy(update={"text": "A zebra crossing rule for pedestrians."})
    index.add([new], vectors([new]))
    assert index.count() == len(CORPUS)
    assert index.search_bm25("aardvark", 5) == []
    hits = index.search_bm25("zebra", 5)
    assert ids(hits) == [AARDVARK]
    assert hits[0].chunk.text == new.text
    dense = index.search_dense(embed_one(new.index_text()), 1)
    assert ids(dense) == [AARDVARK]
    assert dense[0].score == pytest.approx(1.0, abs=1e-5)
    hybrid = index.search_hybrid("zebra", embed_one(new.index_text()), 3)
    assert hybrid[0].chunk.text == new.text


def test_duplicate_chunk_ids_in_one_add_keep_the_last(empty: Index) -> None:
    a = CORPUS[0]
    b = a.model_copy(update={"text": "Second version mentions a platypus."})
    empty.add([a, b], vectors([a, b]))
    assert empty.count() == 1
    assert ids(empty.search_bm25("platypus", 3)) == [a.chunk_id]


def test_delete_document_removes_from_every_search(index: Index) -> None:
    gone = {c.chunk_id for c in by_doc("ipc")}
    assert index.delete_document("ipc") == len(gone)
    assert index.count() == len(CORPUS) - len(gone)
    assert index.search_bm25("aardvark", 10) == []
    assert not gone & set(ids(index.search_bm25("dishonestly property", 10)))
    vector = embed_one(CORPUS[3].index_text())
    assert not gone & set(ids(index.search_dense(vector, 10)))
    assert not gone & set(ids(index.search_hybrid("aardvark cheating", vector, 10)))
    assert index.delete_document("ipc") == 0
    assert index.delete_document("no-such-doc") == 0
    assert index.count() == len(CORPUS) - len(gone)


def test_doc_ids_filter_applies_before_top_k(index: Index) -> None:
    query = "aardvark property"  # best overall: the aardvark chunk of 'ipc'
    vector = embed_one(CORPUS[3].index_text())
    assert index.search_bm25(query, 1)[0].chunk.chunk_id == AARDVARK
    assert index.search_dense(vector, 1)[0].chunk.chunk_id == AARDVARK
    allowed = ["bns", "crpc"]
    bm25 = index.search_bm25(query, 10, doc_ids=allowed)
    assert set(ids(bm25)) == {"bns_S2#0", "crpc_S1#0"}  # the allowed chunks with 'property'
    assert ids(index.search_bm25(query, 1, doc_ids=allowed)) == ids(bm25)[:1]
    dense = index.search_dense(vector, 1, doc_ids=allowed)
    assert len(dense) == 1 and dense[0].chunk.doc_id in allowed
    hybrid = index.search_hybrid(query, vector, 3, doc_ids=allowed)
    assert len(hybrid) == 3 and {h.chunk.doc_id for h in hybrid} <= set(allowed)
    only_bns = index.search_dense(vector, 10, doc_ids=["bns"])
    assert sorted(ids(only_bns)) == sorted(c.chunk_id for c in by_doc("bns"))
    assert index.search_bm25(query, 5, doc_ids=[]) == []
    assert index.search_dense(vector, 5, doc_ids=[]) == []
    assert index.search_hybrid(query, vector, 5, doc_ids=["unknown"]) == []


def test_doc_ids_with_quotes_are_escaped(empty: Index) -> None:
    odd = make_chunk('we"ird\\doc', 1, "An odd document id with a quokka.")
    empty.add([odd], vectors([odd]))
    assert ids(empty.search_bm25("quokka", 3, doc_ids=[odd.doc_id])) == [odd.chunk_id]
    assert empty.delete_document(odd.doc_id) == 1
    assert empty.count() == 0


def test_empty_index_returns_nothing(empty: Index) -> None:
    vector = embed_one("murder")
    assert empty.count() == 0
    assert empty.search_bm25("murder", 5) == []
    assert empty.search_dense(vector, 5) == []
    assert empty.search_hybrid("murder", vector, 5) == []


def test_stopword_only_query(index: Index) -> None:
    assert index.search_bm25("the of", 5) == []
    assert index.search_bm25("", 5) == []
    assert index.search_bm25("zzzunknownzzz", 5) == []
    vector = embed_one(CORPUS[1].index_text())
    hybrid = index.search_hybrid("the of", vector, 3)
    expected = rrf_fuse([index.search_dense(vector, 50)], 3)
    assert ids(hybrid) == ids(expected)


def test_get_chunks(index: Index) -> None:
    got = index.get_chunks(["crpc_S2#0", "missing", AARDVARK])  # type: ignore[attr-defined]
    assert got == [CORPUS[6], CORPUS[3]]
    assert index.get_chunks([]) == []  # type: ignore[attr-defined]


def test_results_are_copies(index: Index) -> None:
    hit = index.search_bm25("aardvark", 1)[0]
    hit.chunk.metadata["page"] = 999
    hit.chunk.text = "mutated"
    assert index.search_bm25("aardvark", 1)[0].chunk == CORPUS[3]


def test_later_changes_to_added_chunks_do_not_leak_in(empty: Index) -> None:
    mine = [c.model_copy(deep=True) for c in CORPUS]
    empty.add(mine, vectors(mine))
    mine[3].metadata["page"] = 999
    mine[3].text = "mutated"
    assert empty.search_bm25("aardvark", 1)[0].chunk == CORPUS[3]


def test_persistence_after_reopen(backend: Backend) -> None:
    first = backend.open()
    first.add(CORPUS, vectors(CORPUS))
    first.delete_document("bns")
    vector = embed_one(CORPUS[4].index_text())

    def snapshot(ix: Index) -> list[list[tuple[str, float]]]:
        runs = [
            ix.search_bm25("dishonestly property aardvark", 10),
            ix.search_dense(vector, 10),
            ix.search_hybrid("property", vector, 10),
            ix.search_dense(vector, 10, doc_ids=["crpc"]),
        ]
        return [[(h.chunk.chunk_id, h.score) for h in run] for run in runs]

    before, count = snapshot(first), first.count()
    first.close()
    second = backend.open()
    try:
        assert second.count() == count == len(CORPUS) - len(by_doc("bns"))
        after = snapshot(second)
        for run_before, run_after in zip(before, after, strict=True):
            assert [c for c, _ in run_after] == [c for c, _ in run_before]
            assert [s for _, s in run_after] == pytest.approx([s for _, s in run_before])
        if backend.name == "local":
            assert after == before  # bit-identical
    finally:
        second.close()


def test_closed_index_refuses_calls(backend: Backend) -> None:
    ix = backend.open()
    ix.close()
    ix.close()  # idempotent
    with pytest.raises(RuntimeError):
        ix.count()


# --------------------------------------------------------------------------- rrf_fuse


def _hit(cid: str, rank: int) -> Hit:
    chunk = Chunk(chunk_id=cid, source_id=cid, doc_id="d", title_path=[], text=cid, position=0)
    return Hit(chunk=chunk, score=1.0 / rank, rank=rank, retriever="bm25")


def test_rrf_fuse_scores_are_exact() -> None:
    a = [_hit("x", 1), _hit("y", 2), _hit("z", 3)]
    b = [_hit("y", 1), _hit("w", 2)]
    fused = rrf_fuse([a, b], k=10)
    expect = {
        "y": 1 / 62 + 1 / 61,
        "x": 1 / 61,
        "w": 1 / 62,
        "z": 1 / 63,
    }
    assert ids(fused) == ["y", "x", "w", "z"]
    for h in fused:
        assert h.score == expect[h.chunk.chunk_id]  # exact: same float operations
    assert [h.rank for h in fused] == [1, 2, 3, 4]
    assert all(h.retriever == "hybrid" for h in fused)
    assert ids(rrf_fuse([a, b], k=2)) == ["y", "x"]
    assert rrf_fuse([], k=3) == []
    assert rrf_fuse([a], k=3, rrf_k=0)[0].score == 1.0


def test_rrf_fuse_breaks_ties_by_chunk_id() -> None:
    fused = rrf_fuse([[_hit("b", 1)], [_hit("a", 1)]], k=2)
    assert ids(fused) == ["a", "b"]
    assert fused[0].score == fused[1].score == 1 / 61


# --------------------------------------------------------------------------- LocalIndex only


def test_local_tokenize_stems_and_drops_stopwords() -> None:
    assert tokenize("The murdered persons of the State") == ["murder", "person", "state"]
    assert tokenize("the of and") == []
    assert tokenize("Section 5") == ["section", "5"]


def test_local_bm25_matches_word_forms(tmp_path: Path) -> None:
    with LocalIndex(tmp_path / "ix", DIM) as ix:
        ix.add(CORPUS, vectors(CORPUS))
        assert ids(ix.search_bm25("murdered", 3)) == ["bns_S1#0"]


def test_local_bm25_rare_repeated_term_beats_common_term(tmp_path: Path) -> None:
    """idf and term frequency both count: a twice-repeated rare term outranks a common one."""
    filler = [make_chunk("f", i, f"Lion number {i} rests in the grass.") for i in range(8)]
    rare = make_chunk("a", 1, "The okapi and the okapi met a lion.")
    common = make_chunk("b", 1, "A lion, a lion and another lion.")
    chunks = [*filler, rare, common]
    with LocalIndex(tmp_path / "ix", DIM) as ix:
        ix.add(chunks, vectors(chunks))
        hits = ix.search_bm25("okapi lion", 3)
        assert_well_formed(hits, "bm25")
        assert ids(hits)[:2] == [rare.chunk_id, common.chunk_id]
        once = make_chunk("c", 1, "An okapi met a lion and a zebra.")  # same length, once
        ix.add([once], vectors([once]))
        scores = {h.chunk.chunk_id: h.score for h in ix.search_bm25("okapi", 5)}
        assert set(scores) == {rare.chunk_id, once.chunk_id}
        assert scores[rare.chunk_id] > scores[once.chunk_id] > 0


def test_local_bm25_filter_and_k_beyond_matches(tmp_path: Path) -> None:
    """The filter applies before bm25s' top-k; zero scores are never returned as hits."""
    with LocalIndex(tmp_path / "ix", DIM) as ix:
        ix.add(CORPUS, vectors(CORPUS))
        # Best overall for this query is outside the filter; k=1 still finds the best inside.
        assert ids(ix.search_bm25("aardvark burrowing property", 1)) == [AARDVARK]
        inside = ix.search_bm25("aardvark burrowing property", 1, doc_ids=["crpc"])
        assert ids(inside) == ["crpc_S1#0"]
        # k larger than the corpus (bm25s itself refuses that) and than the matches.
        hits = ix.search_bm25("property", 1000)
        assert set(ids(hits)) == {"bns_S2#0", "ipc_S2#0", "crpc_S1#0"}
        assert all(h.score > 0 for h in hits)
        filtered = ix.search_bm25("property", 1000, doc_ids=["bns", "ipc"])
        assert set(ids(filtered)) == {"bns_S2#0", "ipc_S2#0"}
        assert ix.search_bm25("aardvark", 5, doc_ids=["bns"]) == []  # masked, not padded


def test_local_bm25_scores_follow_changes(tmp_path: Path) -> None:
    """After adds, a replacement, a delete, compaction and reopening, the scores are those
    of a fresh bm25s index (Lucene BM25, same k1, b) over just the live chunks."""
    import bm25s

    from sleuth.store.local_index import BM25_B, BM25_K1

    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(40)]
    chunks = [
        make_chunk(f"d{i % 5}", i, " ".join(rng.choice(words, size=int(rng.integers(3, 30)))))
        for i in range(60)
    ]
    replaced = chunks[7].model_copy(update={"text": "w1 w1 w1 unique-term"})
    live = [replaced if c.chunk_id == replaced.chunk_id else c for c in chunks]
    live = [c for c in live if c.doc_id != "d3"]

    def check(ix: LocalIndex) -> None:
        ref = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
        ref.index([tokenize(c.index_text()) for c in live], show_progress=False)
        for query in ["w1", "w2 w3 w3", "w5 w17 w39 nothing", "Section D3", "unique-term"]:
            want = ref.get_scores(tokenize(query))
            got = {h.chunk.chunk_id: h.score for h in ix.search_bm25(query, len(chunks))}
            assert set(got) == {c.chunk_id for c, w in zip(live, want, strict=True) if w > 0}
            for c, w in zip(live, want, strict=True):
                if w > 0:
                    assert got[c.chunk_id] == pytest.approx(float(w), rel=1e-5)

    path = tmp_path / "ix"
    with LocalIndex(path, DIM) as ix:
        ix.add(chunks[:40], vectors(chunks[:40]))
        ix.search_bm25("w1", 3)  # builds the bm25s index; the next changes must rebuild it
        ix.add(chunks[40:], vectors(chunks[40:]))
        ix.add([replaced], vectors([replaced]))
        assert ix.delete_document("d3") == 12
        check(ix)
        ix.compact()  # drops the terms only deleted chunks had: term ids change
        check(ix)
    with LocalIndex(path, DIM) as ix:
        check(ix)


def test_local_files_and_dim_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    with LocalIndex(path, DIM) as ix:
        ix.add(CORPUS, vectors(CORPUS))
    meta = json.loads((path / "meta.json").read_text())
    assert meta["dim"] == DIM and meta["format_version"] == 1
    with pytest.raises(EmbeddingModelMismatch):
        LocalIndex(path, DIM * 2)
    (path / "meta.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(ConfigError):
        LocalIndex(path, DIM)


def test_local_compaction_keeps_content(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    with LocalIndex(path, DIM) as ix:
        ix.add(CORPUS, vectors(CORPUS))
        ix.delete_document("crpc")
        before = ix.search_hybrid("property theft", embed_one("theft"), 10)
        ix.compact()
        assert ix.search_hybrid("property theft", embed_one("theft"), 10) == before
    names = sorted(p.name for p in path.iterdir())
    assert names == [
        ".lock",
        "chunks-00000002.jsonl",
        "journal-00000002.jsonl",
        "meta.json",
        "terms-00000002.npz",
        "vectors-00000002.npy",
    ]
    assert (path / "journal-00000002.jsonl").stat().st_size == 0
    with LocalIndex(path, DIM) as ix:
        assert ix.search_hybrid("property theft", embed_one("theft"), 10) == before


def test_local_two_instances_see_each_others_changes(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    with LocalIndex(path, DIM) as a, LocalIndex(path, DIM) as b:
        a.add(CORPUS, vectors(CORPUS))
        assert b.count() == len(CORPUS)
        assert b.delete_document("ipc") == 2
        assert a.search_bm25("aardvark", 3) == []
        a.compact()
        b.add(CORPUS[3:4], vectors(CORPUS[3:4]))
        assert ids(a.search_bm25("aardvark", 3)) == [AARDVARK]
        assert a.count() == b.count() == len(CORPUS) - 1


def test_local_sees_changes_made_by_another_process(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    script = f"""
import numpy as np
from sleuth.store.local_index import LocalIndex
from sleuth.types import Chunk
with LocalIndex({str(path)!r}, {DIM}) as ix:
    assert ix.count() == {len(CORPUS)}
    print(ix.delete_document("ipc"))
    c = Chunk(chunk_id="new#0", source_id="new", doc_id="new", title_path=[],
              text="A wombat statute.", position=0)
    ix.add([c], np.eye({DIM}, dtype=np.float32)[:1])
    ix.compact()
"""
    with LocalIndex(path, DIM) as ix:
        ix.add(CORPUS, vectors(CORPUS))
        assert ix.search_bm25("wombat", 3) == []
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "2"
        assert ix.count() == len(CORPUS) - 2 + 1
        assert ids(ix.search_bm25("wombat", 3)) == ["new#0"]
        assert ix.search_bm25("aardvark", 3) == []


def test_local_concurrent_searches_and_writes(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    with LocalIndex(tmp_path / "ix", DIM) as ix:
        ix.add(CORPUS, vectors(CORPUS))

        def search() -> None:
            try:
                for _ in range(30):
                    hits = ix.search_hybrid("property theft", embed_one("theft"), 5)
                    assert len(hits) == 5
                    assert_well_formed(hits, "hybrid")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def write() -> None:
            try:
                for i in range(15):
                    c = make_chunk("tmp", i, f"Temporary theft note {i}.")
                    ix.add([c], vectors([c]))
                    if i % 5 == 4:
                        ix.delete_document("tmp")
            except BaseException as exc:  # pragma: no cover
                errors.append(exc)

        threads = [threading.Thread(target=search) for _ in range(3)]
        threads.append(threading.Thread(target=write))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert ix.count() == len(CORPUS)


def test_local_ignores_a_torn_journal_record(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    with LocalIndex(path, DIM) as ix:
        ix.add(CORPUS, vectors(CORPUS))
    journal = next(path.glob("journal-*.jsonl"))
    good = journal.stat().st_size
    with open(journal, "ab") as f:
        f.write(b'{"op":"delete","doc_')  # a crash in the middle of a write
    with LocalIndex(path, DIM) as ix:
        assert ix.count() == len(CORPUS)
        assert journal.stat().st_size == good  # truncated by the (writer) open
        assert ix.delete_document("bns") == 3
    with LocalIndex(path, DIM) as ix:
        assert ix.count() == len(CORPUS) - 3


def test_local_chunk_without_tokens(tmp_path: Path) -> None:
    bare = Chunk(
        chunk_id="x#0", source_id="x", doc_id="x", title_path=[], text="the of", position=0
    )
    with LocalIndex(tmp_path / "ix", DIM) as ix:
        ix.add([bare], vectors([bare]))
        assert ix.search_bm25("anything", 3) == []
        assert ids(ix.search_dense(vectors([bare])[0], 3)) == ["x#0"]


# --------------------------------------------------------------------------- factory


def test_open_index_local(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", index_backend="local")
    ix = open_index(settings, "laws", DIM)
    try:
        assert isinstance(ix, LocalIndex)
        assert ix.directory == tmp_path / "data" / "indexes" / "laws"
    finally:
        ix.close()
    for bad in ["", ".", "..", "a/b", "../../etc", "x" * 300, "my laws"]:
        with pytest.raises(UserError, match="invalid collection name"):
            open_index(settings, bad, DIM)
    assert not (tmp_path / "data" / "indexes" / "etc").exists()


def test_local_drop_removes_every_file(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    ix = LocalIndex(path, DIM)
    ix.add(CORPUS, vectors(CORPUS))
    ix.drop()
    assert not path.exists()
    with pytest.raises(RuntimeError):
        ix.count()
    with LocalIndex(path, DIM) as fresh:
        assert fresh.count() == 0


@pytest.mark.skipif(not HAVE_MILVUS, reason=NO_MILVUS)
def test_open_index_milvus_lite_default_path(tmp_path: Path) -> None:
    from sleuth.store.milvus_index import MilvusIndex

    settings = Settings(data_dir=tmp_path / "data", index_backend="milvus")
    ix = open_index(settings, "my.laws-2024", DIM)
    try:
        assert isinstance(ix, MilvusIndex)
        assert ix.uri == str(tmp_path / "data" / "milvus.db")
        assert ix.name.startswith("sleuth_my_laws_2024_")
    finally:
        ix.close()


@pytest.mark.skipif(not HAVE_MILVUS, reason=NO_MILVUS)
def test_milvus_collection_names_and_dim_mismatch(tmp_path: Path) -> None:
    from sleuth.store.milvus_index import MilvusIndex, collection_name, truncate_utf8

    assert collection_name("laws") == "sleuth_laws"
    assert collection_name("a-b") != collection_name("a_b")
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,254}", collection_name("ü" * 400))
    assert truncate_utf8("aé" * 3, 4) == "aéa"
    assert truncate_utf8("éé", 3) == "é"
    uri = str(tmp_path / "m.db")
    MilvusIndex(uri, "c", DIM).close()
    with pytest.raises(EmbeddingModelMismatch):
        MilvusIndex(uri, "c", DIM * 2)
    with pytest.raises(ConfigError):
        MilvusIndex(str(tmp_path / "no-suffix"), "c", DIM)


def test_missing_milvus_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from sleuth.errors import MissingExtraError
    from sleuth.store.milvus_index import MilvusIndex

    monkeypatch.setitem(sys.modules, "pymilvus", None)  # makes the import fail
    with pytest.raises(MissingExtraError, match=r"sleuth\[milvus\]"):
        MilvusIndex(str(Path("never.db")), "c", DIM)


def test_embedder_is_normalised() -> None:
    v = embed(["murder theft", "", "the"])
    assert v.shape == (3, DIM) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0)
    assert math.isclose(float(v[0] @ v[0]), 1.0, rel_tol=1e-6)


# ------------------------------------------------------- LocalIndex: any language (issue 12)

WORLD = [
    make_chunk("ja", 1, "東京都は日本の首都です。"),
    make_chunk("ja", 2, "大阪は食べ物で有名な都市です。"),
    make_chunk("zh", 1, "北京是中华人民共和国的首都。"),
    make_chunk("zh", 2, "上海是一个港口城市。"),
    make_chunk("ko", 1, "서울은 대한민국의 수도입니다."),
    make_chunk("ko", 2, "부산은 항구 도시입니다."),
    make_chunk("ar", 1, "القانون المدني ينظم العقود بين الأفراد."),
    make_chunk("ar", 2, "المحكمة العليا تنظر في الطعون."),
    make_chunk("de", 1, "Aschenbrödel ist ein Märchen der Brüder Grimm."),
    make_chunk("fr", 1, "The cafe serves coffee to the resume committee."),
    make_chunk("em", 1, "Pizza night 🍕 is on Friday."),
    make_chunk("em", 2, "Thumbs up 👍 from the team."),
    make_chunk("en", 1, "Whoever commits theft shall be punished with imprisonment."),
    make_chunk("en", 2, "The punishment for cheating is a fine."),
]


@pytest.fixture(
    params=[
        "local",
        pytest.param("postgres", marks=pytest.mark.skipif(not HAVE_POSTGRES, reason=NO_POSTGRES)),
    ]
)
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Index]:
    """The multilingual corpus on each backend that analyses text with sleuth's analyzer
    (Milvus analyses server-side: see :mod:`sleuth.store.milvus_index`)."""
    if request.param == "local":
        ix: Index = LocalIndex(tmp_path / "world", DIM)
    else:
        from sleuth.store.postgres_index import PostgresIndex

        ix = PostgresIndex(new_database(request.getfixturevalue("pg_url")), "world", DIM)
    ix.add(WORLD, vectors(WORLD))
    yield ix
    ix.close()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("東京", "ja_S1"),  # Han bigram inside a longer run
        ("首都はどこ", "ja_S1"),  # shares the bigram 首都 (zh_S1 too: ranked after)
        ("大阪", "ja_S2"),
        ("上海", "zh_S2"),
        ("中华人民共和国", "zh_S1"),
        ("서울", "ko_S1"),
        ("항구", "ko_S2"),
        ("القانون المدني", "ar_S1"),
        ("المحكمة", "ar_S2"),
        ("Aschenbrodel", "de_S1"),  # without the umlaut finds it with
        ("Aschenbrödel", "de_S1"),
        ("Märchen", "de_S1"),
        ("café résumé", "fr_S1"),  # with accents finds it without
        ("🍕", "em_S1"),
        ("👍🏽", "em_S2"),  # a skin tone does not matter
    ],
)
def test_bm25_reads_every_language(world: Index, query: str, expected: str) -> None:
    hits = world.search_bm25(query, 3)
    assert hits and hits[0].chunk.source_id == expected, (query, ids(hits))


def test_bm25_cjk_needs_the_bigram(world: Index) -> None:
    """One shared character is not a match: 首都 is, 首 alone (a one-character query) only
    matches a one-character run."""
    assert {h.chunk.source_id for h in world.search_bm25("首都", 5)} == {"ja_S1", "zh_S1"}
    assert world.search_bm25("京阪", 5) == []


def test_bm25_english_stemming_unchanged(world: Index) -> None:
    """Issue 12: English keeps its stop words and Snowball stems."""
    assert {h.chunk.source_id for h in world.search_bm25("punished", 5)} == {"en_S1", "en_S2"}
    assert {h.chunk.source_id for h in world.search_bm25("punishments", 5)} == {
        "en_S1",
        "en_S2",
    }
    assert tokenize("The murdered persons of the State") == ["murder", "person", "state"]


def test_local_index_rebuilds_bm25_made_by_an_older_analyzer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index saved by the ASCII-only analyzer (no "analyzer" in meta.json) gets its BM25
    terms recounted from the stored chunks when opened, and saved with the new version."""
    import sleuth.store.local_index as local_index
    from sleuth.retrieval.text import ANALYZER_VERSION

    def old_tokenize(text: str) -> list[str]:
        return [w for w in re.findall(r"\w+", text.lower()) if w not in {"the", "is", "of"}]

    directory = tmp_path / "old"
    with monkeypatch.context() as m:
        m.setattr(local_index, "tokenize", old_tokenize)
        with LocalIndex(directory, DIM) as ix:
            ix.add(WORLD, vectors(WORLD))
            ix.compact()
            assert ix.search_bm25("Aschenbrodel", 3) == []
    meta_path = directory / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["analyzer"]
    meta_path.write_text(json.dumps(meta))
    with LocalIndex(directory, DIM) as ix:
        assert ids(ix.search_bm25("Aschenbrodel", 3)) == ["de_S1#0"]
        assert ids(ix.search_bm25("東京", 3)) == ["ja_S1#0"]
        assert ix.count() == len(WORLD)
    meta = json.loads(meta_path.read_text())
    assert meta["analyzer"] == ANALYZER_VERSION and meta["generation"] > 1
    with LocalIndex(directory, DIM) as ix:  # saved: opened again without a rebuild
        assert not ix._stale_analyzer
        assert ids(ix.search_bm25("Aschenbrodel", 3)) == ["de_S1#0"]


def test_local_journal_keeps_term_counts_so_opening_tokenises_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index whose chunks are still in its journal (a small collection, never compacted)
    opens from the term counts the journal holds: nothing is tokenised again, and BM25 ranks
    as it did in the process that added the chunks."""
    import sleuth.store.local_index as local_index

    directory = tmp_path / "journalled"
    with LocalIndex(directory, DIM) as ix:
        ix.add(CORPUS, vectors(CORPUS))
        expected = [(h.chunk.chunk_id, h.score) for h in ix.search_bm25("dishonestly property", 5)]
    assert next(directory.glob("journal-*.jsonl")).stat().st_size > 0

    def no_tokenize(text: str) -> list[str]:
        raise AssertionError(f"re-tokenised a stored chunk: {text[:40]!r}")

    with monkeypatch.context() as m:
        m.setattr(local_index, "tokenize", no_tokenize)
        with LocalIndex(directory, DIM) as ix:
            assert ix.count() == len(CORPUS)
            assert ix.get_chunks([AARDVARK])[0].chunk_id == AARDVARK
    with LocalIndex(directory, DIM) as ix:
        got = [(h.chunk.chunk_id, h.score) for h in ix.search_bm25("dishonestly property", 5)]
    assert got == expected


def test_local_journal_records_without_term_counts_are_counted_again(tmp_path: Path) -> None:
    """A journal written before records held term counts (or by another analyzer version)
    is tokenised on open, with the same BM25 result."""
    directory = tmp_path / "old-journal"
    with LocalIndex(directory, DIM) as ix:
        ix.add(CORPUS, vectors(CORPUS))
        expected = ids(ix.search_bm25("aardvark burrowing", 3))
    journal = next(directory.glob("journal-*.jsonl"))
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    for record in records:
        record.pop("terms")
        record["analyzer"] = 0
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    with LocalIndex(directory, DIM) as ix:
        assert ids(ix.search_bm25("aardvark burrowing", 3)) == expected == [AARDVARK]


# --------------------------------------------------------------------------- postgres

needs_postgres = pytest.mark.skipif(not HAVE_POSTGRES, reason=NO_POSTGRES)


@needs_postgres
def test_postgres_bm25_scores_equal_the_local_index(pg_url: str, tmp_path: Path) -> None:
    """One BM25 (same analyzer, same Lucene formula, same k1/b): the same hits with the same
    scores on both backends, after adds, a replaced chunk and a deleted document."""
    from sleuth.store.postgres_index import PostgresIndex

    corpus = CORPUS + WORLD
    with (
        LocalIndex(tmp_path / "twin", DIM) as local,
        PostgresIndex(new_database(pg_url), "twin", DIM) as pg,
    ):
        for ix in (local, pg):
            ix.add(corpus[:9], vectors(corpus[:9]))
            ix.add(corpus[9:], vectors(corpus[9:]))
            changed = [corpus[1].model_copy(update={"text": "Theft of property, twice theft."})]
            ix.add(changed, vectors(changed))
            assert ix.delete_document("ko") == 2
        for query in ("dishonestly property", "theft theft punished", "東京 首都", "aardvark"):
            want = [(h.chunk.chunk_id, h.score) for h in local.search_bm25(query, 10)]
            got = [(h.chunk.chunk_id, h.score) for h in pg.search_bm25(query, 10)]
            assert [c for c, _ in got] == [c for c, _ in want], query
            assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-4), query
        assert pg.search_bm25("서울", 5) == []  # the deleted document's terms are gone


@needs_postgres
def test_postgres_filtered_dense_search_is_exact(pg_url: str) -> None:
    """A doc_ids filter is applied before ranking, even when the allowed chunks are far
    from the query (an HNSW scan filtered afterwards could return nothing)."""
    from sleuth.store.postgres_index import PostgresIndex

    rng = np.random.default_rng(7)
    chunks = [make_chunk(f"d{i % 40}", i, f"filler text number {i}") for i in range(400)]
    vecs = rng.normal(size=(400, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    with PostgresIndex(new_database(pg_url), "filtered", DIM, ef_search=10) as ix:
        ix.add(chunks, vecs)
        query = -vecs[0]  # the farthest possible from d0's first chunk
        hits = ix.search_dense(query, 5, doc_ids=["d0"])
        want = sorted(range(0, 400, 40), key=lambda i: -float(vecs[i] @ query))[:5]
        assert [h.chunk.chunk_id for h in hits] == [chunks[i].chunk_id for i in want]
        assert ix.search_dense(query, 5, doc_ids=[]) == []


@needs_postgres
def test_postgres_dim_mismatch_and_foreign_schema(pg_url: str) -> None:
    import psycopg

    from sleuth.store.postgres_index import PostgresIndex, libpq_url, schema_name

    url = new_database(pg_url)
    with PostgresIndex(url, "dims", DIM) as ix:
        ix.add(CORPUS[:2], vectors(CORPUS[:2]))
    with pytest.raises(EmbeddingModelMismatch, match="64-d"):
        PostgresIndex(url, "dims", DIM + 1)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema_name("foreign")}"')
    with pytest.raises(ConfigError, match="not made by sleuth"):
        PostgresIndex(url, "foreign", DIM)


@needs_postgres
def test_postgres_recounts_terms_made_by_an_older_analyzer(pg_url: str) -> None:
    import psycopg

    from sleuth.store.postgres_index import PostgresIndex, libpq_url, schema_name

    url = new_database(pg_url)
    with PostgresIndex(url, "old", DIM) as ix:
        ix.add(WORLD, vectors(WORLD))
        want = [(h.chunk.chunk_id, h.score) for h in ix.search_bm25("Aschenbrodel 東京", 5)]
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:  # as an older sleuth left it
        conn.execute(f'UPDATE "{schema_name("old")}".meta SET analyzer = 1')
        conn.execute(f'TRUNCATE "{schema_name("old")}".postings')
    with PostgresIndex(url, "old", DIM) as ix:
        got = [(h.chunk.chunk_id, h.score) for h in ix.search_bm25("Aschenbrodel 東京", 5)]
        assert [c for c, _ in got] == [c for c, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-6)
        assert ix.delete_document("de") == 1  # the recounted term ids find their postings
        assert ids(ix.search_bm25("Aschenbrodel 東京", 5)) == ["ja_S1#0"]
        assert ix.search_bm25("Märchen", 5) == []


@needs_postgres
def test_postgres_failed_add_leaves_the_index_unchanged(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An add that fails half-way (here: while writing the chunk rows, after the postings)
    is rolled back whole: counts, postings and document frequencies as before."""
    from sleuth.store import postgres_index
    from sleuth.store.postgres_index import PostgresIndex

    with PostgresIndex(new_database(pg_url), "atomic", DIM) as ix:
        ix.add(CORPUS[:3], vectors(CORPUS[:3]))
        before = [(h.chunk.chunk_id, h.score) for h in ix.search_bm25("theft robbery", 5)]

        def broken(vector: np.ndarray) -> str:
            raise OSError("disk full")

        with monkeypatch.context() as m:
            m.setattr(postgres_index, "vector_literal", broken)
            with pytest.raises(OSError):
                ix.add(CORPUS[1:], vectors(CORPUS[1:]))
        assert ix.count() == 3
        assert [(h.chunk.chunk_id, h.score) for h in ix.search_bm25("theft robbery", 5)] == before


@needs_postgres
def test_postgres_two_processes_write_one_index(pg_url: str, tmp_path: Path) -> None:
    """Writers in two processes queue on the index's advisory lock: both documents land and
    the document frequencies count both."""
    from sleuth.store.postgres_index import PostgresIndex

    url = new_database(pg_url)
    PostgresIndex(url, "shared", DIM).close()
    code = (
        "import sys; sys.path[:0] = {paths!r}\n"
        "from tests.unit.test_index_conformance import by_doc, vectors\n"
        "from sleuth.store.postgres_index import PostgresIndex\n"
        "with PostgresIndex({url!r}, 'shared', {dim}) as ix:\n"
        "    for _ in range(5):\n"
        "        ix.add(by_doc({doc!r}), vectors(by_doc({doc!r})))\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code.format(paths=[root], url=url, dim=DIM, doc=doc)]
        )
        for doc in ("bns", "ipc")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with PostgresIndex(url, "shared", DIM) as ix:
        assert ix.count() == len(by_doc("bns")) + len(by_doc("ipc"))
        # "property" is in bns_S2 and ipc_S2: df 2 of N 5, as a fresh index would count it
        with LocalIndex(tmp_path / "fresh", DIM) as fresh:
            fresh.add(by_doc("bns") + by_doc("ipc"), vectors(by_doc("bns") + by_doc("ipc")))
            want = [(h.chunk.chunk_id, h.score) for h in fresh.search_bm25("property", 5)]
        got = [(h.chunk.chunk_id, h.score) for h in ix.search_bm25("property", 5)]
        assert [c for c, _ in got] == [c for c, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-4)


@needs_postgres
def test_postgres_deferred_indexes_load_then_search_the_same(pg_url: str) -> None:
    """A bulk load with the indexes built at the end answers as adds with the indexes live."""
    from sleuth.store.postgres_index import PostgresIndex

    url = new_database(pg_url)
    with PostgresIndex(url, "live", DIM) as live, PostgresIndex(url, "bulk", DIM) as bulk:
        live.add(CORPUS + WORLD, vectors(CORPUS + WORLD))
        with bulk.deferred_indexes(work_mem="64MB"):
            bulk.add(CORPUS, vectors(CORPUS))
            bulk.add(WORLD, vectors(WORLD))
        for query in ("dishonestly property", "東京", "🍕 pizza"):
            assert [(h.chunk.chunk_id, h.score) for h in bulk.search_bm25(query, 5)] == [
                (h.chunk.chunk_id, h.score) for h in live.search_bm25(query, 5)
            ]
            v = embed_one(query)  # hashed words tie often: compare the scores
            assert [h.score for h in bulk.search_dense(v, 5)] == pytest.approx(
                [h.score for h in live.search_dense(v, 5)], abs=1e-6
            )
        assert bulk.delete_document("bns") == 3  # the rebuilt key serves deletes
        assert bulk.count() == len(CORPUS) + len(WORLD) - 3


@needs_postgres
def test_postgres_bm25_reads_each_terms_champion_postings(pg_url: str) -> None:
    """With postings_per_term = 2, a term held by five chunks is read in its two postings of
    highest impact (for a one-term query: its two best BM25 hits); a rare term is read whole;
    a query of two common terms sees only each term's champions."""
    from sleuth.store.postgres_index import PostgresIndex

    texts = [
        "theft",
        "theft theft and more words here",
        "theft in a much longer sentence about many other things entirely",
        "theft theft theft",
        "a note that mentions theft once among words and an aardvark",
    ]
    chunks = [make_chunk("t", i, text) for i, text in enumerate(texts)]
    with PostgresIndex(new_database(pg_url), "champions", DIM, postings_per_term=2) as ix:
        ix.add(chunks, vectors(chunks))
        capped = ids(ix.search_bm25("theft", 5))
        assert ids(ix.search_bm25("aardvark", 5)) == ["t_S4#0"]
        ix.postings_per_term = 5000
        full = ids(ix.search_bm25("theft", 5))
        assert len(full) == 5 and full[0] == "t_S3#0"  # three times in a short text
        assert capped == full[:2]


def test_the_postgres_backend_needs_a_postgresql_database_url(tmp_path: Path) -> None:
    """The postgres backend lives in the catalog's database: a settings error names the
    variable to set (``sleuth config`` flags it, every command stops on it)."""
    from pydantic import ValidationError

    from sleuth.config import validation_messages

    for url, says in [
        (None, "set SLEUTH_DATABASE_URL to a PostgreSQL URL"),
        (f"sqlite:///{tmp_path / 'c.db'}", "needs a PostgreSQL SLEUTH_DATABASE_URL, not 'sqlite'"),
    ]:
        with pytest.raises(ValidationError) as err:
            Settings(data_dir=tmp_path, index_backend="postgres", database_url=url, _env_file=None)
        assert says in validation_messages(err.value)["index_backend"]
    ok = Settings(
        index_backend="Postgres", database_url="postgresql+psycopg://u@h/db", _env_file=None
    )
    assert ok.index_backend == "postgres"


@needs_postgres
def test_open_index_postgres_and_schema_names(pg_url: str, tmp_path: Path) -> None:
    from sleuth.store.postgres_index import PostgresIndex, schema_name

    settings = Settings(
        data_dir=tmp_path, index_backend="postgres", database_url=new_database(pg_url)
    )
    ix = open_index(settings, "my.Laws-2024", DIM)
    try:
        assert isinstance(ix, PostgresIndex)
        assert ix.schema == schema_name("my.Laws-2024") != schema_name("my_laws_2024")
        assert len(schema_name("x" * 64).encode()) <= 63
        assert not (tmp_path / "indexes").exists()
    finally:
        ix.close()


@needs_postgres
def test_postgres_unreachable_server_is_one_clear_error(tmp_path: Path) -> None:
    from sleuth.store.postgres_index import PostgresIndex

    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql+psycopg://sleuth:secret@127.0.0.1:{port}/sleuth"
    with pytest.raises(ConfigError, match="cannot open the PostgreSQL index") as err:
        PostgresIndex(url, "laws", DIM)
    assert "secret" not in str(err.value) and "refused" in str(err.value).lower()


@needs_postgres
def test_postgres_rebuilds_indexes_a_killed_bulk_load_left_out(pg_url: str) -> None:
    """A bulk load killed before its indexes were rebuilt: the next open builds them."""
    import psycopg

    from sleuth.store.postgres_index import PostgresIndex, libpq_url, schema_name

    url = new_database(pg_url)
    with PostgresIndex(url, "killed", DIM) as ix:
        ix.add(CORPUS, vectors(CORPUS))
    schema = schema_name("killed")
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:  # what a kill leaves
        conn.execute(f'DROP INDEX "{schema}".chunks_embedding_idx')
        conn.execute(f'ALTER TABLE "{schema}".postings DROP CONSTRAINT postings_pkey')
    with PostgresIndex(url, "killed", DIM) as ix:
        assert ids(ix.search_bm25("aardvark", 3)) == [AARDVARK]
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        names = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,)
            )
        }
    assert {"chunks_embedding_idx", "postings_pkey"} <= names
