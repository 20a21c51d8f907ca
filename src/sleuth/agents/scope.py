"""Questions about documents, or identifiers, the collection does not hold.

A question that names an act, a code or a similar document by its title ("… under the
Consumer Protection Act, 2019?") and whose collection holds no document of that title is
declined, saying what the collection does hold — not answered from the section of another
document that happens to share a number or a topic. Likewise a question that asks about an
identifier (a code such as ``bravotok9x`` or ``INV-2024-0042``) that no retrieved section
mentions is declined, not answered about a near miss (``bravotok1x``): :func:`unseen_identifiers`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sleuth.retrieval.text import STOPWORDS, terms

_KINDS = (
    "Act|Code|Sanhita|Adhiniyam|Rules|Regulations?|Constitution|Convention|Treaty|Ordinance"
    "|Directive|Charter|Statute"
)
_NAMED_DOCUMENT = re.compile(
    rf"\b((?:[A-Z][\w'’.-]*,?\s+(?:(?:of|on|for|to|in|the)\s+)*){{1,8}}(?:{_KINDS}))\b"
    r"(?:,?\s+(\d{4}))?"
)
_KINDS_FIRST = "Code|Constitution|Convention|Treaty|Charter|Statute"
"""Kinds that open a title ("Act of War" is a novel's, "Rules of Engagement" a film's)."""
_KIND_FIRST = re.compile(
    rf"\b((?:{_KINDS_FIRST})\s+of\s+(?:the\s+)?"
    r"(?:[A-Z][\w'’.-]*(?:\s+(?:of|on|for|and|the)\b)*\s*){1,6})"
    r"(?:,?\s+(\d{4}))?"
)
"""A title that opens with its kind: "the Code of Criminal Procedure", "the Treaty of Varna"."""
_PARENTHESIS = re.compile(r"\([^)]*\)")
_GENERIC = frozenset(terms("the act code rules regulation regulations of on for and this that"))
MAX_LISTED = 6


def named_documents(question: str) -> list[str]:
    """The document titles ``question`` names ("The Consumer Protection Act, 2019"), as
    written, each once."""
    found = []
    matches = [*_NAMED_DOCUMENT.finditer(question), *_KIND_FIRST.finditer(question)]
    for match in sorted(matches, key=lambda m: m.start()):
        words = match.group(1).split()
        while len(words) > 1 and words[0].lower() in STOPWORDS:  # "Under the …", "The …"
            words = words[1:]
        name = " ".join(words)
        if len(words) < 2 or not _distinctive(name):  # "Act" alone, "This Act"
            continue
        found.append(f"{name}, {match.group(2)}" if match.group(2) else name)
    return list(dict.fromkeys(found))


def _distinctive(title: str) -> set[str]:
    return {t for t in terms(title) if t not in _GENERIC and not t.isdigit()}


def not_held(
    question: str,
    titles: Sequence[str],
    section_titles: Sequence[str] = (),
    named: Sequence[str] | None = None,
) -> list[str]:
    """The documents ``question`` names that none of ``titles`` is: a title holds a named
    document when one's distinctive words (not "the", "act", a year) are all in the other
    ("the Bharatiya Nyaya Sanhita" and "The Bharatiya Nyaya Sanhita, 2023"; a sentence's
    first word caught in the name, "Compare the Bharatiya Nyaya Sanhita", does not matter).
    A section's title (``section_titles``: a paragraph titled "Treaty of Varna") holds a
    named document only when it is that name, all its distinctive words (a parenthesis
    aside) being the name's; not when it merely mentions it ("Non-appearance … under section
    84 of Bharatiya Nagarik Suraksha Sanhita, 2023", a section of another act). Empty when
    the question names none, or names at least one the collection holds (a question
    comparing a held act with another is answered). ``named``: the documents the question
    names when already known (the run's profile), else read from it."""
    named = named_documents(question) if named is None else list(named)
    if not named:
        return []
    held = [d for d in (_distinctive(t) for t in titles) if d]
    # "Clean Air Act (United States)": the parenthesis disambiguates, it is not the name
    sections = [d for d in (_distinctive(_PARENTHESIS.sub(" ", t)) for t in section_titles) if d]

    def is_held(name: str) -> bool:
        words = _distinctive(name)
        return any(words <= h or h <= words for h in held) or any(h <= words for h in sections)

    missing = [n for n in named if not is_held(n)]
    return missing if len(missing) == len(named) else []


def decline(missing: Sequence[str], titles: Sequence[str]) -> str:
    """The answer text of the decline: what is asked about, and what the collection holds."""
    shown = [t for t in dict.fromkeys(titles) if t][:MAX_LISTED]
    more = len(set(titles)) - len(shown)
    holds = ", ".join(shown) + (f" and {more} more" if more > 0 else "")
    return f"Insufficient context: this collection does not hold {' or '.join(missing)}" + (
        f"; it holds {holds}." if holds else "."
    )


_IDENTIFIER = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z0-9_-]*\d[A-Za-z0-9_-]*(?![\w-])")
MIN_IDENTIFIER_CHARS = 5
"""Shorter letter-and-digit tokens ("B-52", "H1N1", "A4") are names more often than codes."""


def identifiers(question: str) -> list[str]:
    """The codes ``question`` asks about: tokens of at least :data:`MIN_IDENTIFIER_CHARS`
    characters that start with a letter and hold a digit ("bravotok9x", "INV-2024-0042",
    "BNS_S103"), each once, as written. Quantities with units ("100mg") start with a digit
    and are not codes."""
    found = [m.group(0).rstrip("-_") for m in _IDENTIFIER.finditer(question)]
    return list(dict.fromkeys(t for t in found if len(t) >= MIN_IDENTIFIER_CHARS))


def unseen_identifiers(question: str, evidence: Sequence[str]) -> list[str]:
    """The :func:`identifiers` of ``question`` that occur in none of ``evidence`` (the
    retrieved sections' ids, titles and texts), compared without case."""
    haystack = "\n".join(evidence).lower()
    return [t for t in identifiers(question) if t.lower() not in haystack]
