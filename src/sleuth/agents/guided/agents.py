"""The guided runtime's narrow agents: prompt + typed schema + heuristic fallback each.

=====================  ==================  ===============================================
agent                  schema              heuristic fallback (= the offline path)
=====================  ==================  ===============================================
router (no model)      IntentParse         :func:`heuristic_route` — always runs, deterministic
intent parser          IntentParse         the router's parse
planner                Plan                pass-through plan (:func:`heuristic_plan`)
CRAG evaluator         CragVerdict         term coverage (:func:`heuristic_verdict`)
refinement             Refinement          key phrase + gap hint (:func:`heuristic_refinement`)
decomposition          Decomposition       cue-based split (:func:`heuristic_decomposition`)
compression            Compression         question-term sentences (:func:`heuristic_compression`)
=====================  ==================  ===============================================

The generator (``AnswerDraft``; fallback :func:`~sleuth.agents.heuristic.compose_answer`) is
shared with ReAct's synthesis: :mod:`sleuth.agents.generation`; the question-reading rules
(parts, preamble, content terms) are :mod:`sleuth.agents.question`.

Every agent function takes the question (and its inputs), an optional chat model and
returns a :class:`~sleuth.agents.structured.StructuredResult`; none raises on a bad
or missing model. Prompts are package data: ``sleuth/prompts/guided_*.md``.

The CRAG evaluator and the gap-driven refinement follow Yan et al. 2024, "Corrective
Retrieval Augmented Generation" (arXiv:2401.15884).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sleuth.agents.generation import (
    EvidenceSection,
    UsageSink,
    format_evidence,
    prompt_messages,
)
from sleuth.agents.guided.schemas import (
    CompressedPassage,
    Compression,
    CragVerdict,
    Decomposition,
    Granularity,
    IntentParse,
    Plan,
    Refinement,
    RetrievalProfile,
    Verdict,
)
from sleuth.agents.question import (
    content_terms,
    is_multi_part,
    missing_words,
    question_terms,
    split_question,
)
from sleuth.agents.structured import StructuredResult, call_structured
from sleuth.ingest.references import extract_references
from sleuth.retrieval.text import (
    anchored_query,
    key_phrase,
    novel_query,
    once,
    sentences,
)

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


VERDICT_SECTIONS = 5
"""Heuristic CRAG: the best-ranked sections searched for the best single section and pair."""
SUFFICIENT_COVERAGE = 0.85
"""Heuristic CRAG: one section covering at least this share of the question's terms suffices.
Set on the calibration of ``bench/bench_hotpotqa.py`` and ``bench/bench_guided.py``: at 0.75
a SUFFICIENT verdict on a whole HotpotQA question held both gold paragraphs 0.86 of the time,
at 0.85 0.95 (statutes: 0.96 and 0.97)."""
PARTIAL_COVERAGE = 0.4
"""Heuristic CRAG: pooled evidence covering at least this share (short of SUFFICIENT) is
PARTIAL."""
MAX_SUB_QUESTIONS = 4

_OVERVIEW_CUE = re.compile(
    r"\b(overview|outline|structure|table of contents|chapters|summari[sz]e|summary|"
    r"all (?:the )?sections)\b",
    re.I,
)
_GRAPH_CUE = re.compile(
    r"\b(sections?|sub-?sections?|articles?|clauses?|chapters?|refers?|referred|references?|"
    r"cross-references?|defined|definitions?|exceptions?|provisos?)\b",
    re.I,
)
_EXPLAIN_CUE = re.compile(r"\b(explain|describe|summari[sz]e|elaborate)\b", re.I)
_PROFILE_TOP_K: dict[str, int] = {"precise": 3, "balanced": 5, "broad": 8}


def top_k_for(profile: RetrievalProfile) -> int:
    """Sections per search for a retrieval profile (precise 3, balanced 5, broad 8)."""
    return _PROFILE_TOP_K[profile]


def approx_tokens(text: str) -> int:
    """Approximate token count: 4/3 token per whitespace-separated word (English text)."""
    return math.ceil(len(text.split()) * 4 / 3)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


# ---------------------------------------------------------------- routing / intent parser


def heuristic_route(question: str) -> IntentParse:
    """The deterministic router (always runs; the intent parser's fallback).

    * ``graph_hint``: the question names a section or mentions sections, references,
      definitions, exceptions (cross-references will likely be needed);
    * ``granularity``: ``document`` for overview cues, ``section`` for a named section or
      "explain/describe", else ``passage``;
    * ``retrieval_profile``: ``precise`` for a named section, ``broad`` for document
      granularity or a multi-part question, else ``balanced``;
    * ``normalized_query``: the question as written when it names a section (so the
      explicit-reference lookup of the search sees "section N of ..."), else its key phrase;
    * ``confidence``: 0.9 with a named section, 0.6 otherwise.
    """
    named = bool(extract_references(question))
    granularity: Granularity
    if _OVERVIEW_CUE.search(question):
        granularity = "document"
    elif named or _EXPLAIN_CUE.search(question):
        granularity = "section"
    else:
        granularity = "passage"
    profile: RetrievalProfile
    if named:
        profile = "precise"
    elif granularity == "document" or is_multi_part(question):
        profile = "broad"
    else:
        profile = "balanced"
    return IntentParse(
        retrieval_profile=profile,
        normalized_query=question.strip() if named else key_phrase(question),
        graph_hint=named or bool(_GRAPH_CUE.search(question)),
        granularity=granularity,
        confidence=0.9 if named else 0.6,
    )


def parse_intent(
    question: str,
    model: BaseChatModel | None,
    *,
    collection: str = "",
    max_retries: int = 2,
    usage: UsageSink | None = None,
) -> StructuredResult[IntentParse]:
    """The optional LLM intent parser; falls back to :func:`heuristic_route`."""
    return call_structured(
        model,
        IntentParse,
        prompt_messages("guided_intent", f"Question: {question}", collection=collection),
        max_retries=max_retries,
        fallback=lambda: heuristic_route(question),
        name="intent_parse",
        usage=usage,
    )


# ---------------------------------------------------------------- planner


_CHAT_CUE = re.compile(
    r"^\W*(hi|hello|hey|thanks|thank you|good (morning|afternoon|evening)|bye|goodbye|"
    r"who are you|what can you do|how are you)\b",
    re.I,
)


def planner_needed(question: str) -> bool:
    """Whether the planner agent's judgement is worth a model call: a message that may not be
    a question for the knowledge base (a greeting, thanks, "who are you") or that has fewer
    than two content terms. Any other question is planned by :func:`heuristic_plan`."""
    return bool(_CHAT_CUE.search(question)) or len(question_terms(question)) < 2


def heuristic_plan(question: str) -> Plan:
    """The pass-through plan: the original question, documentary, no skip, strict grounding."""
    return Plan(
        intent_class="documentary",
        skip_retrieval="none",
        primary_query=question.strip(),
        complementary_queries=[],
        needs_compression=False,
        strict_grounding=True,
        is_multi_part=is_multi_part(question),
    )


def plan_question(
    question: str,
    model: BaseChatModel | None,
    *,
    collection: str = "",
    max_retries: int = 2,
    usage: UsageSink | None = None,
) -> StructuredResult[Plan]:
    """The planner agent: retrieval strategy for ``question``; fallback :func:`heuristic_plan`."""
    return call_structured(
        model,
        Plan,
        prompt_messages("guided_planner", f"Question: {question}", collection=collection),
        max_retries=max_retries,
        fallback=lambda: heuristic_plan(question),
        name="plan",
        usage=usage,
    )


# ---------------------------------------------------------------- CRAG evaluator


def heuristic_verdict(question: str, evidence: Sequence[EvidenceSection]) -> CragVerdict:
    """Coverage-based CRAG verdict on concentrated evidence.

    Coverage = share of the question's content terms (stemmed, stop words removed; see
    :func:`sleuth.retrieval.text.terms`) found in a section's title and text. The verdict
    looks at the best single section and the best pair among the first
    ``VERDICT_SECTIONS`` (a bridge question is answered by two linked sections), not at all
    the evidence pooled — pooled, unrelated sections cover a question's words by chance:

    * SUFFICIENT: one section covers ≥ ``SUFFICIENT_COVERAGE`` (0.85), or a pair covers all
      of the terms;
    * PARTIAL: the pooled evidence covers ≥ ``PARTIAL_COVERAGE`` (0.4);
    * INSUFFICIENT otherwise. ``missing_information`` lists the words the best section or
      pair lacks.
    """
    if not evidence:
        return CragVerdict(
            verdict="INSUFFICIENT",
            missing_information=key_phrase(question),
            rationale="Nothing was retrieved.",
        )
    q_terms = question_terms(question)
    if not q_terms:
        return CragVerdict(verdict="SUFFICIENT", rationale="The question has no key terms.")
    texts = [f"{e.title}\n{e.text}" for e in evidence]
    held = [q_terms & content_terms(t) for t in texts[:VERDICT_SECTIONS]]
    single = max(len(h) for h in held) / len(q_terms)
    best_i = max(range(len(held)), key=lambda i: len(held[i]))
    pair, pair_ids = single, (best_i,)
    for i in range(len(held)):
        for j in range(i + 1, len(held)):
            share = len(held[i] | held[j]) / len(q_terms)
            if share > pair:
                pair, pair_ids = share, (i, j)
    pooled = len(q_terms & content_terms("\n".join(texts))) / len(q_terms)
    verdict: Verdict
    if single >= SUFFICIENT_COVERAGE or pair >= 1.0:
        verdict = "SUFFICIENT"
    elif pooled >= PARTIAL_COVERAGE:
        verdict = "PARTIAL"
    else:
        verdict = "INSUFFICIENT"
    missing = missing_words(question, "\n".join(texts[i] for i in pair_ids))
    return CragVerdict(
        verdict=verdict,
        missing_information=(" ".join(missing) or key_phrase(question))
        if verdict != "SUFFICIENT"
        else "",
        rationale=f"The best section covers {single:.0%} of the question's key terms, the best "
        f"pair {pair:.0%}, all the evidence {pooled:.0%}.",
    )


def evaluate_evidence(
    question: str,
    evidence: Sequence[EvidenceSection],
    model: BaseChatModel | None,
    *,
    max_retries: int = 2,
    usage: UsageSink | None = None,
) -> StructuredResult[CragVerdict]:
    """The CRAG evaluator (Yan et al. 2024): is ``evidence`` enough for ``question``?

    Falls back to :func:`heuristic_verdict`.
    """
    human = f"Question: {question}\n\nEvidence:\n{format_evidence(evidence)}"
    return call_structured(
        model,
        CragVerdict,
        prompt_messages("guided_crag", human),
        max_retries=max_retries,
        fallback=lambda: heuristic_verdict(question, evidence),
        name="crag_verdict",
        usage=usage,
    )


# ---------------------------------------------------------------- refinement


def heuristic_refinement(
    question: str,
    missing_information: str,
    previous_queries: Sequence[str] = (),
    found: Sequence[str] = (),
) -> Refinement:
    """Gap-hint query: ``missing_information`` with the name the question ties it to.

    Candidates, first :func:`~sleuth.retrieval.text.novel_query` wins (two content terms at
    least, not a repeat or a subset of an earlier search): the gap with its anchor name
    (:func:`~sleuth.retrieval.text.anchored_query`), the question's key phrase + the gap, the
    gap alone, then the gap with the title of each of the ``found`` sections (the best ones
    retrieved so far: what the last hop found, IRCoT-style — "the founder of the label that
    released X" goes on with the label's name). When none is novel the first is returned
    and the runtime stops refining.
    """
    gap = " ".join(missing_information.split()) or key_phrase(question)
    key = key_phrase(question)
    candidates = [anchored_query(question, gap), once(f"{key} {gap}"), gap]
    candidates += [once(f"{title} {gap}") for title in found]
    query = next((c for c in candidates if novel_query(c, previous_queries)), candidates[0])
    return Refinement(refined_query=query, rationale=f"Search again for what was missing: {gap}.")


def refine_query(
    question: str,
    verdict: CragVerdict,
    previous_queries: Sequence[str],
    model: BaseChatModel | None,
    *,
    max_retries: int = 2,
    usage: UsageSink | None = None,
    found: Sequence[str] = (),
) -> StructuredResult[Refinement]:
    """The refinement agent: a new query driven by the CRAG gap hint (``found``: titles of
    the best sections retrieved so far, for the heuristic fallback).

    Output validator: the query must be a :func:`~sleuth.retrieval.text.novel_query` after
    ``previous_queries`` and contain at least one content term of
    ``verdict.missing_information``. Falls back to
    :func:`heuristic_refinement`.
    """
    gap_terms = content_terms(verdict.missing_information)

    def validate(value: Refinement) -> None:
        if not novel_query(value.refined_query, previous_queries):
            raise ValueError(
                f"refined_query '{value.refined_query}' finds nothing new (a query already "
                "tried, a part of one, or fewer than two key words); write a new query that "
                "names what the question is about"
            )
        if gap_terms and not gap_terms & content_terms(value.refined_query):
            raise ValueError(
                "refined_query must target the missing information: include at least one of "
                f"its key words ({verdict.missing_information})"
            )

    tried = "\n".join(f"- {q}" for q in previous_queries) or "- (none)"
    human = (
        f"Question: {question}\n"
        f"Missing information: {verdict.missing_information}\n"
        f"Evaluator rationale: {verdict.rationale}\n"
        f"Queries already tried:\n{tried}"
    )
    return call_structured(
        model,
        Refinement,
        prompt_messages("guided_refine", human),
        max_retries=max_retries,
        fallback=lambda: heuristic_refinement(
            question, verdict.missing_information, previous_queries, found
        ),
        name="refine_query",
        validator=validate,
        usage=usage,
    )


# ---------------------------------------------------------------- decomposition


def heuristic_decomposition(question: str) -> Decomposition:
    """:func:`split_question` as a :class:`Decomposition` (``[]`` when nothing splits)."""
    subs, hint = split_question(question)
    subs = list(dict.fromkeys(s for s in subs if s))[:MAX_SUB_QUESTIONS]
    if len(subs) < 2:
        return Decomposition(sub_questions=[], synthesis_hint="")
    return Decomposition(sub_questions=subs, synthesis_hint=hint)


def decompose_question(
    question: str,
    model: BaseChatModel | None,
    *,
    max_retries: int = 2,
    usage: UsageSink | None = None,
) -> StructuredResult[Decomposition]:
    """The decomposition agent; falls back to :func:`heuristic_decomposition`."""
    return call_structured(
        model,
        Decomposition,
        prompt_messages("guided_decompose", f"Question: {question}"),
        max_retries=max_retries,
        fallback=lambda: heuristic_decomposition(question),
        name="decompose",
        usage=usage,
    )


# ---------------------------------------------------------------- compression


def heuristic_compression(
    question_terms: set[str], evidence: Sequence[EvidenceSection], budget_tokens: int
) -> Compression:
    """Keep, section by section (in the given order), the sentences sharing a term with the
    question, until ``budget_tokens`` (approximate, :func:`approx_tokens`) are used.

    When no sentence shares a term, the first sentence of the first section is kept.
    """
    passages: list[CompressedPassage] = []
    used = 0
    for section in evidence:
        kept: list[str] = []
        for sentence in sentences(section.text):
            if not question_terms & content_terms(sentence):
                continue
            cost = approx_tokens(sentence)
            if used + cost > budget_tokens:
                break
            kept.append(sentence)
            used += cost
        if kept:
            passages.append(CompressedPassage(source_id=section.source_id, text=" ".join(kept)))
        if used >= budget_tokens:
            break
    if not passages and evidence:
        first = (sentences(evidence[0].text) or [evidence[0].text])[0]
        cut = " ".join(first.split()[: max(1, budget_tokens * 3 // 4)])
        passages.append(CompressedPassage(source_id=evidence[0].source_id, text=cut or "…"))
    return Compression(passages=passages)


def compress_evidence(
    question: str,
    question_terms: set[str],
    evidence: Sequence[EvidenceSection],
    budget_tokens: int,
    model: BaseChatModel | None,
    *,
    max_retries: int = 2,
    usage: UsageSink | None = None,
) -> StructuredResult[Compression]:
    """The compression agent: the evidence cut to about ``budget_tokens``.

    Output validator: only the given source_ids; each kept sentence copied verbatim from its
    section; at most 1.25 × the budget. Falls back to :func:`heuristic_compression`.
    """
    by_id = {e.source_id: _norm(e.text) for e in evidence}

    def validate(value: Compression) -> None:
        for passage in value.passages:
            source = by_id.get(passage.source_id)
            if source is None:
                raise ValueError(
                    f"unknown source_id '{passage.source_id}'; use only: {', '.join(by_id)}"
                )
            for sentence in sentences(passage.text):
                if _norm(sentence).rstrip(".") not in source:
                    raise ValueError(
                        f"the text kept for {passage.source_id} is not copied verbatim: "
                        f"'{sentence[:80]}'"
                    )
        total = approx_tokens(" ".join(p.text for p in value.passages))
        if total > budget_tokens * 1.25:
            raise ValueError(
                f"the passages are too long (~{total} tokens); keep under {budget_tokens}"
            )

    human = f"Question: {question}\n\nEvidence:\n{format_evidence(evidence, chars=6000)}"
    return call_structured(
        model,
        Compression,
        prompt_messages("guided_compress", human, budget=str(budget_tokens * 3 // 4)),
        max_retries=max_retries,
        fallback=lambda: heuristic_compression(question_terms, evidence, budget_tokens),
        name="compress_context",
        validator=validate,
        usage=usage,
    )
