"""Sentence-level citation checks: retrieved in this run, supported by the cited section."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.messages import AIMessage

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.citations import split_sentences, validate_citations
from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.agents.support import LEXICAL_THRESHOLD, SupportChecker
from sleuth.llm.testing import ScriptedChatModel, tool_call
from sleuth.tools.base import RunContext
from sleuth.types import Chunk
from tests.helpers import STATUTE_SECTIONS, make_service


def _chunk(sid: str) -> Chunk:
    title, text = STATUTE_SECTIONS[sid]
    return Chunk(
        chunk_id=f"{sid}#0",
        source_id=sid,
        doc_id="BNS",
        title_path=["BNS", f"Section {sid.split('_S')[-1]}. {title}"],
        text=text,
        position=0,
    )


@pytest.fixture
def ctx() -> RunContext:
    """Three sections retrieved, numbered 1, 2, 3 in order of retrieval."""
    ctx = RunContext(collection="test")
    ctx.track([_chunk("BNS_S103"), _chunk("BNS_S303"), _chunk("BNS_S101")])
    return ctx


def _answer_call(text: str, citations: list[str] | None = None) -> AIMessage:
    return tool_call(
        "final_answer",
        {"answer_text": text, "citations": citations or [], "is_insufficient_context": False},
    )


def test_numbers_follow_first_retrieval_and_never_change() -> None:
    ctx = RunContext(collection="test")
    ctx.track([_chunk("BNS_S103"), _chunk("BNS_S303")])
    ctx.track([_chunk("BNS_S101"), _chunk("BNS_S103")])  # a later round re-finds S103
    assert ctx.numbers == {"BNS_S103": 1, "BNS_S303": 2, "BNS_S101": 3}


def test_numbered_citations_resolve_and_an_unknown_number_is_removed(ctx: RunContext) -> None:
    draft = AnswerDraft(
        answer_text=(
            "Whoever commits murder shall be punished with death or imprisonment for life [1]. "
            "Culpable homicide is murder if done with the intention of causing death [3]. "
            "Murder also carries a fine [7]."
        )
    )
    report = validate_citations(draft, ctx, SupportChecker())
    answer = report.answer
    assert [(c.source_id, c.number) for c in answer.citations] == [
        ("BNS_S103", 1),
        ("BNS_S101", 3),
    ]
    assert [(r.source_id, r.reason) for r in report.removed] == [
        ("7", "no section numbered 7 was retrieved in this run")
    ]
    assert "[BNS_S103]" in answer.answer_text and "[BNS_S101]" in answer.answer_text
    assert "[7]" not in answer.answer_text and "[1]" not in answer.answer_text
    # the sentence that lost its only citation gets the section that supports it
    assert "Murder also carries a fine [BNS_S103]." in answer.answer_text
    assert [(a.source_id, a.sentence) for a in report.added] == [
        ("BNS_S103", "Murder also carries a fine.")
    ]
    assert answer.ungrounded_sentences == []
    assert report.unsupported == []


def test_a_citation_that_does_not_support_its_sentence_is_flagged(ctx: RunContext) -> None:
    draft = AnswerDraft(
        answer_text=(
            "Whoever commits murder shall be punished with death [1]. "
            "Paris is the capital of France and hosts the Louvre museum [2]."
        )
    )
    report = validate_citations(draft, ctx, SupportChecker())
    [flag] = report.unsupported
    assert flag.source_id == "BNS_S303"
    assert flag.sentence == "Paris is the capital of France and hosts the Louvre museum."
    assert flag.lexical < LEXICAL_THRESHOLD
    assert "does not support" in flag.reason and "lexical" in flag.reason
    assert [c.source_id for c in report.answer.citations] == ["BNS_S103"]
    assert "[BNS_S303]" not in report.answer.answer_text
    assert report.answer.ungrounded_sentences == [flag.sentence]


def test_strict_grounding_drops_sentences_without_supporting_citation(ctx: RunContext) -> None:
    draft = AnswerDraft(
        answer_text=(
            "Whoever commits murder shall be punished with death [BNS_S103]. "
            "Paris is the capital of France [BNS_S303]. Judges are always lenient."
        )
    )
    report = validate_citations(draft, ctx, SupportChecker(), strict_grounding=True)
    assert report.answer.answer_text == (
        "Whoever commits murder shall be punished with death [BNS_S103]."
    )
    assert report.dropped_sentences == [
        "Paris is the capital of France.",
        "Judges are always lenient.",
    ]
    assert report.answer.ungrounded_sentences == []


def test_without_a_checker_only_retrieval_is_checked(ctx: RunContext) -> None:
    draft = AnswerDraft(answer_text="Paris is the capital of France [2]. Also [XYZ_S1].")
    report = validate_citations(draft, ctx)
    assert [c.source_id for c in report.answer.citations] == ["BNS_S303"]
    assert report.answer.citations[0].support is None
    assert [r.source_id for r in report.removed] == ["XYZ_S1"]


class _PairEmbedder:
    """Maps two given texts to the same vector and everything else to an orthogonal one."""

    name = "pair"
    dim = 2

    def __init__(self, *similar: str) -> None:
        self.similar = similar

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = [[1.0, 0.0] if any(s in t for s in self.similar) else [0.0, 1.0] for t in texts]
        return np.asarray(rows, dtype=np.float32)


def test_semantic_support_rescues_a_paraphrase_the_lexical_test_misses() -> None:
    chunk = _chunk("BNS_S303")
    claim = "Taking someone's belongings without permission is an offence"
    checker = SupportChecker(_PairEmbedder(claim, "movable property"))
    support = checker.check(claim, "BNS_S303", [chunk])
    assert support.lexical < LEXICAL_THRESHOLD
    assert support.semantic == pytest.approx(1.0) and support.supported
    unrelated = SupportChecker(_PairEmbedder(claim)).check(claim, "BNS_S303", [chunk])
    assert unrelated.semantic == pytest.approx(0.0) and not unrelated.supported


def test_short_claims_are_not_checked() -> None:
    support = SupportChecker().check("Yes.", "BNS_S303", [_chunk("BNS_S303")])
    assert support.supported and not support.checked


def test_markers_stay_with_their_sentence() -> None:
    text = "A is so. [x]\nB is it [y]. C, see [1, 2]. Section 4. D is here."
    assert split_sentences(text) == [
        ["A is so. [x]"],
        ["B is it [y].", "C, see [1, 2].", "Section 4. D is here."],
    ]


def test_react_run_reports_unsupported_citations_in_the_trace(tmp_path) -> None:
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "murder theft", "top_k": 4}),
            _answer_call(
                "Whoever commits murder shall be punished with death or imprisonment for life "
                "[BNS_S103]. The moon is made of green cheese [BNS_S303]."
            ),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")
    assert [c.source_id for c in response.answer.citations] == ["BNS_S103"]
    assert response.answer.citations[0].support == pytest.approx(1.0)
    [flag] = response.trace["citations_unsupported"]
    assert flag["source_id"] == "BNS_S303"
    assert flag["sentence"] == "The moon is made of green cheese."
    assert response.answer.ungrounded_sentences == ["The moon is made of green cheese."]
    final = response.reasoning_steps[-1]
    assert "unsupported citations: BNS_S303" in (final.reasoning or "")


def test_strict_grounding_per_request(tmp_path) -> None:
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "murder", "top_k": 3}),
            _answer_call(
                "Whoever commits murder shall be punished with death [BNS_S103]. Courts are busy."
            ),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search(
        "What is the punishment for murder?", "test", strict_grounding=True
    )
    assert "Courts are busy" not in response.answer.answer_text
    assert response.trace["sentences_dropped"] == ["Courts are busy."]


def test_heuristic_answers_pass_their_own_support_check(tmp_path) -> None:
    service = make_service(tmp_path)
    for mode in ("react", "guided"):
        response = service.execute_agentic_search(
            "What is the punishment for murder?", "test", mode=mode, strict_grounding=True
        )
        assert response.answer.citations[0].source_id == "BNS_S103", mode
        assert response.trace["citations_unsupported"] == [], mode
        assert response.trace["sentences_dropped"] == [], mode
