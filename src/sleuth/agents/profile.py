"""One question analysis per run: the typed profile both modes read.

A run's question is read once, when the run starts (:func:`analyse_question`, called by
:meth:`sleuth.service.AgentService.execute_agentic_search`), and the profile rides on the
run's :class:`~sleuth.tools.base.RunContext` (``ctx.profile``). The service, the guided
runtime, the ReAct reasoner and the shared finish step take what they need from it instead
of parsing the question again each:

- ``named_documents`` — the documents it names ("under the Consumer Protection Act, 2019"):
  the answer must come from one of them (:mod:`sleuth.agents.scope`);
- ``references`` — section references it names ("section 103"), looked up as such;
- ``parts`` / ``multi_part`` — whether it asks several things, and its sub-questions
  (:mod:`sleuth.agents.question`);
- ``answer_kind`` — fact, yes/no, explanation, list or procedure
  (:func:`~sleuth.agents.reader.answer_kind`): the reader's prompt and output budget;
- ``hop`` — for a compositional question ("the spouse of the director of X"), the first
  sub-question its chain asks (:func:`~sleuth.agents.chained.split_compositional`).

The analysis is by rules (offline, deterministic); a configured model still writes the
guided mode's own decomposition of a multi-part question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sleuth.agents.chained import split_compositional
from sleuth.agents.question import asked, is_multi_part, split_question
from sleuth.agents.reader import AnswerKind, answer_kind
from sleuth.agents.scope import named_documents
from sleuth.ingest.references import extract_references

if TYPE_CHECKING:
    from sleuth.tools.base import RunContext


@dataclass(frozen=True)
class QuestionProfile:
    """What a question asks, read once (module docstring)."""

    question: str
    asked: str
    """The question without a preamble of statements ("My bike was taken. Can I …?" → its
    last sentence); the whole question when it has none."""
    named_documents: tuple[str, ...]
    references: tuple[str, ...]
    parts: tuple[str, ...]
    """Sub-questions of a question that splits into parts; empty otherwise."""
    multi_part: bool
    """The question asks several things (parts, or a comparison that does not split)."""
    answer_kind: AnswerKind
    hop: str | None
    """The first sub-question of a compositional question's chain; ``None`` otherwise."""

    def to_dict(self) -> dict[str, object]:
        """The profile as JSON-able data (the run's trace ``question_profile``)."""
        return {
            "asked": self.asked,
            "named_documents": list(self.named_documents),
            "references": list(self.references),
            "parts": list(self.parts),
            "multi_part": self.multi_part,
            "answer_kind": self.answer_kind,
            "hop": self.hop,
        }


def analyse_question(question: str) -> QuestionProfile:
    """The :class:`QuestionProfile` of ``question`` (by rules; no model, no I/O)."""
    parts, _ = split_question(question)
    split = split_compositional(question)
    return QuestionProfile(
        question=question,
        asked=asked(question),
        named_documents=tuple(named_documents(question)),
        references=tuple(extract_references(question)),
        parts=tuple(parts),
        multi_part=is_multi_part(question),
        answer_kind=answer_kind(question),
        hop=split.sub_question if split is not None else None,
    )


def profile_of(question: str, ctx: RunContext | None = None) -> QuestionProfile:
    """The run's profile when ``question`` is the run's question (``ctx.profile``), else the
    analysis of ``question`` (a sub-question, or a caller without a run)."""
    profile = getattr(ctx, "profile", None)
    if isinstance(profile, QuestionProfile) and profile.question == question:
        return profile
    return analyse_question(question)
