"""Tests of sleuth.ingest.loaders (and the pydoc corpus): real files made in tmp_path."""

from __future__ import annotations

import hashlib
import io
import os
import re
from pathlib import Path

import pytest

from sleuth.errors import IngestError
from sleuth.ingest import loaders
from sleuth.ingest.loaders import (
    SUPPORTED_SUFFIXES,
    EmptyDocumentError,
    content_hash,
    distinct_doc_id,
    doc_id_for_path,
    load_file,
    split_underlined_headings,
)
from sleuth.ingest.pydoc_corpus import load_pydoc_topics
from sleuth.ingest.records import STATUTE_PROFILE, RecordOptions

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
STATUTES = DATA / "statutes"
STATUTE_FILES = {
    "the_bharatiya_nyaya_sanhita_2023.json": ("BNS", 358),
    "the_bharatiya_nagarik_suraksha_sanhita_2023.json": ("BNSS", 531),
    "the_bharatiya_sakshya_adhiniyam_2023.json": ("BSA", 170),
    "the_consumer_protection_act_2019.json": ("CPA", 107),
}
needs_statutes = pytest.mark.skipif(not STATUTES.is_dir(), reason="shared statute data missing")


def _texts(doc) -> str:
    return "\n".join(s.text for s in doc.sections)


# --- Markdown -------------------------------------------------------------------------------


def test_markdown_headings_become_title_paths(tmp_path: Path) -> None:
    path = tmp_path / "My Notes.md"
    path.write_text(
        "---\nauthor: me\n---\n"
        "Preamble line.\n\n"
        "# Guide\n\nIntro text.\n\n"
        "## Install\n\nRun pip.\n\n```bash\n# not a heading\n```\n\n"
        "### Linux\nUse apt.\n\n"
        "Setup\n-----\nSetext body.\n",
        encoding="utf-8",
    )
    doc = load_file(path)
    assert doc.doc_id == "my_notes"
    assert doc.title == "Guide"
    assert doc.content_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [s.title_path for s in doc.sections] == [
        ["Guide"],
        ["Guide"],
        ["Guide", "Install"],
        ["Guide", "Install", "Linux"],
        ["Guide", "Setup"],
    ]
    install = doc.sections[2]
    assert "# not a heading" in install.text  # fenced code is body, not a heading
    assert "author: me" not in _texts(doc)  # front matter dropped
    assert doc.sections[4].text == "Setext body."


def test_markdown_with_several_h1_keeps_file_title(tmp_path: Path) -> None:
    path = tmp_path / "two-parts.markdown"
    path.write_text("# One\nfirst\n# Two\nsecond\n", encoding="utf-8")
    doc = load_file(path)
    assert doc.title == "two parts"
    assert [s.title_path for s in doc.sections] == [["two parts", "One"], ["two parts", "Two"]]


# --- Plain text -----------------------------------------------------------------------------


def test_txt_underlined_headings(tmp_path: Path) -> None:
    path = tmp_path / "manual.txt"
    path.write_text(
        "Manual\n******\n\nPreface text.\n\nUsage\n=====\n\nUse it.\n\n"
        "Details\n-------\nDeep text.\n\nLast line of a paragraph\n\n----------\n\nafter rule\n"
        "not a title\n===========\n\nOther\n=====\nBack at level two.\n",
        encoding="utf-8",
    )
    doc = load_file(path)
    assert doc.title == "Manual"
    paths = [s.title_path for s in doc.sections]
    assert paths == [
        ["Manual"],
        ["Manual", "Usage"],
        ["Manual", "Usage", "Details"],
        ["Manual", "Other"],
    ]
    # a rule after a blank line is not a heading: it stays in the body
    assert "----------" in doc.sections[2].text
    # nor is a paragraph's last line followed by an underline
    assert "not a title\n===========" in doc.sections[2].text
    assert doc.sections[3].text == "Back at level two."


def test_txt_without_headings_is_one_section(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"first block\r\nstill first\r\n\r\nsecond block\r\n")
    doc = load_file(path)
    assert len(doc.sections) == 1
    assert doc.sections[0].title_path == ["notes"]
    assert doc.sections[0].text == "first block\nstill first\n\nsecond block"


