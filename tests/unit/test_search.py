"""Knowledge-base search: explicitly named sections come first in hybrid search."""

from __future__ import annotations

from sleuth.ingest.references import resolve_query_references
from sleuth.types import Chunk
from tests.helpers import make_document, make_service


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
    query = "What does Section 26 of The Bharatiya Nagarik Suraksha Sanhita, 2023 say?"
    assert resolve_query_references(query, STUBS) == ["BNSS_S26"]


def test_bare_section_number_matches_every_act_having_it() -> None:
    assert resolve_query_references("explain section 26", STUBS) == ["BNS_S26", "BNSS_S26"]
    assert resolve_query_references("what is section 999?", STUBS) == []


def test_title_reference_and_plain_questions() -> None:
    assert resolve_query_references("See section Naming and binding", STUBS) == ["pyref_naming"]
    assert resolve_query_references("What is the punishment for murder?", STUBS) == []


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


def test_named_section_respects_the_document_filter(tmp_path) -> None:
    service = make_service(tmp_path)
    other = {"IPC_S303": ("Old theft.", "Old law on theft of movable property.")}
    service.pipeline.ingest_documents([make_document(other, doc_id="IPC")], "test")
    hits = service.kb.search("test", "section 303", k=5, doc_ids=["IPC"])
    assert {h.chunk.doc_id for h in hits} == {"IPC"}
    assert hits[0].chunk.source_id == "IPC_S303"
