"""File loaders: one file -> one :class:`~sleuth.types.Document` split into sections.

Supported: ``.txt`` (reStructuredText/pydoc-style underlined headings), ``.md``/``.markdown``
(``#`` and setext headings), ``.html``/``.htm`` (main text via trafilatura, h1-h3 sections),
``.pdf`` (a section per page, via pypdf), ``.docx`` (Heading styles, via python-docx),
``.json``/``.jsonl`` (records, see :mod:`sleuth.ingest.records`).

Every failure is an :class:`~sleuth.errors.IngestError` with a human reason (library
exceptions are wrapped); an empty file raises :class:`EmptyDocumentError` so a pipeline can
skip it with a warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from sleuth.errors import IngestError
from sleuth.ingest.chunking import slugify
from sleuth.ingest.records import (
    STATUTE_PROFILE,
    RecordOptions,
    RecordSet,
    is_statute,
    records_from_json,
    records_from_jsonl,
    render_template,
)
from sleuth.types import Document, Section

SUPPORTED_SUFFIXES: tuple[str, ...] = (
    ".txt",
    ".md",
    ".markdown",
    ".html",
    ".htm",
    ".pdf",
    ".docx",
    ".json",
    ".jsonl",
)
"""File suffixes :func:`load_file` understands (lower case)."""

# Elements whose text is never content.
_BOILERPLATE_TAGS = (
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "svg",
    "iframe",
    "button",
    "select",
    "head",
)
_HTML_BLOCK_TAGS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "ul",
        "ol",
        "li",
        "blockquote",
        "dl",
        "dt",
        "dd",
        "figure",
        "figcaption",
        "address",
        "details",
        "summary",
        "table",
        "thead",
        "tbody",
        "tfoot",
        "caption",
        "h4",
        "h5",
        "h6",
        "hr",
        "body",
        "html",
        "center",
    }
)
_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-{2,})[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ADORNMENT = re.compile(r"^([=\-~^*+#\"'`:.])\1{2,}[ \t]*$")


class EmptyDocumentError(IngestError):
    """The file has no content (empty, whitespace only, no records, no text in the markup).

    A pipeline should skip such a file with a warning rather than fail.
    """

    def __init__(self, path: str, reason: str = "the file is empty") -> None:
        super().__init__(path, reason)


def load_file(path: Path, options: RecordOptions | None = None) -> Document:
    """Read and parse one file.

    Args:
        path: the file; its suffix (case-insensitive) picks the parser.
        options: how to read records of a ``.json``/``.jsonl`` file (ignored otherwise);
            ``None`` auto-detects (statute files get ids such as ``BNS_S103``).

    Returns:
        A Document: ``doc_id`` = the act abbreviation for statute files, else the slug of the
        file stem (a pipeline may make it distinct, see :func:`default_doc_id`);
        ``content_hash`` = :func:`content_hash` (the raw bytes, plus the effective record
        options of JSON/JSONL files); sections in reading order with ``title_path[0]`` the
        document title.

    Raises:
        EmptyDocumentError: the file is empty or whitespace-only, or holds no text/records.
        IngestError: unsupported suffix, unreadable file, corrupt/encrypted/text-less PDF,
            invalid DOCX/JSON, bad records.
    """
    path = Path(path)
    where = str(path)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise IngestError(
            where,
            f"unsupported file type '{path.suffix or '(none)'}'; supported: "
            + ", ".join(SUPPORTED_SUFFIXES),
        )
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise IngestError(where, "file not found") from exc
    except IsADirectoryError as exc:
        raise IngestError(where, "is a directory, not a file") from exc
    except OSError as exc:
        raise IngestError(where, f"cannot read file: {exc.strerror or exc}") from exc
    if not raw.strip():
        raise EmptyDocumentError(where)

    parser = _PARSERS[suffix]
    title, sections, metadata, doc_id, used_options = parser(raw, path, options)
    if not any(s.text.strip() for s in sections):
        raise EmptyDocumentError(where, "no text found in the file")
    metadata = {"format": suffix.lstrip("."), "filename": path.name, **metadata}
    return Document(
        doc_id=doc_id or default_doc_id(path),
        path=where,
        title=title,
        content_hash=content_hash(raw, used_options),
        sections=sections,
        metadata=metadata,
    )


def content_hash(raw: bytes, options: RecordOptions | None = None) -> str:
    """The ``content_hash`` of a document read from ``raw`` bytes.

    sha256 of the bytes; for record files (JSON/JSONL) it also covers the effective
    :class:`RecordOptions` (given, the statute profile or auto-detected), so the same file
    read with other options is another content (re-ingesting it replaces the old records,
    and it is no duplicate of a copy read differently).
    """
    digest = hashlib.sha256(raw)
    if options is not None:
        digest.update(b"\x00sleuth-record-options:")
        digest.update(options.model_dump_json().encode("utf-8"))
    return digest.hexdigest()


def default_doc_id(path: Path) -> str:
    """The slug of the file stem (``"My Notes.md"`` -> ``"my_notes"``), or ``"document"``.

    Files are identified by their path: a pipeline gives a file whose default id is already
    taken by another path :func:`distinct_doc_id` instead.
    """
    return slugify(Path(path).stem) or "document"


def distinct_doc_id(path: Path, length: int = 6) -> str:
    """The default id made distinct by the path: ``notes_1a2b3c`` for ``/some/dir/notes.txt``.

    The suffix is the first ``length`` hex digits of sha1 of the absolute path, so the id is
    stable across runs and differs between files of the same stem in other folders.
    """
    key = str(Path(path).expanduser().absolute())
    digest = hashlib.sha1(key.encode("utf-8"), usedforsecurity=False).hexdigest()
    return f"{default_doc_id(path)}_{digest[:length]}"


def doc_id_for_path(path: Path, options: RecordOptions | None = None) -> str:
    """The ``doc_id`` :func:`load_file` gives ``path``, computed cheaply.

    JSON files are opened when their id comes from their content (statute files: the act
    abbreviation, ``BNS``); every other file, or one that cannot be read, gets
    :func:`default_doc_id`. Never raises.
    """
    path = Path(path)
    fallback = default_doc_id(path)
    if path.suffix.lower() != ".json" or (options is not None and not options.doc_id_template):
        return fallback
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return fallback
    if options is None:
        options = STATUTE_PROFILE if is_statute(data) else None
    if options is None or not options.doc_id_template or not isinstance(data, dict):
        return fallback
    try:
        return render_template(options.doc_id_template, {}, data) or fallback
    except (KeyError, ValueError):
        return fallback


def split_underlined_headings(
    text: str, levels: dict[str, int] | None = None
) -> list[tuple[list[str], str]]:
    """Split text with reStructuredText/pydoc-style headings into ``(heading_chain, body)``.

    A heading is an unindented line followed by a line of one repeated character
    (``=``, ``-``, ``*``, ``~``...) at least as long as it (2 characters of slack), optionally
    also overlined. ``levels`` maps an adornment character to its depth (1 = top); characters
    not in it get the next depths in order of first appearance (the rST rule).

    Returns:
        ``(chain, body)`` pairs in order; ``chain`` is the list of enclosing headings (empty
        for text before the first heading); ``body`` has its surrounding blank lines removed.
        Text without headings is one pair ``([], text)``.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    level_of = dict(levels or {})
    blocks: list[tuple[list[str], list[str]]] = [([], [])]
    stack: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        heading = _underlined_heading(lines, i)
        if heading is None:
            blocks[-1][1].append(lines[i])
            i += 1
            continue
        title, style, consumed = heading
        if style not in level_of:
            level_of[style] = max(level_of.values(), default=0) + 1
        level = level_of[style]
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        blocks.append(([t for _, t in stack], []))
        if consumed == 3 and blocks[-2][1] and blocks[-2][1][-1] == lines[i - 1]:
            blocks[-2][1].pop()  # the overline
        i += 2
    return [
        (chain, "\n".join(body).strip("\n").rstrip())
        for chain, body in blocks
        if chain or "\n".join(body).strip()
    ] or [([], "")]


