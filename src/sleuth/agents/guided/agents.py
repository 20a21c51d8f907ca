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
generator              AnswerDraft         :func:`~sleuth.agents.heuristic.compose_answer`
=====================  ==================  ===============================================

Every agent function takes the question (and its inputs), an optional chat model and
returns a :class:`~sleuth.agents.guided.structured.StructuredResult`; none raises on a bad
or missing model. Prompts are package data: ``sleuth/prompts/guided_*.md``.

The CRAG evaluator and the gap-driven refinement follow Yan et al. 2024, "Corrective
Retrieval Augmented Generation" (arXiv:2401.15884).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import ValidationError

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.drafting import draft_from_long_text, draft_from_text
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
from sleuth.agents.guided.structured import StructuredResult, call_structured
from sleuth.agents.reader import (
    OUTPUT_TOKENS,
    POINTS,
    SHORT_ANSWER_WORDS,
    answer_kind,
    complete_sentences,
)
from sleuth.agents.support import ANSWER_WORDS
from sleuth.errors import ContextWindowExceeded
from sleuth.ingest.references import SOURCE_ID_TOKEN, extract_references
from sleuth.llm import calls
from sleuth.llm.toolcalls import ToolCallNormalizer
from sleuth.prompts import load_prompt
from sleuth.retrieval.search import join_parts
from sleuth.retrieval.text import (
    STOPWORDS,
    anchored_query,
    digits,
    key_phrase,
    novel_query,
    once,
    sentences,
    terms,
    words,
)
from sleuth.tools.base import RunContext, json_parameters
from sleuth.tools.rag import evidence_block

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

UsageSink = Callable[[dict[str, int]], None]

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
EVIDENCE_CHARS = 1500
"""Characters of each section shown to the evaluator and the generator."""
MAX_EVIDENCE_SECTIONS = 8
MAX_SUB_QUESTIONS = 4

_QUESTION_WORDS = (
    "what|which|who|whom|whose|when|where|why|how|is|are|was|were|does|do|did|can|could|"
    "may|must|shall|should|will|would"
)
_AND_QUESTION = re.compile(rf"[,;]?\s+and\s+(?=(?:{_QUESTION_WORDS})\b)", re.I)
_BETWEEN = re.compile(r"\bbetween\s+(.+?)\s+and\s+(.+?)\s*[?.!]*$", re.I)
_COMPARE = re.compile(r"\bcompare\s+(.+?)\s+(?:and|with|to)\s+(.+?)\s*[?.!]*$", re.I)
_VERSUS = re.compile(r"([^,:;]+?)\s+(?:vs\.?|versus)\s+(.+?)\s*[?.!]*$", re.I)
_BOTH = re.compile(r"^(.*?)\bboth\s+(.+?)\s+and\s+(.+?)\s*[?.!]*$", re.I)
_AND_BOTH = re.compile(
    r"^(are|were|is|was|do|did|does|have|has|had|can|could|will|would)\s+(.+?)\s+and\s+"
    r"(.+?)\s+both\s+(.+?)\s*[?.!]*$",
    re.I,
)
_WHICH_OR = re.compile(r"^(.*?\bwhich\b.*?)[,:]\s*(.+?)\s+or\s+(.+?)\s*[?.!]*$", re.I)
_COMPARISON_CUE = re.compile(
    r"\b(differences?|differ|distinguish|compare|comparison|versus|vs\.?)\b", re.I
)
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
_PREPOSITIONS = frozenset(
    ["for", "of", "in", "on", "to", "about", "under", "with", "against", "by", "from"]
)
_LEADING_QUESTION = re.compile(rf"^((?:{_QUESTION_WORDS})(?:\s+(?:{_QUESTION_WORDS}))?)\b", re.I)
_PROFILE_TOP_K: dict[str, int] = {"precise": 3, "balanced": 5, "broad": 8}
STYLE_WORDS = frozenset(
    ["simple", "simply", "plain", "brief", "briefly", "short", "detail", "detailed", "terms",
     "words", "example", "examples", "please", "explain", "summarize", "summarise"]
)  # fmt: skip
"""Words about how to answer, not what: ignored when judging coverage."""


