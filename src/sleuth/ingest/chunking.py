"""Structure-aware chunking: sections -> chunks small enough to embed.

A section that fits in ``chunk_words`` words becomes one chunk. A longer one is split at
sentence, clause (a line starting ``(1)``, ``(a)``, ``1.``, a bullet, ``Explanation``...) and
paragraph boundaries into parts of at most ``chunk_words`` words that repeat about
``overlap_words`` words of the previous part. Every part keeps the section's ``source_id``;
parts keep the exact text of the section (line breaks included).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from sleuth.types import Chunk, Document

# Lower-cased words that end in a period without ending a sentence.
_ABBREVIATIONS = frozenset(
    [
        "sec",
        "secs",
        "s",
        "ss",
        "art",
        "arts",
        "cl",
        "cls",
        "ch",
        "chap",
        "no",
        "nos",
        "vol",
        "vols",
        "fig",
        "figs",
        "para",
        "paras",
        "pp",
        "p",
        "e.g",
        "i.e",
        "viz",
        "cf",
        "vs",
        "v",
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "st",
        "jr",
        "sr",
        "inc",
        "ltd",
        "co",
        "corp",
        "govt",
        "dept",
        "approx",
        "rs",
        "ibid",
        "al",
        "ed",
        "eds",
        "rev",
        "u.s",
        "u.k",
        "s.o",
    ]
)
_SENTENCE_END = re.compile(r"[.!?…]['\"’”)\]]*(?=\s+['\"“‘(\[]?[A-Z0-9])")
_CLAUSE_START = re.compile(
    r"\n(?=[ \t]*(?:\(\w{1,5}\)|\d{1,3}[.)]\s|[*\-•–]\s|Explanation\b|Illustrations?\b|"
    r"Provided\b|Exception\b))"
)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_WORD = re.compile(r"\S+")


def slugify(text: str, max_length: int = 60) -> str:
    """A lowercase ascii slug with ``_`` separators, at most ``max_length`` characters.

    ``"Section 103. Punishment for murder."`` -> ``"section_103_punishment_for_murder"``.
    Cuts at a separator when the text is too long; returns ``""`` when nothing is left.
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "_", ascii_text.lower()).strip("_")
    if len(slug) > max_length:
        cut = slug[:max_length]
        if slug[max_length] != "_" and "_" in cut[max_length // 2 :]:
            cut = cut[: cut.rindex("_")]
        slug = cut.strip("_")
    return slug


def assign_source_ids(doc: Document) -> list[str | None]:
    """The citation id of each section of ``doc`` (``None`` for whitespace-only sections).

    A section's own ``source_id`` is kept; others get ``f"{doc_id}_{slugify(last title)}"``,
    except a section without a title of its own (its title is the document's, e.g. the only
    section of a plain-text file, or the text before the first heading), which gets the
    ``doc_id`` itself (``notes``, not ``notes_notes``). Derived ids always start with the
    document's ``doc_id``, so documents with distinct ids get distinct section ids. Ids are
    made unique within the document, in document order, with ``_2``, ``_3``...; derived ids
    never take an id that a section carries explicitly.
    """
    explicit = {s.source_id for s in doc.sections if s.source_id and s.text.strip()}
    used: set[str] = set()
    ids: list[str | None] = []
    for section in doc.sections:
        if not section.text.strip():
            ids.append(None)
            continue
        if section.source_id:
            base = section.source_id
            taken = used
        else:
            base = _derived_id(doc, section.title_path)
            taken = used | explicit
        candidate, n = base, 1
        while candidate in taken:
            n += 1
            candidate = f"{base}_{n}"
        used.add(candidate)
        ids.append(candidate)
    return ids


def _derived_id(doc: Document, title_path: list[str]) -> str:
    """``doc_id`` for an untitled section, else ``doc_id`` + the slug of its title."""
    title = title_path[-1] if title_path else doc.title
    slug = slugify(title)
    same = " ".join(title.split()).casefold() == " ".join(doc.title.split()).casefold()
    if same or (slug and slug in (slugify(doc.title), doc.doc_id)):
        return doc.doc_id
    return f"{doc.doc_id}_{slug or 'section'}"


def chunk_document(doc: Document, chunk_words: int = 160, overlap_words: int = 30) -> list[Chunk]:
    """Split a document into chunks, section by section.

    Args:
        doc: the parsed document.
        chunk_words: maximum words per chunk (a section that fits is one chunk).
        overlap_words: about how many words a part repeats from the end of the previous part
            (whole sentences; none when the previous sentence alone is longer).

    Returns:
        Chunks in document order: ``chunk_id = f"{source_id}#{part}"``, ``part`` 0..n-1 within
        a section, ``position`` 0.. across the document, ``title_path``/``metadata`` copied
        from the section. Whitespace-only sections yield no chunk. Deterministic.

    Raises:
        ValueError: ``chunk_words < 1`` or ``overlap_words`` not in ``[0, chunk_words)``.
    """
    if chunk_words < 1:
        raise ValueError(f"chunk_words must be >= 1, got {chunk_words}")
    if not 0 <= overlap_words < chunk_words:
        raise ValueError(f"overlap_words must be in [0, {chunk_words}), got {overlap_words}")
    chunks: list[Chunk] = []
    for section, source_id in zip(doc.sections, assign_source_ids(doc), strict=True):
        if source_id is None:
            continue
        for part, text in enumerate(split_text(section.text, chunk_words, overlap_words)):
            chunks.append(
                Chunk(
                    chunk_id=f"{source_id}#{part}",
                    source_id=source_id,
                    doc_id=doc.doc_id,
                    title_path=list(section.title_path),
                    text=text,
                    position=len(chunks),
                    part=part,
                    metadata=dict(section.metadata),
                )
            )
    return chunks


def split_text(text: str, chunk_words: int = 160, overlap_words: int = 30) -> list[str]:
    """Split ``text`` into parts of at most ``chunk_words`` words at natural boundaries.

    Returns ``[text.strip()]`` when it fits, ``[]`` for whitespace-only text. Parts are exact
    slices of ``text`` (stripped); consecutive parts share about ``overlap_words`` words.
    """
    stripped = text.strip()
    if not stripped:
        return []
    if _count_words(stripped) <= chunk_words:
        return [stripped]
    piece_limit = max(1, min(chunk_words // 2, overlap_words or chunk_words // 2))
    spans = list(_pieces(text, _segments(text), chunk_words, piece_limit))
    words = [_count_words(text[a:b]) for a, b in spans]
    parts: list[str] = []
    start = 0
    while start < len(spans):
        end, total = start, 0
        while end < len(spans) and (end == start or total + words[end] <= chunk_words):
            total += words[end]
            end += 1
        parts.append(text[spans[start][0] : spans[end - 1][1]])
        if end >= len(spans):
            break
        start = _overlap_start(words, start, end, chunk_words, overlap_words)
    return parts


def _overlap_start(
    words: list[int], start: int, end: int, chunk_words: int, overlap_words: int
) -> int:
    """Index of the first piece of the part after ``pieces[start:end]``.

    Whole trailing pieces totalling at most ``overlap_words`` are repeated (or the last piece
    alone when it is at most twice that), never the whole previous part, and only as long as
    the next new piece still fits beside them.
    """
    nxt, kept = end, 0
    while nxt - 1 > start and kept + words[nxt - 1] <= overlap_words:
        nxt -= 1
        kept += words[nxt]
    if nxt == end and end - 1 > start and 0 < words[end - 1] <= 2 * overlap_words:
        nxt, kept = end - 1, words[end - 1]
    while nxt < end and kept + words[end] > chunk_words:
        kept -= words[nxt]
        nxt += 1
    return nxt


def _count_words(text: str) -> int:
    return len(text.split())


def _segments(text: str) -> list[tuple[int, int]]:
    """Sentence/clause/paragraph spans of ``text`` (stripped, non-empty, in order)."""
    cuts = {0, len(text)}
    cuts.update(m.end() for m in _PARAGRAPH_BREAK.finditer(text))
    cuts.update(m.start() + 1 for m in _CLAUSE_START.finditer(text))
    for match in _SENTENCE_END.finditer(text):
        if not _is_abbreviation(text, match.start()):
            cuts.add(match.end())
    return list(_strip_spans(text, _pairs(sorted(cuts))))


def _is_abbreviation(text: str, dot: int) -> bool:
    if text[dot] != ".":
        return False
    start = dot
    while start > 0 and not text[start - 1].isspace() and text[start - 1] not in "([\"'“":
        start -= 1
    token = text[start:dot].lower()
    if token in _ABBREVIATIONS or f"{token}." in _ABBREVIATIONS:
        return True
    # Initials such as "A." or "S.O." ; a lone digit before "." ends a sentence.
    return bool(re.fullmatch(r"(?:[a-z]\.)*[a-z]", token))


def _pieces(
    text: str, spans: Iterable[tuple[int, int]], chunk_words: int, piece_limit: int
) -> Iterable[tuple[int, int]]:
    """Spans no longer than ``chunk_words`` words: over-long ones cut at lines, then words."""
    for start, end in spans:
        if _count_words(text[start:end]) <= chunk_words:
            yield start, end
            continue
        line_cuts = [start] + [start + m.end() for m in re.finditer(r"\n", text[start:end])]
        for a, b in _strip_spans(text, _pairs([*line_cuts, end])):
            if _count_words(text[a:b]) <= piece_limit:
                yield a, b
                continue
            words = [(m.start() + a, m.end() + a) for m in _WORD.finditer(text[a:b])]
            for i in range(0, len(words), piece_limit):
                group = words[i : i + piece_limit]
                yield group[0][0], group[-1][1]


def _pairs(cuts: list[int]) -> list[tuple[int, int]]:
    return [(cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]


def _strip_spans(text: str, spans: Iterable[tuple[int, int]]) -> Iterable[tuple[int, int]]:
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            yield a, b
