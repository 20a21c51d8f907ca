"""The deterministic reasoner: sleuth's offline agent, no LLM needed.

It drives the same ReAct graph as an LLM: it follows the planning agent's plan (its
searches, and re-reads of sections a similar earlier run cited), then reads the best
sections, follows the cross-references they cite, judges whether the evidence covers the
question (share of the question's content terms found in it), searches again for the missing
terms once if not, then answers extractively with citations — or declares insufficient
context. After a critique that asks for a revision it runs the critique's search first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sleuth.agents.answer import AnswerDraft, closest_found
from sleuth.agents.multihop import run_hop_starts
from sleuth.agents.profile import profile_of
from sleuth.agents.question import question_terms
from sleuth.agents.reasoner import Decision
from sleuth.agents.safety import quotable_sentences
from sleuth.agents.state import AgentState, RunStatus, ToolCallRequest
from sleuth.ingest.references import SOURCE_ID_TOKEN, extract_references
from sleuth.retrieval.hops import main_title
from sleuth.retrieval.rerank import sigmoid
from sleuth.retrieval.search import join_parts
from sleuth.retrieval.text import coverage, key_phrase, opens_sub_section, polarity, terms
from sleuth.tools.base import RunContext, ToolRegistry
from sleuth.types import Chunk

SUFFICIENT_COVERAGE = 0.75
"""Evidence covering at least this share of the question's terms ends the search."""
ANSWERABLE_COVERAGE = 0.5
"""Unless the best section covers more than this share of the question's terms (or the
question names it), the answer is 'insufficient context': half is not enough, or "the
capital of France" would be answered from a section on "capital offences"."""
READ_PER_STEP = 2
MAX_FOLLOWED = 4
LINKED_PAIR_AMONG = 5
"""Best-ranked sections searched for a linked pair that answers a bridge question."""
"""Sections whose cross-references (and title mentions) one run follows at most."""
MAX_SENTENCES = 3
NAMED_SECTION_BONUS = 3.0
"""Added to the sentences of a section the question names by number."""
TITLE_TERM_WEIGHT = 0.1
"""Added per title term when the question holds a section's whole title."""
NAMED_NUMBER_WEIGHT = 2.0
"""Added when the question names a section by number ("What does Section 128 say?"): above
any coverage and title score, since the user asked for that section."""
_NUMBERING = re.compile(r"^\s*(?:(?:section|article|rule|chapter|part)\s+)?\d+[A-Za-z]?\.\s*", re.I)
LONG_SENTENCE_PENALTY = 0.02
"""Score lost per word beyond 40: prefer a short sentence that states the point."""
MAX_LENGTH_PENALTY = 0.5
"""At most this is lost for length: a statute's main rule is often one long sentence."""
SUBORDINATE_PENALTY = 1.5
"""Score lost by an illustration, explanation, exception or proviso: a section's main rule
answers before its asides."""
_SUBORDINATE = re.compile(
    r"^\W*(?:(?P<illustrations>illustrations?\b)|explanation|exception|provided\b|proviso|note\b|"
    r"(?P<see_also>see\s+also\b)|\([a-z]\)\s)",
    re.I,
)
_REFERENCE = re.compile(r"^\W*(?:PEP|RFC|section|chapter|§)\s*\d+", re.I)
DEFINITION_BONUS = 1.0
"""Added, for a "What is X?" question, to a sentence that defines ("… shall be called
'dowry death'", "… means …"): the definition answers before the punishment."""
DENIED_PENALTY = 1.0
"""Per question term a sentence states only negated ("non-bailable" for "bailable",
:func:`~sleuth.retrieval.text.polarity`): it is about the other case."""
_DEFINITION_QUESTION = re.compile(
    r"^\s*(?:what\s+(?:is|are)\s+(?:an?\s+|the\s+)?|define\s+|meaning\s+of\s+)"
    r"(?!.*\b(?:of|for|under|in|to|by|when|if|with)\b)[^?]{1,60}\?*\s*$",
    re.I,
)
_DEFINES = re.compile(
    r"\b(?:means|mean|is called|are called|shall be called|is said to|are said to|denotes|"
    r"is defined|refers to|is known as)\b",
    re.I,
)


