"""JSON and JSONL record loading: one :class:`~sleuth.types.Section` per record.

A record is a JSON object holding a text field (and optionally a title and an id). Where the
records live and how their citation ids are built is described by :class:`RecordOptions`.
A JSON object shaped like the statute files (``{"name": ..., "sections": [{"section_number",
"text", ...}]}``) is recognised automatically and loaded with :data:`STATUTE_PROFILE`, which
gives ids such as ``BNS_S103``. A "title-keyed" object (``{"Title": ["Sentence.", " More."],
...}``, the shape of the HotpotQA corpus) is recognised too: one section per entry, with the
citation id :func:`title_source_id` of the title (see :func:`is_title_keyed`).

Templates (``source_id_template``, ``title_template``, ``doc_id_template``) use ``{field}``
for a field of the record, ``{doc.field}`` for a field of the top-level object, and an
optional filter: ``{doc.name|abbr}`` (act abbreviation, see :func:`abbreviate`), ``|slug``,
``|upper``, ``|lower``.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sleuth.errors import IngestError
from sleuth.types import Section

_ABBR_SKIP = frozenset({"the", "of", "and", "for", "in", "on", "to", "a", "an"})
_AUTO_RECORD_KEYS = ("sections", "records", "items", "documents", "entries", "data")
_AUTO_TEXT_FIELDS = ("text", "content", "body", "page_content")
# Letters NFKD does not decompose to ASCII, spelled out for title_source_id.
_ASCII_SPELLING = str.maketrans(
    {
        "Æ": "AE",
        "æ": "ae",
        "Œ": "OE",
        "œ": "oe",
        "Ø": "O",
        "ø": "o",
        "Ł": "L",
        "ł": "l",
        "Đ": "D",
        "đ": "d",
        "Ð": "D",
        "ð": "d",
        "Þ": "Th",
        "þ": "th",
        "ß": "ss",
        "ı": "i",
    }
)
_APOSTROPHES = re.compile(r"['’‘ʼ`´]")
_NOT_ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_TEMPLATE_RE = re.compile(r"\{(?P<name>[^{}|]+)(?:\|(?P<filter>\w+))?\}")
# RecordOptions fields the ``sleuth ingest`` command sets with a flag of its own.
_CLI_FLAGS = frozenset(
    {"record_path", "text_field", "title_field", "id_field", "source_id_template"}
)


def option_hint(name: str) -> str:
    """How a user sets a :class:`RecordOptions` field, for error messages.

    ``"text_field"`` -> ``"--text-field (RecordOptions.text_field)"``: the CLI flag and the
    library field (fields without a flag are named alone).
    """
    field_name = f"RecordOptions.{name}"
    if name in _CLI_FLAGS:
        return f"--{name.replace('_', '-')} ({field_name})"
    return field_name


class RecordOptions(BaseModel):
    """How to turn JSON/JSONL records into sections.

    All field names are plain keys of the record (no nesting) except ``record_path``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    record_path: str = Field(
        default="",
        description="Dotted path to the record list in the top-level object, e.g. 'sections'; "
        "empty: the top-level list (JSON) or each line (JSONL)",
    )
    text_field: str = Field(default="text", description="Record field holding the text")
    title_field: str | None = Field(default="title", description="Record field with the title")
    id_field: str | None = Field(
        default=None, description="Record field used as source_id (when no template is given)"
    )
    source_id_template: str | None = Field(
        default=None, description="e.g. '{doc.name|abbr}_S{section_number}'"
    )
    title_template: str | None = Field(
        default=None,
        description="Section title built from the record, e.g. 'Section {section_number}. "
        "{title}'; default: the title field",
    )
    title_path_fields: list[str] = Field(
        default_factory=list,
        description="Record fields inserted (when non-empty) between the document title and "
        "the section title, e.g. ['chapter']",
    )
    doc_title_field: str | None = Field(
        default="name", description="Top-level field holding the document title"
    )
    doc_id_template: str | None = Field(
        default=None, description="Template for the document id, e.g. '{doc.name|abbr}'"
    )


