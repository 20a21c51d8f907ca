"""Tests of sleuth.ingest.chunking: structure-aware chunks, ids, overlap, determinism."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from sleuth.ingest.chunking import assign_source_ids, chunk_document, slugify, split_text
from sleuth.ingest.loaders import load_file
from sleuth.ingest.pydoc_corpus import load_pydoc_topics
from sleuth.types import Document, Section

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
STATUTES = DATA / "statutes"


def _doc(*sections: Section, doc_id: str = "guide") -> Document:
    return Document(
        doc_id=doc_id, path="x", title="Guide", content_hash="0", sections=list(sections)
    )


def _long_text(n_sentences: int = 40) -> str:
    return " ".join(
        f"Sentence number {i} talks about topic {i % 7} with a few extra filler words here."
        for i in range(n_sentences)
    )


def test_short_section_is_one_chunk() -> None:
    doc = _doc(Section(title_path=["Guide", "Intro"], text="  Hello world.\n", source_id="G_1"))
    [chunk] = chunk_document(doc)
    assert (chunk.chunk_id, chunk.source_id, chunk.part, chunk.position) == ("G_1#0", "G_1", 0, 0)
    assert chunk.text == "Hello world."
    assert chunk.title_path == ["Guide", "Intro"]
    assert chunk.doc_id == "guide"


def test_long_section_splits_at_sentences_with_overlap() -> None:
    text = _long_text()
    doc = _doc(
        Section(title_path=["Guide", "A"], text="Short one.", source_id="S_A"),
        Section(title_path=["Guide", "B"], text=text, source_id="S_B", metadata={"k": 1}),
    )
    chunks = chunk_document(doc, chunk_words=60, overlap_words=15)
    assert chunks[0].chunk_id == "S_A#0"
    parts = chunks[1:]
    assert len(parts) > 3
    assert [c.chunk_id for c in parts] == [f"S_B#{i}" for i in range(len(parts))]
    assert [c.part for c in parts] == list(range(len(parts)))
    assert [c.position for c in chunks] == list(range(len(chunks)))
    assert all(c.source_id == "S_B" and c.metadata == {"k": 1} for c in parts)
    assert all(len(c.text.split()) <= 60 for c in parts)
    sentences = re.findall(r"Sentence number \d+ .*?here\.", text)
    for part in parts:  # whole sentences only
        assert part.text.startswith("Sentence number ") and part.text.endswith("here.")
    covered = " ".join(c.text for c in parts)
    assert all(s in covered for s in sentences)
    for previous, current in itertools.pairwise(parts):
        first_sentence = re.match(r"Sentence number \d+ .*?here\.", current.text).group(0)
        assert first_sentence in previous.text  # ~15 words repeated (one 14-word sentence)


def test_no_overlap_when_disabled() -> None:
    parts = split_text(_long_text(), chunk_words=60, overlap_words=0)
    starts = [re.match(r"Sentence number (\d+)", p).group(1) for p in parts]
    assert len(set(starts)) == len(starts)
    assert sum(len(p.split()) for p in parts) == len(_long_text().split())


def test_sentence_splitter_handles_abbreviations_and_clauses() -> None:
    clause = "{} The provision in Sec. 3 of the Act applies to No. 5 and S.O. 850(E) equally."
    text = "\n".join(clause.format(f"({i})") for i in range(1, 9))
    parts = split_text(text, chunk_words=40, overlap_words=0)
    assert len(parts) > 1
    for part in parts:
        assert re.match(r"\(\d\) The provision", part)  # cut at the clause starts only
        assert "Sec. 3 of the Act" in part


def test_line_breaks_inside_a_sentence_are_kept() -> None:
    text = "(1) First clause runs\nover a line break. " * 30
    parts = split_text(text, chunk_words=50, overlap_words=5)
    assert all(p.startswith("(1) First clause runs\nover") for p in parts)


def test_oversized_sentence_is_cut_by_words() -> None:
    text = "word " * 500
    parts = split_text(text, chunk_words=100, overlap_words=20)
    assert [len(p.split()) for p in parts] == [100, 100, 100, 100, 100, 100]
    assert split_text("   \n ", 100, 20) == []


def test_whitespace_sections_dropped_and_ids_derived() -> None:
    doc = _doc(
        Section(title_path=["Guide"], text="Preamble."),
        Section(title_path=["Guide", "Install"], text="   \n\t"),
        Section(title_path=["Guide", "Usage"], text="First usage."),
        Section(title_path=["Guide", "Ünïcode Usage!"], text="Second usage."),
        Section(title_path=["Guide", "Usage"], text="Third usage."),
        Section(title_path=["Guide", "Explicit"], text="Has an id.", source_id="guide_usage_3"),
    )
    chunks = chunk_document(doc)
    assert [c.source_id for c in chunks] == [
        "guide",  # the untitled preamble: the doc_id itself, not "guide_guide"
        "guide_usage",
        "guide_unicode_usage",
        "guide_usage_2",
        "guide_usage_3",
    ]
    assert [c.text for c in chunks][1] == "First usage."
    assert assign_source_ids(doc)[1] is None


def test_an_untitled_section_gets_the_doc_id() -> None:
    # a section titled like the document (or without a title) is the document itself
    assert assign_source_ids(_doc(Section(title_path=["Guide"], text="Only text."))) == ["guide"]
    assert assign_source_ids(_doc(Section(title_path=[], text="Only text."))) == ["guide"]
    doc = _doc(Section(title_path=["guide"], text="x"), doc_id="guide")
    assert assign_source_ids(doc) == ["guide"]  # the slug of the title is the doc_id
    # a titled section keeps its title slug; non-ascii titles still get a section id
    doc = _doc(
        Section(title_path=["Guide"], text="intro"),
        Section(title_path=["Guide", "Usage"], text="body"),
        Section(title_path=["Guide", "概要"], text="body"),
        Section(title_path=["Guide"], text="more"),
    )
    assert assign_source_ids(doc) == ["guide", "guide_usage", "guide_section", "guide_2"]


def test_a_distinct_doc_id_flows_into_derived_source_ids() -> None:
    sections = [
        Section(title_path=["Guide"], text="intro"),
        Section(title_path=["Guide", "Usage"], text="body"),
    ]
    first = chunk_document(_doc(*sections, doc_id="guide"))
    second = chunk_document(_doc(*sections, doc_id="guide_1a2b3c"))
    assert [c.chunk_id for c in second] == ["guide_1a2b3c#0", "guide_1a2b3c_usage#0"]
    assert {c.doc_id for c in second} == {"guide_1a2b3c"}
    assert not {c.chunk_id for c in first} & {c.chunk_id for c in second}


def test_derived_ids_never_take_an_explicit_id() -> None:
    doc = _doc(
        Section(title_path=["Guide", "Usage"], text="derived"),
        Section(title_path=["Guide", "Other"], text="explicit", source_id="guide_usage"),
    )
    assert assign_source_ids(doc) == ["guide_usage_2", "guide_usage"]


def test_chunking_is_deterministic() -> None:
    doc = _doc(
        Section(title_path=["Guide", "B"], text=_long_text(30)),
        Section(title_path=["Guide", "C"], text="Tail."),
    )
    first = [c.model_dump() for c in chunk_document(doc, 50, 10)]
    second = [c.model_dump() for c in chunk_document(doc.model_copy(deep=True), 50, 10)]
    assert first == second


def test_invalid_sizes() -> None:
    doc = _doc(Section(title_path=["Guide"], text="x"))
    with pytest.raises(ValueError, match="chunk_words"):
        chunk_document(doc, chunk_words=0)
    with pytest.raises(ValueError, match="overlap_words"):
        chunk_document(doc, chunk_words=50, overlap_words=50)


def test_slugify() -> None:
    assert slugify("Section 103. Punishment for murder.") == "section_103_punishment_for_murder"
    assert slugify("Ça va — très bien") == "ca_va_tres_bien"
    long = slugify("word " * 40)
    assert len(long) <= 60 and not long.endswith("_") and long.endswith("word")
    assert slugify("!!!") == ""


@pytest.mark.skipif(not STATUTES.is_dir(), reason="shared statute data missing")
def test_statute_chunks() -> None:
    doc = load_file(STATUTES / "the_bharatiya_nyaya_sanhita_2023.json")
    chunks = chunk_document(doc, chunk_words=160, overlap_words=30)
    assert len({c.source_id for c in chunks}) == 358
    assert len({c.chunk_id for c in chunks}) == len(chunks) > 358
    assert max(len(c.text.split()) for c in chunks) <= 160
    s103 = [c for c in chunks if c.source_id == "BNS_S103"]
    assert s103[0].chunk_id == "BNS_S103#0"
    assert s103[0].title_path[-1] == "Section 103. Punishment for murder."
    s2 = [c for c in chunks if c.source_id == "BNS_S2"]
    assert len(s2) > 5 and [c.part for c in s2] == list(range(len(s2)))


def test_pydoc_chunks_have_unique_ids() -> None:
    pytest.importorskip("pydoc_data.topics")
    chunks = chunk_document(load_pydoc_topics())
    assert len({c.chunk_id for c in chunks}) == len(chunks)
    assert "pyref_assignment#0" in {c.chunk_id for c in chunks}
    assert all(c.text.strip() for c in chunks)