def _section_text(chunks: list[Chunk]) -> str:
    return f"{chunks[0].heading}\n{join_parts(chunks)}"


def _named_numbers(question: str) -> set[str]:
    """Sections the question names: numbers ("section 319 of ..." → "319") and citation ids
    typed as is ("BNS_S103")."""
    refs = (ref.split() for ref in extract_references(question))
    numbers = {words[1] for words in refs if len(words) > 1 and words[1][0].isdigit()}
    return numbers | {token.lower() for token in SOURCE_ID_TOKEN.findall(question)}


def _is_named(source_id: str, named: set[str]) -> bool:
    """Whether a section is named: by its id, or (``BNSS_S76``) by one of the numbers."""
    if source_id.lower() in named:
        return True
    return "_S" in source_id and source_id.rsplit("_S", 1)[-1] in named


def own_title(chunks: list[Chunk]) -> str:
    """A section's own title without its numbering or disambiguation: "Section 227. Issue of
    process." → "Issue of process."; "Salt Meadow (film)" → "Salt Meadow"."""
    title = chunks[0].title_path[-1] if chunks[0].title_path else ""
    return main_title(_NUMBERING.sub("", title))


def title_named(q_terms: set[str], chunks: list[Chunk]) -> float:
    """How plainly the question names the section by its title: 0 unless every term of the
    section's own title is in the question; then 1 plus 0.1 per title term (the longer
    title the question holds is the more specific: "Punishment for murder" over "Murder")."""
    own = set(terms(own_title(chunks)))
    return 1.0 + TITLE_TERM_WEIGHT * len(own) if own and own <= q_terms else 0.0


MODEL_RANK_CHUNKS = 2
"""Chunks per section the cross-encoder reads when ranking sections (a section's opening
holds its rule), besides the passages a search returned (:attr:`RunContext.hits`)."""


def judged_passages(source_id: str, ctx: RunContext) -> list[Chunk]:
    """The chunks of a retrieved section its relevance is judged by: its first
    :data:`MODEL_RANK_CHUNKS` (the rule) and any passage a ``rag_search`` of the run returned
    for it (an illustration or proviso that matched the question deeper in the section)."""
    chunks = ctx.retrieved[source_id]
    return [
        *chunks[:MODEL_RANK_CHUNKS],
        *(c for c in chunks[MODEL_RANK_CHUNKS:] if c.chunk_id in ctx.hits),
    ]


def section_relevance(
    question: str, source_ids: Sequence[str], ctx: RunContext
) -> dict[str, float]:
    """``source_id`` → the cross-encoder's relevance to ``question``, in (0, 1), of the best
    of the section's :func:`judged_passages`; ``ctx.scorer`` must be set. Scores are cached
    by the cross-encoder, so asking again for the same question and sections costs no model
    call."""
    pairs = [(sid, c) for sid in source_ids for c in judged_passages(sid, ctx)]
    logits = ctx.scorer.logits(question, [c.index_text() for _, c in pairs])
    best: dict[str, float] = {}
    for (sid, _), logit in zip(pairs, logits, strict=True):
        best[sid] = max(best.get(sid, 0.0), sigmoid(logit))
    return best


def _model_ranked(
    question: str, ctx: RunContext, titled: dict[str, float], numbers: set[str]
) -> list[str]:
    """Retrieved section ids ranked by the cross-encoder's relevance of their best chunk (of
    their :func:`judged_passages`) to ``question``, in (0, 1); a section the question
    names by number (:data:`NAMED_NUMBER_WEIGHT`) or by its whole title
    (:func:`title_named`) still comes first."""
    best = section_relevance(question, list(ctx.retrieved), ctx)
    scored = [
        (sid, relevance + titled[sid] + (NAMED_NUMBER_WEIGHT if _is_named(sid, numbers) else 0))
        for sid, relevance in best.items()
    ]
    order = {sid: i for i, sid in enumerate(ctx.retrieved)}
    scored.sort(key=lambda item: (-item[1], order[item[0]]))
    return [sid for sid, _ in scored]


