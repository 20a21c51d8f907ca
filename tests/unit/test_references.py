"""Tests of sleuth.ingest.references: extraction and resolution of cross-references."""

from __future__ import annotations

from pathlib import Path

import pytest

from sleuth.ingest.chunking import chunk_document
from sleuth.ingest.loaders import load_file
from sleuth.ingest.pydoc_corpus import load_pydoc_topics
from sleuth.ingest.references import extract_references, resolve_references, title_key
from sleuth.types import Chunk

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
STATUTES = DATA / "statutes"
needs_statutes = pytest.mark.skipif(not STATUTES.is_dir(), reason="shared statute data missing")


def _chunk(source_id: str, text: str, title: str = "", doc_id: str = "", position: int = 0):
    doc_id = doc_id or source_id.split("_")[0]
    title_path = [doc_id, title] if title else [doc_id]
    return Chunk(
        chunk_id=f"{source_id}#0",
        source_id=source_id,
        doc_id=doc_id,
        title_path=title_path,
        text=text,
        position=position,
    )


def _targets(chunk: Chunk) -> list[tuple[str, str | None]]:
    return [(r.target_text, r.target_id) for r in chunk.references]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("punishable under section 103.", ["section 103"]),
        ("sections 103 and 104 apply", ["section 103", "section 104"]),
        ("under sections 64 to 66,", ["section 64", "section 65", "section 66"]),
        ("sections 64, 65 or 70", ["section 64", "section 65", "section 70"]),
        ("as in sub-section (2) of section 302, the", ["section 302"]),
        ("sub-section\r\n(1)\r\nof section 2 of this Sanhita", ["section 2"]),
        (
            "following sections,\nnamely, 103, 105, 307, sub-sections",
            ["section 103", "section 105", "section 307"],
        ),
        (
            "with section 474 of the Bharatiya Nagarik\nSuraksha Sanhita, 2023.",
            ["section 474 of the Bharatiya Nagarik Suraksha Sanhita, 2023"],
        ),
        ("section 5 of the Act", ["section 5"]),  # "the Act" is this act
        ("the Unicode Standard section 3.13 says", []),
        ("this section and sub-section (2)", []),
        ("See section Naming and binding for details.", ["section Naming and binding"]),
        ("(see also section The import\nstatement).", ["section The import statement"]),
        ("See section Identifiers (Names) for", ["section Identifiers (Names)"]),
        (
            "See section Identifiers and keywords for X and section Naming and binding for Y",
            ["section Identifiers and keywords", "section Naming and binding"],
        ),
        ("see section for details", []),
        (
            "Read [this](#install-steps), [that](other.md#x), [doc](b.md) and [web](https://x.org/a.md)",
            ["[this](#install-steps)", "[that](other.md#x)", "[doc](b.md)"],
        ),
        ("![image](pic.md)", []),
        ("section 103 and again section 103", ["section 103"]),
    ],
)
def test_extract_references(text: str, expected: list[str]) -> None:
    assert extract_references(text) == expected


def test_title_key() -> None:
    assert title_key("Section 103. Punishment for murder.") == "punishment for murder"
    assert title_key('The "yield" statement') == "the yield statement"
    assert title_key("4.2. Naming and binding") == "naming and binding"


def test_numeric_references_resolve_within_the_act() -> None:
    chunks = [
        _chunk("BNS_S103", "Whoever commits murder shall be punished. See section 103."),
        _chunk(
            "BNS_S105", "Subject to section 103 and sections 101 to 103, and section 103 again."
        ),
        _chunk("BNS_S101", "Murder is defined."),
        _chunk("BNS_S102", ""),  # a text-less stand-in is a target only
        _chunk("CPA_S103", "Consumer text citing section 999."),
        _chunk("BNS_S106", "as per sub-section (2) of section 302, read with section 102."),
    ]
    resolve_references(chunks)
    assert _targets(chunks[0]) == []  # no self-reference
    assert _targets(chunks[1]) == [
        ("section 103", "BNS_S103"),
        ("section 101", "BNS_S101"),
        ("section 102", "BNS_S102"),
    ]
    assert all(r.source_id == "BNS_S105" for r in chunks[1].references)
    assert _targets(chunks[4]) == [("section 999", None)]
    assert _targets(chunks[5]) == [("section 302", None), ("section 102", "BNS_S102")]
    chunks.append(_chunk("BNS_S302", "Section three hundred two."))
    resolve_references(chunks)  # re-resolution replaces the references
    assert _targets(chunks[5]) == [("section 302", "BNS_S302"), ("section 102", "BNS_S102")]


def test_named_act_resolves_to_that_act_or_nothing() -> None:
    chunks = [
        _chunk(
            "BNS_S5",
            "under section 474 of the Bharatiya Nagarik Suraksha Sanhita, 2023 and section 2 of "
            "the Dowry Prohibition Act, 1961 and section 7 of this Sanhita",
        ),
        _chunk("BNSS_S474", "Commutation."),
        _chunk("BNS_S2", "Definitions."),
        _chunk("BNS_S7", "Other."),
    ]
    resolve_references(chunks)
    assert _targets(chunks[0]) == [
        ("section 474 of the Bharatiya Nagarik Suraksha Sanhita, 2023", "BNSS_S474"),
        ("section 2 of the Dowry Prohibition Act, 1961", None),  # not BNS_S2
        ("section 7", "BNS_S7"),
    ]


