"""Title mentions: names of other sections in a text become links the agent can follow."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.agents.state import RunStatus
from sleuth.app import Sleuth
from sleuth.llm.testing import ScriptedChatModel, tool_call
from sleuth.retrieval.mentions import TitleMentions, name_words
from sleuth.types import Chunk, Document, Section
from tests.helpers import make_app
from tests.unit.test_guided import run_guided


def _stub(sid: str, title: str) -> Chunk:
    return Chunk(
        chunk_id=f"{sid}#0", source_id=sid, doc_id="corpus", title_path=["corpus", title],
        text="", position=0,
    )  # fmt: skip


TITLES = {
    "Big_Stone_Gap_film": "Big Stone Gap (film)",
    "Adriana_Trigiani": "Adriana Trigiani",
    "Young_NSW": "Young, New South Wales",
    "Sulli": "Sulli",
    "Murder": "Section 101. Murder.",
    "Punishment": "Section 103. Punishment for murder.",
    "Dup_1": "Eagles",
    "Dup_2": "Eagles",
}


def test_name_words_drop_qualifiers_and_numbering() -> None:
    assert name_words("Big Stone Gap (film)") == ("Big", "Stone", "Gap")
    assert name_words("Section 103. Punishment for murder.") == ("Punishment", "for", "murder")


def test_names_are_found_case_sensitively_longest_first() -> None:
    mentions = TitleMentions(_stub(s, t) for s, t in TITLES.items())
    text = (
        "Big Stone Gap is a 2014 film directed by Adriana Trigiani. She was born in Young, "
        "New South Wales, and once met Sulli Choi. Murder mysteries are not linked; a big "
        "stone gap is not a title; the Eagles are ambiguous; punishment for murder is a phrase."
    )
    found = mentions.in_text(text, exclude="Big_Stone_Gap_film")
    assert found == {
        "Adriana_Trigiani": "Adriana Trigiani",
        "Young_NSW": "Young, New South Wales",
        "Sulli": "Sulli",
    }
    # a one-word name opening a sentence is an ordinary capitalised word
    assert mentions.in_text("Sulli was there.") == {}
    assert mentions.in_text("He met Sulli.") == {"Sulli": "Sulli"}


SECTIONS = {
    "Big_Stone_Gap_film": (
        "Big Stone Gap (film)",
        "Big Stone Gap is a 2014 American romantic comedy film written and directed by "
        "Adriana Trigiani and set in Big Stone Gap, Virginia.",
    ),
    "Adriana_Trigiani": (
        "Adriana Trigiani",
        "Adriana Trigiani is an Italian American best-selling author of sixteen books, "
        "television writer, film director, and entrepreneur based in Greenwich Village, "
        "New York City.",
    ),
    "Arthurs_Magazine": (
        "Arthur's Magazine",
        "Arthur's Magazine was an American literary periodical published in Philadelphia.",
    ),
}


def _corpus_app(tmp_path) -> Sleuth:  # type: ignore[no-untyped-def]
    """An encyclopedic collection: one section per title, ids like the HotpotQA loader's."""
    app = make_app(tmp_path, {"X_S1": ("Unrelated.", "An unrelated section.")}, collection="x")
    document = Document(
        doc_id="corpus",
        path="corpus.json",
        title="corpus",
        content_hash="corpus-1",
        sections=[
            Section(title_path=["corpus", title], text=text, source_id=sid)
            for sid, (title, text) in SECTIONS.items()
        ],
    )
    app.pipeline.ingest_documents([document], "test")
    return app


BRIDGE = "The director of the romantic comedy Big Stone Gap is based in what New York city?"
NAMED = "In what New York city is Adriana Trigiani, who directed Big Stone Gap, based?"
"""The bridge question with the director named: one lookup, not a chain of sub-questions
(:mod:`sleuth.agents.chained`), so the whole-question generator and synthesis answer it."""