STATUTE_PROFILE = RecordOptions(
    record_path="sections",
    text_field="text",
    title_field="title",
    source_id_template="{doc.name|abbr}_S{section_number}",
    title_template="Section {section_number}. {title}",
    title_path_fields=["chapter"],
    doc_title_field="name",
    doc_id_template="{doc.name|abbr}",
)
"""Built-in profile of the statute files (BNS, BNSS, BSA, CPA)."""


@dataclass
class RecordSet:
    """What a JSON/JSONL file yields: sections plus what it says about the document.

    ``title`` and ``doc_id`` are ``None`` when the file does not provide them (the loader then
    uses the file name).
    """

    sections: list[Section]
    title: str | None = None
    doc_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    options: RecordOptions | None = None
    """The options the records were read with (given, the statute profile, or detected)."""


def abbreviate(name: str) -> str:
    """Initials of the capitalised words of a name, skipping 'The', 'Of', 'And' and numbers.

    ``"The Bharatiya Nyaya Sanhita, 2023"`` -> ``"BNS"``;
    ``"The Consumer Protection Act, 2019"`` -> ``"CPA"``. Returns ``""`` when no word qualifies.
    """
    words = re.findall(r"[^\W\d_][\w’'-]*", name)
    return "".join(w[0] for w in words if w[0].isupper() and w.lower() not in _ABBR_SKIP).upper()


def is_statute(data: Any) -> bool:
    """Whether ``data`` (parsed JSON) has the statute shape handled by :data:`STATUTE_PROFILE`.

    That is: an object with a string ``name`` and a non-empty ``sections`` list whose first
    record has ``section_number`` and ``text``.
    """
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return False
    sections = data.get("sections")
    if not isinstance(sections, list) or not sections or not isinstance(sections[0], dict):
        return False
    return "section_number" in sections[0] and "text" in sections[0]


def is_title_keyed(data: Any) -> bool:
    """Whether ``data`` (parsed JSON) is a title-keyed object: ``{title: text or [sentences]}``.

    That is: a non-empty object that is not one record or a wrapper of records (it has no
    'text'/'content'/'body'/'page_content' key, and no 'sections'/'records'/... key holding a
    list with an object in it), at least half of whose values are a string or a list of
    strings. The remaining values are not skipped: :func:`records_from_json` reports them.
    """
    if not isinstance(data, dict) or not data:
        return False
    if any(key in data for key in _AUTO_TEXT_FIELDS):
        return False
    for key in _AUTO_RECORD_KEYS:
        value = data.get(key)
        if isinstance(value, list) and any(isinstance(v, dict) for v in value):
            return False
    textual = sum(1 for value in data.values() if _is_text_value(value))
    return 2 * textual >= len(data)


def title_source_id(title: str) -> str:
    """The citation id of a title-keyed entry: ``"Arthur's Magazine"`` -> ``"Arthurs_Magazine"``.

    The rule, applied in order:

    1. HTML entities are decoded (``&amp;`` -> ``&``; the HotpotQA titles keep some);
    2. accents are dropped (NFKD, combining marks removed: ``"Alû"`` -> ``"Alu"``) and a few
       letters are spelled in ASCII (``Æ`` -> ``AE``, ``ø`` -> ``o``, ``ß`` -> ``ss``...);
    3. apostrophes (``'``, ``’``, backtick...) are removed;
    4. every run of other characters outside ``[A-Za-z0-9_.-]`` becomes one ``_``
       (``"Rush 2: Extreme Racing USA"`` -> ``"Rush_2_Extreme_Racing_USA"``,
       ``"1980–99"`` -> ``"1980_99"``), runs of ``_`` shrink to one, and ``_``, ``.``, ``-``
       are stripped from both ends;
    5. a title with nothing left (e.g. only non-Latin script) gets ``"title_"`` + the first 8
       hex digits of the sha1 of its UTF-8 text.

    Case is kept. The id is safe inside a ``[source_id]`` citation marker. Distinct titles may
    give the same id: :func:`title_source_ids` makes them distinct as the loader does.
    """
    text = unicodedata.normalize("NFKD", html.unescape(title))
    text = "".join(c for c in text if not unicodedata.combining(c)).translate(_ASCII_SPELLING)
    text = _APOSTROPHES.sub("", text)
    slug = _NOT_ID_CHARS.sub("_", text)
    slug = re.sub(r"_{2,}", "_", slug).strip("_.-")
    if slug:
        return slug
    return "title_" + hashlib.sha1(title.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]


