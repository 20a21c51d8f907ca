"""Question analysis rules shared by both modes: what a question asks and its parts.

The offline (rule) half of reading a question: the preamble of statements a question may
open with (:func:`asked`), whether it asks several things (:func:`is_multi_part`) and its
sub-questions (:func:`split_question`), its content terms (:func:`question_terms`). The typed
profile both modes read is built from these once per run by
:func:`sleuth.agents.profile.analyse_question`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sleuth.ingest.references import SOURCE_ID_TOKEN, extract_references
from sleuth.retrieval.text import STOPWORDS, terms, words

_QUESTION_WORDS = (
    "what|which|who|whom|whose|when|where|why|how|is|are|was|were|does|do|did|can|could|"
    "may|must|shall|should|will|would"
)
_AND_QUESTION = re.compile(rf"[,;]?\s+and\s+(?=(?:{_QUESTION_WORDS})\b)", re.I)
_BETWEEN = re.compile(r"\bbetween\s+(.+?)\s+and\s+(.+?)\s*[?.!]*$", re.I)
_COMPARE = re.compile(r"\bcompare\s+(.+?)\s+(?:and|with|to)\s+(.+?)\s*[?.!]*$", re.I)
_VERSUS = re.compile(r"([^,:;]+?)\s+(?:vs\.?|versus)\s+(.+?)\s*[?.!]*$", re.I)
_BOTH = re.compile(r"^(.*?)\bboth\s+(.+?)\s+and\s+(.+?)\s*[?.!]*$", re.I)
_AND_BOTH = re.compile(
    r"^(are|were|is|was|do|did|does|have|has|had|can|could|will|would)\s+(.+?)\s+and\s+"
    r"(.+?)\s+both\s+(.+?)\s*[?.!]*$",
    re.I,
)
_WHICH_OR = re.compile(r"^(.*?\bwhich\b.*?)[,:]\s*(.+?)\s+or\s+(.+?)\s*[?.!]*$", re.I)
_COMPARISON_CUE = re.compile(
    r"\b(differences?|differ|distinguish|compare|comparison|versus|vs\.?)\b", re.I
)
_PREPOSITIONS = frozenset(
    ["for", "of", "in", "on", "to", "about", "under", "with", "against", "by", "from"]
)
_OPENER = re.compile(rf"^\w+,\s+(?=(?:{_QUESTION_WORDS})\b)", re.I)
"""One word and a comma before a question's own words ("Also, what …", "Second, can …"): it
links the question to the one before, it is not what a part asks."""
_LEADING_QUESTION = re.compile(rf"^((?:{_QUESTION_WORDS})(?:\s+(?:{_QUESTION_WORDS}))?)\b", re.I)

STYLE_WORDS = frozenset(
    ["simple", "simply", "plain", "brief", "briefly", "short", "detail", "detailed", "terms",
     "words", "example", "examples", "please", "explain", "summarize", "summarise"]
)  # fmt: skip
"""Words about how to answer, not what: ignored when judging coverage."""


def _sentence(text: str) -> str:
    text = " ".join(text.split()).strip(" ,;:.")
    if not text:
        return ""
    return text[0].upper() + text[1:] + ("" if text.endswith("?") else "?")


def content_terms(text: str) -> set[str]:
    return set(terms(text))


def question_terms(question: str) -> set[str]:
    """The question's content terms, minus :data:`STYLE_WORDS` ("in simple terms") and the
    citation ids it types as is ("BNS_S103": the explicit-reference lookup retrieves that
    section; no section's text contains its own id)."""
    style = {t for w in STYLE_WORDS for t in terms(w)}
    ids = {t for token in SOURCE_ID_TOKEN.findall(question) for t in terms(token)}
    return content_terms(question) - style - ids


def _split_and(question: str) -> tuple[str, str] | None:
    """``left and right`` at the last plain " and " where both sides carry ≥ 2 terms."""
    body = question.strip().rstrip("?.! ")
    parts = re.split(r"\s+and\s+", body, flags=re.I)
    for i in range(len(parts) - 1, 0, -1):
        left, right = " and ".join(parts[:i]), " and ".join(parts[i:])
        if len(content_terms(left)) >= 2 and len(content_terms(right)) >= 2:
            return left, right
    return None


_STATEMENTS = re.compile(r"^(.*[.!])\s+([^.!?]+\?)\s*$", re.S)


def asked(question: str) -> str:
    """What a question asks: after a preamble of statements ("I found a purse and kept the
    money. Have I committed an offence?") its last sentence — the preamble is context, not
    parts to answer — else the whole question."""
    match = _STATEMENTS.match(" ".join(question.split()))
    return match.group(2) if match and "?" not in match.group(1) else question


def in_context(question: str, parts: Sequence[str]) -> list[str]:
    """``parts`` (sub-questions of ``question``) each preceded by the question's preamble of
    statements (see :func:`asked`) when it does not already hold it: "Someone threw acid on
    a girl. What's the least jail time, and who receives the fine?" splits into parts that
    mean nothing without the acid ("Who receives the fine?"), so each is searched and read
    with it. Parts are returned unchanged when the question has no preamble."""
    whole = " ".join(question.split())
    preamble = whole[: len(whole) - len(asked(whole))].strip()
    if not preamble:
        return list(parts)
    return [p if preamble in " ".join(p.split()) else f"{preamble} {p}" for p in parts]


def is_multi_part(question: str) -> bool:
    """Simple cues that a question asks several things (read in :func:`asked`: a preamble
    of statements is context).

    Two question marks; "... and what/how/is ..."; comparison words (difference, differ,
    compare, versus); "both X and Y"; "which ..., X or Y"; or a plain " and " joining two
    parts of ≥ 2 content terms each in a question that does not name a section.
    """
    question = asked(question)
    if question.count("?") >= 2 or _AND_QUESTION.search(question):
        return True
    if (
        _COMPARISON_CUE.search(question)
        or _BOTH.search(question)
        or _AND_BOTH.search(question)
        or _WHICH_OR.search(question)
    ):
        return True
    return not extract_references(question) and _split_and(question) is not None


def missing_words(question: str, evidence_text: str) -> list[str]:
    """The question's content words (as written) whose stems the evidence lacks, in order
    (citation ids typed as is, "BNS_S103", excepted: see :func:`question_terms`)."""
    have = content_terms(evidence_text)
    missing: list[str] = []
    ids = {w.lower() for w in SOURCE_ID_TOKEN.findall(question)}
    for word in words(question):
        if word in ids:
            continue
        if word in STOPWORDS or word in STYLE_WORDS or len(word) < 2 or word in missing:
            continue
        stems = terms(word)
        if stems and stems[0] not in have:
            missing.append(word)
    return missing


def _complete(fragment: str, left: str) -> str:
    """Give a bare right-hand fragment the stem of ``left``.

    ``("for theft", "the punishment for murder")`` → ``"the punishment for theft"``;
    ``("culpable homicide", "What is the punishment for murder")`` → ``"What is the
    punishment for culpable homicide"``; a fragment starting with a question word is kept.
    """
    tokens = fragment.split()
    if not tokens or re.match(rf"^(?:{_QUESTION_WORDS})\b", fragment, re.I):
        return fragment
    stem = left.split()
    lowered = [t.lower() for t in stem]
    first = tokens[0].lower()
    if first in _PREPOSITIONS and first in lowered:
        at = len(lowered) - 1 - lowered[::-1].index(first)
        return " ".join([*stem[:at], *tokens])
    at = max((i for i, t in enumerate(lowered[:-1]) if t in _PREPOSITIONS), default=-1)
    if at >= 0:
        return " ".join([*stem[: at + 1], *tokens])
    lead = _LEADING_QUESTION.match(left)
    return f"{lead.group(1)} {fragment}" if lead else fragment


_DEFINITION = re.compile(
    r"^(?:what|who|which)\s+(?:is|are|was|were)\s+(?:an?\s+|the\s+)?(.+?)\s*\?*$", re.I
)

_POSSESSIVE = re.compile(r"\bits\s+([a-z][\w-]*(?:\s+[a-z][\w-]*)?)(?=\s*\?|$)", re.I)

_PRONOUN = re.compile(r"\bit\b", re.I)


def with_subject(parts: list[str]) -> list[str]:
    """Later sub-questions that refer back by pronoun get the first one's subject: after
    "What is dowry death?", "How is it punished?" → "How is dowry death punished?" and "What
    is its punishment?" → "What is the punishment of dowry death?". A sub-question is
    searched on its own, so a bare "it" finds nothing. Only a first part of the form "What
    is X?" gives a subject, and only "it"/"its" are resolved ("they" may name another noun
    of the first part: "the powers of the police … when can they arrest")."""
    subject = _DEFINITION.match(parts[0]) if parts else None
    if subject is None or len(subject.group(1).split()) > 6:
        return parts
    name = subject.group(1).rstrip("?. ")
    out = [parts[0]]
    for part in parts[1:]:
        fixed = _POSSESSIVE.sub(lambda m: f"the {m.group(1)} of {name}", part, count=1)
        if fixed == part:
            fixed = _PRONOUN.sub(name, part, count=1)
        out.append(fixed)
    return out


def split_question(question: str) -> tuple[list[str], str]:
    """Cue-based split of a multi-part question into (sub_questions, synthesis_hint).

    Patterns, first match wins: several question marks; "..., and what/how/... ...";
    "between A and B" / "compare A and|with B" / "A vs B"; "... both A and B"; "which ...,
    A or B"; a plain " and " joining two parts of ≥ 2 content terms. ``([], "")`` when
    nothing splits. Only what the question :func:`asked` is split: a preamble of statements
    is context.
    """
    q = " ".join(asked(question).split())
    if q.count("?") >= 2:
        parts = [_OPENER.sub("", p.strip()) for p in re.findall(r"[^?]+\?", q)]
        subs = [_sentence(p) for p in parts if content_terms(p)]
        return with_subject(subs), "Answer each question."
    if _AND_QUESTION.search(q):
        parts = _AND_QUESTION.split(q.rstrip("?.! "))
        subs = [_sentence(p) for p in parts if content_terms(p)]
        return with_subject(subs), "Answer each part."
    for pattern in (_BETWEEN, _COMPARE):
        match = pattern.search(q)
        if match:
            a, b = match.group(1), _complete(match.group(2), match.group(1))
            return [_sentence(f"What is {a}"), _sentence(f"What is {b}")], (f"Compare {a} and {b}.")
    match = _VERSUS.search(q)
    if match:
        a = re.sub(rf"^(?:(?:{_QUESTION_WORDS})\s+)+", "", match.group(1).strip(), flags=re.I)
        b = match.group(2)
        return [_sentence(f"What is {a}"), _sentence(f"What is {b}")], f"Compare {a} and {b}."
    match = _AND_BOTH.search(q)
    if match:  # "Are A and B both film directors?" → "Are A film directors?", "Are B ...?"
        aux, a, b, predicate = (g.strip() for g in match.groups())
        return [_sentence(f"{aux} {a} {predicate}"), _sentence(f"{aux} {b} {predicate}")], (
            f"Answer for {a} and for {b}, then whether both are."
        )
    match = _BOTH.search(q)
    if match:
        stem, a, b = match.group(1).strip(), match.group(2), match.group(3)
        rest = ""
        if not content_terms(stem) and len(b.split()) > len(a.split()):
            # "Does both murder and theft require intention?": the predicate follows B
            cut = len(a.split())
            b, rest = " ".join(b.split()[:cut]), " ".join(b.split()[cut:])
        return [_sentence(f"{stem} {a} {rest}"), _sentence(f"{stem} {b} {rest}")], (
            "Answer for both and note what they share."
        )
    match = _WHICH_OR.search(q)
    if match:
        stem, a, b = match.group(1).strip(), match.group(2), match.group(3)
        return [_sentence(f"{a}: {stem}"), _sentence(f"{b}: {stem}")], (
            f"Compare {a} and {b} to answer: {stem}?"
        )
    pair = _split_and(q)
    if pair and not extract_references(q):
        left, right = pair
        return [_sentence(left), _sentence(_complete(right, left))], "Answer each part."
    return [], ""