def set_aside(
    questions: Sequence[str], source_ids: Sequence[str], ctx: RunContext, threshold: float
) -> set[str]:
    """The sections of ``source_ids`` that bear on none of ``questions`` (a question and its
    sub-questions) and are linked to none that does: what a generator need not read.

    A section bears on a question when the cross-encoder's relevance of one of its
    :func:`judged_passages` (as :func:`rank_sections` scores them, so the scores come from
    its cache) reaches ``threshold`` — the run's coverage threshold
    (``SLEUTH_COVERAGE_THRESHOLD``), a probability in (0, 1). The first section is never set
    aside (whether the evidence answers at all is the coverage check's call), nor one linked
    either way to a section that bears on the question, directly or through a chain of such
    links (:func:`linked_sections`: the bridge of a multi-hop question, and each hop after
    it, shares few words with the question). Empty without a cross-encoder or with
    ``threshold`` <= 0.
    """
    if ctx.scorer is None or threshold <= 0 or len(source_ids) < 2:
        return set()
    best = dict.fromkeys(source_ids[1:], 0.0)
    for question in questions:
        for sid, p in section_relevance(question, source_ids[1:], ctx).items():
            best[sid] = max(best[sid], p)
    kept = {source_ids[0], *(sid for sid, p in best.items() if p >= threshold)}
    # links count either way; what a kept section reaches through them is kept too (a
    # 3-hop question's hops)
    near: dict[str, set[str]] = {sid: set() for sid in source_ids}
    for sid in source_ids:
        for other in linked_sections(sid, ctx) & near.keys():
            near[sid].add(other)
            near[other].add(sid)
    frontier = list(kept)
    while frontier:
        for other in near[frontier.pop()] - kept:
            kept.add(other)
            frontier.append(other)
    return set(source_ids) - kept


def stated_coverage(question: str, q_terms: set[str], text: str) -> float:
    """Share of the question's terms ``text`` states, in [0, 1]: as
    :func:`~sleuth.retrieval.text.coverage`, plus the terms it affirms through an excepted
    negated compound ("other than … non-bailable" states "bailable",
    :func:`~sleuth.retrieval.text.polarity`)."""
    if not q_terms:
        return 0.0
    affirmed, _ = polarity(question, text)
    return len(q_terms & (set(terms(text)) | affirmed)) / len(q_terms)


def _title_numbers(q_terms: set[str], ctx: RunContext) -> tuple[dict[str, float], set[str]]:
    """:func:`title_named` of every retrieved section, and the numbers inside the titles the
    question holds ("execution of order passed under section 409": 409 is part of a title,
    not a section the question names)."""
    titled = {sid: title_named(q_terms, chunks) for sid, chunks in ctx.retrieved.items()}
    in_titles = {
        n
        for sid, weight in titled.items()
        if weight
        for n in re.findall(r"\d+[A-Za-z]?", own_title(ctx.retrieved[sid]))
    }
    return titled, in_titles


def named_sections(question: str, ctx: RunContext) -> list[str]:
    """The retrieved sections ``question`` names by number ("section 69 of …") or by id
    ("BNS_S103"), in retrieval order; a number inside a title the question holds names
    nothing (:func:`rank_sections`)."""
    _, in_titles = _title_numbers(set(terms(question)), ctx)
    numbers = _named_numbers(question) - in_titles
    return [sid for sid in ctx.retrieved if _is_named(sid, numbers)] if numbers else []


