"""Follow-up questions of a conversation thread, made standalone before anything is searched.

In a thread, "And for an attempt?" or "Which court tries it?" mean nothing to a search
engine: the question leans on the turns before it. :func:`standalone_question` turns it into
a question that can be searched and answered alone (the *query rewriting* step of
conversational RAG; cf. Vakulenko et al., "Question Rewriting for Conversational Question
Answering", WSDM 2021):

- with a model, one call reads the thread's earlier questions (:func:`history_for_model`:
  newest first into a token budget) and rewrites the question; the rewrite is kept when it
  still asks what the question asks (:func:`keeps_question`);
- without a model (or when the call fails or its rewrite is not kept), the subject is
  carried: the question, then what it follows up ("(<the thread's first question>; <the
  previous one>)"), so the search sees both (:func:`carried_subject`);
- in both cases the sections the previous turn cited are carried as well: the run reads
  them first (a follow-up often asks about the same section), beside a fresh search.

The rewrite is a run's question from then on; the question as typed stays the turn's
question in the thread, and both are in the run's trace (``trace["conversation"]``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field, field_validator

from sleuth.agents.generation import with_budget
from sleuth.errors import ContextWindowExceeded
from sleuth.llm import calls
from sleuth.llm.calls import estimate_tokens
from sleuth.llm.toolcalls import content_parts
from sleuth.prompts import load_prompt
from sleuth.retrieval.text import sentences, terms
from sleuth.types import MAX_QUESTION_CHARS

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

RewriteMethod = Literal["none", "context", "model"]

REWRITE_TOKENS = 96
"""Output budget of the rewrite call: one question."""


@dataclass(frozen=True)
class PriorTurn:
    """One earlier turn of a thread, as the rewrite reads it.

    Attributes:
        question: the question as the user typed it.
        citations: the source_ids the turn's answer cited, in order.
    """

    question: str
    citations: tuple[str, ...] = ()


@dataclass
class Rewrite:
    """A thread's question made standalone.

    Attributes:
        question: what the run searches and answers.
        original: the question as the user typed it.
        method: ``"none"`` (first turn of a thread: nothing to rewrite), ``"context"`` (the
            previous turn's subject carried, no model), ``"model"`` (the model's rewrite).
        carried_citations: source_ids cited by the previous turn, read first by the run.
        history_turns: earlier turns the rewrite read.
        errors: why the model's rewrite was not used, when it was asked and failed.
    """

    question: str
    original: str
    method: RewriteMethod
    carried_citations: list[str] = field(default_factory=list)
    history_turns: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """JSON-able form for the run's trace."""
        return {
            "original_question": self.original,
            "rewritten_question": None if self.method == "none" else self.question,
            "rewrite": self.method,
            "carried_citations": list(self.carried_citations),
            "history_turns": self.history_turns,
            "errors": list(self.errors),
        }


class StandaloneQuestion(BaseModel):
    """The last question of a conversation rewritten to be understood on its own."""

    question: str = Field(
        description="The question rewritten so that it can be understood without the "
        "conversation: pronouns and omitted words replaced by what they refer to. The "
        "question unchanged if it already stands alone. A question, never its answer."
    )

    @field_validator("question")
    @classmethod
    def _a_question(cls, value: str) -> str:
        value = " ".join(value.split())
        if len(value) < 3:
            raise ValueError("the rewritten question is empty")
        if len(value) > MAX_QUESTION_CHARS:
            raise ValueError(f"the rewritten question is over {MAX_QUESTION_CHARS} characters")
        return value


def history_for_model(history: Sequence[PriorTurn], budget_tokens: int) -> list[PriorTurn]:
    """The newest turns of ``history`` whose questions fit ``budget_tokens`` (estimated,
    :func:`~sleuth.llm.calls.estimate_tokens`), oldest first. The last turn is kept even
    when alone it is over budget, its question then cut to its end (what is asked)."""
    kept: list[PriorTurn] = []
    used = 0
    for turn in reversed(history):
        cost = estimate_tokens(turn.question)
        if kept and used + cost > budget_tokens:
            break
        if not kept and cost > budget_tokens:
            keep = int(budget_tokens * calls.BYTES_PER_TOKEN)
            tail = turn.question.encode("utf-8")[-keep:].decode("utf-8", "ignore")
            turn, cost = PriorTurn(f"… {tail.lstrip()}", turn.citations), budget_tokens
        kept.append(turn)
        used += cost
    return kept[::-1]


