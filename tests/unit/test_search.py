"""Knowledge-base search: explicitly named sections come first in hybrid search."""

from __future__ import annotations

import numpy as np

from sleuth.ingest.references import SectionLookup
from sleuth.types import Chunk
from tests.helpers import make_app, make_document, make_service


def _stub(source_id: str, doc_id: str, title: str, position: int) -> Chunk:
    return Chunk(
        chunk_id=f"{source_id}#0",
        source_id=source_id,
        doc_id=doc_id,
        title_path=[doc_id, title],
        text="",
        position=position,
    )


STUBS = [
    _stub("BNS_S26", "BNS", "Section 26. Act not intended to cause death.", 0),
    _stub("BNS_S103", "BNS", "Section 103. Punishment for murder.", 1),
    _stub("BNSS_S26", "BNSS", "Section 26. Mode of conferring powers.", 0),
    _stub("pyref_naming", "pyref", "Naming and binding", 0),
]


def test_query_naming_an_act_resolves_to_that_act_only() -> None:
    query = "What does Section 26 of The Bharatiya Nagarik Suraksha Sanhita, 2023 require?"
    assert SectionLookup(STUBS).named_in(query) == ["BNSS_S26"]


def test_bare_section_number_is_taken_only_when_one_act_has_it() -> None:
    lookup = SectionLookup(STUBS)
    assert lookup.named_in("explain section 26") == []  # BNS and BNSS both have one
    assert lookup.named_in("explain section 103") == ["BNS_S103"]
    assert lookup.named_in("what is section 999?") == []


def test_title_reference_and_plain_questions() -> None:
    lookup = SectionLookup(STUBS)
    assert lookup.named_in("See section Naming and binding") == ["pyref_naming"]
    assert lookup.named_in("What is the punishment for murder?") == []


def test_hybrid_search_puts_the_named_section_first(tmp_path) -> None:
    service = make_service(tmp_path)
    kb = service.kb
    plain = kb.search("test", "punishment", k=3)
    assert plain[0].chunk.source_id != "BNS_S303"
    named = kb.search("test", "what does section 303 say about punishment", k=3)
    assert named[0].chunk.source_id == "BNS_S303"
    assert named[0].score == 1.0
    assert [h.rank for h in named] == [1, 2, 3]
    assert [h.chunk.source_id for h in named].count("BNS_S303") == 1
    # the BM25-only ranking is left as the index returns it
    query = "what does section 303 say about punishment"
    bm25 = kb.search("test", query, k=3, mode="bm25")
    assert bm25 == kb.index("test").search_bm25(query, 3)


def test_named_section_respects_the_document_filter_and_new_documents(tmp_path) -> None:
    app = make_app(tmp_path)
    query = "section 303 of the Indian Penal Code"
    assert app.kb.search("test", query, k=5)[0].score < 1.0  # no IPC document yet
    other = {"IPC_S303": ("Old theft.", "Old law on theft of movable property.")}
    app.pipeline.ingest_documents([make_document(other, doc_id="IPC")], "test")
    hits = app.kb.search("test", query, k=5, doc_ids=["IPC"])
    assert {h.chunk.doc_id for h in hits} == {"IPC"}
    assert hits[0].chunk.source_id == "IPC_S303"
    assert hits[0].score == 1.0  # the cached section lookup saw the new document
    assert app.kb.search("test", query, k=5, doc_ids=["BNS"])[0].chunk.doc_id == "BNS"


def test_a_citation_id_typed_as_the_query_finds_its_section(tmp_path) -> None:
    service = make_service(tmp_path)
    hits = service.kb.search("test", "BNS_S101", k=3)
    assert hits[0].chunk.source_id == "BNS_S101"
    response = service.execute_agentic_search("BNS_S101", "test")
    assert [c.source_id for c in response.answer.citations][:1] == ["BNS_S101"]


def test_a_query_is_embedded_once_and_the_cache_is_bounded(tmp_path, monkeypatch) -> None:
    import sleuth.retrieval.search as search

    kb = make_service(tmp_path).kb
    embedder = kb.embedder
    embedder.calls.clear()  # type: ignore[attr-defined]
    first = kb.search("test", "punishment for theft", k=3)
    again = kb.search_sections("test", "punishment for theft", k=3)
    assert embedder.calls == [["punishment for theft"]]  # type: ignore[attr-defined]
    assert [h.chunk.chunk_id for h in again][:1] == [first[0].chunk.chunk_id]

    batch = kb.embed_queries(["murder", "punishment for theft", "murder", "cheating"])
    assert embedder.calls[-1] == ["murder", "cheating"]  # type: ignore[attr-defined]
    assert batch.shape == (4, embedder.dim)
    assert np.array_equal(batch[0], batch[2])
    assert np.array_equal(batch[1], embedder.embed(["punishment for theft"])[0])

    monkeypatch.setattr(search, "QUERY_VECTOR_CACHE", 2)
    kb.embed_queries(["robbery"])  # over the bound: the least recently used go
    embedder.calls.clear()  # type: ignore[attr-defined]
    kb.embed_queries(["robbery", "cheating", "murder"])
    assert embedder.calls == [["murder"]]  # type: ignore[attr-defined]