def test_split_underlined_headings_overline_and_levels() -> None:
    text = "=====\nTop\n=====\nintro\n\nSub\n---\nbody\n"
    assert split_underlined_headings(text) == [(["Top"], "intro"), (["Top", "Sub"], "body")]
    fixed = split_underlined_headings("A\n---\na\n\nB\n===\nb\n", {"=": 1, "-": 2})
    assert fixed == [(["A"], "a"), (["B"], "b")]  # '-' is level 2, then '=' pops it


def test_binary_txt_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "blob.txt"
    path.write_bytes(b"abc\x00\x01\x02def")
    with pytest.raises(IngestError, match="binary"):
        load_file(path)


def test_cp1252_text_is_decoded(tmp_path: Path) -> None:
    path = tmp_path / "legacy.txt"
    path.write_bytes("café “quoted”".encode("cp1252"))
    assert load_file(path).sections[0].text == "café “quoted”"


# --- HTML -----------------------------------------------------------------------------------

_BOILERPLATE_HTML = """<!DOCTYPE html><html><head><title>Page Title</title>
<style>.secretstyle { color: red }</style><script>var secretscript = 1;</script></head>
<body><nav><a href="/">NAVLINK</a></nav><header>HEADERTEXT</header>
<h1>Heading One</h1><p>Alpha <b>bold</b> text.</p>
<h2>Heading Two</h2><p>Beta text.</p><pre>x = 1
# python comment</pre>
<h4>Minor</h4><p>Gamma.</p>
<footer>FOOTERTEXT</footer><noscript>NOSCRIPTTEXT</noscript></body></html>"""


def test_html_drops_script_style_nav_and_splits_by_h1_h3(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(_BOILERPLATE_HTML, encoding="utf-8")
    doc = load_file(path)
    text = _texts(doc) + " ".join(" ".join(s.title_path) for s in doc.sections)
    for junk in ("secretstyle", "secretscript", "NAVLINK", "HEADERTEXT", "FOOTERTEXT", "NOSCRIPT"):
        assert junk not in text
    assert doc.title == "Page Title"
    paths = [s.title_path for s in doc.sections]
    assert ["Page Title", "Heading One"] in paths
    assert ["Page Title", "Heading One", "Heading Two"] in paths
    two = next(s for s in doc.sections if s.title_path[-1] == "Heading Two")
    assert "Beta text." in two.text and "Gamma." in two.text  # h4 is not a section
    assert "# python comment" in two.text


def test_html_article_goes_through_trafilatura(tmp_path: Path) -> None:
    body = "Some real article sentence with enough words to count as content. " * 6
    html = (
        "<html><head><title>T</title></head><body><nav>NAVLINK</nav><article>"
        f"<h1>Main</h1><p>{body}</p><h2>Part A</h2><p>{body}</p><h3>Deep</h3><p>{body}</p>"
        "</article><div class='sidebar'><ul><li>Related 1</li></ul></div></body></html>"
    )
    path = tmp_path / "article.htm"
    path.write_text(html, encoding="utf-8")
    doc = load_file(path)
    assert [s.title_path[1:] for s in doc.sections] == [
        ["Main"],
        ["Main", "Part A"],
        ["Main", "Part A", "Deep"],
    ]
    assert "NAVLINK" not in _texts(doc)


def test_html_falls_back_when_trafilatura_finds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loaders, "_trafilatura_markdown", lambda html: "")
    path = tmp_path / "page.html"
    path.write_text(_BOILERPLATE_HTML, encoding="utf-8")
    doc = load_file(path)
    assert any(s.title_path[-1] == "Heading Two" for s in doc.sections)
    assert "Alpha bold text." in _texts(doc)
    assert "NAVLINK" not in _texts(doc)


def test_html_with_only_scripts_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "blank.html"
    path.write_text("<html><head><script>var a=1;</script></head><body><nav>x</nav></body></html>")
    with pytest.raises(EmptyDocumentError):
        load_file(path)


