"""The last step of every run, in both modes: validate citations, guard, set the status."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from sleuth.agents.answer import MARKERS, AnswerDraft, GeneratedAnswer
from sleuth.agents.citations import (
    CitationReport,
    RemovedCitation,
    clean_answer_text,
    section_citation,
    validate_citations,
)
from sleuth.agents.comparison import check_yes_no, named_entities
from sleuth.agents.heuristic import compose_answer, named_sections
from sleuth.agents.negation import prohibits
from sleuth.agents.profile import profile_of
from sleuth.agents.quantity import reread_quantity
from sleuth.agents.question import is_multi_part
from sleuth.agents.quotes import (
    answering_quotes,
    best_sentences,
    in_section_order,
    sentence_passages,
    with_quotes,
)
from sleuth.agents.reader import (
    SHORT_ANSWER_WORDS,
    AnswerKind,
    answer_kind,
    asks_yes_or_no,
    complete_sentences,
    sentence_opening,
    without_repeats,
)
from sleuth.agents.scope import decline, not_held, unseen_identifiers
from sleuth.agents.state import RunStatus
from sleuth.agents.support import SupportChecker
from sleuth.agents.verdict import (
    JUDGED_NO_LOG_ODDS,
    JUDGED_YES_LOG_ODDS,
    RuleVerdict,
    judged_verdict,
    rule_verdict,
)
from sleuth.retrieval.hops import main_title
from sleuth.retrieval.rerank import CrossEncoder, sigmoid
from sleuth.retrieval.search import join_parts
from sleuth.retrieval.text import digits, named_phrases, terms
from sleuth.tools.base import RunContext

UNCITED = "the answer cited no section retrieved in this run"
UNSEEN = "the question asks about an identifier no retrieved section mentions"
UNGROUNDED = "no sentence of the answer is supported by a retrieved section"
OFF_TOPIC = "the cited sections do not address the question (cross-encoder relevance)"
RECITED = (
    "the cited sections do not address the question; rewritten from the retrieved section "
    "that does (cross-encoder relevance)"
)
RULE_SECTIONS = 5
"""Retrieved sections, after the cited ones, whose sentences a yes/no verdict may rest on."""
BRIDGED = (
    "the cited sections hold the short answer but do not address the question; the retrieved "
    "section that does, and names a cited one, is cited before them (cross-encoder relevance)"
)
OUT_OF_SCOPE = "the question names a document the collection does not hold"
EXTRACTIVE = "the model's answer failed a check; the extractive reader's quotes were shipped"
OVERRULED = (
    "the model declined, but sentences of the sections read answer the question "
    "(cross-encoder); the extractive reader's quotes were shipped"
)
REPAIR_PROMPT = (
    "Your answer cites none of the numbered results, so it cannot be checked. Write it "
    "again using only the numbered results: after each claim put the number of the result "
    "it comes from, like [1]. If the results do not answer the question, reply "
    '"Insufficient context:" and say what is missing.'
)
AnswerSource = Literal["model", "repaired", "replaced", "extractive"]
Repair = Callable[[str, AnswerDraft], AnswerDraft | None]
"""Asks the model once more: ``(what was wrong, the draft) -> a new draft or None``."""
_FIRST_SENTENCE = re.compile(
    r"\s*(.+?(?:(?<!\b[A-Z])[.!](?:\s*\[[^\]\n]{1,200}\])*(?=\s)|\n|$))", re.S
)  # an initial ("E. B. White") ends no sentence
_YES_NO = re.compile(r"^(yes|no)\b(?![ \t]+[a-z])[\s,.;:!-]*", re.I)
"""A verdict opening a text: a word of its own, not the "No" of a quoted rule ("No person
shall be compelled …")."""
_DANGLING = re.compile(r"[\s,;:–—-]+$")
AnswerType = Literal["yes/no", "year", "date", "number"]
_CHOICE = re.compile(r"\b(?:or|between)\b", re.I)
_CHOICE_OR_WH = re.compile(r"\b(?:or|what|which|who|whom|whose|when|where|why|how)\b", re.I)
_YEAR_Q = re.compile(r"\b(?:what|which)\s+year\b", re.I)
_DATE_Q = re.compile(r"^\s*when\b|\bwhat\s+(?:date|century|decade)\b", re.I)
_NUMBER_Q = re.compile(r"^\s*how\s+(?:many|much|old|long|far|tall|high)\b|\bpopulation\b", re.I)
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_SHAPES: dict[str, re.Pattern[str]] = {
    "yes/no": re.compile(r"^(?:yes|no)\b", re.I),
    "year": re.compile(r"\b\d{3,4}s?\b"),
    "date": re.compile(rf"\d|\b(?:{_MONTHS}|century|decade)\b", re.I),
    "number": re.compile(
        r"\d|\b(?:once|twice|thrice|one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
        r"twelve|twenty|thirty|forty|fifty|hundred|thousand|million|billion|dozen)\b",
        re.I,
    ),
}
TYPE_REPAIR = (
    "The question asks for {kind}, but your short answer '{short}' is not one. Read the "
    "numbered results again and answer the question itself: 'Answer: <{what}>', then the "
    "facts with their numbers."
)
ECHO_REPAIR = (
    "Your short answer '{short}' only repeats a name the question already gives; the "
    "question asks for something else about it. Read the numbered results again and answer "
    "the question itself: 'Answer: <what it asks for>', then the facts with their numbers."
)
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
    source: AnswerSource = "extractive"
    repair_rounds: int = 0
    yes_no_check: str | None = None
    """The evidence check of a yes/no comparison (:func:`~sleuth.agents.comparison.
    check_yes_no`): its verdict and reason, and whether it overturned the model's."""
    quantity_check: str | None = None
    """A short answer's quantity read again (:mod:`sleuth.agents.quantity`): kept, or what
    it became."""

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
        if r.added:
            parts.append(
                "citations added: " + ", ".join(f"{a.source_id} ({a.support})" for a in r.added)
            )
        if self.replaced:
            parts.append(f"answer replaced: {self.replaced}")
        if self.yes_no_check:
            parts.append(f"yes/no check: {self.yes_no_check}")
        if self.quantity_check:
            parts.append(f"quantity check: {self.quantity_check}")
        parts.append(f"answer source: {self.source}")
        return "; ".join(parts)

    def trace(self) -> dict[str, object]:
        """Trace metadata: the citation report plus ``answer_replaced``, ``answer_source``
        (``model`` kept as written, ``repaired`` kept with citations attached or after a
        repair round, ``replaced`` by the extractive answer, ``extractive`` when no model
        wrote it), ``repair_rounds``, ``yes_no_check`` and ``quantity_check``."""
        return {
            **self.report.trace(),
            "answer_replaced": self.replaced,
            "answer_source": self.source,
            "repair_rounds": self.repair_rounds,
            "yes_no_check": self.yes_no_check,
            "quantity_check": self.quantity_check,
        }


def split_short_answer(draft: AnswerDraft) -> tuple[str | None, AnswerDraft]:
    """Find a model draft's short answer (the entity, date, number or yes/no it opens with).

    The short answer is ``draft.short_answer`` when given; else a leading "Yes"/"No"; else
    the first sentence when it has at most :data:`SHORT_ANSWER_WORDS` words, no citation
    marker, and more text follows ("Chief of Protocol. Shirley Temple served as … [2].").
    Such an uncited opening is taken off the text (it is checked on its own, then put back
    first); a cited opening of at most four words ("1922 [2].") stays in the text, where it
    is checked as any claim.

    Returns:
        ``(short answer or None, the draft to validate)``.
    """
    text = clean_answer_text(draft.answer_text)
    short = " ".join((draft.short_answer or "").split()).rstrip(".")
    verdict = _YES_NO.match(short)
    if verdict and len(short) > verdict.end():
        # "Yes, they must tell him why": the verdict is the short answer, its reason a claim
        # of the text, checked and cited like the others
        reason = short[verdict.end() :].strip()
        reason = reason[:1].upper() + reason[1:]
        body = text if reason.lower() in text.lower() else f"{reason}. {text}".strip()
        return verdict.group(1).capitalize(), draft.model_copy(update={"answer_text": body})
    if short:
        plain = MARKERS.sub("", text)
        if plain.lower().startswith(short.lower()) and "[" not in text[: len(short) + 1]:
            after = text[len(short) :]
            if not after.strip() or after.lstrip(" ")[:1] in tuple(".,:;-\n"):
                # the opening is the short answer itself ("Chief of Protocol. …"), not the
                # first word of a longer claim ("death or imprisonment for life [1]")
                rest = after.lstrip(" .,:;-\n")
                return short, draft.model_copy(update={"answer_text": rest or text})
        return short, draft
    yes_no = _YES_NO.match(text)
    if yes_no and len(text) > yes_no.end():
        rest = text[yes_no.end() :].strip()
        if not rest.startswith("["):
            return yes_no.group(1).capitalize(), draft.model_copy(update={"answer_text": rest})
    match = _FIRST_SENTENCE.match(text)
    if match is None:
        return None, draft
    opening, rest = match.group(1), text[match.end() :].strip()
    first = MARKERS.sub("", opening).strip().rstrip(".!").strip()
    if not rest or not first or first.endswith("?") or len(first.split()) > SHORT_ANSWER_WORDS:
        return None, draft
    if "[" in opening:
        return (first, draft) if len(first.split()) <= 4 else (None, draft)
    return first, draft.model_copy(update={"answer_text": rest})


def answer_type(question: str, kind: AnswerKind | None = None) -> AnswerType | None:
    """The shape a factoid question's short answer must have, when its wording says so:
    ``yes/no`` (:func:`~sleuth.agents.reader.answer_kind`: "Are A and B both …?", "A has an
    OBE. Does B have one?"),
    ``year`` ("in what year"), ``date`` ("when …"), ``number`` ("how many", "population");
    else None (who, which, what …: any entity). ``kind``: the question's answer kind when
    already read (the run's :class:`~sleuth.agents.profile.QuestionProfile`)."""
    if (kind or answer_kind(question)) == "yes_no":
        return "yes/no"
    if _YEAR_Q.search(question):
        return "year"
    if _DATE_Q.search(question):
        return "date"
    if _NUMBER_Q.search(question):
        return "number"
    return None


def fits_type(short: str, kind: AnswerType) -> bool:
    """Whether a short answer has the shape of ``kind`` (a year holds 3–4 digits, a date a
    digit, month, century or decade, a number a digit or a number word)."""
    return bool(_SHAPES[kind].search(short))


_PARTS = re.compile(r"\s*;\s*|\s*,(?!\d)\s*")  # "6,960" is one number
_OR = re.compile(r"\s+or\s+", re.I)
_NAME = re.compile(r"[A-Z][\w'’.-]*")


def trimmed_short_answer(question: str, short: str, multi_part: bool | None = None) -> str:
    """A short answer cut to what the question asks for:

    - a year, date or number question (:func:`answer_type`) answered with a list of parts
      ("8 June 1951, Mara Dune, Salt Rain") keeps its parts of that shape: the first one
      when the question asks one thing, all of them when it asks several
      (:func:`~sleuth.agents.question.is_multi_part`, or ``multi_part`` when already read:
      "how long the first time, and after?"); a list with no part of that shape is kept;
    - a question offering a choice ("Which is taller, the Velmora or the Carrow?")
      answered with one option in a sentence ("The Velmora is taller") keeps the option's
      capitalised words it names, in the answer's order ("Velmora") — when the answer
      names words of one option only.

    Any other short answer is returned as it is."""
    kind = answer_type(question)
    if kind in ("year", "date", "number"):
        parts = [p for p in _PARTS.split(short) if p]
        fitting = [p for p in parts if fits_type(p, kind)]
        if len(parts) < 2 or not fitting:
            return short
        several = is_multi_part(question) if multi_part is None else multi_part
        # a question that asks several things ("and who's third album …?" read as two
        # parts, or "the first time, and after?") keeps every part of the asked shape
        return ", ".join(fitting) if several else fitting[0]
    pieces = _OR.split(question.rstrip(" ?"))
    if len(pieces) != 2:
        return short
    first_word = question.split()[0] if question.split() else ""
    sides = [{w.casefold() for w in _NAME.findall(piece) if w != first_word} for piece in pieces]
    words = _NAME.findall(short)
    named = [
        {w.casefold() for w in words if w.casefold() in side - other}
        for side, other in (sides, sides[::-1])
    ]
    if bool(named[0]) == bool(named[1]):
        return short
    chosen = named[0] or named[1]
    kept = [w for w in words if w.casefold() in chosen]
    run = " ".join(kept)
    return run if run and len(run) < len(short) else short


def shape_problem(
    question: str, short: str, kind: AnswerKind | None = None
) -> tuple[str, Callable[[str], bool]] | None:
    """What is wrong with the shape of a short answer, as the repair round says it, and the
    test a repaired short answer must pass; None when its shape fits the question:

    - a name where the question asks for a year, date, number or yes/no (the model answered
      the bridge entity, not the question: :func:`answer_type`);
    - a yes or no where it asks which, who or what;
    - only names the question already gives ("Glass Heron" for "Under what name did the
      founder of Glass Heron release …?"), unless the question offers a choice ("A or B").

    ``kind``: the question's answer kind when already read (the run's profile): a yes/no
    question whose clauses hold a wh-word ("When the police question me, do I …?") is not
    asked for a name or a date.
    """
    shape = answer_type(question, kind)
    if shape is not None:
        if fits_type(short, shape):
            return None
        wanted, what = (f"a {shape}", f"the {shape}") if shape != "yes/no" else ("yes or no",) * 2
        problem = TYPE_REPAIR.format(kind=wanted, what=what, short=short)
        return problem, lambda s: fits_type(s, shape)
    if _YES_NO.fullmatch(short):
        if not _CHOICE_OR_WH.search(question):
            return None
        problem = TYPE_REPAIR.format(
            kind="a name or phrase, not yes or no", what="the name or phrase", short=short
        )
        return problem, lambda s: not _YES_NO.fullmatch(s)
    # only the question's names count ("Glass Heron"): "7 years" to "After how many years
    # …" or "Death" to "… beats a man to death …" repeats no name
    named = set(terms(" ".join(phrase for _, phrase in named_phrases(question))))
    said = set(terms(short))
    if said and said <= named and not _CHOICE.search(question):
        return ECHO_REPAIR.format(short=short), lambda s: not set(terms(s)) <= named
    return None


def _retyped(
    question: str,
    short: str | None,
    draft: AnswerDraft,
    repair: Repair,
    kind: AnswerKind | None = None,
) -> AnswerDraft:
    """One repair round for a short answer of the wrong shape (:func:`shape_problem`;
    ``kind``: the question's answer kind). The new draft is taken only when its short answer
    passes; else ``draft`` stays."""
    found = shape_problem(question, short, kind) if short else None
    if found is None:
        return draft
    problem, passes = found
    fixed = repair(problem, draft)
    if fixed is None or fixed.is_insufficient_context:
        return draft
    new_short, _ = split_short_answer(fixed)
    return fixed if new_short and passes(new_short) else draft


def readable_short_answer(short: str, ctx: RunContext) -> str:
    """A short answer that names a retrieved section by its source_id ("Larch_Academy",
    copied from an evidence header) becomes that section's title ("Larch Academy")."""
    wanted = short.strip().strip("[]").casefold()
    for sid, chunks in ctx.retrieved.items():
        if sid.casefold() == wanted and "_" in sid:
            title = (
                chunks[0].title_path[-1].strip().rstrip(".")
                if chunks and chunks[0].title_path
                else ""
            )
            return title or sid.replace("_", " ")
    return short


def _short_supported(
    question: str, short: str, answer: GeneratedAnswer | None, ctx: RunContext
) -> bool:
    """Whether the short answer's terms that the question does not give occur in the cited
    sections — or, with no ``answer``, in any retrieved section; numbers match in digits or
    words (:func:`digits`). A bare "Yes" or "No" is supported only when the question asks
    yes or no (:func:`~sleuth.agents.reader.asks_yes_or_no`): it answers nothing else. A short
    answer written as a sentence ("The founder … used the name Low Ember") needs only
    its own words found ("bass", "communion"), not the question's it repeats."""
    if short.lower() in ("yes", "no"):
        return asks_yes_or_no(question)
    wanted = set(terms(digits(short))) - set(terms(digits(question)))
    if not wanted:
        return True
    cited = (answer and [c.source_id for c in answer.citations]) or list(ctx.retrieved)
    found: set[str] = set()
    for sid in cited:
        chunks = ctx.retrieved.get(sid) or []
        text = " ".join([chunks[0].heading if chunks else "", join_parts(chunks)])
        found.update(terms(digits(text)))
    return wanted <= found


def finish_answer(
    question: str,
    draft: AnswerDraft,
    ctx: RunContext,
    stop_status: RunStatus | None = None,
    error: str | None = None,
    require_citations: bool = True,
    checker: SupportChecker | None = None,
    strict_grounding: bool = False,
    from_model: bool = False,
    repair: Repair | None = None,
    ranked: Sequence[str] = (),
    fallback: AnswerDraft | None = None,
    overrule: AnswerDraft | None = None,
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

    A question naming a document (an act, a code…) that the collection does not hold
    (``ctx.documents``, :func:`~sleuth.agents.scope.not_held`) is declined, saying what the
    collection holds, whatever the draft says.

    With ``from_model`` the draft is a model's: its short answer is kept apart from the
    checks and put first (:func:`split_short_answer`; checked to occur in the cited
    sections); a short answer of the wrong shape for the question (:func:`answer_type`)
    gets one ``repair`` round; sentences a retrieved section supports get their citation
    attached; when nothing cited survives, ``repair`` (if given) asks the model once more
    before the extractive replacement.

    With a ``checker`` that holds a cross-encoder, an answer that is not a decline ends
    with the sentences of the sections read that answer the question best
    (:func:`~sleuth.agents.quotes.with_quotes`; ``ranked``: those sections, best first,
    else the run's retrieved ones), quoted and cited, unless it states them already.

    ``fallback`` (the extractive reader's answer for this run, when it would answer) is
    shipped instead of a decline when a check turns a model's answer down — citations about
    other matters that cannot be re-cited, or a short answer no retrieved section holds —
    so that a model never answers less than the run would without one. ``overrule`` (the
    same answer, given only when its quotes reach the stricter :data:`RECITE_THRESHOLD`)
    replaces the model's own "insufficient context", in its first reply or in a repair
    round's.
    """

    def declined(text: str, why: str) -> FinishedAnswer:
        report = validate_citations(
            AnswerDraft(answer_text=text, is_insufficient_context=True),
            ctx,
            checker,
            strict_grounding,
        )
        return FinishedAnswer(
            answer=report.answer,
            status=stop_status or RunStatus.INSUFFICIENT_CONTEXT,
            report=report,
            replaced=why,
            source="replaced" if from_model else "extractive",
        )

    profile = profile_of(question, ctx)
    kind = profile.answer_kind
    if ctx.documents is not None:
        sections = [c[0].title_path[-1] for c in ctx.retrieved.values() if c]
        missing = not_held(question, ctx.documents, sections, profile.named_documents)
        if missing:
            return declined(decline(missing, ctx.documents), OUT_OF_SCOPE)
    unseen = unseen_identifiers(
        question,
        [f"{sid} {join_parts(chunks)}" for sid, chunks in ctx.retrieved.items() if chunks],
    )
    if unseen and ctx.retrieved and not ctx.external_tools:
        closest = ", ".join(list(ctx.retrieved)[:3]) or "none"
        listed = ", ".join(repr(t) for t in unseen)
        return declined(
            f"Insufficient context: no retrieved section mentions {listed} (closest "
            f"sections: {closest}).",
            UNSEEN,
        )
    # a small model declines evidence that answers ("the question does not specify …")
    overruled = from_model and draft.is_insufficient_context and overrule is not None
    if overruled:
        assert overrule is not None
        draft = overrule
    short: str | None = None
    rounds = 0
    if from_model and not draft.is_insufficient_context:
        # a looped sentence is said once, and the text ends a sentence
        draft = draft.model_copy(
            update={"answer_text": complete_sentences(without_repeats(draft.answer_text))}
        )
        short, split = split_short_answer(draft)
        if repair is not None:
            retyped = _retyped(question, short, draft, repair, kind)
            if retyped is not draft:
                rounds = 1
                short, split = split_short_answer(retyped)
        draft = split
    report = validate_citations(draft, ctx, checker, strict_grounding)
    replaced = OVERRULED if overruled else None
    needs_citations = require_citations and not report.answer.is_insufficient_context
    if needs_citations and not report.answer.citations and repair is not None:
        rounds += 1
        fixed = repair(REPAIR_PROMPT, draft)
        if fixed is not None and fixed.is_insufficient_context and overrule is not None:
            fixed, replaced = overrule, OVERRULED  # asked to cite, the model declined
        if fixed is not None:
            short, fixed = (
                split_short_answer(fixed)
                if not fixed.is_insufficient_context
                else (
                    None,
                    fixed,
                )
            )
            again = validate_citations(fixed, ctx, checker, strict_grounding)
            again.removed[:0] = report.removed
            again.unsupported[:0] = report.unsupported
            report = again
    if (
        needs_citations
        and not report.answer.is_insufficient_context
        and not (report.answer.citations)
    ):
        replaced = UNCITED
        short = None
        composed = validate_citations(compose_answer(question, ctx), ctx, checker, strict_grounding)
        composed.removed[:0] = report.removed
        composed.unsupported[:0] = report.unsupported
        composed.dropped_sentences[:0] = report.dropped_sentences
        report = composed
    answer = report.answer
    if from_model and checker is not None and answer.citations and not ctx.external_tools:
        # a model's sentence no retrieved section supports is dropped when supported ones
        # remain: never shipped beside them as if the check had passed it
        kept = _without_ungrounded(answer, report)
        held = (
            short is not None
            and short.lower() not in ("yes", "no")
            and _short_supported(question, short, None, ctx)
        )
        if kept is None and held:
            # a multi-hop sentence no single section supports, but its short answer is in
            # the evidence read: kept, its sentences listed as ungrounded
            kept = answer
        elif kept is None:
            # every sentence the model wrote is flagged: never shipped as if it had passed,
            # the extractive answer instead (or an honest decline)
            replaced, short = UNGROUNDED, None
            fallback_report = validate_citations(
                compose_answer(question, ctx), ctx, checker, strict_grounding
            )
            fallback_report.unsupported[:0] = report.unsupported
            fallback_report.dropped_sentences[:0] = report.dropped_sentences
            report = fallback_report
            kept = report.answer
        answer = kept
        report.answer = answer
    # model answers only: the extractive reader has its own word-coverage decline, and on a
    # wrong but near section (the demo's Python question) the gate turned answers into declines
    unrelated = (
        off_topic(question, answer, ctx, checker) if require_citations and from_model else None
    )

    def extractive() -> GeneratedAnswer | None:
        if fallback is None:
            return None
        shipped = validate_citations(fallback, ctx, checker, strict_grounding).answer
        return shipped if shipped.citations and not shipped.is_insufficient_context else None

    if unrelated is not None:
        assert checker is not None and checker.cross_encoder is not None
        # re-cited from the retrieved section that does address the question, else the
        # extractive answer, else declined
        again = recited(question, ctx, checker.cross_encoder)
        if (
            again
            and short
            and bridges(again, answer, ctx)
            and _short_supported(question, short, answer, ctx)
        ):
            # a multi-hop answer: the section that holds it is about the next hop (the team,
            # not the player); the section about the question that names it goes first
            answer = _bridged(again, answer)
            replaced = BRIDGED
        else:
            instead = None if again else extractive()
            answer = (
                again
                or instead
                or GeneratedAnswer(answer_text=unrelated, is_insufficient_context=True)
            )
            replaced = RECITED if again else EXTRACTIVE if instead else OFF_TOPIC
            short = None
        report.answer = answer
    if short:
        short = trimmed_short_answer(
            question, readable_short_answer(short, ctx), profile.multi_part
        )
    if (
        short
        and not answer.is_insufficient_context
        and not _short_supported(question, short, None, ctx)
    ):
        # no retrieved section holds the short answer: the model answered from memory, and
        # the sentences around it (often quoted evidence) must not make it look cited
        instead = extractive()
        why = (
            f"the model's '{short}' does not answer a question that asks no yes or no"
            if short.lower() in ("yes", "no")
            else f"no retrieved section supports the answer the model gave ('{short}')"
        )
        answer = instead or answer.model_copy(
            update={
                "answer_text": f"Insufficient context: {why}.",
                "is_insufficient_context": True,
                "citations": [],
                "key_points": [],
                "ungrounded_sentences": [],
            }
        )
        report.answer = answer
        replaced = EXTRACTIVE if instead else replaced
        short = None
    checked = None
    if short and short.lower() in ("yes", "no") and answer_type(question, kind) == "yes/no":
        short, checked = _checked_yes_no(question, short, ctx)
    if checked is None and not answer.is_insufficient_context and kind == "yes_no":
        answer, short, checked, rule = _rule_checked(question, answer, short, ctx, checker)
        if rule is not None and prohibits(rule.clause):
            # "No confession … shall be proved": the negation governs the whole rule, so its
            # verdict is not in doubt, and the model's reading (which leans to Yes) must not
            # overturn it
            judged = "the model's reading not asked: the rule is a prohibition"
        else:
            answer, short, judged = _judge_checked(question, answer, short, ctx, checker)
        checked = "; ".join(note for note in (checked, judged) if note) or None
    if short and not answer.is_insufficient_context:
        if not _short_supported(question, short, answer, ctx):
            if strict_grounding:
                report.dropped_sentences.append(short)
                short = None
            else:
                answer.ungrounded_sentences.insert(0, short)
        if short:
            answer.short_answer = short
            if not opens_with(answer.answer_text, short):
                answer.answer_text = f"{short}. {answer.answer_text}".strip()
    if (
        require_citations
        and checker is not None
        and checker.cross_encoder is not None
        and not answer.is_insufficient_context
    ):
        # a question that names sections asks what they say: the quotes come from them
        named = named_sections(question, ctx)
        quotes = answering_quotes(
            question, named or ranked, ctx, checker.cross_encoder, checker.coverage_threshold
        )
        if named:  # what a named section says is quoted as it stands
            quotes = in_section_order(quotes, ctx)
        answer = with_quotes(answer, quotes, ctx)
        report.answer = answer
    # a question that asks several things has a short answer of several parts, and the
    # re-read asks for one number
    reread = None
    if from_model and not profile.multi_part:
        reread_answer, short, reread = _reread(question, answer, short, ctx, checker)
        if reread_answer is not answer:
            answer = report.answer = reread_answer
    if from_model and not answer.is_insufficient_context:
        # citation edits can leave "… [S1]," or a fragment behind: the answer ends a sentence
        answer.answer_text = sentence_opening(
            complete_sentences(_DANGLING.sub("", answer.answer_text))
        )
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
    if not from_model:
        source: AnswerSource = "extractive"
    elif replaced:
        source = "replaced"
    elif rounds or report.added:
        source = "repaired"
    else:
        source = "model"
    return FinishedAnswer(
        answer=answer,
        status=status,
        report=report,
        replaced=replaced,
        source=source,
        repair_rounds=rounds,
        yes_no_check=checked,
        quantity_check=reread,
    )


def _without_ungrounded(answer: GeneratedAnswer, report: CitationReport) -> GeneratedAnswer | None:
    """``answer`` with its ungrounded sentences taken out of the text (recorded in
    ``report.dropped_sentences``); a sentence that cannot be found in the text stays listed.
    ``None`` when nothing would be left."""
    text, left = answer.answer_text, []
    for claim in answer.ungrounded_sentences:
        at = text.find(claim)
        if at < 0:
            left.append(claim)
            continue
        text = (text[:at] + text[at + len(claim) :]).strip()
        report.dropped_sentences.append(claim)
    if not MARKERS.sub("", text).strip(" .\n-"):
        return None
    text = re.sub(r"[ \t]{2,}", " ", re.sub(r"\n\s*-?\s*\n", "\n", text)).strip()
    return answer.model_copy(update={"answer_text": text, "ungrounded_sentences": left})


def cited_relevance(
    question: str, answer: GeneratedAnswer, ctx: RunContext, scorer: CrossEncoder
) -> float | None:
    """How well the sections ``answer`` cites address ``question``: the cross-encoder's best
    probability over their sentences (each read with its section's title) that the sentence
    answers the question — sigmoid of the logit, in (0, 1). ``None`` when no cited section
    was retrieved in this run (an MCP tool's result, say).

    Sentences, not whole chunks, are scored: a statute section's answer is one sentence among
    many provisos, and a chunk's head says little about the rest.
    """
    return sections_relevance(question, [c.source_id for c in answer.citations], ctx, scorer)


def sections_relevance(
    question: str, source_ids: Sequence[str], ctx: RunContext, scorer: CrossEncoder
) -> float | None:
    """The cross-encoder's best probability, in (0, 1), that a sentence of the retrieved
    sections ``source_ids`` (each read with its section's title) answers ``question``;
    ``None`` when none of them was retrieved in this run."""
    passages: list[str] = []
    for sid in dict.fromkeys(source_ids):
        passages.extend(p for _, p in sentence_passages(ctx.retrieved.get(sid) or []))
    if not passages:
        return None
    return sigmoid(max(scorer.logits(question, passages)))


RECITE_SECTIONS = 8
"""Retrieved sections, in retrieval order, an off-topic answer may be re-cited from."""
RECITE_SENTENCES = 2
"""Sentences of that section a re-cited answer quotes at most."""
RECITE_THRESHOLD = 0.5
"""The least cross-encoder probability of the sentence a re-cited answer rests on: the
model's own decision boundary (logit 0), not a fitted value."""


def recited(question: str, ctx: RunContext, scorer: CrossEncoder) -> GeneratedAnswer | None:
    """The answer rewritten from the retrieved section that does address ``question``, for
    a model answer whose own citations do not (:func:`off_topic`): its sentences the
    cross-encoder scores at least :data:`RECITE_THRESHOLD` (at most
    :data:`RECITE_SENTENCES`, in the section's order), each cited. ``None`` when no sentence
    of the first :data:`RECITE_SECTIONS` retrieved sections reaches it: then the collection
    does not cover the question."""
    pairs: list[tuple[str, str]] = []
    passages: list[str] = []
    for sid in list(ctx.retrieved)[:RECITE_SECTIONS]:
        for said, passage in sentence_passages(ctx.retrieved[sid]):
            pairs.append((sid, said))
            passages.append(passage)
    if not passages:
        return None
    logits = scorer.logits(question, passages)
    best = max(range(len(pairs)), key=lambda i: logits[i])
    if sigmoid(logits[best]) < RECITE_THRESHOLD:
        return None
    sid = pairs[best][0]
    mine = [i for i in range(len(pairs)) if pairs[i][0] == sid]
    top = sorted(mine, key=lambda i: -logits[i])[:RECITE_SENTENCES]
    chosen = [i for i in sorted(top) if sigmoid(logits[i]) >= RECITE_THRESHOLD]
    text = " ".join(f"{pairs[i][1].rstrip('.;:, ')} [{sid}]." for i in chosen)
    citation = section_citation(sid, ctx, sigmoid(logits[best]))
    return GeneratedAnswer(answer_text=text, citations=[citation])


def bridges(about: GeneratedAnswer, answer: GeneratedAnswer, ctx: RunContext) -> bool:
    """Whether a section ``about`` cites (the one that addresses the question) names, by its
    title, a section ``answer`` cites that it does not: the hop of a multi-hop question
    ("He played for the Philadelphia Eagles" → the section *Philadelphia Eagles*)."""
    first = {c.source_id for c in about.citations}
    text = " ".join(join_parts(ctx.retrieved.get(sid) or []) for sid in first).casefold()
    for sid in dict.fromkeys(c.source_id for c in answer.citations):
        chunks = ctx.retrieved.get(sid) or []
        title = main_title(chunks[0].title_path[-1]) if chunks and chunks[0].title_path else ""
        if sid not in first and len(title) > 2 and title.casefold() in text:
            return True
    return False


def _bridged(about: GeneratedAnswer, answer: GeneratedAnswer) -> GeneratedAnswer:
    """``answer`` with the sentences of ``about`` (the section that addresses the question)
    and their citation put first."""
    cited = {c.source_id for c in about.citations}
    return answer.model_copy(
        update={
            "answer_text": f"{about.answer_text} {answer.answer_text}".strip(),
            "citations": [
                *about.citations,
                *(c for c in answer.citations if c.source_id not in cited),
            ],
        }
    )


def off_topic(
    question: str, answer: GeneratedAnswer, ctx: RunContext, checker: SupportChecker | None
) -> str | None:
    """Why ``answer`` must be declined as not about ``question``, or ``None``.

    With a cross-encoder and ``checker.coverage_threshold`` above 0, an answer whose cited
    sections hold no sentence that reaches the threshold (:func:`cited_relevance`) rests on
    sections about other matters: the claims may be quoted faithfully (so the support check
    passes them) while the question is about something the collection does not hold —
    unless ``checker.coverage_judge`` (the model, :mod:`sleuth.agents.coverage`) finds a
    cited section about the question: the cross-encoder misjudges plainly worded questions.
    The reason names the cited sections and the scores.
    """
    threshold = checker.coverage_threshold if checker is not None else 0.0
    if checker is None or checker.cross_encoder is None or threshold <= 0:
        return None
    if answer.is_insufficient_context or not answer.citations:
        return None
    score = cited_relevance(question, answer, ctx, checker.cross_encoder)
    if score is None or score >= threshold:
        return None
    cited_ids = list(dict.fromkeys(c.source_id for c in answer.citations))
    judge = checker.coverage_judge
    judged = ""
    if judge is not None:
        odds = judge.log_odds(question, cited_ids, ctx, checker.cross_encoder)
        if odds is not None and odds >= judge.threshold:
            return None  # the model finds a cited section about the question
        if odds is not None:
            judged = f"; the model's judgement {odds:.2f} < {judge.threshold} log-odds"
    cited = ", ".join(cited_ids)
    return (
        f"Insufficient context: the sections this answer would rest on ({cited}) are about "
        "other matters (cross-encoder relevance to the question "
        f"{score:.3f} < {threshold}{judged}); the knowledge base does not appear to cover "
        "this question."
    )


def _rule_checked(
    question: str,
    answer: GeneratedAnswer,
    short: str | None,
    ctx: RunContext,
    checker: SupportChecker | None,
) -> tuple[GeneratedAnswer, str | None, str | None, RuleVerdict | None]:
    """A yes/no answer made to agree with the rule its evidence states
    (:func:`~sleuth.agents.verdict.rule_verdict`): ``(answer, short answer, trace note,
    the rule read)``.

    An answer that opens with the other verdict is replaced by the verdict and the rule
    sentence, cited (its other sentences argued the overturned verdict); one that opens with
    none gets the verdict and the rule sentence, cited, before its own text; one that opens
    with the same verdict is kept, the rule sentence after it when it does not quote it (a
    verdict with a restatement of the question — "Yes. I may meet my lawyer." — says nothing
    the user can check). Unchanged without a cross-encoder or when no sentence plainly states
    the rule.
    """
    if checker is None or checker.cross_encoder is None:
        return answer, short, None, None
    order = [c.source_id for c in answer.citations] + list(ctx.retrieved)[:RULE_SECTIONS]
    rule = rule_verdict(
        question, ctx.retrieved, order, checker.cross_encoder, checker.cross_encoder_threshold
    )
    if rule is None:
        return answer, short, None, None
    said = stated_verdict(short or answer.answer_text)
    verdict = rule.verdict.capitalize()
    quoted = f"{rule.sentence.rstrip('.;:')} [{rule.source_id}]."
    why = f"'{rule.sentence[:160]}' [{rule.source_id}], relevance {rule.score:.2f}" + (
        f", read in its clause '{rule.clause[:120]}'" if rule.clause != rule.sentence else ""
    )
    states_rule = rule.sentence[:60] in MARKERS.sub("", answer.answer_text)
    if said == rule.verdict and states_rule:
        return answer, short, f"confirmed {rule.verdict}: {why}", rule
    if said is None or said == rule.verdict:
        # the rule the verdict rests on joins the answer, when the answer does not state it
        rest = sentence_opening(_YES_NO.sub("", answer.answer_text.strip(), count=1).strip())
        if states_rule:
            text = rest
        elif said is None or not rest:
            text = f"{quoted}\n{rest}".strip()
        else:  # the model's own answer first, the rule that confirms it after
            text = f"{rest}\n{quoted}"
        note = (
            f"stated {rule.verdict}: {why}"
            if said is None
            else f"confirmed {rule.verdict}, its rule added: {why}"
        )
    else:
        text = quoted
        note = f"{said} overturned to {rule.verdict}: {why}"
    cited = [c for c in answer.citations if c.source_id == rule.source_id] or [
        section_citation(rule.source_id, ctx, rule.score)
    ]
    overturned = said is not None and said != rule.verdict
    keep = cited if overturned else answer.citations
    if not overturned and not any(c.source_id == rule.source_id for c in keep):
        keep = [*cited, *keep]
    body = f"{verdict}. {text}".strip()
    fixed = answer.model_copy(
        update={
            "answer_text": body,
            "short_answer": verdict,
            "citations": keep,
            "ungrounded_sentences": [] if overturned else answer.ungrounded_sentences,
        }
    )
    return fixed, verdict, note, rule


def _judge_checked(
    question: str,
    answer: GeneratedAnswer,
    short: str | None,
    ctx: RunContext,
    checker: SupportChecker | None,
) -> tuple[GeneratedAnswer, str | None, str | None]:
    """A yes/no answer's verdict read again by the model on the section it cites first
    (:func:`~sleuth.agents.verdict.judged_verdict`): ``(answer, short answer, trace note)``.

    Where the model's log-odds lie beyond the verdict it contradicts
    (:data:`~sleuth.agents.verdict.JUDGED_YES_LOG_ODDS` /
    :data:`~sleuth.agents.verdict.JUDGED_NO_LOG_ODDS`), the answer becomes the other verdict
    and that section's sentence the cross-encoder finds most relevant, cited (its other
    sentences argued the overturned verdict; the answering quotes follow it as for any
    answer). Unchanged without a coverage judge (the model) or a cross-encoder, when the
    answer states no verdict or cites no retrieved section, when the question names two or
    more retrieved sections (a comparison, :func:`~sleuth.agents.comparison.named_entities`:
    one section cannot decide it), or when the judgement stays between the bands."""
    judge = checker.coverage_judge if checker is not None else None
    scorer = checker.cross_encoder if checker is not None else None
    said = stated_verdict(short or answer.answer_text)
    cited = [c.source_id for c in answer.citations if ctx.retrieved.get(c.source_id)]
    if judge is None or scorer is None or said is None or not cited:
        return answer, short, None
    if len(named_entities(question, ctx)) >= 2:
        return answer, short, None
    sid = cited[0]
    log_odds = judged_verdict(question, sid, ctx, judge.model, scorer)
    if log_odds is None:
        return answer, short, None
    why = f"the model reading {sid}: log-odds of Yes {log_odds:.2f}"
    if said == "no" and log_odds >= JUDGED_YES_LOG_ODDS:
        verdict = "yes"
    elif said == "yes" and log_odds <= JUDGED_NO_LOG_ODDS:
        verdict = "no"
    else:
        return answer, short, f"kept {said}: {why}"
    best = best_sentences(question, [sid], ctx, scorer)
    body = f"{verdict.capitalize()}. {best[0].cited() if best else ''}".strip()
    fixed = answer.model_copy(
        update={
            "answer_text": body,
            "short_answer": verdict.capitalize(),
            "citations": [c for c in answer.citations if c.source_id == sid],
            "ungrounded_sentences": [],
        }
    )
    return fixed, verdict.capitalize(), f"{said} overturned to {verdict}: {why}"


def _reread(
    question: str,
    answer: GeneratedAnswer,
    short: str | None,
    ctx: RunContext,
    checker: SupportChecker | None,
) -> tuple[GeneratedAnswer, str | None, str | None]:
    """A model's short answer that states a quantity, read again by the model from the
    sentences the answer ends with (:func:`~sleuth.agents.quantity.reread_quantity`):
    ``(answer, short answer, trace note)``, the answer opening with the re-read short answer
    when it changed. Unchanged, with no note, without a model (the coverage judge's), a short
    answer, or an answer that opens with it."""
    judge = checker.coverage_judge if checker is not None else None
    if judge is None or not short or answer.is_insufficient_context:
        return answer, short, None
    text = answer.answer_text
    if not opens_with(text, short):
        return answer, short, None
    rest = text[text.lower().find(short.lower()) + len(short) :].lstrip(" .")
    found = reread_quantity(question, short, rest, judge.model, ctx)
    if found is None or found.short == short:
        return answer, short, found.note if found else None
    fixed = answer.model_copy(
        update={"answer_text": f"{found.short}. {rest}".strip(), "short_answer": found.short}
    )
    return fixed, found.short, found.note


def opens_with(text: str, short: str) -> bool:
    """Whether ``text`` (citation markers aside) opens with the short answer ``short``; a
    verdict only as a word of its own ("No." or "No, …"), not as the first word of a quoted
    rule ("No person who is married shall be compelled …", which states no verdict)."""
    plain = MARKERS.sub("", text).lstrip()
    if not plain.lower().startswith(short.lower()):
        return False
    return short.lower() not in ("yes", "no") or plain[len(short) : len(short) + 1] in (
        "",
        *".,;:!",
    )


def stated_verdict(text: str) -> str | None:
    """``"yes"`` or ``"no"`` when ``text`` opens with one, else ``None``."""
    match = _YES_NO.match(MARKERS.sub("", text).strip())
    return match.group(1).lower() if match else None


def _checked_yes_no(question: str, short: str, ctx: RunContext) -> tuple[str, str | None]:
    """A model's yes/no to a comparison, overturned when the evidence plainly says the
    other (:func:`~sleuth.agents.comparison.check_yes_no`): ``(short answer, trace note)``."""
    check = check_yes_no(question, ctx)
    if check is None:
        return short, None
    if check.verdict == short.lower():
        return short, f"confirmed {check.verdict}: {check.reason}"
    return check.verdict.capitalize(), f"{short} overturned to {check.verdict}: {check.reason}"
