"""Self-reflection: a bounded critique of a draft answer against its evidence.

After the reasoner drafts an answer, the critic checks it (Self-Refine, Madaan et al. 2023,
arXiv:2303.17651; Reflexion, Shinn et al. 2023, arXiv:2303.11366 — here bounded to one
revision): which parts of the question the draft leaves unanswered, and which of its
sentences the cited evidence does not support (the citation support check of
:mod:`sleuth.agents.support`). When something is missing and a new search could find it, the
loop gets one more round with the critique, then answers again; the second draft is final.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field, model_validator

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.citations import validate_citations
from sleuth.agents.question import question_terms, split_question
from sleuth.agents.structured import StructuredResult, call_structured
from sleuth.agents.support import SupportChecker
from sleuth.prompts import load_prompt
from sleuth.retrieval.search import join_parts
from sleuth.retrieval.text import STOPWORDS, coverage, novel_query, once, terms, words
from sleuth.tools.base import RunContext

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

MAX_REVISIONS = 1
"""Revisions a critique may trigger per run."""
CRITIQUE_NOTE = "Critique of the draft:"
"""How the note that sends a critiqued draft back to the loop begins."""
PART_COVERAGE = 0.5
"""A part of a multi-part question counts as answered when the answer and its cited sections
hold more than this share of the part's terms."""
EVIDENCE_CHARS = 1500


class Critique(BaseModel):
    """The critic's verdict on a draft answer."""

    missing_parts: list[str] = Field(
        default_factory=list, description="Parts of the question the draft does not answer"
    )
    unsupported_claims: list[str] = Field(
        default_factory=list, description="Sentences of the draft its evidence does not support"
    )
    needs_revision: bool = Field(
        default=False, description="Whether another search and a new draft are worthwhile"
    )
    revision_query: str = Field(default="", description="The search that would fill the gap")

    @model_validator(mode="after")
    def _query_when_revising(self) -> Critique:
        self.revision_query = " ".join(self.revision_query.split())
        if self.needs_revision and not self.revision_query:
            raise ValueError("needs_revision is true: give the revision_query to search")
        return self

    def summary(self) -> str:
        """The critique in one line, for the trace."""
        parts = []
        if self.missing_parts:
            parts.append("missing: " + "; ".join(self.missing_parts))
        if self.unsupported_claims:
            parts.append(f"{len(self.unsupported_claims)} unsupported sentence(s)")
        verdict = (
            f"revising with a search for '{self.revision_query}'"
            if self.needs_revision
            else "the draft stands"
        )
        return ("; ".join(parts) + " — " if parts else "complete and supported — ") + verdict


def heuristic_critique(
    question: str, draft: AnswerDraft, ctx: RunContext, checker: SupportChecker | None
) -> Critique:
    """The deterministic critic.

    Missing parts: for a multi-part question, each part whose terms the answer and its cited
    sections cover at most :data:`PART_COVERAGE`; otherwise the question's terms found in
    neither. Unsupported claims: sentences whose citations all failed the support check, or
    that cite nothing. Revision: a search for the missing words, when it is a
    :func:`~sleuth.retrieval.text.novel_query` (two content terms at least, not a repeat or
    a subset of an earlier search), else for them with the title of one of the two best
    sections found.
    """
    report = validate_citations(draft, ctx, checker)
    answer = report.answer
    unsupported = list(
        dict.fromkeys([u.sentence for u in report.unsupported] + answer.ungrounded_sentences)
    )
    cited = " ".join(join_parts(ctx.retrieved[c.source_id]) for c in answer.citations)
    evidence = f"{answer.answer_text} {cited}"
    found = set(terms(evidence))
    parts, _ = split_question(question)
    if len(parts) >= 2:
        missing_parts = [p for p in parts if coverage(set(terms(p)), evidence) <= PART_COVERAGE]
    else:
        absent = sorted(question_terms(question) - found)
        missing_parts = [f"terms not covered: {', '.join(absent)}"] if absent else []
    missing_words = [
        w
        for w in dict.fromkeys(words(" ".join(parts) if parts else question))
        if w not in STOPWORDS and len(w) > 1 and terms(w) and terms(w)[0] not in found
    ]
    query = " ".join(missing_words)
    # a whole missing part may be one word ("theft"); left-over words need two
    min_terms = 1 if len(parts) >= 2 else 2
    novel = novel_query(query, ctx.searches, min_terms=min_terms)
    if not novel and missing_words:
        # the missing words alone were searched already: pair them with what the best
        # sections found are about (the last hop's entity, IRCoT-style)
        from sleuth.agents.heuristic import rank_sections  # heuristic imports this module

        for sid, _ in rank_sections(question, ctx)[:2]:
            title = ctx.retrieved[sid][0].title_path[-1] if ctx.retrieved[sid] else ""
            candidate = once(f"{title} {query}")
            if title and novel_query(candidate, ctx.searches):
                query, novel = candidate, True
                break
    revise = novel and bool(missing_parts or unsupported)
    return Critique(
        missing_parts=missing_parts,
        unsupported_claims=unsupported,
        needs_revision=revise,
        revision_query=query if revise else "",
    )


def critique_draft(
    question: str,
    draft: AnswerDraft,
    ctx: RunContext,
    model: BaseChatModel | None,
    checker: SupportChecker | None,
    *,
    max_retries: int = 2,
    usage: Callable[[dict[str, int]], None] | None = None,
) -> StructuredResult[Critique]:
    """The critic: a :class:`Critique` from the model, or :func:`heuristic_critique`."""
    cited = [sid for sid in dict.fromkeys(draft.citations) if sid in ctx.retrieved]
    for sid in ctx.retrieved:
        if f"[{sid}]" in draft.answer_text and sid not in cited:
            cited.append(sid)
    evidence = "\n\n".join(
        f"[{sid}] {ctx.retrieved[sid][0].heading}\n"
        + join_parts(ctx.retrieved[sid])[:EVIDENCE_CHARS]
        for sid in cited
    )
    human = (
        f"Question: {question}\n\nDraft answer:\n{draft.answer_text}\n\n"
        f"Cited evidence:\n{evidence or '(none)'}\n\n"
        f"Searches already run: {'; '.join(ctx.searches) or 'none'}"
    )
    return call_structured(
        model,
        Critique,
        [SystemMessage(load_prompt("react_reflection")), HumanMessage(human)],
        max_retries=max_retries,
        fallback=lambda: heuristic_critique(question, draft, ctx, checker),
        name="critique",
        usage=usage,
    )