def test_search_results_carry_mentions_and_follow_references_reaches_them(tmp_path) -> None:
    app = _corpus_app(tmp_path)
    from sleuth.tools.base import RunContext
    from sleuth.tools.rag import build_rag_tools

    tools = {t.name: t for t in build_rag_tools(app.kb)}
    ctx = RunContext(collection="test")
    result = tools["rag_search"].invoke({"query": "Big Stone Gap film", "top_k": 1}, ctx)
    assert result.payload["results"][0]["references"] == ["Adriana_Trigiani"]
    followed = tools["follow_references"].invoke({"source_id": "Big_Stone_Gap_film"}, ctx)
    assert [r["source_id"] for r in followed.payload["references"]] == ["Adriana_Trigiani"]
    assert "Adriana_Trigiani" in ctx.retrieved


def test_both_modes_reach_the_bridge_section(tmp_path) -> None:
    app = _corpus_app(tmp_path)
    result, _, ctx = run_guided(app, BRIDGE)
    assert result.status == RunStatus.COMPLETED
    assert {"Big_Stone_Gap_film", "Adriana_Trigiani"} <= set(ctx.retrieved)
    follows = [c for c in result.tool_calls if c["tool"] == "follow_references"]
    assert follows and follows[0]["arguments"] == {"source_id": "Big_Stone_Gap_film"}
    assert [c.source_id for c in result.answer.citations] == [
        "Big_Stone_Gap_film",
        "Adriana_Trigiani",
    ]
    react = app.agent.execute_agentic_search(BRIDGE, "test", use_memory=False)
    assert {"Big_Stone_Gap_film", "Adriana_Trigiani"} <= set(react.trace["retrieved_source_ids"])
    assert {c.source_id for c in react.answer.citations} == {
        "Big_Stone_Gap_film",
        "Adriana_Trigiani",
    }


DISTRACTORS = {
    "Wise_County_Virginia": (
        "Wise County, Virginia",
        "Wise County holds the town of Big Stone Gap, whose romantic mountains gave a "
        "comedy its setting.",
    ),
    "Romantic_comedy": (
        "Romantic comedy",
        "A romantic comedy is a film genre; many a romantic comedy is set in a New York city.",
    ),
    "Comedy_film": (
        "Comedy film",
        "A comedy film is a genre of film in which the main emphasis is on humour.",
    ),
}


def test_the_generator_reads_the_bridge_right_after_the_section_that_names_it(
    tmp_path, monkeypatch
) -> None:
    # the bridge (the director's own section) shares few words with the question, so it
    # ranks below every distractor; the generator reads the top sections only, so it must
    # come right after the section that names it
    monkeypatch.setitem(globals(), "SECTIONS", {**SECTIONS, **DISTRACTORS})
    app = _corpus_app(tmp_path)
    model = ScriptedChatModel(
        [
            AIMessage(
                "Answer: Greenwich Village\nExplanation: She is based in Greenwich Village [2]."
            )
        ]
    )
    result, _, _ = run_guided(app, BRIDGE, model, llm_agents="auto")
    prompt = str(model.calls[-1][-1].content)
    blocks = [line for line in prompt.splitlines() if line.startswith("[")]
    assert "Big_Stone_Gap_film" in blocks[0]
    assert "Adriana_Trigiani" in blocks[1]
    assert result.answer.answer_text  # the run ends with an answer


def test_a_short_answer_backed_by_numbers_only_is_explained_from_the_cited_evidence(
    tmp_path,
) -> None:
    app = _corpus_app(tmp_path)
    # the model names the evidence by number only, and the wrong one: the sentence that
    # holds the answer is quoted from the section that does, with its own marker
    model = ScriptedChatModel([AIMessage("Facts: [1]\nAnswer: Greenwich Village")])
    result, _, _ = run_guided(app, NAMED, model, llm_agents="auto")
    answer = result.answer
    assert answer.short_answer == "Greenwich Village"
    assert "based in Greenwich Village, New York City [Adriana_Trigiani]" in answer.answer_text
    assert "Adriana_Trigiani" in [c.source_id for c in answer.citations]


def test_an_answer_no_section_holds_is_not_dressed_in_a_quote(tmp_path) -> None:
    # "Paris" is in no section: quoting a sentence that merely shares the question's words
    # ("New York city") would make an answer from memory look cited
    app = _corpus_app(tmp_path)
    # every call (the chain's first hop, then the whole question) answers from memory
    model = ScriptedChatModel([AIMessage("Facts: [1]\nAnswer: Paris")], repeat_last=True)
    result, _, _ = run_guided(
        app, "In which city is the director of Big Stone Gap based?", model, llm_agents="auto"
    )
    assert result.answer.is_insufficient_context
    assert result.answer.citations == []
    assert result.answer.answer_text == (
        "Insufficient context: no retrieved section supports the answer the model gave ('Paris')."
    )