def carried_subject(question: str, history: Sequence[PriorTurn]) -> str:
    """The offline rewrite: ``question`` with the earlier questions it follows up as its
    subject, in one sentence — e.g. "And for an attempt (What jail term can a first-time
    thief get)?". The subject is the first question of ``history`` (the thread's first
    while it has no more turns than are read, ``SLEUTH_THREAD_HISTORY_TURNS``) and the
    previous one, as typed (rewrites never nest); their own sentence ends
    become ";", so the rewrite reads as one question, and no marker word is added (a word
    such as "following up" would be a term the answer is then expected to cover).

    Chosen on the ``dev`` split of ``bench/data/statutes_dialogues.jsonl`` (41 follow-ups,
    no model; ``bench/bench_conversation.py``): follow-up gold cited 0.37 with the first and
    the previous question, 0.32 with the previous one alone, 0.34 with the previous turn's
    own rewrite (which nests), 0.34 for the follow-up asked alone.
    """
    asked = question.strip().rstrip("?!. ")
    chosen = dict.fromkeys([history[0].question, history[-1].question])
    parts = [part.rstrip("?!. ") for q in chosen for part in sentences(q)]
    return f"{asked} ({'; '.join(p for p in parts if p)})?"


def keeps_question(original: str, rewrite: str) -> bool:
    """Whether ``rewrite`` still asks what ``original`` asks: it holds every content term of
    ``original`` (stemmed, :func:`~sleuth.retrieval.text.terms`) but at most one. A rewrite
    adds what pronouns and left-out words refer to; one that drops the follow-up's own words
    has answered, or swapped in an earlier question (a small model does both)."""
    asked = set(terms(original))
    return len(asked - set(terms(rewrite))) <= 1


def _rewrite_line(text: str) -> str:
    """The first non-empty line of a reply, without a ``Rewritten:`` label or quotes."""
    for line in text.splitlines():
        head, colon, rest = line.partition(":")
        if colon and "rewritten" in head.lower():  # the label the prompt's examples use
            line = rest
        line = line.strip().strip("\"'“”")
        if line:
            return line
    return ""


def standalone_question(
    question: str,
    history: Sequence[PriorTurn],
    model: BaseChatModel | None = None,
    *,
    budget_tokens: int = 600,
    usage: Callable[[dict[str, int]], None] | None = None,
) -> Rewrite:
    """``question`` made standalone from the thread's earlier turns (module docstring).

    With a model: one plain-text call (``prompts/followup_rewrite.md``: the instructions and
    two worked examples, then the thread's earlier questions within ``budget_tokens``,
    newest kept first, and the last question); the first line of the reply is the rewrite.
    It is used when it is a sane question (:class:`StandaloneQuestion`) that
    :func:`keeps_question`; otherwise, or when the call fails, the offline rewrite
    (:func:`carried_subject`) is, and why is in ``errors``.

    Args:
        question: the question as typed.
        history: the thread's earlier turns, oldest first (empty: a first turn).
        model: the configured chat model, or ``None`` (offline: the subject carried).
        budget_tokens: the most history tokens shown to the model.
        usage: receives the model call's token counts.

    Returns:
        The :class:`Rewrite`; never raises for a model failure.
    """
    question = question.strip()
    if not history:
        return Rewrite(question=question, original=question, method="none")
    carried = list(dict.fromkeys(history[-1].citations))
    shown = history_for_model(history, budget_tokens)
    offline = carried_subject(question, history)
    if model is None:
        return Rewrite(offline, question, "context", carried, len(shown))
    earlier = "\n".join(f"Earlier question: {turn.question}" for turn in shown)
    messages = [
        SystemMessage(load_prompt("followup_rewrite")),
        HumanMessage(f"{earlier}\nLast question: {question}\nRewritten:"),
    ]
    try:
        reply = calls.invoke(with_budget(model, REWRITE_TOKENS), messages)
    except ContextWindowExceeded:
        raise
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        return Rewrite(offline, question, "context", carried, len(shown), [error])
    if usage is not None and getattr(reply, "usage_metadata", None):
        usage(dict(reply.usage_metadata))
    text, _ = content_parts(reply.content, getattr(reply, "additional_kwargs", None))
    try:
        rewrite = StandaloneQuestion(question=_rewrite_line(text)).question
    except ValueError as exc:
        return Rewrite(offline, question, "context", carried, len(shown), [str(exc)])
    if not keeps_question(question, rewrite):
        error = f"the model's rewrite dropped what the question asks: {rewrite!r}"
        return Rewrite(offline, question, "context", carried, len(shown), [error])
    return Rewrite(rewrite, question, "model", carried, len(shown))