def title_source_ids(titles: Iterable[str]) -> dict[str, str]:
    """Citation ids of title-keyed entries, in order: ``{title: source_id}``.

    Each id is :func:`title_source_id`; a title whose id was already given to an earlier title
    gets ``_2``, ``_3``... (``"A B"``, ``"A&B"`` -> ``"A_B"``, ``"A_B_2"``). Pass all the keys of
    the object in file order (empty entries included) to get the ids the loader gives.
    """
    used: dict[str, int] = {}
    ids: dict[str, str] = {}
    for title in titles:
        if title not in ids:
            ids[title] = _dedupe(title_source_id(title), used)
    return ids


def records_from_json(text: str, path: str, options: RecordOptions | None = None) -> RecordSet:
    """Parse a JSON document into sections.

    Args:
        text: the JSON text.
        path: the file path, used in error messages.
        options: how to read the records; ``None`` detects the statute shape, then a
            title-keyed object (see :func:`is_title_keyed`), else a list of objects (top-level,
            or under one of 'sections', 'records', 'items', ...) with a 'text'/'content'/'body'
            field.

    Returns:
        A :class:`RecordSet` (sections in record order; ``doc_id``/``title`` when derivable).
        A title-keyed object gives one section per entry, in file order: title = the key,
        text = the string, or the sentences stripped and joined with single spaces (inner
        spacing kept), ``source_id`` from :func:`title_source_ids`, ``metadata["title"]`` the
        key; entries with an empty string, an empty list (or only blank sentences) or null are
        skipped; ``options`` is ``None`` (no :class:`RecordOptions` describes the shape).

    Raises:
        IngestError: invalid JSON (with line and column), records not found, a record that is
            not an object or lacks the text field (naming the record), a template field missing,
            a title-keyed entry whose value is not text (naming its key).
        EmptyDocumentError: the record list is empty (raised by the loader, see loaders.py).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IngestError(
            path, f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    if options is None:
        if is_statute(data):
            options = STATUTE_PROFILE
        elif is_title_keyed(data):
            return _title_keyed(data, path)
        else:
            options = _detect_options(data, path)
    records, where = _select_records(data, options.record_path, path)
    top = data if isinstance(data, dict) else {}
    labels = [f"{where}[{i}]" for i in range(len(records))]
    return _build(records, labels, top, options, path)


def records_from_jsonl(text: str, path: str, options: RecordOptions | None = None) -> RecordSet:
    """Parse JSON Lines (one record per non-blank line) into sections.

    ``options.record_path``, when set, is applied to each line (it may select an object or a
    list of objects). ``{doc.field}`` in templates reads nothing (there is no top-level object).

    Raises:
        IngestError: a line that is not valid JSON (line and column), or a bad record (naming
            its line).
    """
    records: list[Any] = []
    labels: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise IngestError(
                path, f"invalid JSON on line {lineno}, column {exc.colno}: {exc.msg}"
            ) from exc
        if options is not None and options.record_path:
            selected, _ = _select_records(value, options.record_path, f"{path}, line {lineno}")
            records.extend(selected)
            labels.extend(f"line {lineno}[{i}]" for i in range(len(selected)))
        else:
            records.append(value)
            labels.append(f"line {lineno}")
    if options is None:
        options = _detect_options(records, path)
    return _build(records, labels, {}, options, path)


def render_template(
    template: str, record: dict[str, Any], doc: dict[str, Any], missing_ok: bool = False
) -> str:
    """Fill ``{field}``, ``{doc.field}`` and ``{field|filter}`` placeholders.

    With ``missing_ok`` a missing field renders as ``"\x00"`` (for the caller to clean up).

    Raises:
        KeyError: a placeholder names a missing field (the message is the field name).
        ValueError: an unknown filter.
    """

    def repl(match: re.Match[str]) -> str:
        name = match.group("name").strip()
        source, key = (doc, name[4:]) if name.startswith("doc.") else (record, name)
        if key not in source or source[key] is None:
            if missing_ok:
                return "\x00"
            raise KeyError(name)
        return _apply_filter(_scalar_text(source[key]), match.group("filter"))

    return _TEMPLATE_RE.sub(repl, template)


def normalize_text(text: str) -> str:
    """Normalise line endings to ``\\n`` and strip surrounding whitespace; keeps content."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def _apply_filter(value: str, name: str | None) -> str:
    if name is None:
        return value
    if name == "abbr":
        return abbreviate(value)
    if name == "upper":
        return value.upper()
    if name == "lower":
        return value.lower()
    if name == "slug":
        ascii_text = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode()
        return re.sub(r"[^a-z0-9]+", "_", ascii_text.lower()).strip("_")
    raise ValueError(f"unknown template filter '|{name}' (known: abbr, slug, upper, lower)")