def _underlined_heading(lines: list[str], i: int) -> tuple[str, str, int] | None:
    """``(title, style, consumed)`` when ``lines[i]`` starts a heading, else ``None``.

    ``consumed`` is 2 for title+underline, 3 when an overline sits on the line before ``i``.
    """
    title = lines[i]
    if i + 1 >= len(lines) or not title.strip() or title[0].isspace():
        return None
    if _ADORNMENT.match(title) or len(title) > 120:
        return None
    under = _ADORNMENT.match(lines[i + 1])
    if under is None or len(lines[i + 1].rstrip()) < max(3, len(title.rstrip()) - 2):
        return None
    prev = lines[i - 1] if i > 0 else ""
    char = under.group(1)
    if prev.strip() and _ADORNMENT.match(prev) and prev.strip()[0] == char:
        return title.strip(), char + char, 3
    if prev.strip():
        return None  # the last line of a paragraph followed by a rule is not a heading
    return title.strip(), char, 2


def markdown_sections(
    text: str, doc_title: str, max_level: int = 6, adopt_h1: bool = True
) -> tuple[str, list[Section]]:
    """Split Markdown into sections by ATX (``#``) and setext headings up to ``max_level``.

    Headings inside fenced code blocks are ignored; YAML front matter is dropped (its
    ``title:`` is used as the document title). With ``adopt_h1``, a level-1 heading that is the
    first heading and the only level-1 heading becomes the document title.

    Returns:
        ``(title, sections)`` with ``title_path`` = ``[title, *enclosing headings]``.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines, front_title = _strip_front_matter(lines)
    items: list[tuple[int, str] | str] = []
    fence: str | None = None
    for line in lines:
        fence_match = _FENCE.match(line)
        if fence is not None:
            items.append(line)
            if fence_match and fence_match.group(1)[0] == fence[0]:
                fence = None
            continue
        if fence_match:
            fence = fence_match.group(1)
            items.append(line)
            continue
        atx = _ATX_HEADING.match(line)
        if atx and len(atx.group(1)) <= max_level:
            items.append((len(atx.group(1)), _clean_heading(atx.group(2) or "")))
            continue
        setext = _SETEXT_UNDERLINE.match(line)
        level = 1 if setext and setext.group(1)[0] == "=" else 2
        if setext and level <= max_level and _is_setext_title(items):
            title = items.pop()
            assert isinstance(title, str)
            items.append((level, _clean_heading(title.strip())))
            continue
        items.append(line)

    title = front_title or doc_title
    if adopt_h1 and not front_title:
        title = _sole_top_heading(items) or title
    return title, _assemble(title, items)


def _sole_top_heading(items: Iterable[tuple[int, str] | str]) -> str | None:
    """The first heading when it is level 1 and the only level-1 heading, else ``None``."""
    headings = [item for item in items if isinstance(item, tuple)]
    if headings and headings[0][0] == 1 and sum(1 for h in headings if h[0] == 1) == 1:
        return headings[0][1] or None
    return None


def _is_setext_title(items: list[tuple[int, str] | str]) -> bool:
    if not items or not isinstance(items[-1], str) or not items[-1].strip():
        return False
    if items[-1].startswith((" " * 4, "\t")) or re.match(r"\s*([-*+>]|\d+[.)])\s", items[-1]):
        return False
    return len(items) == 1 or not isinstance(items[-2], str) or not items[-2].strip()


def _strip_front_matter(lines: list[str]) -> tuple[list[str], str | None]:
    if not lines or lines[0].strip() != "---":
        return lines, None
    for end in range(1, min(len(lines), 200)):
        if lines[end].strip() in ("---", "..."):
            title = None
            for line in lines[1:end]:
                match = re.match(r"title:\s*(.+)$", line.strip())
                if match:
                    title = match.group(1).strip().strip("\"'") or None
            return lines[end + 1 :], title
    return lines, None


def _clean_heading(text: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"(\*\*|__|`)", "", text)
    return " ".join(text.split())


def _assemble(doc_title: str, items: Iterable[tuple[int, str] | str]) -> list[Section]:
    """Group heading events ``(level, title)`` and text lines into sections."""
    blocks: list[tuple[list[str], list[str]]] = [([], [])]
    stack: list[tuple[int, str]] = []
    for item in items:
        if isinstance(item, tuple):
            level, heading = item
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading or "(untitled)"))
            blocks.append(([t for _, t in stack], []))
        else:
            blocks[-1][1].append(item)
    return [
        Section(title_path=_title_path(doc_title, chain), text=body)
        for chain, lines in blocks
        if (body := "\n".join(lines).strip("\n").rstrip()) or chain
    ]


def _title_path(doc_title: str, chain: list[str]) -> list[str]:
    if chain and chain[0].casefold() == doc_title.casefold():
        chain = chain[1:]
    return [doc_title, *chain]


def _humanize(path: Path) -> str:
    return " ".join(re.sub(r"[_\-]+", " ", path.stem).split()) or path.name


def _decode(raw: bytes, path: Path) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise IngestError(str(path), f"invalid UTF-16 text: {exc.reason}") from exc
    if b"\x00" in raw[:8192]:
        raise IngestError(str(path), "looks like a binary file, not text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


# Each parser returns (title, sections, metadata, doc_id or None, record options or None).
_Parsed = tuple[str, list[Section], dict[str, object], str | None, RecordOptions | None]


def _parse_txt(raw: bytes, path: Path, _options: RecordOptions | None) -> _Parsed:
    text = _decode(raw, path)
    if not text.strip():
        raise EmptyDocumentError(str(path))
    blocks = split_underlined_headings(text)
    tops = [chain[0] for chain, _ in blocks if len(chain) == 1]
    title = tops[0] if len(tops) == 1 and tops[0] == _first_heading(blocks) else _humanize(path)
    sections = [Section(title_path=_title_path(title, chain), text=body) for chain, body in blocks]
    return title, sections, {}, None, None


def _first_heading(blocks: list[tuple[list[str], str]]) -> str | None:
    return next((chain[0] for chain, _ in blocks if chain), None)


def _parse_markdown(raw: bytes, path: Path, _options: RecordOptions | None) -> _Parsed:
    text = _decode(raw, path)
    if not text.strip():
        raise EmptyDocumentError(str(path))
    title, sections = markdown_sections(text, _humanize(path))
    return title, sections, {}, None, None


def _parse_json(raw: bytes, path: Path, options: RecordOptions | None) -> _Parsed:
    return _from_records(records_from_json(_decode(raw, path), str(path), options), path)


def _parse_jsonl(raw: bytes, path: Path, options: RecordOptions | None) -> _Parsed:
    return _from_records(records_from_jsonl(_decode(raw, path), str(path), options), path)


def _from_records(records: RecordSet, path: Path) -> _Parsed:
    if not records.sections:
        raise EmptyDocumentError(str(path), "no records found")
    title = records.title or _humanize(path)
    if records.title is None:
        for section in records.sections:
            section.title_path.insert(0, title)
    return title, records.sections, records.metadata, records.doc_id, records.options


def _parse_html(raw: bytes, path: Path, _options: RecordOptions | None) -> _Parsed:
    import lxml.html
    from lxml import etree

    text = _decode(raw, path)
    text = re.sub(r"^\s*<\?xml[^>]*\?>", "", text)
    if not text.strip():
        raise EmptyDocumentError(str(path))
    try:
        root = lxml.html.document_fromstring(text)
    except (etree.ParserError, ValueError) as exc:
        raise IngestError(str(path), f"cannot parse HTML: {exc}") from exc
    title_el = root.find(".//title")
    page_title = " ".join(title_el.text_content().split()) if title_el is not None else ""
    for element in list(root.iter(*_BOILERPLATE_TAGS)):
        if element.getparent() is not None:
            element.drop_tree()

    own = _html_markdown(root)
    chosen = own
    extracted = _trafilatura_markdown(lxml.html.tostring(root, encoding="unicode"))
    if extracted:
        own_words = len(re.findall(r"\w+", own))
        has_headings = any(_ATX_HEADING.match(line) for line in extracted.split("\n"))
        own_headings = any(_ATX_HEADING.match(line) for line in own.split("\n"))
        # trafilatura's main-text extraction wins unless it lost the structure without
        # removing anything (its fallback on small pages).
        if has_headings or not own_headings or len(re.findall(r"\w+", extracted)) < 0.8 * own_words:
            chosen = extracted
    if not chosen.strip():
        raise EmptyDocumentError(str(path), "no text found in the HTML")
    title, sections = markdown_sections(
        chosen, page_title or _humanize(path), max_level=3, adopt_h1=not page_title
    )
    return title, sections, {}, None, None


def _trafilatura_markdown(html: str) -> str:
    """Main text as Markdown, or ``""`` when trafilatura finds nothing or fails."""
    try:
        import trafilatura

        result = trafilatura.extract(
            html,
            output_format="markdown",
            include_formatting=True,
            include_tables=True,
            include_comments=False,
            include_images=False,
            include_links=False,
            deduplicate=False,
        )
    except Exception:  # a failure of the optional extractor falls back to ours
        return ""
    return result or ""


def _html_markdown(root: object) -> str:
    """Text of a cleaned lxml tree as Markdown: h1-h3 as ``#`` headings, ``pre`` fenced."""
    blocks: list[str] = []
    buffer: list[str] = []

    def flush() -> None:
        inline = " ".join("".join(buffer).split())
        if inline:
            blocks.append(inline)
        buffer.clear()

    def walk(element: object) -> None:
        tag = getattr(element, "tag", None)
        tag = tag.lower() if isinstance(tag, str) else ""
        if tag in ("h1", "h2", "h3"):
            flush()
            heading = " ".join(element.text_content().split())  # type: ignore[attr-defined]
            if heading:
                blocks.append(f"{'#' * int(tag[1])} {heading}")
        elif tag == "pre":
            flush()
            code = element.text_content().strip("\n")  # type: ignore[attr-defined]
            if code.strip():
                blocks.append(f"```\n{code}\n```")
        elif tag == "tr":
            flush()
            cells = [
                " ".join(cell.text_content().split())
                for cell in element  # type: ignore[attr-defined]
                if isinstance(cell.tag, str) and cell.tag.lower() in ("td", "th")
            ]
            if any(cells):
                blocks.append(" | ".join(cells))
        elif tag in ("br", "hr"):
            flush()
        elif tag:
            block = tag in _HTML_BLOCK_TAGS
            if block:
                flush()
            if tag == "li":
                buffer.append("- ")
            if element.text:  # type: ignore[attr-defined]
                buffer.append(element.text)  # type: ignore[attr-defined]
            for child in element:  # type: ignore[attr-defined]
                walk(child)
            if block:
                flush()
        tail = getattr(element, "tail", None)
        if tail:
            buffer.append(tail)

    walk(root)
    flush()
    return "\n\n".join(b for b in blocks if b.strip() not in ("-", ""))


