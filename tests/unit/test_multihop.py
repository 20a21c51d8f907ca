"""Multi-hop retrieval: the next hop's query is built from what the last hop found.

Invented entities throughout (no dev-set question): a river whose section names its
country, a waterfall whose section names that country but not the river, and distractors
that match the question's words without the bridge.
"""

from __future__ import annotations

import pytest

from sleuth.agents.multihop import MAX_HOP_CALLS, hop_starts
from sleuth.app import Sleuth
from sleuth.errors import ToolError
from sleuth.retrieval.hops import anchor_sections, bridge_names, next_hop, open_words
from sleuth.retrieval.text import terms
from sleuth.tools.base import RunContext
from sleuth.tools.rag import build_rag_tools
from sleuth.types import Document, Section
from tests.helpers import make_app
from tests.unit.test_guided import run_guided

CHAIN = {
    "Quorra_River": (
        "Quorra River",
        "The Quorra River is a tributary of the Venn River in Tallis District, Brevania. "
        "It rises in the northern hills on 7 December 1988 maps.",
    ),
    "Moonwake_Falls": (
        "Moonwake Falls",
        "Moonwake Falls is a waterfall on the Sendu River at the border between Ostland and "
        "Brevania.",
    ),
    "Grey_Falls": ("Grey Falls", "Grey Falls is a small waterfall in the hills of Ostland."),
    "Venn_River": ("Venn River", "The Venn River flows east into the Pale Sea."),
}
FILLERS = {
    f"Filler_{n}": (
        f"Filler {n}",
        f"Waterfall story {n}: the name of a waterfall found in a river country far away.",
    )
    for n in range(6)
}
WATERFALL = "Which waterfall lies in the country that holds the Quorra River?"


def _section(sid: str) -> tuple[str, str]:
    return CHAIN[sid]


def _search(query: str, k: int) -> list[tuple[str, float]]:
    """A lexical stand-in for hybrid search: sections by shared terms, then by id."""
    asked = set(terms(query))
    scored = [(len(asked & set(terms(f"{t} {x}"))), sid) for sid, (t, x) in sorted(CHAIN.items())]
    ranked = sorted((s for s in scored if s[0]), key=lambda s: (-s[0], s[1]))
    return [(sid, n / 100) for n, sid in ranked[:k]]


def test_the_next_query_pairs_a_name_the_found_section_gives_with_what_is_still_asked() -> None:
    hop = next_hop(WATERFALL, "Quorra_River", _section, _search)
    assert "waterfall" in hop.open_words and "Quorra" not in hop.open_words
    assert hop.hits and hop.hits[0].source_id == "Moonwake_Falls"
    assert hop.hits[0].bridge == "Brevania"
    assert hop.hits[0].query.startswith("Brevania ")
    # a waterfall that does not hold a name the river's section gives is no next hop
    assert "Grey_Falls" not in {h.source_id for h in hop.hits}


def test_a_judge_scores_only_the_hits_that_hold_the_bridge_and_decides_their_order() -> None:
    judged: list[tuple[str, str]] = []

    def judge(pairs: list[tuple[str, str]]) -> list[float]:
        judged.extend(pairs)
        return [0.9 if sid == "Venn_River" else 0.0 for _, sid in pairs]

    plain = next_hop(WATERFALL, "Quorra_River", _section, _search)
    hop = next_hop(WATERFALL, "Quorra_River", _section, _search, judge=judge)
    # every pair the judge saw names a section holding its query's bridge name
    assert judged and all(
        set(terms(q.split(" ")[0])) <= set(terms(" ".join(_section(sid)))) for q, sid in judged
    )
    assert "Grey_Falls" not in {sid for _, sid in judged}
    # the judge's relevance replaces the search score: it reorders the kept sections
    assert plain.hits[0].source_id == "Moonwake_Falls"
    assert hop.hits[0].source_id == "Venn_River"


def test_sections_already_retrieved_are_not_returned_again() -> None:
    hop = next_hop(WATERFALL, "Quorra_River", _section, _search, exclude=["Moonwake_Falls"])
    assert "Moonwake_Falls" not in {h.source_id for h in hop.hits}


def test_no_hop_is_searched_when_the_section_covers_the_whole_question() -> None:
    hop = next_hop("Where does the Venn River flow?", "Venn_River", _section, _search)
    assert hop.open_words == [] and hop.queries == [] and hop.hits == []


def test_bridge_names_skip_dates_and_names_the_question_already_gives() -> None:
    text = CHAIN["Quorra_River"][1]
    names = bridge_names(text, set(terms(WATERFALL)))
    assert "Brevania" in names and "Venn River" in names
    assert not any("December" in n or "Quorra" in n for n in names)


def test_anchors_are_the_sections_whose_main_title_the_question_names() -> None:
    ranked = [("Grey_Falls", "Grey Falls"), ("Brand_play", "Brand (play)"), ("X", "Quorra")]
    assert anchor_sections("Who wrote Brand?", ranked) == ["Brand_play"]
    assert anchor_sections("Where is the Quorra River?", ranked) == ["X"]


def test_open_words_keep_question_order_once_each() -> None:
    assert open_words("Which river and which river country?", set(terms("river"))) == ["country"]


