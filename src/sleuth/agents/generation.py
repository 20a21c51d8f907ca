"""The generator both modes share: numbered evidence in, a cited answer draft out.

The guided runtime's generator and the ReAct synthesis read the same prompt
(``sleuth/prompts/guided_answer*.md``) over the same evidence blocks: :func:`generate_draft`
sends it (the evidence focused on the question first, :func:`focused_evidence`) and
:func:`read_answer_reply` reads the reply (plain text, a ``final_answer`` call, a reply the
token budget cut); a short answer backed by evidence numbers only is explained from the
evidence (:func:`explain_from_evidence`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import ValidationError

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.drafting import draft_from_long_text, draft_from_text
from sleuth.agents.reader import (
    OUTPUT_TOKENS,
    POINTS,
    SHORT_ANSWER_WORDS,
    AnswerKind,
    answer_kind,
    complete_sentences,
)
from sleuth.agents.structured import StructuredResult
from sleuth.agents.support import ANSWER_WORDS
from sleuth.errors import ContextWindowExceeded
from sleuth.llm import calls
from sleuth.llm.toolcalls import ToolCallNormalizer
from sleuth.prompts import load_prompt
from sleuth.retrieval.search import join_parts
from sleuth.retrieval.text import digits, enumerated_items, sentences, terms
from sleuth.tools.base import RunContext, json_parameters
from sleuth.tools.rag import evidence_block

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

UsageSink = Callable[[dict[str, int]], None]

EVIDENCE_CHARS = 1500
"""Characters of each section shown to the evaluator and the generator."""

MAX_EVIDENCE_SECTIONS = 8


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


def prompt_messages(prompt: str, human: str, **values: str) -> list[BaseMessage]:
    system = load_prompt(prompt)
    for key, value in values.items():
        system = system.replace("{" + key + "}", value)
    return [SystemMessage(system), HumanMessage(human)]


GENERATION_EVIDENCE_CHARS = 1200
"""Characters of each section's text the generator reads (each section focused on the
question by :func:`focused_evidence` when longer: the sentences the cross-encoder scores
best, in the section's order). Shorter evidence is faster but loses facts the answer needs:
budgets that fall with rank (1,200, 1,200, then 500) cost key facts 0.37 → 0.33 on the
judged statute set's ``dev`` split before the answers were backed by quotes; 600 for every
section, tried with the quotes (``0b6cc75``), took the local 1.5B model's median prompt from
1,373 to 984 tokens and p50 from 20.4 to 16.5 s on ``dev`` but key facts 0.64 → 0.61 — a
quality loss, so 1,200 stays (its ``test`` run, seen before this was settled, lost more:
0.53 → 0.46, p50 22.7 → 18.8 s). Budgets by rank again with the quotes (2026-12-06: 1,200,
1,200, then 600, each section focused to its own budget; ``dev``, local model, against the
same code with 1,200 each): median prompt 1,374 → 1,177 tokens, p50 20.3 → 18.2 s, but key
facts 0.68 → 0.64 and gold cited 0.83 → 0.80 (a third-ranked gold section's answer lost) —
not adopted. What the guided generator drops instead is whole sections that bear on no part
of the question (:func:`~sleuth.agents.heuristic.set_aside`)."""

SHORT_FORM_KINDS: tuple[AnswerKind, ...] = ("fact", "yes_no")
"""Answer kinds the generator asks in the short form (``guided_answer``: the facts with their
evidence numbers first, then the short answer); the others get the long form. Yes/no
questions moved here from the long form ("one sentence beginning with Yes or No", then the
points) on the 25 yes/no questions of the judged and held-out ``dev`` sets (local 1.5B model,
both forms back to back on one machine): verdict correct 0.52 → 0.60, key facts 0.54 → 0.58,
gold cited 0.68 → 0.68, declined with the gold section retrieved 0.12 → 0.04, p50 48 → 40 s;
the long form's verdict came before any fact, and the small model wrote citation markers as
words ("Yes, [BSA_S128] can force …")."""
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
    and added best first while they fit in ``chars``, a lead-in with the items of its
    enumeration when they all fit (:func:`~sleuth.retrieval.text.enumerated_items`); they
    are given in the section's order, ``…`` marking what was left out. Sections that fit
    are unchanged; so is every section when ``scorer`` is ``None``.
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
        for i in sorted(range(len(said)), key=lambda i: -logits[i]):
            # a lead-in comes with its items when they all fit ("namely:— (a) …; (b) …")
            for unit in ([i, *enumerated_items(said, i)], [i]):
                size = sum(1 + len(said[j]) for j in unit if j not in keep)
                if used + size <= budget:
                    keep.update(unit)
                    used += size
                    break
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

    A ``fact`` or ``yes_no`` question (:func:`~sleuth.agents.reader.answer_kind`,
    :data:`SHORT_FORM_KINDS`) gets the ``Facts: / Answer:`` prompt (``guided_answer``); every
    other kind the long form (``guided_answer_long``): the facts that answer, each a sentence
    with its evidence number (the rule's conditions and exceptions included), then the answer
    sentence written from them — shown first (:func:`~sleuth.agents.drafting.draft_from_long_text`).
    The evidence comes before the question so that a model server's prompt cache can reuse
    it for the repair round.
    """
    body = format_evidence(evidence, GENERATION_EVIDENCE_CHARS, GENERATION_SECTIONS)
    parts = [f"Evidence:\n{body}", *notes, f"Question: {question}"]
    kind = answer_kind(question)
    if kind in SHORT_FORM_KINDS:
        return prompt_messages("guided_answer", "\n\n".join(parts))
    return prompt_messages("guided_answer_long", "\n\n".join(parts), points=POINTS[kind])


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
            with_budget(model, OUTPUT_TOKENS[kind]),
            generation_messages(question, evidence, notes),
            stream_answer=True,
        )
    except ContextWindowExceeded:
        raise
    except Exception as exc:
        return StructuredResult(
            value=fallback(), path="fallback", errors=[f"{type(exc).__name__}: {exc}"]
        )
    if usage is not None and getattr(reply, "usage_metadata", None):
        usage(dict(reply.usage_metadata))
    result = read_answer_reply(reply, fallback, long_form=kind not in SHORT_FORM_KINDS)
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