@dataclass(frozen=True)
class EvidenceSection:
    """One retrieved section as the agents see it (citation id, title path, text)."""

    source_id: str
    title: str
    text: str
    number: int | None = None
    """The section's evidence number in the run (the model cites it as ``[n]``)."""


def evidence_section(source_id: str, ctx: RunContext) -> EvidenceSection:
    """A section retrieved in the run, as the agents see it (its parts joined, its number)."""
    chunks = ctx.retrieved[source_id]
    return EvidenceSection(
        source_id=source_id,
        title=chunks[0].heading,
        text=join_parts(chunks),
        number=ctx.numbers.get(source_id),
    )


def top_k_for(profile: RetrievalProfile) -> int:
    """Sections per search for a retrieval profile (precise 3, balanced 5, broad 8)."""
    return _PROFILE_TOP_K[profile]


def approx_tokens(text: str) -> int:
    """Approximate token count: 4/3 token per whitespace-separated word (English text)."""
    return math.ceil(len(text.split()) * 4 / 3)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _sentence(text: str) -> str:
    text = " ".join(text.split()).strip(" ,;:.")
    if not text:
        return ""
    return text[0].upper() + text[1:] + ("" if text.endswith("?") else "?")


def _content_terms(text: str) -> set[str]:
    return set(terms(text))


def question_terms(question: str) -> set[str]:
    """The question's content terms, minus :data:`STYLE_WORDS` ("in simple terms") and the
    citation ids it types as is ("BNS_S103": the explicit-reference lookup retrieves that
    section; no section's text contains its own id)."""
    style = {t for w in STYLE_WORDS for t in terms(w)}
    ids = {t for token in SOURCE_ID_TOKEN.findall(question) for t in terms(token)}
    return _content_terms(question) - style - ids


def format_evidence(
    evidence: Sequence[EvidenceSection],
    chars: int = EVIDENCE_CHARS,
    sections: int = MAX_EVIDENCE_SECTIONS,
) -> str:
    """Evidence as prompt text, per section: ``[n] source_id · title`` (``[source_id]
    title`` for a section without a number) then its text cut to ``chars`` characters."""
    blocks = []
    for e in evidence[:sections]:
        body = e.text if len(e.text) <= chars else e.text[: chars - 1].rstrip() + "…"
        blocks.append(evidence_block(e.number, e.source_id, e.title, body))
    return "\n\n".join(blocks) or "(no evidence retrieved)"


def _messages(prompt: str, human: str, **values: str) -> list[BaseMessage]:
    system = load_prompt(prompt)
    for key, value in values.items():
        system = system.replace("{" + key + "}", value)
    return [SystemMessage(system), HumanMessage(human)]


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
        _messages("guided_intent", f"Question: {question}", collection=collection),
        max_retries=max_retries,
        fallback=lambda: heuristic_route(question),
        name="intent_parse",
        usage=usage,
    )


# ---------------------------------------------------------------- planner


def _split_and(question: str) -> tuple[str, str] | None:
    """``left and right`` at the last plain " and " where both sides carry ≥ 2 terms."""
    body = question.strip().rstrip("?.! ")
    parts = re.split(r"\s+and\s+", body, flags=re.I)
    for i in range(len(parts) - 1, 0, -1):
        left, right = " and ".join(parts[:i]), " and ".join(parts[i:])
        if len(_content_terms(left)) >= 2 and len(_content_terms(right)) >= 2:
            return left, right
    return None


_STATEMENTS = re.compile(r"^(.*[.!])\s+([^.!?]+\?)\s*$", re.S)


def asked(question: str) -> str:
    """What a question asks: after a preamble of statements ("I found a purse and kept the
    money. Have I committed an offence?") its last sentence — the preamble is context, not
    parts to answer — else the whole question."""
    match = _STATEMENTS.match(" ".join(question.split()))
    return match.group(2) if match and "?" not in match.group(1) else question