# --- PDF ------------------------------------------------------------------------------------


def _text_pdf(path: Path, pages: list[str]) -> Path:
    canvas = pytest.importorskip("reportlab.pdfgen.canvas")
    c = canvas.Canvas(str(path))
    c.setTitle("Report Title")
    for page in pages:
        c.drawString(72, 750, page)
        c.showPage()
    c.save()
    return path


def test_pdf_one_section_per_page(tmp_path: Path) -> None:
    path = _text_pdf(tmp_path / "report.pdf", ["Hello page one", "", "Third page text"])
    doc = load_file(path)
    assert doc.title == "Report Title"
    assert [s.title_path for s in doc.sections] == [
        ["Report Title", "Page 1"],
        ["Report Title", "Page 3"],  # the blank page has no section
    ]
    assert doc.sections[0].text == "Hello page one"
    assert doc.sections[1].metadata["page"] == 3
    assert doc.metadata["pages"] == 3


def test_pdf_encrypted_with_password_is_an_ingest_error(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    plain = _text_pdf(tmp_path / "plain.pdf", ["Secret text"])
    writer = PdfWriter()
    writer.append(PdfReader(plain))
    writer.encrypt("hunter2")
    locked = tmp_path / "locked.pdf"
    writer.write(locked)
    with pytest.raises(IngestError, match="encrypted with a password") as info:
        load_file(locked)
    assert not isinstance(info.value, EmptyDocumentError)


def test_pdf_encrypted_with_empty_user_password_loads(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    plain = _text_pdf(tmp_path / "plain.pdf", ["Readable text"])
    writer = PdfWriter()
    writer.append(PdfReader(plain))
    writer.encrypt(user_password="", owner_password="owner")
    path = tmp_path / "owner-only.pdf"
    writer.write(path)
    assert load_file(path).sections[0].text == "Readable text"


def test_corrupt_pdf_is_an_ingest_error(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.pdf"
    path.write_bytes(os.urandom(4096) + b"not a pdf")
    with pytest.raises(IngestError, match="not a readable PDF") as info:
        load_file(path)
    assert info.value.path == str(path)


def test_image_only_pdf_is_an_ingest_error(tmp_path: Path) -> None:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    writer.add_blank_page(width=200, height=200)
    buffer = io.BytesIO()
    writer.write(buffer)
    path = tmp_path / "scan.pdf"
    path.write_bytes(buffer.getvalue())
    with pytest.raises(IngestError, match="no extractable text in 2 page") as info:
        load_file(path)
    assert not isinstance(info.value, EmptyDocumentError)
    # blank pages hold no image: the reason must not claim they do
    assert "only images" not in info.value.reason
    assert "(blank or scanned pages; run OCR on scanned PDFs)" in info.value.reason


# --- DOCX -----------------------------------------------------------------------------------


def test_docx_sections_by_heading_styles(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Handbook", 0)  # the Title style
    document.add_paragraph("Intro paragraph.")
    document.add_heading("Chapter One", 1)
    document.add_paragraph("First body.")
    document.add_paragraph("Second paragraph.")
    document.add_heading("Detail", 2)
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Name", "Value"
    table.cell(1, 0).text, table.cell(1, 1).text = "speed", "fast"
    document.add_heading("Chapter Two", 1)
    document.add_paragraph("Last.")
    path = tmp_path / "handbook.docx"
    document.save(str(path))

    doc = load_file(path)
    assert doc.title == "Handbook"
    assert [s.title_path for s in doc.sections] == [
        ["Handbook"],
        ["Handbook", "Chapter One"],
        ["Handbook", "Chapter One", "Detail"],
        ["Handbook", "Chapter Two"],
    ]
    assert doc.sections[1].text == "First body.\n\nSecond paragraph."
    assert "speed | fast" in doc.sections[2].text


def test_corrupt_docx_is_an_ingest_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.docx"
    path.write_bytes(b"PK\x03\x04 this is not a real zip archive")
    with pytest.raises(IngestError, match=r"not a readable \.docx"):
        load_file(path)


def test_docx_without_text_is_empty(tmp_path: Path) -> None:
    import docx

    path = tmp_path / "blank.docx"
    docx.Document().save(str(path))
    with pytest.raises(EmptyDocumentError):
        load_file(path)


# --- JSON -----------------------------------------------------------------------------------


def test_json_list_of_records(tmp_path: Path) -> None:
    path = tmp_path / "faq.json"
    path.write_text(
        '[{"id": "q1", "title": "First", "content": "Answer one."},'
        ' {"id": "q2", "title": "Second", "content": "Answer two."}]',
        encoding="utf-8",
    )
    doc = load_file(path)
    assert doc.doc_id == "faq"
    assert [(s.source_id, s.title_path, s.text) for s in doc.sections] == [
        ("q1", ["faq", "First"], "Answer one."),
        ("q2", ["faq", "Second"], "Answer two."),
    ]


def test_jsonl_records(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"text": "one"}\n\n{"text": "two"}\n', encoding="utf-8")
    doc = load_file(path)
    assert [s.text for s in doc.sections] == ["one", "two"]


def test_json_without_records_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "none.json"
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(EmptyDocumentError, match="no records"):
        load_file(path)


# --- errors common to all types ---------------------------------------------------------------


@pytest.mark.parametrize("suffix", SUPPORTED_SUFFIXES)
@pytest.mark.parametrize("content", [b"", b"  \n\t\r\n "])
def test_empty_or_whitespace_file_is_empty_document(
    tmp_path: Path, suffix: str, content: bytes
) -> None:
    path = tmp_path / f"empty{suffix}"
    path.write_bytes(content)
    with pytest.raises(EmptyDocumentError) as info:
        load_file(path)
    assert isinstance(info.value, IngestError)
    assert info.value.path == str(path)


def test_unsupported_suffix_names_supported_types(tmp_path: Path) -> None:
    path = tmp_path / "slides.pptx"
    path.write_bytes(b"whatever")
    with pytest.raises(IngestError) as info:
        load_file(path)
    assert not isinstance(info.value, EmptyDocumentError)
    assert "unsupported file type '.pptx'" in info.value.reason
    for suffix in (".pdf", ".docx", ".md", ".jsonl"):
        assert suffix in info.value.reason


def test_missing_file_is_an_ingest_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="file not found"):
        load_file(tmp_path / "nope.md")


def test_suffix_is_case_insensitive(tmp_path: Path) -> None:
    path = tmp_path / "README.MD"
    path.write_text("# Readme\nHello.\n", encoding="utf-8")
    assert load_file(path).sections[0].text == "Hello."


# --- real data ----------------------------------------------------------------------------------


@needs_statutes
@pytest.mark.parametrize(("name", "expected"), sorted(STATUTE_FILES.items()))
def test_statutes_load_with_counts_and_ids(name: str, expected: tuple[str, int]) -> None:
    abbr, count = expected
    path = STATUTES / name
    doc = load_file(path)
    assert doc.doc_id == abbr == doc_id_for_path(path)
    assert len(doc.sections) == count
    ids = [s.source_id for s in doc.sections]
    assert len(set(ids)) == count
    assert ids[0] == f"{abbr}_S1"
    assert all("\r" not in s.text for s in doc.sections)
    # the hash covers the bytes and the (auto-detected) record options
    assert doc.content_hash == content_hash(path.read_bytes(), STATUTE_PROFILE)
    assert doc.content_hash != hashlib.sha256(path.read_bytes()).hexdigest()


@needs_statutes
def test_statute_section_shape() -> None:
    bns = load_file(STATUTES / "the_bharatiya_nyaya_sanhita_2023.json")
    s103 = next(s for s in bns.sections if s.source_id == "BNS_S103")
    assert s103.title_path == [
        "The Bharatiya Nyaya Sanhita, 2023",
        "Section 103. Punishment for murder.",
    ]
    assert "murder" in s103.text
    assert s103.metadata["section_number"] == "103"
    bnss = load_file(STATUTES / "the_bharatiya_nagarik_suraksha_sanhita_2023.json")
    assert bnss.sections[1].source_id == "BNSS_S2"
    bsa = load_file(STATUTES / "the_bharatiya_sakshya_adhiniyam_2023.json")
    assert any(s.source_id == "BSA_S63" for s in bsa.sections)


def test_doc_id_for_path_without_reading(tmp_path: Path) -> None:
    assert doc_id_for_path(tmp_path / "Some File.PDF") == "some_file"
    statute = tmp_path / "act.json"
    statute.write_text(
        '{"name": "The Consumer Protection Act, 2019", '
        '"sections": [{"section_number": "1", "text": "x"}]}',
        encoding="utf-8",
    )
    assert doc_id_for_path(statute) == "CPA" == load_file(statute).doc_id


def test_pydoc_topics_document() -> None:
    pytest.importorskip("pydoc_data.topics")
    from pydoc_data.topics import topics

    doc = load_pydoc_topics()
    assert doc.doc_id == "pyref"
    assert doc.title == "Python Language Reference"
    tops = [s for s in doc.sections if len(s.title_path) == 2]
    assert len(tops) == len(topics) == 79
    by_id = {s.source_id: s for s in doc.sections}
    assert len(by_id) == len(doc.sections)
    assert by_id["pyref_assignment"].title_path == [
        "Python Language Reference",
        "Assignment statements",
    ]
    augmented = by_id["pyref_assignment_augmented_assignment_statements"]
    assert augmented.title_path[1:] == ["Assignment statements", "Augmented assignment statements"]
    assert by_id["pyref_atom_identifiers"].title_path[-1] == "Identifiers (Names)"
    assert not any(re.search(r"^\*{3,}$", s.text, re.MULTILINE) for s in doc.sections)
    joined = "\n".join(topics[k] for k in sorted(topics))
    assert doc.content_hash == hashlib.sha256(joined.encode()).hexdigest()


# --- identity and content hash --------------------------------------------------------------


def test_content_hash_covers_bytes_and_record_options(tmp_path: Path) -> None:
    raw = b'[{"faq_id": 1, "text": "t", "question": "q"}]'
    path = tmp_path / "faq.json"
    path.write_bytes(raw)
    plain = load_file(path)
    by_question = load_file(path, RecordOptions(text_field="question"))
    templated = load_file(
        path, RecordOptions(text_field="question", source_id_template="Q_{faq_id}")
    )
    assert len({plain.content_hash, by_question.content_hash, templated.content_hash}) == 3
    # the same effective options give the same hash, given or auto-detected
    detected = RecordOptions(text_field="text", title_field=None, id_field=None)
    assert load_file(path, detected).content_hash == plain.content_hash
    assert plain.content_hash == content_hash(raw, detected)
    # files without records: the bytes alone
    txt = tmp_path / "a.txt"
    txt.write_text("hello", encoding="utf-8")
    assert load_file(txt, RecordOptions(text_field="q")).content_hash == (
        hashlib.sha256(b"hello").hexdigest()
    )


def test_distinct_doc_id_is_stable_and_readable(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "My Notes.txt"
    digest = hashlib.sha1(str(path).encode()).hexdigest()
    assert distinct_doc_id(path) == f"my_notes_{digest[:6]}" == distinct_doc_id(path)
    assert distinct_doc_id(path, 8) == f"my_notes_{digest[:8]}"
    assert distinct_doc_id(tmp_path / "My Notes.txt") != distinct_doc_id(path)


@pytest.mark.parametrize(
    ("name", "raw"),
    [("bom.txt", b"\xef\xbb\xbfplain text with a BOM\n"), ("latin1.txt", b"caf\xe9 au lait\n")],
)
def test_plain_text_without_headings_gets_the_doc_id_as_source_id(
    tmp_path: Path, name: str, raw: bytes
) -> None:
    from sleuth.ingest.chunking import chunk_document

    path = tmp_path / name
    path.write_bytes(raw)
    doc = load_file(path)
    (chunk,) = chunk_document(doc)
    assert chunk.source_id == doc.doc_id == Path(name).stem  # not bom_bom / latin1_latin1