def rank_sections(question: str, ctx: RunContext) -> list[tuple[str, float]]:
    """Retrieved sections ranked for answering ``question``: (source_id, coverage).

    Score = coverage of the question's terms by the section (title + text,
    :func:`stated_coverage`), plus half the
    coverage by its title alone, plus :func:`title_named` (the question holds the section's
    whole title, as a user names "voyeurism" or "issue of process"), plus
    :data:`NAMED_NUMBER_WEIGHT` when the question names the section by number, minus 0.02
    per place in retrieval order (earlier is better). A number inside a title the question
    holds ("execution of order passed under section 409") names that title's section, not
    section 409.
    """
    q_terms = set(terms(question))
    titled, in_titles = _title_numbers(q_terms, ctx)
    numbers = _named_numbers(question) - in_titles
    scored = []
    for order, (sid, chunks) in enumerate(ctx.retrieved.items()):
        full = stated_coverage(question, q_terms, _section_text(chunks))
        title = coverage(q_terms, chunks[0].heading) if q_terms else 0.0
        named = NAMED_NUMBER_WEIGHT if _is_named(sid, numbers) else 0.0
        score = full + 0.5 * title + titled[sid] + named - 0.02 * order
        scored.append((sid, full, score))
    if ctx.scorer is not None and scored:
        full = {sid: value for sid, value, _ in scored}
        return [(sid, full[sid]) for sid in _model_ranked(question, ctx, titled, numbers)]
    scored.sort(key=lambda item: -item[2])
    return [(sid, full) for sid, full, _ in scored]


BRIDGED = 2
"""Top sections whose best linked section comes right after them in a generator's evidence."""


def linked_sections(source_id: str, ctx: RunContext) -> set[str]:
    """The retrieved sections that ``source_id`` cites or names by title, or that a
    ``next_hop`` search from it found (a name it gives led there)."""
    cited = {
        r.target_id
        for c in ctx.retrieved.get(source_id, [])
        for r in c.references
        if r.target_id and r.target_id != source_id and r.target_id in ctx.retrieved
    }
    return cited | {sid for sid, path in ctx.hop_paths.items() if path and path[-1] == source_id}


def with_bridges(
    top: Sequence[str], ranked: Sequence[str], ctx: RunContext, bridged: int = BRIDGED
) -> list[str]:
    """``top`` with each of its first ``bridged`` sections followed by the best-``ranked``
    retrieved section it links to: the bridge of a multi-hop question shares few words with
    the question, so it ranks low on its own, and a generator reads the first few only."""
    out: list[str] = []
    for index, sid in enumerate(top):
        if sid not in out:
            out.append(sid)
        if index < bridged:
            links = linked_sections(sid, ctx)
            bridge = next((b for b in ranked if b in links and b not in out), None)
            if bridge is not None:
                out.append(bridge)
    return out


def _key_point(sentence: str, source_id: str, limit: int = 200) -> str:
    """A key point: the sentence, shortened at a word to ``limit`` characters, then its
    citation marker (never cut)."""
    text = sentence.rstrip(" .")
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:") + " …"
    return f"{text} [{source_id}]"


def _linked_pair(
    question: str, ranked: list[tuple[str, float]], ctx: RunContext
) -> tuple[str, ...]:
    """Two of the best-ranked sections, one citing or naming the other, that together cover
    at least ``SUFFICIENT_COVERAGE`` of the question's terms (the best such pair), else ``()``.
    """
    q_terms = set(terms(question))
    if not q_terms:
        return ()
    top = [sid for sid, cov in ranked[:LINKED_PAIR_AMONG] if cov > 0]
    held = {sid: q_terms & set(terms(_section_text(ctx.retrieved[sid]))) for sid in top}
    links = {sid: linked_sections(sid, ctx) for sid in top}
    best: tuple[str, ...] = ()
    best_share = SUFFICIENT_COVERAGE
    for i, a in enumerate(top):
        for b in top[i + 1 :]:
            if b not in links[a] and a not in links[b]:
                continue
            share = len(held[a] | held[b]) / len(q_terms)
            if share >= best_share and share > max(len(held[a]), len(held[b])) / len(q_terms):
                best, best_share = (a, b), share
    return best


def _safe_sentences(text: str, ctx: RunContext) -> list[str]:
    """The sentences of ``text`` an answer may quote; the others go to ``ctx.withheld``."""
    kept, withheld = quotable_sentences(text)
    for sentence, reason in withheld.items():
        ctx.withheld.setdefault(sentence, reason)
    return kept