def _chain_app(tmp_path) -> Sleuth:  # type: ignore[no-untyped-def]
    app = make_app(tmp_path, {"X_S1": ("Unrelated.", "An unrelated section.")}, collection="x")
    document = Document(
        doc_id="atlas",
        path="atlas.json",
        title="atlas",
        content_hash="atlas-1",
        sections=[
            Section(title_path=["atlas", title], text=text, source_id=sid)
            for sid, (title, text) in {**CHAIN, **FILLERS}.items()
        ],
    )
    app.pipeline.ingest_documents([document], "test")
    return app


def test_the_tool_tracks_what_it_found_and_the_chain_that_led_there(tmp_path) -> None:
    app = _chain_app(tmp_path)
    tools = {t.name: t for t in build_rag_tools(app.kb)}
    ctx = RunContext(collection="test")
    tools["rag_search"].invoke({"query": "Quorra River", "top_k": 1}, ctx)
    result = tools["next_hop"].invoke({"question": WATERFALL, "source_id": "Quorra_River"}, ctx)
    assert result.ok and "Moonwake_Falls" in ctx.retrieved
    assert ctx.hop_paths["Moonwake_Falls"] == ["Quorra_River"]
    assert ctx.hopped == {"Quorra_River"}
    first = result.payload["results"][0]
    assert (first["source_id"], first["bridge"]) == ("Moonwake_Falls", "Brevania")
    with pytest.raises(ToolError, match="no section 'Nowhere'"):
        tools["next_hop"].invoke({"question": WATERFALL, "source_id": "Nowhere"}, ctx)


def test_the_tool_embeds_all_its_queries_in_one_batch(tmp_path) -> None:
    """next_hop runs two searches per bridge name; their queries are embedded in one call,
    and no search embeds its query again."""
    app = _chain_app(tmp_path)
    embedder = app.kb.embedder
    tools = {t.name: t for t in build_rag_tools(app.kb)}
    ctx = RunContext(collection="test")
    tools["rag_search"].invoke({"query": "Quorra River", "top_k": 1}, ctx)
    embedder.calls.clear()  # type: ignore[attr-defined]
    result = tools["next_hop"].invoke({"question": WATERFALL, "source_id": "Quorra_River"}, ctx)
    queries = result.payload["queries"]
    assert len(queries) >= 2
    assert embedder.calls == [queries]  # type: ignore[attr-defined]


def test_hop_starts_go_from_the_anchor_to_what_each_hop_found(tmp_path) -> None:
    app = _chain_app(tmp_path)
    tools = {t.name: t for t in build_rag_tools(app.kb)}
    ctx = RunContext(collection="test")
    tools["rag_search"].invoke({"query": WATERFALL, "top_k": 5}, ctx)
    ranked = list(ctx.retrieved)
    assert hop_starts(WATERFALL, ctx, ranked) == ["Quorra_River"]
    tools["next_hop"].invoke({"question": WATERFALL, "source_id": "Quorra_River"}, ctx)
    assert hop_starts(WATERFALL, ctx, ranked)[0] == "Moonwake_Falls"
    assert MAX_HOP_CALLS >= 2


def test_both_modes_reach_the_section_only_the_bridge_name_leads_to(tmp_path) -> None:
    app = _chain_app(tmp_path)
    result, _, ctx = run_guided(app, WATERFALL)
    hops = [c for c in result.tool_calls if c["tool"] == "next_hop"]
    assert hops and hops[0]["arguments"]["source_id"] == "Quorra_River"
    assert "Moonwake_Falls" in ctx.retrieved
    react = app.agent.execute_agentic_search(WATERFALL, "test", use_memory=False)
    assert "Moonwake_Falls" in react.trace["retrieved_source_ids"]
    assert any(c["tool"] == "next_hop" for c in react.tool_calls)


def test_with_the_reranker_on_the_cross_encoder_scores_only_the_hop_hits(tmp_path) -> None:
    """The bridge queries are searched unreranked; the cross-encoder then scores the hits
    that hold a bridge name, each against its query (not every query's candidate pool)."""
    app = _chain_app(tmp_path)
    app.settings.rerank = "on"
    scored: list[tuple[str, str]] = []
    encoder = app.kb.cross_encoder
    assert encoder is not None
    real = encoder.score_pairs

    def spy(pairs):  # type: ignore[no-untyped-def]
        scored.extend(pairs)
        return real(pairs)

    encoder.score_pairs = spy  # type: ignore[method-assign]
    try:
        tools = {t.name: t for t in build_rag_tools(app.kb)}
        ctx = RunContext(collection="test")
        tools["rag_search"].invoke({"query": "Quorra River", "top_k": 1}, ctx)
        scored.clear()
        result = tools["next_hop"].invoke({"question": WATERFALL, "source_id": "Quorra_River"}, ctx)
    finally:
        del encoder.score_pairs
    queries = result.payload["queries"]
    assert scored, "the hop hits were not scored"
    assert {q for q, _ in scored} <= set(queries)
    # fewer pairs than one reranked pool per query, and every one holds its bridge name
    assert len(scored) < len(queries) * app.settings.rerank_candidates
    names = bridge_names(CHAIN["Quorra_River"][1], set(terms(f"{WATERFALL} Quorra River")))
    for query, passage in scored:
        name = max((n for n in names if query.startswith(n)), key=len)
        assert set(terms(name)) <= set(terms(passage)), (query, passage)
    assert result.payload["results"][0]["source_id"] in {"Moonwake_Falls", "Venn_River"}