def test_a_bare_verdict_to_a_question_that_asks_no_yes_or_no_is_not_the_answer(
    tmp_path,
) -> None:
    # "No" answers no "In what city …?" question: the run never opens with a verdict
    # there; with no extractive answer to fall back on, it declines and says why
    app = _corpus_app(tmp_path)
    model = ScriptedChatModel([AIMessage("Facts: [1]\nAnswer: No")], repeat_last=True)
    result, _, _ = run_guided(app, NAMED, model, llm_agents="auto")
    answer = result.answer
    assert answer.short_answer not in ("Yes", "No")
    assert answer.is_insufficient_context and answer.citations == []
    assert answer.answer_text == (
        "Insufficient context: the model's 'No' does not answer a question that asks no yes or no."
    )


def test_react_follows_the_top_sections_links_before_the_answer_is_written(tmp_path) -> None:
    # a small model answers after one search that found only the film; the bridge step
    # follows the film's links (a visible tool round), and the answer is written from the
    # evidence with the director's section in it, without asking the loop model again
    app = _corpus_app(tmp_path)
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "Big Stone Gap romantic comedy", "top_k": 1}),
            AIMessage("Answer: Big Stone Gap, Virginia [1]."),
            AIMessage(
                "Facts: Trigiani directed the film [1] and is based there [2].\n"
                "Answer: Greenwich Village"
            ),
        ]
    )
    app.agent.reasoner = LLMReasoner(model)
    response = app.agent.execute_agentic_search(NAMED, "test", use_memory=False)

    calls = [(c["tool"], c["arguments"]) for c in response.tool_calls]
    assert calls[:3] == [
        ("rag_search", {"query": "Big Stone Gap romantic comedy", "top_k": 1}),
        ("follow_references", {"source_id": "Big_Stone_Gap_film"}),
        ("next_hop", {"question": NAMED, "source_id": "Big_Stone_Gap_film"}),
    ]
    assert len(model.calls) == 3  # search, answer, then the synthesis from the evidence
    evidence = str(model.calls[-1][-1].content)
    assert "[2] Adriana_Trigiani" in evidence
    assert response.status == "completed"
    assert response.answer.short_answer == "Greenwich Village"
    assert "Adriana_Trigiani" in [c.source_id for c in response.answer.citations]
    thoughts = [s.content for s in response.reasoning_steps if s.step_type == "think"]
    assert any("following the links of Big_Stone_Gap_film" in t for t in thoughts)


def test_the_bridge_step_is_taken_once_and_keeps_the_model_answer_as_fallback(tmp_path) -> None:
    app = _corpus_app(tmp_path)
    # the synthesis call fails (the script is spent): the answer the loop held is used
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "Big Stone Gap romantic comedy", "top_k": 1}),
            AIMessage(
                "Answer: Greenwich Village\nExplanation: The director of the romantic comedy "
                "Big Stone Gap is based in Greenwich Village, New York City [1]."
            ),
        ]
    )
    app.agent.reasoner = LLMReasoner(model)
    response = app.agent.execute_agentic_search(BRIDGE, "test", use_memory=False)
    follows = [c for c in response.tool_calls if c["tool"] == "follow_references"]
    assert len(follows) == 1
    assert response.answer.short_answer == "Greenwich Village"
    assert response.trace["answer_source"] in ("model", "repaired")


def test_a_sentence_answer_needs_only_its_own_words_found(tmp_path) -> None:
    # "filmmaker", "behind" and "works" come from the question and are in no section; the
    # answer's own words ("Greenwich Village") are what must be found in the evidence
    app = _corpus_app(tmp_path)
    model = ScriptedChatModel(
        [
            AIMessage(
                "Facts: [2]\nAnswer: The filmmaker behind Big Stone Gap works in Greenwich Village"
            )
        ]
    )
    question = "In which neighbourhood does the filmmaker behind Big Stone Gap work?"
    result, _, _ = run_guided(app, question, model, llm_agents="auto")
    assert not result.answer.is_insufficient_context
    assert "Greenwich Village" in (result.answer.short_answer or "")
