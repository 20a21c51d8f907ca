"""The last step of every run, in both modes: validate citations, guard, set the status."""

from __future__ import annotations

from dataclasses import dataclass

from sleuth.agents.answer import AnswerDraft, GeneratedAnswer
from sleuth.agents.citations import CitationReport, RemovedCitation, validate_citations
from sleuth.agents.heuristic import compose_answer
from sleuth.agents.state import RunStatus
from sleuth.agents.support import SupportChecker
from sleuth.tools.base import RunContext

UNCITED = "the answer cited no section retrieved in this run"
STOPPED = {
    RunStatus.TIMEOUT: "the run's time limit, SLEUTH_RUN_TIMEOUT_S, was reached",
    RunStatus.MAX_ITERATIONS: "the tool-round limit, SLEUTH_MAX_ITERATIONS, was reached",
    RunStatus.REPEATED_ACTION: "the agent repeated the same tool call",
}


@dataclass
class FinishedAnswer:
    """The validated answer of a run, its status and what the checks changed."""

    answer: GeneratedAnswer
    status: RunStatus
    report: CitationReport
    replaced: str | None = None

    @property
    def removed(self) -> list[RemovedCitation]:
        return self.report.removed

    def summary(self) -> str:
        """One line for the FINAL step: status and what the citation checks changed."""
        r = self.report
        parts = [
            f"status={self.status.value}",
            "removed citations: "
            + (", ".join(f"{c.source_id} ({c.reason})" for c in r.removed) or "none"),
            "unsupported citations: "
            + (", ".join(f"{u.source_id} ({u.reason})" for u in r.unsupported) or "none"),
        ]
        if r.dropped_sentences:
            parts.append(f"{len(r.dropped_sentences)} ungrounded sentence(s) dropped")
        if self.replaced:
            parts.append(f"answer replaced: {self.replaced}")
        return "; ".join(parts)

    def trace(self) -> dict[str, object]:
        """Trace metadata: the citation report plus ``answer_replaced``."""
        return {**self.report.trace(), "answer_replaced": self.replaced}


def finish_answer(
    question: str,
    draft: AnswerDraft,
    ctx: RunContext,
    stop_status: RunStatus | None = None,
    error: str | None = None,
    require_citations: bool = True,
    checker: SupportChecker | None = None,
    strict_grounding: bool = False,
) -> FinishedAnswer:
    """Turn a draft into the run's answer.

    1. Citations are validated sentence by sentence against the sections retrieved in this
       run and, with a ``checker``, for support (see :func:`validate_citations`).
    2. An answer that is not "insufficient context" but cites nothing is replaced by the
       extractive answer from the evidence (cited, or honestly insufficient): every answer
       must rest on retrieved sections — unless ``require_citations`` is false (a
       conversational reply the planner routed past retrieval).
    3. When the run failed (``error``) or was stopped by a limit (timeout, iterations,
       repeats) and the evidence does not answer, the answer says so — not that the knowledge
       base lacks the answer.
    4. Status: ``stop_status`` when the loop was stopped, else ``insufficient_context`` or
       ``completed``.
    """
    report = validate_citations(draft, ctx, checker, strict_grounding)
    replaced = None
    if (
        require_citations
        and not report.answer.is_insufficient_context
        and not (report.answer.citations)
    ):
        replaced = UNCITED
        fallback = validate_citations(compose_answer(question, ctx), ctx, checker, strict_grounding)
        fallback.removed[:0] = report.removed
        fallback.unsupported[:0] = report.unsupported
        fallback.dropped_sentences[:0] = report.dropped_sentences
        report = fallback
    answer = report.answer
    if not require_citations:  # a conversational reply claims nothing from the evidence
        answer.ungrounded_sentences = []
    if error is not None and answer.is_insufficient_context:
        answer.answer_text = (
            f"The run stopped because {error}; the evidence retrieved before that does not "
            "answer the question."
        )
    elif stop_status in STOPPED and answer.is_insufficient_context:
        # not "the knowledge base lacks it": the run ended before it could tell
        answer.answer_text = (
            f"The run stopped early ({STOPPED[stop_status]}) before the evidence answered the "
            "question; the knowledge base may still hold the answer. "
            + (f"Sections found so far: {', '.join(ctx.retrieved)}." if ctx.retrieved else "")
        ).strip()
    if stop_status is not None:
        status = stop_status
    elif answer.is_insufficient_context:
        status = RunStatus.INSUFFICIENT_CONTEXT
    else:
        status = RunStatus.COMPLETED
    return FinishedAnswer(answer=answer, status=status, report=report, replaced=replaced)