def _asides(quotable: list[str]) -> list[tuple[str, bool]]:
    """Each sentence of a section with whether it is an aside: an explanation, exception or
    proviso, any sentence of an illustrations block (from "Illustrations" to the next
    numbered sub-section, "(2) …"), or a "See also:" list (its first item, and the items
    after it that open with a reference: "PEP 484 …", "Section 12 …")."""
    out = []
    in_illustrations = False
    see_also = False  # a "See also:" list: its items are references, not the answer
    for sentence in quotable:
        opening = _SUBORDINATE.match(sentence)
        if opening and opening["illustrations"]:
            in_illustrations = True
        elif opens_sub_section(sentence):
            in_illustrations = False
        listed = see_also and (out[-1][0].rstrip().endswith(":") or _REFERENCE.match(sentence))
        see_also = bool(opening and opening["see_also"]) or bool(listed)
        aside = in_illustrations or bool(listed) or bool(opening)
        out.append((sentence, aside))
    return out


def _prose(picked: list[tuple[int, int, str, str]], ctx: RunContext) -> str:
    """The picked sentences (best first) as one paragraph per section, in the order the
    sections first appear, each sentence with its citation. A section's own title opens
    its paragraph only when its first sentence does not name what the section is about
    ("Adriana Trigiani: She is …", not "Section 103. Punishment for murder: Whoever …")."""
    paragraphs: dict[str, list[str]] = {}
    for _, _, sid, sentence in picked:
        paragraphs.setdefault(sid, []).append(f"{sentence.rstrip(' .:;,—-')}. [{sid}]")
    out = []
    for sid, quoted in paragraphs.items():
        title = own_title(ctx.retrieved[sid]).rstrip(". ")
        first = set(terms(quoted[0]))
        about = set(terms(title))
        opener = f"{title}: " if title and about and not about & first else ""
        out.append(opener + " ".join(quoted))
    return "\n".join(out)


