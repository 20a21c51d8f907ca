"""Multi-hop retrieval: the next hop's search, built from a section already found.

A multi-hop question describes an entity instead of naming it ("the waterfall in *the
country where the Tarn River rises*"). Hop 1 finds the section of the entity the
question does name (its *anchor*, "Tarn River"); that section's text names the bridge
("… Gwanda District, Zimbabwe"); hop 2 searches for the bridge together with what the
question still asks ("Zimbabwe waterfall"), and so on for a third hop from what hop 2 found.

This is the deterministic form of IRCoT's interleaving of retrieval with reasoning (Trivedi
et al., 2023, *Interleaving Retrieval with Chain-of-Thought Reasoning for
Knowledge-Intensive Multi-Step Questions*, ACL): each next query comes from what the last
hop retrieved, not from the question alone. Without a model to say which name is the
bridge, every name of the section is tried (:data:`MAX_NAMES`) and the hits are judged
instead: a next-hop section must hold the bridge name, and ranks by how much of what the
question still asks it holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from sleuth.retrieval.text import STOPWORDS, named_phrases, sentences, terms

MAX_NAMES = 8
"""Names of the from-section tried as bridges (in text order: a section names its main
facts first)."""
PER_NAME = 3
"""Sections fetched per bridge query."""
JUDGED_PER_NAME = 5
"""Sections fetched per bridge query when a judge scores the hits (the search itself is then
not reranked, so more of its candidates are shown to the judge)."""
KEEP = 3
"""Sections a hop keeps (the best-judged over all its bridge queries)."""

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(rf"^(?:\d[\d,./-]*\s+)?(?:{_MONTHS})\b|^\d")
_WORD = re.compile(r"[\w'’-]+")

SectionText = Callable[[str], tuple[str, str]]
"""``source_id`` → (title, text) of a section of the collection."""
SectionSearch = Callable[[str, int], list[tuple[str, float]]]
"""(query, k) → up to ``k`` (``source_id``, score) pairs, best first (a hybrid search)."""
HitJudge = Callable[[Sequence[tuple[str, str]]], list[float]]
"""(query, ``source_id``) pairs → the relevance of each section to its query, in [0, 1]
(a cross-encoder's probability), in order."""


@dataclass(frozen=True)
class HopHit:
    """A section the hop kept, with the bridge name and query that found it."""

    source_id: str
    score: float
    bridge: str
    query: str


@dataclass(frozen=True)
class Hop:
    """One next-hop search from ``from_id``.

    ``open_words`` are the question's words that neither the from-section nor the earlier
    hops cover (what the question still asks); empty means there is no next hop to take.
    """

    from_id: str
    open_words: list[str]
    queries: list[str] = field(default_factory=list)
    hits: list[HopHit] = field(default_factory=list)


def main_title(title: str) -> str:
    """A section title without its disambiguation: "Glass Tide (play)" → "Glass Tide"."""
    return title.split(" (", 1)[0].strip()


def anchor_sections(question: str, ranked: Iterable[tuple[str, str]]) -> list[str]:
    """The ranked sections whose (main) title the question names: where a chain starts.

    Args:
        question: the (sub-)question.
        ranked: (``source_id``, title) pairs, best first.

    Returns:
        The ``source_id``s whose main title's terms all occur in the question, in rank order
        ("Tarn River" for "… where the Tarn River rises?").
    """
    asked = set(terms(question))
    return [
        sid for sid, title in ranked if (named := set(terms(main_title(title)))) and named <= asked
    ]


def open_words(question: str, covered: set[str]) -> list[str]:
    """The question's content words (in order, once each) whose terms are not in ``covered``."""
    kept: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(question):
        own = set(terms(word))
        if own and not own <= covered and word.lower() not in STOPWORDS and word not in seen:
            seen.add(word)
            kept.append(word)
    return kept


def bridge_names(text: str, known: set[str], limit: int = MAX_NAMES) -> list[str]:
    """The names in ``text`` that could be a bridge: not dates or numbers, and not names the
    question or the section's own title already gives (their terms ⊆ ``known``)."""
    found: list[str] = []
    seen: set[frozenset[str]] = set()
    # per sentence: a name does not run on into the next sentence ("Brevania. It")
    for _, name in (n for sentence in sentences(text) for n in named_phrases(sentence)):
        own = frozenset(terms(name))
        if not own or own <= known or own in seen or _DATE.match(name):
            continue
        seen.add(own)
        found.append(name)
        if len(found) == limit:
            break
    return found


def next_hop(
    question: str,
    from_id: str,
    section: SectionText,
    search: SectionSearch,
    path: Sequence[str] = (),
    exclude: Iterable[str] = (),
    keep: int = KEEP,
    prepare: Callable[[list[str]], object] | None = None,
    judge: HitJudge | None = None,
) -> Hop:
    """Search the hop after ``from_id`` for ``question``.

    Each name of the from-section (:func:`bridge_names`) is searched with the question's
    open words (:func:`open_words`: what ``from_id`` and the ``path`` before it leave
    unanswered), and alone. A hit is kept only if its title or text holds all of the bridge name's
    terms (else the search matched the open words alone, which the question's own search
    already did); hits are ranked by (share of open words held + search score), the best
    per section. With ``judge``, its relevance of the hit to the query that found it
    replaces the search score, scored in one call over the hits that pass the name check
    only (a cross-encoder over every bridge query's whole candidate pool costs ~16× more).

    Args:
        question: the (sub-)question.
        from_id: the section the hop starts from (an anchor, or a section an earlier hop kept).
        section: reads a section's title and text.
        search: the collection's section search.
        path: the sections of earlier hops of this chain (their words count as covered).
        exclude: sections not to return (already retrieved).
        keep: at most this many sections are kept.
        prepare: called once with every query before the first is searched (the
            knowledge base's ``embed_queries`` embeds them in one batch).
        judge: scores the (query, ``source_id``) pairs that pass the name check (see above).

    Returns:
        The :class:`Hop`: its open words, the queries run, and the kept hits, best first;
        no queries when nothing is left open.
    """
    covered: set[str] = set()
    for sid in [*path, from_id]:
        title, text = section(sid)
        covered |= set(terms(f"{title} {text}"))
    wanted = open_words(question, covered)
    if not wanted:
        return Hop(from_id=from_id, open_words=[])
    title, text = section(from_id)
    known = set(terms(question)) | set(terms(main_title(title)))
    wanted_terms = set(terms(" ".join(wanted)))
    skip = {from_id, *path, *exclude}
    queries: list[str] = []
    # the name with what is still asked, and the name alone: generic open words ("name",
    # "found") can outweigh a rare name, and the name's own section is often the next hop
    pairs = [
        (name, query)
        for name in bridge_names(text, known)
        for query in (f"{name} {' '.join(wanted)}", name)
    ]
    if prepare is not None and pairs:
        prepare([query for _, query in pairs])
    found: list[tuple[str, str, str, float]] = []  # (bridge, query, source_id, share + score)
    for name, query in pairs:
        queries.append(query)
        name_terms = set(terms(name))
        for sid, score in search(query, PER_NAME if judge is None else JUDGED_PER_NAME):
            if sid in skip:
                continue
            hit_title, hit_text = section(sid)
            held = set(terms(f"{hit_title} {hit_text}"))
            if not name_terms <= held:
                continue
            share = len(wanted_terms & held) / len(wanted_terms)
            found.append((name, query, sid, share + (0.0 if judge else score)))
    if judge is not None and found:
        relevance = judge([(query, sid) for _, query, sid, _ in found])
        found = [(n, q, sid, j + r) for (n, q, sid, j), r in zip(found, relevance, strict=True)]
    best: dict[str, HopHit] = {}
    for name, query, sid, judged in found:
        if sid not in best or judged > best[sid].score:
            best[sid] = HopHit(source_id=sid, score=judged, bridge=name, query=query)
    hits = sorted(best.values(), key=lambda h: -h.score)[:keep]
    return Hop(from_id=from_id, open_words=wanted, queries=queries, hits=hits)
