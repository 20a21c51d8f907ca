"""An evidence check of yes/no comparison answers ("Are A and B both …?", "… the same …?").

Small instruct models answer such questions "Yes" almost whatever the evidence says
(Qwen2.5-Coder-1.5B: 7 of 9 HotpotQA comparisons whose gold is "no" were answered "yes"
with the evidence for both entities in the prompt). The check reads the sections of the
entities the question names (retrieved sections whose titles occur in it) and decides when
the evidence is plain:

- *both / also* ("Are A and B both American directors?"): the question's property terms
  (its content terms less the entities' names) are looked up in each entity's section; the
  same property terms found for every entity, all of them → "yes"; different ones → "no";
  else undecided.
- *same* ("Are A and B in the same province?"): the name each section gives for the
  property noun ("Jiangsu province", "the province of Jiangxi", "the group Apink") → equal
  "yes", different "no"; else undecided.

Undecided leaves the model's answer as it is. This is a lexical judgement of the kind
HotpotQA's comparison questions are written in (the property is usually worded as the
entities' Wikipedia leads word it); a synonym ("singer" for "musician") reads as a
difference, so the check is used only to confirm or overturn a model's yes/no.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.retrieval.search import join_parts
from sleuth.retrieval.text import terms
from sleuth.tools.base import RunContext

_PARENTHETICAL = re.compile(r"\s*\([^)]*\)\s*$")
_SAME = re.compile(r"\bsame\s+([A-Za-z][\w-]*)", re.I)
_NOT_PROPERTY = frozenset(
    terms("also have has had one ones same each either all two both too well as there is are")
)


@dataclass(frozen=True)
class Entity:
    """An entity the question names, with the retrieved section about it."""

    name: str
    source_id: str
    text: str


@dataclass(frozen=True)
class YesNoCheck:
    """The check's verdict (``"yes"``/``"no"``) and why, naming the sections it read."""

    verdict: str
    reason: str


def _words(text: str) -> set[str]:
    return set(terms(text.replace("-", " ")))


def named_entities(question: str, ctx: RunContext) -> list[Entity]:
    """The retrieved sections whose title (a trailing parenthetical dropped: "Frozen (2013
    film)" → "Frozen") occurs in ``question`` as whole words, longest titles first, one per
    place in the question, in the question's order."""
    lowered = question.casefold()
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, Entity]] = []
    candidates = []
    for sid, chunks in ctx.retrieved.items():
        if not chunks or not chunks[0].title_path:
            continue
        name = _PARENTHETICAL.sub("", chunks[0].title_path[-1]).strip()
        if len(name) >= 3:
            candidates.append((name, sid, chunks))
    for name, sid, chunks in sorted(candidates, key=lambda c: -len(c[0])):
        match = re.search(rf"(?<!\w){re.escape(name.casefold())}(?!\w)", lowered)
        if match is None:
            continue
        span = match.span()
        if any(span[0] < end and start < span[1] for start, end in taken):
            continue
        taken.append(span)
        found.append((span[0], Entity(name, sid, f"{chunks[0].heading}\n{join_parts(chunks)}")))
    return [entity for _, entity in sorted(found, key=lambda f: f[0])]


_NAME = r"((?:[A-Z][\w'-]*\s?){1,3})"


def _value_of(noun: str, text: str) -> str | None:
    """The name ``text`` gives for its ``noun``, casefolded: after
    "the ``noun`` of" ("the State of Louisiana"), else right after it ("the group Apink"),
    else right before it ("Jiangsu province"); None when the text has none of these."""
    said = f"(?i:{re.escape(noun)})"
    for pattern in (
        rf"\b{said}\s+(?i:of)\s+{_NAME}",
        rf"\b{said}\s+{_NAME}",
        rf"((?:[A-Z][\w'-]*\s+){{1,3}}){said}\b",
    ):
        found = re.search(pattern, text)
        if found:
            return " ".join(found.group(1).split()).casefold()
    return None


def _same(noun: str, entities: Sequence[Entity]) -> YesNoCheck | None:
    values = [_value_of(noun, e.text) for e in entities]
    if any(v is None for v in values):
        return None
    shown = ", ".join(f"{v} [{e.source_id}]" for v, e in zip(values, entities, strict=True))
    verdict = "yes" if len(set(values)) == 1 else "no"
    return YesNoCheck(verdict, f"the {noun} of each: {shown}")


def _both(question: str, entities: Sequence[Entity]) -> YesNoCheck | None:
    names = set().union(*(_words(e.name) for e in entities))
    wanted = _words(question) - names - _NOT_PROPERTY
    if not wanted:
        return None
    found = [wanted & _words(e.text) for e in entities]
    shown = "; ".join(
        f"{e.name} [{e.source_id}]: {', '.join(sorted(f)) or 'none'}"
        for e, f in zip(entities, found, strict=True)
    )
    if all(f == wanted for f in found):
        return YesNoCheck("yes", f"every section states {', '.join(sorted(wanted))}: {shown}")
    if any(f != found[0] for f in found):
        return YesNoCheck("no", f"the sections differ on {', '.join(sorted(wanted))}: {shown}")
    return None


def check_yes_no(question: str, ctx: RunContext) -> YesNoCheck | None:
    """The evidence's answer to a yes/no comparison of two or more named entities, or None
    when the question compares fewer than two retrieved entities or the evidence is not
    plain (see the module docstring)."""
    entities = named_entities(question, ctx)
    if len(entities) < 2:
        return None
    same = _SAME.search(question)
    if same:
        return _same(same.group(1), entities)
    return _both(question, entities)