def compose_answer(question: str, ctx: RunContext, quoted: set[str] | None = None) -> AnswerDraft:
    """An extractive, cited answer from the sections retrieved in this run.

    Picks up to three sentences from the best-ranked sections by how many question terms
    they share, each followed by its ``[source_id]``: a section's main rule before its
    illustrations, explanations and provisos; another section than the best one only for
    question terms the best one does not hold (another part of the question), or when it is
    linked to it (a hop of the bridge). The sentences read as prose, one paragraph per
    section (:func:`_prose`). Declares insufficient context when the
    best section covers at most ``ANSWERABLE_COVERAGE`` of the question's terms (a question
    with no searchable terms at all — "?", a script the index cannot read — is never
    answered) unless the question names that section, or two linked sections (one cites or
    names the other: the two hops of a bridge question) cover ``SUFFICIENT_COVERAGE`` of it
    together. Evidence sentences that instruct the agent or hold a secret
    (:func:`sleuth.agents.safety.unsafe_reason`) are never picked; they are recorded in
    ``ctx.withheld``. For a "What is X?" question a defining sentence ("… shall be called",
    "… means") leads. ``quoted`` (normalised sentences an earlier part of the answer
    quoted, :func:`compose_parts`) are not quoted again, and the sentences picked are added
    to it; when this question's best sentence is among them the answer text is empty
    (citing the best section): the earlier part's answer holds it.
    """
    ranked = rank_sections(question, ctx)
    named = bool(ranked) and _is_named(ranked[0][0], _named_numbers(question))
    if ranked and not named and ranked[0][1] <= ANSWERABLE_COVERAGE:
        # a short section whose title the question holds ("Functions") ranks first but
        # cannot answer alone: a close runner-up that covers the question leads instead
        better = next((r for r in ranked[1:3] if r[1] > ANSWERABLE_COVERAGE), None)
        if better is not None:
            ranked = [better, *(r for r in ranked if r is not better)]
    pair = _linked_pair(question, ranked, ctx)
    if not ranked or (ranked[0][1] <= ANSWERABLE_COVERAGE and not named and not pair):
        return AnswerDraft(
            answer_text="Insufficient context: no section retrieved answers this question"
            + closest_found([sid for sid, _ in ranked[:3]]),
            key_points=[],
            citations=[],
            is_insufficient_context=True,
        ).as_extractive()
    q_terms = question_terms(question)  # "in simple terms" asks how, not about "terms"
    numbers = _named_numbers(question)
    defining = bool(_DEFINITION_QUESTION.match(question))
    lead = ranked[0][0]
    # what the best section already answers: another section is quoted only for a part of
    # the question it leaves out (or as a hop of the bridge it forms with the best section)
    if any(_is_named(sid, numbers) for sid, _ in ranked):
        # the words of the reference that names a section ("section 69 of the … Sanhita,
        # 2023") name it; they are not what its sentences must say, nor a part of the
        # question another section could answer
        references = profile_of(question, ctx).references
        q_terms = q_terms - {t for ref in references for t in terms(ref)}
    lead_terms = q_terms & set(terms(_section_text(ctx.retrieved[lead])))
    joined = set(pair) | linked_sections(lead, ctx)
    candidates: list[tuple[float, int, int, str, str]] = []
    for s_rank, (sid, cov) in enumerate(ranked[:LINKED_PAIR_AMONG]):
        if cov < ANSWERABLE_COVERAGE and s_rank > 0 and sid not in pair:
            continue
        if s_rank >= 3 and sid not in pair:
            continue
        chunks = ctx.retrieved[sid]
        title_terms = set(terms(chunks[0].heading))
        # a section the question names is what it asks about: its sentences come first,
        # whether or not they repeat the question's words
        named = NAMED_SECTION_BONUS if _is_named(sid, numbers) else 0.0
        asides = _asides(_safe_sentences(join_parts(chunks), ctx))
        for position, (sentence, aside) in enumerate(asides):
            affirmed, denied = polarity(question, sentence)
            shared = q_terms & (set(terms(sentence)) | affirmed)
            if not shared and not named:
                continue
            if sid != lead and sid not in joined and not shared - lead_terms:
                continue
            length_penalty = min(
                MAX_LENGTH_PENALTY, LONG_SENTENCE_PENALTY * max(0, len(sentence.split()) - 40)
            )
            score = (
                len(shared)
                + 0.5 * len(q_terms & title_terms)
                + named
                - 0.3 * s_rank
                - length_penalty
                - (SUBORDINATE_PENALTY if aside else 0.0)
                + (DEFINITION_BONUS if defining and _DEFINES.search(sentence) else 0.0)
                - DENIED_PENALTY * len(denied)
            )
            candidates.append((score, s_rank, position, sid, sentence))
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    picked: list[tuple[int, int, str, str]] = []
    per_section: dict[str, int] = {}
    seen: set[str] = set(quoted or ())
    repeats = False
    for _, s_rank, position, sid, sentence in candidates:
        key = " ".join(sentence.lower().split())
        if quoted is not None and key in quoted:
            if not picked:  # this part's best sentence was quoted above: it answers it
                repeats = True
                break
            continue
        if per_section.get(sid, 0) >= 2 or key in seen:
            continue
        seen.add(key)
        per_section[sid] = per_section.get(sid, 0) + 1
        picked.append((s_rank, position, sid, sentence))
        if len(picked) == MAX_SENTENCES:
            break
    named_ids = {sid for _, _, sid, _ in picked if _is_named(sid, numbers)}
    if named_ids:
        # a section the question names is read as written: its sentences in the section's
        # own order ("(1) …" before "(5) …"), in the places its best ones were picked for
        in_order = iter(sorted((p for p in picked if p[2] in named_ids), key=lambda p: p[:2]))
        picked = [next(in_order) if p[2] in named_ids else p for p in picked]
    if quoted is not None:
        quoted.update(" ".join(sentence.lower().split()) for _, _, _, sentence in picked)
    if not picked and repeats:  # an earlier part's sentences answer this one too
        return AnswerDraft(answer_text="", citations=[lead]).as_extractive()
    if not picked:
        safe = _safe_sentences(join_parts(ctx.retrieved[lead]), ctx)
        if not safe:
            return AnswerDraft(
                answer_text=(
                    "Insufficient context: no section retrieved answers this question; the "
                    f"closest found ({lead}) holds no sentence that can be quoted."
                ),
                key_points=[],
                citations=[],
                is_insufficient_context=True,
            ).as_extractive()
        picked = [(0, 0, lead, safe[0])]
    return AnswerDraft(
        answer_text=_prose(picked, ctx),
        key_points=[_key_point(sentence, sid) for _, _, sid, sentence in picked],
        citations=list(dict.fromkeys(sid for _, _, sid, _ in picked)),
        is_insufficient_context=False,
    ).as_extractive()


