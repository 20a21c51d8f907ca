"""Negation and clause scope in rule text: whether a clause negates, and a sentence's clauses.

Used by the yes/no verdict reader (:mod:`sleuth.agents.verdict`: the parity of negation of
the clause that answers) and by the support check (:mod:`sleuth.agents.support`: a claim
whose negation differs from the clause of its cited section that states it contradicts its
citation). Two general features of how statutes are drafted decide the scope:

* a rule sentence carries its conditions and provisos in clauses, split at ``,`` ``;``
  ``:`` and a dash (:func:`clauses`); the clause that answers alone carries the negation;
* bounds are not negations: "not less than", "shall not be less than", "not exceeding",
  "not below the rank of" state a limit, so "not" (or "not be") before a comparative is no
  cue (:func:`negated`);
* a prohibition opens with its negation: "No confession … shall be proved", "Nothing is an
  offence which …", "No person shall …" — the negative quantifier is the clause's subject,
  so the negation governs all of it, and its parity is not in doubt (:func:`prohibits`).
"""

from __future__ import annotations

import re

_NEGATION = re.compile(
    r"\b(?:not|no|never|nothing|none|neither|nor|nobody|cannot)\b|n't\b", re.IGNORECASE
)
_BOUND = re.compile(
    r"\bnot\s+(?:be\s+)?(?:less|more|fewer|greater|below|above|under|over|exceeding|later|earlier|"
    r"beyond|before|after)\b",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"\s*[,;:\u2014]\s*|\s+--?\s+")
NEGATIVE_QUANTIFIERS = frozenset(["no", "nothing", "none", "neither", "nobody"])
"""Words that open a prohibition as its subject ("No person shall …", "No one shall …")."""
MIN_CLAUSE_WORDS = 4
"""A clause shorter than this ("Save as aforesaid", "(2) Where") joins the next one."""


def negated(text: str) -> bool:
    """Whether ``text`` negates: an odd number of negation cues ("not", "no", "nothing",
    "never", "cannot", "n't" …), a bound ("not less than") not counted."""
    return len(_NEGATION.findall(_BOUND.sub(" ", text))) % 2 == 1


def prohibits(clause: str) -> bool:
    """Whether ``clause`` opens with a negative quantifier (:data:`NEGATIVE_QUANTIFIERS`),
    after any sub-section or item marks ("(1)", "(a)"): a prohibition, whose negation governs
    the whole clause. A clause that only contains a negation ("… and there is no immediate
    prospect of arresting him, …") is not one."""
    words = clause.split()
    while words and words[0].startswith("(") and words[0].endswith(")"):
        words = words[1:]
    return bool(words) and words[0].lower().strip("\"'“‘") in NEGATIVE_QUANTIFIERS


def clauses(sentence: str) -> list[str]:
    """``sentence`` split at clause boundaries (commas, semicolons, colons, dashes), a
    clause of fewer than :data:`MIN_CLAUSE_WORDS` words joined to the next one."""
    out: list[str] = []
    carry = ""
    for part in _CLAUSE.split(sentence):
        part = f"{carry} {part}".strip() if carry else part.strip()
        if len(part.split()) < MIN_CLAUSE_WORDS:
            carry = part
            continue
        out.append(part)
        carry = ""
    if carry:
        if out:
            out[-1] = f"{out[-1]} {carry}"
        else:
            out.append(carry)
    return out or [sentence]
