"""The last step of every run, in both modes: validate citations, guard, set the status."""

from __future__ import annotations

from dataclasses import dataclass, field

from sleuth.agents.answer import AnswerDraft, GeneratedAnswer
from sleuth.agents.citations import RemovedCitation, validate_citations
from sleuth.agents.heuristic import compose_answer
from sleuth.agents.state import RunStatus
from sleuth.tools.base import RunContext

UNCITED = "the answer cited no section retrieved in this run"


@dataclass
class FinishedAnswer:
    """The validated answer of a run, its status and what the checks changed."""

    answer: GeneratedAnswer
    status: RunStatus
    removed: list[RemovedCitation] = field(default_factory=list)
    replaced: str | None = None


def finish_answer(
    question: str,
    draft: AnswerDraft,
    ctx: RunContext,
    stop_status: RunStatus | None = None,
    error: str | None = None,
    require_citations: bool = True,
) -> FinishedAnswer:
    """Turn a draft into the run's answer.

    1. Citations are validated against the sections retrieved in this run (removed ones are
       returned with the reason).
    2. An answer that is not "insufficient context" but cites nothing is replaced by the
       extractive answer from the evidence (cited, or honestly insufficient): every answer
       must rest on retrieved sections — unless ``require_citations`` is false (a
       conversational reply the planner routed past retrieval).
    3. When the run failed (``error``) and the evidence does not answer, the answer says so.
    4. Status: ``stop_status`` when the loop was stopped, else ``insufficient_context`` or
       ``completed``.
    """
    answer, removed = validate_citations(draft, ctx.retrieved)
    replaced = None
    if require_citations and not answer.is_insufficient_context and not answer.citations:
        replaced = UNCITED
        answer, more = validate_citations(compose_answer(question, ctx), ctx.retrieved)
        removed.extend(more)
    if error is not None and answer.is_insufficient_context:
        answer.answer_text = (
            f"The run stopped because {error}; the evidence retrieved before that does not "
            "answer the question."
        )
    if stop_status is not None:
        status = stop_status
    elif answer.is_insufficient_context:
        status = RunStatus.INSUFFICIENT_CONTEXT
    else:
        status = RunStatus.COMPLETED
    return FinishedAnswer(answer=answer, status=status, removed=removed, replaced=replaced)
