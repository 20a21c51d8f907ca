"""Cross-references: find them in chunk text and resolve them to ``source_id`` s.

Three kinds are recognised:

* numeric section references: ``section 103``, ``sections 103 and 104``, ``sections 64 to
  66`` (one reference per number), ``sub-section (2) of section 302`` (-> section 302),
  optionally qualified by an act: ``section 474 of the Bharatiya Nagarik Suraksha Sanhita,
  2023``. The reference text is canonical: ``"section 302"`` or ``"section 474 of the
  Bharatiya Nagarik Suraksha Sanhita, 2023"``.
* title references: ``See section Naming and binding``, ``see also section The import
  statement`` (text ``"section Naming and binding"``).
* Markdown links to a document or an anchor: ``[text](#anchor)``, ``[text](other.md#x)``
  (text as written).

The reference texts do not depend on which sections exist, so a reference left unresolved
can be matched again later by ``(source_id, target_text)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from sleuth.ingest.chunking import slugify
from sleuth.ingest.records import abbreviate
from sleuth.types import Chunk, Reference

_NUM = r"\d{1,4}[A-Z]{0,3}\b(?!\.\d)"
_NUMERIC_REF = re.compile(
    rf"(?<![\w-])(?i:sections?)(?:,?\s+namely,?)?\s+(?P<list>{_NUM}"
    rf"(?:(?:\s*,\s*|\s*,?\s+(?:and|or|to)\s+){_NUM})*)"
    r"(?P<act>\s+of\s+(?:the\s+)?(?P<name>[A-Z][\w’'.-]*(?:\s+(?:(?:of|and|for|the)\s+)?"
    r"[A-Z][\w’'.-]*)*)(?:,?\s*(?P<year>\d{4})\b)?)?"
)
_NUMBER = re.compile(rf"(?P<sep>\bto\s+)?(?P<num>{_NUM})")
_ACT_WORDS = frozenset(
    {"act", "sanhita", "adhiniyam", "code", "constitution", "rules", "regulations", "ordinance"}
)
_TITLE_REF = re.compile(r"(?:\b[Ss]ee\s+(?:also\s+)?|\band\s+)section\s+(?=[A-Z\"“'‘])")
_TITLE_STOP = re.compile(
    r"\s+(?:for|in|on|about|below|above|which|where|that|to|when|if|or|and\s+section|"
    r"and\s+the|as|with|from|is|are|describes?|explains?)\b|[,;:!?]|\.(?!\w)|$"
)
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_DOC_SUFFIXES = (".md", ".markdown", ".html", ".htm", ".txt", ".rst", ".pdf", ".docx", ".json")
_SECTION_ID = re.compile(r"^(?P<prefix>.+)_S(?P<num>\d+[A-Z]*)$")
_NUMBERING = re.compile(r"^(?:section\s+)?(?:\d+[A-Z]?(?:\.\d+)*\.?|[ivxlc]+\.|[A-Z]\.)\s+", re.I)
_MAX_RANGE = 200
SOURCE_ID_TOKEN = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b")
"""A token shaped like a citation id (``BNS_S103``, ``pyref_naming``)."""


@dataclass(frozen=True)
class _Found:
    kind: str  # "number", "title" or "link"
    text: str  # the reference text (Reference.target_text)
    key: str  # number, title words, or link target
    act: str | None = None  # abbreviation of the named act, numeric references only
    context: str = ""  # text after "section " for title references


def extract_references(text: str) -> list[str]:
    """The reference phrases in ``text``, in order of appearance, without duplicates.

    ``"sections 64 to 66"`` gives ``["section 64", "section 65", "section 66"]``;
    ``"sub-section (2) of section 302"`` gives ``["section 302"]``;
    ``"See section Naming and binding for details"`` gives ``["section Naming and binding"]``;
    ``"[x](other.md#y)"`` gives ``["[x](other.md#y)"]``.
    """
    seen: dict[str, None] = {}
    for found in _find(text):
        seen.setdefault(found.text, None)
    return list(seen)


def resolve_references(chunks: list[Chunk]) -> None:
    """Fill ``chunk.references`` of every chunk, resolving targets within ``chunks``.

    Resolution rules (targets are ``source_id`` s of the given chunks; chunks with empty text
    serve as targets only):

    * ``section N``: the section numbered N of the same act/document -- a source id
      ``<prefix>_S<N>`` with the citing chunk's prefix (``BNS_S105`` cites ``BNS_S103``), or
      of the named act when the phrase names one (``... of the Bharatiya Nagarik Suraksha
      Sanhita`` -> prefix ``BNSS``); an act not in the collection leaves it unresolved.
    * ``section <Title>``: the section whose last title (numbering such as ``Section 103.`` or
      ``4.2.`` and a trailing ``.`` removed; case, quotes and punctuation ignored) is the
      longest title starting the phrase -- or, when no section has that title (a heading
      without text of its own), the first section under a heading with that title; the
      citing document's sections win ties, then document order.
    * links: the document named by the path (its doc_id is the slug of the file stem) or the
      citing document, then the section whose title slug equals the anchor (or its first
      section when there is no anchor).

    Unresolved references keep ``target_id=None``. A chunk never references its own
    ``source_id`` and holds each target (or unresolved text) once. Existing references are
    replaced. Mutates the chunks in place.
    """
    index = _Index(chunks)
    for chunk in chunks:
        refs: list[Reference] = []
        keys: set[str] = set()
        if chunk.text:
            for found in _find(chunk.text):
                target = index.resolve(found, chunk)
                if target == chunk.source_id:
                    continue
                key = f"id:{target}" if target else f"text:{found.text.casefold()}"
                if key in keys:
                    continue
                keys.add(key)
                refs.append(
                    Reference(source_id=chunk.source_id, target_text=found.text, target_id=target)
                )
        chunk.references = refs


class SectionLookup:
    """Finds the sections a free text (a query or question) names explicitly.

    Same rules as :func:`resolve_references`, for text that belongs to no document. A
    ``section N`` that names no act is taken only when exactly one act/document of the
    collection has a section N (otherwise it is ambiguous and ignored); ``section N of the
    <Act>`` matches that act's section.

    Args:
        sections: one chunk per section of the collection (text may be empty), e.g.
            ``Catalog.section_stubs(collection)``. Build once, query many times.
    """

    def __init__(self, sections: list[Chunk]) -> None:
        self._index = _Index(sections)
        self._by_number: dict[str, list[str]] = {}
        for (_, number), sid in self._index.numbers.items():
            self._by_number.setdefault(number, []).append(sid)
        self._probe = Chunk(
            chunk_id="", source_id="", doc_id="", title_path=[], text="", position=0
        )

    def named_in(self, text: str) -> list[str]:
        """The ``source_id`` s ``text`` names, in order of mention, without duplicates.

        ``"What does Section 26 of the Bharatiya Nagarik Suraksha Sanhita, 2023 say?"`` gives
        ``["BNSS_S26"]``, and so does ``"BNSS_S26"`` (a citation id typed as is); a text
        naming no section gives ``[]``.
        """
        named: dict[str, None] = {}
        for token in SOURCE_ID_TOKEN.findall(text):  # a citation id typed as is: BNS_S103
            target = self._index.source_slugs.get(slugify(token, 200))
            if target:
                named.setdefault(target, None)
        for ref in _find(text):
            if ref.kind == "number" and ref.act is None:
                candidates = self._by_number.get(ref.key, [])
                target = candidates[0] if len(candidates) == 1 else None
            else:
                target = self._index.resolve(ref, self._probe)
            if target:
                named.setdefault(target, None)
        return list(named)


def title_key(title: str) -> str:
    """Normalised form of a section title for matching: numbering, case, punctuation removed.

    ``"Section 103. Punishment for murder."`` -> ``"punishment for murder"``;
    ``'The "yield" statement'`` -> ``"the yield statement"``.
    """
    title = _NUMBERING.sub("", title.strip())
    return " ".join(re.findall(r"[^\W_]+", title.casefold()))


def _find(text: str) -> Iterable[_Found]:
    """All references of ``text`` in order of position."""
    found: list[tuple[int, _Found]] = []
    for match in _NUMERIC_REF.finditer(text):
        act = _act_abbreviation(match.group("name"))
        suffix = ""
        if act is not None:
            name = " ".join(match.group("name").split())
            year = match.group("year")
            suffix = f" of the {name}{', ' + year if year else ''}"
        for number in _numbers(match.group("list")):
            found.append(
                (match.start(), _Found("number", f"section {number}{suffix}", number, act))
            )
    for match in _TITLE_REF.finditer(text):
        context = " ".join(text[match.end() : match.end() + 160].split())
        title = _title_phrase(context)
        if title:
            found.append((match.start(), _Found("title", f"section {title}", title, None, context)))
    for match in _LINK.finditer(text):
        target = match.group("target")
        if _is_document_link(target):
            found.append((match.start(), _Found("link", match.group(0), target)))
    found.sort(key=lambda item: item[0])
    return [f for _, f in found]


def _title_phrase(context: str) -> str:
    """The title at the start of ``context``: up to a stop word or punctuation, brackets kept
    balanced (``Identifiers (Names)``)."""
    stop = _TITLE_STOP.search(context)
    title = context[: stop.start()] if stop else context
    depth = 0
    for i, char in enumerate(title):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            title = title[:i]
            break
    if depth > 0 and ")" in context[len(title) :]:
        closing = context.index(")", len(title))
        if "(" not in context[len(title) : closing]:
            title = context[: closing + 1]
    return title.strip("\"“”'‘’ ")


def _numbers(number_list: str) -> list[str]:
    numbers: list[str] = []
    for match in _NUMBER.finditer(number_list):
        num = match.group("num")
        if match.group("sep") and numbers and numbers[-1].isdigit() and num.isdigit():
            low, high = int(numbers[-1]), int(num)
            if low < high <= low + _MAX_RANGE:
                numbers.extend(str(n) for n in range(low + 1, high + 1))
                continue
        numbers.append(num)
    return numbers


def _act_abbreviation(name: str | None) -> str | None:
    """Abbreviation of a named act (``None`` when the words name no act, e.g. ``Chapter``)."""
    if not name:
        return None
    words = {w.casefold() for w in re.findall(r"\w+", name)}
    if not words & _ACT_WORDS or words <= _ACT_WORDS | {"said", "this", "principal"}:
        return None  # not an act ("Chapter"), or this act ("the Act", "the said Sanhita")
    return abbreviate(name) or None


def _is_document_link(target: str) -> bool:
    if re.match(r"^[a-zA-Z][\w+.-]*:", target) or target.startswith("//"):
        return False  # http:, mailto:, ...
    if target.startswith("#"):
        return len(target) > 1
    path = target.split("#", 1)[0]
    return PurePosixPath(path).suffix.lower() in _DOC_SUFFIXES


def _prefix(chunk: Chunk) -> str:
    match = _SECTION_ID.match(chunk.source_id)
    return match.group("prefix") if match else chunk.doc_id


class _Index:
    """Lookup tables over a chunk collection."""

    def __init__(self, chunks: list[Chunk]) -> None:
        self.numbers: dict[tuple[str, str], str] = {}
        self.titles: dict[str, list[tuple[str, str]]] = {}  # key -> [(doc_id, source_id)]
        self.ancestors: dict[str, list[tuple[str, str]]] = {}  # enclosing headings
        self.doc_first: dict[str, str] = {}
        self.doc_slugs: dict[str, str] = {}
        self.title_slugs: dict[str, list[tuple[str, str]]] = {}  # anchor slug -> sections
        self.source_slugs: dict[str, str] = {}  # slug of a source_id -> the source_id
        self.max_title_words = 0
        seen: set[str] = set()
        for chunk in sorted(chunks, key=lambda c: (c.doc_id, c.position)):
            if chunk.source_id in seen:
                continue
            seen.add(chunk.source_id)
            match = _SECTION_ID.match(chunk.source_id)
            if match:
                self.numbers.setdefault(
                    (match.group("prefix"), match.group("num")), chunk.source_id
                )
            number = chunk.metadata.get("section_number")
            if number is not None:
                self.numbers.setdefault((_prefix(chunk), str(number)), chunk.source_id)
            self.source_slugs.setdefault(slugify(chunk.source_id, 200), chunk.source_id)
            if chunk.doc_id:
                self.doc_first.setdefault(chunk.doc_id, chunk.source_id)
                self.doc_slugs.setdefault(slugify(chunk.doc_id), chunk.doc_id)
            if chunk.title_path:
                key = title_key(chunk.title_path[-1])
                if key:
                    self.titles.setdefault(key, []).append((chunk.doc_id, chunk.source_id))
                    anchor = slugify(key, max_length=200)
                    self.title_slugs.setdefault(anchor, []).append((chunk.doc_id, chunk.source_id))
                    self.max_title_words = max(self.max_title_words, len(key.split()))
                for ancestor in chunk.title_path[1:-1]:
                    key = title_key(ancestor)
                    if key and chunk.source_id not in {s for _, s in self.ancestors.get(key, [])}:
                        self.ancestors.setdefault(key, []).append((chunk.doc_id, chunk.source_id))
                        self.max_title_words = max(self.max_title_words, len(key.split()))

    def resolve(self, found: _Found, chunk: Chunk) -> str | None:
        if found.kind == "number":
            prefix = found.act if found.act is not None else _prefix(chunk)
            return self.numbers.get((prefix, found.key))
        if found.kind == "title":
            return self._by_title(found.context, chunk.doc_id)
        return self._by_link(found.key, chunk.doc_id)

    def _by_title(self, context: str, doc_id: str) -> str | None:
        words = title_key(context).split()
        for n in range(min(len(words), self.max_title_words), 0, -1):
            key = " ".join(words[:n])
            # a heading without text of its own is reached through its first sub-section
            candidates = self.titles.get(key) or self.ancestors.get(key)
            if candidates:
                same_doc = [sid for d, sid in candidates if d == doc_id]
                return same_doc[0] if same_doc else candidates[0][1]
        return None

    def _by_link(self, target: str, doc_id: str) -> str | None:
        path, _, anchor = target.partition("#")
        if path:
            doc_id = self.doc_slugs.get(slugify(PurePosixPath(path).stem), "")
            if not doc_id:
                return None
        if not anchor:
            return self.doc_first.get(doc_id)
        wanted = slugify(anchor, max_length=200)
        for d, sid in self.title_slugs.get(wanted, []):
            if d == doc_id:
                return sid
        return self.source_slugs.get(wanted)