def _scalar_text(value: Any) -> str:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _is_text_value(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    )


def _title_keyed(data: dict[str, Any], path: str) -> RecordSet:
    ids = title_source_ids(data)
    sections: list[Section] = []
    for index, (key, value) in enumerate(data.items()):
        where = f"entry {json.dumps(key, ensure_ascii=False)}"
        if isinstance(value, str):
            text = normalize_text(value)
        elif isinstance(value, list):
            for i, sentence in enumerate(value):
                if not isinstance(sentence, str):
                    raise IngestError(
                        path,
                        f"{where}: item {i} is {_kind(sentence)}, not a string (a title-keyed "
                        "object maps each title to a string or a list of strings)",
                    )
            text = normalize_text(" ".join(s.strip() for s in value if s.strip()))
        elif value is None:
            continue
        else:
            raise IngestError(
                path,
                f"{where}: value is {_kind(value)}, not text (a title-keyed object maps each "
                "title to a string or a list of strings)",
            )
        if not text:
            continue
        title = " ".join(key.split()) or f"Record {index + 1}"
        sections.append(
            Section(title_path=[title], text=text, source_id=ids[key], metadata={"title": key})
        )
    return RecordSet(sections=sections)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return {dict: "an object", list: "a list"}.get(type(value), type(value).__name__)


def _detect_options(data: Any, path: str) -> RecordOptions:
    record_path = ""
    records: Any = data
    if isinstance(data, dict):
        for key in _AUTO_RECORD_KEYS:
            if isinstance(data.get(key), list):
                record_path, records = key, data[key]
                break
        else:
            raise IngestError(
                path,
                "no records found: expected a list of objects, an object with one of "
                f"{', '.join(repr(k) for k in _AUTO_RECORD_KEYS)} holding them, or an object "
                "mapping titles to text (a string or a list of sentences) "
                f"(or use {option_hint('record_path')} to name the list)",
            )
    if not isinstance(records, list):
        raise IngestError(path, "no records found: the JSON value is not a list of objects")
    first = next((r for r in records if isinstance(r, dict)), None)
    if first is None:
        return RecordOptions(record_path=record_path)
    text_field = next((f for f in _AUTO_TEXT_FIELDS if f in first), None)
    if text_field is None:
        raise IngestError(
            path,
            f"records have no text field (looked for {', '.join(_AUTO_TEXT_FIELDS)}); "
            f"use {option_hint('text_field')} to name the field holding the text",
        )
    title_field = next((f for f in ("title", "name", "heading") if f in first), None)
    id_field = next((f for f in ("id", "source_id") if f in first), None)
    return RecordOptions(
        record_path=record_path, text_field=text_field, title_field=title_field, id_field=id_field
    )


def _select_records(data: Any, record_path: str, path: str) -> tuple[list[Any], str]:
    node = data
    where = "$"
    for part in [p for p in record_path.split(".") if p]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise IngestError(
                path,
                f"record_path '{record_path}': '{part}' not found "
                f"(check {option_hint('record_path')})",
            )
        where = part if where == "$" else f"{where}.{part}"
    if isinstance(node, dict):
        return [node], where
    if not isinstance(node, list):
        raise IngestError(
            path, f"record_path '{record_path or '$'}' is a {type(node).__name__}, not a list"
        )
    return node, where