def in_context(question: str, parts: Sequence[str]) -> list[str]:
    """``parts`` (sub-questions of ``question``) each preceded by the question's preamble of
    statements (see :func:`asked`) when it does not already hold it: "Someone threw acid on
    a girl. What's the least jail time, and who receives the fine?" splits into parts that
    mean nothing without the acid ("Who receives the fine?"), so each is searched and read
    with it. Parts are returned unchanged when the question has no preamble."""
    whole = " ".join(question.split())
    preamble = whole[: len(whole) - len(asked(whole))].strip()
    if not preamble:
        return list(parts)
    return [p if preamble in " ".join(p.split()) else f"{preamble} {p}" for p in parts]


def is_multi_part(question: str) -> bool:
    """Simple cues that a question asks several things (read in :func:`asked`: a preamble
    of statements is context).

    Two question marks; "... and what/how/is ..."; comparison words (difference, differ,
    compare, versus); "both X and Y"; "which ..., X or Y"; or a plain " and " joining two
    parts of ≥ 2 content terms each in a question that does not name a section.
    """
    question = asked(question)
    if question.count("?") >= 2 or _AND_QUESTION.search(question):
        return True
    if (
        _COMPARISON_CUE.search(question)
        or _BOTH.search(question)
        or _AND_BOTH.search(question)
        or _WHICH_OR.search(question)
    ):
        return True
    return not extract_references(question) and _split_and(question) is not None


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
        _messages("guided_planner", f"Question: {question}", collection=collection),
        max_retries=max_retries,
        fallback=lambda: heuristic_plan(question),
        name="plan",
        usage=usage,
    )


# ---------------------------------------------------------------- CRAG evaluator


def missing_words(question: str, evidence_text: str) -> list[str]:
    """The question's content words (as written) whose stems the evidence lacks, in order
    (citation ids typed as is, "BNS_S103", excepted: see :func:`question_terms`)."""
    have = _content_terms(evidence_text)
    missing: list[str] = []
    ids = {w.lower() for w in SOURCE_ID_TOKEN.findall(question)}
    for word in words(question):
        if word in ids:
            continue
        if word in STOPWORDS or word in STYLE_WORDS or len(word) < 2 or word in missing:
            continue
        stems = terms(word)
        if stems and stems[0] not in have:
            missing.append(word)
    return missing


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
    held = [q_terms & _content_terms(t) for t in texts[:VERDICT_SECTIONS]]
    single = max(len(h) for h in held) / len(q_terms)
    best_i = max(range(len(held)), key=lambda i: len(held[i]))
    pair, pair_ids = single, (best_i,)
    for i in range(len(held)):
        for j in range(i + 1, len(held)):
            share = len(held[i] | held[j]) / len(q_terms)
            if share > pair:
                pair, pair_ids = share, (i, j)
    pooled = len(q_terms & _content_terms("\n".join(texts))) / len(q_terms)
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
        _messages("guided_crag", human),
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
    gap_terms = _content_terms(verdict.missing_information)

    def validate(value: Refinement) -> None:
        if not novel_query(value.refined_query, previous_queries):
            raise ValueError(
                f"refined_query '{value.refined_query}' finds nothing new (a query already "
                "tried, a part of one, or fewer than two key words); write a new query that "
                "names what the question is about"
            )
        if gap_terms and not gap_terms & _content_terms(value.refined_query):
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
        _messages("guided_refine", human),
        max_retries=max_retries,
        fallback=lambda: heuristic_refinement(
            question, verdict.missing_information, previous_queries, found
        ),
        name="refine_query",
        validator=validate,
        usage=usage,
    )


# ---------------------------------------------------------------- decomposition


