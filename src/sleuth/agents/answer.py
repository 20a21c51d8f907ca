"""The structured final answer and its citations."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field, PrivateAttr


class Citation(BaseModel):
    """A cited section: its id, where it sits, and the text that supports the claim."""

    source_id: str = Field(description="Citation id of a section retrieved in this run")
    number: int | None = Field(
        default=None,
        description="The section's evidence number in this run (1 = first section retrieved); "
        "stable across refinement rounds",
    )
    title: str = Field(default="", description="The section's title path, ' > '-joined")
    text: str = Field(default="", description="The cited section's text (may be truncated)")
    support: float | None = Field(
        default=None,
        description="Best support score of the section for the sentences citing it, in [0, 1] "
        "(lexical coverage or embedding cosine; see sleuth.agents.support); null if unchecked",
    )


class GeneratedAnswer(BaseModel):
    """The answer of a run (schema of the legal-react-agent seed, generalised).

    Citation markers in ``answer_text`` are written ``[source_id]``, e.g. ``[BNS_S103]``.
    """

    answer_text: str = Field(description="The answer, each claim followed by [source_id] markers")
    short_answer: str | None = Field(
        default=None,
        description="For a factoid question (who, when, which, how many, yes/no): the bare "
        "entity, date, number or yes/no the answer text opens with; null otherwise",
    )
    key_points: list[str] = Field(default_factory=list, description="Short key points")
    citations: list[Citation] = Field(default_factory=list)
    is_insufficient_context: bool = Field(
        default=False, description="True when the retrieved evidence does not cover the question"
    )
    ungrounded_sentences: list[str] = Field(
        default_factory=list,
        description="Sentences of the answer that no retrieved section was found to support "
        "(dropped instead under strict grounding)",
    )


class AnswerDraft(BaseModel):
    """What a reasoner proposes as its final answer, before citation validation.

    This is also the argument schema of the ``final_answer`` tool an LLM calls.
    """

    answer_text: str = Field(
        description="The answer. After each claim, cite the result it comes from by its "
        "number, e.g. [1], or by its source_id."
    )
    short_answer: str = Field(
        default="",
        description="Only for a who/when/which/how-many/yes-no question: the bare name, date, "
        "number or yes/no; else empty",
    )
    key_points: list[str] = Field(default_factory=list, description="Two to five key points")
    citations: list[str] = Field(
        default_factory=list, description="source_ids of the sections that support the answer"
    )
    is_insufficient_context: bool = Field(
        default=False,
        description="true if the retrieved sections do not answer the question",
    )
    _extractive: bool = PrivateAttr(default=False)

    @property
    def extractive(self) -> bool:
        """True for a draft made from the evidence by the heuristic, not written by a model."""
        return self._extractive

    def as_extractive(self) -> AnswerDraft:
        """This draft marked as extractive (see :attr:`extractive`)."""
        self._extractive = True
        return self


MARKERS = re.compile(r"\s*\[[^\]\n]{1,200}\]")
"""A bracketed citation marker ("[BNS_S103]", "[2]", "[1, 3]") with the blanks before it:
``MARKERS.sub("", text)`` is the text without its markers."""

MAX_ANSWER_CHARS = 8000
"""Characters an answer's text may hold (a long-form answer with its quoted rules is
~1,500): longer text — a quote of a section with no sentence breaks, a model that does not
stop — is cut by :func:`capped`."""


def capped(answer: GeneratedAnswer, limit: int = MAX_ANSWER_CHARS) -> GeneratedAnswer:
    """``answer`` with its text cut to at most ``limit`` characters: at the last sentence end
    in the second half of the allowance, else at the last space, else where the limit falls,
    with a visible ``[truncated: N of M chars]`` mark; the same answer when it fits. The
    citations are kept (they name sections, their text is bounded where it is read)."""
    text = answer.answer_text
    if len(text) <= limit:
        return answer
    room = max(limit - 40, 1)  # the mark's room
    head = text[:room]
    cut = max(head.rfind(". "), head.rfind(".\n"), head.rfind("] "))
    if cut < room // 2:
        cut = head.rfind(" ")
    end = cut + 1 if cut >= room // 2 else room
    kept = text[:end].rstrip()
    mark = f" [truncated: {len(text) - len(kept)} of {len(text)} chars]"
    return answer.model_copy(update={"answer_text": kept + mark})


def closest_found(source_ids: list[str]) -> str:
    """The end of a decline that names the sections found nearest the question: "; the
    closest found (A, B) do not cover it." — or "; nothing was retrieved." when none was."""
    if not source_ids:
        return "; nothing was retrieved."
    return f"; the closest found ({', '.join(source_ids)}) do not cover it."
