"""Title mentions: links from a section to the sections whose titles its text names.

Encyclopedic collections link by name, not by number: a paragraph on a film says it was
"directed by Adriana Trigiani", and the collection holds a section titled "Adriana Trigiani".
Such a mention is a cross-reference the agent can follow (the bridge of a multi-hop question,
as in HotpotQA; Yang et al. 2018, arXiv:1809.09600).

Only titles that look like names are linked, to keep ordinary phrases out: two or more
capitalised words ("Rudy Giuliani", "Young, New South Wales", "Recovery of Aristotle"), or a
single capitalised word of three letters or more that is not at the start of a sentence
("Sulli", "Charmed"). A parenthesised qualifier ("Salt Meadow (film)") and leading
numbering ("Section 103.") are not part of the name. Matching is case-sensitive on whole
words, longest title first; a name shared by two sections links to neither.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sleuth.types import Chunk

MAX_TITLE_WORDS = 8
MIN_SINGLE_WORD = 3
_WORD = re.compile(r"[^\W_]+")
_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")
_NUMBERING = re.compile(r"^(?:section\s+)?\d+[A-Z]?(?:\.\d+)*\.?\s+", re.I)
_SENTENCE_END = re.compile(r"[.!?:;]\s*[\"'“”‘’(\[]*\s*$")


def name_words(title: str) -> tuple[str, ...]:
    """The words of a title's name part: qualifier and numbering removed, case kept."""
    name = _QUALIFIER.sub("", _NUMBERING.sub("", title.strip())).strip()
    return tuple(_WORD.findall(name))


def _is_name(words: tuple[str, ...]) -> bool:
    if not words or len(words) > MAX_TITLE_WORDS:
        return False
    capitalised = sum(1 for w in words if w[0].isupper())
    if len(words) == 1:
        return capitalised == 1 and len(words[0]) >= MIN_SINGLE_WORD
    return capitalised >= 2


class TitleMentions:
    """Finds the sections a text mentions by title.

    Args:
        sections: one chunk per section (text may be empty), e.g.
            ``Catalog.section_stubs(collection)``; the title is the last ``title_path`` entry.
            Build once per collection version, query many times.
    """

    def __init__(self, sections: Iterable[Chunk]) -> None:
        names: dict[tuple[str, ...], str | None] = {}
        for stub in sections:
            if not stub.title_path:
                continue
            words = name_words(stub.title_path[-1])
            if not _is_name(words):
                continue
            known = names.get(words, stub.source_id)
            names[words] = stub.source_id if known == stub.source_id else None
        self._names = {words: sid for words, sid in names.items() if sid is not None}
        self._longest = max((len(w) for w in self._names), default=0)

    def __len__(self) -> int:
        return len(self._names)

    def in_text(self, text: str, exclude: str | None = None) -> dict[str, str]:
        """The sections ``text`` names: ``source_id`` → the name as written, in order of first
        mention (``exclude``, the text's own section, left out)."""
        if not self._names:
            return {}
        matches = list(_WORD.finditer(text))
        words = [m.group() for m in matches]
        found: dict[str, str] = {}
        i = 0
        while i < len(words):
            step = 1
            for n in range(min(self._longest, len(words) - i), 0, -1):
                sid = self._names.get(tuple(words[i : i + n]))
                if sid is None:
                    continue
                sentence_start = i == 0 or bool(_SENTENCE_END.search(text[: matches[i].start()]))
                if n == 1 and sentence_start:
                    continue
                if sid != exclude:
                    found.setdefault(sid, text[matches[i].start() : matches[i + n - 1].end()])
                step = n
                break
            i += step
        return found
