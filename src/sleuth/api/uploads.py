"""Checks of uploaded files: safe names, supported types, content that matches the type.

Every check raises :class:`UploadRejected` with the HTTP status to answer and a message that
names the file (``files[2] ('notes.exe')``); nothing here touches the disk.
"""

from __future__ import annotations

import unicodedata

from sleuth.ingest.loaders import SUPPORTED_SUFFIXES

MAX_NAME_CHARS = 120
SNIFF_BYTES = 8192
_TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".html", ".htm", ".json", ".jsonl"})
_MAGIC = {".pdf": (b"%PDF-", "a PDF"), ".docx": (b"PK\x03\x04", "a .docx (zip) file")}
_REPLACED = set('<>:"|?*')


class UploadRejected(Exception):
    """An uploaded file that is refused: ``status`` (413, 415 or 422) and the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def safe_file_name(raw: str | None, label: str) -> str:
    """The name an uploaded file is stored under, or :class:`UploadRejected` (422).

    A name must be a plain file name: no directory part (``/`` or ``\\``), no ``..``, no
    control characters, not hidden (leading ``.``), at most :data:`MAX_NAME_CHARS`
    characters. Characters that some file systems refuse (``<>:"|?*``) become ``_``.

    Args:
        raw: the file name sent by the client.
        label: how the file is named in messages, e.g. ``files[0]``.
    """
    name = unicodedata.normalize("NFC", (raw or "").strip())
    shown = f"{label} ({name[:80]!r})"
    if not name:
        raise UploadRejected(422, f"{label}: the file has no name")
    if "/" in name or "\\" in name or name in (".", ".."):
        raise UploadRejected(422, f"{shown}: a file name must not contain a directory part")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co") for c in name):
        raise UploadRejected(422, f"{shown}: the file name contains control characters")
    if name.startswith("."):
        raise UploadRejected(422, f"{shown}: a file name must not start with '.'")
    if len(name) > MAX_NAME_CHARS:
        raise UploadRejected(
            422, f"{shown}: the file name is longer than {MAX_NAME_CHARS} characters"
        )
    return "".join("_" if c in _REPLACED else c for c in name)


def suffix_of(name: str) -> str:
    """The lower-case suffix of a file name (``''`` when it has none)."""
    stem, dot, ext = name.rpartition(".")
    return f".{ext.lower()}" if dot and stem else ""


def check_type(name: str, head: bytes, label: str) -> None:
    """Refuse (415) a file whose suffix is not ingestible, or whose first bytes contradict
    its suffix (a ``.pdf`` that is no PDF, a text file with NUL bytes).

    Args:
        name: the safe file name.
        head: the file's first bytes (up to :data:`SNIFF_BYTES`).
        label: how the file is named in messages.
    """
    suffix = suffix_of(name)
    shown = f"{label} ({name!r})"
    if suffix not in SUPPORTED_SUFFIXES:
        raise UploadRejected(
            415,
            f"{shown}: unsupported file type '{suffix or '(none)'}'; supported: "
            + ", ".join(SUPPORTED_SUFFIXES),
        )
    if not head:
        return  # an empty file is ingested as 'skipped', with a warning
    if suffix in _MAGIC:
        magic, what = _MAGIC[suffix]
        if not head.startswith(magic):
            raise UploadRejected(415, f"{shown}: the content is not {what}")
    elif suffix in _TEXT_SUFFIXES and b"\x00" in head[:SNIFF_BYTES]:
        raise UploadRejected(415, f"{shown}: the content is binary, not {suffix} text")