def _parse_pdf(raw: bytes, path: Path, _options: RecordOptions | None) -> _Parsed:
    from pypdf import PasswordType, PdfReader
    from pypdf.errors import DependencyError

    where = str(path)
    with _quiet_logger("pypdf"):
        return _read_pdf(raw, path, where, PdfReader, PasswordType, DependencyError)


@contextlib.contextmanager
def _quiet_logger(name: str) -> Iterator[None]:
    """Silence a library's warnings (we report failures as IngestError instead)."""
    logger = logging.getLogger(name)
    previous = logger.level
    logger.setLevel(logging.ERROR + 10)
    try:
        yield
    finally:
        logger.setLevel(previous)


def _read_pdf(
    raw: bytes,
    path: Path,
    where: str,
    PdfReader: Any,  # the pypdf classes, imported lazily by the caller
    PasswordType: Any,
    DependencyError: type[Exception],
) -> _Parsed:
    try:
        reader = PdfReader(io.BytesIO(raw))
    except Exception as exc:  # pypdf raises many kinds on malformed input
        raise IngestError(where, f"not a readable PDF (corrupt or truncated): {exc}") from exc
    if reader.is_encrypted:
        try:
            decrypted = reader.decrypt("")
        except DependencyError as exc:
            raise IngestError(
                where, f"the PDF is encrypted and cannot be decrypted here: {exc}"
            ) from exc
        except Exception as exc:
            raise IngestError(where, f"the PDF is encrypted and decryption failed: {exc}") from exc
        if decrypted == PasswordType.NOT_DECRYPTED:
            raise IngestError(
                where, "the PDF is encrypted with a password; remove the password and retry"
            )
    try:
        pages = list(reader.pages)
        info = reader.metadata
        meta_title = str(info.title).strip() if info is not None and info.title else ""
    except Exception as exc:
        raise IngestError(where, f"not a readable PDF (corrupt page tree): {exc}") from exc
    if not pages:
        raise EmptyDocumentError(where, "the PDF has no pages")
    title = meta_title if meta_title and meta_title.lower() != "untitled" else _humanize(path)
    sections: list[Section] = []
    for number, page in enumerate(pages, start=1):
        try:
            page_text = page.extract_text() or ""
        except Exception as exc:
            raise IngestError(where, f"cannot extract text of page {number}: {exc}") from exc
        page_text = page_text.replace("\r\n", "\n").replace("\r", "\n").strip()
        if page_text:
            sections.append(
                Section(
                    title_path=[title, f"Page {number}"], text=page_text, metadata={"page": number}
                )
            )
    if not sections:
        raise IngestError(
            where,
            f"no extractable text in {len(pages)} page(s) "
            "(blank or scanned pages; run OCR on scanned PDFs)",
        )
    return title, sections, {"pages": len(pages)}, None, None