def _complete(fragment: str, left: str) -> str:
    """Give a bare right-hand fragment the stem of ``left``.

    ``("for theft", "the punishment for murder")`` → ``"the punishment for theft"``;
    ``("culpable homicide", "What is the punishment for murder")`` → ``"What is the
    punishment for culpable homicide"``; a fragment starting with a question word is kept.
    """
    tokens = fragment.split()
    if not tokens or re.match(rf"^(?:{_QUESTION_WORDS})\b", fragment, re.I):
        return fragment
    stem = left.split()
    lowered = [t.lower() for t in stem]
    first = tokens[0].lower()
    if first in _PREPOSITIONS and first in lowered:
        at = len(lowered) - 1 - lowered[::-1].index(first)
        return " ".join([*stem[:at], *tokens])
    at = max((i for i, t in enumerate(lowered[:-1]) if t in _PREPOSITIONS), default=-1)
    if at >= 0:
        return " ".join([*stem[: at + 1], *tokens])
    lead = _LEADING_QUESTION.match(left)
    return f"{lead.group(1)} {fragment}" if lead else fragment


_DEFINITION = re.compile(
    r"^(?:what|who|which)\s+(?:is|are|was|were)\s+(?:an?\s+|the\s+)?(.+?)\s*\?*$", re.I
)
_POSSESSIVE = re.compile(r"\bits\s+([a-z][\w-]*(?:\s+[a-z][\w-]*)?)(?=\s*\?|$)", re.I)
_PRONOUN = re.compile(r"\bit\b", re.I)


def with_subject(parts: list[str]) -> list[str]:
    """Later sub-questions that refer back by pronoun get the first one's subject: after
    "What is dowry death?", "How is it punished?" → "How is dowry death punished?" and "What
    is its punishment?" → "What is the punishment of dowry death?". A sub-question is
    searched on its own, so a bare "it" finds nothing. Only a first part of the form "What
    is X?" gives a subject, and only "it"/"its" are resolved ("they" may name another noun
    of the first part: "the powers of the police … when can they arrest")."""
    subject = _DEFINITION.match(parts[0]) if parts else None
    if subject is None or len(subject.group(1).split()) > 6:
        return parts
    name = subject.group(1).rstrip("?. ")
    out = [parts[0]]
    for part in parts[1:]:
        fixed = _POSSESSIVE.sub(lambda m: f"the {m.group(1)} of {name}", part, count=1)
        if fixed == part:
            fixed = _PRONOUN.sub(name, part, count=1)
        out.append(fixed)
    return out