def _norm(query: str) -> str:
    return " ".join(query.lower().split())


def _attempted(state: AgentState) -> set[tuple[str, str]]:
    """(tool, query or source_id) of every tool call made so far in the run."""
    done = set()
    for step in state.steps:
        for call in step.tool_calls or []:
            if step.step_type != "act":
                continue
            args = call.get("arguments") or {}
            key = args.get("query") if call.get("name") == "rag_search" else args.get("source_id")
            done.add((str(call.get("name")), _norm(str(key or ""))))
    return done


def _linked(question: str, ctx: RunContext, among: int) -> list[str]:
    """Of the ``among`` best-ranked sections, those citing or naming others, not yet followed."""
    return [
        sid
        for sid, cov in rank_sections(question, ctx)[:among]
        if sid not in ctx.followed
        and cov > 0
        and any(r.target_id for c in ctx.retrieved[sid] for r in c.references)
    ]


def _pending(
    state: AgentState, ctx: RunContext, tools: ToolRegistry
) -> tuple[list[tuple[str, dict]], str]:
    """Calls the critique or the plan asks for that have not run yet, and why.

    A revision follows the links of the best sections not followed yet (what is missing is
    often in a section they name) and runs the critique's search.
    """
    done = _attempted(state)
    critique = state.critique
    if (
        critique is not None
        and critique.needs_revision
        and ("rag_search", _norm(critique.revision_query)) not in done
    ):
        calls: list[tuple[str, dict]] = []
        if "follow_references" in tools:
            linked = _linked(state.original_query, ctx, 2 * READ_PER_STEP)[:READ_PER_STEP]
            calls = [("follow_references", {"source_id": sid}) for sid in linked]
        calls.append(("rag_search", {"query": critique.revision_query, "top_k": 5}))
        return calls, "Revising after the critique"
    if state.plan is None:
        return [], ""
    calls = []
    if "read_section" in tools:
        calls += [
            ("read_section", {"source_id": sid})
            for sid in state.plan.reads()
            if ("read_section", _norm(sid)) not in done
        ]
    calls += [
        ("rag_search", {"query": q, "top_k": 5})
        for q in dict.fromkeys(state.plan.searches())
        if ("rag_search", _norm(q)) not in done
    ]
    return calls, "Following the plan"


def compose_parts(question: str, parts: list[str], ctx: RunContext) -> AnswerDraft:
    """:func:`compose_answer` per part of a multi-part question, joined (each part's answer
    under the part; a part the evidence does not answer says so; a sentence that answers
    two parts is quoted once, under the first). With fewer than two parts,
    or when no part is answered, the whole question is answered as one."""
    if len(parts) < 2:
        return compose_answer(question, ctx)
    quoted: set[str] = set()  # a sentence answering two parts is quoted under the first
    drafts = [(part, compose_answer(part, ctx, quoted)) for part in parts]
    if all(d.is_insufficient_context for _, d in drafts):
        return compose_answer(question, ctx)
    lines, points, cited = [], [], []
    for part, d in drafts:
        if d.is_insufficient_context:
            lines.append(f"{part} The knowledge base does not answer this part.")
            continue
        if not d.answer_text:
            lines.append(f"{part} The sentences quoted above answer this part too.")
            continue
        lines.append(f"{part}\n{d.answer_text}")
        points.extend(d.key_points)
        cited.extend(d.citations)
    return AnswerDraft(
        answer_text="\n\n".join(lines),
        key_points=points[:5],
        citations=list(dict.fromkeys(cited)),
        is_insufficient_context=False,
    ).as_extractive()


