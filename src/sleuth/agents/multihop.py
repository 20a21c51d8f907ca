"""Where a run's multi-hop chain goes next: the sections its ``next_hop`` searches start from.

Both modes use it: the heuristic ReAct policy and the guided runtime's retrieval. A chain
starts at the question's *anchors* (the retrieved sections whose title the question names,
:func:`~sleuth.retrieval.hops.anchor_sections`; without one, the best-ranked sections) and
goes on from the sections each hop found, :data:`FRONT` at a time, for at most
:data:`MAX_DEPTH` hops (MuSiQue questions have 2 to 4 hops; the anchor is the first).
"""

from __future__ import annotations

from collections.abc import Sequence

from sleuth.retrieval.hops import anchor_sections, open_words
from sleuth.retrieval.text import terms
from sleuth.tools.base import RunContext

MAX_DEPTH = 2
"""Hops a chain takes after its anchor."""
FRONT = 2
"""Sections a chain continues from at each depth (the best ones)."""
MAX_HOP_CALLS = FRONT * MAX_DEPTH
"""``next_hop`` searches one question's chain runs at most (callers keep to it: the ranking
that picks the first sections changes as hops retrieve more)."""


def hop_starts(question: str, ctx: RunContext, ranked: Sequence[str]) -> list[str]:
    """The sections to run ``next_hop`` from now for ``question``; empty when the chain is done.

    Args:
        question: the (sub-)question.
        ctx: the run's context (what was retrieved, hopped from, and each hop's path).
        ranked: the question's retrieved sections, best first.

    Returns:
        Up to :data:`FRONT` ``source_id``s of the shallowest depth that still has sections
        not hopped from whose chain leaves words of the question uncovered: the anchors
        first, then the sections hop 1 found, and so on up to :data:`MAX_DEPTH`. Empty
        when one of the best-ranked sections covers every word of the question.
    """
    asked = [sid for sid in ranked if sid in ctx.retrieved]
    if any(not _leaves_open(question, sid, ctx) for sid in asked[: FRONT + 1]):
        return []  # one of the best sections covers the whole question: no chain to follow
    titled = [(sid, ctx.retrieved[sid][0].title_path[-1]) for sid in asked]
    levels: list[list[str]] = [(anchor_sections(question, titled) or asked)[:FRONT]]
    for depth in range(1, MAX_DEPTH):
        level = [sid for sid, path in ctx.hop_paths.items() if len(path) == depth]
        levels.append(level[:FRONT])
    for level in levels:
        pending = [
            sid for sid in level if sid not in ctx.hopped and _leaves_open(question, sid, ctx)
        ]
        if pending:
            return pending
    return []


def run_hop_starts(question: str, ctx: RunContext) -> list[str]:
    """:func:`hop_starts` for a whole run (ReAct): over everything retrieved, in retrieval
    order, within :data:`MAX_HOP_CALLS` ``next_hop`` searches for the run."""
    starts = hop_starts(question, ctx, list(ctx.retrieved))
    return starts[: max(0, MAX_HOP_CALLS - len(ctx.hopped))]


def _leaves_open(question: str, source_id: str, ctx: RunContext) -> bool:
    """Whether the question asks something the section and its chain do not cover (else
    there is no next hop to search: "What is the punishment for murder?" and the section on
    it)."""
    covered: set[str] = set()
    for sid in [*ctx.hop_paths.get(source_id, []), source_id]:
        for chunk in ctx.retrieved.get(sid, []):
            covered |= set(terms(f"{chunk.heading} {chunk.text}"))
    return bool(open_words(question, covered))