def test_title_references() -> None:
    chunks = [
        _chunk(
            "ref_intro",
            "See section Naming and binding for details and see section Missing.",
            "Intro",
            "ref",
            0,
        ),
        _chunk("ref_exec", "", "Execution model", "ref", 1),
        Chunk(
            chunk_id="ref_binding#0",
            source_id="ref_binding",
            doc_id="ref",
            title_path=["ref", "Naming and binding", "Binding of names"],
            text="Names bind.",
            position=2,
        ),
        _chunk(
            "ref_stmt",
            "see also section The IMPORT statement.",
            "7.11. The import statement.",
            "ref",
            3,
        ),
    ]
    resolve_references(chunks)
    # "Naming and binding" has no text of its own: its first sub-section is the target
    assert _targets(chunks[0]) == [
        ("section Naming and binding", "ref_binding"),
        ("section Missing", None),
    ]
    assert _targets(chunks[3]) == []  # would be a self-reference


def test_title_reference_prefers_the_same_document() -> None:
    chunks = [
        _chunk("a_calls", "Calls in A.", "Calls", "a", 0),
        _chunk("b_calls", "Calls in B.", "Calls", "b", 0),
        _chunk("b_other", "see section Calls", "Other", "b", 1),
    ]
    resolve_references(chunks)
    assert _targets(chunks[2]) == [("section Calls", "b_calls")]


def test_link_references() -> None:
    chunks = [
        _chunk(
            "guide_intro",
            "Go to [steps](#install-steps), [x](other.md#usage-notes), "
            "[y](other.md), [z](missing.md#a) and [w](#nowhere).",
            "Intro",
            "guide",
            0,
        ),
        _chunk("guide_install", "Steps.", "Install steps", "guide", 1),
        _chunk("other_top", "Top.", "Other", "other", 0),
        _chunk("other_usage", "Use.", "Usage notes", "other", 1),
    ]
    resolve_references(chunks)
    assert _targets(chunks[0]) == [
        ("[steps](#install-steps)", "guide_install"),
        ("[x](other.md#usage-notes)", "other_usage"),
        ("[y](other.md)", "other_top"),
        ("[z](missing.md#a)", None),
        ("[w](#nowhere)", None),
    ]


@pytest.fixture(scope="module")
def statute_chunks() -> dict[str, list[Chunk]]:
    if not STATUTES.is_dir():
        pytest.skip("shared statute data missing")
    chunks: list[Chunk] = []
    for path in sorted(STATUTES.glob("the_*.json")):
        chunks.extend(chunk_document(load_file(path)))
    resolve_references(chunks)
    by_source: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_source.setdefault(chunk.source_id, []).append(chunk)
    return by_source


def _section_targets(by_source: dict[str, list[Chunk]], source_id: str) -> dict[str, str | None]:
    return {r.target_text: r.target_id for c in by_source[source_id] for r in c.references}


@needs_statutes
def test_real_bns_references(statute_chunks: dict[str, list[Chunk]]) -> None:
    # BNS 212: "... punishable under any of the following sections, namely, 103, 105, ..."
    assert _section_targets(statute_chunks, "BNS_S212")["section 103"] == "BNS_S103"
    # BNS 66: "... sub-section (2) of section 64 ..."
    assert _section_targets(statute_chunks, "BNS_S66")["section 64"] == "BNS_S64"
    # BNS 68: "sub-section (2) of\r\nsection 64" across a line break
    assert _section_targets(statute_chunks, "BNS_S68")["section 64"] == "BNS_S64"
    # BNSS 305: "sub-section\n(1)\nof section 302"
    assert _section_targets(statute_chunks, "BNSS_S305")["section 302"] == "BNSS_S302"
    # BNS 5 cites the BNSS by name
    bns5 = _section_targets(statute_chunks, "BNS_S5")
    assert bns5 == {"section 474 of the Bharatiya Nagarik Suraksha Sanhita, 2023": "BNSS_S474"}
    # BNS 80 cites another act, absent from the collection
    assert _section_targets(statute_chunks, "BNS_S80") == {
        "section 2 of the Dowry Prohibition Act, 1961": None
    }


@needs_statutes
def test_real_references_are_clean(statute_chunks: dict[str, list[Chunk]]) -> None:
    refs = [r for chunks in statute_chunks.values() for c in chunks for r in c.references]
    assert len(refs) > 1000
    assert sum(r.target_id is not None for r in refs) / len(refs) > 0.9
    for chunks in statute_chunks.values():
        for chunk in chunks:
            targets = [r.target_id or r.target_text for r in chunk.references]
            assert len(targets) == len(set(targets))
            assert chunk.source_id not in targets


def test_pydoc_see_section_references_resolve() -> None:
    pytest.importorskip("pydoc_data.topics")
    chunks = chunk_document(load_pydoc_topics())
    resolve_references(chunks)
    refs = {(r.source_id, r.target_text): r.target_id for c in chunks for r in c.references}
    assert refs[("pyref_assignment", "section The standard type hierarchy")] == "pyref_types"
    naming = [t for (s, text), t in refs.items() if text == "section Naming and binding"]
    assert naming and all(t is not None and "binding" in t for t in naming)
    resolved = [t for (_, text), t in refs.items() if text.startswith("section ") and t]
    assert len(resolved) >= 10


def test_link_anchor_may_name_a_source_id() -> None:
    chunks = [
        _chunk("BNS_S105", "As in [murder](#bns_s103).", "Culpable homicide", "BNS"),
        _chunk("BNS_S103", "Murder.", "Punishment for murder", "BNS"),
    ]
    resolve_references(chunks)
    assert _targets(chunks[0]) == [("[murder](#bns_s103)", "BNS_S103")]