def split_question(question: str) -> tuple[list[str], str]:
    """Cue-based split of a multi-part question into (sub_questions, synthesis_hint).

    Patterns, first match wins: several question marks; "..., and what/how/... ...";
    "between A and B" / "compare A and|with B" / "A vs B"; "... both A and B"; "which ...,
    A or B"; a plain " and " joining two parts of ≥ 2 content terms. ``([], "")`` when
    nothing splits. Only what the question :func:`asked` is split: a preamble of statements
    is context.
    """
    q = " ".join(asked(question).split())
    if q.count("?") >= 2:
        parts = [p.strip() for p in re.findall(r"[^?]+\?", q)]
        subs = [_sentence(p) for p in parts if _content_terms(p)]
        return with_subject(subs), "Answer each question."
    if _AND_QUESTION.search(q):
        parts = _AND_QUESTION.split(q.rstrip("?.! "))
        subs = [_sentence(p) for p in parts if _content_terms(p)]
        return with_subject(subs), "Answer each part."
    for pattern in (_BETWEEN, _COMPARE):
        match = pattern.search(q)
        if match:
            a, b = match.group(1), _complete(match.group(2), match.group(1))
            return [_sentence(f"What is {a}"), _sentence(f"What is {b}")], (f"Compare {a} and {b}.")
    match = _VERSUS.search(q)
    if match:
        a = re.sub(rf"^(?:(?:{_QUESTION_WORDS})\s+)+", "", match.group(1).strip(), flags=re.I)
        b = match.group(2)
        return [_sentence(f"What is {a}"), _sentence(f"What is {b}")], f"Compare {a} and {b}."
    match = _AND_BOTH.search(q)
    if match:  # "Are A and B both film directors?" → "Are A film directors?", "Are B ...?"
        aux, a, b, predicate = (g.strip() for g in match.groups())
        return [_sentence(f"{aux} {a} {predicate}"), _sentence(f"{aux} {b} {predicate}")], (
            f"Answer for {a} and for {b}, then whether both are."
        )
    match = _BOTH.search(q)
    if match:
        stem, a, b = match.group(1).strip(), match.group(2), match.group(3)
        rest = ""
        if not _content_terms(stem) and len(b.split()) > len(a.split()):
            # "Does both murder and theft require intention?": the predicate follows B
            cut = len(a.split())
            b, rest = " ".join(b.split()[:cut]), " ".join(b.split()[cut:])
        return [_sentence(f"{stem} {a} {rest}"), _sentence(f"{stem} {b} {rest}")], (
            "Answer for both and note what they share."
        )
    match = _WHICH_OR.search(q)
    if match:
        stem, a, b = match.group(1).strip(), match.group(2), match.group(3)
        return [_sentence(f"{a}: {stem}"), _sentence(f"{b}: {stem}")], (
            f"Compare {a} and {b} to answer: {stem}?"
        )
    pair = _split_and(q)
    if pair and not extract_references(q):
        left, right = pair
        return [_sentence(left), _sentence(_complete(right, left))], "Answer each part."
    return [], ""


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
        _messages("guided_decompose", f"Question: {question}"),
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
            if not question_terms & _content_terms(sentence):
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
        _messages("guided_compress", human, budget=str(budget_tokens * 3 // 4)),
        max_retries=max_retries,
        fallback=lambda: heuristic_compression(question_terms, evidence, budget_tokens),
        name="compress_context",
        validator=validate,
        usage=usage,
    )


# ---------------------------------------------------------------- generation


GENERATION_EVIDENCE_CHARS = 1200
"""Characters of each section's text the generator reads (each section focused on the
question by :func:`focused_evidence` when longer: the sentences the cross-encoder scores
best, in the section's order). Shorter evidence is faster but loses facts the answer needs:
budgets that fall with rank (1,200, 1,200, then 500) cost key facts 0.37 → 0.33 on the
judged statute set's ``dev`` split before the answers were backed by quotes; 600 for every
section, tried with the quotes (``0b6cc75``), took the local 1.5B model's median prompt from
1,373 to 984 tokens and p50 from 20.4 to 16.5 s on ``dev`` but key facts 0.64 → 0.61 — a
quality loss, so 1,200 stays (its ``test`` run, seen before this was settled, lost more:
0.53 → 0.46, p50 22.7 → 18.8 s)."""
GENERATION_SECTIONS = 5


FOCUS_SENTENCES = 60
"""Sentences of a long section the focus step scores at most, from its start."""
FOCUS_SENTENCE_CHARS = 400
"""Characters of one sentence the cross-encoder reads when focusing (it reads ~160 tokens)."""


def focused_evidence(
    question: str,
    evidence: Sequence[EvidenceSection],
    scorer: Any,
    chars: int = GENERATION_EVIDENCE_CHARS,
) -> list[EvidenceSection]:
    """Each section longer than ``chars`` cut to the sentences that bear on ``question``.

    A statute section's answer is often a proviso or a clause deep in a long text, past the
    head the generator would otherwise read. Its first sentence (the rule) is kept; the
    others (:func:`~sleuth.retrieval.text.sentences`: sentences and numbered clauses, at most
    :data:`FOCUS_SENTENCES`) are scored against the question by ``scorer`` (a cross-encoder:
    ``logits(query, passages) -> list[float]``, each passage read with its section's title)
    and added best first while they fit in ``chars``; they are given in the section's order,
    ``…`` marking what was left out. Sections that fit are unchanged; so is every section
    when ``scorer`` is ``None``.
    """
    if scorer is None:
        return list(evidence)
    out = []
    budget = chars - 20  # room for the "…" between the kept sentences
    for e in evidence:
        said = sentences(e.text)[:FOCUS_SENTENCES] if len(e.text) > chars else []
        if len(said) < 2:
            out.append(e)
            continue
        title = e.title.rsplit(" > ", 1)[-1]
        logits = scorer.logits(question, [f"{title}. {s[:FOCUS_SENTENCE_CHARS]}" for s in said])
        keep, used = {0}, len(said[0])
        for i in sorted(range(1, len(said)), key=lambda i: -logits[i]):
            if used + 1 + len(said[i]) <= budget:
                keep.add(i)
                used += 1 + len(said[i])
        parts: list[str] = []
        for i in sorted(keep):
            if parts and i - 1 not in keep:
                parts.append("…")
            parts.append(said[i])
        if max(keep) < len(said) - 1 or len(said) < len(sentences(e.text)):
            parts.append("…")
        out.append(EvidenceSection(e.source_id, e.title, " ".join(parts), e.number))
    return out


def generation_messages(
    question: str, evidence: Sequence[EvidenceSection], notes: Sequence[str] = ()
) -> list[BaseMessage]:
    """The generator's prompt: instructions, then the numbered evidence, then the question.

    A ``fact`` question (:func:`~sleuth.agents.reader.answer_kind`) gets the ``Facts: /
    Answer:`` prompt (``guided_answer``); every other kind the long form
    (``guided_answer_long``): the direct answer first (a yes/no question's opening with Yes
    or No), then the supporting points with their evidence numbers, the rule's conditions
    and exceptions included. The evidence comes before the question so that a model
    server's prompt cache can reuse it for the repair round.
    """
    body = format_evidence(evidence, GENERATION_EVIDENCE_CHARS, GENERATION_SECTIONS)
    parts = [f"Evidence:\n{body}", *notes, f"Question: {question}"]
    kind = answer_kind(question)
    if kind == "fact":
        return _messages("guided_answer", "\n\n".join(parts))
    verdict = ", beginning with Yes or No" if kind == "yes_no" else ""
    return _messages("guided_answer_long", "\n\n".join(parts), verdict=verdict, points=POINTS[kind])


def generate_draft(
    question: str,
    evidence: Sequence[EvidenceSection],
    model: BaseChatModel | None,
    *,
    fallback: Callable[[], AnswerDraft],
    notes: Sequence[str] = (),
    usage: UsageSink | None = None,
) -> StructuredResult[AnswerDraft]:
    """The generator: the model writes the answer in plain text from the numbered evidence.

    The reply is read by :func:`~sleuth.agents.drafting.draft_from_text` (fences, JSON and
    labels removed; "Insufficient context:" recognised); citations are checked, attached or
    repaired afterwards by :func:`~sleuth.agents.finish.finish_answer`. ``notes``
    (sub-questions, the evaluator's gap) go into the prompt. Falls back to ``fallback`` (the
    extractive :func:`~sleuth.agents.heuristic.compose_answer`) without a model, when the
    call fails or when the reply is empty.
    """
    if model is None:
        return StructuredResult(value=fallback(), path="fallback")
    kind = answer_kind(question)
    try:
        reply = calls.invoke(
            with_budget(model, OUTPUT_TOKENS[kind]), generation_messages(question, evidence, notes)
        )
    except ContextWindowExceeded:
        raise
    except Exception as exc:
        return StructuredResult(
            value=fallback(), path="fallback", errors=[f"{type(exc).__name__}: {exc}"]
        )
    if usage is not None and getattr(reply, "usage_metadata", None):
        usage(dict(reply.usage_metadata))
    result = read_answer_reply(reply, fallback, long_form=kind != "fact")
    if result.path == "llm":
        result.value = explained_draft(question, result.value, evidence)
    return result


def explained_draft(
    question: str, draft: AnswerDraft, evidence: Sequence[EvidenceSection]
) -> AnswerDraft:
    """A model's short answer backed by evidence numbers only (``Facts: [1]`` / ``Answer:
    …``) with its explanation quoted from the evidence (:func:`explain_from_evidence`), or
    an honest "insufficient context" when no section holds it — unless the "short answer"
    is a sentence (more than :data:`~sleuth.agents.reader.SHORT_ANSWER_WORDS` words): that
    is a claim, kept with its evidence numbers for the support check of
    :func:`~sleuth.agents.finish.finish_answer`. Any other draft as it is."""
    if (
        not draft.short_answer
        or draft.is_insufficient_context
        or not _ONLY_MARKERS.match(draft.answer_text)
    ):
        return draft
    explanation = explain_from_evidence(question, draft.short_answer, draft.citations, evidence)
    if explanation:
        return draft.model_copy(update={"answer_text": explanation, "citations": []})
    if len(draft.short_answer.split()) > SHORT_ANSWER_WORDS:
        # a sentence, not a short answer ("Yes, they must tell him why and he can get
        # bail"), with words no section holds: a claim on the evidence it numbers, judged
        # for support like any other, not declined word by word as an entity would be
        markers = " ".join(f"[{c}]" for c in draft.citations)
        claim = draft.short_answer.strip().rstrip(".")
        return draft.model_copy(
            update={"answer_text": f"{claim} {markers}".strip() + ".", "short_answer": ""}
        )
    return AnswerDraft(  # an answer from memory: no retrieved section holds it
        answer_text="Insufficient context: no retrieved section supports the answer "
        f"the model gave ('{draft.short_answer}').",
        is_insufficient_context=True,
    )


EXPLANATION_SENTENCES = 2
"""Evidence sentences quoted under a short answer the model gave with evidence numbers only."""


def explain_from_evidence(
    question: str, short: str, cited: Sequence[str], evidence: Sequence[EvidenceSection]
) -> str:
    """The cited explanation of a short answer the model backed with evidence numbers only
    (``Facts: [1], [3]`` / ``Answer: Sandra Oh``): from each section that holds the answer,
    the sentence that holds the most of the answer's terms, then of the question's, with its
    marker; at most :data:`EXPLANATION_SENTENCES`.

    The answer's terms (numbers in digits or words alike, :func:`~sleuth.retrieval.text.digits`:
    "24 hours" is "twenty-four hours") must all be held by the cited sections together — an
    answer of two facts ("24 hours, 7 days") may take each from another section. When the
    cited ones do not hold them, the sections that do are taken instead, best covering
    first (a small model often cites the wrong number); when no set of sections holds them,
    ``""``: a sentence that only shares the question's words would dress an answer from
    memory as a cited one. A yes/no answer, or one whose terms all come from the question
    (an option of "X or Y"), is explained from the cited sections by the question's terms.
    ``""`` also when no sentence shares a term with the answer or the question.
    """
    by_ref = {str(e.number): e for e in evidence if e.number is not None}
    by_ref.update({e.source_id: e for e in evidence})
    chosen = list(dict.fromkeys(by_ref[c] for c in cited if c in by_ref))
    asked = set(terms(digits(question)))
    # "Yes", or one of the options the question offers: no evidence need hold those words,
    # the cited sections (else those sharing most of the question's terms) explain them
    wanted = set(terms(digits(short))) - ANSWER_WORDS - asked
    held = {id(e): set(terms(digits(f"{e.title} {e.text}"))) for e in evidence}
    if not wanted and not chosen:
        chosen = sorted(evidence, key=lambda e: -len(asked & held[id(e)]))
        chosen = chosen[:EXPLANATION_SENTENCES]
    if wanted and not wanted <= set().union(*(held[id(e)] for e in chosen)):
        chosen = _covering(wanted, evidence, held)
        if not chosen:  # no sections hold the answer: nothing can explain it
            return ""
    if wanted:  # only the sections that hold part of the answer explain it
        chosen = [e for e in chosen if wanted & held[id(e)]]
    picked: list[tuple[int, int, str, EvidenceSection]] = []
    for e in chosen:
        scored = [
            (3 * len(wanted & found) + len(asked & found), -i, sent)
            for i, sent in enumerate(sentences(e.text))
            if (found := set(terms(digits(sent))))
        ]
        if scored:
            score, position, sent = max(scored)
            if score > 0:
                picked.append((score, position, sent, e))
    picked.sort(key=lambda p: -p[0])
    out = []
    for _, _, sent, e in picked[:EXPLANATION_SENTENCES]:
        ref = e.number if e.number is not None else e.source_id
        out.append(f"{sent.rstrip().rstrip('.')} [{ref}].")
    return " ".join(out)


def _covering(
    wanted: set[str], evidence: Sequence[EvidenceSection], held: dict[int, set[str]]
) -> list[EvidenceSection]:
    """At most :data:`EXPLANATION_SENTENCES` sections that together hold every term of
    ``wanted``, picked greedily (most still-missing terms first, evidence order on ties);
    ``[]`` when no such set exists."""
    missing, out = set(wanted), []
    while missing and len(out) < EXPLANATION_SENTENCES:
        best = max(evidence, key=lambda e: len(missing & held[id(e)]), default=None)
        if best is None or not missing & held[id(best)]:
            return []
        out.append(best)
        missing -= held[id(best)]
    return out if not missing else []


_ONLY_MARKERS = re.compile(r"^[\s,;.]*(?:\[[^\]]+\][\s,;.]*)*$")


def with_budget(model: BaseChatModel, tokens: int) -> Any:
    """``model`` held to at most ``tokens`` output tokens for one call (``bind``)."""
    try:
        return model.bind(max_tokens=tokens)
    except Exception:  # a model double without bind
        return model


def was_cut(reply: Any) -> bool:
    """Whether a model reply stopped at its token budget (``finish_reason`` ``length``)."""
    meta = getattr(reply, "response_metadata", None) or {}
    return meta.get("finish_reason") == "length"


def _whole(draft: AnswerDraft) -> AnswerDraft | None:
    """A short-form draft the token budget stopped, cut back to its last complete sentence
    (:func:`~sleuth.agents.reader.complete_sentences`); its short answer alone when no
    sentence is complete; ``None`` when nothing is left."""
    text = complete_sentences(draft.answer_text, cut=True)
    if text:
        return draft.model_copy(update={"answer_text": text})
    if draft.short_answer:
        return draft.model_copy(update={"answer_text": f"{draft.short_answer}."})
    return None


def read_answer_reply(
    reply: Any, fallback: Callable[[], AnswerDraft], long_form: bool = False
) -> StructuredResult[AnswerDraft]:
    """An answer draft from a model reply: plain text, or a ``final_answer``-style call
    (read with the LLM layer's normaliser); the fallback when neither gives one. With
    ``long_form`` the text is read by :func:`~sleuth.agents.drafting.draft_from_long_text`
    (cut back to its last complete sentence when the budget stopped it)."""
    parsed = ToolCallNormalizer({"final_answer": json_parameters(AnswerDraft)}).normalize(reply)
    draft: AnswerDraft | None = None
    errors: list[str] = [e.message for e in parsed.errors]
    if parsed.calls:
        try:
            draft = AnswerDraft.model_validate(parsed.calls[0].arguments)
        except ValidationError as exc:
            errors.append(f"invalid final_answer arguments: {exc.errors()[0]['msg']}")
    if draft is None and not parsed.calls:
        if long_form:
            draft = draft_from_long_text(parsed.text, cut=was_cut(reply))
        else:
            draft = draft_from_text(parsed.text)
            if draft is not None and was_cut(reply):
                draft = _whole(draft)
    if draft is None:
        return StructuredResult(value=fallback(), path="fallback", errors=errors or ["empty reply"])
    return StructuredResult(value=draft, path="llm", errors=errors)