def _record_text(value: Any, label: str, text_field: str, path: str) -> str:
    if isinstance(value, str):
        return normalize_text(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return normalize_text(" ".join(v.strip() for v in value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    kind = "null" if value is None else type(value).__name__
    raise IngestError(path, f"{label}: field '{text_field}' is {kind}, not text")


def _build(
    records: list[Any],
    labels: list[str],
    top: dict[str, Any],
    options: RecordOptions,
    path: str,
) -> RecordSet:
    doc_title: str | None = None
    if options.doc_title_field and isinstance(top.get(options.doc_title_field), str):
        doc_title = " ".join(top[options.doc_title_field].split()) or None
    doc_id: str | None = None
    if options.doc_id_template:
        try:
            doc_id = render_template(options.doc_id_template, {}, top) or None
        except KeyError as exc:
            raise IngestError(
                path, f"{option_hint('doc_id_template')}: field {exc} is missing"
            ) from exc
        except ValueError as exc:
            raise IngestError(path, str(exc)) from exc

    sections: list[Section] = []
    used: dict[str, int] = {}
    for index, (record, label) in enumerate(zip(records, labels, strict=True)):
        if not isinstance(record, dict):
            raise IngestError(path, f"{label}: record is a {type(record).__name__}, not an object")
        if options.text_field not in record:
            raise IngestError(
                path,
                f"{label}: missing text field '{options.text_field}' "
                f"(use {option_hint('text_field')} to name another field)",
            )
        text = _record_text(record[options.text_field], label, options.text_field, path)
        try:
            title = _record_title(record, index, options)
            source_id = _record_id(record, top, options)
        except KeyError as exc:
            option = "source_id_template" if options.source_id_template else "id_field"
            raise IngestError(
                path, f"{label}: missing field {exc} (check {option_hint(option)})"
            ) from exc
        except ValueError as exc:
            raise IngestError(path, str(exc)) from exc
        if source_id is not None:
            source_id = _dedupe(source_id, used)
        middle = [
            _scalar_text(record[f])
            for f in options.title_path_fields
            if record.get(f) not in (None, "", [])
        ]
        title_path = [t for t in [doc_title, *middle, title] if t]
        metadata = {
            k: v
            for k, v in record.items()
            if k != options.text_field and isinstance(v, str | int | float | bool) and v != ""
        }
        if doc_title:
            metadata.setdefault("doc_title", doc_title)
        sections.append(
            Section(title_path=title_path, text=text, source_id=source_id, metadata=metadata)
        )
    doc_meta = {k: v for k, v in top.items() if isinstance(v, str | int | float) and v != ""}
    return RecordSet(
        sections=sections, title=doc_title, doc_id=doc_id, metadata=doc_meta, options=options
    )


def _record_title(record: dict[str, Any], index: int, options: RecordOptions) -> str:
    if options.title_template:
        title = render_template(options.title_template, record, {}, missing_ok=True)
        if "\x00" in title:  # e.g. "Section 7. " when the record has no title
            title = title.replace("\x00", "").strip(" .:-")
        return title.strip() or f"Record {index + 1}"
    if options.title_field and record.get(options.title_field) not in (None, ""):
        return _scalar_text(record[options.title_field])
    return f"Record {index + 1}"


def _record_id(record: dict[str, Any], top: dict[str, Any], options: RecordOptions) -> str | None:
    if options.source_id_template:
        return render_template(options.source_id_template, record, top)
    if options.id_field:
        if record.get(options.id_field) in (None, ""):
            raise KeyError(options.id_field)
        return _scalar_text(record[options.id_field])
    return None


def _dedupe(source_id: str, used: dict[str, int]) -> str:
    if source_id not in used:
        used[source_id] = 1
        return source_id
    n = used[source_id]
    candidate = source_id
    while candidate in used:
        n += 1
        candidate = f"{source_id}_{n}"
    used[source_id] = n
    used[candidate] = 1
    return candidate
