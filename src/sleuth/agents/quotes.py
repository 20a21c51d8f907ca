"""The rule an answer rests on, quoted: the sentences of the sections read that answer best.

A reader — a small local model above all — can pick the wrong number, paraphrase a rule
into something it does not say, or state a verdict without the provision behind it. The
sentences of the evidence that a cross-encoder (:mod:`sleuth.retrieval.rerank`) scores as
answering the question are the checkable part of an answer: quoted verbatim and cited, they
let the user see the rule itself, and they cannot be unsupported by the sections they come
from.

Uses (all need the cross-encoder; without it nothing here runs):

* :func:`with_quotes` — every answer that is not a decline ends with the best
  :data:`QUOTES` sentences of the sections the reader read, when it does not already state
  them (a model's answer, and the extractive one alike);
* :func:`quoted_draft` — with no model, the extractive answer *is* those sentences; with
  one, it is what the finish checks ship when they decline the model's answer
  (:func:`~sleuth.agents.finish.finish_answer`'s ``fallback``).

Sentence scores are the cross-encoder's logits for ``(question, "<section title>. <sentence>")``
(the same passages the relevance checks of :mod:`sleuth.agents.finish` score, so a run
scores each pair once: :class:`~sleuth.retrieval.rerank.CrossEncoder` caches them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.agents.answer import MARKERS, AnswerDraft, GeneratedAnswer
from sleuth.agents.citations import cited_ids, section_citation
from sleuth.agents.safety import quotable_sentences
from sleuth.retrieval.rerank import CrossEncoder, sigmoid
from sleuth.retrieval.search import join_parts
from sleuth.retrieval.text import enumerated_items, opens_sub_section, terms, words
from sleuth.tools.base import RunContext
from sleuth.types import Chunk

QUOTES = 2
"""Sentences quoted under an answer at most. On the judged statute set's dev split (35
questions, the local model's answers of ``bc84f1c`` replayed), the first quote took key
facts stated 0.33 → 0.52 and gold cited 0.51 → 0.80; a second 0.55 / 0.80, a third
0.60 / 0.80. Two keep an answer readable (~600 characters of quotes on average)."""
QUOTE_SECTIONS = 5
"""Sections, best ranked first, whose sentences may be quoted (the generator reads five)."""
MIN_QUOTE_WORDS = 5
"""Words a quoted sentence needs: the sentence splitter leaves fragments of a statute's
numbering ("(iii) of sub-section") that say nothing on their own."""
SENTENCES_PER_SECTION = 40
"""Sentences of each section scored from its start; past them only the openers of numbered
sub-sections (8 of the 1,059 BNS/BNSS/BSA sections are longer; in 4 of them a sub-section
past the cap states a rule, e.g. the punishment for theft after its definition and
illustrations)."""
SENTENCE_CHARS = 400
"""Characters of one sentence the cross-encoder reads (it reads ~160 tokens)."""
ENUMERATION_CHARS = 600
"""Characters of enumerated items a quoted lead-in carries at most (whole items; "…" marks
the rest). A statute's list ("… of any of the descriptions hereinafter enumerated,
namely:— (a) robbery; (b) …") is one lead-in sentence and one short clause per item; the
items are what a list question asks for, and alone they are too short to quote."""


@dataclass(frozen=True)
class Quote:
    """One sentence of a retrieved section and the cross-encoder's logit that it answers
    the question (any real number; :func:`~sleuth.retrieval.rerank.sigmoid` gives the
    probability)."""

    source_id: str
    sentence: str
    logit: float

    def stated_in(self, text: str) -> bool:
        """Whether ``text`` already holds this sentence: its first and last 60 characters,
        read as words (spacing and punctuation aside: "sub-section (1) ," is "sub-section
        (1),"); a copy of a lead-in without its items, or of a sentence's start, is not."""
        said, text = " ".join(words(self.sentence)), " ".join(words(text))
        return said[:60] in text and said[-60:] in text

    def cited(self) -> str:
        """The sentence with its citation marker, ending with a full stop."""
        return f"{self.sentence.rstrip().rstrip('.;:,')} [{self.source_id}]."


def with_items(said: Sequence[str]) -> list[str]:
    """``said`` (a section's sentences, in order) with each lead-in that introduces an
    enumeration (ends in a colon or dash, or "namely"/"following") followed by the lettered
    or roman-numbered items after it ("(a) …", "(iv) …"), whole, up to
    :data:`ENUMERATION_CHARS`; other sentences unchanged. One entry per sentence."""
    out = []
    for i, sentence in enumerate(said):
        items: list[str] = []
        used = 0
        for item in (said[j] for j in enumerated_items(said, i)):
            if used + len(item) > ENUMERATION_CHARS:
                items.append("…")
                break
            items.append(item)
            used += len(item) + 1
        out.append(" ".join([sentence, *items]))
    return out


def sentence_passages(
    chunks: Sequence[Chunk], withheld: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    """``(sentence, passage)`` for the first :data:`SENTENCES_PER_SECTION` quotable
    sentences of a section and the numbered sub-sections after them
    (:func:`~sleuth.agents.safety.quotable_sentences`; the others go to ``withheld`` with
    their reason): the passage is the sentence read with its section's title, as the
    cross-encoder scores it; the sentence, as it is quoted, carries the items of the
    enumeration it introduces (:func:`with_items`)."""
    if not chunks:
        return []
    title = chunks[0].title_path[-1] if chunks[0].title_path else chunks[0].heading
    kept, unsafe = quotable_sentences(join_parts(list(chunks)))
    if withheld is not None:
        for sentence, reason in unsafe.items():
            withheld.setdefault(sentence, reason)
    if not kept:
        return [(title, f"{title}. {title}")] if not unsafe else []
    # past the cap, a numbered sub-section still states a rule ("(2) Whoever commits theft
    # shall be punished …" follows a definition and dozens of illustrations)
    chosen = [
        i for i in range(len(kept)) if i < SENTENCES_PER_SECTION or opens_sub_section(kept[i])
    ]
    quoted = with_items(kept)
    return [(quoted[i], f"{title}. {kept[i][:SENTENCE_CHARS]}") for i in chosen]


def best_sentences(
    question: str, source_ids: Sequence[str], ctx: RunContext, scorer: CrossEncoder
) -> list[Quote]:
    """Every sentence of the retrieved sections ``source_ids`` (sections not retrieved in
    this run are skipped), scored against ``question``, best first; fragments under
    :data:`MIN_QUOTE_WORDS` words left out. One cross-encoder call for them all."""
    pairs: list[tuple[str, str]] = []
    passages: list[str] = []
    for sid in dict.fromkeys(source_ids):
        for said, passage in sentence_passages(ctx.retrieved.get(sid) or [], ctx.withheld):
            if len(words(said)) >= MIN_QUOTE_WORDS:
                pairs.append((sid, said))
                passages.append(passage)
    if not passages:
        return []
    logits = scorer.logits(question, passages)
    order = sorted(range(len(pairs)), key=lambda i: -logits[i])
    return [Quote(pairs[i][0], pairs[i][1], float(logits[i])) for i in order]


def answering_quotes(
    question: str,
    ranked: Sequence[str],
    ctx: RunContext,
    scorer: CrossEncoder,
    threshold: float,
) -> list[Quote]:
    """The best :data:`QUOTES` sentences of the first :data:`QUOTE_SECTIONS` sections of
    ``ranked`` (else of the run's retrieved sections, in retrieval order) whose probability
    of answering ``question`` reaches ``threshold`` (in [0, 1]; the support checker's
    coverage threshold), best first; an item already quoted with its lead-in is not quoted
    again."""
    ids = list(ranked or ctx.retrieved)[:QUOTE_SECTIONS]
    chosen: list[Quote] = []
    for quote in best_sentences(question, ids, ctx, scorer):
        if len(chosen) == QUOTES or sigmoid(quote.logit) < threshold:
            break
        if not any(quote.sentence in q.sentence for q in chosen):
            chosen.append(quote)
    return chosen


RESTATED_SHARE = 0.8
"""Share of a sentence's terms (four at least) another holds for it to restate that one:
a quote the answer's sentence restates is not added, and a supporting line of the model's
that restates a quote gives way to the quote. Set by reading, not fitted: the dev answers'
restatements ("The evidence states that a person accused of an offence may file an
application for plea bargaining within thirty days …" beside the rule it paraphrases) share
nearly all their terms (not measured over distinct points; the judged runs' key facts and
gold cited were unchanged by it)."""


def restates(sentence: str, other: str) -> bool:
    """Whether ``sentence`` restates ``other``: at least :data:`RESTATED_SHARE` of its terms
    (:func:`~sleuth.retrieval.text.terms`, four at least) are ``other``'s."""
    mine = set(terms(sentence))
    return len(mine) >= 4 and len(mine & set(terms(other))) >= RESTATED_SHARE * len(mine)


def in_section_order(quotes: Sequence[Quote], ctx: RunContext) -> list[Quote]:
    """``quotes`` in the order their sentences stand in their sections (sections in the order
    their first quote comes): a section read as written, "(1) …" before "(5) …"."""
    firsts = list(dict.fromkeys(q.source_id for q in quotes))
    places = {
        (sid, said): index
        for sid in firsts
        for index, (said, _) in enumerate(sentence_passages(ctx.retrieved.get(sid) or []))
    }
    return sorted(
        quotes,
        key=lambda q: (firsts.index(q.source_id), places.get((q.source_id, q.sentence), 0)),
    )


def with_quotes(
    answer: GeneratedAnswer, quotes: Sequence[Quote], ctx: RunContext
) -> GeneratedAnswer:
    """``answer`` followed by the ``quotes`` it does not already state, each cited; their
    sections added to its citations. A decline, or an answer that states every quote, is
    returned unchanged.

    A quote is stated when the text holds it (:meth:`Quote.stated_in`) or the answer's
    first line restates it (:func:`restates`: the model answered in the rule's terms). A
    line after the first that restates a quote being added is dropped: the rule's own words
    replace the model's paraphrase of them, never stand beside it."""
    if answer.is_insufficient_context:
        return answer
    lines = answer.answer_text.rstrip().split("\n")
    missing = [
        q
        for q in quotes
        if not q.stated_in(answer.answer_text)
        and not restates(q.sentence, MARKERS.sub("", lines[0]))
    ]
    if not missing:
        return answer
    kept, dropped = lines[:1], []
    for line in lines[1:]:
        restated = any(restates(MARKERS.sub("", line), q.sentence) for q in missing)
        (dropped if restated else kept).append(line)
    text = "\n".join(kept).rstrip() + "\n" + " ".join(q.cited() for q in missing)
    # a citation leaves with the dropped lines only: its marker was there and is nowhere else
    left = set(cited_ids("\n".join(dropped))) - set(cited_ids(text))
    still = [c for c in answer.citations if c.source_id not in left]
    cited = {c.source_id for c in still}
    added = [
        section_citation(q.source_id, ctx, sigmoid(q.logit))
        for q in {q.source_id: q for q in reversed(missing)}.values()
        if q.source_id not in cited
    ]
    return answer.model_copy(update={"answer_text": text.strip(), "citations": [*still, *added]})


def quoted_draft(quotes: Sequence[Quote], short: str = "") -> AnswerDraft | None:
    """The extractive answer of a run without a model: the ``quotes``, each cited, in order,
    after ``short`` (a short answer found otherwise, for a factoid question: it opens the
    answer unless the quotes hold it already); ``None`` when there are no quotes."""
    if not quotes:
        return None
    text = " ".join(q.cited() for q in quotes)
    if short and short.lower() not in text.lower():
        text = f"{short.rstrip('.')}. {text}"
    draft = AnswerDraft(
        answer_text=text,
        short_answer=short,
        citations=list(dict.fromkeys(q.source_id for q in quotes)),
    )
    return draft.as_extractive()