class HeuristicReasoner:
    """Deterministic search → read → follow → judge → answer policy (no model)."""

    name = "heuristic"

    def decide(self, state: AgentState, ctx: RunContext, tools: ToolRegistry) -> Decision:
        question = state.original_query
        step = state.iteration_count
        if not terms(question) and not _named_numbers(question):
            return Decision(
                thought="The question has no words I can search for; I cannot answer it "
                "from the knowledge base.",
                draft=compose_answer(question, ctx),
            )
        pending, why = _pending(state, ctx, tools)
        if pending:
            names = ", ".join(
                f"search '{a['query']}'"
                if n == "rag_search"
                else f"{'read' if n == 'read_section' else 'follow the links of'} {a['source_id']}"
                for n, a in pending
            )
            return self._call(f"{why}: {names}.", step, pending)
        if not ctx.searches:
            # a question naming a section is searched as written, so "section 26 of the
            # <Act>" reaches the explicit-reference lookup intact
            query = question if extract_references(question) else key_phrase(question)
            return self._call(
                f"I will search the knowledge base for the key phrase '{query}'.",
                step,
                [("rag_search", {"query": query, "top_k": 5})],
            )
        ranked = rank_sections(question, ctx)
        unread = [sid for sid, cov in ranked[:READ_PER_STEP] if sid not in ctx.read and cov > 0]
        if unread:
            names = ", ".join(f"{sid} ({ctx.retrieved[sid][0].heading})" for sid in unread)
            return self._call(
                f"The most relevant sections are {names}; I will read them in full.",
                step,
                [("read_section", {"source_id": sid}) for sid in unread],
            )
        starts = run_hop_starts(question, ctx)
        if starts and "next_hop" in tools:
            names = ", ".join(f"{sid} ({ctx.retrieved[sid][0].title_path[-1]})" for sid in starts)
            return self._call(
                f"The question may describe an entity it does not name; I will search the "
                f"names {names} gives with what the question still asks (the next hop).",
                step,
                [("next_hop", {"question": question, "source_id": sid}) for sid in starts],
            )
        to_follow = _linked(question, ctx, READ_PER_STEP)
        if to_follow and len(ctx.followed) < MAX_FOLLOWED and "follow_references" in tools:
            names = ", ".join(to_follow)
            return self._call(
                f"{names} {'cite' if len(to_follow) > 1 else 'cites'} other sections; "
                "I will follow the cross-references.",
                step,
                [("follow_references", {"source_id": sid}) for sid in to_follow],
            )
        q_terms = set(terms(question))
        evidence = " ".join(_section_text(ctx.retrieved[sid]) for sid, _ in ranked[:3])
        covered = coverage(q_terms, evidence)
        planned = len(state.plan.searches()) if state.plan is not None else 1
        if covered < SUFFICIENT_COVERAGE and len(ctx.searches) < planned + 1:
            missing = [w for w in q_terms if w not in set(terms(evidence))]
            query = " ".join(missing) + " " + key_phrase(question)
            return self._call(
                f"The evidence covers {covered:.0%} of the question's key terms; "
                f"missing: {', '.join(sorted(missing))}. I will search again.",
                step,
                [("rag_search", {"query": query.strip(), "top_k": 5})],
            )
        draft = compose_parts(question, list(profile_of(question, ctx).parts), ctx)
        verdict = "enough to answer" if not draft.is_insufficient_context else "not enough"
        return Decision(
            thought=f"The evidence covers {covered:.0%} of the question's key terms: "
            f"{verdict}. I will write the final answer.",
            draft=draft,
        )

    def conclude(self, state: AgentState, ctx: RunContext, reason: RunStatus) -> AnswerDraft:
        question = state.original_query
        return compose_parts(question, list(profile_of(question, ctx).parts), ctx)

    @staticmethod
    def _call(thought: str, step: int, calls: list[tuple[str, dict]]) -> Decision:
        return Decision(
            thought=thought,
            tool_calls=[
                ToolCallRequest(id=f"h{step}_{i}", name=name, arguments=args)
                for i, (name, args) in enumerate(calls)
            ],
        )