def _parse_docx(raw: bytes, path: Path, _options: RecordOptions | None) -> _Parsed:
    import docx
    from docx.table import Table

    where = str(path)
    try:
        document = docx.Document(io.BytesIO(raw))
        core_title = (document.core_properties.title or "").strip()
        content = list(document.iter_inner_content())
    except Exception as exc:  # python-docx raises zipfile/KeyError/lxml errors on bad input
        raise IngestError(where, f"not a readable .docx file (corrupt or not DOCX): {exc}") from exc

    items: list[tuple[int, str] | str] = []
    style_title = ""
    for block in content:
        if isinstance(block, Table):
            for line in _docx_table_lines(block):
                items.extend((line, ""))
            continue
        text = block.text.strip()
        style = block.style.name if block.style is not None else ""
        heading = re.fullmatch(r"Heading ([1-9])", style or "")
        if style == "Title" and text and not style_title:
            style_title = text
        elif heading and text:
            items.append((int(heading.group(1)), " ".join(text.split())))
        elif text:
            items.extend((block.text, ""))
    title = core_title or style_title or _sole_top_heading(items) or _humanize(path)
    sections = _assemble(title, items)
    return title, sections, {}, None, None


def _docx_table_lines(table: object) -> list[str]:
    lines: list[str] = []
    try:
        rows = list(table.rows)  # type: ignore[attr-defined]
    except Exception:
        return lines
    for row in rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # merged cells repeat
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            lines.append(" | ".join(cells))
    return lines


_PARSERS: dict[str, Callable[[bytes, Path, RecordOptions | None], _Parsed]] = {
    ".txt": _parse_txt,
    ".md": _parse_markdown,
    ".markdown": _parse_markdown,
    ".html": _parse_html,
    ".htm": _parse_html,
    ".pdf": _parse_pdf,
    ".docx": _parse_docx,
    ".json": _parse_json,
    ".jsonl": _parse_jsonl,
}
