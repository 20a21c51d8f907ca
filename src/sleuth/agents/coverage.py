"""Does the collection answer the question? The model's judgement of coverage.

A model answer that cites sections about other matters is declined
(:func:`sleuth.agents.finish.off_topic`), and a run whose evidence the word-coverage
heuristic finds insufficient reads it only when something finds it relevant
(``guided.runtime._overall``). The first judge is the cross-encoder's best score for a
sentence of the sections (``SLEUTH_COVERAGE_THRESHOLD``). On plainly worded questions it
errs: "A man groped a woman on a crowded bus" shares almost nothing with "assault or
criminal force to woman with intent to outrage her modesty", and the ms-marco
cross-encoder scores the section that answers it like a section about something else.

When a model is configured, a section the cross-encoder finds unrelated is shown to the
model — its title, its first sentence and the sentence the cross-encoder scores best —
with the question, asking whether the section deals with the situation the question asks
about (``prompts/coverage_judge.md``). The answer is read as log-odds of "Yes" over "No"
(:meth:`~sleuth.llm.local.LlamaCppChatModel.first_token_log_odds`: one forward pass, ~2 s
on 2 cores for the 1.5B model); a model behind a server answers in words, read as ±1. The
sections count as covering the question when the best of them reaches
:data:`MODEL_COVERAGE_LOG_ODDS`.

Measured with ``bench/bench_coverage.py`` (``dev`` split; in corpus: 76 natural questions
on their gold section; out of corpus: 78 questions on the section search ranks first):
AUC of the cross-encoder 0.737, of the local 1.5B model's log-odds 0.919 (``test``: 0.674
and 0.860).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from sleuth.agents.quotes import sentence_passages
from sleuth.prompts import load_prompt
from sleuth.tools.base import RunContext

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from sleuth.retrieval.rerank import CrossEncoder

MODEL_COVERAGE_LOG_ODDS = 0.26
"""The least log-odds of "Yes" for the model to find a section about the question. Chosen on
``bench/bench_coverage.py``'s ``dev`` records under issue 26's limit on in-corpus declines
(≤ 0.05), for the rule "declined when the cross-encoder is below the coverage threshold
*and* the model below this": the 76 in-corpus questions' log-odds, among those the
cross-encoder declines, are 0.212, 0.228, 0.230, 0.288, 0.526 …; three declines (0.039) is
the most the limit allows, and 0.26 lies midway between the third and the fourth. There,
in-corpus declines 0.33 (the cross-encoder alone) → 0.04, out-of-corpus declines 0.58 →
0.42 (judged set 0.62 → 0.38, Consumer Protection Act 0.40 → 0.30, HotpotQA 1.00 → 0.75);
on ``test``, once: 0.33 → 0.02 and 0.62 → 0.49."""
JUDGED_SECTIONS = 2
"""Sections shown to the model at most, one call each, in the order given."""
FIRST_CHARS = 350
BEST_CHARS = 450
"""Characters of the first sentence and of the best-scored sentence shown."""
CACHED_JUDGEMENTS = 256
"""Judgements kept per judge, keyed by question, section and excerpt: guided mode's evaluator
and the finish check may ask about the same section within a run."""
TEXT_LOG_ODDS = 1.0
"""The log-odds given to a worded "Yes" (and minus it to "No") by a model whose first-token
scores cannot be read (a server)."""


def excerpt(question: str, chunks: Sequence[Any], scorer: CrossEncoder) -> str:
    """A section as the judge reads it: its title, its first sentence and, when another, the
    sentence ``scorer`` finds most relevant to ``question``, each cut to a budget."""
    passages = [p for _, p in sentence_passages(chunks)]
    if not passages:
        return ""
    logits = scorer.logits(question, passages)
    best = max(range(len(passages)), key=lambda i: logits[i])
    title = chunks[0].title_path[-1] if chunks[0].title_path else chunks[0].heading
    shown = passages[0].split(". ", 1)[-1][:FIRST_CHARS]
    if best:
        shown += " … " + passages[best].split(". ", 1)[-1][:BEST_CHARS]
    return f"Section: {title}\n{shown}"


def judge_messages(question: str, shown: str) -> list[BaseMessage]:
    """The judge's prompt: ``prompts/coverage_judge.md``, then the section as
    :func:`excerpt` shows it and the question."""
    return [
        SystemMessage(load_prompt("coverage_judge")),
        HumanMessage(
            f"{shown}\n\nQuestion: {question}\n\nDoes this section deal with the situation "
            "the question asks about?"
        ),
    ]


class CoverageJudge:
    """The model's judgement of whether retrieved sections deal with a question.

    Args:
        model: the run's chat model; its :meth:`first_token_log_odds` is used when it has
            one (the in-process model), else its worded reply.
        threshold: see :data:`MODEL_COVERAGE_LOG_ODDS`.
    """

    def __init__(self, model: BaseChatModel, threshold: float = MODEL_COVERAGE_LOG_ODDS):
        self.model = model
        self.threshold = threshold
        self._judged: OrderedDict[tuple[str, str, str], float | None] = OrderedDict()

    def section_log_odds(
        self, question: str, source_id: str, ctx: RunContext, scorer: CrossEncoder
    ) -> float | None:
        """The model's log-odds that the retrieved section ``source_id`` deals with
        ``question`` (:func:`excerpt`, ``prompts/coverage_judge.md``); ``None`` when it was
        not retrieved in this run, shows nothing, or the model gave no usable judgement (a
        failed call counts as none). Kept for the same question and excerpt
        (:data:`CACHED_JUDGEMENTS`), so asking again costs no model call."""
        chunks = ctx.retrieved.get(source_id)
        shown = excerpt(question, chunks, scorer) if chunks else ""
        if not shown:
            return None
        key = (question, source_id, shown)
        if key in self._judged:
            self._judged.move_to_end(key)
            return self._judged[key]
        try:
            value = self._judge(judge_messages(question, shown), ctx)
        except Exception:  # a judgement is advice: the run goes on without it
            value = None
        self._judged[key] = value
        if len(self._judged) > CACHED_JUDGEMENTS:
            self._judged.popitem(last=False)
        return value

    def log_odds(
        self, question: str, source_ids: Sequence[str], ctx: RunContext, scorer: CrossEncoder
    ) -> float | None:
        """The best log-odds of "Yes" over the first :data:`JUDGED_SECTIONS` of
        ``source_ids`` retrieved in this run; ``None`` when none was retrieved or the model
        gave no usable judgement (a failed call counts as none: the cross-encoder's verdict
        then stands)."""
        best: float | None = None
        for sid in [s for s in dict.fromkeys(source_ids) if ctx.retrieved.get(s)][:JUDGED_SECTIONS]:
            value = self.section_log_odds(question, sid, ctx, scorer)
            if value is not None:
                best = value if best is None else max(best, value)
            if best is not None and best >= self.threshold:
                break
        return best

    def best_section(
        self, question: str, source_ids: Sequence[str], ctx: RunContext, scorer: CrossEncoder
    ) -> tuple[str, float] | None:
        """The section of ``source_ids`` (retrieved in this run, each judged once:
        :meth:`section_log_odds`) the model finds most about ``question``, with its
        log-odds, when they reach :attr:`threshold`; else ``None``. Ties go to the section
        given first; so a model that answers in words (every "Yes" is
        :data:`TEXT_LOG_ODDS`) is asked no further after its first "Yes"."""
        worded = not callable(getattr(self.model, "first_token_log_odds", None))
        judged: list[tuple[str, float]] = []
        for sid in dict.fromkeys(source_ids):
            value = self.section_log_odds(question, sid, ctx, scorer)
            if value is not None:
                judged.append((sid, value))
                if worded and value >= TEXT_LOG_ODDS:
                    break
        if not judged:
            return None
        sid, value = max(judged, key=lambda item: item[1])
        return (sid, value) if value >= self.threshold else None

    def _judge(self, messages: list[BaseMessage], ctx: RunContext) -> float | None:
        scored = getattr(self.model, "first_token_log_odds", None)
        if callable(scored):
            value, usage = scored(messages, "Yes", "No")
            ctx.add_usage(usage, "coverage")
            return float(value)
        reply = self.model.invoke(messages, max_tokens=4)
        ctx.add_usage(getattr(reply, "usage_metadata", None), "coverage")
        word = str(reply.content).strip().lower()
        if word.startswith("yes"):
            return TEXT_LOG_ODDS
        if word.startswith("no"):
            return -TEXT_LOG_ODDS
        return None
